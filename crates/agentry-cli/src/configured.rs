//! Configured agents: `agentry serve --config agentry.toml` and `agentry chat --config agent.toml`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_a2a::A2aError;
use agentry_a2a::model::AgentCard;
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
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// Remote A2A agents workflows may use by name.
    #[serde(default)]
    pub remotes: Vec<RemoteEntry>,
    /// The model that plans workflows (`agentry plan`, `agentry run`).
    #[serde(default)]
    pub planner: Option<PlannerSection>,
    /// Serve an orchestrator agent running these workflows.
    #[serde(default)]
    pub orchestrator: Option<OrchestratorSection>,
    #[serde(default)]
    pub team: Option<TeamSection>,
}

/// `[team]`: the built-in RAG → PPT team behind `agentry run`, configured. With a `model`
/// (any provider: an OpenAI-compatible server, the embedded model, a scripted transcript) the
/// model reads the request and writes the cited summary; without one the team is rule-based
/// and extractive.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSection {
    pub model: Option<agentry_core::agent::ModelConfig>,
    pub collection: Option<String>,
    pub output: Option<PathBuf>,
    pub db: Option<PathBuf>,
}

/// The `[team]` section of a config file, with relative paths resolved against the file's
/// folder; `None` when the file has none (it then configures agents for the LLM planner).
pub fn team_section(path: &Path) -> Result<Option<TeamSection>, A2aError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| other(format!("cannot read {}: {e}", path.display())))?;
    let file: ServeFile =
        parse_config(path, &text).map_err(|e| other(format!("invalid {}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok(file.team.map(|mut t| {
        if let Some(agentry_core::agent::ModelConfig::Scripted { transcript }) = &mut t.model
            && transcript.is_relative()
        {
            *transcript = base.join(&*transcript);
        }
        t.output = t.output.map(|o| base.join(o));
        t.db = t.db.map(|d| base.join(d));
        t
    }))
}

