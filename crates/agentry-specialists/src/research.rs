//! The researcher: one question asked of several MCP servers at once.
//!
//! *Direct mode* connects to the configured MCP servers and calls each source's tool in
//! parallel ([`agentry_mcp::fan_out`]: one slow server stalls nothing). *A2A mode* delegates the
//! question to a standalone researcher A2A server. The mode comes from the configuration, and
//! `USE_A2A_RESEARCHER` (`1`/`true` or `0`/`false`) overrides it. When the A2A researcher is
//! unreachable, the question is answered in direct mode and the task's status says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_a2a::client::ClientConfig;
use agentry_a2a::model::*;
use agentry_core::a2a::RemoteAgent;
use agentry_core::agent::AgentError;
use agentry_core::handle::{AgentHandle, Ask, Reply, Update, UpdateStream, progress_stream};
use agentry_mcp::{LaunchPolicy, McpClient, McpServerSpec, fan_out};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

/// One source: an MCP server and the tool that answers a question, with its arguments
/// (`{query}` in a string is replaced by the question).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The MCP server.
    pub server: McpServerSpec,
    /// The tool that answers.
    pub tool: String,
    #[serde(default)]
    /// Its arguments (`{query}` in a string is the question).
    pub arguments: Map<String, Value>,
}

/// Where questions go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    /// Ask every source at once, from this process.
    Direct,
    /// Delegate to a standalone researcher over A2A (falling back to direct).
    A2a,
}

/// A researcher's configuration (TOML or YAML: `mode`, `a2a_url`, `[[sources]]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResearcherConfig {
    #[serde(default)]
    /// Direct or over A2A.
    pub mode: Mode,
    /// The standalone researcher's A2A URL (A2A mode).
    #[serde(default)]
    pub a2a_url: Option<String>,
    #[serde(default)]
    /// The sources asked.
    pub sources: Vec<Source>,
    /// Seconds each source gets.
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
}

fn default_timeout() -> f64 {
    30.0
}

impl ResearcherConfig {
    /// The mode after `USE_A2A_RESEARCHER`.
    pub fn effective_mode(&self) -> Mode {
        self.mode_given(std::env::var("USE_A2A_RESEARCHER").ok().as_deref())
    }

    /// The mode given a value of `USE_A2A_RESEARCHER` (`None`: unset).
    pub fn mode_given(&self, env: Option<&str>) -> Mode {
        match env.map(str::to_ascii_lowercase).as_deref() {
            Some("1" | "true" | "yes" | "on") => Mode::A2a,
            Some("0" | "false" | "no" | "off") => Mode::Direct,
            _ => self.mode,
        }
    }
}

/// What one source said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The source's server.
    pub server: String,
    /// Its tool.
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// What it answered.
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why it did not.
    pub error: Option<String>,
}

/// The researcher agent.
pub struct Researcher {
    /// What it asks and how.
    pub config: ResearcherConfig,
    policy: LaunchPolicy,
    clients: OnceCell<Vec<Arc<McpClient>>>,
}

