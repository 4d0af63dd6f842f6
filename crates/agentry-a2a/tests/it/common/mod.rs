//! Shared test helpers: in-process servers on ephemeral ports, external peers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use agentry::agents::{Conformance, Echo};
use agentry_a2a::model::AgentCard;
use agentry_a2a::server::{A2aServer, AgentExecutor, AgentService, Credentials, ServerConfig};
use agentry_a2a::store::{MemoryStore, TaskStore};
use tokio::sync::oneshot;

pub(crate) const TOKEN: &str = "test-token-123";

/// A running server; dropping it shuts the server down.
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    pub base: String,
    _stop: oneshot::Sender<()>,
}

pub(crate) async fn serve(svc: AgentService, config: ServerConfig) -> TestServer {
    let (listener, _) = bind().await;
    serve_on(listener, svc, config).await
}

/// A listener bound first, so the card can carry the real URL.
pub(crate) async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    (listener, url)
}

pub(crate) async fn serve_on(
    listener: tokio::net::TcpListener,
    svc: AgentService,
    config: ServerConfig,
) -> TestServer {
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let server = A2aServer::new().config(config).agent("/", svc);
    tokio::spawn(async move {
        server
            .serve(listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    TestServer {
        addr,
        base: format!("http://{addr}/"),
        _stop: stop,
    }
}

pub(crate) fn loopback_push() -> ServerConfig {
    let mut c = ServerConfig::default();
    c.push.allow_private = true;
    c.push.backoff = std::time::Duration::from_millis(20);
    c
}

/// The conformance agent with an extended card behind [`TOKEN`], push to loopback allowed.
pub(crate) async fn conformance_server(store: Arc<dyn TaskStore>) -> TestServer {
    let (listener, url) = bind().await;
    let card = Conformance::card(&url);
    let mut extended = card.clone();
    extended.description.push_str(" (extended)");
    let svc = AgentService::new(card, Conformance::default(), store).with_extended_card(
        extended,
        Credentials {
            bearer_tokens: vec![TOKEN.into()],
            ..Default::default()
        },
    );
    serve_on(listener, svc, loopback_push()).await
}

/// The conformance agent with its task events shared through `events` (a replica).
pub(crate) async fn conformance_server_with_events(
    store: Arc<dyn TaskStore>,
    events: Arc<dyn agentry_a2a::server::TaskEvents>,
) -> TestServer {
    let (listener, url) = bind().await;
    let svc = AgentService::new(Conformance::card(&url), Conformance::default(), store)
        .with_events(events);
    serve_on(listener, svc, loopback_push()).await
}

pub(crate) async fn agent_server(
    card: impl FnOnce(&str) -> AgentCard,
    agent: impl AgentExecutor,
) -> TestServer {
    let (listener, url) = bind().await;
    let svc = AgentService::new(card(&url), agent, Arc::new(MemoryStore::default()));
    serve_on(listener, svc, loopback_push()).await
}

pub(crate) async fn echo_server() -> TestServer {
    agent_server(Echo::card, Echo::default()).await
}

/// The repository root.
pub(crate) fn repo_root() -> PathBuf {
    agentry_testkit::repo_root()
}

/// The Python of the interop virtualenv, or `None` (with a loud note) when it is absent and
/// not required. `AGENTRY_REQUIRE_INTEROP=1` (set by the test script and CI) turns absence
/// into a failure.
pub(crate) fn interop_python() -> Option<PathBuf> {
    let p = std::env::var_os("AGENTRY_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv-interop/bin/python"));
    require_peer(p, "a2a-sdk 0.3 (.venv-interop)")
}

/// The Python of the a2a-sdk 1.x virtualenv (`.venv-a2a1`), like [`interop_python`].
pub(crate) fn interop1_python() -> Option<PathBuf> {
    let p = std::env::var_os("AGENTRY_INTEROP1_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv-a2a1/bin/python"));
    require_peer(p, "a2a-sdk 1.x")
}

/// The folder holding the npm A2A peers (`@a2a-js/sdk` installed), like [`interop_python`].
pub(crate) fn js_peers() -> Option<PathBuf> {
    let dir = repo_root().join("tests/a2a-peers");
    let sdk = dir.join("node_modules/@a2a-js/sdk/package.json");
    require_peer(sdk, "@a2a-js/sdk").map(|_| dir)
}

fn require_peer(p: PathBuf, what: &str) -> Option<PathBuf> {
    agentry_testkit::require_path(
        agentry_testkit::Peer::Interop,
        p,
        &format!("the {what} peer; run scripts/test.sh, which installs it"),
    )
}

/// One cell of the interop matrix (peer x direction x transport). It is written to the file
/// named by `AGENTRY_INTEROP_MATRIX` when dropped: PASS if [`MatrixCell::pass`] was called,
/// FAIL otherwise (a failed assertion unwinds through the drop). The test script prints the
/// file as a table at the end of the run.
pub(crate) struct MatrixCell {
    line: String,
    passed: bool,
}

impl MatrixCell {
    pub(crate) fn new(peer: &str, direction: &str, transport: &str) -> Self {
        MatrixCell {
            line: format!("{peer}\t{direction}\t{transport}"),
            passed: false,
        }
    }

    pub(crate) fn pass(mut self) {
        self.passed = true;
    }
}

impl Drop for MatrixCell {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("AGENTRY_INTEROP_MATRIX") else {
            return;
        };
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let verdict = if self.passed { "PASS" } else { "FAIL" };
            let _ = writeln!(f, "{}\t{verdict}", self.line);
        }
    }
}

/// A free TCP port on loopback (for a peer process to listen on).
pub(crate) fn free_port() -> u16 {
    agentry_testkit::free_port()
}

/// A peer server process (another SDK's), killed on drop.
pub(crate) struct Peer {
    child: tokio::process::Child,
    pub base: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Peer {
    /// Spawns `cmd` (stdout silenced) and waits until it serves an agent card at `base`.
    pub(crate) async fn start(mut cmd: tokio::process::Command, base: String) -> Peer {
        let child = cmd
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the peer server");
        let peer = Peer { child, base };
        let cfg = agentry_a2a::client::ClientConfig::default();
        for _ in 0..300 {
            if agentry_a2a::client::fetch_card(&peer.base, &cfg)
                .await
                .is_ok()
            {
                return peer;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the peer server did not come up at {}", peer.base);
    }
}

/// A user message with one text part.
pub(crate) fn user(text: &str) -> agentry_a2a::model::Message {
    agentry_a2a::model::Message::text(agentry_a2a::model::Role::User, text)
}

/// The JSON-RPC code of an error that must be one.
pub(crate) fn rpc_code(e: agentry_a2a::A2aError) -> i64 {
    match e {
        agentry_a2a::A2aError::Rpc(r) => r.code,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

/// The text of a task's status message ("" without one).
pub(crate) fn status_text(t: &agentry_a2a::model::Task) -> String {
    t.status
        .message
        .as_ref()
        .map(|m| m.text_content())
        .unwrap_or_default()
}

/// What a [`webhook`] received: each POST's headers and JSON body (`null` when not JSON).
pub(crate) type Hooked = Arc<tokio::sync::Mutex<Vec<(axum::http::HeaderMap, serde_json::Value)>>>;

/// A push-notification receiver on loopback: its URL (`.../hook`) and what it received.
pub(crate) async fn webhook() -> (String, Hooked) {
    use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
    async fn hook(State(seen): State<Hooked>, headers: HeaderMap, body: Bytes) -> &'static str {
        let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        seen.lock().await.push((headers, body));
        "ok"
    }
    let seen: Hooked = Default::default();
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, seen)
}
