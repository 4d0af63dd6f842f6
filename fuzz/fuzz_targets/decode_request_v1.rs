//! Fuzzes the version-negotiated decoder with the v1.0 codec: any bytes give a request or a
//! protocol error, never a panic; what decodes re-encodes (v1.0 form) and decodes the same.
#![no_main]

use agentry_a2a::version::ProtocolVersion;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match agentry_a2a::jsonrpc::decode_request_as(data, Some(ProtocolVersion::V1_0)) {
        Ok((_, req, _)) => {
            let again = agentry_a2a::v1::encode_request(&serde_json::json!(1), &req);
            let (_, back, _) =
                agentry_a2a::jsonrpc::decode_request_as(&again, Some(ProtocolVersion::V1_0))
                    .expect("re-encoded request decodes");
            assert_eq!(back, req);
        }
        Err((_, e, _)) => assert!(matches!(e.code, -32700 | -32600 | -32601 | -32602)),
    }
});
