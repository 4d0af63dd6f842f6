//! Fuzzes the reading of an HTTP+JSON peer's error bodies (`agentry_a2a::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentry_a2a::fuzzing::check_rest_error(data));
