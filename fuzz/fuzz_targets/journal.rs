//! The restore journal decoded from arbitrary bytes: see `checks::journal`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::journal(data));
