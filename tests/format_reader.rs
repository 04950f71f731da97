//! An independent reader of retrace's store, written from `docs/format.md` alone: it uses only
//! the `redb`, `zstd` and `blake3` crates, no retrace code, and decodes postcard by hand as the
//! document describes it. Real `retrace` processes write the store; the reader lists its
//! snapshots, walks their trees, reads every file (chunked ones too), checks every id, and must
//! find exactly the files the workspace held at each snapshot. A change of the format that the
//! document does not describe fails here: fix the document, not this reader.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::common::{Env, Node, RETRACE, noise, snapshot_id, stderr, stdout, tree_of};

// "redb tables": exactly these types.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const OBJECTS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("objects");
const PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("packs");
const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");
// "The pack log".
const PACK_BYTES: u64 = 65408;

/// A postcard record being decoded ("Records are postcard 1 encodings").
struct Dec<'a>(&'a [u8]);

impl<'a> Dec<'a> {
    /// A `u8`: one raw byte.
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().expect("record ends early");
        self.0 = rest;
        *b
    }
    fn raw(&mut self, n: usize) -> &'a [u8] {
        assert!(self.0.len() >= n, "record ends early");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    /// `u32`, `u64`, enum indices and lengths: unsigned LEB128.
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte();
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("varint longer than 10 bytes")
    }
    fn id(&mut self) -> [u8; 32] {
        self.raw(32).try_into().unwrap()
    }
    /// `Vec<u8>` and `String`: a varint length, then the bytes.
    fn bytes(&mut self) -> &'a [u8] {
        let n = usize::try_from(self.varint()).unwrap();
        self.raw(n)
    }
    /// A record's version byte, which must be 1.
    fn version(&mut self) {
        assert_eq!(self.byte(), 1, "record version");
    }
    /// An `ObjectRecord`'s version byte: 1, or 2 for a delta.
    fn object_version(&mut self) -> u8 {
        let v = self.byte();
        assert!(v == 1 || v == 2, "object record version {v}");
        v
    }
    /// Nothing may follow the last field.
    fn end(&self) {
        assert!(self.0.is_empty(), "{} trailing bytes", self.0.len());
    }
}

/// One row of `snapshots`: its key, root, label, `files` and `bytes`.
type Snap = (u64, [u8; 32], Option<String>, u64, u64);

/// What the reader found in one read transaction.
struct Found {
    snaps: Vec<Snap>,
    /// Each snapshot's files, as `common::tree_of` describes a directory.
    states: Vec<BTreeMap<PathBuf, Node>>,
    codecs: BTreeSet<u64>,
    pack_keys: Vec<u64>,
    /// Delta objects read, by depth.
    deltas: BTreeMap<u8, u64>,
}

struct Reader {
    objects: redb::ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    packs: redb::ReadOnlyTable<u64, &'static [u8]>,
    codecs: BTreeSet<u64>,
    deltas: BTreeMap<u8, u64>,
}

/// The zstd frame inside a codec-3 frame ("Parity frames"), every shard checked against its
/// check (this reader only reads undamaged stores).
fn parity_frame(stored: &[u8]) -> Vec<u8> {
    let u32_at = |at: usize| u32::from_le_bytes(stored[at..at + 4].try_into().unwrap()) as usize;
    let check = |b: &[u8]| blake3::hash(b).as_bytes()[..8].to_vec();
    assert_eq!(check(&stored[..8]), stored[8..16], "first header copy");
    assert_eq!(stored[..16], stored[16..32], "second header copy");
    let (zstd_len, shard_len) = (u32_at(0), u32_at(4));
    let k = zstd_len.div_ceil(shard_len);
    assert_eq!(stored.len(), 32 + (k + 1) * (shard_len + 8));
    let body = &stored[32..32 + (k + 1) * shard_len];
    let checks = &stored[32 + (k + 1) * shard_len..];
    let mut parity = vec![0u8; shard_len];
    for (shard, c) in body.chunks(shard_len).zip(checks.chunks(8)) {
        assert_eq!(check(shard), c, "a shard's check");
    }
    for shard in body[..k * shard_len].chunks(shard_len) {
        parity.iter_mut().zip(shard).for_each(|(p, b)| *p ^= b);
    }
    assert_eq!(parity, body[k * shard_len..], "the parity shard");
    body[..zstd_len].to_vec()
}

