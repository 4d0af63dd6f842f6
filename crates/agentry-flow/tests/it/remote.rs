//! Steps on remote A2A agents: transparent use, fallback to a local implementation when the
//! remote is down (with a circuit breaker), and cancellation reaching the remote task.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentry_a2a::model::*;
use agentry_a2a::server::{
    A2aServer, AgentExecutor, AgentService, EventSink, ExecutorError as ServerError, RequestContext,
};
use agentry_a2a::store::{MemoryStore, TaskStore};
use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_flow::*;
use serde_json::json;

/// A remote agent that upper-cases, or waits until canceled when told "wait".
struct Upper(Arc<std::sync::atomic::AtomicBool>);
impl AgentExecutor for Upper {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ServerError> {
        let text = ctx.message.text_content();
        if text == "wait" {
            ev.working(None).await?;
            ctx.canceled().await;
            self.0.store(true, Ordering::SeqCst);
            return Ok(());
        }
        ev.artifact(
            Artifact::new(Some("out"), vec![Part::text(text.to_uppercase())]),
            false,
            true,
        )
        .await?;
        ev.complete(None).await
    }
}

async fn remote(store: Arc<dyn TaskStore>) -> (String, Arc<std::sync::atomic::AtomicBool>) {
    let canceled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let mut card = AgentCard::new("upper", "Upper-cases text", &url);
    card.skills.push(AgentSkill {
        id: "shout".into(),
        name: "Shout".into(),
        description: "upper-case".into(),
        tags: vec![],
        examples: vec![],
        input_modes: None,
        output_modes: None,
        security: vec![],
    });
    let svc = AgentService::new(card, Upper(canceled.clone()), store);
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    (url, canceled)
}

struct LocalUpper(AtomicUsize);
impl AgentHandle for LocalUpper {
    fn name(&self) -> String {
        "upper".into()
    }
    fn description(&self) -> String {
        "local upper".into()
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        single(async move {
            Ok(Reply {
                text: format!("local:{}", ask.text.to_uppercase()),
                ..Default::default()
            })
        })
    }
}

