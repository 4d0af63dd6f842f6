//! Fuzzes the reading of a peer's event stream, cut into chunks (`agentry_a2a::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentry_a2a::fuzzing::check_sse(data));
