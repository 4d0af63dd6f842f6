//! The JSON-RPC 2.0 binding: envelopes, and the v0.3 codec from method names to [`Request`]s.
//!
//! Decoding is strict where the spec is (envelope shape, required fields, with the failing
//! field's path in the -32602 message) and tolerant where peers differ (unknown fields).
//!
//! ```
//! use agentry_a2a::jsonrpc::{decode_request, Request};
//! let body = br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}"#;
//! let (id, req) = decode_request(body).unwrap();
//! assert_eq!(id, serde_json::json!(1));
//! assert!(matches!(req, Request::GetTask(p) if p.id == "t1"));
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::RpcError;
use crate::model::*;
use crate::request::{check_history_length, parse_str, validate_send};
use crate::version::ProtocolVersion;

/// v0.3 method names.
pub mod method {
    /// Send a message, get a task or a message.
    pub const SEND: &str = "message/send";
    /// Send a message, get its events as SSE.
    pub const STREAM: &str = "message/stream";
    /// Read a task.
    pub const GET: &str = "tasks/get";
    /// Cancel a task.
    pub const CANCEL: &str = "tasks/cancel";
    /// Stream a running task's events again.
    pub const RESUBSCRIBE: &str = "tasks/resubscribe";
    /// Add a task's push config.
    pub const PUSH_SET: &str = "tasks/pushNotificationConfig/set";
    /// Read a task's push config.
    pub const PUSH_GET: &str = "tasks/pushNotificationConfig/get";
    /// List a task's push configs.
    pub const PUSH_LIST: &str = "tasks/pushNotificationConfig/list";
    /// Delete a task's push config.
    pub const PUSH_DELETE: &str = "tasks/pushNotificationConfig/delete";
    /// Read the card for authenticated callers.
    pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
}

pub use crate::request::Request;

/// v0.3's names and params of a request.
impl Request {
    /// The v0.3 method name.
    pub fn method(&self) -> &'static str {
        match self {
            Request::SendMessage(_) => method::SEND,
            Request::StreamMessage(_) => method::STREAM,
            Request::GetTask(_) => method::GET,
            Request::CancelTask(_) => method::CANCEL,
            Request::Resubscribe(_) => method::RESUBSCRIBE,
            Request::SetPushConfig(_) => method::PUSH_SET,
            Request::GetPushConfig(_) => method::PUSH_GET,
            Request::ListPushConfigs(_) => method::PUSH_LIST,
            Request::DeletePushConfig(_) => method::PUSH_DELETE,
            Request::GetExtendedCard => method::EXTENDED_CARD,
            // v0.3 has no JSON-RPC method for it; the name a v0.3 server would refuse.
            Request::ListTasks(_) => "tasks/list",
        }
    }

    /// The params as JSON (for a client to send).
    pub fn params(&self) -> Value {
        let v = match self {
            Request::SendMessage(p) | Request::StreamMessage(p) => serde_json::to_value(p),
            Request::GetTask(p) => serde_json::to_value(p),
            Request::CancelTask(p) | Request::Resubscribe(p) | Request::ListPushConfigs(p) => {
                serde_json::to_value(p)
            }
            Request::SetPushConfig(p) => serde_json::to_value(p),
            Request::GetPushConfig(p) => serde_json::to_value(p),
            Request::DeletePushConfig(p) => serde_json::to_value(p),
            Request::ListTasks(p) => serde_json::to_value(p),
            Request::GetExtendedCard => return Value::Object(Default::default()),
        };
        v.unwrap_or(Value::Null)
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// Decodes a v0.3 JSON-RPC request body. On failure the error comes with the request id when
/// one could be read (`Value::Null` otherwise), so the caller can always answer.
pub fn decode_request(body: &[u8]) -> Result<(Value, Request), (Value, RpcError)> {
    let (id, method, params) = decode_envelope(body)?;
    let req = decode_params(&method, params).map_err(|e| (id.clone().unwrap_or_default(), e))?;
    Ok((require_id(id)?, req))
}

/// A request without an id is a JSON-RPC notification, which gets no answer; every A2A method
/// has one to give, so agentry refuses them. Only after the method and params were checked:
/// a notification with a wrong method or bad params gets that error (-32601 / -32602, as the
/// official SDKs and the conformance kit expect), not -32600.
fn require_id(id: Option<Value>) -> Result<Value, (Value, RpcError)> {
    id.ok_or_else(|| {
        (
            Value::Null,
            RpcError::invalid_request("`id` is required (a string or a number)"),
        )
    })
}

/// Decodes a request body with the codec of `version` (the `A2A-Version` header's; `None`
/// when the request named none), and says which codec that was, so the answer uses it too.
pub fn decode_request_as(
    body: &[u8],
    version: Option<ProtocolVersion>,
) -> Result<(Value, Request, ProtocolVersion), (Value, RpcError, ProtocolVersion)> {
    let fallback = version.unwrap_or(ProtocolVersion::V0_3);
    let (id, method, params) = decode_envelope(body).map_err(|(id, e)| (id, e, fallback))?;
    let method = &*method;
    let answer_id = id.clone().unwrap_or_default();
    // No header: the method name tells (the two sets of names do not overlap).
    let v = version.unwrap_or(if crate::v1::is_method(method) {
        ProtocolVersion::V1_0
    } else {
        ProtocolVersion::V0_3
    });
    let decoded = match v {
        ProtocolVersion::V1_0 => crate::v1::decode_params(method, params).map_err(|e| {
            if e.code == crate::error::code::METHOD_NOT_FOUND && !crate::v1::is_method(method) {
                RpcError::method_not_found(&format!(
                    "{method} (A2A-Version 1.0 requests use the v1.0 names, e.g. SendMessage)"
                ))
            } else {
                e
            }
        }),
        ProtocolVersion::V0_3 => decode_params(method, params),
    };
    match decoded {
        Ok(req) => Ok((require_id(id).map_err(|(id, e)| (id, e, v))?, req, v)),
        Err(e) => Err((answer_id, e, v)),
    }
}

/// The envelope's id (`None` when absent or null: a notification), method and raw params.
#[allow(clippy::type_complexity)]
fn decode_envelope(
    body: &[u8],
) -> Result<(Option<Value>, std::borrow::Cow<'_, str>, Option<&str>), (Value, RpcError)> {
    // Before decoding: serde would read an array as the envelope's fields in order.
    if body.trim_ascii_start().starts_with(b"[") {
        return Err((
            Value::Null,
            RpcError::invalid_request(
                "batch requests are not supported: send each request in its own call",
            ),
        ));
    }
    let env: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(e) if e.is_data() => {
            // Valid JSON of the wrong shape (an array, a string, ...).
            return Err((
                Value::Null,
                RpcError::invalid_request("a request must be a JSON-RPC 2.0 object"),
            ));
        }
        Err(e) => return Err((Value::Null, RpcError::parse(e))),
    };
    let id = match env.id {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(Value::Null) | None => None,
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::invalid_request("`id` must be a string or a number"),
            ));
        }
    };
    let answer_id = id.clone().unwrap_or_default();
    // Decoded, not compared raw: `"2\u002e0"` is "2.0" too.
    let version = env.jsonrpc.map(|v| serde_json::from_str::<String>(v.get()));
    if !matches!(version, Some(Ok(v)) if v == "2.0") {
        return Err((
            answer_id,
            RpcError::invalid_request("`jsonrpc` must be \"2.0\""),
        ));
    }
    // Borrowed unless it holds escapes.
    let method = match env.method.map(|m| {
        serde_json::from_str::<&str>(m.get())
            .map(std::borrow::Cow::Borrowed)
            .or_else(|_| serde_json::from_str::<String>(m.get()).map(std::borrow::Cow::Owned))
    }) {
        Some(Ok(m)) => m,
        _ => {
            return Err((
                answer_id,
                RpcError::invalid_request("`method` must be a string"),
            ));
        }
    };
    Ok((id, method, env.params.map(RawValue::get)))
}

