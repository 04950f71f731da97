//! Arbitrary bytes decoded as every record retrace reads from a store: a tree, an object
//! record, a chunk list, a compressed frame. Each must return an error, never panic or
//! allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use retrace::object::record::decompress;
use retrace::object::{ChunkList, Codec, ObjectRecord, Tree};

fuzz_target!(|data: &[u8]| {
    if let Ok(tree) = Tree::decode(data) {
        // A tree that decodes re-encodes to the same bytes: one encoding per tree, so ids
        // are stable.
        assert_eq!(tree.encode(), data);
    }
    if let Ok(rec) = ObjectRecord::decode(data) {
        assert!(u64::from(rec.within) + u64::from(rec.len) <= u64::from(rec.frame_len));
    }
    let _ = ChunkList::decode(data);
    if let Some((&len, rest)) = data.split_first() {
        let _ = decompress(Codec::Zstd, rest, u32::from(len) * 1024);
    }
});
