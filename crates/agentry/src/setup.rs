//! Agents from configuration: the factory with every agent type and model provider this build
//! has, agents with their MCP tools connected, and [`Setup`], everything an `agentry.toml`
//! sets up for workflows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentry_a2a::client::Auth;
use agentry_a2a::store::SqliteStore;
use agentry_core::a2a::AgentHandle;
use agentry_core::agent::{Agent, AgentConfig, AgentFactory};
use agentry_flow::bus::{EventBus, PublishEvent};
use agentry_flow::{
    AgentRegistry, Engine, Mode, Planner, RemoteAccess, TokenExchangeClient, Workflow,
};

use crate::Error;
use crate::config::{AgentEntry, Config, RemoteEntry};

/// The factory every entry point uses: the built-in tools and `base` type, and the embedded
/// model provider (`provider = "local"`) when the `local` feature is on.
pub fn factory() -> AgentFactory {
    #[allow(unused_mut)]
    let mut f = AgentFactory::with_builtins();
    #[cfg(feature = "local")]
    agentry_local::provider::register(&mut f);
    f
}

/// [`factory`] plus the specialist agent types (`rag`, `ppt`, `data`) for these configs. The
/// knowledge base is opened only when one of them is a `rag` agent: the first such agent's
/// `options.db`, else `$AGENTRY_HOME/knowledge.db` (one knowledge base per process).
pub async fn agent_factory<'a>(
    configs: impl IntoIterator<Item = &'a AgentConfig>,
) -> Result<AgentFactory, Error> {
    #[allow(unused_mut)]
    let mut f = factory();
    #[cfg(feature = "specialists")]
    {
        let kb = match configs.into_iter().find(|c| c.agent_type == "rag") {
            Some(c) => {
                let db = c.options.get("db").and_then(|v| v.as_str()).map(Path::new);
                Some(crate::knowledge::open(db).await?)
            }
            None => None,
        };
        agentry_specialists::kinds::register(&mut f, agentry_specialists::kinds::Resources { kb });
    }
    #[cfg(feature = "data")]
    agentry_data::kind::register(&mut f, vec![crate::home_dir()]);
    #[cfg(not(feature = "specialists"))]
    let _ = configs;
    Ok(f)
}

/// Makes the agent a config describes, connecting its MCP servers (with the `mcp` feature; the
/// programs stdio servers may launch come from `AGENTRY_MCP_ALLOW`; unset, none may).
pub async fn create_agent(factory: &AgentFactory, config: AgentConfig) -> Result<Agent, Error> {
    create_agent_allowing(factory, config, &[]).await
}

/// `$AGENTRY_MCP_ALLOW`'s programs and `allow`'s.
#[cfg(feature = "mcp")]
pub(crate) fn launch_policy(allow: &[String]) -> agentry_mcp::LaunchPolicy {
    let mut policy = agentry_mcp::LaunchPolicy::from_env();
    policy.allow_any |= allow.iter().any(|a| a.trim() == "*");
    policy.allowed.extend(allow.iter().cloned());
    policy
}

/// As [`create_agent`], stdio servers may also launch the programs of `allow` (a config's
/// `[server] mcp_allow`).
pub(crate) async fn create_agent_allowing(
    factory: &AgentFactory,
    config: AgentConfig,
    allow: &[String],
) -> Result<Agent, Error> {
    #[cfg(feature = "mcp")]
    {
        Ok(agentry_mcp::create_agent(factory, config, &launch_policy(allow)).await?)
    }
    #[cfg(not(feature = "mcp"))]
    {
        let _ = allow;
        if !config.mcp_servers.is_empty() {
            return Err(Error::Disabled {
                what: format!("agent `{}` names MCP servers, which", config.name),
                feature: "mcp",
            });
        }
        Ok(factory.create_agent(config)?)
    }
}

/// The agent of one config file (TOML or YAML), with every type and tool source this build
/// has: what `agentry chat` talks to.
pub async fn agent_from_file(path: impl AsRef<Path>) -> Result<Agent, Error> {
    let config = AgentConfig::from_file(path)?;
    let factory = agent_factory([&config]).await?;
    create_agent(&factory, config).await
}

impl AgentEntry {
    /// The configured agent of this entry (from its file or inline table); `None` for a
    /// built-in agent.
    pub fn agent_config(&self) -> Result<Option<AgentConfig>, Error> {
        match (&self.config, &self.agent, &self.builtin) {
            (Some(file), None, None) => Ok(Some(AgentConfig::from_file(file)?)),
            (None, Some(inline), None) => Ok(Some(inline.clone())),
            (None, None, Some(_)) => Ok(None),
            _ => Err(Error::Invalid(format!(
                "agent at {}: give one of `config = \"file\"`, an inline [agents.agent] table, or \
                 `builtin = {{ kind = \"...\" }}`",
                self.path
            ))),
        }
    }

