//! The built-in echo agent on the A2A server alone (no agent core, no specialists), for
//! benchmarks and quick interop checks: the same server `agentry serve --agent echo` runs,
//! in a binary that builds in a fraction of the time.
//!
//! ```text
//! cargo run --release -p agentry --no-default-features --example serve_echo -- PORT [message|task] [SQLITE_DB]
//! ```

use std::sync::Arc;

use agentry::agents::{Echo, EchoMode};
use agentry_a2a::server::{A2aServer, AgentService};
use agentry_a2a::store::{MemoryStore, SqliteStore, TaskStore};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port: u16 = args.first().map(|p| p.parse()).transpose()?.unwrap_or(8080);
    let mode = match args.get(1).map(String::as_str) {
        Some("message") => EchoMode::Message,
        Some("task") | None => EchoMode::Task,
        Some(other) => return Err(format!("mode {other:?}: use message or task").into()),
    };
    let store: Arc<dyn TaskStore> = match args.get(2) {
        Some(path) => Arc::new(SqliteStore::open(path)?),
        None => Arc::new(MemoryStore::default()),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let url = format!("http://127.0.0.1:{port}/");
    let agent = AgentService::new(Echo::card(&url), Echo { mode }, store);
    eprintln!("echo ({mode:?}) on {url}");
    A2aServer::new()
        .agent("/", agent)
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
