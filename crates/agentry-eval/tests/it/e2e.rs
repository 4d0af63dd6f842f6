//! Whole runs over A2A: an agent served by agentry's A2A server that performs each task's
//! expected actions (or gets one wrong), a scripted user, results.json written and then
//! re-scored by tau2's own evaluator, which must give every simulation the same reward.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_a2a::client::Binding;
use agentry_a2a::model::{AgentCard, Part};
use agentry_a2a::server::{
    A2aServer, AgentExecutor, AgentService, EventSink, ExecutorError, RequestContext,
};
use agentry_a2a::store::MemoryStore;
use agentry_a2a::version::ProtocolVersion;
use agentry_eval::domain::Domain;
use agentry_eval::metrics;
use agentry_eval::results::Results;
use agentry_eval::run::agent::{A2aAgent, A2aAgentConfig, ToolExposure};
use agentry_eval::run::sim::Limits;
use agentry_eval::run::user::{ScriptTurn, ScriptedUser};
use agentry_eval::run::{EvalConfig, replay, run};
use agentry_eval::score::Termination;
use agentry_eval::task::Task;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::common::{retail, tau2_check, tau2_python};

/// An agent that knows the answers: told the task by the user's first words (`[task:ID]`), it
/// makes all the task's expected calls in one reply, then says the information the task
/// wants communicated. With `sabotage`, it changes one argument of the last write.
pub(crate) struct Oracle {
    tasks: HashMap<String, Task>,
    sabotage: Option<String>,
    /// Fails the task whose id this is (the agent's own failure).
    pub(crate) fail: Option<String>,
    /// Takes this long over every turn of this task.
    pub(crate) slow: Option<(String, Duration)>,
    /// Does each task's work once: a first turn run again answers without calls.
    pub(crate) once: bool,
    first_turns: Mutex<HashMap<String, usize>>,
    /// context id -> the MCP endpoint the harness named
    #[cfg(feature = "mcp")]
    mcp: Mutex<HashMap<String, String>>,
    /// context id -> (task id, turns taken)
    state: Mutex<HashMap<String, (String, usize)>>,
}

impl Oracle {
    fn reply(&self, context: &str, text: &str) -> String {
        let mut state = self.state.lock().unwrap();
        if let Some(start) = text.find("[task:") {
            let id = text[start + 6..]
                .split(']')
                .next()
                .unwrap_or_default()
                .to_owned();
            // A task's first turn run a second time (in a new context) finds the work done.
            let mut runs = self.first_turns.lock().unwrap();
            let n = runs.entry(id.clone()).or_insert(0);
            *n += 1;
            if self.once && *n > 1 {
                return "That is already done.".into();
            }
            state.insert(context.to_owned(), (id, 0));
        }
        let Some((id, turn)) = state.get_mut(context) else {
            return "I do not know which task this is.".into();
        };
        *turn += 1;
        let task = &self.tasks[id.as_str()];
        let criteria = task.evaluation_criteria.as_ref();
        let actions = criteria.and_then(|c| c.actions.clone()).unwrap_or_default();
        if *turn == 1 && !actions.is_empty() {
            let mut calls: Vec<Value> = actions
                .iter()
                .filter(|a| a.requestor == agentry_eval::message::Requestor::Assistant)
                .map(|a| json!({"tool_call": {"name": a.name, "arguments": a.arguments}}))
                .collect();
            if self.sabotage.as_deref() == Some(id.as_str())
                && let Some(last) = calls.last_mut()
            {
                let args = last["tool_call"]["arguments"].as_object_mut().unwrap();
                if let Some((_, v)) = args
                    .iter_mut()
                    .find(|(k, _)| k.ends_with("_id") || k.ends_with("ids"))
                {
                    *v = match v {
                        Value::Array(_) => json!(["0000000000"]),
                        _ => json!("#W0000000"),
                    };
                }
            }
            return format!(
                "Let me do that.\n```json\n{}\n```",
                json!({"tool_calls": calls})
            );
        }
        let info = criteria
            .and_then(|c| c.communicate_info.clone())
            .unwrap_or_default();
        format!("All done. {}", info.join(". "))
    }
}

