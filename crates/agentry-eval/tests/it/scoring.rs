//! The scorer on hand-checked trajectories: the expected actions earn 1; a skipped action, a
//! wrong value, missing information or a premature end earn 0, for the stated reason.

use std::collections::BTreeMap;

use agentry_eval::domain::Domain;
use agentry_eval::message::{Message, Requestor, Role, ToolCall};
use agentry_eval::metrics;
use agentry_eval::results::Simulation;
use agentry_eval::run::agent::BoxFuture;
use agentry_eval::score::{Judge, JudgeError, NlAssertionCheck, RewardInfo, Termination, score};
use agentry_eval::task::RewardType;
use serde_json::{Value, json};

use crate::common::retail;

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.as_object().unwrap().clone(),
        requestor: Requestor::Assistant,
    }
}

/// A conversation in which the agent makes `calls` (run on a real environment for their
/// results) and then says `closing`.
fn conversation(
    domain: &Domain,
    task_id: &str,
    calls: Vec<ToolCall>,
    closing: &str,
) -> Vec<Message> {
    let task = domain.task(task_id).unwrap();
    let mut env = domain.environment();
    env.set_state(task.initial_state.as_ref(), task.message_history())
        .unwrap();
    let mut m: Vec<Message> = task.message_history().to_vec();
    if m.is_empty() {
        m.push(Message::assistant("Hi! How can I help you today?"));
    }
    m.push(Message::user("Please help."));
    if !calls.is_empty() {
        let results: Vec<Message> = calls.iter().map(|c| env.respond(c)).collect();
        m.push(Message::with_calls(Role::Assistant, None, calls));
        m.extend(results);
    }
    m.push(Message::assistant(closing));
    m.push(Message::user("Thanks ###STOP###"));
    m
}

async fn reward(domain: &Domain, task: &str, m: &[Message]) -> RewardInfo {
    score(
        domain,
        domain.task(task).unwrap(),
        m,
        Termination::UserStop,
        None,
    )
    .await
    .unwrap()
}

fn breakdown(r: &RewardInfo, t: RewardType) -> f64 {
    r.reward_breakdown.as_ref().unwrap()[&t]
}

#[tokio::test]
async fn the_expected_action_scores_one_and_a_skipped_or_wrong_one_zero() {
    let mock = Domain::builtin("mock").unwrap();
    let create = |title: &str| {
        call(
            "c1",
            "create_task",
            json!({"user_id": "user_1", "title": title}),
        )
    };

    let right = conversation(
        &mock,
        "create_task_1",
        vec![create("Important Meeting")],
        "Created.",
    );
    let r = reward(&mock, "create_task_1", &right).await;
    assert_eq!(r.reward, 1.0, "{r:?}");
    assert!(r.db_check.as_ref().unwrap().db_match);

    let skipped = conversation(&mock, "create_task_1", vec![], "Created.");
    let r = reward(&mock, "create_task_1", &skipped).await;
    assert_eq!(r.reward, 0.0);
    assert_eq!(breakdown(&r, RewardType::Db), 0.0, "the database is why");

    let wrong = conversation(
        &mock,
        "create_task_1",
        vec![create("Important meeting")],
        "Created.",
    );
    let r = reward(&mock, "create_task_1", &wrong).await;
    assert_eq!(r.reward, 0.0);
    assert!(!r.db_check.as_ref().unwrap().db_match);

    // An extra write the task did not ask for changes the state too.
    let extra = conversation(
        &mock,
        "create_task_1",
        vec![
            create("Important Meeting"),
            call(
                "c2",
                "update_task_status",
                json!({"task_id": "task_1", "status": "completed"}),
            ),
        ],
        "Created.",
    );
    assert_eq!(reward(&mock, "create_task_1", &extra).await.reward, 0.0);
}

