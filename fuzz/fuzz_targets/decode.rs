//! Arbitrary bytes decoded as every record retrace reads from a store: a tree, an object
//! record, a chunk list, a compressed frame (see `checks::decode`).
#![no_main]

#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::decode(data));
