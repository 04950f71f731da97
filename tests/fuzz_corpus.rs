//! Replays the committed fuzz corpora (`tests/data/fuzz/<target>/`: seeds and the inputs of
//! every bug the fuzzers found) through the fuzz targets' own checks, so a plain
//! `cargo test` catches a regression without cargo-fuzz or a nightly toolchain.
//!
//! The seeds are valid records built here by the real encoders; after a format change,
//! `cargo test --release --test main -- --ignored fuzz_corpus::write_seeds` rewrites them.

#[path = "../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

use retrace::history::record::{
    CheckpointRecord, HISTORY_VERSION, Mode, Op, OpRecord, SessionRecord, TurnRecord, TurnState,
};
use retrace::lease::{LEASE_VERSION, LeaseRecord};
use retrace::object::TreeEntry;
use retrace::object::record::{Codec, compress};
use retrace::object::{ChunkList, DeltaBase, EntryKind, ObjectId, ObjectKind, ObjectRecord, Tree};

/// A record's bytes as the store writes them.
fn encode<T: serde::Serialize>(rec: &T) -> Vec<u8> {
    retrace::history::record::encode(rec).unwrap()
}
use retrace::restore::journal::JournalRecord;
use retrace::scan::{ScanEntry, ScanKind};
use retrace::statcache::{CacheEntry, RACY_MARGIN_NS, StatCache};

/// What a fuzz target asserts of one input.
type Check = fn(&[u8]);

/// Each target with the check its fuzzer runs.
const TARGETS: [(&str, Check); 6] = [
    ("decode", checks::decode),
    ("bundle", checks::bundle),
    ("statcache", checks::statcache),
    ("history", checks::history),
    ("journal", checks::journal),
    ("lease", checks::lease),
];

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target)
}

#[test]
fn every_corpus_input_is_refused_or_decoded_without_panicking() {
    let mut failed = Vec::new();
    for (target, check) in TARGETS {
        let mut inputs: Vec<_> = std::fs::read_dir(corpus(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "no corpus for {target}");
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            if std::panic::catch_unwind(|| check(&bytes)).is_err() {
                failed.push(input.display().to_string());
            }
        }
    }
    assert!(failed.is_empty(), "inputs that panicked: {failed:?}");
}

#[test]
fn seeds_are_committed_and_decode() {
    for (target, name, bytes) in seeds() {
        let path = corpus(target).join(&name);
        assert_eq!(
            std::fs::read(&path).ok().as_ref(),
            Some(&bytes),
            "{} is missing or stale: run the ignored write_seeds test",
            path.display()
        );
    }
    let bundle = retrace::share::bundle::check_bytes(&bundle_seed()).unwrap();
    assert_eq!((bundle.trees, bundle.blobs), (1, 1));
    // Valid records decode to what was encoded (the checks assert re-encoding).
    let turn = turn_record();
    assert_eq!(retrace::history::record::decode(&encode(&turn)), Ok(turn));
    let cache = StatCache::decode(statcache_seed(), &STORE);
    assert_eq!(cache.len(), 4);
    for e in scan_entries() {
        assert!(cache.lookup(&e).is_some(), "{:?}", e.path);
    }
}

/// Rewrites the seeds (`--ignored`); regression inputs are kept as they are.
#[test]
#[ignore = "rewrites tests/data/fuzz; run after a format change"]
fn write_seeds() {
    for (target, name, bytes) in seeds() {
        std::fs::create_dir_all(corpus(target)).unwrap();
        std::fs::write(corpus(target).join(name), bytes).unwrap();
    }
}

const STORE: [u8; 16] = [3; 16];
const ID: ObjectId = ObjectId([7; 32]);
const T0: i64 = 1_700_000_000_000_000_000;

fn scan_entries() -> Vec<ScanEntry> {
    let kinds = [
        (&b"a.txt"[..], ScanKind::File),
        (b"link", ScanKind::Symlink),
        (b"src", ScanKind::Dir),
        (b"src/vendor", ScanKind::NestedRepo),
    ];
    kinds
        .into_iter()
        .map(|(path, kind)| ScanEntry {
            path: path.to_vec(),
            kind,
            size: 5,
            mtime_ns: T0,
            ctime_ns: T0,
            ino: 9,
            mode: 0o100_644,
            listing: false,
            clean: false,
            linked: false,
        })
        .collect()
}

