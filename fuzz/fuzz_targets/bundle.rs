//! A bundle file checked from arbitrary bytes: see `checks::bundle`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::bundle(data));
