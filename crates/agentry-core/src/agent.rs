//! Agents: a config ([`AgentConfig`]) made into an [`Agent`] by an [`AgentFactory`].
//!
//! Every agent is the same ReAct engine; an agent *type* only contributes a system prompt,
//! tools and card skills ([`AgentKind`]). The `base` type takes its prompt from the config and its
//! tools from the factory's catalog, filtered by the config's `tools` patterns.
//!
//! ```
//! use agentry_core::agent::{AgentConfig, AgentFactory};
//! let cfg: AgentConfig = toml::from_str(r#"
//!     name = "helper"
//!     description = "Answers questions"
//!     system_prompt = "You are concise."
//!     max_iterations = 4
//!     [model]
//!     provider = "scripted"
//!     transcript = "helper.json"
//! "#).unwrap();
//! assert_eq!(cfg.agent_type, "base");
//! assert!(AgentFactory::new().available_types().contains(&"base"));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentry_a2a::model::{AgentCard, AgentSkill, Artifact};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::llm::{ChatMessage, DynLlmProvider, OpenAiConfig, OpenAiProvider, ScriptedProvider};
use crate::react::{Outcome, ReactConfig, ReactState, Step};
use crate::run::{RunHooks, drive};
use crate::runs::Checkpoints;
use crate::tools::{DynTool, ToolFilter, ToolRegistry};

/// Why an agent could not be made, or could not answer.
///
/// Callers branch on the kind: [`AgentError::Unreachable`] is the one a caller may fall back
/// on (another replica, a local agent); [`AgentError::Canceled`] and [`AgentError::Stopped`]
/// are the agent's own outcomes; the rest keep their cause as the error's source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// An agent config file could not be read or parsed.
    #[error("cannot read agent config {path}: {reason}")]
    Config {
        /// The file.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The config names a type no kind was registered for: (type, available types).
    #[error("unknown agent type `{0}`; available: {1}")]
    UnknownType(String, String),
    /// The config is readable but not usable.
    #[error("agent `{agent}`: {reason}")]
    Invalid {
        /// The agent's name.
        agent: String,
        /// What cannot be used.
        reason: String,
    },
    /// The config asks for something this build was compiled without.
    #[error("{what} is not available here: {needs}")]
    Unavailable {
        /// What was asked for (a provider, an agent type).
        what: String,
        /// The feature or build that has it.
        needs: String,
    },
    /// No agent of that name is known to the caller.
    #[error("unknown agent `{0}`")]
    UnknownAgent(String),
    /// The model failed.
    #[error("model: {0}")]
    Model(#[from] crate::llm::LlmError),
    /// A remote agent could not be reached (connection refused, timeout, 5xx).
    #[error("agent unreachable: {0}")]
    Unreachable(String),
    /// A remote agent answered with an error of its own (refused, invalid, protocol error).
    #[error("remote agent {agent}: {source}")]
    Remote {
        /// The remote agent's name.
        agent: String,
        #[source]
        /// Its error.
        source: agentry_a2a::A2aError,
    },
    /// The caller's scopes do not cover what the agent's card requires: refused before any
    /// call.
    #[error("agent {agent} requires scope(s) the caller does not hold: {}", missing.join(" "))]
    Forbidden {
        /// The agent.
        agent: String,
        /// The scopes the caller lacks.
        missing: Vec<String>,
    },
    /// No delegated token could be had for a call to `agent` (the turn has no caller token
    /// to exchange, or the token service refused or could not be reached): refused before
    /// any call, never retried with other credentials.
    #[error("no delegated credential for {agent}: {reason}")]
    Delegation {
        /// The agent the call was for.
        agent: String,
        /// Why no token could be had.
        reason: String,
    },
    /// The request is not one this agent takes; the text says what it takes.
    #[error("{0}")]
    BadRequest(String),
    /// The task was canceled before the agent answered.
    #[error("agent {agent} was canceled")]
    Canceled {
        /// The agent.
        agent: String,
    },
    /// The agent ended without an answer (max iterations, token budget, its stop policy, or
    /// a remote task that failed or was rejected): `why` says which.
    #[error("agent {agent} {why}")]
    Stopped {
        /// The agent.
        agent: String,
        /// Why it stopped.
        why: String,
    },
    /// The agent's work failed (a tool, a store, a specialist's own step): the source says why.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl AgentError {
    /// Wraps any error from an agent's own work.
    pub fn failed(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        AgentError::Failed(e.into())
    }
}

/// Which model an agent uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case")]
pub enum ModelConfig {
    /// An OpenAI-compatible Chat Completions server.
    Openai(OpenAiConfig),
    /// A recorded transcript (tests, demos).
    Scripted {
        /// The transcript file (JSON, see [`crate::llm::Transcript`]).
        transcript: PathBuf,
    },
    /// The embedded local model (`agentry-local`); its settings are that crate's
    /// `LocalConfig`, checked when the model is made.
    Local(serde_json::Map<String, serde_json::Value>),
}

/// Everything that defines an agent, loadable from TOML or YAML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    /// The agent's name: its card's, its path's default, how workflows call it.
    pub name: String,
    #[serde(default = "default_type")]
    /// The registered type it is made as (`base` by default; `rag`, `ppt`, `data`, ...).
    pub agent_type: String,
    #[serde(default)]
    /// What it does, for its card and for planners.
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Replaces the type's system prompt.
    pub system_prompt: Option<String>,
    /// Tool name patterns (`*` wildcards) the agent may use; empty means all its type offers.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    /// Tool name patterns it may not use (they win over `tools`).
    pub deny_tools: Vec<String>,
    #[serde(default)]
    /// MCP servers to draw tools from. Core does not know MCP: each entry is read by
    /// `agentry-mcp` (its `McpServerSpec`: `name`, `command`/`args` or `url`, limits, tool
    /// filters) when it connects them.
    pub mcp_servers: Vec<Map<String, Value>>,
    #[serde(default = "default_iterations")]
    /// Model calls a run may make before it stops (default 10).
    pub max_iterations: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Tokens a run may spend before it stops.
    pub token_budget: Option<u64>,
    /// Example requests, shown in the agent card.
    #[serde(default)]
    pub examples: Vec<String>,
    #[serde(default)]
    /// Tags for its card.
    pub tags: Vec<String>,
    /// Settings of the agent's type (the `rag` type's `collection`, say), read by its builder.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
    /// The model it runs on.
    pub model: ModelConfig,
}

