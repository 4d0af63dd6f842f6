//! The HTTP+JSON (REST) binding, as wire rules with no I/O: which HTTP method and path each
//! operation uses, and how errors travel as `google.rpc.Status` bodies. v1.0 serves the
//! resources at the interface's base URL; v0.3 served them under `/v1/` with bodies in the
//! v0.3 proto's JSON ([`v03`]). The server (`server::rest`) and the client both follow these.
//!
//! ```
//! use agentry_a2a::{jsonrpc::Request, model::TaskQueryParams, rest};
//! let call = rest::request(&Request::GetTask(TaskQueryParams {
//!     id: "t 1".into(),
//!     history_length: Some(2),
//!     metadata: None,
//! }));
//! assert_eq!((call.method.as_str(), call.path.as_str()), ("GET", "/tasks/t%201?historyLength=2"));
//! ```

use serde_json::{Value, json};

use crate::error::{RpcError, code};
use crate::jsonrpc::Request;
use crate::v1;
use crate::version::ProtocolVersion;

pub mod v03;

/// One operation as an HTTP request: method, path (with its query) and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct RestCall {
    /// The HTTP method.
    pub method: http::Method,
    /// The path, with its query.
    pub path: String,
    /// The JSON body, for methods that take one.
    pub body: Option<Value>,
}

/// Percent-encodes a path segment or query value (everything but RFC 3986's unreserved).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The HTTP request of an operation, relative to the interface's base URL.
pub fn request(req: &Request) -> RestCall {
    use http::Method;
    let params = v1::encode_params(req);
    let str_of = |k: &str| encode(params.get(k).and_then(Value::as_str).unwrap_or_default());
    let call = |method: Method, path: String, body: Option<Value>| RestCall { method, path, body };
    match req {
        Request::SendMessage(_) => call(Method::POST, "/message:send".into(), Some(params)),
        Request::StreamMessage(_) => call(Method::POST, "/message:stream".into(), Some(params)),
        Request::GetTask(_) => {
            let mut path = format!("/tasks/{}", str_of("id"));
            if let Some(h) = params.get("historyLength") {
                path.push_str(&format!("?historyLength={h}"));
            }
            call(Method::GET, path, None)
        }
        Request::ListTasks(_) => {
            let query: Vec<String> = params
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    format!("{}={}", encode(k), encode(&v))
                })
                .collect();
            let path = if query.is_empty() {
                "/tasks".to_owned()
            } else {
                format!("/tasks?{}", query.join("&"))
            };
            call(Method::GET, path, None)
        }
        Request::CancelTask(_) => {
            let mut body = params.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove("id");
            }
            call(
                Method::POST,
                format!("/tasks/{}:cancel", str_of("id")),
                Some(body),
            )
        }
        Request::Resubscribe(_) => call(
            Method::GET,
            format!("/tasks/{}:subscribe", str_of("id")),
            None,
        ),
        Request::SetPushConfig(_) => call(
            Method::POST,
            format!("/tasks/{}/pushNotificationConfigs", str_of("taskId")),
            Some(params.clone()),
        ),
        // A resource needs the config's name: one made without an id has the task's.
        Request::GetPushConfig(p) => call(
            Method::GET,
            format!(
                "/tasks/{}/pushNotificationConfigs/{}",
                encode(&p.id),
                encode(p.push_notification_config_id.as_deref().unwrap_or(&p.id))
            ),
            None,
        ),
        Request::ListPushConfigs(_) => call(
            Method::GET,
            format!("/tasks/{}/pushNotificationConfigs", str_of("taskId")),
            None,
        ),
        Request::DeletePushConfig(_) => call(
            Method::DELETE,
            format!(
                "/tasks/{}/pushNotificationConfigs/{}",
                str_of("taskId"),
                str_of("id")
            ),
            None,
        ),
        Request::GetExtendedCard => call(Method::GET, "/extendedAgentCard".into(), None),
    }
}

/// The HTTP request of an operation in `version`'s form of the binding.
pub fn request_as(req: &Request, version: ProtocolVersion) -> RestCall {
    let mut call = request(req);
    if version == ProtocolVersion::V1_0 {
        return call;
    }
    call.path = match req {
        Request::GetExtendedCard => "/v1/card".to_owned(),
        _ => format!("/v1{}", call.path),
    };
    fn body<T: serde::Serialize>(v: T) -> Value {
        serde_json::to_value(v).unwrap_or(Value::Null)
    }
    call.body = match req {
        Request::SendMessage(p) | Request::StreamMessage(p) => {
            Some(body(crate::wire::v03::SendMessageRequest::from(p)))
        }
        Request::CancelTask(p) => Some(json!({ "name": format!("tasks/{}", p.id) })),
        Request::SetPushConfig(p) => Some(body(crate::wire::v03::CreatePushRequest::from(p))),
        _ => call.body,
    };
    call
}

pub use v03::answer_to_v1;

/// The gRPC status name an error maps to (the `status` of `google.rpc.Status`).
pub fn status_name(code: i64) -> &'static str {
    use code::*;
    match code {
        TASK_NOT_FOUND | METHOD_NOT_FOUND => "NOT_FOUND",
        TASK_NOT_CANCELABLE
        | PUSH_NOTIFICATION_NOT_SUPPORTED
        | UNSUPPORTED_OPERATION
        | AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED
        | EXTENSION_SUPPORT_REQUIRED
        | VERSION_NOT_SUPPORTED => "FAILED_PRECONDITION",
        INTERNAL_ERROR | INVALID_AGENT_RESPONSE => "INTERNAL",
        _ => "INVALID_ARGUMENT",
    }
}

