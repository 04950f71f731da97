//! Backward compatibility: a store written by retrace format 1 (the first release) stays
//! readable and restorable. `tests/data/store-format-1.redb` was made by `retrace snapshot
//! --label golden` over the workspace that `golden_workspace` describes; never regenerate it
//! (a format change needs a new version and a new sample, and this test must keep passing).

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use common::{Env, Node, tree_of};
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
