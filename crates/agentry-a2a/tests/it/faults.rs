//! Fault injection: a task store that fails or is slow, a remote agent whose streams drop or
//! go silent. The caller gets a clear answer, the task a state that says what happened, and
//! the server goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentry::agents::Echo;
use agentry_a2a::A2aError;
use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::*;
use agentry_a2a::store::{BoxFuture, MemoryStore, StoreError, TaskPage, TaskQuery, TaskStore};
use futures_util::StreamExt;

use crate::common::{self, status_text, user};

/// A [`MemoryStore`] whose saves fail while `failing` is set ("disk full"), or each take
/// `delay` to resolve. Writes are applied at call time, as the store contract says.
#[derive(Default)]
struct Faulty {
    inner: MemoryStore,
    failing: AtomicBool,
    delay: Option<Duration>,
    saves: AtomicUsize,
}

impl TaskStore for Faulty {
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        self.inner.get(id)
    }
    fn save<'a>(&'a self, task: &'a Task) -> BoxFuture<'a, Result<(), StoreError>> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Box::pin(async {
                Err(StoreError::backend(
                    "saving a task",
                    std::io::Error::other("disk full"),
                ))
            });
        }
        let write = self.inner.save(task);
        let delay = self.delay;
        Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            write.await
        })
    }
    fn list<'a>(&'a self, query: &'a TaskQuery) -> BoxFuture<'a, Result<TaskPage, StoreError>> {
        self.inner.list(query)
    }
    fn set_push<'a>(
        &'a self,
        task_id: &'a str,
        config: &'a PushNotificationConfig,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.set_push(task_id, config)
    }
    fn list_push<'a>(
        &'a self,
        task_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<PushNotificationConfig>, StoreError>> {
        self.inner.list_push(task_id)
    }
    fn delete_push<'a>(
        &'a self,
        task_id: &'a str,
        config_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.delete_push(task_id, config_id)
    }
}

async fn echo_on(store: Arc<Faulty>) -> (common::TestServer, A2aClient) {
    let (listener, url) = common::bind().await;
    let svc = agentry_a2a::server::AgentService::new(Echo::card(&url), Echo::default(), store);
    let s = common::serve_on(listener, svc, Default::default()).await;
    let c = A2aClient::discover(&s.base, ClientConfig::default())
        .await
        .unwrap();
    (s, c)
}

/// Before, a store refusing the end of a turn left the caller waiting forever: the final
/// event was never published.
#[tokio::test]
async fn a_store_that_refuses_the_end_of_a_turn_fails_the_task_and_says_why() {
    let store = Arc::new(Faulty::default());
    let (_s, c) = echo_on(store.clone()).await;
    store.failing.store(true, Ordering::SeqCst);

    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        c.send_message(MessageSendParams::new(user("keep this"))),
    )
    .await
    .expect("the caller was left waiting")
    .unwrap();
    let SendMessageResult::Task(t) = answer else {
        panic!("expected a task")
    };
    assert_eq!(t.state(), TaskState::Failed, "{t:?}");
    assert!(
        status_text(&t).contains("could not be stored"),
        "{}",
        status_text(&t)
    );
    assert!(status_text(&t).contains("disk full"), "{}", status_text(&t));

    // Streamed: the stream ends, on the failure.
    let events: Vec<StreamEvent> = tokio::time::timeout(
        Duration::from_secs(10),
        c.stream_message(MessageSendParams::new(user("and this")))
            .map(|e| e.unwrap())
            .collect(),
    )
    .await
    .expect("the stream never ended");
    let Some(StreamEvent::StatusUpdate(last)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(last.status.state, TaskState::Failed);

    // The store is back: the server serves as before.
    store.failing.store(false, Ordering::SeqCst);
    let SendMessageResult::Task(t) = c
        .send_message(MessageSendParams::new(user("again")))
        .await
        .unwrap()
    else {
        panic!("expected a task")
    };
    assert_eq!(t.state(), TaskState::Completed);
    assert_eq!(
        c.get_task(&t.id, None).await.unwrap().state(),
        TaskState::Completed
    );
}

/// Saves that take 100 ms each: many tasks at once all end, and each is stored as it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_store_delays_answers_and_loses_nothing() {
    let store = Arc::new(Faulty {
        delay: Some(Duration::from_millis(100)),
        ..Default::default()
    });
    let (_s, c) = echo_on(store.clone()).await;
    let sends = (0..20).map(|i| {
        let c = c.clone();
        async move {
            match c
                .send_message(MessageSendParams::new(user(&format!("task {i}"))))
                .await
                .unwrap()
            {
                SendMessageResult::Task(t) => t,
                other => panic!("{other:?}"),
            }
        }
    });
    let tasks = futures_util::future::join_all(sends).await;
    for t in &tasks {
        assert_eq!(t.state(), TaskState::Completed);
        let stored = store.inner.get(&t.id).await.unwrap().expect("stored");
        assert_eq!(stored.state(), TaskState::Completed);
    }
    assert!(store.saves.load(Ordering::SeqCst) >= 20);
}

