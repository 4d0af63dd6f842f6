//! Who may reach what: tasks belong to the caller that made them, push secrets are
//! write-only, list page tokens cannot wrap, and a listener bounds idle and half-sent
//! connections and how many it holds open.

use crate::common;

use std::time::Duration;

use agentry_a2a::server::listen::Limits;
use agentry_a2a::server::{AgentService, Credentials, MAX_PUSH_CONFIGS, ServerConfig};
use agentry_a2a::store::{MemoryStore, SqliteStore, TaskStore};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

/// The echo agent behind two bearer tokens (required for every call), push to loopback allowed.
async fn two_callers(store: std::sync::Arc<dyn TaskStore>) -> common::TestServer {
    let (listener, url) = common::bind().await;
    let svc = AgentService::new(
        agentry::agents::Echo::card(&url),
        agentry::agents::Echo::default(),
        store,
    )
    .with_credentials(Credentials {
        bearer_tokens: vec![ALICE.into(), BOB.into()],
        required_for_all: true,
        ..Default::default()
    });
    common::serve_on(listener, svc, common::loopback_push()).await
}

/// One JSON-RPC call as `token`; the whole response object.
async fn rpc(base: &str, token: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(base)
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn message(text: &str) -> Value {
    json!({"message": {"role": "user", "messageId": agentry_a2a::new_id(),
        "parts": [{"kind": "text", "text": text}]}})
}

#[tokio::test]
async fn tasks_belong_to_the_caller_that_made_them() {
    let dir = agentry_testkit::Scratch::new("owners");
    for store in [
        std::sync::Arc::new(MemoryStore::default()) as std::sync::Arc<dyn TaskStore>,
        std::sync::Arc::new(SqliteStore::open(dir.join("tasks.db")).unwrap()),
    ] {
        let s = two_callers(store.clone()).await;
        let sent = rpc(&s.base, ALICE, "message/send", message("alice's secret")).await;
        let task = &sent["result"];
        let id = task["id"].as_str().expect("a task").to_owned();
        assert!(
            task.get("owner").is_none(),
            "the owner never goes on the wire: {task}"
        );

        // Alice sees her task; Bob gets "task not found" for every way in, as for a task that
        // does not exist (no 403 that would confirm it exists).
        let got = rpc(&s.base, ALICE, "tasks/get", json!({"id": id})).await;
        assert_eq!(got["result"]["id"], id, "{got}");
        let hook =
            json!({"taskId": id, "pushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}});
        let mut cont = message("bob continues");
        cont["message"]["taskId"] = json!(id);
        for (method, params) in [
            ("tasks/get", json!({"id": id})),
            ("tasks/cancel", json!({"id": id})),
            ("tasks/pushNotificationConfig/set", hook.clone()),
            ("tasks/pushNotificationConfig/get", json!({"id": id})),
            ("tasks/pushNotificationConfig/list", json!({"id": id})),
            (
                "tasks/pushNotificationConfig/delete",
                json!({"id": id, "pushNotificationConfigId": id}),
            ),
            ("message/send", cont.clone()),
        ] {
            let r = rpc(&s.base, BOB, method, params).await;
            assert_eq!(r["error"]["code"], -32001, "{method}: {r}");
        }
        let missing = rpc(&s.base, BOB, "tasks/get", json!({"id": "no-such-task"})).await;
        assert_eq!(missing["error"]["code"], -32001);

        // Listing shows each caller only their own tasks.
        rpc(&s.base, BOB, "message/send", message("bob's own")).await;
        let list = |token| {
            let base = s.base.clone();
            async move {
                let r = reqwest::Client::new()
                    .post(&base)
                    .bearer_auth(token)
                    .header("A2A-Version", "1.0")
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
                    .send()
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap();
                r["result"]["tasks"].as_array().cloned().unwrap_or_default()
            }
        };
        let alices = list(ALICE).await;
        assert_eq!(alices.len(), 1);
        assert_eq!(alices[0]["id"], id);
        let bobs = list(BOB).await;
        assert_eq!(bobs.len(), 1);
        assert_ne!(bobs[0]["id"], id);
        // The streaming way in and the REST binding check the same owner.
        let r = reqwest::Client::new()
            .get(format!("{}tasks/{id}", s.base))
            .bearer_auth(BOB)
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let r = reqwest::Client::new()
            .post(&s.base)
            .bearer_auth(BOB)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": id}}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(r.contains("-32001"), "{r}");

        // The owner is kept by the store (a restart keeps the task Alice's).
        let stored = store.get(&id).await.unwrap().unwrap();
        assert!(
            stored
                .owner
                .as_deref()
                .is_some_and(|o| o.starts_with("bearer:") && !o.contains(ALICE)),
            "a digest, never the token: {:?}",
            stored.owner
        );
    }
}

#[tokio::test]
async fn push_credentials_are_write_only_and_configs_per_task_are_capped() {
    let s = two_callers(std::sync::Arc::new(MemoryStore::default())).await;
    let sent = rpc(&s.base, ALICE, "message/send", message("x")).await;
    let id = sent["result"]["id"].as_str().unwrap().to_owned();
    let set = rpc(
        &s.base,
        ALICE,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "c0", "url": "http://127.0.0.1:9/h",
            "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "s3cret"}}}),
    )
    .await;
    assert!(set.get("result").is_some(), "{set}");
    for r in [
        set,
        rpc(
            &s.base,
            ALICE,
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": "c0"}),
        )
        .await,
        rpc(
            &s.base,
            ALICE,
            "tasks/pushNotificationConfig/list",
            json!({"id": id}),
        )
        .await,
    ] {
        let text = r.to_string();
        assert!(!text.contains("s3cret"), "credentials came back: {text}");
        assert!(text.contains("127.0.0.1:9/h"), "{text}");
    }
    for i in 1..MAX_PUSH_CONFIGS {
        let r = rpc(
            &s.base,
            ALICE,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"id": format!("c{i}"), "url": "http://127.0.0.1:9/h"}}),
        )
        .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let over = rpc(
        &s.base,
        ALICE,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "one-too-many", "url": "http://127.0.0.1:9/h"}}),
    )
    .await;
    assert_eq!(over["error"]["code"], -32602, "{over}");
    // Replacing an existing one is still fine.
    let again = rpc(
        &s.base,
        ALICE,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "c0", "url": "http://127.0.0.1:9/other"}}),
    )
    .await;
    assert!(again.get("result").is_some(), "{again}");
}