fn substitute(v: &Value, query: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{query}", query)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, query)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), substitute(x, query)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Researcher {
    /// A researcher over `config`, launching only what `AGENTRY_MCP_ALLOW` allows.
    pub fn new(config: ResearcherConfig) -> Self {
        Researcher {
            config,
            policy: LaunchPolicy::from_env(),
            clients: OnceCell::new(),
        }
    }

    /// Launches servers under `policy` instead.
    pub fn with_policy(mut self, policy: LaunchPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Its card at `url`.
    pub fn card(&self, url: &str) -> AgentCard {
        let mut card = AgentCard::new("Researcher", &self.description(), url);
        card.skills = vec![AgentSkill {
            id: "research".into(),
            name: "Research".into(),
            description: "Asks every configured MCP source the question in parallel and reports \
                          what each found."
                .into(),
            tags: vec!["research".into(), "mcp".into()],
            examples: vec!["What do our sources say about Elsinore?".into()],
            input_modes: None,
            output_modes: None,
            security: Vec::new(),
        }];
        card
    }

    /// Direct mode: every source at once.
    pub async fn direct(&self, query: &str) -> Result<Vec<Finding>, AgentError> {
        if self.config.sources.is_empty() {
            return Err(AgentError::BadRequest(
                "the researcher has no sources: add [[sources]] to its configuration".into(),
            ));
        }
        let clients = self
            .clients
            .get_or_try_init(|| async {
                let mut out = Vec::new();
                for s in &self.config.sources {
                    out.push(
                        McpClient::connect(s.server.clone(), &self.policy)
                            .await
                            .map_err(AgentError::failed)?,
                    );
                }
                Ok::<_, AgentError>(out)
            })
            .await?;
        let calls = self
            .config
            .sources
            .iter()
            .zip(clients)
            .map(|(s, c)| {
                let args = match substitute(&Value::Object(s.arguments.clone()), query) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                (c.clone(), s.tool.clone(), args)
            })
            .collect();
        let results = fan_out(
            calls,
            4,
            Duration::from_secs_f64(self.config.timeout_secs.max(0.1)),
        )
        .await;
        Ok(results
            .into_iter()
            .zip(&self.config.sources)
            .map(|(r, s)| match r.result {
                Ok(out) => Finding {
                    server: r.server,
                    tool: s.tool.clone(),
                    text: Some(out.text),
                    error: None,
                },
                Err(e) => Finding {
                    server: r.server,
                    tool: s.tool.clone(),
                    text: None,
                    error: Some(e),
                },
            })
            .collect())
    }

    /// Answers `query` in the effective mode; `note` hears about a fallback as it happens.
    pub async fn research(
        &self,
        query: &str,
        note: &(dyn Fn(String) + Sync),
    ) -> Result<Reply, AgentError> {
        let mut mode = "direct";
        if self.config.effective_mode() == Mode::A2a {
            let remote = match &self.config.a2a_url {
                None => Err(AgentError::Unreachable(
                    "A2A mode without a2a_url".to_owned(),
                )),
                Some(url) => {
                    let cfg = ClientConfig {
                        connect_timeout: Duration::from_secs(5),
                        retries: 0,
                        ..Default::default()
                    };
                    match RemoteAgent::connect(url, cfg).await {
                        Ok(r) => r.ask(Ask::text(query)).await,
                        Err(e) => Err(e),
                    }
                }
            };
            match remote {
                Ok(mut reply) => {
                    for d in &mut reply.data {
                        d.insert("mode".into(), json!("a2a"));
                    }
                    return Ok(reply);
                }
                Err(AgentError::Unreachable(why)) => {
                    note(format!(
                        "The A2A researcher is unreachable ({why}); falling back to direct mode."
                    ));
                    mode = "direct (fallback from A2A)";
                }
                Err(other) => return Err(other),
            }
        }
        let started = Instant::now();
        let findings = self.direct(query).await?;
        let mut text = format!(
            "Researched \"{query}\" across {} sources in parallel ({mode} mode, {:.1} s):\n",
            findings.len(),
            started.elapsed().as_secs_f64()
        );
        for f in &findings {
            match (&f.text, &f.error) {
                (Some(t), _) => {
                    let short: String = t.chars().take(1500).collect();
                    text.push_str(&format!("\n## {} ({})\n{short}\n", f.server, f.tool));
                }
                (None, Some(e)) => {
                    text.push_str(&format!("\n## {} ({})\nerror: {e}\n", f.server, f.tool))
                }
                _ => {}
            }
        }
        Ok(Reply {
            text,
            data: vec![
                json!({"query": query, "mode": mode, "findings": findings})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ],
            ..Default::default()
        })
    }
}

impl AgentHandle for Researcher {
    fn name(&self) -> String {
        "researcher".into()
    }
    fn description(&self) -> String {
        format!(
            "Researches a question across {} MCP sources in parallel.",
            self.config.sources.len()
        )
    }
    fn skills(&self) -> Vec<String> {
        vec!["research".into()]
    }
    /// The fallback note (A2A researcher unreachable) comes as progress before the reply.
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        progress_stream(rx, async move {
            let mut reply = self
                .research(&ask.text, &move |n| {
                    let _ = tx.send(Update::Progress {
                        text: n,
                        data: None,
                    });
                })
                .await?;
            reply.context_id = ask.context_id;
            Ok(reply)
        })
    }

    /// In-process, the notes head the reply's text.
    fn ask(&self, ask: Ask) -> agentry_core::llm::BoxFuture<'_, Result<Reply, AgentError>> {
        Box::pin(async move {
            let notes = std::sync::Mutex::new(Vec::new());
            let mut reply = self
                .research(&ask.text, &|n| {
                    notes.lock().unwrap_or_else(|p| p.into_inner()).push(n)
                })
                .await?;
            let notes = notes.into_inner().unwrap_or_else(|p| p.into_inner());
            if !notes.is_empty() {
                reply.text = format!("{}\n\n{}", notes.join("\n"), reply.text);
            }
            reply.context_id = ask.context_id;
            Ok(reply)
        })
    }
}
