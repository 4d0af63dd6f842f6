//! `agentry serve` replicas on one PostgreSQL database (`store = "postgres://..."`): a
//! replica killed with SIGKILL mid-turn leaves its task to the others, which respect its
//! hold while it lasts, then recover the task (input-required, saying why) and run the next
//! message. Needs PostgreSQL (127.0.0.1:5432, database `test`, or `$AGENTRY_TEST_POSTGRES`);
//! the test command requires it.

use crate::support::{Server, free_port, post_json, serve_config};

fn url() -> String {
    std::env::var("AGENTRY_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The JSON body of an HTTP response.
fn body(response: &str) -> serde_json::Value {
    let start = response.find("\r\n\r\n").map_or(0, |i| i + 4);
    let text = &response[start..];
    let json = text.find('{').map_or(text, |i| &text[i..]);
    let json = json.rfind('}').map_or(json, |i| &json[..=i]);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {response}"))
}

fn rpc(port: u16, method: &str, params: serde_json::Value) -> serde_json::Value {
    let request =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    body(&post_json(port, "/", &request.to_string()))
}

fn state(task: &serde_json::Value) -> String {
    task["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_replica_killed_mid_turn_leaves_its_task_to_another() {
    if no_postgres() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agentry-replicas-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agentry.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nstore = \"{}\"\nlease_seconds = 5\n\n[[agents]]\npath = \"/\"\n\
             builtin = {{ kind = \"conformance\" }}\ndb = \"conformance-{}\"\n",
            url(),
            free_port()
        ),
    )
    .unwrap();
    let (pa, pb) = (free_port(), free_port());
    let mut a = serve_config(&config, pa, &[]);
    let _b = serve_config(&config, pb, &[]);

    // A turn of 10 s on replica A, not waited for.
    let sent = rpc(
        pa,
        "message/send",
        serde_json::json!({
            "message": {"role": "user", "kind": "message", "messageId": "test-resubscribe-message-id-1",
                        "parts": [{"kind": "text", "text": "work for a while"}]},
            "configuration": {"blocking": false}
        }),
    );
    let task = &sent["result"];
    let id = task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    let get = |port| rpc(port, "tasks/get", serde_json::json!({"id": id}));
    // Replica B reads it working (its first save is queued, not awaited: wait for it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while get(pb)["result"].is_null() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Running: submitted or working, as far as A has saved it.
    let running = |t: &serde_json::Value| matches!(state(t).as_str(), "submitted" | "working");
    assert!(running(&get(pb)["result"]));

    // SIGKILL: nothing is saved, no hold released.
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let just_after = get(pb);
    assert!(
        running(&just_after["result"]),
        "A's hold lasts 5 s after its last renewal: {just_after}"
    );
    // Once the hold lapses, B recovers the task, saying why.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let recovered = loop {
        let t = get(pb);
        if state(&t["result"]) == "input-required" {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not recovered after the lease: {t}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    let said = recovered["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("server stopped"), "{recovered}");

    // The next message runs on B.
    let again = rpc(
        pb,
        "message/send",
        serde_json::json!({
            "message": {"role": "user", "kind": "message", "messageId": "go-on-1", "taskId": id,
                        "parts": [{"kind": "text", "text": "go on"}]}
        }),
    );
    assert_eq!(state(&again["result"]), "working", "{again}");
    assert!(again.to_string().contains("echo: go on"), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The documented deployment (docs/DEPLOYMENT.md): `deploy/haproxy.cfg` (HAProxy from
/// Debian) in front of two replicas on one database. Requests alternate between them and
/// every task is found whichever replica answers; a replica killed with SIGKILL costs no
/// request (the balancer sends the refused connection to the other one, then its health
/// check on `/readyz` takes the dead one out).
#[test]
fn a_balancer_in_front_of_two_replicas_loses_no_request_when_one_dies() {
    if no_postgres() {
        return;
    }
    let Some(haproxy) = haproxy() else {
        return;
    };
    let lb = free_port();
    let dir = std::env::temp_dir().join(format!("agentry-balanced-{lb}"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agentry.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nstore = \"{}\"\npublic_url = \"http://127.0.0.1:{lb}\"\n\n\
             [[agents]]\npath = \"/\"\nbuiltin = {{ kind = \"echo\", mode = \"task\" }}\n\
             db = \"balanced-{lb}\"\n",
            url()
        ),
    )
    .unwrap();
    let (pa, pb) = (free_port(), free_port());
    let mut a = serve_config(&config, pa, &[]);
    let _b = serve_config(&config, pb, &[]);
    let balancer = balancer(&haproxy, lb, &[pa, pb]);

    let round = |n: usize| {
        for i in 0..n {
            let text = format!("hello {i}");
            let sent = rpc(
                lb,
                "message/send",
                serde_json::json!({"message": {"role": "user", "kind": "message",
                    "messageId": format!("m-{lb}-{i}-{}", free_port()),
                    "parts": [{"kind": "text", "text": text}]}}),
            );
            assert_eq!(state(&sent["result"]), "completed", "{sent}");
            let id = sent["result"]["id"].as_str().unwrap().to_owned();
            // Asked twice: round robin sends the two to different replicas.
            for _ in 0..2 {
                let got = rpc(lb, "tasks/get", serde_json::json!({"id": id}));
                assert_eq!(state(&got["result"]), "completed", "{got}");
                assert!(got.to_string().contains(&text), "{got}");
            }
        }
    };
    round(6);
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    // At once, before any health check has noticed: no request fails.
    round(6);
    assert!(crate::support::http_get(lb, "/readyz").starts_with("HTTP/1.1 200"));
    drop(balancer);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether PostgreSQL is missing (a skip recorded, or a failure where it is required).
fn no_postgres() -> bool {
    if std::env::var_os("AGENTRY_TEST_POSTGRES").is_none()
        && std::net::TcpStream::connect(("127.0.0.1", 5432)).is_err()
    {
        agentry_testkit::missing::<()>(
            agentry_testkit::Peer::Postgres,
            format!("no PostgreSQL at {}", url()),
        );
        return true;
    }
    false
}

/// HAProxy's path, or `None` (a skip recorded, or a failure where peers are required).
fn haproxy() -> Option<std::path::PathBuf> {
    which("haproxy").ok().or_else(|| {
        agentry_testkit::missing(
            agentry_testkit::Peer::Interop,
            "haproxy is not installed (Debian package haproxy; scripts/test.sh installs it)",
        )
    })
}

/// `deploy/haproxy.cfg` listening on `lb` in front of `replicas` (two or three), returned
/// once its health checks have seen them up.
fn balancer(haproxy: &std::path::Path, lb: u16, replicas: &[u16]) -> Server {
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/haproxy.cfg");
    let mut cmd = std::process::Command::new(haproxy);
    cmd.args(["-db", "-f"])
        .arg(&cfg)
        .env("LISTEN", format!("127.0.0.1:{lb}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (name, port) in ["REPLICA_A", "REPLICA_B", "REPLICA_C"].iter().zip(replicas) {
        cmd.env(name, format!("127.0.0.1:{port}"));
    }
    let server = Server(cmd.spawn().unwrap());
    crate::support::wait_for(lb);
    // The checks run every 500 ms; a replica is up after one (rise 1).
    std::thread::sleep(std::time::Duration::from_millis(1200));
    server
}

/// The path of an installed program.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// The URL of the NATS server the tests use, or `None` (a skip recorded, or a failure where
/// it is required) when nothing listens there.
#[cfg(feature = "nats")]
fn nats() -> Option<String> {
    let url = std::env::var("AGENTRY_TEST_NATS").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    if std::net::TcpStream::connect(url.trim_start_matches("nats://")).is_err() {
        return agentry_testkit::missing(agentry_testkit::Peer::Nats, format!("no NATS at {url}"));
    }
    Some(url)
}

/// The sum of a metric's samples (every label set) on a replica's `/metrics`.
#[cfg(feature = "nats")]
fn metric(port: u16, name: &str) -> u64 {
    crate::support::http_get(port, "/metrics")
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The events of a stream until it ends (at most `secs` seconds).
#[cfg(feature = "nats")]
async fn drain(
    events: impl futures_util::Stream<
        Item = Result<agentry::a2a::model::StreamEvent, agentry::a2a::error::A2aError>,
    >,
    secs: u64,
) -> Vec<agentry::a2a::model::StreamEvent> {
    use futures_util::StreamExt;
    let collected = tokio::time::timeout(
        std::time::Duration::from_secs(secs),
        events.map(|e| e.expect("the stream failed")).collect(),
    );
    collected.await.expect("the stream did not end")
}

/// Sends `m` without waiting for the answer (a front replica queues its turn): the task,
/// `submitted`.
#[cfg(feature = "nats")]
async fn queued(
    client: &agentry::a2a::client::A2aClient,
    m: agentry::a2a::model::Message,
) -> agentry::a2a::model::Task {
    use agentry::a2a::model::{
        MessageSendConfiguration, MessageSendParams, SendMessageResult, TaskState,
    };
    let mut params = MessageSendParams::new(m);
    params.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let SendMessageResult::Task(task) = client.send_message(params).await.unwrap() else {
        panic!("no task")
    };
    assert_eq!(task.status.state, TaskState::Submitted, "{task:?}");
    task
}

/// The final status a stream ended with.
#[cfg(feature = "nats")]
fn final_status(
    events: &[agentry::a2a::model::StreamEvent],
) -> &agentry::a2a::model::TaskStatusUpdateEvent {
    match events.last() {
        Some(agentry::a2a::model::StreamEvent::StatusUpdate(s)) if s.is_final => s,
        _ => panic!("the stream did not end with a final status: {events:?}"),
    }
}

/// The documented deployment at three replicas (docs/DEPLOYMENT.md): HAProxy in front of A
/// and B, which queue turns (`workers = 0`), and C, which works them (`workers = 1`), on
/// PostgreSQL and NATS. A stream opened through the balancer and dropped is taken up again
/// on every replica (two of which do not run its turn). A task sent without waiting runs on
/// C; C is killed with SIGKILL mid-turn; a new worker D takes the turn over and completes
/// it, and streams following the task on A and B go on to that end (never seeing it
/// recovered): the message once in the task, the turn run to its end, counted on D.
#[cfg(feature = "nats")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_streams_and_a_killed_worker_loses_its_turn_to_another() {
    use agentry::a2a::client::{A2aClient, ClientConfig};
    use agentry::a2a::model::{Message, MessageSendParams, Role, StreamEvent, TaskState};
    use futures_util::StreamExt;
    if no_postgres() {
        return;
    }
    let Some(nats) = nats() else {
        return;
    };
    let Some(haproxy) = haproxy() else {
        return;
    };
    let lb = free_port();
    let dir = std::env::temp_dir().join(format!("agentry-three-{lb}"));
    std::fs::create_dir_all(&dir).unwrap();
    // One agentry.toml for all, but for the number of workers.
    let config = |name: &str, workers: usize| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "[server]\nstore = \"{}\"\nbus = \"{nats}\"\npublic_url = \"http://127.0.0.1:{lb}\"\n\
                 lease_seconds = 2\nqueue = true\nworkers = {workers}\nmetrics = true\n\
                 audit = true\naudit_key = \"{AUDIT_KEY}\"\naudit_chain = \"three-{lb}\"\n\n\
                 [[agents]]\npath = \"/\"\nbuiltin = {{ kind = \"conformance\" }}\n\
                 db = \"three-{lb}\"\n",
                url()
            ),
        )
        .unwrap();
        path
    };
    let (front, worker) = (config("front.toml", 0), config("worker.toml", 1));
    let (pa, pb, pc, pd) = (free_port(), free_port(), free_port(), free_port());
    let (_a, _b, mut c) = tokio::task::block_in_place(|| {
        (
            serve_config(&front, pa, &[]),
            serve_config(&front, pb, &[]),
            serve_config(&worker, pc, &[]),
        )
    });
    let _balancer = tokio::task::block_in_place(|| balancer(&haproxy, lb, &[pa, pb, pc]));
    let client = A2aClient::discover(&format!("http://127.0.0.1:{lb}"), ClientConfig::default())
        .await
        .unwrap();
    let direct = |port: u16| {
        A2aClient::new(
            &format!("http://127.0.0.1:{port}/"),
            ClientConfig::default(),
        )
        .unwrap()
    };

    // A 10-second turn streamed through the balancer; the client goes away after its first
    // progress tick, then resubscribes on every replica at once.
    let mut m = Message::text(Role::User, "stream for a while");
    m.message_id = format!("test-resubscribe-message-id-three-stream-{lb}");
    let mut first = Box::pin(client.stream_message(MessageSendParams::new(m)));
    let mut id = None;
    for _ in 0..3 {
        id = Some(match first.next().await.unwrap().unwrap() {
            StreamEvent::Task(t) => t.id,
            StreamEvent::StatusUpdate(s) => s.task_id,
            StreamEvent::ArtifactUpdate(a) => a.task_id,
            StreamEvent::Message(m) => panic!("a message instead of a task: {m:?}"),
        });
    }
    drop(first);
    let id = id.expect("the stream began without the task");
    let streams: Vec<_> = [pa, pb, pc]
        .into_iter()
        .map(|p| tokio::spawn(drain(direct(p).resubscribe(&id), 40)))
        .collect();
    for (stream, replica) in streams.into_iter().zip(["A", "B", "C"]) {
        let events = stream.await.unwrap();
        let end = final_status(&events);
        assert_eq!(
            end.status.state,
            TaskState::Completed,
            "{replica}: {events:?}"
        );
        // The turn's own progress reached this replica, not only the stored task.
        assert!(
            events.iter().any(|e| matches!(
                e,
                StreamEvent::ArtifactUpdate(a) if format!("{:?}", a.artifact).contains("tick 19")
            )),
            "{replica} did not follow the turn: {events:?}"
        );
    }

    // A task sent without waiting: queued by whichever replica gets it, run by C.
    let mut m = Message::text(Role::User, "queue it");
    m.message_id = format!("test-resubscribe-message-id-three-queued-{lb}");
    let task = queued(&client, m).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while client.get_task(&task.id, None).await.unwrap().status.state != TaskState::Working {
        assert!(
            std::time::Instant::now() < deadline,
            "no worker took the turn"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let followers: Vec<_> = [pa, pb]
        .into_iter()
        .map(|p| tokio::spawn(drain(direct(p).resubscribe(&task.id), 60)))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    c.0.kill().unwrap();
    c.0.wait().unwrap();
    let _d = tokio::task::block_in_place(|| serve_config(&worker, pd, &[]));

    // The streams on A and B go on through the takeover (the task is left to the queue, not
    // recovered) and end with the turn D ran.
    for (follower, replica) in followers.into_iter().zip(["A", "B"]) {
        let events = follower.await.unwrap();
        assert_eq!(
            final_status(&events).status.state,
            TaskState::Completed,
            "{replica}: {events:?}"
        );
        assert!(
            !format!("{events:?}").contains("server stopped"),
            "{replica} saw the task recovered: {events:?}"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let done = loop {
        let t = client.get_task(&task.id, None).await.unwrap();
        if t.status.state == TaskState::Completed {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn was not completed by another worker: {t:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let sent = done.history.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(sent, 1, "{done:?}");
    assert!(
        format!("{:?}", done.artifacts).contains("tick 19"),
        "{done:?}"
    );
    // D ran it, taking it over.
    assert_eq!(metric(pd, "a2a_turns_worked_total"), 1);
    assert_eq!(metric(pd, "a2a_task_takeovers_total"), 1);
    // Every replica recorded its decisions in one audit chain in PostgreSQL, which verifies
    // whole: among them the resubscription each of A, B and C served.
    let db = agentry::postgres::Database::connect(&url()).await.unwrap();
    let key = agentry::governance::audit::AuditKey::Hex(AUDIT_KEY.into());
    let trail = agentry::postgres::PgAuditLog::open(&db, &format!("three-{lb}"), &key).unwrap();
    let verified = trail.verify().await.unwrap();
    let records = trail.records(1, 10_000).await.unwrap();
    assert_eq!(records.len() as u64, verified.records);
    let resubscribed = records
        .iter()
        .filter(|r| {
            r.event.task_id.as_deref() == Some(id.as_str())
                && r.event
                    .skill
                    .as_deref()
                    .is_some_and(|s| s.contains("ubscribe"))
        })
        .count();
    assert!(resubscribed >= 3, "{records:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The audit trail's key in the replicated tests' configuration (every replica has it).
#[cfg(feature = "nats")]
const AUDIT_KEY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

/// What the model server of [`a_worker_killed_mid_react_run_resumes_without_calling_its_tool_again`]
/// saw and how it answers.
#[cfg(feature = "nats")]
#[derive(Default)]
struct Model {
    /// Every request's messages.
    requests: std::sync::Mutex<Vec<serde_json::Value>>,
    /// While set, a request that follows the tool's result is not answered.
    hold: std::sync::atomic::AtomicBool,
}

/// An OpenAI-compatible model that calls `counter__bump` once, then (once let go) answers
/// with what the tool said.
#[cfg(feature = "nats")]
async fn completions(
    axum::extract::State(model): axum::extract::State<std::sync::Arc<Model>>,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use serde_json::json;
    let messages = body["messages"].clone();
    model.requests.lock().unwrap().push(messages.clone());
    let tool_said = messages.as_array().and_then(|m| {
        m.iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string())
    });
    let (delta, message, finish) = match tool_said {
        None => {
            let call = json!([{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "counter__bump", "arguments": "{}"}}]);
            (
                json!({"role": "assistant", "tool_calls": call}),
                json!({"role": "assistant", "content": null, "tool_calls": call}),
                "tool_calls",
            )
        }
        Some(said) => {
            while model.hold.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let text = format!("The counter says {said}");
            (
                json!({"role": "assistant", "content": text}),
                json!({"role": "assistant", "content": text}),
                "stop",
            )
        }
    };
    let usage = json!({"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25});
    if body["stream"] == json!(true) {
        let chunks = [
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
            json!({"choices": [], "usage": usage}),
        ];
        let mut s = String::new();
        for c in chunks {
            s.push_str(&format!("data: {c}\n\n"));
        }
        s.push_str("data: [DONE]\n\n");
        return ([("content-type", "text/event-stream")], s).into_response();
    }
    axum::Json(
        json!({"id": "x", "object": "chat.completion", "usage": usage,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}]}),
    )
    .into_response()
}

/// A ReAct agent's queued turn on the replicated deployment (PostgreSQL + NATS; front `A`
/// with `workers = 0`, worker `C`): its model calls a side-effecting MCP tool (served over
/// Streamable HTTP by the test, which counts the calls), and C is killed with SIGKILL while
/// the model is working out the answer after the tool's result. A new worker D takes the
/// turn over from the queue and resumes the run from its checkpoint in PostgreSQL: the tool
/// was called once in all, the model was asked to start the run once and saw the request
/// once, and the answer carries the first call's result.
#[cfg(feature = "nats")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_react_run_resumes_without_calling_its_tool_again() {
    use agentry::a2a::client::{A2aClient, ClientConfig};
    use agentry::a2a::model::{Message, Role, TaskState};
    use agentry::core::tools::{FnTool, ToolOutput, ToolRegistry};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    if no_postgres() {
        return;
    }
    let Some(nats) = nats() else {
        return;
    };
    // The tool, over MCP: each call is counted here, outside the replicas.
    let bumps = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    let counted = bumps.clone();
    tools.add(FnTool::new(
        "bump",
        "Adds one to the counter (a side effect: call it once).",
        serde_json::json!({"type": "object", "properties": {}}),
        move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(ToolOutput::text(format!("bumped to {n}"))) }
        },
    ));
    let mcp = agentry::mcp::ToolServer::new("counter", tools).http_router(None);
    let mcp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_url = format!("http://{}/mcp", mcp_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(mcp_listener, mcp).await });
    let model = Arc::new(Model::default());
    model.hold.store(true, Ordering::SeqCst);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(model.clone());
    let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let model_url = format!("http://{}/v1", model_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(model_listener, app).await });

    let tag = free_port();
    let dir = std::env::temp_dir().join(format!("agentry-react-replicas-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |name: &str, workers: usize| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                r#"
                [server]
                store = "{store}"
                bus = "{nats}"
                lease_seconds = 2
                queue = true
                workers = {workers}
                metrics = true
                [[agents]]
                path = "/"
                db = "react-{tag}"
                [agents.agent]
                name = "bumper"
                max_iterations = 4
                [agents.agent.model]
                provider = "openai"
                base_url = "{model_url}"
                model = "scripted-by-the-test"
                api_key = "unused"
                [[agents.agent.mcp_servers]]
                name = "counter"
                url = "{mcp_url}"
                "#,
                store = url(),
            ),
        )
        .unwrap();
        path
    };
    let (front, worker) = (config("front.toml", 0), config("worker.toml", 1));
    let (pa, pc, pd) = (free_port(), free_port(), free_port());
    let (_a, mut c) = tokio::task::block_in_place(|| {
        (
            serve_config(&front, pa, &[]),
            serve_config(&worker, pc, &[]),
        )
    });
    let client =
        A2aClient::new(&format!("http://127.0.0.1:{pa}/"), ClientConfig::default()).unwrap();
    let task = queued(&client, Message::text(Role::User, "bump the counter")).await;

    // C ran the tool and asks the model for the answer, which is held.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while model.requests.lock().unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker did not reach the model after the tool: {:?} call(s)",
            bumps.load(Ordering::SeqCst)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(bumps.load(Ordering::SeqCst), 1);
    // The step's checkpoint is queued before the model is asked; let it commit.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    c.0.kill().unwrap();
    c.0.wait().unwrap();
    model.hold.store(false, Ordering::SeqCst);
    let _d = tokio::task::block_in_place(|| serve_config(&worker, pd, &[]));

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let done = loop {
        let t = client.get_task(&task.id, None).await.unwrap();
        if t.status.state.is_terminal() {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn was not finished by another worker: {t:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(bumps.load(Ordering::SeqCst), 1, "the tool was called again");
    assert!(
        agentry::core::a2a::task_text(&done).contains("bumped to 1"),
        "{done:?}"
    );
    let requests = model.requests.lock().unwrap().clone();
    let fresh = requests
        .iter()
        .filter(|m| !m.to_string().contains("\"tool\""))
        .count();
    assert_eq!(fresh, 1, "the run was started again: {requests:#?}");
    for m in &requests {
        let asked = m
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user" && m["content"].to_string().contains("bump the"))
            .count();
        assert_eq!(asked, 1, "the model saw the request {asked} times: {m}");
    }
    assert_eq!(metric(pd, "a2a_turns_worked_total"), 1);
    assert_eq!(metric(pd, "a2a_task_takeovers_total"), 1);
    // NATS and PostgreSQL were there throughout: no bus or store errors on D.
    let metrics = crate::support::http_get(pd, "/metrics");
    assert!(metrics.contains("a2a_bus_errors_total{"), "{metrics}");
    assert_eq!(metric(pd, "a2a_bus_errors_total"), 0, "{metrics}");
    assert!(
        metrics.contains("a2a_store_write_errors_total{"),
        "{metrics}"
    );
    assert_eq!(metric(pd, "a2a_store_write_errors_total"), 0, "{metrics}");
    let _ = std::fs::remove_dir_all(&dir);
}
