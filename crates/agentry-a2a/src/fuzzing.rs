//! The decoders' invariants, as the fuzz targets (`fuzz/`, nightly) and the stable replay of
//! their corpus (`tests/it/wire.rs`) both check them: any bytes decode to a request or to a
//! protocol error with a decoding code, never a panic; what decodes re-encodes and decodes to
//! the same request. Each function panics when an invariant breaks.

use crate::jsonrpc;
use crate::version::ProtocolVersion;

/// The codes a decoding error may carry: parse error, invalid request, method not found,
/// invalid params.
fn decoding_code(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602)
}

/// The v0.3 JSON-RPC decoder.
pub fn check_decode(data: &[u8]) {
    match jsonrpc::decode_request(data) {
        Ok((_, req)) => {
            let again = jsonrpc::encode_request(&serde_json::json!(1), &req);
            let (_, back) = jsonrpc::decode_request(&again).expect("re-encoded request decodes");
            assert_eq!(back, req);
        }
        Err((_, e)) => assert!(decoding_code(e.code), "code {}", e.code),
    }
}

/// The version-negotiated decoder with the v1.0 codec.
pub fn check_decode_v1(data: &[u8]) {
    match jsonrpc::decode_request_as(data, Some(ProtocolVersion::V1_0)) {
        Ok((_, req, _)) => {
            let again = crate::v1::encode_request(&serde_json::json!(1), &req);
            let (_, back, _) = jsonrpc::decode_request_as(&again, Some(ProtocolVersion::V1_0))
                .expect("re-encoded request decodes");
            assert_eq!(back, req);
        }
        Err((_, e, _)) => assert!(decoding_code(e.code), "code {}", e.code),
    }
}

/// A peer's HTTP+JSON error body (`google.rpc.Status`, or anything else) with any status:
/// read into an error, never a panic. The first byte picks the status.
pub fn check_rest_error(data: &[u8]) {
    let status = 400 + u16::from(data.first().copied().unwrap_or(0)) % 200;
    let e = crate::rest::error_from(status, data.get(1..).unwrap_or_default());
    assert!(
        (-32768..=-32000).contains(&e.code),
        "code {} is not a JSON-RPC error code",
        e.code
    );
}

/// A peer's event stream: however its bytes are cut into chunks (the first byte picks their
/// size), the events read are those of the whole stream, and nothing panics.
pub fn check_sse(data: &[u8]) {
    let Some((&n, stream)) = data.split_first() else {
        return;
    };
    let size = usize::from(n % 16) + 1;
    let whole = crate::sse::SseParser::new()
        .push(stream)
        .expect("within the limit");
    let mut p = crate::sse::SseParser::new();
    let mut got = Vec::new();
    for chunk in stream.chunks(size) {
        got.extend(p.push(chunk).expect("within the limit"));
    }
    assert_eq!(got, whole);
}
