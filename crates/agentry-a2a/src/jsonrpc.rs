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
    match one_pass::send(body, version) {
        Some(decoded) => Ok(decoded),
        None => decode_general(body, version),
    }
}

/// The codec a request is decoded with: the asked version's, else the one whose method names
/// it uses (the two sets of names do not overlap).
fn codec_for(version: Option<ProtocolVersion>, method: &str) -> ProtocolVersion {
    version.unwrap_or(if crate::v1::is_method(method) {
        ProtocolVersion::V1_0
    } else {
        ProtocolVersion::V0_3
    })
}

/// [`decode_request_as`] for any request: the envelope read first, then the params.
#[allow(clippy::type_complexity)]
fn decode_general(
    body: &[u8],
    version: Option<ProtocolVersion>,
) -> Result<(Value, Request, ProtocolVersion), (Value, RpcError, ProtocolVersion)> {
    let fallback = version.unwrap_or(ProtocolVersion::V0_3);
    let (id, method, params) = decode_envelope(body).map_err(|(id, e)| (id, e, fallback))?;
    let method = &*method;
    let answer_id = id.clone().unwrap_or_default();
    let v = codec_for(version, method);
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
        method::SEND | method::STREAM => send_request(method, parse(params)?)?,
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

/// The request nearly every call is, in one pass: a send (either version) whose `method`
/// comes before its `params`, as clients write them. The general way reads the params as raw
/// JSON first, to learn the method, then parses them again as their type: a third of a
/// message echo's decoding. Anything else, and every error, is left to the general way
/// (`None`), which then makes the same request of the body, or the precise error.
mod one_pass {
    use std::borrow::Cow;
    use std::fmt;

    use serde::Deserializer as _;
    use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
    use serde_json::Value;

    use super::{Request, method};
    use crate::model::MessageSendParams;
    use crate::version::ProtocolVersion;
    use crate::wire::v1 as wire;

    enum Params<'a> {
        V03(MessageSendParams),
        V1(wire::SendMessageRequest<'a>),
    }

    /// A string borrowed from the body unless it has escapes (serde's own `Cow` impl always
    /// copies).
    #[derive(serde::Deserialize)]
    struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

    struct Call<'a> {
        jsonrpc: Option<Cow<'a, str>>,
        id: Option<Value>,
        method: Option<Cow<'a, str>>,
        params: Option<(ProtocolVersion, Params<'a>)>,
    }

    struct CallVisitor(Option<ProtocolVersion>);

    impl<'de> Visitor<'de> for CallVisitor {
        type Value = Call<'de>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON-RPC request")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Call<'de>, A::Error> {
            let mut call = Call {
                jsonrpc: None,
                id: None,
                method: None,
                params: None,
            };
            // Duplicates and params before the method: the general way decides.
            let other = || A::Error::custom("not the common shape");
            while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
                match &*key {
                    // Not a string: the general way says what is wrong.
                    "jsonrpc" if call.jsonrpc.is_none() => {
                        call.jsonrpc = Some(map.next_value::<Str<'de>>()?.0);
                    }
                    "id" if call.id.is_none() => call.id = Some(map.next_value()?),
                    "method" if call.method.is_none() => {
                        call.method = Some(map.next_value::<Str<'de>>()?.0);
                    }
                    "params" if call.params.is_none() => {
                        let m = call.method.as_deref().ok_or_else(other)?;
                        let v = super::codec_for(self.0, m);
                        let params = match v {
                            ProtocolVersion::V1_0
                                if m == crate::v1::method::SEND
                                    || m == crate::v1::method::STREAM =>
                            {
                                Params::V1(map.next_value()?)
                            }
                            ProtocolVersion::V0_3 if m == method::SEND || m == method::STREAM => {
                                Params::V03(map.next_value()?)
                            }
                            _ => return Err(other()),
                        };
                        call.params = Some((v, params));
                    }
                    "jsonrpc" | "id" | "method" | "params" => return Err(other()),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(call)
        }
    }

    pub(super) fn send(
        body: &[u8],
        version: Option<ProtocolVersion>,
    ) -> Option<(Value, Request, ProtocolVersion)> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let call = (&mut de).deserialize_map(CallVisitor(version)).ok()?;
        de.end().ok()?;
        let jsonrpc = call.jsonrpc?;
        let id = match call.id? {
            id @ (Value::String(_) | Value::Number(_)) => id,
            _ => return None,
        };
        let (method, (v, params)) = (call.method?, call.params?);
        if jsonrpc != "2.0" {
            return None;
        }
        let req = match params {
            Params::V1(w) => crate::v1::send_request(&method, w),
            Params::V03(p) => super::send_request(&method, p),
        };
        Some((id, req.ok()?, v))
    }
}

/// A send ([`method::SEND`] or [`method::STREAM`], which `method` must be) from its params.
fn send_request(method: &str, p: MessageSendParams) -> Result<Request, RpcError> {
    let p = validate_send(p)?;
    Ok(if method == method::SEND {
        Request::SendMessage(p)
    } else {
        Request::StreamMessage(p)
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
    // Room for a message answer (~200 bytes) or a small task (~600): `to_vec` starts at 128
    // bytes and grows, copying, on nearly every answer.
    let mut out = Vec::with_capacity(1024);
    match serde_json::to_writer(
        &mut out,
        &OkResponse {
            jsonrpc: "2.0",
            id,
            result,
        },
    ) {
        Ok(()) => out,
        Err(e) => encode_error(id, &RpcError::internal(format!("encoding failed: {e}"))),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass decoding takes only what it can decode exactly as the general way does,
    /// and leaves the rest (with every error) to it.
    #[test]
    fn one_pass_sends_decode_as_the_general_way_does() {
        const V1: Option<ProtocolVersion> = Some(ProtocolVersion::V1_0);
        const V03: Option<ProtocolVersion> = Some(ProtocolVersion::V0_3);
        let v1_msg = r#"{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}],"messageId":"m1"}}"#;
        let v1_full = r#"{"message":{"role":"ROLE_USER","messageId":"m2","contextId":"c","parts":[{"text":"a","metadata":{"k":1}},{"data":{"x":[1,2]}},{"url":"https://e.x/f","mediaType":"text/plain","filename":"f"},{"raw":"aGk="}],"metadata":{"m":true},"extensions":["urn:x"]},"configuration":{"acceptedOutputModes":["text/plain"],"historyLength":2,"returnImmediately":true,"taskPushNotificationConfig":{"url":"https://h.example/cb","token":"t"}},"metadata":{"p":"q"}}"#;
        let v03_msg = r#"{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}],"messageId":"m1","kind":"message"}}"#;
        let v03_full = r#"{"message":{"role":"user","parts":[{"kind":"text","text":"a"},{"kind":"data","data":{"x":1}},{"kind":"file","file":{"uri":"https://e.x/f","mimeType":"text/plain"}}],"messageId":"m2","taskId":"t","contextId":"c","kind":"message","metadata":{"a":1}},"configuration":{"blocking":false,"historyLength":1,"pushNotificationConfig":{"url":"https://h.example/cb"}},"metadata":{"z":null}}"#;
        let body = |fields: &str| format!("{{{fields}}}");
        let cases: Vec<(String, Option<ProtocolVersion>, bool)> = vec![
            // The common shapes: decoded in one pass.
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                true,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                )),
                None,
                true,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{v1_full}"#
                )),
                V1,
                true,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":2.5,"method":"message/send","params":{v03_msg}"#
                )),
                None,
                true,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":3,"method":"message/stream","params":{v03_full}"#
                )),
                V03,
                true,
            ),
            (
                body(&format!(
                    r#""method":"message/send","x":[{{}}],"jsonrpc":"2\u002e0","params":{v03_msg},"id":4"#
                )),
                None,
                true,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":5,"me\u0074hod":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                true,
            ),
            (
                format!(
                    " \n{}\n ",
                    body(&format!(
                        r#""jsonrpc":"2.0","id":6,"method":"SendMessage","params":{v1_msg}"#
                    ))
                ),
                V1,
                true,
            ),
            // Left to the general way: decoded the same, or refused as it refuses them.
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"params":{v1_msg},"method":"SendMessage""#
                )),
                V1,
                false,
            ),
            (
                body(r#""jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}"#),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":null,"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":[1],"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"id":2,"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"1.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""id":1,"method":"SendMessage","params":{v1_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"method":"message/send","params":{v03_msg}"#
                )),
                V1,
                false,
            ),
            (
                body(&format!(
                    r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                )),
                V03,
                false,
            ),
            (
                body(
                    r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[]}}"#,
                ),
                V1,
                false,
            ),
            (
                body(r#""jsonrpc":"2.0","id":1,"method":"message/send","params":null"#),
                None,
                false,
            ),
            (
                body(
                    r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m","parts":[{"raw":"!!"}]}}"#,
                ),
                V1,
                false,
            ),
            (
                format!(
                    "{} x",
                    body(&format!(
                        r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                    ))
                ),
                V1,
                false,
            ),
            (
                format!(
                    "[{}]",
                    body(&format!(
                        r#""jsonrpc":"2.0","id":1,"method":"SendMessage","params":{v1_msg}"#
                    ))
                ),
                V1,
                false,
            ),
        ];
        for (b, v, fast) in &cases {
            let general = decode_general(b.as_bytes(), *v);
            match one_pass::send(b.as_bytes(), *v) {
                Some(decoded) => {
                    assert!(fast, "decoded in one pass: {b}");
                    assert_eq!(
                        format!("{:?}", Ok::<_, ()>(decoded)),
                        format!("{general:?}"),
                        "{b}"
                    );
                }
                None => assert!(!fast, "not decoded in one pass: {b} ({general:?})"),
            }
            assert_eq!(
                format!("{:?}", decode_request_as(b.as_bytes(), *v)),
                format!("{general:?}"),
                "{b}"
            );
        }
    }
}