#[derive(Debug, Deserialize)]
pub struct RemoteEntry {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub skills: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct PlannerSection {
    pub model: agentry_core::agent::ModelConfig,
    #[serde(default)]
    pub max_repairs: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub struct OrchestratorSection {
    #[serde(default = "default_orchestrator_path")]
    pub path: String,
    /// Workflow files (YAML, JSON or TOML), relative to the config file.
    #[serde(default)]
    pub workflows: Vec<PathBuf>,
}

fn default_orchestrator_path() -> String {
    "/orchestrator".into()
}

/// Everything a config file sets up.
pub struct Setup {
    pub file: ServeFile,
    pub base: PathBuf,
    /// (path, config) for each configured agent.
    pub agents: Vec<(String, AgentConfig)>,
    pub registry: Arc<agentry_flow::AgentRegistry>,
}

/// The factory every command uses: built-in tools, and the embedded local model provider.
pub fn factory() -> AgentFactory {
    let mut f = AgentFactory::with_builtins();
    agentry_local::provider::register(&mut f);
    f
}

/// [`factory`] plus the specialist agent types (`rag`, `ppt`, `data`) for these configs. The
/// knowledge base is opened only when one of them is a `rag` agent: the first such agent's
/// `options.db`, else `$AGENTRY_HOME/knowledge.db` (one knowledge base per process).
pub async fn agent_factory<'a>(
    configs: impl IntoIterator<Item = &'a AgentConfig>,
) -> Result<AgentFactory, A2aError> {
    let mut f = factory();
    let kb = match configs.into_iter().find(|c| c.agent_type == "rag") {
        Some(c) => {
            let db = c.options.get("db").and_then(|v| v.as_str()).map(Path::new);
            Some(crate::jobs::open_kb(db).await?)
        }
        None => None,
    };
    agentry_specialists::kinds::register(&mut f, agentry_specialists::kinds::Resources { kb });
    Ok(f)
}

impl Setup {
    pub async fn load(path: &Path) -> Result<Self, A2aError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| other(format!("cannot read {}: {e}", path.display())))?;
        let file: ServeFile = parse_config(path, &text)
            .map_err(|e| other(format!("invalid {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mode = match file.server.agent_mode.as_deref() {
            None => agentry_flow::Mode::from_env(),
            Some("direct") => agentry_flow::Mode::Direct,
            Some("a2a") => agentry_flow::Mode::A2a,
            Some(m) => return Err(other(format!("agent_mode `{m}`: use direct or a2a"))),
        };
        let mut registry = agentry_flow::AgentRegistry::new(mode);
        let mut agents = Vec::new();
        for entry in &file.agents {
            agents.push((
                format!("/{}", entry.path.trim_matches('/')),
                load_agent(entry, &base)?,
            ));
        }
        let factory = agent_factory(agents.iter().map(|(_, c)| c)).await?;
        for (_, cfg) in &agents {
            // Workflows use their own in-process instance of each agent.
            let agent = agentry_mcp::create_agent(
                &factory,
                cfg.clone(),
                &agentry_mcp::LaunchPolicy::from_env(),
            )
            .await
            .map_err(other)?;
            registry.add_local(Arc::new(agent));
        }
        for r in &file.remotes {
            registry.add_remote(&r.name, &r.url, &r.description, r.skills.clone());
        }
        Ok(Setup {
            file,
            base,
            agents,
            registry: Arc::new(registry),
        })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.file
            .server
            .data_dir
            .clone()
            .unwrap_or_else(crate::data_dir)
    }

    /// The engine, checkpointing runs in `workflows.db`.
    pub fn engine(&self) -> Result<agentry_flow::Engine, A2aError> {
        let store = SqliteStore::open(self.data_dir().join("workflows.db"))
            .map_err(|e| other(format!("workflow store: {e}")))?;
        Ok(agentry_flow::Engine::new(self.registry.clone()).with_store(Arc::new(store)))
    }

    pub fn planner(&self) -> Result<agentry_flow::Planner, A2aError> {
        let p = self.file.planner.as_ref().ok_or_else(|| {
            other("no [planner] in the config: add one with a model, e.g. [planner.model] provider = \"openai\" ...")
        })?;
        let mut model = p.model.clone();
        if let agentry_core::agent::ModelConfig::Scripted { transcript } = &mut model
            && transcript.is_relative()
        {
            *transcript = self.base.join(&*transcript);
        }
        let llm = factory().model(&model).map_err(other)?;
        let mut planner = agentry_flow::Planner::new(llm);
        if let Some(n) = p.max_repairs {
            planner.max_repairs = n;
        }
        Ok(planner)
    }

    pub fn workflows(&self) -> Result<Vec<agentry_flow::Workflow>, A2aError> {
        let Some(o) = &self.file.orchestrator else {
            return Ok(Vec::new());
        };
        o.workflows
            .iter()
            .map(|w| agentry_flow::Workflow::from_file(self.base.join(w)).map_err(other))
            .collect()
    }
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
    /// Where workflow steps go first for agents that are both local and remote: `a2a`
    /// (remote, falling back to local) or `direct` (local). Default: $AGENTRY_AGENT_MODE, else a2a.
    pub agent_mode: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            host: "127.0.0.1".into(),
            port: 8080,
            store: "sqlite".into(),
            data_dir: None,
            public_url: None,
            agent_mode: None,
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

pub(crate) fn other(e: impl std::fmt::Display) -> A2aError {
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
    let setup = Setup::load(path).await?;
    let file = &setup.file;
    let port = port.unwrap_or(file.server.port);
    let public = file
        .server
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}:{port}", file.server.host));
    let public = public.trim_end_matches('/').to_owned();
    let data_dir = setup.data_dir();
    let store_for = |name: &str| -> Result<Arc<dyn TaskStore>, A2aError> {
        Ok(match file.server.store.as_str() {
            "memory" => Arc::new(MemoryStore::default()),
            "sqlite" => Arc::new(
                SqliteStore::open(data_dir.join(format!("{name}.db")))
                    .map_err(|e| other(format!("task store for {name}: {e}")))?,
            ),
            s => return Err(other(format!("unknown store `{s}`: use sqlite or memory"))),
        })
    };
    let url_for = |p: &str| {
        if p == "/" {
            format!("{public}/")
        } else {
            format!("{public}{p}")
        }
    };
    let mut server = A2aServer::new().config(ServerConfig::default());
    let mut index = Vec::new();
    let mut root_taken = false;
    let mut entries: Vec<(String, AgentCard, AgentService)> = Vec::new();
    let factory = agent_factory(setup.agents.iter().map(|(_, c)| c)).await?;
    for (p, cfg) in &setup.agents {
        let store = store_for(&cfg.name)?;
        // Runs are checkpointed beside their tasks, so an interrupted run can resume.
        let agent = agentry_mcp::create_agent(
            &factory,
            cfg.clone(),
            &agentry_mcp::LaunchPolicy::from_env(),
        )
        .await
        .map_err(other)?
        .with_checkpoints(Arc::new(StoreCheckpoints(store.clone())));
        let card = agent.card(&url_for(p));
        entries.push((
            p.clone(),
            card.clone(),
            AgentService::new(card, ServedAgent(Arc::new(agent)), store),
        ));
    }
    if let Some(o) = &file.orchestrator {
        let workflows = setup.workflows()?;
        let engine = Arc::new(setup.engine()?);
        let mut orch = agentry_flow::a2a::Orchestrator::new("orchestrator", engine, workflows);
        if file.planner.is_some() {
            orch = orch.with_planner(Arc::new(setup.planner()?));
        }
        let p = format!("/{}", o.path.trim_matches('/'));
        let card = orch.card(&url_for(&p));
        entries.push((
            p,
            card.clone(),
            AgentService::new(card, orch, store_for("orchestrator")?),
        ));
    }
    for (p, card, svc) in entries {
        root_taken |= p == "/";
        let url = url_for(&p);
        index.push(serde_json::json!({
            "name": card.name, "description": card.description, "url": url,
            "card": format!("{}/.well-known/agent-card.json", url.trim_end_matches('/')),
        }));
        eprintln!("agentry: agent `{}` at {url}", card.name);
        server = server.agent(&p, svc);
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
    let factory = agent_factory([&cfg]).await?;
    let agent = agentry_mcp::create_agent(&factory, cfg, &agentry_mcp::LaunchPolicy::from_env())
        .await
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