fn statcache_seed() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("statcache");
    let entries = scan_entries();
    let list = entries
        .iter()
        .map(|e| CacheEntry::from_scan(e, ID))
        .collect();
    StatCache::write(&path, &STORE, &ID, list, T0 + 2 * RACY_MARGIN_NS, &[0; 32]).unwrap();
    std::fs::read(&path).unwrap()
}

fn turn_record() -> TurnRecord {
    TurnRecord {
        version: HISTORY_VERSION,
        number: 2,
        parent: Some(1),
        anchor: Some("node-1".into()),
        leaf: Some("node-2".into()),
        rounds: vec!["round-1".into()],
        prompt: Some("add a file".into()),
        began_ms: 1_000,
        ended_ms: Some(2_000),
        before: Some(ID),
        after: Some(ObjectId([8; 32])),
        state: TurnState::Complete,
        reason: None,
        counts: retrace::history::record::Counts {
            added: 1,
            modified: 2,
            deleted: 3,
        },
    }
}

fn ops() -> Vec<Op> {
    vec![
        Op::Base {
            cursor: Some(1),
            redo: vec![(2, Mode::Files)],
            last_known: Some(ID),
            pending: None,
            next_turn: 3,
            next_checkpoint: 1,
        },
        Op::TurnBegun { turn: 3 },
        Op::TurnBefore {
            turn: 3,
            snapshot: ID,
        },
        Op::TurnEnded {
            turn: 3,
            snapshot: Some(ID),
        },
        Op::Undo {
            turn: 3,
            to: Some(1),
            mode: Mode::Both,
            snapshot: Some(ID),
        },
        Op::Redo {
            turn: 3,
            mode: Mode::Both,
            snapshot: None,
        },
        Op::Navigate {
            to: None,
            snapshot: Some(ID),
        },
        Op::Checkpoint {
            number: 1,
            snapshot: ID,
        },
    ]
}

fn op_record(op: Op) -> Vec<u8> {
    encode(&OpRecord {
        version: HISTORY_VERSION,
        time_ms: 5,
        op,
    })
}

/// Records framed as `checks::history` reads a log: a length byte before each.
fn framed(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.push(u8::try_from(r.len()).unwrap());
        out.extend_from_slice(r);
    }
    out
}