    /// The path, normalized to `/` or `/name`.
    pub fn normalized_path(&self) -> String {
        format!("/{}", self.path.trim_matches('/'))
    }
}

/// Everything a config file sets up for workflows: its agents (each in-process) and remotes in
/// one registry, the engine with durable runs, the planner, the orchestrator's workflows.
pub struct Setup {
    /// The file as loaded.
    pub config: Config,
    /// (path, config) of each configured (not built-in) agent.
    pub agents: Vec<(String, AgentConfig)>,
    /// Every agent workflows may use, by name.
    pub registry: Arc<AgentRegistry>,
    /// The factory the agents were made with (its knowledge base opened once).
    pub factory: AgentFactory,
    /// The bus of `[events]` (the agents' `publish_event` tool publishes on it); `None`
    /// without that section.
    pub events: Option<Arc<dyn EventBus>>,
}

impl Setup {
    /// Loads `path` and makes its agents.
    pub async fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::from_config(Config::load(path)?).await
    }

    /// Makes the agents of a loaded config.
    pub async fn from_config(config: Config) -> Result<Self, Error> {
        let configs = Configs::read(config).await?;
        let mut made = Vec::new();
        for (_, cfg) in &configs.agents {
            made.push(Arc::new(configs.create(cfg.clone()).await?) as Arc<dyn AgentHandle>);
        }
        configs.assemble(made)
    }
}

/// A config's agent configs and the factory to make them with, read before any agent is made
/// (so `serve` makes each agent once, for its path and for workflows alike).
pub(crate) struct Configs {
    pub(crate) config: Config,
    /// (path, config) of each configured (not built-in) agent.
    pub(crate) agents: Vec<(String, AgentConfig)>,
    pub(crate) factory: AgentFactory,
    pub(crate) events: Option<Arc<dyn EventBus>>,
    mode: Mode,
}

impl Configs {
    /// Reads the agent configs and makes the factory (opening its knowledge base once).
    pub(crate) async fn read(config: Config) -> Result<Self, Error> {
        let mode = match config.server.agent_mode.as_deref() {
            None => Mode::from_env(),
            Some("direct") => Mode::Direct,
            Some("a2a") => Mode::A2a,
            Some(m) => {
                return Err(Error::Invalid(format!(
                    "agent_mode `{m}`: use direct or a2a"
                )));
            }
        };
        let mut agents = Vec::new();
        for entry in &config.agents {
            if let Some(c) = entry.agent_config()? {
                agents.push((entry.normalized_path(), c));
            }
        }
        let mut factory = agent_factory(agents.iter().map(|(_, c)| c)).await?;
        let events = crate::events::open_bus(&config).await?;
        if let (Some(bus), Some(e)) = (&events, &config.events)
            && !e.agent_topics.is_empty()
        {
            factory.register_tool(PublishEvent::new(bus.clone(), e.agent_topics.clone()));
        }
        Ok(Configs {
            config,
            agents,
            factory,
            events,
            mode,
        })
    }

    /// Makes one of the agents, its stdio MCP servers allowed what `[server] mcp_allow` and
    /// `$AGENTRY_MCP_ALLOW` allow.
    pub(crate) async fn create(&self, mut config: AgentConfig) -> Result<Agent, Error> {
        // Publishing starts other agents: only an agent whose config names the tool has it
        // (an empty `tools` list, "every tool of the type", does not).
        if !config.tools.iter().any(|t| t == crate::events::TOOL) {
            config.deny_tools.push(crate::events::TOOL.into());
        }
        create_agent_allowing(&self.factory, config, &self.config.server.mcp_allow).await
    }

    /// The setup over `made`, the agents of [`Configs::agents`] in their order, each the one
    /// instance that serves it and that workflows use.
    pub(crate) fn assemble(self, made: Vec<Arc<dyn AgentHandle>>) -> Result<Setup, Error> {
        let mut registry = AgentRegistry::new(self.mode);
        if let Some(d) = &self.config.delegation {
            registry = registry.with_delegation(Arc::new(TokenExchangeClient::new(
                d.token_url.clone(),
                d.client_id.clone(),
                crate::serve::secret(&d.client_secret)?,
            )));
        }
        if let Some(t) = &self.config.client_tls {
            registry = registry.with_client_tls(client_tls(t)?);
        }
        for agent in made {
            registry.add_local(agent);
        }
        for r in &self.config.remotes {
            let access = remote_access(r, self.config.delegation.is_some())?;
            registry.add_remote_with(&r.name, &r.url, &r.description, r.skills.clone(), access);
        }
        Ok(Setup {
            config: self.config,
            agents: self.agents,
            registry: Arc::new(registry),
            factory: self.factory,
            events: self.events,
        })
    }
}