fn default_type() -> String {
    "base".into()
}

fn default_iterations() -> u32 {
    10
}

impl AgentConfig {
    /// A string option (`options.KEY`), when it is set to a string.
    pub fn option_str(&self, key: &str) -> Option<&str> {
        self.options.get(key).and_then(Value::as_str)
    }

    /// A list-of-strings option; absent is empty, any other value an error naming the option.
    pub fn option_strings(&self, key: &str) -> Result<Vec<String>, AgentError> {
        let bad = || AgentError::Invalid {
            agent: self.name.clone(),
            reason: format!("options.{key} must be a list of strings"),
        };
        match self.options.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(bad),
            Some(_) => Err(bad()),
        }
    }

    /// The config's examples (for the card's skills), else a type's own.
    pub fn examples_or(&self, own: &[&str]) -> Vec<String> {
        if self.examples.is_empty() {
            own.iter().map(|e| (*e).to_owned()).collect()
        } else {
            self.examples.clone()
        }
    }

    /// Reads a `.toml`, `.yaml` or `.yml` file. Relative transcript paths resolve against the
    /// file's folder.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        let p = path.as_ref();
        let err = |reason: String| AgentError::Config {
            path: p.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(p).map_err(|e| err(e.to_string()))?;
        let mut cfg: AgentConfig = parse_config(p, &text).map_err(err)?;
        if let (ModelConfig::Scripted { transcript }, Some(dir)) = (&mut cfg.model, p.parent())
            && transcript.is_relative()
        {
            *transcript = dir.join(&*transcript);
        }
        Ok(cfg)
    }
}

/// Parses TOML or YAML by extension, with the failing field's path in errors.
pub fn parse_config<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("yaml" | "yml") => serde_yaml::from_str(text).map_err(|e| e.to_string()),
        _ => toml::from_str(text).map_err(|e| e.to_string()),
    }
}

/// Tools that can change while an agent lives (MCP servers announce `tools/list_changed`).
pub trait ToolSource: Send + Sync {
    /// The current tools when they changed since the last call, else `None`.
    fn changed(&self) -> crate::llm::BoxFuture<'_, Option<ToolRegistry>>;
}

/// A policy asked before each model call; `false` ends the run.
pub type ShouldContinueFn = Arc<dyn Fn(&ReactState) -> bool + Send + Sync>;

/// A finished answer as an agent type shapes it ([`AgentKind::finalize`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finalized {
    /// The answer's text.
    pub answer: String,
    /// Structured results sent beside the text (an A2A data part).
    pub data: Option<Map<String, Value>>,
}

