//! The simulated user: an LLM persona following tau2's simulation guidelines, or a script for
//! deterministic runs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use agentry_core::llm::{ChatMessage, ChatRequest, DynLlmProvider, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use super::agent::BoxFuture;
use crate::domain::Domain;
use crate::message::{Message, Requestor, Role, ToolCall, Usage};
use crate::task::Task;

/// The tokens that end a conversation when the user says one (tau2's `UserSimulator`).
pub const STOP_TOKENS: [&str; 3] = ["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"];

/// Whether a user message ends the conversation.
pub fn is_stop(m: &Message) -> bool {
    m.content
        .as_deref()
        .is_some_and(|c| STOP_TOKENS.iter().any(|t| c.contains(t)))
}

/// One simulated user, for one simulation.
pub trait UserSession: Send {
    /// The user's next message, given the conversation as the user sees it (the agent's
    /// texts, the user's own messages and the results of the user's tool calls).
    fn respond<'a>(&'a mut self, view: &'a [Message]) -> BoxFuture<'a, Result<Message, String>>;
}

/// Starts a user per simulation.
pub trait UserFactory: Send + Sync {
    /// A user for `task`, trial `trial` (whose seed is `seed`).
    fn start(&self, domain: &Domain, task: &Task, trial: usize, seed: u64) -> Box<dyn UserSession>;
    /// What results.json says about the user.
    fn info(&self) -> Value;
}

/// The user simulator's system prompt and tools, as tau2 builds them: the guidelines (those
/// for users with tools when the task leaves the user any), the persona slot emptied, and the
/// scenario.
pub fn user_prompt(domain: &Domain, task: &Task) -> (String, Vec<crate::env::ToolSchema>) {
    let tools: Vec<crate::env::ToolSchema> = domain
        .tools
        .user_schemas
        .iter()
        .filter(|t| {
            task.user_tools
                .as_ref()
                .is_none_or(|names| names.contains(&t.name))
        })
        .cloned()
        .collect();
    let guidelines = domain
        .user_guidelines(!tools.is_empty())
        .replace("<PERSONA_GUIDELINES>", "");
    let system = format!(
        "{guidelines}\n\n<scenario>\n{}\n</scenario>",
        task.user_scenario.render()
    );
    (system.trim().to_owned(), tools)
}

/// A user played by a chat model.
pub struct LlmUser {
    provider: Arc<dyn DynLlmProvider>,
    model: String,
}

impl LlmUser {
    /// Plays users with `provider`.
    pub fn new(provider: Arc<dyn DynLlmProvider>, model: impl Into<String>) -> Self {
        LlmUser {
            provider,
            model: model.into(),
        }
    }
}

impl UserFactory for LlmUser {
    fn start(
        &self,
        domain: &Domain,
        task: &Task,
        _trial: usize,
        _seed: u64,
    ) -> Box<dyn UserSession> {
        let (system, schemas) = user_prompt(domain, task);
        let tools = schemas
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
                examples: Vec::new(),
            })
            .collect();
        Box::new(LlmUserSession {
            provider: self.provider.clone(),
            system,
            tools,
            calls: 0,
        })
    }

    fn info(&self) -> Value {
        json!({"implementation": "user_simulator", "llm": self.model, "llm_args": {"temperature": 0.0}})
    }
}

struct LlmUserSession {
    provider: Arc<dyn DynLlmProvider>,
    system: String,
    tools: Vec<ToolSpec>,
    calls: u64,
}

