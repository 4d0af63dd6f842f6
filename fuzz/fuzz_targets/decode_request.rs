//! Fuzzes the JSON-RPC request decoder: any bytes give a request or a protocol error, never a
//! panic, and every error code is one the protocol defines for decoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match agentry_a2a::jsonrpc::decode_request(data) {
        Ok((_, req)) => {
            // What decodes re-encodes and decodes to the same request.
            let again = agentry_a2a::jsonrpc::encode_request(&serde_json::json!(1), &req);
            let (_, back) = agentry_a2a::jsonrpc::decode_request(&again).expect("re-encoded request decodes");
            assert_eq!(back, req);
        }
        Err((_, e)) => assert!(matches!(e.code, -32700 | -32600 | -32601 | -32602)),
    }
});
