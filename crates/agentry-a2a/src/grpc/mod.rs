//! The gRPC binding of A2A 1.0 as wire rules with no I/O: the `lf.a2a.v1` messages, gRPC's
//! length-prefixed frames, and errors as gRPC statuses with a `google.rpc.ErrorInfo`.
//!
//! A call's protobuf request is transcoded to the ProtoJSON that the JSON-RPC and HTTP+JSON
//! bindings carry (the v1.0 JSON *is* the proto's JSON mapping), so all three bindings go
//! through one decoder and one dispatcher and answer alike; the answer's JSON is read back
//! into the method's protobuf response. The cost is a JSON value per message, beside a
//! second set of hand-written conversions that would have to be kept in step with the
//! model's.
//!
//! ```
//! use agentry_a2a::grpc;
//! use agentry_a2a::v1::method;
//!
//! // A GetTask request as a gRPC client frames it: flag 0 (not compressed), length, message.
//! let msg = grpc::proto::GetTaskRequest { id: "t-1".into(), ..Default::default() };
//! let frame = grpc::frame(&msg);
//! let params = grpc::request_json(method::GET, grpc::unframe(&frame).unwrap()).unwrap();
//! assert_eq!(params["id"], "t-1");
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use serde_json::Value;

use crate::error::{RpcError, code};
use crate::v1::method;

/// The messages and service of `proto/a2a.proto` (A2A 1.0, package `lf.a2a.v1`), generated
/// by prost and pbjson (`scripts/grpc-codegen.sh`); their serde form is ProtoJSON.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links
)]
pub mod proto {
    include!("lf.a2a.v1.rs");
    include!("lf.a2a.v1.serde.rs");
}

pub mod wkt;

/// The service's path prefix: a call is `POST /lf.a2a.v1.A2AService/{Method}`.
pub const SERVICE: &str = "lf.a2a.v1.A2AService";

/// The content type of gRPC requests and answers (`application/grpc+proto` too).
pub const CONTENT_TYPE: &str = "application/grpc";

/// `google.rpc.Status`, carried base64-free in the `grpc-status-details-bin` trailer.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    /// The gRPC status code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// What went wrong, for a developer.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Typed details; A2A puts a [`ErrorInfo`] here.
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<wkt::Any>,
}

/// `google.rpc.ErrorInfo`: the A2A error's reason (`TASK_NOT_FOUND`, ...) in the domain
/// `a2a-protocol.org`.
#[derive(Clone, PartialEq, Message)]
pub struct ErrorInfo {
    /// The error's name in UPPER_SNAKE_CASE, without "Error".
    #[prost(string, tag = "1")]
    pub reason: String,
    /// `a2a-protocol.org`.
    #[prost(string, tag = "2")]
    pub domain: String,
    /// Further facts about the error.
    #[prost(map = "string, string", tag = "3")]
    pub metadata: std::collections::HashMap<String, String>,
}

/// The type URL of [`ErrorInfo`] in a `google.protobuf.Any`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// gRPC status codes (the numbers of `google.rpc.Code`) that A2A's errors map to.
pub mod status {
    /// Not an error.
    pub const OK: i32 = 0;
    /// The request is malformed.
    pub const INVALID_ARGUMENT: i32 = 3;
    /// The task (or config) does not exist.
    pub const NOT_FOUND: i32 = 5;
    /// The caller may not do this.
    pub const PERMISSION_DENIED: i32 = 7;
    /// A limit was reached (a message larger than the server takes).
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// Not in a state that allows it.
    pub const FAILED_PRECONDITION: i32 = 9;
    /// Not implemented by this agent (or this version, or compression).
    pub const UNIMPLEMENTED: i32 = 12;
    /// The server failed.
    pub const INTERNAL: i32 = 13;
    /// No credentials, or bad ones.
    pub const UNAUTHENTICATED: i32 = 16;
}