/// What a finished run hands its type's [`FinalizeFn`].
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// The user's request.
    pub query: String,
    /// The model's answer.
    pub answer: String,
    /// What the run did, in order.
    pub steps: Vec<Step>,
}

/// Shapes a run's answer from the query, the model's answer and the run's steps. Async, since
/// shaping may need I/O (the `rag` type reads the cited chunks and embeds their sentences).
pub type FinalizeFn =
    Arc<dyn Fn(RunResult) -> crate::llm::BoxFuture<'static, Finalized> + Send + Sync>;

/// What an agent type contributes.
#[derive(Clone, Default)]
pub struct AgentKind {
    /// The type's system prompt.
    pub system_prompt: String,
    /// The type's tools (filtered by each config's `tools`/`deny_tools`).
    pub tools: ToolRegistry,
    /// The skills its card declares.
    pub skills: Vec<AgentSkill>,
    /// Asked before each model call; `false` ends the run.
    pub should_continue: Option<ShouldContinueFn>,
    /// Applied to every answer: a type can add what its tools found that the model may have
    /// left out (the `rag` type appends the sources it retrieved and returns them as data), so
    /// the result does not depend on how diligent the model was.
    pub finalize: Option<FinalizeFn>,
}

/// Builds an [`AgentKind`] from a config and the factory's tool catalog.
pub type AgentBuilder =
    Arc<dyn Fn(&AgentConfig, &ToolRegistry) -> Result<AgentKind, AgentError> + Send + Sync>;

/// Makes a model from the settings of a `[model]` table whose provider crate registered it
/// (e.g. `agentry_local::register`).
pub type ModelBuilder = Arc<
    dyn Fn(
            &serde_json::Map<String, serde_json::Value>,
        ) -> Result<Arc<dyn DynLlmProvider>, AgentError>
        + Send
        + Sync,
>;

/// Makes agents from configs.
#[derive(Clone)]
pub struct AgentFactory {
    types: BTreeMap<String, AgentBuilder>,
    catalog: ToolRegistry,
    models: BTreeMap<String, ModelBuilder>,
}

impl Default for AgentFactory {
    fn default() -> Self {
        Self::new()
    }
}

const BASE_PROMPT: &str = "You are a helpful assistant. Use the tools when they help; answer \
     with what the tools return rather than from memory, and say so when you do not know.";

impl AgentFactory {
    /// A factory with the `base` type and the general tools (`calculate`, `current_time`).
    pub fn with_builtins() -> Self {
        let mut f = Self::new();
        f.register_tool(crate::builtin::Calculate);
        f.register_tool(crate::builtin::CurrentTime);
        f
    }

    /// A factory with the `base` type and an empty tool catalog.
    pub fn new() -> Self {
        let mut f = AgentFactory {
            types: BTreeMap::new(),
            catalog: ToolRegistry::new(),
            models: BTreeMap::new(),
        };
        f.register_agent_type(
            "base",
            Arc::new(|cfg: &AgentConfig, catalog: &ToolRegistry| {
                Ok(AgentKind {
                    system_prompt: cfg
                        .system_prompt
                        .clone()
                        .unwrap_or_else(|| BASE_PROMPT.into()),
                    tools: catalog.clone(),
                    ..Default::default()
                })
            }),
        );
        f
    }

    /// Lets configs use `agent_type = "<name>"`: `builder` makes the type's kind.
    pub fn register_agent_type(&mut self, name: &str, builder: AgentBuilder) -> &mut Self {
        self.types.insert(name.to_owned(), builder);
        self
    }

    /// Adds a tool to the catalog that agent types draw from.
    pub fn register_tool(&mut self, tool: impl DynTool) -> &mut Self {
        self.catalog.add(tool);
        self
    }

    /// [`register_tool`](Self::register_tool) for a tool already shared.
    pub fn register_tool_arc(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        self.catalog.add_arc(None, tool, None);
        self
    }

    /// The registered agent types, sorted.
    pub fn available_types(&self) -> Vec<&str> {
        self.types.keys().map(String::as_str).collect()
    }

    /// Lets configs use `provider = "<name>"` for a model made by another crate.
    pub fn register_model_provider(&mut self, name: &str, builder: ModelBuilder) -> &mut Self {
        self.models.insert(name.to_owned(), builder);
        self
    }