/// How a fake remote agent's streams behave.
#[derive(Clone, Copy)]
enum Drops {
    /// Each stream sends one `working` event and closes; the task finishes meanwhile.
    ThenFinishes,
    /// Each stream sends one `working` event and closes; the task never finishes.
    Always,
    /// The stream sends one `working` event, then nothing, not even keep-alives.
    GoesSilent,
}

/// A remote A2A 0.3 agent (JSON-RPC) whose streams misbehave as `drops` says; counts the
/// streams opened.
async fn remote_agent(drops: Drops) -> (String, Arc<AtomicUsize>) {
    use axum::body::Body;
    use axum::extract::State;
    use axum::response::Response;
    use serde_json::{Value, json};
    type Shared = (Drops, Arc<AtomicUsize>);
    async fn rpc(State((drops, streams)): State<Shared>, body: String) -> Response {
        let req: Value = serde_json::from_str(&body).unwrap();
        let id = req["id"].clone();
        let task = |state: &str| {
            json!({"kind": "task", "id": "t1", "contextId": "c1",
                   "status": {"state": state, "timestamp": "2026-11-24T00:00:00Z"}})
        };
        match req["method"].as_str().unwrap_or("") {
            "tasks/get" => {
                let state = match drops {
                    Drops::ThenFinishes => "completed",
                    _ => "working",
                };
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": task(state)});
                Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(answer.to_string()))
                    .unwrap()
            }
            _ => {
                streams.fetch_add(1, Ordering::SeqCst);
                let event = json!({"jsonrpc": "2.0", "id": id, "result": {
                    "kind": "status-update", "taskId": "t1", "contextId": "c1", "final": false,
                    "status": {"state": "working", "timestamp": "2026-11-24T00:00:00Z"}}});
                let first = futures_util::stream::once(async move {
                    Ok::<_, std::io::Error>(format!("data: {event}\n\n"))
                });
                let body = match drops {
                    Drops::GoesSilent => {
                        Body::from_stream(first.chain(futures_util::stream::pending()))
                    }
                    _ => Body::from_stream(first),
                };
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(body)
                    .unwrap()
            }
        }
    }
    let (listener, url) = common::bind().await;
    let card = json!({"name": "flaky", "description": "drops its streams", "url": url,
        "version": "1", "protocolVersion": "0.3.0", "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []});
    let streams = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route("/", axum::routing::post(rpc))
        .route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .with_state((drops, streams.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, streams)
}

/// Streams one message to a fake agent behaving as `drops`: every item the client yields,
/// and how many streams the agent was asked to open.
async fn stream_from(drops: Drops) -> (Vec<Result<StreamEvent, A2aError>>, usize) {
    let (url, streams) = remote_agent(drops).await;
    let cfg = ClientConfig {
        stream_idle_timeout: Duration::from_millis(300),
        retries: 2,
        backoff: Duration::from_millis(10),
        ..ClientConfig::default()
    };
    let c = A2aClient::discover(&url, cfg).await.unwrap();
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        c.stream_message(MessageSendParams::new(user("go")))
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the stream hung");
    (got, streams.load(Ordering::SeqCst))
}

/// A remote agent that drops its stream: resubscribed while the task runs; a task finished
/// meanwhile ends the stream on its final status; one that never finishes ends in a clear
/// error after the retries; a silent stream ends at the idle timeout.
#[tokio::test]
async fn a_remote_agent_dropping_its_stream() {
    let (got, streams) = stream_from(Drops::ThenFinishes).await;
    let last = got.last().unwrap().as_ref().unwrap();
    assert!(last.is_final(), "{got:?}");
    assert!(
        matches!(last, StreamEvent::StatusUpdate(s) if s.status.state == TaskState::Completed),
        "{got:?}"
    );
    assert_eq!(streams, 1, "finished: nothing to resubscribe to");

    let (got, streams) = stream_from(Drops::Always).await;
    let err = got.last().unwrap().as_ref().unwrap_err();
    assert!(
        err.to_string()
            .contains("stream closed before the final event"),
        "{err}"
    );
    assert_eq!(streams, 3, "the stream and two resubscriptions");

    let (got, _) = stream_from(Drops::GoesSilent).await;
    let err = got.last().unwrap().as_ref().unwrap_err();
    assert!(matches!(err, A2aError::Timeout { .. }), "{err}");
}
