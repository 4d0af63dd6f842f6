//! The task envelope extension: idempotency keys (retries run nothing twice, on both
//! bindings and generations, while the first runs, across a restart, under faults), key
//! expiry and scoping, correlation ids recorded on the task and in the access log, required
//! scopes, response modes, and the extension declared in the card.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_a2a::envelope::EXTENSION_URI;
use agentry_a2a::model::AgentCard;
use agentry_a2a::server::{
    Access, AccessLog, AgentExecutor, AgentService, BearerVerifier, Credentials, EventSink,
    ExecutorError, RequestContext, ServerConfig, VerifiedBearer,
};
use agentry_a2a::store::{BoxFuture, MemoryStore, SqliteStore, TaskStore};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

/// Executions per message text: the side effect a retry must not repeat, counted at the
/// agent. With a gate, each execution waits for a permit before it completes.
#[derive(Clone, Default)]
struct Counting {
    runs: Arc<Mutex<HashMap<String, usize>>>,
    gate: Option<Arc<Semaphore>>,
}

impl Counting {
    fn runs(&self, text: &str) -> usize {
        self.runs.lock().unwrap().get(text).copied().unwrap_or(0)
    }
}

impl AgentExecutor for Counting {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let text = ctx.message.text_content();
        *self.runs.lock().unwrap().entry(text.clone()).or_default() += 1;
        events.working(None).await?;
        if let Some(g) = &self.gate {
            g.acquire().await.unwrap().forget();
        }
        // The envelope reaches the agent: its correlation id is in the answer.
        let corr = ctx
            .envelope
            .as_ref()
            .and_then(|e| e.correlation_id.clone())
            .unwrap_or_default();
        events
            .complete(Some(events.agent_text(format!("did {text} [{corr}]"))))
            .await
    }
}

fn card(url: &str) -> AgentCard {
    agentry::agents::Echo::card(url)
}

async fn server(
    agent: impl AgentExecutor,
    store: Arc<dyn TaskStore>,
    config: ServerConfig,
    credentials: Option<Credentials>,
    log: Option<Arc<dyn AccessLog>>,
) -> common::TestServer {
    let (listener, url) = common::bind().await;
    let mut svc = AgentService::new(card(&url), agent, store);
    if let Some(c) = credentials {
        svc = svc.with_credentials(c);
    }
    if let Some(l) = log {
        svc = svc.with_access_log(l);
    }
    common::serve_on(listener, svc, config).await
}

/// A SQLite store in a scratch folder, removed when the test passes (keep the folder).
fn sqlite() -> (Arc<dyn TaskStore>, agentry_testkit::Scratch) {
    let dir = agentry_testkit::Scratch::new("envelope");
    (
        Arc::new(SqliteStore::open(dir.join("tasks.db")).unwrap()),
        dir,
    )
}

/// A v0.3 `message/send` params with the envelope in the message's metadata.
fn send_03(text: &str, envelope: Value) -> Value {
    json!({"message": {"role": "user", "messageId": agentry_a2a::new_id(),
        "parts": [{"kind": "text", "text": text}],
        "extensions": [EXTENSION_URI],
        "metadata": {EXTENSION_URI: envelope}}})
}

