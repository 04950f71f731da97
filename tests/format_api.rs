//! Reading a store through `retrace::format` alone, as an embedder's backup tool or script
//! would: no internals, no redb. A workspace's own session writes the store (turns, steps, a
//! checkpoint, a labelled snapshot, a chunked file); the reader, opened while the workspace
//! is still open, must find every snapshot's files byte for byte and the session as written.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::Env;
use retrace::format::{EntryKind, ObjectKind, StoreFile, StoreView, TurnRecord};
use retrace::{ObjectId, StoreError, TurnState};

/// Every file below tree `id`, read back through the view.
fn files(view: &StoreView, id: &ObjectId) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(view: &StoreView, id: &ObjectId, at: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in view.tree(id).unwrap().entries {
            let path = at.join(OsStr::from_bytes(&e.name));
            match e.kind {
                EntryKind::Dir => walk(view, &e.id, &path, out),
                k if k.is_content() => {
                    out.insert(path, view.file(&e.id).unwrap());
                }
                _ => {}
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(view, id, Path::new(""), &mut out);
    out
}

fn map(items: &[(&str, &[u8])]) -> BTreeMap<PathBuf, Vec<u8>> {
    items
        .iter()
        .map(|(p, b)| (PathBuf::from(p), b.to_vec()))
        .collect()
}

#[test]
fn a_store_read_through_format_alone_holds_every_snapshot_and_the_session_as_written() {
    let env = Env::new();
    // Big enough to be stored as chunks; pseudo-random so FastCDC cuts it.
    let big: Vec<u8> = (0..3_000_000u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    env.write("src/main.rs", "fn main() {}\n");
    std::fs::write(env.path("big.bin"), &big).unwrap();
    let ws = env.open();
    let first = ws.snapshot(Some("start".into())).unwrap();

    let session = ws.session("format-test").for_agent("embed");
    let turn = session
        .begin_turn(None, Some("add a greeting".into()))
        .unwrap();
    turn.wait_before(Duration::from_mins(1)).unwrap();
    session
        .begin_step("call-1", "Write", "src/hi.rs", &["src/hi.rs".into()])
        .unwrap()
        .expect("a turn runs");
    env.write("src/hi.rs", "pub fn hi() {}\n");
    session.end_step("call-1").unwrap().expect("the step runs");
    std::fs::remove_file(env.path("big.bin")).unwrap();
    turn.end(None).unwrap();
    session.checkpoint(Some("greeted".into())).unwrap();

    // Read while the workspace (a writer) still has the store open.
    let store = StoreFile::open(ws.store_path()).unwrap();
    assert_eq!(store.path(), ws.store_path());
    let view = store.view().unwrap();

    let snaps = view.snapshots().unwrap();
    let mut log = ws.log().unwrap();
    log.reverse(); // newest first there
    assert_eq!(snaps, log, "the log as the workspace lists it");
    let labels: Vec<_> = snaps.iter().map(|s| s.label.as_deref().unwrap()).collect();
    assert_eq!(
        labels,
        ["start", "before turn 1", "after turn 1", "greeted"]
    );
    assert_eq!(snaps[0].root, first.id);
    assert_eq!(snaps[0].label.as_deref(), Some("start"));
    assert_eq!(
        files(&view, &first.id),
        map(&[("big.bin", &big), ("src/main.rs", b"fn main() {}\n")])
    );

    // The big file is a chunk list whose chunks add up to it.
    let tree = view.tree(&first.id).unwrap();
    let entry = tree.entry(b"big.bin").unwrap();
    let rec = view.object(&entry.id).unwrap();
    assert_eq!(rec.kind, ObjectKind::ChunkedBlob);
    assert_eq!(rec.size, big.len() as u64);
    let chunks = view.chunks(&entry.id).unwrap();
    assert!(chunks.chunks.len() > 1, "{chunks:?}");
    let joined: Vec<u8> = chunks
        .chunks
        .iter()
        .flat_map(|(id, _)| view.file(id).unwrap())
        .collect();
    assert_eq!(joined, big);
    assert_eq!(view.object(&first.id).unwrap().kind, ObjectKind::Tree);
    assert_eq!(tree.id(), first.id, "a tree re-encodes to its id");

    // The session, its turn, its step and its checkpoint.
    let sessions = view.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(s.key, retrace::SessionKey::of("format-test"));
    let name = s.name.as_ref().expect("the host's id is kept");
    assert_eq!(name.name, "format-test");
    assert_eq!(name.agent.as_deref(), Some("embed"));

    let turns: Vec<TurnRecord> = view.turns(&s.key).unwrap();
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!(t.number, 1);
    assert_eq!(t.prompt.as_deref(), Some("add a greeting"));
    assert_eq!(t.state, TurnState::Complete);
    assert_eq!(t.counts, [1, 0, 1]);
    let before = t.before.expect("captured before");
    let after = t.after.expect("captured after");
    assert_eq!(
        files(&view, &before),
        map(&[("big.bin", &big), ("src/main.rs", b"fn main() {}\n")])
    );
    assert_eq!(
        files(&view, &after),
        map(&[
            ("src/hi.rs", b"pub fn hi() {}\n"),
            ("src/main.rs", b"fn main() {}\n")
        ])
    );

    let steps = view.steps(&s.key, 1).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(
        (steps[0].call.as_str(), steps[0].tool.as_str()),
        ("call-1", "Write")
    );
    assert_eq!(steps[0].files, [b"src/hi.rs".to_vec()]);

    let checkpoints = view.checkpoints(&s.key).unwrap();
    assert_eq!(checkpoints.len(), 1);
    assert_eq!(checkpoints[0].label.as_deref(), Some("greeted"));
    assert_eq!(checkpoints[0].snapshot, after);

    // An id the store does not hold is an answer, not a panic.
    let absent = ObjectId::of_tree(b"not in this store");
    assert!(!view.contains(&absent).unwrap());
    assert!(matches!(
        view.object(&absent),
        Err(StoreError::Missing { .. })
    ));
}

#[test]
fn what_is_not_a_store_is_refused_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent.redb");
    assert!(StoreFile::open(&absent).is_err());
    assert!(!absent.exists(), "opening read-only never creates a store");
    let junk = dir.path().join("junk.redb");
    std::fs::write(&junk, b"not a redb file at all, just text").unwrap();
    assert!(StoreFile::open(&junk).is_err());
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        b"not a redb file at all, just text"
    );
}