/// The gRPC status an A2A error maps to (A2A 1.0, section 5.4).
pub fn status_of(rpc_code: i64) -> i32 {
    use code::*;
    match rpc_code {
        TASK_NOT_FOUND => status::NOT_FOUND,
        TASK_NOT_CANCELABLE
        | AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED
        | EXTENSION_SUPPORT_REQUIRED => status::FAILED_PRECONDITION,
        PUSH_NOTIFICATION_NOT_SUPPORTED
        | UNSUPPORTED_OPERATION
        | VERSION_NOT_SUPPORTED
        | METHOD_NOT_FOUND => status::UNIMPLEMENTED,
        INTERNAL_ERROR | INVALID_AGENT_RESPONSE => status::INTERNAL,
        _ => status::INVALID_ARGUMENT,
    }
}

/// The A2A error a gRPC status stands for: its `ErrorInfo` reason when it has one, else the
/// status's nearest error (what a client of this binding reports).
pub fn error_from(grpc_status: i32, message: &str, details: Option<&[u8]>) -> RpcError {
    let reason = details
        .and_then(|d| Status::decode(d).ok())
        .into_iter()
        .flat_map(|s| s.details)
        .filter(|a| a.type_url == ERROR_INFO_TYPE)
        .find_map(|a| ErrorInfo::decode(a.value.as_ref()).ok())
        .map(|i| i.reason);
    let by_status = match grpc_status {
        status::NOT_FOUND => code::TASK_NOT_FOUND,
        status::UNIMPLEMENTED => code::UNSUPPORTED_OPERATION,
        status::FAILED_PRECONDITION => code::TASK_NOT_CANCELABLE,
        status::INVALID_ARGUMENT => code::INVALID_PARAMS,
        _ => code::INTERNAL_ERROR,
    };
    let code = reason
        .as_deref()
        .and_then(crate::rest::code_of_reason)
        .unwrap_or(by_status);
    RpcError::new(code, message)
}

/// An A2A error as `google.rpc.Status` bytes with its `ErrorInfo` (the reason, the domain
/// `a2a-protocol.org`, and the error's data, if any, under `detail`), for the
/// `grpc-status-details-bin` trailer.
pub fn status_details(e: &RpcError) -> Vec<u8> {
    let mut metadata = std::collections::HashMap::new();
    if let Some(d) = &e.data {
        metadata.insert("detail".to_owned(), d.to_string());
    }
    let info = ErrorInfo {
        reason: crate::v1::reason(e.code).to_owned(),
        domain: "a2a-protocol.org".to_owned(),
        metadata,
    };
    Status {
        code: status_of(e.code),
        message: e.message.clone(),
        details: vec![wkt::Any {
            type_url: ERROR_INFO_TYPE.to_owned(),
            value: info.encode_to_vec(),
        }],
    }
    .encode_to_vec()
}

/// A refusal of the credentials (`UNAUTHENTICATED`) or of the caller (`PERMISSION_DENIED`),
/// as `google.rpc.Status` bytes; auth refusals have no A2A error, so no `ErrorInfo`.
pub fn refusal_details(code: i32, message: &str) -> Vec<u8> {
    Status {
        code,
        message: message.to_owned(),
        details: Vec::new(),
    }
    .encode_to_vec()
}

/// `msg` as one gRPC frame: a zero byte (not compressed), its length (big-endian), its bytes.
pub fn frame(msg: &impl Message) -> Bytes {
    let len = msg.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    // Cannot fail: the buffer has the room `encoded_len` asked for.
    let _ = msg.encode(&mut out);
    out.freeze()
}