async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let mut r = reqwest::Client::new().post(url).json(body);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn rpc(base: &str, headers: &[(&str, &str)], method: &str, params: Value) -> Value {
    post(
        base,
        headers,
        &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
    .await
    .1
}

fn task_id(answer: &Value) -> String {
    let r = &answer["result"];
    r.get("id")
        .or_else(|| r.pointer("/task/id"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no task in {answer}"))
        .to_owned()
}

#[tokio::test]
async fn a_repeated_request_gets_the_first_task_on_every_binding() {
    let (sqlite, _dir) = sqlite();
    for store in [
        Arc::new(MemoryStore::default()) as Arc<dyn TaskStore>,
        sqlite,
    ] {
        let agent = Counting::default();
        let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
        let first = rpc(
            &s.base,
            &[],
            "message/send",
            send_03("pay", json!({"idempotencyKey": "k1"})),
        )
        .await;
        let id = task_id(&first);
        assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
        // A retry: new messageId, a traceparent now, the key in the envelope.
        let tp = [(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )];
        let again = rpc(
            &s.base,
            &tp,
            "message/send",
            send_03("pay", json!({"idempotencyKey": "k1"})),
        )
        .await;
        assert_eq!(task_id(&again), id);
        // The same key as a header, over JSON-RPC 1.0 and HTTP+JSON 1.0 and 0.3.
        let key = [("Idempotency-Key", "k1"), ("A2A-Version", "1.0")];
        let v1 = json!({"message": {"role": "ROLE_USER", "messageId": agentry_a2a::new_id(),
            "parts": [{"text": "pay"}]}});
        let r = rpc(&s.base, &key, "SendMessage", v1.clone()).await;
        assert_eq!(task_id(&r), id, "{r}");
        let (status, r) = post(&format!("{}message:send", s.base), &key, &v1).await;
        assert_eq!(
            (status, r.pointer("/task/id").and_then(Value::as_str)),
            (200, Some(id.as_str())),
            "{r}"
        );
        let v03 = json!({"message": {"role": "user", "messageId": agentry_a2a::new_id(),
            "parts": [{"kind": "text", "text": "pay"}]}});
        let (status, r) = post(&format!("{}v1/message:send", s.base), &key[..1], &v03).await;
        assert_eq!(status, 200, "{r}");
        assert!(r.to_string().contains(&id), "{r}");
        // Streaming: the finished task, once.
        let sse = reqwest::Client::new()
            .post(&s.base)
            .header("Idempotency-Key", "k1")
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "message/stream", "params": v03}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(sse.matches("data:").count(), 1, "{sse}");
        assert!(sse.contains(&id) && sse.contains("completed"), "{sse}");
        assert_eq!(agent.runs("pay"), 1, "one execution for six requests");

        // The same key with another request: refused, nothing runs.
        let other = rpc(
            &s.base,
            &[],
            "message/send",
            send_03("refund", json!({"idempotencyKey": "k1"})),
        )
        .await;
        assert_eq!(other["error"]["code"], -32602, "{other}");
        assert!(
            other["error"]["message"]
                .as_str()
                .unwrap()
                .contains("different request")
        );
        assert_eq!(agent.runs("refund"), 0);
        // Header and envelope must agree.
        let both = rpc(
            &s.base,
            &[("Idempotency-Key", "k2")],
            "message/send",
            send_03("pay", json!({"idempotencyKey": "k1"})),
        )
        .await;
        assert_eq!(both["error"]["code"], -32602, "{both}");
        // A new key is a new request.
        let fresh = rpc(
            &s.base,
            &[("Idempotency-Key", "k3")],
            "message/send",
            send_03("pay", json!({})),
        )
        .await;
        assert_ne!(task_id(&fresh), id);
        assert_eq!(agent.runs("pay"), 2);
    }
}

/// `n` blocking sends of the request "ship" under one idempotency key, all at once.
fn keyed_sends(base: &str, key: &'static str, n: usize) -> Vec<tokio::task::JoinHandle<Value>> {
    (0..n)
        .map(|_| {
            let base = base.to_owned();
            tokio::spawn(async move {
                rpc(
                    &base,
                    &[("Idempotency-Key", key)],
                    "message/send",
                    send_03("ship", json!({})),
                )
                .await
            })
        })
        .collect()
}

#[tokio::test]
async fn retries_while_the_first_runs_start_nothing() {
    let gate = Arc::new(Semaphore::new(0));
    let agent = Counting {
        gate: Some(gate.clone()),
        ..Default::default()
    };
    let (store, _dir) = sqlite();
    let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
    // 16 blocking sends of one request at once: one runs; all wait for it and get its task.
    let sends = keyed_sends(&s.base, "once", 16);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(agent.runs("ship"), 1);
    // Not blocking: the running task at once.
    let mut p = send_03(
        "ship",
        json!({"idempotencyKey": "once", "responseMode": "async"}),
    );
    p["configuration"] = json!({"blocking": false});
    let running = rpc(&s.base, &[], "message/send", p).await;
    assert_eq!(running["result"]["status"]["state"], "working", "{running}");
    gate.add_permits(1);
    let mut ids = Vec::new();
    for t in sends {
        let r = t.await.unwrap();
        assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
        ids.push(task_id(&r));
    }
    ids.dedup();
    assert_eq!(ids, vec![task_id(&running)]);
    assert_eq!(agent.runs("ship"), 1);
}

/// Counts its runs and, past a gate, answers with a direct message (no task).
#[derive(Clone)]
struct DirectAnswer {
    runs: Arc<Mutex<usize>>,
    gate: Arc<Semaphore>,
}

impl AgentExecutor for DirectAnswer {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        *self.runs.lock().unwrap() += 1;
        self.gate.acquire().await.unwrap().forget();
        let text = format!("did {}", ctx.message.text_content());
        events
            .message(agentry_a2a::model::Message::text(
                agentry_a2a::model::Role::Agent,
                text,
            ))
            .await
    }
}

/// Retries of a request the agent answers with a direct message, sent while it runs: they
/// follow the running turn and get its message; the agent runs once.
#[tokio::test]
async fn retries_of_a_direct_answer_while_it_runs_start_nothing() {
    let agent = DirectAnswer {
        runs: Arc::default(),
        gate: Arc::new(Semaphore::new(0)),
    };
    let (store, _dir) = sqlite();
    let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
    let sends = keyed_sends(&s.base, "direct-once", 8);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*agent.runs.lock().unwrap(), 1);
    // Permits for every send: a retry that ran the agent again would not be held back.
    agent.gate.add_permits(8);
    for t in sends {
        let r = t.await.unwrap();
        assert_eq!(r["result"]["kind"], "message", "{r}");
        assert_eq!(r["result"]["parts"][0]["text"], "did ship", "{r}");
    }
    assert_eq!(*agent.runs.lock().unwrap(), 1);
}