impl AgentExecutor for Oracle {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let reply = self.reply(&ctx.context_id, &ctx.message.text_content());
        let task = self.task_of(&ctx.context_id);
        if let Some((slow, wait)) = &self.slow
            && task.as_deref() == Some(slow.as_str())
        {
            tokio::time::sleep(*wait).await;
        }
        if task.is_some() && task == self.fail {
            return events
                .fail(Some(events.agent_text("I cannot handle this one.")))
                .await;
        }
        // Given an MCP endpoint, it makes its calls there during the turn, then speaks.
        #[cfg(feature = "mcp")]
        {
            let text = ctx.message.text_content();
            if let Some(i) = text.find("<mcp_server>") {
                let url = text[i + 12..]
                    .split("</mcp_server>")
                    .next()
                    .unwrap_or_default();
                self.mcp
                    .lock()
                    .unwrap()
                    .insert(ctx.context_id.clone(), url.to_owned());
            }
            let url = self.mcp.lock().unwrap().get(&ctx.context_id).cloned();
            if let (Some(url), Some(calls)) = (url, fenced_calls(&reply)) {
                let client = agentry_mcp::McpClient::connect(
                    agentry_mcp::McpServerSpec::http("tau2", &url),
                    &agentry_mcp::LaunchPolicy::default(),
                )
                .await
                .map_err(|e| ExecutorError::Failed(e.to_string()))?;
                for c in &calls {
                    let args = c["arguments"].as_object().cloned().unwrap_or_default();
                    // A tool that raises is an MCP tool error; the oracle goes on, as tau2's
                    // expected actions do.
                    let _ = client.call(c["name"].as_str().unwrap(), args).await;
                }
                let closing = self.reply(&ctx.context_id, "");
                return events.complete(Some(events.agent_text(closing))).await;
            }
        }
        // Given the tools as data, it calls them with a data part (and no JSON in its text).
        let data_mode = ctx.message.parts.iter().any(|p| {
            matches!(p, Part::Data(d) if d.data.contains_key("tools") || d.data.contains_key("tool_results"))
        });
        if data_mode && let Some(calls) = fenced_calls(&reply) {
            let data = json!({"tool_calls": calls}).as_object().unwrap().clone();
            let parts = vec![Part::text("Calling the tools."), Part::data(data)];
            return events.complete(Some(events.agent_message(parts))).await;
        }
        events.complete(Some(events.agent_text(reply))).await
    }
}

impl Oracle {
    pub(crate) fn new(domain: &Domain, sabotage: Option<&str>) -> Oracle {
        Oracle {
            tasks: domain
                .tasks
                .iter()
                .map(|t| (t.id.clone(), t.clone()))
                .collect(),
            sabotage: sabotage.map(str::to_owned),
            fail: None,
            slow: None,
            once: false,
            first_turns: Mutex::new(HashMap::new()),
            #[cfg(feature = "mcp")]
            mcp: Mutex::new(HashMap::new()),
            state: Mutex::new(HashMap::new()),
        }
    }

    fn task_of(&self, context: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .get(context)
            .map(|(t, _)| t.clone())
    }
}

/// The calls of a reply the oracle wrote with a fenced `{"tool_calls": [{"tool_call": …}]}`.
fn fenced_calls(reply: &str) -> Option<Vec<Value>> {
    let start = reply.find("```json\n")? + 8;
    let end = reply.rfind("\n```")?;
    let v: Value = serde_json::from_str(&reply[start..end]).ok()?;
    Some(
        v["tool_calls"]
            .as_array()?
            .iter()
            .map(|c| c["tool_call"].clone())
            .collect(),
    )
}

pub(crate) struct Served {
    pub(crate) base: String,
    _stop: oneshot::Sender<()>,
}

async fn serve_oracle(domain: &Domain, sabotage: Option<&str>) -> Served {
    serve(Oracle::new(domain, sabotage)).await
}