#[tokio::test]
async fn assertions_actions_and_communication_gate_as_the_basis_says() {
    let mock = Domain::builtin("mock").unwrap();
    // ENV_ASSERTION: task_2 must exist and be pending.
    let m = conversation(
        &mock,
        "create_task_1_with_env_assertions",
        vec![call(
            "c1",
            "create_task",
            json!({"user_id": "user_1", "title": "Important Meeting"}),
        )],
        "Done.",
    );
    let r = reward(&mock, "create_task_1_with_env_assertions", &m).await;
    assert_eq!(r.reward, 1.0);
    assert_eq!(breakdown(&r, RewardType::EnvAssertion), 1.0);

    // ACTION with compare_args []: any transfer matches; none fails the action check.
    let transfer = call(
        "t1",
        "transfer_to_human_agents",
        json!({"summary": "wants deletion"}),
    );
    let m = conversation(
        &mock,
        "impossible_task_1",
        vec![transfer],
        "Transferring you.",
    );
    assert_eq!(reward(&mock, "impossible_task_1", &m).await.reward, 1.0);
    let m = conversation(&mock, "impossible_task_1", vec![], "I cannot do that.");
    let r = reward(&mock, "impossible_task_1", &m).await;
    assert_eq!(r.reward, 0.0);
    assert_eq!(breakdown(&r, RewardType::Action), 0.0);
    assert_eq!(
        breakdown(&r, RewardType::Db),
        1.0,
        "only the action is missing"
    );

    // COMMUNICATE: the information must appear (case-insensitive, commas ignored).
    let update = call(
        "u1",
        "update_task_status",
        json!({"task_id": "task_2", "status": "completed"}),
    );
    let said = "The agent acknowledged the previous context. The agent confirmed the task status was updated successfully";
    let m = conversation(
        &mock,
        "update_task_with_initialization_data",
        vec![update.clone()],
        said,
    );
    assert_eq!(
        reward(&mock, "update_task_with_initialization_data", &m)
            .await
            .reward,
        1.0
    );
    let m = conversation(
        &mock,
        "update_task_with_initialization_data",
        vec![update],
        "Done.",
    );
    let r = reward(&mock, "update_task_with_initialization_data", &m).await;
    assert_eq!(r.reward, 0.0);
    assert_eq!(breakdown(&r, RewardType::Db), 1.0);
    assert_eq!(
        breakdown(&r, RewardType::Communicate),
        0.0,
        "the missing words are why"
    );

    // A conversation that did not end by a stop token scores 0 whatever it did.
    let m = conversation(
        &mock,
        "create_task_1",
        vec![call(
            "c1",
            "create_task",
            json!({"user_id": "user_1", "title": "Important Meeting"}),
        )],
        "Created.",
    );
    let r = score(
        &mock,
        mock.task("create_task_1").unwrap(),
        &m,
        Termination::MaxSteps,
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.reward, 0.0);
    assert!(
        r.info.unwrap()["note"]
            .as_str()
            .unwrap()
            .contains("max_steps")
    );
}

/// A judge that finds every statement met except those containing `fail`.
struct FixedJudge;
impl Judge for FixedJudge {
    fn judge<'a>(
        &'a self,
        _t: &'a [Message],
        assertions: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<NlAssertionCheck>, JudgeError>> {
        Box::pin(async move {
            Ok(assertions
                .iter()
                .map(|a| NlAssertionCheck {
                    nl_assertion: a.clone(),
                    met: !a.contains("complimented"),
                    justification: "fixed".into(),
                })
                .collect())
        })
    }
}

#[tokio::test]
async fn nl_assertions_are_judged_or_reported_unjudged_never_passed() {
    let Some(retail) = retail() else { return };
    // Retail task 2 scores on DB and two judged statements; with no judge it is unjudged.
    let task = retail.task("2").unwrap();
    let m = conversation(&retail, "2", vec![], "Sorry.");
    let r = score(&retail, task, &m, Termination::UserStop, None)
        .await
        .unwrap();
    assert!(r.unjudged());
    assert_eq!(r.reward, 0.0);
    // With a judge, its verdict counts.
    let mut tasks = Domain::builtin("mock").unwrap();
    let t = tasks
        .tasks
        .iter_mut()
        .find(|t| t.id == "create_task_1_nl_eval")
        .unwrap();
    t.evaluation_criteria.as_mut().unwrap().reward_basis = vec![RewardType::NlAssertion];
    let m = conversation(&tasks, "create_task_1_nl_eval", vec![], "Done.");
    let r = score(
        &tasks,
        tasks.task("create_task_1_nl_eval").unwrap(),
        &m,
        Termination::UserStop,
        Some(&FixedJudge),
    )
    .await
    .unwrap();
    assert!(!r.unjudged());
    assert_eq!(r.reward, 0.0, "'The user is complimented' was not met");
    assert_eq!(r.nl_assertions.as_ref().unwrap().len(), 2);
}

#[tokio::test]
async fn a_retail_exchange_scores_one_done_right_and_zero_with_the_wrong_item() {
    let Some(retail) = retail() else { return };
    let task = retail.task("0").unwrap();
    let expected: Vec<ToolCall> = task
        .evaluation_criteria
        .as_ref()
        .unwrap()
        .actions
        .as_ref()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            call(
                &format!("c{i}"),
                &a.name,
                Value::Object(a.arguments.clone()),
            )
        })
        .collect();
    let m = conversation(
        &retail,
        "0",
        expected.clone(),
        "Your exchange is requested.",
    );
    let r = reward(&retail, "0", &m).await;
    assert_eq!(r.reward, 1.0, "{:?}", r.reward_breakdown);

    let mut wrong = expected;
    let last = wrong.last_mut().unwrap();
    last.arguments["new_item_ids"] = json!(["7706410293", "4983901480"]);
    let m = conversation(&retail, "0", wrong, "Your exchange is requested.");
    let r = reward(&retail, "0", &m).await;
    assert_eq!(r.reward, 0.0);
    assert!(!r.db_check.unwrap().db_match);
}