/// The in-memory store keeps the newest finished tasks only, and idempotency keys longer:
/// a repeat whose task it dropped is refused with a clear error, not run a second time (it
/// was taken over after a 2 s wait and run again).
#[tokio::test]
async fn a_repeat_whose_task_the_memory_store_dropped_is_refused_not_run_again() {
    let agent = Counting::default();
    let store = Arc::new(MemoryStore::new(2)) as Arc<dyn TaskStore>;
    let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
    let mut first = None;
    for (key, text) in [("k1", "a"), ("k2", "b"), ("k3", "c")] {
        let r = rpc(
            &s.base,
            &[("Idempotency-Key", key)],
            "message/send",
            send_03(text, json!({})),
        )
        .await;
        assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
        first.get_or_insert_with(|| task_id(&r));
    }
    // The third finished task pushed the first out; a repeat of a kept one still answers.
    let again = rpc(
        &s.base,
        &[("Idempotency-Key", "k3")],
        "message/send",
        send_03("c", json!({})),
    )
    .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
    let took = std::time::Instant::now();
    let r = rpc(
        &s.base,
        &[("Idempotency-Key", "k1")],
        "message/send",
        send_03("a", json!({})),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("no longer holds") && msg.contains(first.as_deref().unwrap()),
        "{msg}"
    );
    assert!(
        took.elapsed() < Duration::from_secs(2),
        "{:?}",
        took.elapsed()
    );
    assert_eq!(
        (agent.runs("a"), agent.runs("b"), agent.runs("c")),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn keys_expire_are_scoped_to_the_caller_and_survive_a_restart() {
    let (store, _dir) = sqlite();
    let config = ServerConfig {
        idempotency_window: Duration::from_millis(400),
        ..Default::default()
    };
    let creds = Credentials {
        bearer_tokens: vec!["alice".into(), "bob".into()],
        required_for_all: true,
        ..Default::default()
    };
    let agent = Counting::default();
    let s = server(
        agent.clone(),
        store.clone(),
        config.clone(),
        Some(creds.clone()),
        None,
    )
    .await;
    let as_ = |who: &'static str| {
        [
            (
                "Authorization",
                if who == "alice" {
                    "Bearer alice"
                } else {
                    "Bearer bob"
                },
            ),
            ("Idempotency-Key", "k"),
        ]
    };
    let a1 = task_id(
        &rpc(
            &s.base,
            &as_("alice"),
            "message/send",
            send_03("x", json!({})),
        )
        .await,
    );
    // Bob's key of the same name is his own.
    let b1 = task_id(
        &rpc(
            &s.base,
            &as_("bob"),
            "message/send",
            send_03("x", json!({})),
        )
        .await,
    );
    assert_ne!(a1, b1);
    assert_eq!(agent.runs("x"), 2);
    drop(s);
    // A new server on the same file (a restart) still knows the key.
    let agent2 = Counting::default();
    let s = server(agent2.clone(), store, config, Some(creds), None).await;
    let again = task_id(
        &rpc(
            &s.base,
            &as_("alice"),
            "message/send",
            send_03("x", json!({})),
        )
        .await,
    );
    assert_eq!(again, a1);
    assert_eq!(agent2.runs("x"), 0);
    // Past the window the key is free: a new task.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = task_id(
        &rpc(
            &s.base,
            &as_("alice"),
            "message/send",
            send_03("x", json!({})),
        )
        .await,
    );
    assert_ne!(later, a1);
    assert_eq!(agent2.runs("x"), 1);
}

