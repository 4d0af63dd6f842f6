//! A request independent of the protocol version and binding it came in: what every codec
//! decodes into and the server dispatches on, with the checks that do not depend on the wire
//! form (non-empty parts, base64 file bytes, history lengths).
//!
//! The codecs depend on this module, never the other way round: `jsonrpc` (v0.3) and `v1`
//! (v1.0, through [`crate::wire::v1`]) each turn their wire form into a [`Request`].

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::RpcError;
use crate::model::*;

/// A decoded request, independent of the wire version it came in.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `message/send`.
    SendMessage(MessageSendParams),
    /// `message/stream`.
    StreamMessage(MessageSendParams),
    /// `tasks/get`.
    GetTask(TaskQueryParams),
    /// `tasks/cancel`.
    CancelTask(TaskIdParams),
    /// `tasks/resubscribe`.
    Resubscribe(TaskIdParams),
    /// `tasks/pushNotificationConfig/set`.
    SetPushConfig(TaskPushNotificationConfig),
    /// `tasks/pushNotificationConfig/get`.
    GetPushConfig(GetTaskPushNotificationConfigParams),
    /// `tasks/pushNotificationConfig/list`.
    ListPushConfigs(TaskIdParams),
    /// `tasks/pushNotificationConfig/delete`.
    DeletePushConfig(DeleteTaskPushNotificationConfigParams),
    /// `agent/getAuthenticatedExtendedCard`.
    GetExtendedCard,
    /// v1.0 only (`ListTasks`).
    ListTasks(ListTasksParams),
}

impl Request {
    /// Answers arrive as a stream of events.
    pub fn is_streaming(&self) -> bool {
        matches!(self, Request::StreamMessage(_) | Request::Resubscribe(_))
    }
}

/// A wire value that decoded but does not hold together, as the -32602 naming its path.
pub(crate) fn invalid_params(e: crate::wire::WireError) -> RpcError {
    RpcError::invalid_params(format!("params.{e}"))
}

/// `raw` JSON params decoded as `T`; errors name the failing field's path.
pub(crate) fn parse_str<T: DeserializeOwned>(raw: &str) -> Result<T, RpcError> {
    // Plain serde first: tracking the path costs on every field. Only params that fail are
    // decoded again, tracking it, so the error names the field.
    if let Ok(v) = serde_json::from_str(raw) {
        return Ok(v);
    }
    let de = &mut serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        params_error(path, e.into_inner().to_string())
    })
}

/// Params already parsed into JSON (the REST binding assembles them from the path, the query
/// and the body) decoded as `T`; errors name the failing field's path.
pub(crate) fn parse_value<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        params_error(path, e.into_inner().to_string())
    })
}

/// A -32602 naming the failing field's path.
fn params_error(path: String, msg: String) -> RpcError {
    let msg = strip_position(&msg);
    let prefix = if path == "." || path.is_empty() {
        "params".to_owned()
    } else {
        format!("params.{path}")
    };
    // Name the missing field itself: "params.message.parts is required".
    if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return RpcError::invalid_params(format!("{prefix}.{field} is required"));
    }
    if path == "." || path.is_empty() {
        RpcError::invalid_params(format!("invalid params: {msg}"))
    } else {
        RpcError::invalid_params(format!("invalid params.{path}: {msg}"))
    }
}

/// serde_json appends " at line 1 column 42", which means little to a caller.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

pub(crate) fn check_history_length(h: Option<i64>, field: &str) -> Result<(), RpcError> {
    match h {
        Some(n) if n < 0 => Err(RpcError::invalid_params(format!(
            "{field} must not be negative (got {n})"
        ))),
        _ => Ok(()),
    }
}

pub(crate) fn validate_send(p: MessageSendParams) -> Result<MessageSendParams, RpcError> {
    if p.message.parts.is_empty() {
        return Err(RpcError::invalid_params(
            "params.message.parts must not be empty",
        ));
    }
    if p.message.message_id.is_empty() {
        return Err(RpcError::invalid_params(
            "params.message.messageId must not be empty",
        ));
    }
    if let Some(c) = &p.configuration {
        check_history_length(c.history_length, "params.configuration.historyLength")?;
    }
    for (i, part) in p.message.parts.iter().enumerate() {
        if let Part::File(f) = part
            && let FileContent::Bytes(b) = &f.file.content
            && !is_base64(b)
        {
            return Err(RpcError::invalid_params(format!(
                "params.message.parts[{i}]: the file's bytes are not base64"
            )));
        }
    }
    Ok(p)
}

/// Base64 as A2A carries file bytes: the standard or URL-safe alphabet, padding optional,
/// no whitespace. Checked at the edge so an agent never gets bytes it cannot decode.
pub(crate) fn is_base64(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    let padding = s.len() - body.len();
    padding <= 2
        && body.len() % 4 != 1
        && (padding == 0 || s.len().is_multiple_of(4))
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_'))
}