impl UserSession for LlmUserSession {
    fn respond<'a>(&'a mut self, view: &'a [Message]) -> BoxFuture<'a, Result<Message, String>> {
        Box::pin(async move {
            // Roles flip: to the user model, the agent is the "user" and it is the assistant.
            let mut messages = vec![ChatMessage::system(self.system.clone())];
            for m in view {
                match m.role {
                    Role::Assistant => messages.push(ChatMessage::user(m.text())),
                    Role::User => {
                        let mut c = ChatMessage::assistant(m.text());
                        c.tool_calls = m
                            .tool_calls
                            .iter()
                            .flatten()
                            .map(|t| agentry_core::llm::ToolCall {
                                id: t.id.clone(),
                                name: t.name.clone(),
                                arguments: Value::Object(t.arguments.clone()),
                            })
                            .collect();
                        messages.push(c);
                    }
                    Role::Tool => messages.push(ChatMessage::tool(
                        m.id.clone().unwrap_or_default(),
                        m.text(),
                    )),
                    Role::System => {}
                }
            }
            let mut req = ChatRequest {
                messages,
                tools: self.tools.clone(),
                temperature: Some(0.0),
                ..Default::default()
            };
            let started = std::time::Instant::now();
            let mut resp = self
                .provider
                .chat_dyn(req.clone())
                .await
                .map_err(|e| format!("user simulator model: {e}"))?;
            // A weak model can call the same tool again and again on the same result; the
            // second identical call in a row is replaced by asking it to speak instead.
            let previous = view
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .and_then(|m| m.tool_calls.as_ref());
            let same = |prev: &Vec<ToolCall>| {
                prev.len() == resp.message.tool_calls.len()
                    && prev.iter().zip(&resp.message.tool_calls).all(|(a, b)| {
                        a.name == b.name && Value::Object(a.arguments.clone()) == b.arguments
                    })
            };
            if !resp.message.tool_calls.is_empty() && previous.is_some_and(same) {
                req.tools.clear();
                resp = self
                    .provider
                    .chat_dyn(req)
                    .await
                    .map_err(|e| format!("user simulator model: {e}"))?;
            }
            let calls: Vec<ToolCall> = resp
                .message
                .tool_calls
                .iter()
                .map(|c| {
                    self.calls += 1;
                    ToolCall {
                        id: if c.id.is_empty() {
                            format!("user_call_{}", self.calls)
                        } else {
                            c.id.clone()
                        },
                        name: c.name.clone(),
                        arguments: c.arguments.as_object().cloned().unwrap_or_default(),
                        requestor: Requestor::User,
                    }
                })
                .collect();
            let text = resp.message.content.trim().to_owned();
            let mut m = if calls.is_empty() {
                Message::user(text)
            } else {
                Message::with_calls(Role::User, (!text.is_empty()).then_some(text), calls)
            };
            m.usage = Some(Usage {
                prompt_tokens: resp.usage.prompt_tokens,
                completion_tokens: resp.usage.completion_tokens,
            });
            m.generation_time_seconds = Some(started.elapsed().as_secs_f64());
            Ok(m)
        })
    }
}

/// One scripted user turn: words, or calls to the user's tools.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ScriptTurn {
    /// Says this.
    Say(String),
    /// Calls the user's tools.
    Calls {
        /// The calls.
        tool_calls: Vec<ScriptCall>,
    },
}

/// A scripted call.
#[derive(Debug, Clone, Deserialize)]
pub struct ScriptCall {
    /// The tool.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: serde_json::Map<String, Value>,
}

/// Users that say what a script says, task by task, then `###STOP###`: deterministic runs
/// for CI. The script is a JSON object from task id to a list of turns (a string, or
/// `{"tool_calls": [{"name", "arguments"}]}`).
pub struct ScriptedUser {
    scripts: BTreeMap<String, Vec<ScriptTurn>>,
}

impl ScriptedUser {
    /// From a parsed script.
    pub fn new(scripts: BTreeMap<String, Vec<ScriptTurn>>) -> Self {
        ScriptedUser { scripts }
    }

    /// Reads a script file.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let scripts =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ScriptedUser { scripts })
    }
}

impl UserFactory for ScriptedUser {
    fn start(
        &self,
        _domain: &Domain,
        task: &Task,
        _trial: usize,
        _seed: u64,
    ) -> Box<dyn UserSession> {
        Box::new(ScriptedSession {
            turns: self
                .scripts
                .get(&task.id)
                .cloned()
                .unwrap_or_default()
                .into(),
            calls: 0,
        })
    }

    fn info(&self) -> Value {
        json!({"implementation": "scripted_user"})
    }
}

struct ScriptedSession {
    turns: VecDeque<ScriptTurn>,
    calls: u64,
}

impl UserSession for ScriptedSession {
    fn respond<'a>(&'a mut self, _view: &'a [Message]) -> BoxFuture<'a, Result<Message, String>> {
        let m = match self.turns.pop_front() {
            None => Message::user("###STOP###"),
            Some(ScriptTurn::Say(s)) => Message::user(s),
            Some(ScriptTurn::Calls { tool_calls }) => {
                let calls = tool_calls
                    .into_iter()
                    .map(|c| {
                        self.calls += 1;
                        ToolCall {
                            id: format!("user_call_{}", self.calls),
                            name: c.name,
                            arguments: c.arguments,
                            requestor: Requestor::User,
                        }
                    })
                    .collect();
                Message::with_calls(Role::User, None, calls)
            }
        };
        Box::pin(async move { Ok(m) })
    }
}
