//! Server behaviour through our client and raw HTTP: lifecycle, streaming, cancel, push,
//! failures of agents.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentry::agents::{Conformance, Echo};
use agentry_a2a::A2aError;
use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::server::{AgentExecutor, EventSink, ExecutorError, RequestContext};
use agentry_a2a::version::ProtocolVersion;
use futures_util::StreamExt;
use serde_json::{Value, json};

use common::user;

fn with_id(text: &str, id: &str) -> Message {
    let mut m = user(text);
    m.message_id = format!("{id}-{}", agentry_a2a::new_id());
    m
}

fn code(e: A2aError) -> i64 {
    match e {
        A2aError::Rpc(r) => r.code,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

async fn client(base: &str) -> A2aClient {
    A2aClient::discover(base, ClientConfig::default())
        .await
        .unwrap()
}

async fn task_of(c: &A2aClient, p: MessageSendParams) -> Task {
    match c.send_message(p).await.unwrap() {
        SendMessageResult::Task(t) => t,
        SendMessageResult::Message(m) => panic!("expected a task, got message {m:?}"),
    }
}

async fn rpc(base: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(base)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn context_id_is_generated_and_kept_across_turns() {
    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let c = client(&s.base).await;
    let t1 = task_of(&c, MessageSendParams::new(user("one"))).await;
    assert!(!t1.context_id.is_empty());
    assert_eq!(t1.state(), TaskState::Working);
    let t2 = task_of(
        &c,
        MessageSendParams::new(user("two").in_task(&t1.id, &t1.context_id)),
    )
    .await;
    assert_eq!(
        (t2.id.as_str(), t2.context_id.as_str()),
        (t1.id.as_str(), t1.context_id.as_str())
    );
    assert_eq!(t2.history.len(), 4);
    assert!(
        t2.history
            .iter()
            .all(|m| m.task_id.as_deref() == Some(t1.id.as_str()))
    );

    // A message naming another context for this task is refused.
    let mut wrong = user("three");
    wrong.task_id = Some(t1.id.clone());
    wrong.context_id = Some("other".into());
    assert_eq!(
        code(
            c.send_message(MessageSendParams::new(wrong))
                .await
                .unwrap_err()
        ),
        -32602
    );
    // A client-chosen context is kept for a new task.
    let mut m = user("mine");
    m.context_id = Some("ctx-42".into());
    assert_eq!(
        task_of(&c, MessageSendParams::new(m)).await.context_id,
        "ctx-42"
    );
}

#[tokio::test]
async fn history_length_is_honoured_on_send_and_get() {
    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let c = client(&s.base).await;
    let mut p = MessageSendParams::new(user("one"));
    p.configuration = Some(MessageSendConfiguration {
        history_length: Some(0),
        ..Default::default()
    });
    let t = task_of(&c, p).await;
    assert!(t.history.is_empty());
    assert_eq!(c.get_task(&t.id, None).await.unwrap().history.len(), 2);
    assert_eq!(c.get_task(&t.id, Some(1)).await.unwrap().history.len(), 1);
}

#[tokio::test]
async fn terminal_tasks_take_no_messages_and_cannot_be_canceled() {
    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let c = client(&s.base).await;
    let t = task_of(
        &c,
        MessageSendParams::new(with_id("x", "tck-complete-task")),
    )
    .await;
    assert_eq!(t.state(), TaskState::Completed);
    let next = user("more").in_task(&t.id, &t.context_id);
    assert_eq!(
        code(
            c.send_message(MessageSendParams::new(next))
                .await
                .unwrap_err()
        ),
        -32004
    );
    assert_eq!(code(c.cancel_task(&t.id).await.unwrap_err()), -32002);
    assert_eq!(code(c.get_task("missing", None).await.unwrap_err()), -32001);
    let r = task_of(&c, MessageSendParams::new(with_id("x", "tck-reject-task"))).await;
    assert_eq!(r.state(), TaskState::Rejected);
}

#[tokio::test]
async fn tck_outcomes() {
    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let c = client(&s.base).await;
    let t = task_of(
        &c,
        MessageSendParams::new(with_id("x", "tck-artifact-data")),
    )
    .await;
    let Part::Data(d) = &t.artifacts[0].parts[0] else {
        panic!()
    };
    assert_eq!(
        Value::Object(d.data.clone()),
        json!({"key": "value", "count": 42})
    );
    let t = task_of(
        &c,
        MessageSendParams::new(with_id("x", "tck-artifact-file")),
    )
    .await;
    let Part::File(f) = &t.artifacts[0].parts[0] else {
        panic!()
    };
    assert_eq!(f.file.content, FileContent::Bytes("dGNr".into()));
    assert_eq!(f.file.name.as_deref(), Some("output.txt"));
    let t = task_of(
        &c,
        MessageSendParams::new(with_id("x", "tck-artifact-text")),
    )
    .await;
    assert_eq!(join_text(&t.artifacts[0].parts), "Generated text content");
    let tasks = async || {
        c.list_tasks(ListTasksParams::default())
            .await
            .unwrap()
            .total_size
    };
    let before = tasks().await;
    let SendMessageResult::Message(m) = c
        .send_message(MessageSendParams::new(with_id("x", "tck-message-response")))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(m.text_content(), "Direct message response");
    // A direct message creates no task, and names none.
    assert_eq!(m.task_id, None, "{m:?}");
    assert_eq!(tasks().await, before);
}

#[tokio::test]
async fn stream_orders_events_and_chunks_artifacts() {
    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let c = client(&s.base).await;
    let evs: Vec<StreamEvent> = c
        .stream_message(MessageSendParams::new(with_id(
            "x",
            "tck-stream-artifact-chunked",
        )))
        .map(Result::unwrap)
        .collect()
        .await;
    assert!(matches!(&evs[0], StreamEvent::Task(t) if t.state() == TaskState::Submitted));
    assert!(
        matches!(&evs[1], StreamEvent::StatusUpdate(s) if s.status.state == TaskState::Working && !s.is_final)
    );
    let (StreamEvent::ArtifactUpdate(a), StreamEvent::ArtifactUpdate(b)) = (&evs[2], &evs[3])
    else {
        panic!("{evs:?}")
    };
    assert_eq!(a.artifact.artifact_id, b.artifact.artifact_id);
    assert_eq!(
        (a.append, b.append, b.last_chunk),
        (None, Some(true), Some(true))
    );
    assert!(
        matches!(&evs[4], StreamEvent::StatusUpdate(s) if s.is_final && s.status.state == TaskState::Completed)
    );
    assert_eq!(evs.len(), 5);
    // The stored task holds the joined chunks.
    let task = c.get_task(&a.task_id, None).await.unwrap();
    assert_eq!(
        join_text(&task.artifacts[0].parts),
        "first chunk \nsecond chunk"
    );
}

/// Emits one status event and then waits to be canceled.
struct WaitsForCancel {
    canceled_hook: Arc<AtomicBool>,
    /// Set when an event after the cancel was refused (checked by the test: an assertion
    /// here would panic inside the hub, which turns panics into failed tasks).
    refused_after_cancel: Arc<AtomicBool>,
}

impl AgentExecutor for WaitsForCancel {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        ev.working(None).await?;
        ctx.canceled().await;
        // Further events are refused once the task is canceled.
        let after = ev.complete(None).await;
        self.refused_after_cancel.store(
            matches!(after, Err(ExecutorError::TaskClosed(_))),
            Ordering::SeqCst,
        );
        Ok(())
    }

    async fn cancel(&self, _task_id: &str) {
        self.canceled_hook.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn cancel_reaches_the_running_agent_and_open_streams() {
    let hook = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicBool::new(false));
    let s = common::agent_server(
        Echo::card,
        WaitsForCancel {
            canceled_hook: hook.clone(),
            refused_after_cancel: refused.clone(),
        },
    )
    .await;
    let c = client(&s.base).await;
    let mut p = MessageSendParams::new(user("wait"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let t = task_of(&c, p).await;
    let mut sub = Box::pin(c.resubscribe(&t.id));
    let first = sub.next().await.unwrap().unwrap();
    assert!(matches!(first, StreamEvent::Task(_)));
    let canceled = c.cancel_task(&t.id).await.unwrap();
    assert_eq!(canceled.state(), TaskState::Canceled);
    let mut last = None;
    while let Some(ev) = sub.next().await {
        last = Some(ev.unwrap());
    }
    assert!(
        matches!(last, Some(StreamEvent::StatusUpdate(s)) if s.is_final && s.status.state == TaskState::Canceled)
    );
    for _ in 0..100 {
        if hook.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(hook.load(Ordering::SeqCst), "the agent's cancel hook ran");
    for _ in 0..100 {
        if refused.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        refused.load(Ordering::SeqCst),
        "an event after the cancel was refused"
    );
    assert_eq!(
        c.get_task(&t.id, None).await.unwrap().state(),
        TaskState::Canceled
    );
}

#[tokio::test]
async fn resubscribe_racing_completion_still_gets_the_final_event() {
    let s = common::echo_server().await;
    let c = client(&s.base).await;
    for _ in 0..30 {
        let mut p = MessageSendParams::new(user("race"));
        p.configuration = Some(MessageSendConfiguration {
            blocking: Some(false),
            ..Default::default()
        });
        let t = task_of(&c, p).await;
        let evs: Vec<StreamEvent> = c.resubscribe(&t.id).map(Result::unwrap).collect().await;
        // Subscribed in time: the snapshot first. Finished before: the server refuses to
        // stream a finished task and the client ends the stream with its final status.
        assert!(
            matches!(evs.first(), Some(StreamEvent::Task(_))) || evs.len() == 1,
            "{evs:?}"
        );
        // The last event is final and says completed.
        let last = evs.last().unwrap();
        let state = match last {
            StreamEvent::StatusUpdate(s) => s.status.state,
            StreamEvent::Task(t) => t.state(),
            other => panic!("{other:?}"),
        };
        assert!(last.is_final() && state == TaskState::Completed, "{evs:?}");
    }
}

/// A2A 1.0 (STREAM-SUB-003): subscribing to a finished task is UnsupportedOperationError, on
/// JSON-RPC (both generations) and HTTP+JSON.
#[tokio::test]
async fn subscribing_to_a_finished_task_is_refused() {
    let s = common::echo_server().await;
    let c = client(&s.base).await;
    let t = task_of(&c, MessageSendParams::new(user("done"))).await;
    assert_eq!(t.state(), TaskState::Completed);
    let http = reqwest::Client::new();
    for (version, method) in [("0.3", "tasks/resubscribe"), ("1.0", "SubscribeToTask")] {
        let r = http
            .post(&s.base)
            .header("A2A-Version", version)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": t.id}}))
            .send()
            .await
            .unwrap();
        let body = r.text().await.unwrap();
        let v: Value = serde_json::from_str(body.trim_start_matches("data:").trim())
            .unwrap_or_else(|_| panic!("{version}: {body}"));
        assert_eq!(v["error"]["code"], -32004, "{version}: {body}");
    }
    let r = http
        .get(format!("{}tasks/{}:subscribe", s.base, t.id))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert!(
        status.is_client_error() || body.contains("UNSUPPORTED"),
        "{status}: {body}"
    );
    // Our client turns the refusal into the task's final status.
    let evs: Vec<StreamEvent> = c.resubscribe(&t.id).map(Result::unwrap).collect().await;
    assert!(
        matches!(evs.as_slice(), [StreamEvent::StatusUpdate(u)] if u.is_final && u.status.state == TaskState::Completed),
        "{evs:?}"
    );
}

struct Panics;
impl AgentExecutor for Panics {
    async fn execute(&self, ctx: RequestContext, _ev: EventSink) -> Result<(), ExecutorError> {
        if ctx.message.text_content() == "panic" {
            panic!("agent bug");
        }
        Err(ExecutorError::failed("the model is unreachable"))
    }
}

#[tokio::test]
async fn failing_and_panicking_agents_fail_their_task() {
    let s = common::agent_server(Echo::card, Panics).await;
    let c = client(&s.base).await;
    let t = task_of(&c, MessageSendParams::new(user("panic"))).await;
    assert_eq!(t.state(), TaskState::Failed);
    assert!(t.status.message.unwrap().text_content().contains("panic"));
    let t = task_of(&c, MessageSendParams::new(user("err"))).await;
    assert_eq!(t.state(), TaskState::Failed);
    assert_eq!(
        t.status.message.unwrap().text_content(),
        "the model is unreachable"
    );
    // The server still serves.
    assert_eq!(
        c.get_task(&t.id, None).await.unwrap().state(),
        TaskState::Failed
    );
}

/// Emits many events quickly; a subscriber that never reads must not hold it up.
struct Chatty;
impl AgentExecutor for Chatty {
    async fn execute(&self, _ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        ev.working(None).await?;
        let mut a = Artifact::new(Some("log"), vec![Part::text("start")]);
        ev.artifact(a.clone(), false, false).await?;
        for i in 0..2000 {
            a.parts = vec![Part::text(format!("line {i}"))];
            ev.artifact(a.clone(), true, false).await?;
        }
        ev.complete(None).await
    }
}

#[tokio::test]
async fn slow_subscribers_never_block_the_agent() {
    let s = common::agent_server(Echo::card, Chatty).await;
    // Open a stream and do not read it.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream",
        "params": {"message": {"role": "user", "parts": [{"kind": "text", "text": "go"}], "messageId": "m1"}}});
    let resp = reqwest::Client::new()
        .post(&s.base)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    // The agent finishes although nobody reads the stream.
    let c = client(&s.base).await;
    let mut bytes = resp.bytes_stream();
    let mut head = String::new();
    while !head.contains("\n\n") {
        head.push_str(&String::from_utf8_lossy(
            &bytes.next().await.unwrap().unwrap(),
        ));
    }
    let first = head
        .split("\n\n")
        .next()
        .unwrap()
        .trim_start_matches("data: ");
    let first: Value = serde_json::from_str(first).unwrap();
    let task_id = first["result"]["id"].as_str().unwrap().to_owned();
    let mut done = false;
    for _ in 0..500 {
        if c.get_task(&task_id, Some(0)).await.unwrap().state() == TaskState::Completed {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(done, "the agent was held up by a slow subscriber");
    // The late reader skips ahead to a snapshot and still gets the final event.
    let mut rest = String::new();
    while let Some(chunk) = bytes.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let events = rest.matches("data: ").count();
    assert!(
        events < 2000,
        "lagging subscriber got every event ({events})"
    );
    assert!(rest.contains("\"final\":true"), "no final event");
}

#[tokio::test]
async fn extended_card_needs_configuration_and_credentials() {
    let s = common::echo_server().await;
    let r = rpc(
        &s.base,
        json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32007);

    let s = common::conformance_server(Arc::new(agentry_a2a::store::MemoryStore::default())).await;
    let anon = client(&s.base).await;
    assert!(anon.card().unwrap().supports_authenticated_extended_card == Some(true));
    assert!(matches!(
        anon.extended_card().await.unwrap_err(),
        A2aError::Unauthorized { .. }
    ));
    let authed = A2aClient::discover(
        &s.base,
        ClientConfig {
            auth: agentry_a2a::client::Auth::Bearer(common::TOKEN.into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        authed
            .extended_card()
            .await
            .unwrap()
            .description
            .ends_with("(extended)")
    );
}

#[tokio::test]
async fn push_notifications_carry_token_and_bearer_credentials() {
    let (hook_url, seen) = common::webhook().await;

    let s = common::echo_server().await;
    // The body follows the version the config was made in: v0.3's Task, v1.0's StreamResponse.
    for version in [ProtocolVersion::V0_3, ProtocolVersion::V1_0] {
        seen.lock().await.clear();
        let c = client(&s.base).await.with_version(version);
        let mut p = MessageSendParams::new(user("notify me"));
        p.configuration = Some(MessageSendConfiguration {
            push_notification_config: Some(PushNotificationConfig {
                id: None,
                url: hook_url.clone(),
                token: Some("tok".into()),
                authentication: Some(PushNotificationAuthenticationInfo {
                    schemes: vec!["Bearer".into()],
                    credentials: Some("cred".into()),
                }),
                body_version: None,
            }),
            ..Default::default()
        });
        let t = task_of(&c, p).await;
        let (task_of_body, done): (fn(&Value) -> &Value, &str) = match version {
            ProtocolVersion::V0_3 => (|b| b, "completed"),
            ProtocolVersion::V1_0 => (|b| &b["task"], "TASK_STATE_COMPLETED"),
        };
        let mut states = Vec::new();
        for _ in 0..200 {
            states = seen
                .lock()
                .await
                .iter()
                .map(|(_, b)| {
                    task_of_body(b)["status"]["state"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            if states.iter().any(|s| s == done) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(states.contains(&done.to_owned()), "{version}: {states:?}");
        let seen = seen.lock().await;
        let (headers, body) = &seen[0];
        assert_eq!(headers["x-a2a-notification-token"], "tok");
        assert_eq!(headers["authorization"], "Bearer cred");
        assert_eq!(task_of_body(body)["id"], json!(t.id));
        // The config given with the message is listed under the task's id, as sent.
        let listed = c.list_push_configs(&t.id).await.unwrap();
        let cfg = &listed[0].push_notification_config;
        assert_eq!(cfg.id.as_deref(), Some(t.id.as_str()));
        assert_eq!(cfg.body_version, None, "bookkeeping never goes out");
        // Fetched without an id, or as "default" (TCK 0.3 asks so after a set without an id).
        for asked in [None, Some("default")] {
            let got = c.get_push_config(&t.id, asked).await.unwrap();
            assert_eq!(
                got.push_notification_config.id.as_deref(),
                Some(t.id.as_str()),
                "{version}: {asked:?}"
            );
        }
    }
}

#[tokio::test]
async fn push_to_private_targets_is_refused_by_default() {
    let (listener, url) = common::bind().await;
    let svc = agentry_a2a::server::AgentService::new(
        Echo::card(&url),
        Echo::default(),
        Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let s = common::serve_on(listener, svc, agentry_a2a::server::ServerConfig::default()).await;
    let c = client(&s.base).await;
    let t = task_of(&c, MessageSendParams::new(user("x"))).await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/",
        "http://[::1]/",
    ] {
        let cfg = PushNotificationConfig {
            id: None,
            url: url.into(),
            token: None,
            authentication: None,
            body_version: None,
        };
        assert_eq!(
            code(c.set_push_config(&t.id, cfg).await.unwrap_err()),
            -32602,
            "{url}"
        );
    }
}

#[tokio::test]
async fn conformance_resubscribe_task_keeps_emitting() {
    let (listener, url) = common::bind().await;
    let agent = Conformance {
        resubscribe_window: Duration::from_secs(2),
    };
    let svc = agentry_a2a::server::AgentService::new(
        Conformance::card(&url),
        agent,
        Arc::new(agentry_a2a::store::MemoryStore::default()),
    );
    let s = common::serve_on(listener, svc, common::loopback_push()).await;
    let c = client(&s.base).await;
    let mut p = MessageSendParams::new(with_id("x", "test-resubscribe-message-id"));
    p.configuration = Some(MessageSendConfiguration {
        blocking: Some(false),
        ..Default::default()
    });
    let t = task_of(&c, p).await;
    let evs: Vec<StreamEvent> = c.resubscribe(&t.id).map(Result::unwrap).collect().await;
    let chunks = evs
        .iter()
        .filter(|e| matches!(e, StreamEvent::ArtifactUpdate(_)))
        .count();
    assert!(chunks >= 2, "{evs:?}");
    assert!(evs.last().unwrap().is_final());
}

/// Ends its first turn leaving the task `working` (it waits for more, unasked), completes on
/// the second message.
struct Parks;
impl AgentExecutor for Parks {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        if ctx.previous.is_none() {
            ev.working(None).await?;
            ev.end_turn_working(Some(ev.agent_text("noted; send the rest")))
                .await
        } else {
            ev.complete(Some(
                ev.agent_text(format!("got: {}", ctx.message.text_content())),
            ))
            .await
        }
    }
}

#[tokio::test]
async fn a_turn_can_end_with_the_task_still_working() {
    let s = common::agent_server(Echo::card, Parks).await;
    let c = client(&s.base).await;
    // Blocking send: answers when the turn ends, the task still working.
    let t = task_of(&c, MessageSendParams::new(user("part one"))).await;
    assert_eq!(t.state(), TaskState::Working);
    // Not taken for an orphan once nobody holds the task (before, a working task with no
    // running turn was "recovered" to input-required on the next read).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let got = c.get_task(&t.id, None).await.unwrap();
    assert_eq!(got.state(), TaskState::Working);
    assert_eq!(
        got.status.message.as_ref().map(|m| m.text_content()),
        Some("noted; send the rest".into())
    );
    // Streamed, the turn's last event is that working status, marked final.
    let next = user("part two").in_task(&t.id, &t.context_id);
    let events: Vec<StreamEvent> = c
        .stream_message(MessageSendParams::new(next))
        .map(|e| e.unwrap())
        .collect()
        .await;
    let last = events.last().unwrap();
    assert!(last.is_final(), "{events:?}");
    let done = c.get_task(&t.id, None).await.unwrap();
    assert_eq!(done.state(), TaskState::Completed);
    assert_eq!(common::status_text(&done), "got: part two");
    let users = done.history.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(users, 2, "{:?}", done.history);

    // A parked task can be canceled.
    let t = task_of(&c, MessageSendParams::new(user("again"))).await;
    assert_eq!(t.state(), TaskState::Working);
    assert_eq!(
        c.cancel_task(&t.id).await.unwrap().state(),
        TaskState::Canceled
    );
}

/// Asks for input, then takes a while to return: a client that answers the moment the
/// question reaches it is served (before, it was refused with "still working on the previous
/// message" until the agent's function returned).
struct SlowToReturn;
impl AgentExecutor for SlowToReturn {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        if ctx.previous.is_none() {
            ev.input_required(Some(ev.agent_text("which one?"))).await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(())
        } else {
            ev.complete(Some(ev.agent_text("thanks"))).await
        }
    }
}

#[tokio::test]
async fn an_answer_sent_at_once_waits_for_the_previous_turn_to_return() {
    let s = common::agent_server(Echo::card, SlowToReturn).await;
    let c = client(&s.base).await;
    let t = task_of(&c, MessageSendParams::new(user("help"))).await;
    assert_eq!(t.state(), TaskState::InputRequired);
    let answer = user("that one").in_task(&t.id, &t.context_id);
    let t2 = task_of(&c, MessageSendParams::new(answer)).await;
    assert_eq!(t2.state(), TaskState::Completed);
}

/// Says it works, waits for the gate, then completes; counts its runs and tells its task.
#[derive(Clone)]
struct Gated {
    gate: Arc<tokio::sync::Semaphore>,
    task: Arc<std::sync::Mutex<Option<String>>>,
    runs: Arc<std::sync::atomic::AtomicUsize>,
}

impl AgentExecutor for Gated {
    async fn execute(&self, ctx: RequestContext, ev: EventSink) -> Result<(), ExecutorError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        *self.task.lock().unwrap() = Some(ctx.task_id.clone());
        ev.working(None).await?;
        self.gate.acquire().await.unwrap().forget();
        ev.complete(Some(ev.agent_text("done"))).await
    }
}

/// A plain send drives its turn's agent while it waits for the answer: when its client
/// gives up first, the rest of the turn still runs, once, to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_client_gives_up_still_runs_its_turn_to_the_end() {
    let agent = Gated {
        gate: Arc::new(tokio::sync::Semaphore::new(0)),
        task: Default::default(),
        runs: Default::default(),
    };
    let s = common::agent_server(Echo::card, agent.clone()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"role": "user", "messageId": agentry_a2a::new_id(),
            "parts": [{"kind": "text", "text": "slow"}]}}});
    let sent = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(&s.base)
        .json(&body)
        .send()
        .await;
    assert!(sent.is_err(), "the client gave up before the answer");
    let task = agent
        .task
        .lock()
        .unwrap()
        .clone()
        .expect("the agent started");
    // The connection is gone; then the agent may go on.
    tokio::time::sleep(Duration::from_millis(100)).await;
    agent.gate.add_permits(1);
    let c = client(&s.base).await;
    let mut last = None;
    for _ in 0..100 {
        let t = c.get_task(&task, None).await.unwrap();
        if t.state() == TaskState::Completed {
            last = Some(t);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = last.expect("the turn ran to its end without its client");
    assert_eq!(common::status_text(&t), "done");
    assert_eq!(agent.runs.load(Ordering::SeqCst), 1);
}