/// Access decisions as they were recorded.
#[derive(Default)]
struct Recorded(Mutex<Vec<Access>>);

impl AccessLog for Recorded {
    fn record(&self, access: Access) -> BoxFuture<'_, Result<(), String>> {
        self.0.lock().unwrap().push(access);
        Box::pin(async { Ok(()) })
    }
}

/// Tokens `scopes:a,b` grant scopes a and b.
#[derive(Debug)]
struct ScopeTokens;

impl BearerVerifier for ScopeTokens {
    fn verify(&self, token: &str) -> Result<VerifiedBearer, String> {
        let scopes = token.strip_prefix("scopes:").ok_or("not a test token")?;
        Ok(VerifiedBearer {
            subject: "tester".into(),
            actors: std::sync::Arc::new([]),
            scopes: scopes
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

#[tokio::test]
async fn the_envelope_is_declared_recorded_and_its_scopes_enforced() {
    let log = Arc::new(Recorded::default());
    let creds = Credentials {
        bearer_tokens: vec!["operator".into()],
        verifier: Some(Arc::new(ScopeTokens)),
        required_for_all: true,
        ..Default::default()
    };
    let agent = Counting::default();
    let mut config = common::loopback_push();
    config.push.allow_private = true;
    let s = server(
        agent.clone(),
        Arc::new(MemoryStore::default()),
        config,
        Some(creds),
        Some(log.clone()),
    )
    .await;
    // Declared in the card of both generations.
    for v in ["0.3", "1.0"] {
        let card: Value = reqwest::Client::new()
            .get(format!("{}.well-known/agent-card.json", s.base))
            .header("A2A-Version", v)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let exts = card
            .pointer("/capabilities/extensions")
            .and_then(Value::as_array)
            .unwrap();
        assert!(
            exts.iter().any(|e| e["uri"] == EXTENSION_URI),
            "{v}: {card}"
        );
    }
    // A correlation id from the trace context, recorded on the task and handed to the agent.
    let auth = ("Authorization", "Bearer scopes:mail.draft");
    let tp = (
        "traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    );
    let r = rpc(
        &s.base,
        &[auth, tp, ("A2A-Extensions", EXTENSION_URI)],
        "message/send",
        send_03(
            "draft",
            json!({"priority": "high", "triggerId": "weekly-report"}),
        ),
    )
    .await;
    let t = &r["result"];
    let env = &t["metadata"][EXTENSION_URI];
    assert_eq!(
        env["correlationId"], "0af7651916cd43dd8448eb211c80319c",
        "{r}"
    );
    assert_eq!(
        (env["priority"].as_str(), env["triggerId"].as_str()),
        (Some("high"), Some("weekly-report"))
    );
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[0af7651916cd43dd8448eb211c80319c]")
    );
    let got = rpc(&s.base, &[auth], "tasks/get", json!({"id": t["id"]})).await;
    assert_eq!(
        got["result"]["metadata"][EXTENSION_URI]["correlationId"],
        env["correlationId"]
    );
    // Without a correlation id or trace context, the server makes one.
    let r = rpc(
        &s.base,
        &[auth, ("Idempotency-Key", "made")],
        "message/send",
        send_03("draft2", json!({})),
    )
    .await;
    let made = r["result"]["metadata"][EXTENSION_URI]["correlationId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(made.len() >= 32, "{r}");
    // A request without an envelope gets none (the wire stays as it was).
    let plain = json!({"message": {"role": "user", "messageId": "p1", "parts": [{"kind": "text", "text": "plain"}]}});
    let r = rpc(&s.base, &[auth], "message/send", plain).await;
    assert!(r["result"].get("metadata").is_none(), "{r}");
    // The access log has the correlation ids and keys of the requests it let through.
    {
        let log = log.0.lock().unwrap();
        assert!(log.iter().any(|a| a.allowed
            && a.correlation_id.as_deref() == Some("0af7651916cd43dd8448eb211c80319c")));
        assert!(
            log.iter()
                .any(|a| a.correlation_id.as_deref() == Some(made.as_str())
                    && a.idempotency_key.as_deref() == Some("made"))
        );
    }

    // Required scopes: a token without them is refused (403) and nothing runs; one with them,
    // and the operator's own token, pass.
    let needs_send = send_03("send", json!({"requiredScopes": ["mail.send"]}));
    let (status, r) = post(
        &s.base,
        &[auth],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": needs_send}),
    )
    .await;
    assert_eq!(status, 403, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mail.send"),
        "{r}"
    );
    assert_eq!(agent.runs("send"), 0);
    assert!(
        log.0
            .lock()
            .unwrap()
            .iter()
            .any(|a| !a.allowed && a.reason.contains("mail.send"))
    );
    for token in ["Bearer scopes:mail.draft,mail.send", "Bearer operator"] {
        let r = rpc(
            &s.base,
            &[("Authorization", token)],
            "message/send",
            send_03("send", json!({"requiredScopes": ["mail.send"]})),
        )
        .await;
        assert_eq!(r["result"]["status"]["state"], "completed", "{token}: {r}");
    }
    assert_eq!(agent.runs("send"), 2);

    // Callback mode: answered at once, the push config made from the callback URL.
    let hook = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook_url = format!("http://{}/hook", hook.local_addr().unwrap());
    let r = rpc(
        &s.base,
        &[auth],
        "message/send",
        send_03(
            "cb",
            json!({"responseMode": "callback", "callbackUrl": hook_url}),
        ),
    )
    .await;
    let id = task_id(&r);
    let configs = rpc(
        &s.base,
        &[auth],
        "tasks/pushNotificationConfig/list",
        json!({"id": id}),
    )
    .await;
    assert_eq!(
        configs["result"][0]["pushNotificationConfig"]["url"],
        hook_url.as_str(),
        "{configs}"
    );
    // Malformed envelopes are refused before anything runs.
    let bad = rpc(
        &s.base,
        &[auth],
        "message/send",
        send_03("bad", json!({"responseMode": "callback"})),
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(agent.runs("bad"), 0);
}

/// Reads one HTTP/1.1 message (headers, then a Content-Length body) from `s`.
async fn read_message(s: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf);
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A proxy that loses every third connection before the server sees the request, every
/// third after the server answered (the client never hears), and passes the rest.
async fn lossy_proxy(upstream: std::net::SocketAddr) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            n += 1;
            let fate = n % 3;
            tokio::spawn(async move {
                let Some(request) = read_message(&mut client).await else {
                    return;
                };
                if fate == 0 {
                    return; // dropped before the server saw it
                }
                let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                if server.write_all(&request).await.is_err() {
                    return;
                }
                let Some(answer) = read_message(&mut server).await else {
                    return;
                };
                if fate == 1 {
                    return; // the server answered; the client never hears
                }
                let _ = client.write_all(&answer).await;
            });
        }
    });
    url
}

/// Retried sends through a connection that drops before and after the answer: every
/// request retried until it is answered, and none executed twice (counted at the agent).
/// `AGENTRY_IDEMPOTENCY_REQUESTS` sets how many requests (default 10,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_sends_under_faults_never_run_twice() {
    let requests: usize = std::env::var("AGENTRY_IDEMPOTENCY_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let (store, _dir) = sqlite();
    let agent = Counting::default();
    let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
    let proxy = lossy_proxy(s.addr).await;
    // One connection per request, so each attempt meets the proxy's next fate.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (client, proxy, attempts, next) = (
                client.clone(),
                proxy.clone(),
                attempts.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let mut answered = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= requests {
                        return answered;
                    }
                    let key = format!("req-{i}");
                    let body = json!({"jsonrpc": "2.0", "id": i, "method": "message/send",
                        "params": {"message": {"role": "user", "messageId": agentry_a2a::new_id(),
                            "parts": [{"kind": "text", "text": key}]}}});
                    loop {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let sent = client
                            .post(&proxy)
                            .header("Idempotency-Key", &key)
                            .json(&body)
                            .send()
                            .await;
                        if let Ok(r) = sent
                            && let Ok(v) = r.json::<Value>().await
                        {
                            assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
                            answered.push((key, task_id(&v)));
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    let mut tasks = HashMap::new();
    for w in workers {
        for (key, task) in w.await.unwrap() {
            assert!(tasks.insert(key, task).is_none());
        }
    }
    let attempts = attempts.load(std::sync::atomic::Ordering::Relaxed);
    let runs = agent.runs.lock().unwrap().clone();
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n != 1).collect();
    println!(
        "{requests} requests, {attempts} attempts ({} retried), {} executions, {} run more than once",
        attempts - requests,
        runs.values().sum::<usize>(),
        twice.len()
    );
    assert_eq!(tasks.len(), requests);
    assert!(attempts > requests * 2, "the proxy dropped connections");
    assert_eq!(runs.len(), requests);
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
}

/// A request whose task was cut short by a server that stopped: its repeat on the restarted
/// server runs it again on the same task (a finished or still running one it would not).
#[tokio::test]
async fn a_repeat_of_a_request_cut_short_by_a_restart_runs_it_again() {
    let (store, _dir) = sqlite();
    let stuck = Counting {
        gate: Some(Arc::new(Semaphore::new(0))),
        ..Default::default()
    };
    let s = server(
        stuck.clone(),
        store.clone(),
        ServerConfig::default(),
        None,
        None,
    )
    .await;
    let mut p = send_03("book", json!({"idempotencyKey": "trip"}));
    p["configuration"] = json!({"blocking": false});
    let first = task_id(&rpc(&s.base, &[], "message/send", p).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stuck.runs("book"), 1);
    drop(s);
    // The restarted server (a new one on the same file) finds the task orphaned.
    let agent = Counting::default();
    let s = server(agent.clone(), store, ServerConfig::default(), None, None).await;
    let r = rpc(
        &s.base,
        &[("Idempotency-Key", "trip")],
        "message/send",
        send_03("book", json!({})),
    )
    .await;
    assert_eq!(task_id(&r), first);
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(agent.runs("book"), 1);
    // Repeated again: the finished task, nothing runs.
    let r = rpc(
        &s.base,
        &[("Idempotency-Key", "trip")],
        "message/send",
        send_03("book", json!({})),
    )
    .await;
    assert_eq!((task_id(&r), agent.runs("book")), (first, 1));
}
