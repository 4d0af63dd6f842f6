//! A simulation's messages, in tau2's schema (`src/tau2/data_model/message.py`): what
//! `results.json` holds and what the scorer replays.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The agent under test.
    Assistant,
    /// The simulated user.
    User,
    /// A tool's result, to whoever called it.
    Tool,
    /// A system prompt (never in a trajectory, only in prompts).
    System,
}

/// Which side of the conversation made a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requestor {
    /// The agent.
    #[default]
    Assistant,
    /// The user (domains with user tools, such as mock's notifications).
    User,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Pairs the call with its result.
    #[serde(default)]
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments, as the caller wrote them (never validated: tau2 does not either).
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Who called.
    #[serde(default)]
    pub requestor: Requestor,
}

/// Token counts a participant reported (or that were estimated, see [`Message::raw_data`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
}

/// One message of a trajectory. One struct for every role, as tau2's JSON has it; the
/// fields a role does not use stay `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text (`None` for a pure tool-call message).
    #[serde(default)]
    pub content: Option<String>,
    /// The calls this message makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For a tool result: the id of its call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// For a tool result: who called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requestor: Option<Requestor>,
    /// For a tool result: whether the tool raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<bool>,
    /// Position in the trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_idx: Option<usize>,
    /// When it was made (ISO 8601, as tau2 writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Tokens, as reported by the participant or estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How long the participant took to produce it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_time_seconds: Option<f64>,
    /// What came over the wire (the A2A reply), for inspection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_data: Option<Value>,
}

impl Message {
    fn new(role: Role, content: Option<String>, tool_calls: Option<Vec<ToolCall>>) -> Self {
        Message {
            role,
            content,
            tool_calls,
            id: None,
            requestor: None,
            error: None,
            turn_idx: None,
            timestamp: None,
            usage: None,
            generation_time_seconds: None,
            raw_data: None,
        }
    }

    /// An agent's text.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Some(text.into()), None)
    }

    /// A user's text.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()), None)
    }

    /// A message from `role` that carries text, calls or both (an empty text is kept: an
    /// empty reply is scored as one).
    pub fn with_calls(role: Role, text: Option<String>, calls: Vec<ToolCall>) -> Self {
        let calls = (!calls.is_empty()).then_some(calls);
        Self::new(role, text, calls)
    }

    /// A tool's result.
    pub fn tool(id: &str, requestor: Requestor, content: String, error: bool) -> Self {
        let mut m = Self::new(Role::Tool, Some(content), None);
        m.id = Some(id.to_owned());
        m.requestor = Some(requestor);
        m.error = Some(error);
        m
    }

    /// Whether the message makes tool calls.
    pub fn is_tool_call(&self) -> bool {
        self.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// The text, or "" for none.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}
