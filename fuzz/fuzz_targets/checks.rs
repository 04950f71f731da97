//! What each fuzz target asserts of one input, shared with the corpus replay in
//! `tests/fuzz_corpus.rs` so that `cargo test` checks every committed input the same way.
//! Each function feeds arbitrary bytes to decoders of data retrace reads back from disk;
//! a decoder may refuse them, never panic, hang or allocate without bound.

use std::fmt::Debug;

use retrace::history::db::Loaded;
use retrace::history::record::{
    CheckpointRecord, OpRecord, SessionRecord, TurnRecord, decode as decode_history,
    encode as encode_history,
};
use retrace::history::runtime::parse_owner;
use retrace::history::state::SessionState;
use retrace::lease::{LeaseRecord, parse_host_id, parse_start_time};
use retrace::object::record::Codec;
use retrace::object::record::decompress;
use retrace::object::{ChunkList, ObjectRecord, Tree};
use retrace::restore::journal::JournalRecord;
use retrace::scan::{ScanEntry, ScanKind};
use retrace::statcache::{CHECKSUM_LEN, HEADER_LEN, RECORD_LEN, StatCache};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Store records: a tree, an object record, a chunk list, a compressed frame, a staged row.
pub fn decode(data: &[u8]) {
    if let Some(records) = retrace::store::decode_staged_row(data) {
        // A row that decodes is exactly its records, each framed by its id and length.
        let mut again = Vec::new();
        for (id, rec) in &records {
            again.extend_from_slice(&id.0);
            again.extend_from_slice(&u16::try_from(rec.len()).expect("u16 length").to_le_bytes());
            again.extend_from_slice(rec);
            let _ = ObjectRecord::decode(rec);
        }
        assert_eq!(again, data);
    }
    if let Ok(tree) = Tree::decode(data) {
        // A tree that decodes re-encodes to the same bytes: one encoding per tree, so ids
        // are stable.
        assert_eq!(tree.encode(), data);
    }
    if let Ok(rec) = ObjectRecord::decode(data) {
        assert!(u64::from(rec.within) + u64::from(rec.len) <= u64::from(rec.frame_len));
        assert_eq!(
            ObjectRecord::decode(&rec.encode().expect("a decoded record re-encodes")),
            Ok(rec)
        );
    }
    if let Ok(list) = ChunkList::decode(data) {
        assert_eq!(
            ChunkList::decode(&list.encode().expect("a decoded list re-encodes")),
            Ok(list)
        );
    }
    // A parity frame: refused, or its zstd frame, never longer than the input; what it
    // gives protects again to a frame that gives the same.
    if let Ok((z, _)) = retrace::object::parity::unprotect(data) {
        assert!(!z.is_empty() && z.len() <= data.len());
        let again = retrace::object::parity::protect(&z).expect("a non-empty frame");
        let back = retrace::object::parity::unprotect(&again).expect("its own output");
        assert_eq!(back.0, z);
    }
    if let Some((&len, rest)) = data.split_first() {
        let _ = decompress(Codec::Zstd, rest, u32::from(len) * 1024);
        let _ = decompress(Codec::ZstdParity, rest, u32::from(len) * 1024);
        // A delta payload against a base: refused or decoded to exactly the size asked for.
        let base = b"fn main() { println!(\"the base a delta is read against\"); }\n";
        if let Ok(out) = retrace::object::delta::decode(base, rest, usize::from(len) * 64) {
            assert_eq!(out.len(), usize::from(len) * 64);
        }
    }
}

/// A history record that decodes encodes to bytes that decode to the same record.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(data: &[u8]) -> Option<T> {
    let rec: T = decode_history(data).ok()?;
    let again = encode_history(&rec).expect("a decoded record re-encodes");
    assert!(again.len() <= data.len(), "{rec:?} grew when re-encoded");
    assert_eq!(decode_history::<T>(&again).as_ref(), Ok(&rec));
    Some(rec)
}