/// Serves `oracle` on agentry's A2A server (both generations, both bindings).
pub(crate) async fn serve(oracle: Oracle) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut card = AgentCard::new(
        "oracle",
        "Performs each tau2 task's expected actions.",
        &base,
    );
    card.capabilities.streaming = Some(true);
    let svc = AgentService::new(card, oracle, Arc::new(MemoryStore::default()));
    let server = A2aServer::new().agent("/", svc);
    let (stop, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        server
            .serve(listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Served { base, _stop: stop }
}

/// The user says which task it is, dismisses its notification where the task has one
/// (mock's user tools), and stops when the script ends.
pub(crate) fn script(tasks: &[Task]) -> ScriptedUser {
    ScriptedUser::new(
        tasks
            .iter()
            .map(|t| {
                let mut turns = Vec::new();
                if t.id == "update_task_with_user_tools" {
                    turns.push(
                        serde_json::from_value::<ScriptTurn>(json!({"tool_calls": [
                            {"name": "dismiss_notification", "arguments": {"notification_id": "notif_1"}}]}))
                        .unwrap(),
                    );
                }
                turns.push(ScriptTurn::Say(format!("[task:{}] Hello, I need help with this.", t.id)));
                turns.push(ScriptTurn::Say("Thanks.".into()));
                (t.id.clone(), turns)
            })
            .collect(),
    )
}

async fn evaluate(
    domain: Domain,
    tasks: Vec<Task>,
    sabotage: Option<&str>,
    protocol: Option<ProtocolVersion>,
    binding: Binding,
    stream: bool,
    dir: &std::path::Path,
) -> Results {
    let served = serve_oracle(&domain, sabotage).await;
    let agent = A2aAgent::connect(A2aAgentConfig {
        endpoint: served.base.clone(),
        timeout: Duration::from_secs(30),
        stream: Some(stream),
        binding,
        protocol,
        ..Default::default()
    })
    .await
    .unwrap();
    let users = Arc::new(script(&tasks));
    let cfg = EvalConfig {
        domain,
        tasks,
        trials: 2,
        concurrency: 4,
        limits: Limits::default(),
        max_retries: 1,
        seed: 300,
        save_to: Some(dir.to_owned()),
    };
    run(cfg, Arc::new(agent), users, None, |_| {})
        .await
        .unwrap()
}

fn rewards(r: &Results) -> HashMap<String, f64> {
    r.simulations
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                s.reward_info.as_ref().map_or(0.0, |x| x.reward),
            )
        })
        .collect()
}

pub(crate) fn by_task(r: &Results) -> HashMap<String, Vec<f64>> {
    let mut out: HashMap<String, Vec<f64>> = HashMap::new();
    for s in &r.simulations {
        out.entry(s.task_id.clone())
            .or_default()
            .push(s.reward_info.as_ref().map_or(-1.0, |x| x.reward));
    }
    out
}

/// A scratch folder for one test: removed when it passes, kept when it fails.
pub(crate) fn tempdir(name: &str) -> agentry_testkit::Scratch {
    agentry_testkit::Scratch::new(&format!("eval-{name}"))
}