    /// Makes the model the config names.
    pub fn model(&self, cfg: &ModelConfig) -> Result<Arc<dyn DynLlmProvider>, AgentError> {
        Ok(match cfg {
            ModelConfig::Openai(c) => Arc::new(OpenAiProvider::new(c.clone())?),
            ModelConfig::Scripted { transcript } => {
                Arc::new(ScriptedProvider::from_file(transcript)?)
            }
            ModelConfig::Local(settings) => match self.models.get("local") {
                Some(build) => build(settings)?,
                None => {
                    return Err(AgentError::Unavailable {
                        what: "model provider `local`".into(),
                        needs: "the agentry-local crate (the agentry binary has it)".into(),
                    });
                }
            },
        })
    }

    /// Makes the agent `config` describes: its type's kind, its model, its tools filtered.
    pub fn create_agent(&self, config: AgentConfig) -> Result<Agent, AgentError> {
        let llm = self.model(&config.model)?;
        self.create_agent_with_model(config, llm)
    }

    /// As [`create_agent`](Self::create_agent), with a model made elsewhere.
    pub fn create_agent_with_model(
        &self,
        config: AgentConfig,
        llm: Arc<dyn DynLlmProvider>,
    ) -> Result<Agent, AgentError> {
        self.create_agent_with_tools(config, llm, None)
    }

    /// As [`create_agent_with_model`](Self::create_agent_with_model), adding tools connected
    /// elsewhere (the MCP servers of the config: `agentry_mcp::create_agent` connects them and
    /// calls this). Those tools keep their own per-server filters; the config's `tools`
    /// patterns filter the type's tools.
    pub fn create_agent_with_tools(
        &self,
        config: AgentConfig,
        llm: Arc<dyn DynLlmProvider>,
        external: Option<ToolRegistry>,
    ) -> Result<Agent, AgentError> {
        let builder = self.types.get(&config.agent_type).ok_or_else(|| {
            AgentError::UnknownType(config.agent_type.clone(), self.available_types().join(", "))
        })?;
        if !config.mcp_servers.is_empty() && external.is_none() {
            return Err(AgentError::Invalid {
                agent: config.name.clone(),
                reason: "the config names MCP servers: create the agent with \
                         agentry_mcp::create_agent, which connects them"
                    .into(),
            });
        }
        let kind = builder(&config, &self.catalog)?;
        let filter = ToolFilter {
            allow: config.tools.clone(),
            deny: config.deny_tools.clone(),
        };
        let mut tools = kind.tools.clone().with_filter(filter).filtered();
        for pattern in &config.tools {
            if !pattern.contains('*') && tools.spec(pattern).is_none() {
                return Err(AgentError::Invalid {
                    agent: config.name.clone(),
                    reason: format!(
                        "tool `{pattern}` is not offered by type `{}`",
                        config.agent_type
                    ),
                });
            }
        }
        let base_tools = tools.clone();
        if let Some(ext) = external {
            tools.merge(None, &ext);
        }
        Ok(Agent {
            config,
            llm,
            base_tools,
            tools: std::sync::RwLock::new(tools),
            source: None,
            kind,
            memory: Mutex::new(Conversations::default()),
            checkpoints: Checkpoints::default(),
        })
    }
}

/// The result of a run, with everything a caller may want.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The user's request.
    pub query: String,
    /// What the run did, in order.
    pub steps: Vec<Step>,
    /// The answer, when it ended with one.
    pub final_answer: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Files its tools made.
    pub artifacts: Vec<Artifact>,
    /// Data shared with other steps of a workflow.
    pub context: Map<String, Value>,
    /// Structured results of the answer ([`AgentKind::finalize`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Map<String, Value>>,
}

/// Messages of a conversation kept per contextId.
const MEMORY_MESSAGES: usize = 40;
/// Conversations kept in memory; the least recently used goes first (a served agent's run
/// store still has it, see [`Checkpoints`]).
const MEMORY_CONTEXTS: usize = 1024;

/// The recent conversations, by contextId, bounded to [`MEMORY_CONTEXTS`].
#[derive(Default)]
struct Conversations {
    by_context: HashMap<String, (u64, Vec<ChatMessage>)>,
    clock: u64,
}

impl Conversations {
    fn contains(&self, context: &str) -> bool {
        self.by_context.contains_key(context)
    }

    /// Adds one exchange to a conversation, keeping its last [`MEMORY_MESSAGES`].
    fn record(&mut self, context: &str, query: &str, reply: &str) {
        let mut conv = self
            .by_context
            .remove(context)
            .map(|(_, m)| m)
            .unwrap_or_default();
        conv.push(ChatMessage::user(query));
        conv.push(ChatMessage::assistant(reply));
        let extra = conv.len().saturating_sub(MEMORY_MESSAGES);
        conv.drain(..extra);
        self.put(context, conv);
    }