fn wf(yaml: &str) -> Workflow {
    serde_yaml::from_str(yaml).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_agents_by_name_or_url_and_skills_from_their_cards() {
    let (url, _) = remote(Arc::new(MemoryStore::default())).await;
    let mut reg = AgentRegistry::new(Mode::A2a);
    reg.add_remote("upper", &url, "Upper-cases text", vec!["shout".into()]);
    let w = wf(&format!(
        "name: r\nsteps:\n  - {{id: a, agent: upper, skill: shout, input: hello}}\n  - {{id: b, agent: \"{url}\", depends_on: [a], input: \"${{steps.a.output}} again\"}}\n"
    ));
    let state = Engine::new(Arc::new(reg))
        .run(w, json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(state.status, RunStatus::Completed, "{state:#?}");
    assert_eq!(state.final_output.as_deref(), Some("HELLO AGAIN"));
    assert_eq!(
        state.steps["a"].output.as_ref().unwrap().artifacts[0]
            .name
            .as_deref(),
        Some("out")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_remote_falls_back_to_the_local_agent_and_opens_its_circuit() {
    let dead = {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}/")
    };
    let local = Arc::new(LocalUpper(AtomicUsize::new(0)));
    let mut reg = AgentRegistry::new(Mode::A2a).with_cooldown(Duration::from_secs(60));
    reg.add_local(local.clone());
    reg.add_remote("upper", &dead, "Upper-cases text", vec![]);
    let steps: String = (0..5)
        .map(|i| format!("  - {{id: s{i}, agent: upper, input: x{i}}}\n"))
        .collect();
    let w = wf(&format!("name: f\nmax_parallel: 1\nsteps:\n{steps}"));
    let reg = Arc::new(reg);
    let state = Engine::new(reg.clone())
        .run(w, json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(state.status, RunStatus::Completed);
    assert_eq!(state.steps["s4"].output.as_ref().unwrap().text, "local:X4");
    assert_eq!(
        local.0.load(Ordering::SeqCst),
        5,
        "every step fell back to the local agent"
    );
    assert!(
        reg.breaker_open(&dead),
        "three failures in a row open the circuit"
    );

    // Direct mode never tries the remote.
    let mut direct = AgentRegistry::new(Mode::Direct);
    direct.add_local(local.clone());
    direct.add_remote("upper", "http://127.0.0.1:9/", "", vec![]);
    let w = wf("name: d\nsteps:\n  - {id: a, agent: upper, input: y}\n");
    let state = Engine::new(Arc::new(direct))
        .run(w, json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(state.final_output.as_deref(), Some("local:Y"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canceling_a_run_cancels_the_remote_task() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::default());
    let (url, remote_canceled) = remote(store).await;
    let mut reg = AgentRegistry::new(Mode::A2a);
    reg.add_remote("upper", &url, "", vec![]);
    let w = wf("name: c\nsteps:\n  - {id: a, agent: upper, input: wait}\n");
    let (tx, rx) = tokio::sync::watch::channel(false);
    let (etx, mut erx) = tokio::sync::mpsc::unbounded_channel();
    let engine = Engine::new(Arc::new(reg));
    let run =
        tokio::spawn(async move { engine.run(w, json!({}), Some(etx), Some(rx)).await.unwrap() });
    // Wait until the step runs, then cancel the run.
    while let Some(e) = erx.recv().await {
        if matches!(e, FlowEvent::StepStarted { .. }) {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx.send(true).unwrap();
    let state = run.await.unwrap();
    assert_eq!(state.status, RunStatus::Canceled);
    // The remote task was canceled through tasks/cancel: its agent saw the cancel.
    for _ in 0..100 {
        if remote_canceled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        remote_canceled.load(Ordering::SeqCst),
        "the remote task was canceled"
    );
}

/// A remote agent that records the envelope of every execution.
#[derive(Clone, Default)]
struct Recorder(Arc<std::sync::Mutex<Vec<(String, agentry_a2a::envelope::Envelope)>>>);
impl AgentExecutor for Recorder {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ServerError> {
        let text = ctx.message.text_content();
        self.0.lock().unwrap().push((
            text.clone(),
            ctx.envelope.as_deref().cloned().unwrap_or_default(),
        ));
        ev.complete(Some(ev.agent_text(format!("seen {text}"))))
            .await
    }
}

/// The user request's correlation id reaches every step's agent, each attempt of a step
/// carries its own idempotency key, and a repeated attempt (a run resumed mid-step) is not
/// executed again by the remote agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_carry_the_correlation_id_and_run_once_per_attempt() {
    let rec = Recorder::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let svc = AgentService::new(
        AgentCard::new("recorder", "records", &url),
        rec.clone(),
        Arc::new(MemoryStore::default()),
    );
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    let mut reg = AgentRegistry::new(Mode::A2a);
    reg.add_remote("rec", &url, "records", vec![]);
    let engine = Engine::new(Arc::new(reg));
    let w = wf(
        "name: c\nsteps:\n  - {id: a, agent: rec, input: one}\n  - {id: b, agent: rec, depends_on: [a], input: two}\n",
    );
    let mut state = engine.prepare(w, json!({})).unwrap();
    state.correlation_id = Some("user-request-7".into());
    let run_id = state.run_id.clone();
    let state = engine.execute(state, None, None).await;
    assert_eq!(state.status, RunStatus::Completed, "{state:#?}");
    let seen = rec.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (text, env) in &seen {
        assert_eq!(
            env.correlation_id.as_deref(),
            Some("user-request-7"),
            "{text}"
        );
        let key = env.idempotency_key.as_deref().unwrap();
        assert!(key.starts_with(&run_id) && key.ends_with("/0"), "{key}");
    }
    assert_ne!(seen[0].1.idempotency_key, seen[1].1.idempotency_key);

    // The same attempt asked again (what a resumed run does): the remote's first task comes
    // back, nothing runs twice.
    let remote = agentry_core::a2a::RemoteAgent::connect(&url, Default::default())
        .await
        .unwrap();
    let ask = Ask {
        text: "one".into(),
        context_id: Some(run_id.clone()),
        envelope: Some(seen[0].1.clone()),
        ..Default::default()
    };
    let again = remote.ask(ask).await.unwrap();
    assert_eq!(again.text, "seen one");
    assert_eq!(rec.0.lock().unwrap().len(), 2, "not executed again");
}

/// A step whose remote agent's card requires scopes the user does not hold is refused before
/// any call (the agent never sees it, no retry); the same step for a user holding them runs.
/// Requirements come from the skill's own `security`, else the card's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_beyond_the_users_scopes_is_refused_before_any_call() {
    let rec = Recorder::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let mut card = AgentCard::new("mailer", "drafts and sends mail", &url);
    card.security = vec![[("jwt".to_string(), vec!["mail.draft".to_string()])].into()];
    for (id, scopes) in [("draft", vec![]), ("send", vec!["mail.send".to_string()])] {
        card.skills.push(AgentSkill {
            id: id.into(),
            name: id.into(),
            description: id.into(),
            tags: vec![],
            examples: vec![],
            input_modes: None,
            output_modes: None,
            security: if scopes.is_empty() {
                vec![]
            } else {
                vec![[("jwt".to_string(), scopes)].into()]
            },
        });
    }
    let svc = AgentService::new(card, rec.clone(), Arc::new(MemoryStore::default()));
    tokio::spawn(
        A2aServer::new()
            .agent("/", svc)
            .serve(l, std::future::pending()),
    );
    let mut reg = AgentRegistry::new(Mode::A2a);
    reg.add_remote("mail", &url, "mail", vec!["draft".into(), "send".into()]);
    let reg = Arc::new(reg);
    // The capability registry, as the planner sees it: requirements from the card, and for
    // a user only what they may ask.
    let all = reg.catalog(None).await;
    assert_eq!(all[0].description, "drafts and sends mail");
    assert_eq!(all[0].skills, ["draft", "send"]);
    assert_eq!(all[0].scopes, ["mail.draft"]);
    assert_eq!(
        all[0].skill_scopes,
        [("send".to_string(), vec!["mail.send".to_string()])].into()
    );
    let drafter = reg.catalog(Some(&["mail.draft".to_string()])).await;
    assert_eq!(drafter[0].skills, ["draft"]);
    assert!(drafter[0].skill_scopes.is_empty());
    assert!(reg.catalog(Some(&[])).await.is_empty(), "nothing to offer");
    let engine = Engine::new(reg);
    let run = |skill: &str, scopes: &[&str]| {
        let mut state = engine
            .prepare(
                wf(&format!(
                    "name: m\nsteps:\n  - {{id: s, agent: mail, skill: {skill}, input: hi, retry: {{max: 3, backoff_secs: 0}}}}\n"
                )),
                json!({}),
            )
            .unwrap();
        state.scopes = Some(scopes.iter().map(|s| s.to_string()).collect());
        engine.execute(state, None, None)
    };
    // The card's requirement (draft has none of its own).
    let s = run("draft", &[]).await;
    assert_eq!(s.status, RunStatus::Failed);
    let why = s.steps["s"].error.clone().unwrap();
    assert!(why.contains("mail.draft"), "{why}");
    assert_eq!(s.steps["s"].attempts, 1, "not retried");
    // The skill's own requirement.
    let s = run("send", &["mail.draft"]).await;
    assert!(s.steps["s"].error.clone().unwrap().contains("mail.send"));
    assert!(
        rec.0.lock().unwrap().is_empty(),
        "the agent was never called"
    );
    // Held: it runs.
    assert_eq!(
        run("draft", &["mail.draft"]).await.status,
        RunStatus::Completed
    );
    assert_eq!(
        run("send", &["mail.send"]).await.status,
        RunStatus::Completed
    );
    // Each call named its skill, so the agent held it to that skill's scopes too.
    let skills: Vec<Option<String>> = rec
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, e)| e.skill.clone())
        .collect();
    assert_eq!(skills, [Some("draft".into()), Some("send".into())]);
}

/// Once its TTL is over, a remote's card is revalidated with its ETag: an unchanged card
/// costs a 304 without a body, not a new discovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_card_is_revalidated_with_its_etag() {
    let statuses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let card = AgentCard::new("upper", "upper-cases", &url);
    let svc = AgentService::new(
        card,
        Upper(Default::default()),
        Arc::new(MemoryStore::default()),
    );
    let seen = statuses.clone();
    let router = A2aServer::new()
        .agent("/", svc)
        .router()
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let seen = seen.clone();
                async move {
                    let card = req.uri().path().contains("agent-card");
                    let resp = next.run(req).await;
                    if card {
                        seen.lock().unwrap().push(resp.status().as_u16());
                    }
                    resp
                }
            },
        ));
    tokio::spawn(async move { axum::serve(l, router).await });
    let mut reg = AgentRegistry::new(Mode::A2a).with_card_ttl(Duration::ZERO);
    reg.add_remote("upper", &url, "", vec![]);
    for i in 0..3 {
        let reply = reg.ask("upper", Ask::text(format!("x{i}"))).await.unwrap();
        assert_eq!(reply.text, format!("X{i}"));
    }
    assert_eq!(*statuses.lock().unwrap(), [200, 304, 304]);
}
