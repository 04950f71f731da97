//! Lease records and the host-id, /proc stat and runtime .owner files decoded from arbitrary bytes: see `checks::lease`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::lease(data));