/// The one message of a unary request's body. Compressed messages are refused (this server
/// announces no `grpc-accept-encoding`), and so is a body of more or less than one frame.
pub fn unframe(body: &[u8]) -> Result<&[u8], RpcError> {
    let Some((head, rest)) = body.split_first_chunk::<5>() else {
        return Err(RpcError::invalid_request(
            "the body holds no gRPC message (a frame is a flag byte, a 4-byte length, the message)",
        ));
    };
    if head[0] != 0 {
        return Err(RpcError::unsupported(
            "compressed gRPC messages are not accepted (grpc-encoding: identity only)",
        ));
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if rest.len() != len {
        return Err(RpcError::invalid_request(format!(
            "the gRPC frame says {len} bytes and {} follow: a unary call carries exactly one message",
            rest.len()
        )));
    }
    Ok(rest)
}

/// Writes integral numbers as integers. Protobuf has one number type, a double
/// (`google.protobuf.Value`, under data parts and metadata), so `{"count": 42}` crosses the
/// binding as 42.0; the JSON bindings carry it as 42, and so does this one once read back.
fn integral_numbers(v: &mut Value) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is a double
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() < EXACT
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(integral_numbers),
        Value::Object(o) => o.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// A request message of `op` (a v1.0 method name, which gRPC's are) as the v1.0 params the
/// JSON bindings carry.
pub fn request_json(op: &str, msg: &[u8]) -> Result<Value, RpcError> {
    use proto::*;
    fn read<M: prost::Message + Default + serde::Serialize>(b: &[u8]) -> Result<Value, RpcError> {
        let m = M::decode(b).map_err(|e| RpcError::parse(format!("not a valid message: {e}")))?;
        let mut v =
            serde_json::to_value(&m).map_err(|e| RpcError::invalid_params(e.to_string()))?;
        integral_numbers(&mut v);
        Ok(v)
    }
    match op {
        method::SEND | method::STREAM => read::<SendMessageRequest>(msg),
        method::GET => read::<GetTaskRequest>(msg),
        method::LIST => read::<ListTasksRequest>(msg),
        method::CANCEL => read::<CancelTaskRequest>(msg),
        method::SUBSCRIBE => read::<SubscribeToTaskRequest>(msg),
        method::PUSH_CREATE => read::<TaskPushNotificationConfig>(msg),
        method::PUSH_GET => read::<GetTaskPushNotificationConfigRequest>(msg),
        method::PUSH_LIST => read::<ListTaskPushNotificationConfigsRequest>(msg),
        method::PUSH_DELETE => read::<DeleteTaskPushNotificationConfigRequest>(msg),
        method::EXTENDED_CARD => read::<GetExtendedAgentCardRequest>(msg),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// A unary answer of `op`, in v1.0's JSON, as the method's response message, framed.
pub fn response_frame(op: &str, answer: Value) -> Result<Bytes, RpcError> {
    use proto::*;
    fn write<M: prost::Message + serde::de::DeserializeOwned>(v: Value) -> Result<Bytes, RpcError> {
        let m: M = serde_json::from_value(v).map_err(|e| {
            RpcError::internal(format!("the answer does not fit its gRPC message: {e}"))
        })?;
        Ok(frame(&m))
    }
    match op {
        method::SEND => write::<SendMessageResponse>(answer),
        method::GET | method::CANCEL => write::<Task>(answer),
        method::LIST => write::<ListTasksResponse>(answer),
        method::PUSH_CREATE | method::PUSH_GET => write::<TaskPushNotificationConfig>(answer),
        method::PUSH_LIST => write::<ListTaskPushNotificationConfigsResponse>(answer),
        method::PUSH_DELETE => write::<wkt::Empty>(answer),
        method::EXTENDED_CARD => write::<AgentCard>(answer),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// One item of a stream (a v1.0 `StreamResponse` in JSON), framed.
pub fn stream_frame(item: Value) -> Result<Bytes, RpcError> {
    let m: proto::StreamResponse = serde_json::from_value(item).map_err(|e| {
        RpcError::internal(format!("a stream item does not fit StreamResponse: {e}"))
    })?;
    Ok(frame(&m))
}

/// v1.0 params of `op` (JSON, as [`crate::v1::params`] writes them) as the method's request
/// message, framed: what a client sends.
pub fn request_frame(op: &str, params: Value) -> Result<Bytes, RpcError> {
    use proto::*;
    fn write<M: prost::Message + serde::de::DeserializeOwned>(v: Value) -> Result<Bytes, RpcError> {
        let m: M = serde_json::from_value(v)
            .map_err(|e| RpcError::invalid_params(format!("not a gRPC request: {e}")))?;
        Ok(frame(&m))
    }
    match op {
        method::SEND | method::STREAM => write::<SendMessageRequest>(params),
        method::GET => write::<GetTaskRequest>(params),
        method::LIST => write::<ListTasksRequest>(params),
        method::CANCEL => write::<CancelTaskRequest>(params),
        method::SUBSCRIBE => write::<SubscribeToTaskRequest>(params),
        method::PUSH_CREATE => write::<TaskPushNotificationConfig>(params),
        method::PUSH_GET => write::<GetTaskPushNotificationConfigRequest>(params),
        method::PUSH_LIST => write::<ListTaskPushNotificationConfigsRequest>(params),
        method::PUSH_DELETE => write::<DeleteTaskPushNotificationConfigRequest>(params),
        method::EXTENDED_CARD => write::<GetExtendedAgentCardRequest>(params),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// A unary answer's message of `op` as v1.0 JSON: what a client reads.
pub fn response_json(op: &str, msg: &[u8]) -> Result<Value, RpcError> {
    use proto::*;
    fn read<M: prost::Message + Default + serde::Serialize>(b: &[u8]) -> Result<Value, RpcError> {
        let m = M::decode(b).map_err(|e| {
            RpcError::new(
                code::INVALID_AGENT_RESPONSE,
                format!("not a valid answer: {e}"),
            )
        })?;
        let mut v = serde_json::to_value(&m)
            .map_err(|e| RpcError::new(code::INVALID_AGENT_RESPONSE, e.to_string()))?;
        integral_numbers(&mut v);
        Ok(v)
    }
    match op {
        method::SEND => read::<SendMessageResponse>(msg),
        method::GET | method::CANCEL => read::<Task>(msg),
        method::LIST => read::<ListTasksResponse>(msg),
        method::PUSH_CREATE | method::PUSH_GET => read::<TaskPushNotificationConfig>(msg),
        method::PUSH_LIST => read::<ListTaskPushNotificationConfigsResponse>(msg),
        method::PUSH_DELETE => read::<wkt::Empty>(msg),
        method::EXTENDED_CARD => read::<AgentCard>(msg),
        method::STREAM | method::SUBSCRIBE => read::<StreamResponse>(msg),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// Messages cut out of a gRPC body as it arrives (a frame may span chunks, a chunk hold
/// several), each at most `max` bytes.
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    max: usize,
}

impl FrameReader {
    /// A reader refusing messages over `max` bytes.
    pub fn new(max: usize) -> Self {
        FrameReader {
            buf: BytesMut::new(),
            max,
        }
    }

    /// Adds `chunk`; returns the messages it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, RpcError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while self.buf.len() >= 5 {
            if self.buf[0] != 0 {
                return Err(RpcError::new(
                    code::INVALID_AGENT_RESPONSE,
                    "a compressed gRPC message (none was asked for)",
                ));
            }
            let len =
                u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
            if len > self.max {
                return Err(RpcError::new(
                    code::INVALID_AGENT_RESPONSE,
                    format!(
                        "a gRPC message of {len} bytes, over the {} allowed",
                        self.max
                    ),
                ));
            }
            if self.buf.len() < 5 + len {
                break;
            }
            let mut msg = self.buf.split_to(5 + len);
            out.push(msg.split_off(5).freeze());
        }
        Ok(out)
    }

    /// Whether bytes of an unfinished message are left (a body cut short).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Percent-encodes a status message for the `grpc-message` header (gRPC's rule: bytes
/// outside printable ASCII, and `%`).
pub fn encode_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for b in msg.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A `grpc-message` header's text, percent-decoded.
pub fn decode_message(msg: &str) -> String {
    let b = msg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%')
            .then(|| b.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(x) => {
                out.push(x);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever bytes a peer sends as a message, of any method, reading them is an
        /// answer or an error, never a panic; and so is reading them as a stream of frames.
        #[test]
        fn no_bytes_break_the_decoders(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            op in proptest::sample::select(method::ALL.to_vec()),
        ) {
            let _ = request_json(op, &bytes);
            let _ = response_json(op, &bytes);
            let _ = unframe(&bytes);
            let mut r = FrameReader::new(256);
            let _ = r.push(&bytes);
            let _ = Status::decode(bytes.as_slice());
        }

        /// The same for valid messages with bytes changed: most still decode, into values
        /// (timestamps, structs, enums) the JSON side must take or refuse without a panic.
        #[test]
        fn no_changed_message_breaks_the_decoders(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            op in proptest::sample::select(method::ALL.to_vec()),
        ) {
            let mut bytes = sample_send().encode_to_vec();
            for (at, b) in flips {
                let i = at % bytes.len();
                bytes[i] = b;
            }
            if let Ok(v) = request_json(op, &bytes) {
                let _ = crate::v1::decode_value(op, v);
            }
            let _ = response_json(op, &bytes);
        }
    }

    /// A send with a part of each kind, metadata and a push config.
    fn sample_send() -> proto::SendMessageRequest {
        let data = wkt::Value::from(serde_json::json!({"n": 42, "list": [1, null, "x"]}));
        proto::SendMessageRequest {
            message: Some(proto::Message {
                message_id: "m-1".into(),
                context_id: "c-1".into(),
                role: proto::Role::User as i32,
                parts: vec![
                    proto::Part {
                        content: Some(proto::part::Content::Text("hello".into())),
                        ..Default::default()
                    },
                    proto::Part {
                        content: Some(proto::part::Content::Raw(b"raw".to_vec())),
                        filename: "f.txt".into(),
                        media_type: "text/plain".into(),
                        ..Default::default()
                    },
                    proto::Part {
                        content: Some(proto::part::Content::Data(data)),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            configuration: Some(proto::SendMessageConfiguration {
                history_length: Some(3),
                task_push_notification_config: Some(proto::TaskPushNotificationConfig {
                    url: "https://example.com/hook".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_frame_round_trips_and_a_bad_one_is_refused() {
        let msg = proto::CancelTaskRequest {
            id: "abc".into(),
            ..Default::default()
        };
        let f = frame(&msg);
        assert_eq!(f[0], 0);
        assert_eq!(
            u32::from_be_bytes([f[1], f[2], f[3], f[4]]) as usize,
            f.len() - 5
        );
        let inner = unframe(&f).unwrap();
        assert_eq!(proto::CancelTaskRequest::decode(inner).unwrap(), msg);
        assert_eq!(unframe(&f[..3]).unwrap_err().code, code::INVALID_REQUEST);
        assert_eq!(
            unframe(&f[..f.len() - 1]).unwrap_err().code,
            code::INVALID_REQUEST
        );
        let mut compressed = f.to_vec();
        compressed[0] = 1;
        assert_eq!(
            unframe(&compressed).unwrap_err().code,
            code::UNSUPPORTED_OPERATION
        );
        // Two messages in a unary call.
        let two = [f.as_ref(), f.as_ref()].concat();
        assert!(unframe(&two).is_err());
    }

    #[test]
    fn a_send_request_becomes_the_json_the_other_bindings_carry() {
        let msg = proto::SendMessageRequest {
            message: Some(proto::Message {
                message_id: "m-1".into(),
                role: proto::Role::User as i32,
                parts: vec![proto::Part {
                    content: Some(proto::part::Content::Text("hello".into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = request_json(method::SEND, &msg.encode_to_vec()).unwrap();
        assert_eq!(v["message"]["messageId"], "m-1");
        assert_eq!(v["message"]["role"], "ROLE_USER");
        assert_eq!(v["message"]["parts"][0]["text"], "hello");
        // Bytes that are no message of the type.
        assert_eq!(
            request_json(method::SEND, &[0xff, 0xff, 0xff])
                .unwrap_err()
                .code,
            code::PARSE_ERROR
        );
        assert_eq!(
            request_json("Nope", &[]).unwrap_err().code,
            code::METHOD_NOT_FOUND
        );
    }

    #[test]
    fn an_answer_in_json_becomes_its_message() {
        let task = serde_json::json!({
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T10:00:00.123Z"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"x": [1, "y"]}}]}],
            "metadata": {"k": "v"},
            "unknownField": 1,
        });
        let f = response_frame(method::GET, task).unwrap();
        let t = proto::Task::decode(unframe(&f).unwrap()).unwrap();
        assert_eq!(t.id, "t");
        assert_eq!(
            t.status.as_ref().unwrap().state,
            proto::TaskState::Completed as i32
        );
        let ts = t.status.unwrap().timestamp.unwrap();
        assert_eq!(ts.nanos, 123_000_000);
        assert!(t.metadata.is_some());
        assert_eq!(t.artifacts[0].parts.len(), 1);
        // The deleted config's `{}`.
        assert!(response_frame(method::PUSH_DELETE, serde_json::json!({})).is_ok());
        // JSON that is no task.
        assert_eq!(
            response_frame(method::GET, serde_json::json!({"id": 5}))
                .unwrap_err()
                .code,
            code::INTERNAL_ERROR
        );
    }

    #[test]
    fn errors_map_to_the_specified_statuses_and_back() {
        for (c, s) in [
            (code::TASK_NOT_FOUND, status::NOT_FOUND),
            (code::TASK_NOT_CANCELABLE, status::FAILED_PRECONDITION),
            (code::PUSH_NOTIFICATION_NOT_SUPPORTED, status::UNIMPLEMENTED),
            (code::UNSUPPORTED_OPERATION, status::UNIMPLEMENTED),
            (code::CONTENT_TYPE_NOT_SUPPORTED, status::INVALID_ARGUMENT),
            (code::INVALID_AGENT_RESPONSE, status::INTERNAL),
            (
                code::AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED,
                status::FAILED_PRECONDITION,
            ),
            (
                code::EXTENSION_SUPPORT_REQUIRED,
                status::FAILED_PRECONDITION,
            ),
            (code::VERSION_NOT_SUPPORTED, status::UNIMPLEMENTED),
        ] {
            let e = RpcError::new(c, "why");
            assert_eq!(status_of(c), s, "{c}");
            let details = status_details(&e);
            let st = Status::decode(details.as_slice()).unwrap();
            assert_eq!(st.code, s);
            let info = ErrorInfo::decode(st.details[0].value.as_ref()).unwrap();
            assert_eq!(info.domain, "a2a-protocol.org");
            assert!(!info.reason.is_empty() && !info.reason.ends_with("ERROR"));
            // A client reads the same error back.
            assert_eq!(error_from(s, "why", Some(&details)).code, c, "{c}");
        }
        assert_eq!(encode_message("50% é\n"), "50%25 %C3%A9%0A");
        assert_eq!(decode_message("50%25 %C3%A9%0A"), "50% é\n");
        assert_eq!(decode_message("bad %zz and %4"), "bad %zz and %4");
    }

    #[test]
    fn integers_in_data_cross_as_integers() {
        let params = serde_json::json!({"message": {"messageId": "m", "role": "ROLE_USER",
            "parts": [{"data": {"n": 42, "x": 1.5, "big": 1e300, "list": [0, -3]}}]}});
        let f = request_frame(method::SEND, params).unwrap();
        let v = request_json(method::SEND, unframe(&f).unwrap()).unwrap();
        let data = &v["message"]["parts"][0]["data"];
        assert_eq!(data["n"].as_i64(), Some(42), "{data}");
        assert_eq!(data["x"].as_f64(), Some(1.5));
        assert_eq!(data["big"].as_f64(), Some(1e300));
        assert_eq!(data["list"], serde_json::json!([0, -3]));
    }

    #[test]
    fn frames_are_read_across_chunks() {
        let a = frame(&proto::GetTaskRequest {
            id: "a".into(),
            ..Default::default()
        });
        let b = frame(&proto::GetTaskRequest {
            id: "bb".into(),
            ..Default::default()
        });
        let both = [a.as_ref(), b.as_ref()].concat();
        for cut in 0..=both.len() {
            let mut r = FrameReader::new(1024);
            let mut got = r.push(&both[..cut]).unwrap();
            got.extend(r.push(&both[cut..]).unwrap());
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0].as_ref(), &a[5..]);
            assert_eq!(got[1].as_ref(), &b[5..]);
            assert!(r.is_empty());
        }
        let mut small = FrameReader::new(2);
        assert!(small.push(&b).is_err(), "over the limit");
    }

    #[test]
    fn a_client_request_and_answer_cross_the_binding() {
        let params = serde_json::json!({"id": "t-9", "historyLength": 2});
        let f = request_frame(method::GET, params).unwrap();
        let back = request_json(method::GET, unframe(&f).unwrap()).unwrap();
        assert_eq!(back["id"], "t-9");
        assert_eq!(back["historyLength"], 2);
        let task = proto::Task {
            id: "t-9".into(),
            ..Default::default()
        };
        let v = response_json(method::GET, &task.encode_to_vec()).unwrap();
        assert_eq!(v["id"], "t-9");
        assert_eq!(
            response_json(method::GET, &[0xff, 0x01]).unwrap_err().code,
            code::INVALID_AGENT_RESPONSE
        );
    }
}
