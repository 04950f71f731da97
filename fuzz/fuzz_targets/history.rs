//! History records (sessions, turns, checkpoints, the op log) decoded from arbitrary bytes: see `checks::history`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::history(data));
