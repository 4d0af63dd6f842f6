//! Fuzzes the JSON-RPC request decoder: any bytes give a request or a protocol error, never a
//! panic, and every error code is one the protocol defines for decoding (see
//! `agentry_a2a::fuzzing`, which the stable replay of the corpus checks too).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentry_a2a::fuzzing::check_decode(data));