/// The credentials a `[[remotes]]` entry is called with: at most one of `delegate`,
/// `bearer_token` and `api_key`.
fn remote_access(r: &RemoteEntry, delegation: bool) -> Result<RemoteAccess, Error> {
    let invalid = |why: &str| Err(Error::Invalid(format!("[[remotes]] `{}`: {why}", r.name)));
    let chosen = [r.delegate, r.bearer_token.is_some(), r.api_key.is_some()];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return invalid("use one of delegate, bearer_token and api_key");
    }
    if r.audience.is_some() && !r.delegate {
        return invalid("audience is for delegated tokens (delegate = true)");
    }
    if r.api_key_header.is_some() && r.api_key.is_none() {
        return invalid("api_key_header without api_key");
    }
    if r.delegate {
        if !delegation {
            return invalid("delegate = true needs a [delegation] section (the token service)");
        }
        return Ok(RemoteAccess::Delegated {
            audience: r.audience.clone(),
        });
    }
    let secret = |spec: &str| {
        crate::serve::secret(spec)
            .map_err(|e| Error::Invalid(format!("[[remotes]] `{}`: {e}", r.name)))
    };
    if let Some(t) = &r.bearer_token {
        return Ok(RemoteAccess::Static(Auth::Bearer(secret(t)?)));
    }
    if let Some(k) = &r.api_key {
        let header = r
            .api_key_header
            .clone()
            .unwrap_or_else(|| "X-API-Key".into());
        return Ok(RemoteAccess::Static(Auth::ApiKey(header, secret(k)?)));
    }
    Ok(RemoteAccess::Client)
}

impl Setup {
    /// The workflow engine over the registry, checkpointing runs in `<state_dir>/workflows.db`
    /// so `resume` can continue them after a crash.
    pub fn engine(&self) -> Result<Engine, Error> {
        let path = self.config.server.state_dir().join("workflows.db");
        let runs = agentry_core::runs::SqliteRunStore::open(&path)?;
        Ok(self.engine_on(Arc::new(runs)))
    }

    /// The workflow engine over the registry, checkpointing runs in `runs` (a shared
    /// database, where another replica can resume them).
    pub fn engine_on(&self, runs: Arc<dyn agentry_core::runs::RunStore>) -> Engine {
        Engine::new(self.registry.clone()).with_store(runs)
    }

    /// The planner of the `[planner]` section.
    pub fn planner(&self) -> Result<Planner, Error> {
        let p = self.config.planner.as_ref().ok_or_else(|| {
            Error::Invalid(
                "no [planner] in the config: add one with a model, e.g. [planner.model] \
                 provider = \"openai\" ..."
                    .into(),
            )
        })?;
        let llm = factory().model(&p.model)?;
        let mut planner = Planner::new(llm);
        if let Some(n) = p.max_repairs {
            planner.max_repairs = n;
        }
        Ok(planner)
    }

    /// The orchestrator's workflows.
    pub fn workflows(&self) -> Result<Vec<Workflow>, Error> {
        let Some(o) = &self.config.orchestrator else {
            return Ok(Vec::new());
        };
        o.workflows
            .iter()
            .map(|w| Ok(Workflow::from_file(w)?))
            .collect()
    }
}

/// Opens (creating) a SQLite task store.
pub(crate) fn open_store(
    path: &Path,
    durability: agentry_a2a::store::Durability,
) -> Result<SqliteStore, Error> {
    SqliteStore::open_with(path, durability).map_err(|source| Error::Store {
        path: PathBuf::from(path),
        source,
    })
}

/// `[client_tls]` as the A2A client's TLS settings (files read now: a missing one stops the
/// start with its name).
fn client_tls(
    t: &crate::config::ClientTlsSection,
) -> Result<agentry_a2a::client::ClientTls, Error> {
    use agentry_a2a::server::tls::TlsError;
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| TlsError::File {
            path: p.display().to_string(),
            reason: e.to_string(),
        })
    };
    let identity = match (&t.cert, &t.key) {
        (Some(c), Some(k)) => {
            let mut pem = read(c)?;
            pem.push(b'\n');
            pem.extend(read(k)?);
            Some(pem)
        }
        (None, None) => None,
        _ => {
            return Err(Error::Invalid(
                "[client_tls] needs both cert and key, or neither".into(),
            ));
        }
    };
    Ok(agentry_a2a::client::ClientTls {
        ca_pem: t.ca.as_deref().map(read).transpose()?,
        identity_pem: identity,
    })
}