/// Every seed: (target, file name, bytes). `seed-*` are valid records; `regress-*` are
/// the inputs of bugs fixed (see the tests named in each comment).
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut add = |target, name: &str, bytes| out.push((target, name.to_string(), bytes));

    let tree = Tree {
        entries: vec![
            TreeEntry {
                name: b"a.txt".to_vec(),
                kind: EntryKind::File,
                id: ID,
                size: 5,
            },
            TreeEntry {
                name: b"src".to_vec(),
                kind: EntryKind::Dir,
                id: ID,
                size: 10,
            },
        ],
    };
    add("decode", "seed-tree", tree.encode());
    let mut rec = ObjectRecord {
        kind: ObjectKind::Blob,
        size: 5,
        offset: 100,
        stored_len: 20,
        codec: Codec::Zstd,
        frame_len: 50,
        within: 10,
        len: 5,
        written: 1_700_000_000,
        delta: None,
    };
    add("decode", "seed-object-record", rec.encode().unwrap());
    rec.codec = Codec::Raw;
    rec.delta = Some(DeltaBase {
        base: ObjectId([9; 32]),
        depth: 3,
    });
    add("decode", "seed-delta-record", rec.encode().unwrap());
    // A staged row of two records (docs/format.md): id, u16 length, record.
    let mut row = Vec::new();
    for (id, bytes) in [
        (ID, rec.encode().unwrap()),
        (ObjectId([8; 32]), rec.encode().unwrap()),
    ] {
        row.extend_from_slice(&id.0);
        row.extend_from_slice(&u16::try_from(bytes.len()).unwrap().to_le_bytes());
        row.extend_from_slice(&bytes);
    }
    add("decode", "seed-staged-row", row);
    let list = ChunkList {
        version: 1,
        chunks: vec![(ID, 65_536), (ObjectId([8; 32]), 1_000)],
    };
    add("decode", "seed-chunk-list", list.encode().unwrap());
    let (codec, frame) = compress(&b"retrace ".repeat(128));
    assert_eq!(codec, Codec::Zstd);
    add("decode", "seed-zstd-frame", [&[1][..], &frame].concat());
    let parity = retrace::object::parity::protect(&frame).unwrap();
    add("decode", "seed-parity-frame", parity);

    add("statcache", "seed-four-kinds", statcache_seed());
    // records_past_the_count_are_never_read (src/statcache_tests.rs).
    let mut cut = statcache_seed();
    cut[32..40].copy_from_slice(&1u64.to_le_bytes());
    add("statcache", "regress-count-cut-short", cut);
    // a_write_time_near_the_minimum_trusts_nothing.
    let mut early = statcache_seed();
    early[8..16].copy_from_slice(&i64::MIN.to_le_bytes());
    add("statcache", "regress-written-ns-min", early);
    // prefixes_ending_in_0xff_are_counted: the last path byte becomes 0xff.
    let mut ff = statcache_seed();
    let last = ff.len() - 1;
    ff[last] = 0xff;
    add("statcache", "regress-path-ends-in-0xff", ff);

    let session = SessionRecord {
        version: HISTORY_VERSION,
        created_ms: 1_000,
        touched_ms: 2_000,
    };
    add("history", "seed-session", encode(&session));
    add("history", "seed-turn", encode(&turn_record()));
    let checkpoint = CheckpointRecord {
        version: HISTORY_VERSION,
        number: 1,
        label: Some("before refactor".into()),
        snapshot: ID,
        cursor: Some(2),
        time_ms: 3_000,
    };
    add("history", "seed-checkpoint", encode(&checkpoint));
    for (i, op) in ops().into_iter().enumerate() {
        add("history", &format!("seed-op-{i}"), op_record(op));
    }
    let log: Vec<_> = ops().into_iter().map(op_record).collect();
    add(
        "history",
        "seed-log",
        framed(&[log, vec![encode(&turn_record())]].concat()),
    );
    // the_largest_numbers_in_a_damaged_log_do_not_overflow (src/history/state.rs).
    add(
        "history",
        "regress-turn-u64-max",
        framed(&[op_record(Op::TurnBegun { turn: u64::MAX })]),
    );
    add(
        "history",
        "regress-checkpoint-u64-max",
        framed(&[op_record(Op::Checkpoint {
            number: u64::MAX,
            snapshot: ID,
        })]),
    );

    let mut journal = JournalRecord::new("undo of turn 3".into(), ID, ObjectId([8; 32]), None);
    journal.started_ms = 4_000;
    journal.pid = 1234;
    add("journal", "seed-journal", encode(&journal));
    journal.then = Some(retrace::history::SessionOp(
        retrace::history::db::SessionKey([5; 32]),
        Op::Undo {
            turn: 3,
            to: Some(2),
            mode: Mode::Both,
            snapshot: None,
        },
    ));
    add("journal", "seed-journal-then", encode(&journal));

    let lease = LeaseRecord {
        version: LEASE_VERSION,
        owner_id: [1; 16],
        host_id: "0123456789abcdef0123456789abcdef".into(),
        hostname: "build-host".into(),
        boot_id: "6a1b7c2d-0000-4000-8000-000000000000".into(),
        pid_ns: 4_026_531_836,
        pid: 4242,
        start_time: 123_456,
        heartbeat_ms: 5_000,
    };
    add("lease", "seed-lease", encode(&lease));
    let fields = (3..=52)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    add(
        "lease",
        "seed-proc-stat",
        format!("4242 (cargo (x) y) {fields}\n").into_bytes(),
    );
    add(
        "lease",
        "seed-host-id",
        b"0123456789abcdef0123456789abcdef\n".to_vec(),
    );
    add("lease", "seed-owner", b"123456\n".to_vec());
    add("bundle", "seed-bundle", bundle_seed());
    out
}

/// A bundle of one turn over a one-file snapshot.
fn bundle_seed() -> Vec<u8> {
    use retrace::share::image::{SessionImage, TurnImage};
    let blob = b"hello\n".to_vec();
    let tree = Tree {
        entries: vec![TreeEntry {
            name: b"a.txt".to_vec(),
            kind: EntryKind::File,
            id: ObjectId::of_blob(&blob),
            size: 6,
        }],
    };
    let mut record = turn_record();
    record.before = Some(tree.id());
    record.after = Some(tree.id());
    let image = SessionImage {
        name: "seed".into(),
        agent: Some("pi".into()),
        created_ms: 1_700_000_000_000,
        cursor: Some(record.number),
        redo: Vec::new(),
        turns: vec![TurnImage {
            record,
            reverts: None,
            steps: Vec::new(),
        }],
        checkpoints: Vec::new(),
    };
    retrace::share::bundle::encode(&image, &[tree], &[blob]).unwrap()
}