/// The stat cache file. The store id is taken from the input's own header and the checksum
/// trailer is recomputed, so that mutations get past both checks; then every path the records name is looked up as
/// every kind, with the record's own `lstat` data so that the racy-timestamp check runs,
/// and counted as a directory prefix.
pub fn statcache(data: &[u8]) {
    let store_id: [u8; 16] = data
        .get(16..32)
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; 16]);
    let mut bytes = data.to_vec();
    if bytes.len() >= CHECKSUM_LEN {
        let body = bytes.len() - CHECKSUM_LEN;
        let sum = *blake3::hash(&bytes[..body]).as_bytes();
        bytes[body..].copy_from_slice(&sum);
    }
    let data = &bytes[..];
    let cache = StatCache::decode(bytes.clone(), &store_id);
    let _ = cache.root();
    let n = cache.len();
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let u32_at =
        |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    // The record just past the count too, when the input holds one: it must never hit.
    for i in 0..=n.min(64) {
        // Layout: docs/format.md.
        let Some(rec) = data.get(HEADER_LEN + i * RECORD_LEN..HEADER_LEN + (i + 1) * RECORD_LEN)
        else {
            break;
        };
        let off = usize::try_from(u64_at(rec, 0)).unwrap_or(usize::MAX);
        let len = u32_at(rec, 8) as usize;
        let path = data
            .get(off..off.saturating_add(len))
            .unwrap_or(b"a/b")
            .to_vec();
        for kind in [
            ScanKind::File,
            ScanKind::Symlink,
            ScanKind::Dir,
            ScanKind::NestedRepo,
        ] {
            let e = ScanEntry {
                path: path.clone(),
                kind,
                size: u64_at(rec, 16),
                mtime_ns: u64_at(rec, 24).cast_signed(),
                ctime_ns: u64_at(rec, 32).cast_signed(),
                ino: u64_at(rec, 40),
                mode: u32_at(rec, 12),
                listing: false,
                clean: false,
                linked: false,
            };
            let hit = cache.lookup(&e);
            let mut pos = cache.position(&e.path);
            assert!(pos <= n);
            assert_eq!(cache.lookup_at(&e, &mut pos), hit);
            // A hit is one of the records the header counts, never bytes past them.
            assert!(if hit.is_some() { pos < n } else { pos <= n });
        }
        let _ = cache.get(&path);
        let mut dir = path;
        assert!(cache.count_prefix(&dir) <= n);
        dir.push(b'/');
        assert!(cache.count_prefix(&dir) <= n);
        // A directory's children: each one of the records, directly inside it.
        if let Some(kids) = cache.children(&dir) {
            assert!(kids.len() <= n);
            for k in kids {
                let name = k.path.strip_prefix(&dir[..]).expect("inside the directory");
                assert!(!name.contains(&b'/'));
            }
        }
    }
}

/// History records: the input as a session, turn, checkpoint and op record; then as a log
/// of records, each framed by a length byte, replayed the way a session is loaded.
pub fn history(data: &[u8]) {
    round_trip::<SessionRecord>(data);
    round_trip::<TurnRecord>(data);
    round_trip::<CheckpointRecord>(data);
    round_trip::<OpRecord>(data);
    let (mut ops, mut turns, mut checkpoints) = (Vec::new(), Vec::new(), Vec::new());
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (rec, tail) = tail.split_at(usize::from(len).min(tail.len()));
        ops.extend(round_trip::<OpRecord>(rec).map(|r| r.op));
        turns.extend(round_trip::<TurnRecord>(rec));
        checkpoints.extend(round_trip::<CheckpointRecord>(rec));
        rest = tail;
    }
    let state = SessionState::replay(&ops);
    // The base that stands for a state replays to it.
    assert_eq!(SessionState::replay([&state.base()]), state);
    // As the store hands them over: by number, one record per number.
    turns.sort_by_key(|t: &TurnRecord| t.number);
    turns.dedup_by_key(|t| t.number);
    let loaded = Loaded {
        state,
        turns,
        checkpoints,
        ops: ops.len() as u64,
        name: None,
        reverts: Vec::new(),
    };
    let applied = loaded.applied();
    assert!(applied.len() <= loaded.turns.len() + 1);
}

/// The restore journal: decoded, and its pending op applied the way recovery applies it.
pub fn journal(data: &[u8]) {
    let Some(rec) = round_trip::<JournalRecord<retrace::history::SessionOp>>(data) else {
        return;
    };
    if let Some(retrace::history::SessionOp(_, op)) = rec.then {
        let mut state = SessionState::new();
        state.apply(&op.with_snapshot(rec.target));
    }
}

/// Lease records, and the files a lease and the runtime directory are judged by: the text
/// of `/proc/<pid>/stat`, of `$RETRACE_HOME/host-id` and of a process directory's `.owner`.
pub fn lease(data: &[u8]) {
    round_trip::<LeaseRecord>(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_start_time(text);
        if let Some(id) = parse_host_id(text) {
            assert_eq!(id.len(), 32);
        }
    }
    let _ = parse_owner(data);
}

/// A bundle file (`retrace unbundle`): refused or checked whole, never a panic; one that
/// passes names no snapshot it lacks (`check_bytes` found every object).
pub fn bundle(data: &[u8]) {
    if let Ok(c) = retrace::share::bundle::check_bytes(data) {
        assert!(c.trees + c.blobs > 0 || c.image.snapshots().is_empty());
    }
}