    fn get(&mut self, context: &str) -> Option<Vec<ChatMessage>> {
        self.clock += 1;
        let clock = self.clock;
        self.by_context.get_mut(context).map(|(used, m)| {
            *used = clock;
            m.clone()
        })
    }

    fn put(&mut self, context: &str, messages: Vec<ChatMessage>) {
        self.clock += 1;
        self.by_context
            .insert(context.to_owned(), (self.clock, messages));
        if self.by_context.len() > MEMORY_CONTEXTS
            && let Some(oldest) = self
                .by_context
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(c, _)| c.clone())
        {
            self.by_context.remove(&oldest);
        }
    }
}

/// A specialized agent: one ReAct engine with a prompt, tools and a model.
pub struct Agent {
    /// What it was made from.
    pub config: AgentConfig,
    llm: Arc<dyn DynLlmProvider>,
    /// The type's tools, filtered by the config (fixed).
    base_tools: ToolRegistry,
    /// `base_tools` plus the external tools (MCP), swapped when a source reports a change.
    tools: std::sync::RwLock<ToolRegistry>,
    source: Option<Arc<dyn ToolSource>>,
    kind: AgentKind,
    memory: Mutex<Conversations>,
    pub(crate) checkpoints: Checkpoints,
}

impl Agent {
    /// Where run checkpoints go (in memory by default).
    pub fn with_checkpoints(mut self, c: Checkpoints) -> Self {
        self.checkpoints = c;
        self
    }

    /// The tools a run gets now.
    pub fn tools(&self) -> ToolRegistry {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keeps the external tools current: a source (MCP servers) is asked before each run
    /// whether its tools changed (`tools/list_changed`).
    pub fn with_tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Rebuilds the tools if the source says they changed.
    pub async fn refresh_tools(&self) {
        let Some(source) = &self.source else { return };
        if let Some(external) = source.changed().await {
            let mut t = self.base_tools.clone();
            t.merge(None, &external);
            tracing::info!(agent = %self.config.name, tools = t.names().len(), "tools refreshed");
            *self.tools.write().unwrap_or_else(|p| p.into_inner()) = t;
        }
    }

    /// The loop's settings from the config (iterations, budget, the model's capabilities).
    pub fn react_config(&self) -> ReactConfig {
        ReactConfig {
            max_iterations: self.config.max_iterations,
            token_budget: self.config.token_budget,
            native_tools: self.llm.capabilities().native_tools,
            ..ReactConfig::default()
        }
    }

    /// The agent card, derived from the config.
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new(&self.config.name, &self.config.description, url);
        card.capabilities.streaming = Some(true);
        card.capabilities.push_notifications = Some(true);
        card.default_output_modes = vec!["text/plain".into(), "application/json".into()];
        card.skills = if self.kind.skills.is_empty() {
            vec![AgentSkill {
                id: self.config.name.clone(),
                name: self.config.name.clone(),
                description: if self.config.description.is_empty() {
                    format!("The {} agent", self.config.name)
                } else {
                    self.config.description.clone()
                },
                tags: if self.config.tags.is_empty() {
                    vec![self.config.agent_type.clone()]
                } else {
                    self.config.tags.clone()
                },
                examples: self.config.examples.clone(),
                input_modes: None,
                output_modes: None,
                security: Vec::new(),
            }]
        } else {
            self.kind.skills.clone()
        };
        card
    }

    /// A fresh run state for `query` in `context_id`'s conversation.
    pub fn start(&self, query: &str, context_id: Option<&str>) -> ReactState {
        self.start_with(query, context_id, None)
    }