pub(crate) fn assert_tau2_agrees(dir: &std::path::Path, ours: &Results) {
    let Some(python) = tau2_python() else { return };
    // The metrics `tau2 view` shows for the file: average reward, pass^k, infra errors.
    let file = dir.join("results.json");
    let theirs = tau2_check(&python, &["metrics", file.to_str().unwrap()]);
    let trials = ours.info["num_trials"].as_u64().unwrap() as usize;
    let m = agentry_eval::metrics::compute(&ours.simulations, trials);
    assert!((theirs["avg_reward"].as_f64().unwrap() - m.avg_reward).abs() < 1e-9);
    assert_eq!(theirs["infra_error_count"], m.infrastructure_errors);
    assert_eq!(
        theirs["pass_hat_ks"].as_object().unwrap().len(),
        m.pass_hat_k.len()
    );
    for p in &m.pass_hat_k {
        let t = theirs["pass_hat_ks"][p.k.to_string()].as_f64().unwrap();
        assert!(
            (t - p.value).abs() < 1e-9,
            "pass^{}: tau2 {t}, agentry {}",
            p.k,
            p.value
        );
    }
    let theirs = tau2_check(
        &python,
        &["rescore", dir.join("results.json").to_str().unwrap()],
    );
    let ours = rewards(ours);
    assert_eq!(theirs.as_object().unwrap().len(), ours.len());
    for (id, r) in &ours {
        assert_eq!(
            theirs[id].as_f64(),
            Some(*r),
            "simulation {id}: agentry scored {r}, tau2 {}",
            theirs[id]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mock_domain_over_a2a_v1_streaming_scores_as_tau2_scores_it() {
    let domain = Domain::builtin("mock").unwrap();
    let tasks = domain.select(&[], None, None).unwrap();
    assert_eq!(tasks.len(), 10);
    let dir = tempdir("mock");
    let results = evaluate(
        domain,
        tasks,
        Some("update_task_1"),
        None,
        Binding::JsonRpc,
        true,
        &dir,
    )
    .await;
    assert_eq!(results.simulations.len(), 20);
    let per_task = by_task(&results);
    for (task, rewards) in &per_task {
        let want = match task.as_str() {
            // Sabotaged: the wrong task's status changed.
            "update_task_1" => 0.0,
            // tau2's own task bug: gold replays only the agent's action, so the user's
            // dismissed notification differs from gold whatever the agent does.
            "update_task_with_user_tools" => 0.0,
            // The task has no expected actions, only an assertion the oracle cannot see.
            "update_task_with_history_and_env_assertions" => 0.0,
            _ => 1.0,
        };
        assert_eq!(rewards, &vec![want, want], "task {task}");
    }
    for s in &results.simulations {
        assert_eq!(s.termination_reason, Termination::UserStop);
        // A conversation starts with tau2's greeting, or with the task's own history.
        if !s.task_id.contains("history") {
            assert_eq!(s.messages[0].text(), "Hi! How can I help you today?");
        }
    }
    let m = metrics::compute(&results.simulations, 2);
    assert_eq!(m.pass_hat_k.len(), 2);
    assert!((m.pass_hat_k[0].value - 0.7).abs() < 1e-9);
    assert!(
        m.time_to_first_event.count > 0,
        "streamed turns are timed to their first event"
    );
    assert!(m.tokens.estimated_turns > 0 && m.tokens.reported_turns == 0);
    // The run is resumable: a second run over the same folder has nothing left to do.
    let again = Results::load(&dir.join("results.json")).unwrap();
    assert_eq!(again.simulations.len(), 20);
    assert_tau2_agrees(&dir, &results);

    // Replayed offline (no agent, no user), the recording scores exactly as it did.
    let mock = Domain::builtin("mock").unwrap();
    let replayed = replay::replay(&again, &mock).await.unwrap();
    assert_eq!(replayed.simulations.len(), 20);
    assert!(replay::differences(&again, &replayed).is_empty());
    // A recording that was changed does not: the create_task calls now name another title.
    let mut tampered = again.clone();
    for s in &mut tampered.simulations {
        for m in &mut s.messages {
            for c in m.tool_calls.iter_mut().flatten() {
                if c.name == "create_task" {
                    c.arguments.insert("title".into(), json!("Something else"));
                }
            }
        }
    }
    let diff = replay::differences(&tampered, &replay::replay(&tampered, &mock).await.unwrap());
    let changed: std::collections::BTreeSet<&str> = diff.iter().map(|d| d.0.as_str()).collect();
    assert!(changed.contains("create_task_1"), "{diff:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retail_tasks_over_a2a_v03_and_rest_score_as_tau2_scores_them() {
    let Some(domain) = retail() else { return };
    let ids: Vec<String> = ["0", "5", "11", "15", "17", "22", "30", "33", "35"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let tasks = domain.select(&ids, None, None).unwrap();
    let dir = tempdir("retail03");
    let results = evaluate(
        domain.clone(),
        tasks.clone(),
        Some("15"),
        Some(ProtocolVersion::V0_3),
        Binding::JsonRpc,
        false,
        &dir,
    )
    .await;
    let per_task = by_task(&results);
    for (task, rewards) in &per_task {
        let want = if task == "15" { 0.0 } else { 1.0 };
        assert_eq!(rewards, &vec![want, want], "task {task}");
    }
    assert_tau2_agrees(&dir, &results);

    let dir = tempdir("retailrest");
    let results = evaluate(
        domain,
        tasks[..3].to_vec(),
        None,
        Some(ProtocolVersion::V1_0),
        Binding::HttpJson,
        false,
        &dir,
    )
    .await;
    assert!(
        results
            .simulations
            .iter()
            .all(|s| s.reward_info.as_ref().unwrap().reward == 1.0)
    );
    assert!(
        results.info["agent_info"]["protocol"]
            .as_str()
            .unwrap()
            .contains("HTTP+JSON")
    );
}

/// The same oracle on the official Python SDK (a2a-sdk 1.3.0), answering with artifacts.
async fn sdk_agent(tasks_file: &std::path::Path) -> Option<(tokio::process::Child, String)> {
    let python = agentry_testkit::require_path(
        agentry_testkit::Peer::Interop,
        std::env::var_os("AGENTRY_INTEROP1_PYTHON")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| agentry_testkit::repo_root().join(".venv-a2a1/bin/python")),
        "a2a-sdk 1.3.0 is installed into .venv-a2a1 by scripts/test.sh",
    )?;
    let port = agentry_testkit::free_port();
    let child = tokio::process::Command::new(python)
        .arg(
            agentry_testkit::repo_root()
                .join("crates/agentry-eval/tests/interop/tau2_sdk_agent.py"),
        )
        .env("A2A_PORT", port.to_string())
        .env("TAU2_TASKS", tasks_file)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Some((child, format!("http://127.0.0.1:{port}/")))
}

async fn connect_when_up(cfg: A2aAgentConfig) -> A2aAgent {
    for _ in 0..150 {
        if let Ok(a) = A2aAgent::connect(cfg.clone()).await {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the SDK agent did not come up at {}", cfg.endpoint);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_on_the_official_python_sdk_is_evaluated_over_both_generations() {
    let mock = Domain::builtin("mock").unwrap();
    let tasks_file =
        agentry_testkit::repo_root().join("crates/agentry-eval/domains/mock/tasks.json");
    let Some((_child, base)) = sdk_agent(&tasks_file).await else {
        return;
    };
    for (protocol, stream, name) in [
        (Some(ProtocolVersion::V1_0), true, "sdk-v1"),
        (Some(ProtocolVersion::V0_3), false, "sdk-v03"),
    ] {
        let agent = connect_when_up(A2aAgentConfig {
            endpoint: base.clone(),
            timeout: Duration::from_secs(30),
            stream: Some(stream),
            protocol,
            ..Default::default()
        })
        .await;
        let tasks = mock.select(&[], None, None).unwrap();
        let dir = tempdir(name);
        let cfg = EvalConfig {
            domain: mock.clone(),
            tasks: tasks.clone(),
            trials: 1,
            concurrency: 2,
            limits: Limits::default(),
            max_retries: 1,
            seed: 300,
            save_to: Some(dir.to_path_buf()),
        };
        let results = run(cfg, Arc::new(agent), Arc::new(script(&tasks)), None, |_| {})
            .await
            .unwrap();
        let per_task = by_task(&results);
        for (task, rewards) in &per_task {
            let want = match task.as_str() {
                "update_task_with_user_tools" | "update_task_with_history_and_env_assertions" => {
                    0.0
                }
                _ => 1.0,
            };
            assert_eq!(rewards, &vec![want], "{name}: task {task}");
        }
        assert_tau2_agrees(&dir, &results);
    }
    // Some retail tasks, with the same SDK agent told retail's answers.
    let Some(retail) = retail() else { return };
    let tasks_file = agentry_testkit::shared_dir().join("tau2/domains/retail/tasks.json");
    let Some((_child, base)) = sdk_agent(&tasks_file).await else {
        return;
    };
    let agent = connect_when_up(A2aAgentConfig {
        endpoint: base.clone(),
        timeout: Duration::from_secs(30),
        stream: Some(false),
        ..Default::default()
    })
    .await;
    let ids: Vec<String> = ["0", "5", "11", "17", "33"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let tasks = retail.select(&ids, None, None).unwrap();
    let dir = tempdir("sdk-retail");
    let cfg = EvalConfig {
        domain: retail,
        tasks: tasks.clone(),
        trials: 1,
        concurrency: 2,
        limits: Limits::default(),
        max_retries: 1,
        seed: 300,
        save_to: Some(dir.to_path_buf()),
    };
    let results = run(cfg, Arc::new(agent), Arc::new(script(&tasks)), None, |_| {})
        .await
        .unwrap();
    for (task, rewards) in by_task(&results) {
        assert_eq!(rewards, vec![1.0], "retail over the SDK: task {task}");
    }
    assert_tau2_agrees(&dir, &results);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tools_given_as_data_parts_are_called_with_data_parts() {
    let domain = Domain::builtin("mock").unwrap();
    let ids: Vec<String> = ["create_task_1", "update_task_1", "impossible_task_1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let tasks = domain.select(&ids, None, None).unwrap();
    let served = serve_oracle(&domain, None).await;
    let agent = A2aAgent::connect(A2aAgentConfig {
        endpoint: served.base.clone(),
        stream: Some(false),
        tools: ToolExposure::Data,
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempdir("data");
    let cfg = EvalConfig {
        domain,
        tasks: tasks.clone(),
        trials: 1,
        concurrency: 2,
        limits: Limits::default(),
        max_retries: 0,
        seed: 300,
        save_to: Some(dir.to_path_buf()),
    };
    let results = run(cfg, Arc::new(agent), Arc::new(script(&tasks)), None, |_| {})
        .await
        .unwrap();
    for s in &results.simulations {
        assert_eq!(
            s.reward_info.as_ref().unwrap().reward,
            1.0,
            "task {}",
            s.task_id
        );
        let call = s.messages.iter().find(|m| m.is_tool_call()).unwrap();
        // The reply's text had no JSON: the calls came from its data part.
        assert_eq!(
            call.raw_data.as_ref().unwrap()["status"]["message"]["parts"][0]["text"],
            "Calling the tools."
        );
    }
    assert_tau2_agrees(&dir, &results);
}

/// The domain's tools served over MCP by the harness: the agent calls them with an MCP client
/// during its turn, the harness records each call and its result, and the run scores (and is
/// re-scored by tau2) as if the calls had been written.
#[cfg(feature = "mcp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tools_served_over_mcp_are_observed_and_scored() {
    let domain = Domain::builtin("mock").unwrap();
    let tasks = domain.select(&[], None, None).unwrap();
    let served = serve_oracle(&domain, Some("update_task_1")).await;
    let agent = A2aAgent::connect(A2aAgentConfig {
        endpoint: served.base.clone(),
        stream: Some(true),
        tools: ToolExposure::Mcp,
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempdir("mcp");
    let cfg = EvalConfig {
        domain,
        tasks: tasks.clone(),
        trials: 1,
        concurrency: 3,
        limits: Limits::default(),
        max_retries: 0,
        seed: 300,
        save_to: Some(dir.to_path_buf()),
    };
    let results = run(cfg, Arc::new(agent), Arc::new(script(&tasks)), None, |_| {})
        .await
        .unwrap();
    for (task, rewards) in by_task(&results) {
        let want = match task.as_str() {
            "update_task_1"
            | "update_task_with_user_tools"
            | "update_task_with_history_and_env_assertions" => 0.0,
            _ => 1.0,
        };
        assert_eq!(rewards, vec![want], "task {task}");
    }
    let create = results
        .simulations
        .iter()
        .find(|s| s.task_id == "create_task_1")
        .unwrap();
    let call = create.messages.iter().find(|m| m.is_tool_call()).unwrap();
    assert!(
        call.tool_calls.as_ref().unwrap()[0]
            .id
            .starts_with("mcp_call_"),
        "observed over MCP"
    );
    assert_tau2_agrees(&dir, &results);
}