/// Maps a v0.3 method name and its params to a [`Request`].
pub fn decode_params(method: &str, params: Option<&str>) -> Result<Request, RpcError> {
    Ok(match method {
        method::SEND => Request::SendMessage(validate_send(parse(params)?)?),
        method::STREAM => Request::StreamMessage(validate_send(parse(params)?)?),
        method::GET => {
            let p: TaskQueryParams = parse(params)?;
            check_history_length(p.history_length, "params.historyLength")?;
            Request::GetTask(p)
        }
        method::CANCEL => Request::CancelTask(parse(params)?),
        method::RESUBSCRIBE => Request::Resubscribe(parse(params)?),
        method::PUSH_SET => Request::SetPushConfig(parse(params)?),
        method::PUSH_GET => Request::GetPushConfig(parse(params)?),
        method::PUSH_LIST => Request::ListPushConfigs(parse(params)?),
        method::PUSH_DELETE => Request::DeletePushConfig(parse(params)?),
        method::EXTENDED_CARD => Request::GetExtendedCard,
        other => return Err(RpcError::method_not_found(other)),
    })
}

fn parse<T: DeserializeOwned>(params: Option<&str>) -> Result<T, RpcError> {
    let Some(raw) = params else {
        return Err(RpcError::invalid_params("missing `params`"));
    };
    parse_str(raw)
}

#[derive(Serialize)]
struct OkResponse<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrResponse<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

/// Encodes a success response.
pub fn encode_result<T: Serialize>(id: &Value, result: &T) -> Vec<u8> {
    serde_json::to_vec(&OkResponse {
        jsonrpc: "2.0",
        id,
        result,
    })
    .unwrap_or_else(|e| encode_error(id, &RpcError::internal(format!("encoding failed: {e}"))))
}

/// Encodes an error response.
pub fn encode_error(id: &Value, error: &RpcError) -> Vec<u8> {
    serde_json::to_vec(&ErrResponse {
        jsonrpc: "2.0",
        id,
        error,
    })
    .unwrap_or_default()
}

/// A response as a client reads it.
#[derive(Debug, Deserialize)]
pub struct Response<T> {
    /// The request's id.
    #[serde(default)]
    pub id: Value,
    /// The result, on success.
    pub result: Option<T>,
    /// The error, on failure.
    pub error: Option<RpcError>,
}

impl<T> Response<T> {
    /// The result, or the error the peer sent. A `null`/missing result is `None`.
    pub fn into_result(self) -> Result<Option<T>, RpcError> {
        match (self.result, self.error) {
            (_, Some(e)) => Err(e),
            (r, None) => Ok(r),
        }
    }
}

/// Encodes a request (for a client).
pub fn encode_request(id: &Value, req: &Request) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": req.method(),
        "params": req.params(),
    }))
    .unwrap_or_default()
}