/// An error as its HTTP status and `google.rpc.Status` body.
pub fn error_body(e: &RpcError) -> (u16, Value) {
    let status = v1::http_status(e.code);
    let details = v1::error(e).data.unwrap_or_else(|| json!([]));
    let body = json!({
        "error": {
            "code": status,
            "status": status_name(e.code),
            "message": e.message,
            "details": details,
        }
    });
    (status, body)
}

/// The error an HTTP error answer stands for: the A2A code of its `ErrorInfo` reason when it
/// has one, else one that fits the HTTP status (v0.3 servers answer `{"message"}` with a
/// status per error: 404 task not found, 409 not cancelable, 422 invalid params, 501
/// unsupported). A 404 that is not JSON is a route the server lacks: "method not found".
pub fn error_from(status: u16, body: &[u8]) -> RpcError {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let err = if v["error"].is_object() {
        &v["error"]
    } else {
        &v
    };
    let message = err["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("HTTP {status}: {}", String::from_utf8_lossy(body)));
    let reason = err["details"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|d| d["reason"].as_str());
    let is_json = v.is_object();
    let code = reason.and_then(code_of_reason).unwrap_or(match status {
        404 if is_json => code::TASK_NOT_FOUND,
        404 => code::METHOD_NOT_FOUND,
        409 => code::TASK_NOT_CANCELABLE,
        415 => code::CONTENT_TYPE_NOT_SUPPORTED,
        422 => code::INVALID_PARAMS,
        501 => code::UNSUPPORTED_OPERATION,
        502 => code::INVALID_AGENT_RESPONSE,
        400..=499 => code::INVALID_REQUEST,
        _ => code::INTERNAL_ERROR,
    });
    RpcError {
        code,
        message,
        data: err.get("details").cloned(),
    }
}

/// The A2A error code of a v1.0 `ErrorInfo` reason.
pub fn code_of_reason(reason: &str) -> Option<i64> {
    use code::*;
    [
        TASK_NOT_FOUND,
        TASK_NOT_CANCELABLE,
        PUSH_NOTIFICATION_NOT_SUPPORTED,
        UNSUPPORTED_OPERATION,
        CONTENT_TYPE_NOT_SUPPORTED,
        INVALID_AGENT_RESPONSE,
        AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED,
        EXTENSION_SUPPORT_REQUIRED,
        VERSION_NOT_SUPPORTED,
        INVALID_PARAMS,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        PARSE_ERROR,
        INTERNAL_ERROR,
    ]
    .into_iter()
    .find(|c| v1::reason(*c) == reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    #[test]
    fn operations_map_to_resources() {
        let cases = [
            (
                Request::CancelTask(TaskIdParams {
                    id: "a/b".into(),
                    metadata: None,
                }),
                "POST",
                "/tasks/a%2Fb:cancel",
            ),
            (
                Request::Resubscribe(TaskIdParams {
                    id: "t".into(),
                    metadata: None,
                }),
                "GET",
                "/tasks/t:subscribe",
            ),
            (
                Request::DeletePushConfig(DeleteTaskPushNotificationConfigParams {
                    id: "t".into(),
                    push_notification_config_id: "c".into(),
                    metadata: None,
                }),
                "DELETE",
                "/tasks/t/pushNotificationConfigs/c",
            ),
            (
                Request::ListTasks(ListTasksParams {
                    context_id: Some("c 1".into()),
                    status: Some(TaskState::Working),
                    page_size: Some(5),
                    ..Default::default()
                }),
                "GET",
                "/tasks?contextId=c%201&pageSize=5&status=TASK_STATE_WORKING",
            ),
            (Request::GetExtendedCard, "GET", "/extendedAgentCard"),
        ];
        for (req, method, path) in cases {
            let c = request(&req);
            assert_eq!(
                (c.method.as_str(), c.path.as_str()),
                (method, path),
                "{req:?}"
            );
        }
    }

    #[test]
    fn errors_round_trip_through_status_bodies() {
        for e in [
            RpcError::task_not_found(),
            RpcError::task_not_cancelable("t", TaskState::Completed),
            RpcError::invalid_params("params.id is required"),
            RpcError::version_not_supported("9.9"),
        ] {
            let (status, body) = error_body(&e);
            let back = error_from(status, body.to_string().as_bytes());
            assert_eq!(
                (back.code, back.message.as_str()),
                (e.code, e.message.as_str())
            );
        }
        assert_eq!(error_body(&RpcError::task_not_found()).0, 404);
        assert_eq!(error_from(500, b"oops").code, code::INTERNAL_ERROR);
        // v0.3 servers: `{"message"}` and a status per error.
        let e = error_from(409, br#"{"message":"Task cannot be canceled"}"#);
        assert_eq!(
            (e.code, e.message.as_str()),
            (code::TASK_NOT_CANCELABLE, "Task cannot be canceled")
        );
        assert_eq!(
            error_from(404, br#"{"message":"Task not found"}"#).code,
            code::TASK_NOT_FOUND
        );
        assert_eq!(error_from(404, b"Not Found").code, code::METHOD_NOT_FOUND);
    }
}
