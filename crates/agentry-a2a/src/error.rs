//! Protocol errors: the JSON-RPC and A2A error codes, one enum for the whole protocol layer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The standard JSON-RPC codes and the A2A-specific ones (-32001 to -32007; v1.0 adds -32008
/// and -32009).
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// No such task (or not the caller's).
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task is in a final state.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// The agent does not do push notifications.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// The agent does not do this operation.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// A media type the agent does not take.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// The agent's answer broke the protocol.
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    /// No extended card to give.
    pub const AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    /// The agent requires an extension the client did not name.
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    /// A protocol version the agent does not speak (v1.0).
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A JSON-RPC error object as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    /// One of the codes above, or another.
    pub code: i64,
    /// For people.
    pub message: String,
    /// Details for programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32700, saying why the body did not parse.
    pub fn parse(msg: impl std::fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("invalid JSON: {msg}"))
    }
    /// -32600.
    pub fn invalid_request(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, msg)
    }
    /// -32601, naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )
    }
    /// -32602.
    pub fn invalid_params(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, msg)
    }
    /// -32603.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, msg)
    }
    /// -32001. The id asked for is not echoed (as the official SDKs do not): a caller knows
    /// it, and the 0.3 conformance kit reads "501" anywhere in an error as "not implemented",
    /// which a random id it sent contains now and then.
    pub fn task_not_found() -> Self {
        Self::new(code::TASK_NOT_FOUND, "task not found")
    }
    /// -32002 for the task `id`, saying its state.
    pub fn task_not_cancelable(id: &str, state: crate::model::TaskState) -> Self {
        Self::new(
            code::TASK_NOT_CANCELABLE,
            format!("task {id} cannot be canceled: it is {state}"),
        )
    }
    /// -32003.
    pub fn push_not_supported() -> Self {
        Self::new(
            code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported by this agent",
        )
    }
    /// -32004.
    pub fn unsupported(msg: impl Into<String>) -> Self {
        Self::new(code::UNSUPPORTED_OPERATION, msg)
    }
    /// -32005, naming the media type.
    pub fn content_type(ct: &str) -> Self {
        Self::new(
            code::CONTENT_TYPE_NOT_SUPPORTED,
            format!("content type not supported: {ct:?}; send application/json"),
        )
    }
    /// -32008, naming the extensions required.
    pub fn extension_required(uris: &[String]) -> Self {
        Self::new(
            code::EXTENSION_SUPPORT_REQUIRED,
            format!(
                "this agent requires the extension(s) {}: list them in the A2A-Extensions header",
                uris.join(", ")
            ),
        )
    }
    /// -32009, naming the version asked for.
    pub fn version_not_supported(v: &str) -> Self {
        Self::new(
            code::VERSION_NOT_SUPPORTED,
            format!("A2A version {v:?} is not supported; this agent speaks 1.0 and 0.3"),
        )
    }
    /// -32007.
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
    /// The peer answered with an HTTP error outside the protocol's error forms.
    #[error("HTTP {status} from {url}: {body}")]
    Http {
        /// The status.
        status: u16,
        /// The URL asked.
        url: String,
        /// The body (cut short).
        body: String,
    },
    /// No credentials, or unreadable ones (HTTP 401).
    #[error("authentication required by {url} (HTTP 401): pass a bearer token or API key")]
    Unauthorized {
        /// The URL asked.
        url: String,
    },
    /// The credentials were read and are not allowed this: other ones are needed, not
    /// missing ones.
    #[error("{url} refused the credentials sent (HTTP 403): use credentials allowed to call it")]
    Forbidden {
        /// The URL asked.
        url: String,
    },
    /// Nothing at the card's well-known path.
    #[error("no agent card at {url} (HTTP 404): is this the agent's base URL?")]
    CardNotFound {
        /// The URL asked.
        url: String,
    },
    /// A card that does not decode or names no usable interface.
    #[error("invalid agent card at {url}: {reason}")]
    InvalidCard {
        /// Where it was read.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// No answer in time.
    #[error("timed out after {after_ms} ms: {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        after_ms: u64,
    },
    /// The connection could not be made.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer that is not the protocol's.
    #[error("invalid response from agent: {0}")]
    InvalidResponse(String),
    /// An answer (or one event of a stream) larger than the client takes
    /// ([`ClientConfig::max_response_bytes`](crate::client::ClientConfig::max_response_bytes)).
    #[error("the answer from {url} is larger than {limit} bytes: refused")]
    TooLarge {
        /// The URL asked.
        url: String,
        /// The limit, bytes.
        limit: usize,
    },
    /// The task store failed.
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// A request failed after it was sent (the connection broke, the body could not be read).
    #[error("request to {url} failed: {reason}")]
    Request {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
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