fn sim(task: &str, trial: usize, reward: Option<f64>) -> Simulation {
    Simulation {
        id: format!("{task}-{trial}"),
        task_id: task.into(),
        trial,
        start_time: String::new(),
        end_time: String::new(),
        duration: 1.0,
        termination_reason: if reward.is_some() {
            Termination::UserStop
        } else {
            Termination::InfrastructureError
        },
        reward_info: reward.map(|r| RewardInfo {
            reward: r,
            ..Default::default()
        }),
        messages: Vec::new(),
        seed: None,
        mode: "half_duplex".into(),
        agent_cost: None,
        user_cost: None,
        info: json!({"agentry": {"turns": [{"latency_s": trial as f64 + 1.0, "retries": 1,
            "prompt_tokens": 10, "completion_tokens": 5, "tokens_estimated": true}]}}),
    }
}

#[test]
fn pass_hat_k_over_crafted_trials_excludes_infrastructure_errors() {
    // Task a: 3 of 4 trials succeed; b: 1 of 4; c: 4 of 4 plus an infrastructure error.
    let mut sims = Vec::new();
    for (t, ok) in [
        ("a", [1.0, 1.0, 0.0, 1.0]),
        ("b", [0.0, 1.0, 0.0, 0.0]),
        ("c", [1.0; 4]),
    ] {
        for (i, r) in ok.iter().enumerate() {
            sims.push(sim(t, i, Some(*r)));
        }
    }
    sims.push(sim("c", 4, None));
    let m = metrics::compute(&sims, 4);
    assert_eq!(m.infrastructure_errors, 1);
    assert_eq!(m.simulations, 13);
    let p: BTreeMap<usize, f64> = m.pass_hat_k.iter().map(|p| (p.k, p.value)).collect();
    // pass^1 = mean(3/4, 1/4, 1); pass^2 = mean(C(3,2)/C(4,2), 0, 1) = mean(0.5, 0, 1).
    assert!((p[&1] - (0.75 + 0.25 + 1.0) / 3.0).abs() < 1e-12);
    assert!((p[&2] - 0.5).abs() < 1e-12);
    assert!((p[&4] - 1.0 / 3.0).abs() < 1e-12);
    assert!((m.avg_reward - 8.0 / 12.0).abs() < 1e-12);
    let a = m.tasks.iter().find(|t| t.task_id == "a").unwrap();
    assert!(
        (a.flip_rate - 2.0 / 3.0).abs() < 1e-12,
        "1,1,0,1 flips twice in three pairs"
    );
    assert_eq!(m.retries, 13);
    assert_eq!(m.tokens.estimated_turns, 13);
}

/// The judge is asked exactly what tau2's judge is asked (system and user prompt), for a
/// conversation with tool calls, quotes and newlines.
#[test]
fn the_judge_prompt_is_tau2s() {
    let Some(python) = crate::common::tau2_python() else {
        return;
    };
    let messages = vec![
        Message::assistant("Hi! How can I help you today?"),
        Message::user("I'd like my order \"#W1\" cancelled,\nplease."),
        Message::with_calls(
            Role::Assistant,
            None,
            vec![call("c1", "get_order_details", json!({"order_id": "#W1"}))],
        ),
        Message::tool(
            "c1",
            Requestor::Assistant,
            "{\"status\": \"pending\"}".into(),
            false,
        ),
        Message::assistant("Done, it's cancelled."),
    ];
    let assertions = vec![
        "The agent cancels the order".to_owned(),
        "The agent says it's done".to_owned(),
        "Quotes \"and\" apostrophes' both".to_owned(),
    ];
    let case = std::env::temp_dir().join(format!("agentry-judge-{}.json", std::process::id()));
    std::fs::write(
        &case,
        json!({"messages": messages, "assertions": assertions}).to_string(),
    )
    .unwrap();
    let theirs = crate::common::tau2_check(&python, &["judge", case.to_str().unwrap()]);
    let (system, user) = agentry_eval::run::judge::prompts(&messages, &assertions);
    assert_eq!(theirs["system"].as_str().unwrap(), system);
    assert_eq!(theirs["user"].as_str().unwrap(), user);
}
