//! The built-in echo agent on the A2A server alone (no agent core, no specialists), for
//! benchmarks and quick interop checks: the same server `agentry serve --agent echo` runs,
//! in a binary that builds in a fraction of the time.
//!
//! ```text
//! cargo run --release -p agentry --no-default-features --features mimalloc --example serve_echo -- PORT [message|task|conformance|bare] [SQLITE_DB [process|power]]
//! ```
//!
//! With the `postgres` feature, a `postgres://` URL instead of the SQLite file keeps the
//! tasks in PostgreSQL (namespace `bench-echo-PID`, so runs do not see each other's tasks;
//! `AGENTRY_BENCH_NS=NAME` instead, for replicas sharing them). With the `nats` feature,
//! `AGENTRY_BENCH_BUS=nats://...` shares task events with the other replicas (the load
//! test's replicated run).
//!
//! `bare` is no A2A server at all: an axum handler that parses the JSON-RPC body into a JSON
//! tree and answers a message echoing its text, with the card route `bench/run.sh` waits
//! on. It is the ceiling the message workload is measured against (same HTTP stack, same
//! allocator, no protocol layer).
//!
//! `conformance` serves the conformance agent instead (its `test-resubscribe-message-id`
//! tasks stream for `AGENTRY_STREAM_SECONDS`, default 10: the load test's open streams). The
//! last argument is the SQLite store's durability (default `power`).
//!
//! Governance, for `bench/governance.sh`: `AGENTRY_BENCH_JWKS=FILE` and
//! `AGENTRY_BENCH_ISSUER=ISS` require a JWT from that issuer for this URL with the scope
//! `echo.use`; `AGENTRY_BENCH_AUDIT=DB` records every decision in that audit trail
//! (committed before serving; queued with `AGENTRY_BENCH_AUDIT_QUEUED=1`).

use std::sync::Arc;

/// The allocator of `agentry serve` (the CLI's), so the benchmark measures what users run;
/// the bare echo gets it too.
#[global_allocator]
static GLOBAL: agentry::alloc::MiMalloc = agentry::alloc::MiMalloc;

