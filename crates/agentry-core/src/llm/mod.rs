//! LLM providers behind one small trait: chat with tools, streaming, usage, finish reason.
//!
//! - [`OpenAiProvider`]: any OpenAI-compatible Chat Completions server (vLLM, Ollama,
//!   llama.cpp server, LM Studio, hosted APIs).
//! - [`ScriptedProvider`]: replays a recorded transcript, for deterministic tests;
//!   [`RecordingProvider`] captures real exchanges into such a transcript.
//!
//! A provider says what it can do in [`Capabilities`]; the agent loop puts tool descriptions into
//! the prompt and parses calls from text when `native_tools` is false.

mod openai;
mod scripted;

use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{self, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use openai::{OpenAiConfig, OpenAiEmbedder, OpenAiProvider};
pub use scripted::{RecordingProvider, ScriptedProvider, Transcript, TranscriptEntry};

/// A boxed future, for the object-safe twins.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed stream of chat deltas.
pub type DeltaStream<'a> = Pin<Box<dyn Stream<Item = Result<ChatDelta, LlmError>> + Send + 'a>>;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

/// A tool call the model asked for. `arguments` is the JSON object the model wrote (a string
/// that does not parse is kept as `Value::String`, so the loop can say what is wrong).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, which its result names.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (a JSON object).
    pub arguments: Value,
}

/// One message of a chat. Assistant turns are kept verbatim: their text and tool calls, in the
/// order the provider gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    #[serde(default)]
    /// Its text.
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// The tools an assistant turn calls.
    pub tool_calls: Vec<ToolCall>,
    /// For `Tool` messages: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::plain(ChatRole::System, text)
    }
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::plain(ChatRole::User, text)
    }
    /// An assistant turn without tool calls.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::plain(ChatRole::Assistant, text)
    }
    /// The result of call `call_id`.
    pub fn tool(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::Tool,
            content: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
    fn plain(role: ChatRole, text: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name models call it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Requests this tool serves, for tool routers (embedding similarity); not sent to models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// What to ask the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// At most this many tokens in the answer.
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Ask for output matching this JSON Schema (where the provider supports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// Stop sequences.
    pub stop: Vec<String>,
}

/// Tokens spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
}

impl Usage {
    /// Prompt and answer tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A finished answer.
    Stop,
    /// It calls tools.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// The provider's filter stopped it.
    ContentFilter,
    /// Another reason, as the provider names it.
    Other(String),
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant turn, verbatim.
    pub message: ChatMessage,
    #[serde(default)]
    /// Tokens spent.
    pub usage: Usage,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
}

impl ChatResponse {
    /// A plain answer (for transcripts written in code).
    pub fn text(text: impl Into<String>) -> Self {
        ChatResponse {
            message: ChatMessage::assistant(text),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
        }
    }

    /// A turn that calls tools (for transcripts written in code).
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        ChatResponse {
            message: ChatMessage {
                role: ChatRole::Assistant,
                content: String::new(),
                tool_calls: calls,
                tool_call_id: None,
            },
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
        }
    }
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatDelta {
    /// A piece of the answer's text.
    Text(String),
    /// A fragment of a tool call: the first fragment of a call has its id and name.
    ToolCall {
        /// Which call (in the turn's order).
        index: usize,
        /// Its id (first fragment only).
        id: Option<String>,
        /// The tool (first fragment only).
        name: Option<String>,
        /// A piece of the arguments' JSON.
        arguments: String,
    },
    /// The whole answer, last.
    Done(ChatResponse),
}

/// What a provider can do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Capabilities {
    /// The API takes tool definitions and returns structured tool calls.
    pub native_tools: bool,
    /// The API can constrain output to a JSON Schema.
    pub json_schema: bool,
    /// The API can stream answers.
    pub streaming: bool,
}

/// A provider failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    #[error("cannot reach the model at {url}: {reason}")]
    /// The server could not be reached.
    Connect {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
    #[error("model request timed out after {0} ms")]
    /// No answer within the timeout (milliseconds).
    Timeout(u64),
    #[error("model API returned HTTP {status}: {body}")]
    /// The server answered with an HTTP error.
    Http {
        /// The HTTP status.
        status: u16,
        /// The answer's body.
        body: String,
    },
    #[error("invalid model response: {0}")]
    /// An answer that is not what the API promises.
    InvalidResponse(String),
    #[error("transcript: {0}")]
    /// A transcript that cannot be read or has no answer left.
    Transcript(String),
    /// The model's settings cannot be used (a local model's options, a provider's).
    #[error("model settings: {0}")]
    Settings(String),
    /// The provider itself failed (an HTTP client that cannot be built, a local model's
    /// runtime): the source says why.
    #[error("model backend: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl LlmError {
    /// Wraps a provider's own failure.
    pub fn backend(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        LlmError::Backend(e.into())
    }
}

/// A chat model. `chat_stream` defaults to one `Done` delta from `chat`.
pub trait LlmProvider: Send + Sync + 'static {
    /// What the provider supports.
    fn capabilities(&self) -> Capabilities;

    /// Who serves the model, as traces name it (`gen_ai.provider.name`: `openai` for any
    /// OpenAI-compatible server, `agentry.local`, ...).
    fn provider_name(&self) -> &str {
        "unknown"
    }

    /// The model asked for (`gen_ai.request.model`).
    fn model_name(&self) -> &str {
        ""
    }

    /// One answer.
    fn chat(&self, req: ChatRequest)
    -> impl Future<Output = Result<ChatResponse, LlmError>> + Send;

    /// The answer as it comes (one `Done` from [`chat`](Self::chat) by default).
    fn chat_stream(&self, req: ChatRequest) -> DeltaStream<'_> {
        Box::pin(stream::once(self.chat(req)).map(|r| r.map(ChatDelta::Done)))
    }
}

/// The object-safe twin of [`LlmProvider`].
pub trait DynLlmProvider: Send + Sync + 'static {
    /// [`LlmProvider::capabilities`].
    fn capabilities(&self) -> Capabilities;
    /// [`LlmProvider::provider_name`].
    fn provider_name(&self) -> &str;
    /// [`LlmProvider::model_name`].
    fn model_name(&self) -> &str;
    /// [`LlmProvider::chat`], boxed.
    fn chat_dyn(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>>;
    /// [`LlmProvider::chat_stream`].
    fn chat_stream_dyn(&self, req: ChatRequest) -> DeltaStream<'_>;
}

impl<T: LlmProvider> DynLlmProvider for T {
    fn capabilities(&self) -> Capabilities {
        LlmProvider::capabilities(self)
    }
    fn provider_name(&self) -> &str {
        LlmProvider::provider_name(self)
    }
    fn model_name(&self) -> &str {
        LlmProvider::model_name(self)
    }
    fn chat_dyn(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(self.chat(req))
    }
    fn chat_stream_dyn(&self, req: ChatRequest) -> DeltaStream<'_> {
        self.chat_stream(req)
    }
}
