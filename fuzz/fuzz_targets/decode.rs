//! Arbitrary bytes decoded as every record retrace reads from a store: a tree, an object
//! record (whole or delta), a chunk list, a compressed frame, a delta payload (see
//! `checks::decode`).
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::decode(data));