#[tokio::test]
async fn page_tokens_past_what_a_store_can_take_are_refused() {
    let s = common::echo_server().await;
    for token in ["9223372036854775808", "18446744073709551615", "-1", "x"] {
        let r: Value = reqwest::Client::new()
            .post(&s.base)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                "params": {"pageToken": token}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["error"]["code"], -32602, "{token}: {r}");
    }
}

/// Serves the echo agent with `limits`.
async fn limited(limits: Limits) -> common::TestServer {
    let (listener, url) = common::bind().await;
    let svc = AgentService::new(
        agentry::agents::Echo::card(&url),
        agentry::agents::Echo::default(),
        std::sync::Arc::new(MemoryStore::default()),
    );
    let config = ServerConfig {
        limits,
        ..Default::default()
    };
    common::serve_on(listener, svc, config).await
}

/// Whether the server closes `conn` within `within` (reads until EOF or a reset).
async fn closed_within(conn: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.is_ok()
}

#[tokio::test]
async fn half_sent_and_idle_connections_are_closed() {
    let s = limited(Limits {
        header_read: Duration::from_millis(500),
        ..Default::default()
    })
    .await;
    // Slowloris: a request head that never ends.
    let mut half = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    half.write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    // A connection that sends nothing at all.
    let mut idle = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    assert!(closed_within(&mut half, Duration::from_secs(5)).await);
    assert!(closed_within(&mut idle, Duration::from_secs(5)).await);
    // The server goes on.
    let r = reqwest::get(format!("{}.well-known/agent-card.json", s.base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// The same bounds for HTTP/2 (the gRPC binding's): a preface that never ends, and a
/// connection that opens HTTP/2 and then asks for nothing, are closed like their HTTP/1.1
/// kin; until then the idle one is served.
#[cfg(feature = "grpc")]
#[tokio::test]
async fn half_sent_and_idle_http2_connections_are_closed() {
    let s = limited(Limits {
        header_read: Duration::from_millis(500),
        ..Default::default()
    })
    .await;
    let mut half = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    half.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut idle = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    // The client preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0).
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    assert!(
        !closed_within(&mut idle, Duration::from_millis(200)).await,
        "an HTTP/2 connection is served until it has been idle for the header-read timeout"
    );
    assert!(closed_within(&mut half, Duration::from_secs(5)).await);
    assert!(closed_within(&mut idle, Duration::from_secs(5)).await);
    let r = reqwest::get(format!("{}.well-known/agent-card.json", s.base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_one_to_close() {
    let s = limited(Limits {
        header_read: Duration::from_secs(30),
        max_connections: 2,
        ..Default::default()
    })
    .await;
    let a = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let _b = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let card = format!("{}.well-known/agent-card.json", s.base);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    assert!(
        http.get(&card).send().await.is_err(),
        "a third connection is not served while two are open"
    );
    drop(a);
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(&card)
        .send()
        .await
        .expect("served once a slot is free");
    assert_eq!(r.status(), 200);
}

/// An access log kept in memory; `fail` makes every record fail.
#[derive(Default)]
struct Recorded {
    seen: std::sync::Mutex<Vec<agentry_a2a::server::Access>>,
    fail: bool,
}

impl agentry_a2a::server::AccessLog for Recorded {
    fn record(
        &self,
        access: agentry_a2a::server::Access,
    ) -> agentry_a2a::store::BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if self.fail {
                return Err("disk full".into());
            }
            self.seen.lock().unwrap().push(access);
            Ok(())
        })
    }
}

/// Counts the turns it runs.
struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl agentry_a2a::server::AgentExecutor for Counting {
    async fn execute(
        &self,
        _ctx: agentry_a2a::server::RequestContext,
        events: agentry_a2a::server::EventSink,
    ) -> Result<(), agentry_a2a::server::ExecutorError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        events.complete(Some(events.agent_text("done"))).await?;
        Ok(())
    }
}

async fn audited(
    log: std::sync::Arc<Recorded>,
) -> (
    common::TestServer,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let (listener, url) = common::bind().await;
    let turns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let card = agentry_a2a::model::AgentCard::new("audited", "counts", &url);
    let svc = AgentService::new(
        card,
        Counting(turns.clone()),
        std::sync::Arc::new(MemoryStore::default()),
    )
    .with_credentials(Credentials {
        bearer_tokens: vec![ALICE.into()],
        required_for_all: true,
        ..Default::default()
    })
    .with_access_log(log);
    (
        common::serve_on(listener, svc, ServerConfig::default()).await,
        turns,
    )
}

/// Every decision reaches the access log, on both bindings: the refused anonymous call
/// (before its body is read), and the let-through calls with their caller, operation and
/// task.
#[tokio::test]
async fn every_decision_is_recorded_on_both_bindings() {
    let log = std::sync::Arc::new(Recorded::default());
    let (server, turns) = audited(log.clone()).await;
    let http = reqwest::Client::new();
    let anonymous = http
        .post(&server.base)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": message("hi")}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let sent = rpc(&server.base, ALICE, "message/send", message("hi")).await;
    let id = sent["result"]["id"].as_str().expect("a task").to_owned();
    let got = http
        .get(format!("{}tasks/{id}", server.base))
        .bearer_auth(ALICE)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200, "{:?}", got.text().await);
    let seen = log.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    assert!(!seen[0].allowed && seen[0].caller.is_none() && seen[0].operation.is_none());
    assert_eq!(seen[0].agent, "audited");
    assert!(seen[1].allowed && seen[1].operation == Some("message/send"));
    let alice = seen[1].caller.clone().expect("alice");
    assert!(
        alice.starts_with("bearer:") && !alice.contains(ALICE),
        "{alice}"
    );
    assert!(seen[2].allowed && seen[2].operation == Some("tasks/get"));
    assert_eq!(seen[2].task_id.as_deref(), Some(id.as_str()));
    assert_eq!(seen[2].caller.as_deref(), Some(alice.as_str()));
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// gRPC answers to the same credentials and records the same decisions: a call without a
/// token is UNAUTHENTICATED (our client reports it as the other bindings' 401) and never
/// reaches the agent; with one it runs, under the same caller.
#[cfg(feature = "grpc")]
#[tokio::test]
async fn grpc_calls_are_authenticated_and_recorded() {
    use agentry_a2a::client::{A2aClient, Auth, Binding, ClientConfig};
    let log = std::sync::Arc::new(Recorded::default());
    let (server, turns) = audited(log.clone()).await;
    let cfg = |auth| ClientConfig {
        binding: Binding::Grpc,
        auth,
        ..ClientConfig::default()
    };
    let anonymous = A2aClient::discover(&server.base, cfg(Auth::None))
        .await
        .unwrap();
    assert_eq!(anonymous.binding(), Binding::Grpc);
    let params = || {
        agentry_a2a::model::MessageSendParams::new(agentry_a2a::model::Message::text(
            agentry_a2a::model::Role::User,
            "hi",
        ))
    };
    let e = anonymous.send_message(params()).await.unwrap_err();
    assert!(
        matches!(e, agentry_a2a::A2aError::Unauthorized { .. }),
        "{e:?}"
    );
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 0);
    let alice = A2aClient::discover(&server.base, cfg(Auth::Bearer(ALICE.into())))
        .await
        .unwrap();
    alice.send_message(params()).await.unwrap();
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 1);
    let seen = log.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert!(!seen[0].allowed && seen[0].caller.is_none());
    assert!(
        seen[1].allowed
            && seen[1]
                .caller
                .as_deref()
                .is_some_and(|c| c.starts_with("bearer:"))
    );
}

/// A decision that cannot be recorded refuses the request: the agent never runs.
#[tokio::test]
async fn a_decision_that_cannot_be_recorded_refuses_the_request() {
    let log = std::sync::Arc::new(Recorded {
        fail: true,
        ..Default::default()
    });
    let (server, turns) = audited(log).await;
    let sent = rpc(&server.base, ALICE, "message/send", message("hi")).await;
    assert_eq!(sent["error"]["code"], -32603, "{sent}");
    assert!(
        sent["error"]["message"]
            .as_str()
            .unwrap()
            .contains("audit trail"),
        "{sent}"
    );
    let rest = reqwest::Client::new()
        .post(format!("{}message:send", server.base))
        .bearer_auth(ALICE)
        .header("A2A-Version", "1.0")
        .json(&json!({"message": {"role": "ROLE_USER", "messageId": "m1",
            "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 500);
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 0);
}
