//! Integrity checking as a library call (`retrace::verify::verify`): a whole store has no
//! faults; a damaged one yields one typed fault per damage, naming the object, tree entry,
//! snapshot, session, turn or checkpoint it concerns, and `retrace-dump verify` prints
//! exactly those faults.

use std::time::Duration;

use crate::common::{Env, RETRACE_DUMP, flip_byte, open_raw, stdout};
use retrace::history::db::session_key;
use retrace::object::ObjectId;
use retrace::store::Store;
use retrace::store::schema::OBJECTS;
use retrace::verify::{Fault, verify};

fn faults(env: &Env) -> Vec<Fault> {
    let store = Store::open_read_only(env.open().store_path()).unwrap();
    verify(&store).unwrap()
}

/// Removes an object's index record behind retrace's back: it is missing from then on.
fn forget(env: &Env, id: &ObjectId) {
    let db = open_raw(env);
    let tx = db.begin_write().unwrap();
    {
        let mut objects = tx.open_table(OBJECTS).unwrap();
        assert!(objects.remove(&id.0).unwrap().is_some(), "{id} is stored");
    }
    tx.commit().unwrap();
}

/// Flips the first byte of an object's frame in the pack log.
fn damage(env: &Env, id: &ObjectId) {
    let offset = {
        let store = Store::open_read_only(env.open().store_path()).unwrap();
        store.reader().unwrap().record(id).unwrap().offset
    };
    flip_byte(env, offset);
}

/// `retrace-dump verify` prints every fault the library found, one line each, and exits 4
/// (or says `ok` and exits 0 when there are none).
fn assert_printed(env: &Env, faults: &[Fault]) {
    let o = env.run(RETRACE_DUMP, &["verify"]);
    let out = stdout(&o);
    if faults.is_empty() {
        assert!(o.status.success(), "{out}");
        assert!(out.starts_with("ok     "), "{out}");
        return;
    }
    assert_eq!(o.status.code(), Some(4), "{out}");
    let lines: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("  `retrace repair` in the workspace"))
        .map(|l| l[2..].to_string())
        .collect();
    let want: Vec<String> = faults.iter().map(ToString::to_string).collect();
    assert_eq!(lines, want, "{out}");
    assert!(
        out.contains(&format!("({})", faults.len())),
        "the count: {out}"
    );
}

/// A workspace with a snapshot, a session with one turn and a checkpoint. Returns the
/// snapshot, the turn's after-snapshot and the checkpoint's snapshot.
fn with_history(env: &Env) -> (ObjectId, ObjectId, ObjectId) {
    env.write("a.txt", "a");
    env.write("src/b.rs", "fn b() {}");
    let ws = env.open();
    let snap = ws.snapshot(Some("first".into())).unwrap().id;
    let s = ws.session("chat");
    let t = s.begin_turn(None, None).unwrap();
    t.wait_before(Duration::from_secs(60)).unwrap();
    env.write("src/c.rs", "fn c() {}");
    let after = t.end(None).unwrap().after.unwrap();
    env.write("notes.txt", "work in progress");
    s.checkpoint(Some("wip".into())).unwrap();
    let log = s.log().unwrap();
    let checkpoint = log
        .entries
        .iter()
        .find(|e| e.kind == "checkpoint")
        .and_then(|e| e.before)
        .unwrap();
    assert!(snap != after && after != checkpoint && snap != checkpoint);
    (snap, after, checkpoint)
}

#[test]
fn a_whole_store_has_no_faults() {
    let env = Env::new();
    with_history(&env);
    let found = faults(&env);
    assert!(found.is_empty(), "{found:?}");
    assert_printed(&env, &found);
}

#[test]
fn a_missing_turn_snapshot_is_a_turn_fault_of_its_session() {
    let env = Env::new();
    let (_, after, _) = with_history(&env);
    forget(&env, &after);
    let found = faults(&env);
    let chat = session_key("chat");
    assert!(
        found.iter().any(|f| matches!(
            f,
            Fault::Turn { session, number: 1, snapshot, .. } if *session == chat && *snapshot == after
        )),
        "{found:?}"
    );
    // Nothing else is damaged: every fault concerns that snapshot.
    assert!(
        found.iter().all(|f| match f {
            Fault::Turn { snapshot, .. } => *snapshot == after,
            Fault::Snapshot { root, .. } => *root == after,
            _ => false,
        }),
        "{found:?}"
    );
    assert!(
        found[0].to_string().contains(&after.to_hex()),
        "{}",
        found[0]
    );
    assert_printed(&env, &found);
}

#[test]
fn a_missing_checkpoint_snapshot_and_log_root_are_named() {
    let env = Env::new();
    let (snap, _, checkpoint) = with_history(&env);
    forget(&env, &checkpoint);
    forget(&env, &snap);
    let found = faults(&env);
    let chat = session_key("chat");
    assert!(
        found.iter().any(|f| matches!(
            f,
            Fault::Checkpoint { session, number: 1, snapshot, .. }
                if *session == chat && *snapshot == checkpoint
        )),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|f| matches!(f, Fault::Snapshot { root, .. } if *root == snap)),
        "{found:?}"
    );
    assert_printed(&env, &found);
}

#[test]
fn a_missing_blob_is_an_entry_fault_of_the_tree_naming_it() {
    let env = Env::new();
    let (snap, _, _) = with_history(&env);
    let blob = ObjectId::of_blob(b"a");
    forget(&env, &blob);
    let found = faults(&env);
    // Every snapshot's root tree holds a.txt: each names it once.
    assert!(
        found.iter().any(|f| matches!(
            f,
            Fault::Entry { tree, name, id, .. } if *tree == snap && name == b"a.txt" && *id == blob
        )),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .all(|f| matches!(f, Fault::Entry { name, id, .. } if name == b"a.txt" && *id == blob)),
        "{found:?}"
    );
    assert_printed(&env, &found);
}

#[test]
fn a_corrupt_blob_is_a_content_fault_naming_it() {
    let env = Env::new();
    // Over 64 KiB, so the blob has a frame of its own and the trees stay readable.
    let big = "a big file\n".repeat(8000);
    env.write("big.txt", &big);
    let ws = env.open();
    ws.snapshot(None).unwrap();
    drop(ws);
    let blob = ObjectId::of_blob(big.as_bytes());
    damage(&env, &blob);
    let found = faults(&env);
    assert!(
        matches!(&found[..], [Fault::Content { id, .. }] if *id == blob),
        "{found:?}"
    );
    assert!(
        found[0].to_string().contains(&blob.to_hex()),
        "{}",
        found[0]
    );
    assert_printed(&env, &found);
}