impl Reader {
    /// An object's kind, content size and payload ("To read an object").
    fn object(&mut self, id: &[u8; 32]) -> (u64, u64, Vec<u8>) {
        let rec = self.objects.get(id).unwrap().expect("object missing");
        let mut d = Dec(rec.value());
        let version = d.object_version();
        let (kind, size, offset) = (d.varint(), d.varint(), d.varint());
        let (stored_len, codec, frame_len) = (d.varint(), d.varint(), d.varint());
        let (within, len, _written) = (d.varint(), d.varint(), d.varint());
        // Version 2: a delta against `base`, `depth` steps from an object stored whole.
        let delta = (version == 2).then(|| (d.id(), d.byte()));
        d.end();
        drop(rec);
        let mut stored = Vec::new();
        let (mut at, end) = (offset, offset + stored_len);
        while at < end {
            let pack = self.packs.get(at / PACK_BYTES).unwrap().expect("no pack");
            let start = usize::try_from(at % PACK_BYTES).unwrap();
            let n = usize::try_from((end - at).min(PACK_BYTES - at % PACK_BYTES)).unwrap();
            stored.extend_from_slice(&pack.value()[start..start + n]);
            at += n as u64;
        }
        let frame_len = usize::try_from(frame_len).unwrap();
        let frame = match codec {
            0 => stored,
            1 | 2 => zstd::bulk::decompress(&stored, frame_len).unwrap(),
            3 => zstd::bulk::decompress(&parity_frame(&stored), frame_len).unwrap(),
            c => panic!("codec {c}"),
        };
        assert_eq!(frame.len(), frame_len);
        self.codecs.insert(codec);
        let within = usize::try_from(within).unwrap();
        let payload = frame[within..within + usize::try_from(len).unwrap()].to_vec();
        let Some((base, depth)) = delta else {
            return (kind, size, payload);
        };
        // "Delta objects": one zstd frame made with the base's payload as reference prefix.
        *self.deltas.entry(depth).or_default() += 1;
        let (base_kind, _, base_payload) = self.object(&base);
        assert_eq!(base_kind, kind, "a delta's base has its kind");
        let mut dctx = zstd::zstd_safe::DCtx::create();
        dctx.ref_prefix(&base_payload[..]).unwrap();
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap());
        let n = dctx.decompress(&mut out, &payload[..]).unwrap();
        assert_eq!(n as u64, size, "a delta rebuilds `size` bytes");
        (kind, size, out)
    }

    /// A file's (or symlink target's) bytes: a blob, or a chunked blob's chunks.
    fn content(&mut self, id: &[u8; 32]) -> Vec<u8> {
        let (kind, size, payload) = self.object(id);
        let data = match kind {
            0 => payload,
            1 => {
                let mut d = Dec(&payload);
                d.version();
                let mut data = Vec::new();
                for _ in 0..d.varint() {
                    let (chunk_id, chunk_len) = (d.id(), d.varint());
                    let (chunk_kind, _, chunk) = self.object(&chunk_id);
                    assert_eq!((chunk_kind, chunk.len() as u64), (0, chunk_len));
                    assert_eq!(blake3::hash(&chunk).as_bytes(), &chunk_id);
                    data.extend_from_slice(&chunk);
                }
                d.end();
                data
            }
            k => panic!("a file's object of kind {k}"),
        };
        assert_eq!(data.len() as u64, size);
        assert_eq!(blake3::hash(&data).as_bytes(), id, "blob id");
        data
    }

    /// Walks tree `id` at `dir`; returns the files and bytes below it and its size.
    fn walk(&mut self, id: &[u8; 32], dir: &Path, out: &mut BTreeMap<PathBuf, Node>) -> [u64; 3] {
        let (kind, size, payload) = self.object(id);
        assert_eq!((kind, size), (2, payload.len() as u64));
        let tree_id = blake3::derive_key("retrace tree v1", &payload);
        assert_eq!(&tree_id, id, "tree id");
        let mut d = Dec(&payload);
        d.version();
        let mut totals = [0u64; 3];
        let mut last: Option<&[u8]> = None;
        for _ in 0..d.varint() {
            let name = d.bytes();
            let (kind, eid, esize) = (d.varint(), d.id(), d.varint());
            assert!(last.is_none_or(|l| l < name), "names not ascending");
            last = Some(name);
            let path = dir.join(OsStr::from_bytes(name));
            let node = match kind {
                0 | 1 => Node::File {
                    data: self.content(&eid),
                    exec: kind == 1,
                },
                2 => Node::Symlink(PathBuf::from(OsStr::from_bytes(&self.content(&eid)))),
                3 => {
                    let [files, bytes, sub] = self.walk(&eid, &path, out);
                    assert_eq!(sub, esize, "a directory's size");
                    totals[0] += files;
                    totals[1] += bytes;
                    Node::Dir
                }
                4 => {
                    assert_eq!((eid, esize), ([0; 32], 0), "a nested repository");
                    Node::Dir
                }
                k => panic!("entry kind {k}"),
            };
            if let Node::File { data, .. } = &node {
                assert_eq!(data.len() as u64, esize);
            }
            if kind <= 2 {
                totals[0] += 1;
                totals[1] += esize;
            }
            totals[2] += esize;
            out.insert(path, node);
        }
        d.end();
        totals
    }
}