use agentry::agents::{Conformance, Echo, EchoMode};
use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::{Durability, MemoryStore, SqliteStore, TaskStore};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port: u16 = args.first().map(|p| p.parse()).transpose()?.unwrap_or(8080);
    if args.get(1).map(String::as_str) == Some("bare") {
        return bare(port).await;
    }
    let mode = match args.get(1).map(String::as_str) {
        Some("message") => Some(EchoMode::Message),
        Some("task") | None => Some(EchoMode::Task),
        Some("conformance") => None,
        Some(other) => {
            return Err(format!("mode {other:?}: use message, task or conformance").into());
        }
    };
    let store: Arc<dyn TaskStore> = match args.get(2) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            #[cfg(feature = "postgres")]
            {
                let db = agentry::postgres::Database::connect(url).await?;
                let ns = std::env::var("AGENTRY_BENCH_NS")
                    .unwrap_or_else(|_| format!("bench-echo-{}", std::process::id()));
                Arc::new(db.task_store(&ns))
            }
            #[cfg(not(feature = "postgres"))]
            {
                return Err(format!("{url}: built without the `postgres` feature").into());
            }
        }
        Some(path) => {
            let durability = match args.get(3).map(String::as_str) {
                Some("power") | None => Durability::Power,
                Some("process") => Durability::Process,
                Some(other) => return Err(format!("durability {other:?}: process or power").into()),
            };
            Arc::new(SqliteStore::open_with(path, durability)?)
        }
        None => Arc::new(MemoryStore::default()),
    };
    let listener = agentry_a2a::server::listen::bind(("127.0.0.1", port)).await?;
    let url = format!("http://127.0.0.1:{port}/");
    let agent = match mode {
        Some(mode) => {
            eprintln!("echo ({mode:?}) on {url}");
            AgentService::new(Echo::card(&url), Echo { mode }, store)
        }
        None => {
            let seconds: u64 = std::env::var("AGENTRY_STREAM_SECONDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(10);
            eprintln!("conformance on {url}");
            let agent = Conformance {
                resubscribe_window: std::time::Duration::from_secs(seconds),
            };
            AgentService::new(Conformance::card(&url), agent, store)
        }
    };
    let agent = shared_events(governed(agent, &url)?).await?;
    let mut config = agentry_a2a::server::ServerConfig::default();
    // The soak benchmark's webhook listens on loopback.
    config.push.allow_private = std::env::var_os("AGENTRY_ALLOW_PRIVATE_PUSH").is_some();
    A2aServer::new()
        .config(config)
        .agent("/", agent)
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// The ceiling: parse the body, answer a message with its text, nothing else.
async fn bare(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    use axum::routing::{get, post};
    use serde_json::{Value, json};
    async fn echo(body: axum::body::Bytes) -> axum::response::Response {
        let req: Value = serde_json::from_slice(&body).unwrap_or_default();
        let p = &req["params"]["message"];
        let text = p["parts"][0]["text"].as_str().unwrap_or_default();
        let v1 = p["role"] == "ROLE_USER";
        let message = if v1 {
            json!({"message": {"messageId": agentry_a2a::new_id(), "role": "ROLE_AGENT",
                               "parts": [{"text": text}], "contextId": p["contextId"]}})
        } else {
            json!({"kind": "message", "messageId": agentry_a2a::new_id(), "role": "agent",
                   "parts": [{"kind": "text", "text": text}], "contextId": p["contextId"]})
        };
        let out = json!({"jsonrpc": "2.0", "id": req["id"], "result": message});
        axum::response::Response::builder()
            .header("content-type", "application/json")
            .body(axum::body::Body::from(
                serde_json::to_vec(&out).unwrap_or_default(),
            ))
            .unwrap_or_default()
    }
    let app = axum::Router::new().route("/", post(echo)).route(
        "/.well-known/agent-card.json",
        get(|| async { axum::Json(json!({"name": "bare"})) }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("bare axum echo on http://127.0.0.1:{port}/");
    axum::serve(listener, app).await?;
    Ok(())
}

/// Task events shared with other replicas over NATS, when `AGENTRY_BENCH_BUS` names one.
async fn shared_events(agent: AgentService) -> Result<AgentService, Box<dyn std::error::Error>> {
    let Ok(url) = std::env::var("AGENTRY_BENCH_BUS") else {
        return Ok(agent);
    };
    #[cfg(feature = "nats")]
    {
        let events = agentry::nats::NatsEvents::connect(&url).await?;
        eprintln!("task events shared on {url}");
        Ok(agent.with_events(Arc::new(events)))
    }
    #[cfg(not(feature = "nats"))]
    {
        let _ = agent;
        Err(format!("{url}: built without the `nats` feature").into())
    }
}

/// JWT verification and the audit trail, when the benchmark asks for them.
fn governed(
    mut agent: AgentService,
    url: &str,
) -> Result<AgentService, Box<dyn std::error::Error>> {
    use agentry::governance::{AuditLog, JwtPolicy, JwtVerifier};
    use agentry::governed::{AuditTrail, JwtBearer};
    if let (Ok(jwks), Ok(issuer)) = (
        std::env::var("AGENTRY_BENCH_JWKS"),
        std::env::var("AGENTRY_BENCH_ISSUER"),
    ) {
        let verifier =
            JwtVerifier::from_jwks_file(jwks.as_ref(), JwtPolicy::new(issuer, url.to_owned()))?;
        agent = agent.with_credentials(agentry_a2a::server::Credentials {
            verifier: Some(Arc::new(JwtBearer(verifier))),
            required_scopes: vec!["echo.use".into()],
            required_for_all: true,
            ..Default::default()
        });
        eprintln!("JWTs required");
    }
    if let Ok(db) = std::env::var("AGENTRY_BENCH_AUDIT") {
        let log = Arc::new(AuditLog::open(db.as_ref())?);
        let trail = if std::env::var_os("AGENTRY_BENCH_AUDIT_QUEUED").is_some() {
            AuditTrail::queued(log)
        } else {
            AuditTrail::durable(log)
        };
        agent = agent.with_access_log(Arc::new(trail));
        eprintln!("audited in {db}");
    }
    Ok(agent)
}
