//! Protocol errors: the JSON-RPC and A2A error codes, one enum for the whole protocol layer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The standard JSON-RPC codes and the A2A-specific ones (-32001 to -32007; v1.0 adds -32008
/// and -32009).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    pub const AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A JSON-RPC error object as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn parse(msg: impl std::fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("invalid JSON: {msg}"))
    }
    pub fn invalid_request(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, msg)
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )
    }
    pub fn invalid_params(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, msg)
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, msg)
    }
    pub fn task_not_found(id: &str) -> Self {
        Self::new(code::TASK_NOT_FOUND, format!("task not found: {id}"))
    }
    pub fn task_not_cancelable(id: &str, state: crate::model::TaskState) -> Self {
        Self::new(
            code::TASK_NOT_CANCELABLE,
            format!("task {id} cannot be canceled: it is {state}"),
        )
    }
    pub fn push_not_supported() -> Self {
        Self::new(
            code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported by this agent",
        )
    }
    pub fn unsupported(msg: impl Into<String>) -> Self {
        Self::new(code::UNSUPPORTED_OPERATION, msg)
    }
    pub fn content_type(ct: &str) -> Self {
        Self::new(
            code::CONTENT_TYPE_NOT_SUPPORTED,
            format!("content type not supported: {ct:?}; send application/json"),
        )
    }
    pub fn extension_required(uris: &[String]) -> Self {
        Self::new(
            code::EXTENSION_SUPPORT_REQUIRED,
            format!(
                "this agent requires the extension(s) {}: list them in the A2A-Extensions header",
                uris.join(", ")
            ),
        )
    }
    pub fn version_not_supported(v: &str) -> Self {
        Self::new(
            code::VERSION_NOT_SUPPORTED,
            format!("A2A version {v:?} is not supported; this agent speaks 1.0 and 0.3"),
        )
    }
    pub fn extended_card_not_configured() -> Self {
        Self::new(
            code::AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED,
            "this agent has no authenticated extended card",
        )
    }
}

/// Everything that can go wrong in this crate, with the protocol error it maps to where one does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum A2aError {
    /// The peer answered with a JSON-RPC error.
    #[error("agent returned an error: {0}")]
    Rpc(#[from] RpcError),
    #[error("HTTP {status} from {url}: {body}")]
    Http {
        status: u16,
        url: String,
        body: String,
    },
    #[error("authentication required by {url} (HTTP 401): pass a bearer token or API key")]
    Unauthorized { url: String },
    /// The credentials were read and are not allowed this: other ones are needed, not
    /// missing ones.
    #[error("{url} refused the credentials sent (HTTP 403): use credentials allowed to call it")]
    Forbidden { url: String },
    #[error("no agent card at {url} (HTTP 404): is this the agent's base URL?")]
    CardNotFound { url: String },
    #[error("invalid agent card at {url}: {reason}")]
    InvalidCard { url: String, reason: String },
    #[error("timed out after {after_ms} ms: {what}")]
    Timeout { what: String, after_ms: u64 },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("invalid response from agent: {0}")]
    InvalidResponse(String),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// A request failed after it was sent (the connection broke, the body could not be read).
    #[error("request to {url} failed: {reason}")]
    Request { url: String, reason: String },
    /// The HTTP client could not be made (TLS roots, settings).
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl A2aError {
    /// The JSON-RPC error a server answers with for this failure.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            A2aError::Rpc(e) => e.clone(),
            other => RpcError::internal(other.to_string()),
        }
    }
}