    /// [`Agent::start`] with `instructions` for this run after the agent's own system prompt
    /// (a trigger's prompt: the agent stays itself, the trigger says what this run is for).
    pub fn start_with(
        &self,
        query: &str,
        context_id: Option<&str>,
        instructions: Option<&str>,
    ) -> ReactState {
        let history = context_id
            .and_then(|c| self.memory().get(c))
            .unwrap_or_default();
        let prompt = match instructions.map(str::trim).filter(|i| !i.is_empty()) {
            Some(i) => format!("{}\n\n{i}", self.kind.system_prompt),
            None => self.kind.system_prompt.clone(),
        };
        ReactState::new(
            self.react_config(),
            &prompt,
            self.tools().specs(),
            history,
            query,
        )
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Conversations> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Brings a conversation the run store has but memory does not (after a restart, or
    /// evicted) back into memory.
    pub(crate) async fn recall(&self, context_id: &str) {
        if self.memory().contains(context_id) {
            return;
        }
        if let Some(messages) = self.checkpoints.conversation(context_id).await {
            let mut mem = self.memory();
            // A turn that ran meanwhile has the newer messages.
            if !mem.contains(context_id) {
                mem.put(context_id, messages);
            }
        }
    }

    /// Saves a conversation's recent messages in the run store.
    pub(crate) async fn persist(&self, context_id: &str) {
        let messages = self.memory().get(context_id);
        if let Some(messages) = messages {
            self.checkpoints
                .save_conversation(context_id, &messages)
                .await;
        }
    }

    /// Drives `state` to its end, then remembers the exchange in the context's conversation.
    pub async fn drive(
        &self,
        state: &mut ReactState,
        context_id: Option<&str>,
        hooks: &dyn RunHooks,
        cancel: Option<watch::Receiver<bool>>,
    ) -> RunReport {
        let guard = ShouldContinue {
            inner: hooks,
            extra: self.kind.should_continue.clone(),
        };
        let tools = self.tools();
        let mut outcome = drive(state, self.llm.as_ref(), &tools, &guard, cancel).await;
        let query = state
            .messages
            .iter()
            .rev()
            .find(|m| {
                m.role == crate::llm::ChatRole::User && !m.content.starts_with("Observation from ")
            })
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let mut data = None;
        if let (Outcome::Answered { answer }, Some(finalize)) = (&mut outcome, &self.kind.finalize)
        {
            let f = finalize(RunResult {
                query: query.clone(),
                answer: std::mem::take(answer),
                steps: state.steps.clone(),
            })
            .await;
            *answer = f.answer;
            data = f.data;
        }
        let reply = match &outcome {
            Outcome::Answered { answer } => Some(answer.clone()),
            Outcome::NeedsInput { question } => Some(question.clone()),
            _ => None,
        };
        if let (Some(c), Some(reply)) = (context_id, &reply) {
            self.memory().record(c, &query, reply);
        }
        RunReport {
            query,
            steps: state.steps.clone(),
            final_answer: match &outcome {
                Outcome::Answered { answer } => Some(answer.clone()),
                _ => state.answer().map(str::to_owned),
            },
            outcome,
            artifacts: Vec::new(),
            context: Map::new(),
            data,
        }
    }

    /// Runs `query` to its end.
    pub async fn run(
        &self,
        query: &str,
        context_id: Option<&str>,
        hooks: &dyn RunHooks,
        cancel: Option<watch::Receiver<bool>>,
    ) -> RunReport {
        self.refresh_tools().await;
        let mut state = self.start(query, context_id);
        self.drive(&mut state, context_id, hooks, cancel).await
    }
}

/// Combines the caller's hooks with the agent type's `should_continue`.
struct ShouldContinue<'a> {
    inner: &'a dyn RunHooks,
    extra: Option<ShouldContinueFn>,
}

impl RunHooks for ShouldContinue<'_> {
    fn should_continue(&self, state: &ReactState) -> bool {
        self.inner.should_continue(state) && self.extra.as_ref().is_none_or(|f| f(state))
    }
    fn on_steps<'a>(&'a self, steps: &'a [Step]) -> crate::llm::BoxFuture<'a, ()> {
        self.inner.on_steps(steps)
    }
    fn checkpoint<'a>(&'a self, state: &'a ReactState) -> crate::llm::BoxFuture<'a, ()> {
        self.inner.checkpoint(state)
    }
}

#[cfg(test)]
mod tests {
    use super::{ChatMessage, Conversations, MEMORY_CONTEXTS};

    #[test]
    fn memory_keeps_the_most_recently_used_conversations() {
        let mut m = Conversations::default();
        for i in 0..MEMORY_CONTEXTS {
            m.put(&format!("c{i}"), vec![ChatMessage::user(format!("hi {i}"))]);
        }
        // c0 is used again, so c1 is now the least recently used.
        assert!(m.get("c0").is_some());
        m.put("new", Vec::new());
        assert_eq!(m.by_context.len(), MEMORY_CONTEXTS);
        assert!(m.get("c1").is_none(), "the least recently used stayed");
        assert_eq!(m.get("c0").unwrap()[0].content, "hi 0");
        assert!(m.get("new").is_some());
    }
}