/// Opens the store as "Opening the database" says: read-only, in multi-writer mode.
fn open(path: &Path) -> redb::ReadOnlyDatabase {
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    b.open_read_only(path).unwrap()
}

/// Reads every snapshot in one read transaction.
fn read(db: &redb::ReadOnlyDatabase) -> Found {
    let tx = db.begin_read().unwrap();
    let meta = tx.open_table(META).unwrap();
    let meta = |k| meta.get(k).unwrap().expect("meta key").value().to_vec();
    let format = u32::from_le_bytes(meta("format").try_into().unwrap());
    assert!((1..=3).contains(&format), "store format {format}");
    let mut r = Reader {
        objects: tx.open_table(OBJECTS).unwrap(),
        packs: tx.open_table(PACKS).unwrap(),
        codecs: BTreeSet::new(),
        deltas: BTreeMap::new(),
    };
    let mut snaps = Vec::new();
    let mut states = Vec::new();
    for row in tx.open_table(SNAPSHOTS).unwrap().iter().unwrap() {
        let (k, v) = row.unwrap();
        let mut d = Dec(v.value());
        d.version();
        let (root, _time_ms) = (d.id(), d.varint());
        let label = match d.byte() {
            0 => None,
            1 => Some(String::from_utf8(d.bytes().to_vec()).unwrap()),
            t => panic!("Option tag {t}"),
        };
        let (files, bytes) = (d.varint(), d.varint());
        d.end();
        let mut state = BTreeMap::new();
        // `files` and `bytes`: files and symlinks at every depth, nothing in nested repositories.
        let [f, b, _] = r.walk(&root, Path::new(""), &mut state);
        assert_eq!((f, b), (files, bytes), "a snapshot's files and bytes");
        snaps.push((k.value(), root, label, files, bytes));
        states.push(state);
    }
    assert_eq!(meta("last_known"), snaps.last().unwrap().1);
    let log_end = u64::from_le_bytes(meta("log_end").try_into().unwrap());
    let pack_keys: Vec<u64> = (r.packs.iter().unwrap().map(|p| p.unwrap().0.value())).collect();
    assert_eq!(pack_keys.last(), Some(&((log_end - 1) / PACK_BYTES)));
    // Format 3 exactly when some frame is a parity frame, else 2 exactly when some object
    // is a delta.
    if r.codecs.contains(&3) {
        assert_eq!(format, 3);
    } else {
        assert_eq!(
            format == 2,
            !r.deltas.is_empty(),
            "format {format}, {:?}",
            r.deltas
        );
    }
    Found {
        snaps,
        states,
        codecs: r.codecs,
        pack_keys,
        deltas: r.deltas,
    }
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the reader must find for the workspace as it is now: every path, the nested
/// repository as a directory and nothing inside it.
fn expected(env: &Env) -> BTreeMap<PathBuf, Node> {
    let mut t = tree_of(env.root());
    t.retain(|p, _| p == Path::new("vendor/lib") || !p.starts_with("vendor/lib"));
    t
}

/// Asserts `found == want`, naming a path that differs (not printing file contents).
fn same(found: &BTreeMap<PathBuf, Node>, want: &BTreeMap<PathBuf, Node>, what: &str) {
    let paths = |m: &BTreeMap<PathBuf, Node>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(paths(found), paths(want), "{what}: the paths");
    for (p, n) in want {
        assert!(found[p] == *n, "{what}: {p:?} differs");
    }
}

fn set_mode(env: &Env, rel: &str, mode: u32) {
    std::fs::set_permissions(env.path(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_reader_written_from_the_format_document_reads_every_snapshot() {
    let env = Env::new();
    let text: String = (0..40_000)
        .map(|i| format!("{i} {}\n", hex(&noise(i, 12))))
        .collect();
    for (path, content) in [
        ("README.md", "# demo\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/deep/mod.rs", &"pub mod deep;\n".repeat(50)),
        ("src/lib.rs", &text[..30_000]),
        ("empty", ""),
        ("run.sh", "#!/bin/sh\necho run\n"),
        ("vendor/lib/.git/HEAD", "ref: refs/heads/main\n"),
        ("vendor/lib/x.c", "int x;\n"),
        // Chunked, and compressed by zstd (recompressed later).
        ("data/big.txt", &text),
    ] {
        env.write(path, content);
    }
    // Chunked, and incompressible: its frames are stored raw.
    env.write("big.bin", noise(7, 2_500_000));
    set_mode(&env, "run.sh", 0o755);
    std::os::unix::fs::symlink("src/main.rs", env.path("link")).unwrap();
    let mut want = vec![(snapshot_id(&env), expected(&env))];

    // The store's path, from "Files", is the one retrace reports.
    let home = env.home.path().canonicalize().unwrap();
    let root = env.root().canonicalize().unwrap();
    let ws_id = &blake3::hash(root.as_os_str().as_bytes()).to_hex()[..32];
    let path = home.join("workspaces").join(ws_id).join("store.redb");
    let o = env.run(RETRACE, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        status["workspace"]["store"].as_str(),
        path.to_str(),
        "{status}"
    );
    // Held open from here on, as an outside reader would: retrace must not wait for it.
    let db = open(&path);
    let found = read(&db);
    assert_eq!(found.snaps.len(), 1);
    same(&found.states[0], &want[0].1, "the first snapshot");
    // A new store is maintained as it is created: its first command recompresses nothing
    // (a pass later does, below).
    assert!(
        found.codecs.contains(&1) && !found.codecs.contains(&2),
        "first use runs no maintenance: {:?}",
        found.codecs
    );
    assert!(found.deltas.is_empty(), "a first capture has no deltas");

    env.write("src/main.rs", "fn main() { edited() }\n");
    // A small edit of a text file and of a big file's chunk: stored as deltas.
    env.write(
        "src/lib.rs",
        format!("{}// edited\n{}", &text[..15_000], &text[15_000..30_000]),
    );
    env.write("src/new.txt", "a new line\n".repeat(2000));
    std::fs::remove_file(env.path("README.md")).unwrap();
    set_mode(&env, "run.sh", 0o644);
    let mut big = noise(7, 2_500_000);
    big[1_200_000..1_200_100].fill(b'x');
    env.write("big.bin", big);
    std::fs::remove_file(env.path("link")).unwrap();
    std::os::unix::fs::symlink("src/new.txt", env.path("link")).unwrap();
    let started = Instant::now();
    let o = env.run(RETRACE, &["snapshot", "edited", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the reader stalled retrace"
    );
    let second: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    want.push((second["id"].as_str().unwrap().to_string(), expected(&env)));

    let check = |found: &Found| {
        assert_eq!(found.snaps.len(), 2, "{:?}", found.snaps);
        for ((snap, state), (id, files)) in found.snaps.iter().zip(&found.states).zip(&want) {
            assert_eq!(&hex(&snap.1), id, "a snapshot's id is its root tree id");
            same(state, files, &format!("snapshot {}", snap.0));
        }
        assert_eq!(found.snaps[1].2.as_deref(), Some("edited"));
    };
    let found = read(&db);
    check(&found);
    assert!(found.codecs.contains(&1), "a new frame: {:?}", found.codecs);
    assert!(
        found.deltas.get(&1).is_some_and(|n| *n >= 2),
        "src/lib.rs and big.bin's changed chunk as deltas: {:?}",
        found.deltas
    );

    // A whole maintenance pass: every zstd frame recompressed, the packs it used freed.
    let o = env.run(RETRACE, &["gc"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let found = read(&db);
    check(&found);
    assert_eq!(
        found.codecs,
        BTreeSet::from([0, 2, 3]),
        "raw, recompressed and parity (the trees) frames only"
    );
    let k = &found.pack_keys;
    assert!(
        k[0] > 0 || k.windows(2).any(|w| w[1] != w[0] + 1),
        "no gap: {k:?}"
    );
}
