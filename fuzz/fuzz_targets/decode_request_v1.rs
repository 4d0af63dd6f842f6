//! Fuzzes the version-negotiated decoder with the v1.0 codec: any bytes give a request or a
//! protocol error, never a panic; what decodes re-encodes (v1.0 form) and decodes the same
//! (see `agentry_a2a::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentry_a2a::fuzzing::check_decode_v1(data));
