//! Backward compatibility: a store written by retrace format 1 (the first release) stays
//! readable and restorable. `tests/data/store-format-1.redb` was made by `retrace snapshot
//! --label golden` over the workspace that `golden_workspace` describes; never regenerate it
//! (a format change needs a new version and a new sample, and this test must keep passing).

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use crate::common::{Env, Node, tree_of};
use retrace::store::Store;
use retrace::{Config, ObjectId, RestoreOptions, Workspace};

const SNAPSHOT: &str = "c03a963bf47d87c58604ac60d05946c43348f0dd4143498554d7786fa17a5747";

fn golden_workspace(env: &Env) {
    env.write("src/main.rs", "fn main() {}\n");
    env.write("README.md", "# golden\n");
    env.write("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(env.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink("README.md", env.path("link")).unwrap();
    // Over 1 MiB: stored as a chunked blob.
    let big: String = (0..48_000)
        .map(|i| format!("line {} of a big text file\n", i % 5000))
        .collect();
    env.write("big.txt", big);
}

#[test]
fn a_format_1_store_is_read_and_restored_exactly() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-1.redb", &store_path).unwrap();

    let id = ObjectId::from_hex(SNAPSHOT).unwrap();
    {
        let store = Store::open_read_only(&store_path).unwrap();
        let reader = store.reader().unwrap();
        let log = reader.snapshots().unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].root, id);
        assert_eq!(log[0].label.as_deref(), Some("golden"));
        assert_eq!(log[0].files, 5);
    }

    // Restore it into an empty workspace and compare with the workspace it was made from.
    let ws = env.open();
    let out = ws
        .restore(
            &id,
            RestoreOptions {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
    assert!(out.verified, "{:?}", out.verify_diff);
    let restored = tree_of(env.root());
    let expected_env = Env::new();
    golden_workspace(&expected_env);
    assert_eq!(restored, tree_of(expected_env.root()));
    assert!(matches!(
        restored.get(std::path::Path::new("run.sh")),
        Some(Node::File { exec: true, .. })
    ));
    // And the same workspace captured today has the same id: the encodings did not drift.
    assert_eq!(expected_env.open().snapshot(None).unwrap().id, id);
}

/// `tests/data/store-format-1-history.redb` was made by this CLI sequence in a folder holding
/// `a.txt` ("alpha\n"), session `golden`: `turn begin --anchor u1 --prompt "add b"`, write
/// `b.txt` ("beta\n"), `turn end --anchor a1`, `turn begin --anchor a1 --prompt "drop a"`,
/// delete `a.txt`, `turn end --anchor a2`, `checkpoint "cp one"`, `undo`. Never regenerate it.
#[test]
fn format_1_history_records_are_read_and_replayed() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-1-history.redb", &store_path).unwrap();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    let ws = env.open();
    let s = ws.session("golden");
    let st = s.status().unwrap();
    assert_eq!(st.session, "7a517a8a33a41eec");
    assert_eq!(
        (st.cursor, st.redo_turn),
        (Some(1), Some((2, retrace::Mode::Both)))
    );
    assert_eq!((st.turns, st.checkpoints), (2, 1));
    let log = s.log().unwrap();
    // Oldest first, as the sample was written (the log lists the newest first).
    let turns: Vec<_> = log
        .entries
        .iter()
        .rev()
        .filter(|e| e.kind == "turn")
        .collect();
    assert_eq!(turns[0].text.as_deref(), Some("add b"));
    assert_eq!(turns[0].anchor.as_deref(), Some("u1"));
    assert_eq!(turns[0].counts, [1, 0, 0]);
    assert_eq!(turns[1].leaf.as_deref(), Some("a2"));
    assert_eq!(turns[1].counts, [0, 0, 1]);
    // Redo the undone turn against the same disk: a.txt goes again.
    let o = s.redo().unwrap();
    assert_eq!(o.anchor(), Some("a2"), "{o:?}");
    assert!(!env.path("a.txt").exists());
    s.navigate("u1", retrace::Mode::Both).unwrap();
    assert_eq!(env.read("a.txt"), "alpha\n");
    assert!(!env.path("b.txt").exists());
    s.navigate("cp one", retrace::Mode::Both).unwrap();
    assert!(!env.path("a.txt").exists());
    assert_eq!(env.read("b.txt"), "beta\n");
}
