//! Configured agents: `agentry serve --config agentry.toml` and `agentry chat --config agent.toml`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_a2a::server::{A2aServer, AgentService, ServerConfig};
use agentry_a2a::store::{MemoryStore, SqliteStore, TaskStore};
use agentry_core::a2a::{ServedAgent, describe_step};
use agentry_core::agent::{AgentConfig, AgentFactory, parse_config};
use agentry_core::llm::BoxFuture;
use agentry_core::react::{Outcome, Step};
use agentry_core::run::{RunHooks, StoreCheckpoints};
use serde::Deserialize;

/// `agentry.toml`: the server and the agents it serves.
#[derive(Debug, Deserialize)]
pub struct ServeFile {
    #[serde(default)]
    pub server: ServerSection,
    pub agents: Vec<AgentEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct ServerSection {
    pub host: String,
    pub port: u16,
    /// `sqlite` (default) or `memory`.
    pub store: String,
    /// Where SQLite files go; default $AGENTRY_HOME.
    pub data_dir: Option<PathBuf>,
    /// Public base URL for the cards; default http://HOST:PORT.
    pub public_url: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            host: "127.0.0.1".into(),
            port: 8080,
            store: "sqlite".into(),
            data_dir: None,
            public_url: None,
        }
    }
}

/// One served agent: a path and its config (a file, or inline).
#[derive(Debug, Deserialize)]
pub struct AgentEntry {
    pub path: String,
    #[serde(default)]
    pub config: Option<PathBuf>,
    #[serde(default)]
    pub agent: Option<AgentConfig>,
}

fn other(e: impl std::fmt::Display) -> A2aError {
    A2aError::Other(e.to_string())
}

fn load_agent(entry: &AgentEntry, base: &Path) -> Result<AgentConfig, A2aError> {
    match (&entry.config, &entry.agent) {
        (Some(file), None) => {
            let p = if file.is_relative() {
                base.join(file)
            } else {
                file.clone()
            };
            AgentConfig::from_file(&p).map_err(other)
        }
        (None, Some(inline)) => {
            let mut c = inline.clone();
            if let agentry_core::agent::ModelConfig::Scripted { transcript } = &mut c.model
                && transcript.is_relative()
            {
                *transcript = base.join(&*transcript);
            }
            Ok(c)
        }
        _ => Err(A2aError::Other(format!(
            "agent at {}: give either `config = \"file\"` or an inline [agents.agent] table",
            entry.path
        ))),
    }
}

/// Serves every configured agent at its path, plus `GET /agents` (and `GET /` when no agent
/// sits at the root) listing them.
pub async fn serve(
    path: &Path,
    port: Option<u16>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), A2aError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| other(format!("cannot read {}: {e}", path.display())))?;
    let file: ServeFile =
        parse_config(path, &text).map_err(|e| other(format!("invalid {}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let port = port.unwrap_or(file.server.port);
    let public = file
        .server
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}:{port}", file.server.host));
    let public = public.trim_end_matches('/').to_owned();
    let data_dir = file.server.data_dir.clone().unwrap_or_else(crate::data_dir);
    let factory = AgentFactory::with_builtins();
    let mut server = A2aServer::new().config(ServerConfig::default());
    let mut index = Vec::new();
    let mut root_taken = false;
    for entry in &file.agents {
        let cfg = load_agent(entry, base)?;
        let name = cfg.name.clone();
        let agent = factory.create_agent(cfg).map_err(other)?;
        let p = format!("/{}", entry.path.trim_matches('/'));
        root_taken |= p == "/";
        let url = if p == "/" {
            format!("{public}/")
        } else {
            format!("{public}{p}")
        };
        let card = agent.card(&url);
        let store: Arc<dyn TaskStore> = match file.server.store.as_str() {
            "memory" => Arc::new(MemoryStore::default()),
            "sqlite" => Arc::new(
                SqliteStore::open(data_dir.join(format!("{name}.db")))
                    .map_err(|e| other(format!("task store for {name}: {e}")))?,
            ),
            s => return Err(other(format!("unknown store `{s}`: use sqlite or memory"))),
        };
        index.push(serde_json::json!({
            "name": name, "description": card.description, "url": url,
            "card": format!("{}/.well-known/agent-card.json", url.trim_end_matches('/')),
        }));
        eprintln!("agentry: agent `{name}` at {url}");
        // Runs are checkpointed beside their tasks, so an interrupted run can resume.
        let agent = agent.with_checkpoints(Arc::new(StoreCheckpoints(store.clone())));
        server = server.agent(
            &p,
            AgentService::new(card, ServedAgent(Arc::new(agent)), store),
        );
    }
    let index = Arc::new(serde_json::json!({ "agents": index }));
    let list = {
        let index = index.clone();
        move || {
            let index = index.clone();
            async move { axum::Json((*index).clone()) }
        }
    };
    let mut app = server
        .router()
        .route("/agents", axum::routing::get(list.clone()));
    if !root_taken {
        app = app.route("/", axum::routing::get(list));
    }
    let listener = tokio::net::TcpListener::bind((file.server.host.as_str(), port))
        .await
        .map_err(|e| other(format!("cannot listen on {}:{port}: {e}", file.server.host)))?;
    eprintln!("agentry: index at {public}/agents");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(other)
}

/// Prints steps as they happen.
struct Printer;

impl RunHooks for Printer {
    fn on_steps<'a>(&'a self, steps: &'a [Step]) -> BoxFuture<'a, ()> {
        for s in steps {
            if !matches!(s, Step::Answer { .. }) {
                eprintln!("  · {}", describe_step(s));
            }
        }
        Box::pin(async {})
    }
}

/// An interactive chat with one configured agent; each line is a turn of one conversation.
pub async fn chat(path: &Path) -> Result<(), A2aError> {
    let cfg = AgentConfig::from_file(path).map_err(other)?;
    let agent = AgentFactory::with_builtins()
        .create_agent(cfg)
        .map_err(other)?;
    let context = agentry_a2a::new_id();
    let tools = agent.tools().names().join(", ");
    eprintln!(
        "agentry: chatting with `{}` (tools: {}). Empty line or /exit to quit.",
        agent.config.name,
        if tools.is_empty() { "none" } else { &tools }
    );
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let Some(Ok(line)) = lines.next() else { break };
        let line = line.trim();
        if line.is_empty() || line == "/exit" {
            break;
        }
        let result = agent.run(line, Some(&context), &Printer, None).await;
        match result.outcome {
            Outcome::Answered { answer } => println!("{answer}"),
            Outcome::NeedsInput { question } => println!("{question}"),
            other => println!("(no answer: {})", describe_outcome(&other)),
        }
    }
    Ok(())
}

fn describe_outcome(o: &Outcome) -> String {
    match o {
        Outcome::MaxIterations => "reached max_iterations".into(),
        Outcome::TokenBudget => "reached token_budget".into(),
        Outcome::Stopped => "stopped by policy".into(),
        Outcome::Canceled => "canceled".into(),
        Outcome::Failed { error } => error.clone(),
        Outcome::Answered { .. } | Outcome::NeedsInput { .. } => "answered".into(),
    }
}
