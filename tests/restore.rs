//! Restore scenarios on real directories.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use crate::common::{Env, Node, assert_verified, tree_of};
use retrace::{RestoreError, RestoreOptions};

#[test]
fn restore_brings_back_edited_deleted_and_removes_added_files() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}\n");
    env.write("src/deep/lib.rs", "pub fn f() {}\n");
    env.write("README.md", "# hi\n");
    let ws = env.open();
    let before_tree = tree_of(env.root());
    let snap = ws.snapshot(Some("before".into())).unwrap();
    assert_eq!(snap.files, 3);

    env.write("src/main.rs", "broken");
    fs::remove_file(env.path("src/deep/lib.rs")).unwrap();
    env.write("new/dir/added.txt", "new");
    ws.snapshot(None).unwrap();

    let out = ws.restore(&snap.id, RestoreOptions::default()).unwrap();
    assert!(out.verified, "{:?}", out.verify_diff);
    assert_eq!(tree_of(env.root()), before_tree);
    assert!(
        out.removed_dirs.contains(&"new".to_string()),
        "{:?}",
        out.removed_dirs
    );
    assert_verified(&env);
}

#[test]
fn restore_refuses_to_overwrite_unsnapshotted_changes_and_lists_them() {
    let env = Env::new();
    env.write("a.txt", "one");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    env.write("a.txt", "two");
    ws.snapshot(None).unwrap();
    env.write("a.txt", "unsaved work");
    env.write("b.txt", "also unsaved");
    let err = ws
        .restore(&first.id, RestoreOptions::default())
        .unwrap_err();
    // The refusal is the restore's own error, as it came, not the umbrella `Error`.
    match err {
        RestoreError::Dirty { paths, count } => {
            assert_eq!(
                (paths, count),
                (vec!["a.txt".to_string(), "b.txt".into()], 2)
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(env.read("a.txt"), "unsaved work");
}

#[test]
fn forced_restore_snapshots_the_unsaved_work_first() {
    let env = Env::new();
    env.write("a.txt", "one");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    env.write("a.txt", "unsaved work");
    let out = ws
        .restore(
            &first.id,
            RestoreOptions {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
    assert_eq!(env.read("a.txt"), "one");
    let safety = out.safety_snapshot.expect("a safety snapshot");
    // The unsaved work can be brought back.
    ws.restore(&safety, RestoreOptions::default()).unwrap();
    assert_eq!(env.read("a.txt"), "unsaved work");
}

#[test]
fn dry_run_writes_nothing() {
    let env = Env::new();
    env.write("a.txt", "one");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    env.write("a.txt", "two");
    env.write("b.txt", "b");
    ws.snapshot(None).unwrap();
    let out = ws
        .restore(
            &first.id,
            RestoreOptions {
                force: false,
                dry_run: true,
            },
        )
        .unwrap();
    assert_eq!(out.written, vec!["a.txt"]);
    assert_eq!(out.deleted, vec!["b.txt"]);
    assert_eq!(env.read("a.txt"), "two");
    assert!(env.path("b.txt").exists());
}

#[test]
fn restore_keeps_exec_bits_symlinks_and_empty_files() {
    let env = Env::new();
    env.write("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(env.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    env.write("empty", "");
    symlink("run.sh", env.path("link")).unwrap();
    symlink("/nonexistent/target", env.path("dangling")).unwrap();
    fs::create_dir(env.path("emptydir")).unwrap();
    let ws = env.open();
    let before = tree_of(env.root());
    let snap = ws.snapshot(None).unwrap();
    fs::set_permissions(env.path("run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::remove_file(env.path("link")).unwrap();
    env.write("link", "now a file");
    fs::remove_file(env.path("dangling")).unwrap();
    fs::remove_file(env.path("empty")).unwrap();
    fs::remove_dir(env.path("emptydir")).unwrap();
    ws.snapshot(None).unwrap();
    ws.restore(&snap.id, RestoreOptions::default()).unwrap();
    assert_eq!(tree_of(env.root()), before);
    assert_eq!(
        before.get(std::path::Path::new("link")),
        Some(&Node::Symlink("run.sh".into()))
    );
}

#[test]
fn restore_replaces_a_directory_with_a_file_and_back() {
    let env = Env::new();
    env.write("thing", "a file");
    let ws = env.open();
    let as_file = ws.snapshot(None).unwrap();
    let file_tree = tree_of(env.root());
    fs::remove_file(env.path("thing")).unwrap();
    env.write("thing/inner/x.txt", "x");
    let as_dir = ws.snapshot(None).unwrap();
    let dir_tree = tree_of(env.root());
    ws.restore(&as_file.id, RestoreOptions::default()).unwrap();
    assert_eq!(tree_of(env.root()), file_tree);
    ws.restore(&as_dir.id, RestoreOptions::default()).unwrap();
    assert_eq!(tree_of(env.root()), dir_tree);
}

#[test]
fn restore_never_touches_ignored_files_or_nested_repos() {
    let env = Env::new();
    env.write(".gitignore", "build/\n*.log\n");
    env.write("src/a.rs", "a");
    env.write("build/out.bin", "old build");
    env.write("debug.log", "old log");
    env.write("vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
    env.write("vendor/lib/code.c", "int x;");
    let ws = env.open();
    let snap = ws.snapshot(None).unwrap();
    assert_eq!(snap.nested_repos, vec!["vendor/lib"]);
    assert_eq!(snap.files, 2, "only .gitignore and src/a.rs are managed");
    env.write("src/a.rs", "changed");
    env.write("build/out.bin", "new build");
    env.write("debug.log", "new log");
    env.write("vendor/lib/code.c", "int y;");
    ws.snapshot(None).unwrap();
    ws.restore(&snap.id, RestoreOptions::default()).unwrap();
    assert_eq!(env.read("src/a.rs"), "a");
    assert_eq!(env.read("build/out.bin"), "new build");
    assert_eq!(env.read("debug.log"), "new log");
    assert_eq!(env.read("vendor/lib/code.c"), "int y;");
}

#[test]
fn restore_refuses_to_write_through_an_unmanaged_symlink() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    env.write("out/x.txt", "inside");
    let ws = env.open();
    let snap = ws.snapshot(None).unwrap();
    fs::remove_dir_all(env.path("out")).unwrap();
    env.write(".gitignore", "out\n");
    symlink(outside.path(), env.path("out")).unwrap();
    ws.snapshot(None).unwrap();
    let err = ws.restore(&snap.id, RestoreOptions::default()).unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(
        env.path(".gitignore").exists(),
        "nothing changed in the workspace"
    );
}

#[test]
fn unknown_snapshot_ids_are_clear_errors() {
    let env = Env::new();
    env.write("a", "a");
    let ws = env.open();
    ws.snapshot(None).unwrap();
    assert!(
        ws.resolve("1234")
            .unwrap_err()
            .to_string()
            .contains("at least 8")
    );
    assert!(
        ws.resolve("ffffffffff")
            .unwrap_err()
            .to_string()
            .contains("no snapshot")
    );
}

#[test]
fn restore_replaces_a_symlink_with_a_directory_without_looking_through_it() {
    // Regression (found by the property test): `.hid` becomes a symlink to the root, where a
    // file `x` exists; restoring `.hid/x` must not mistake that file for `.hid/x`.
    let env = Env::new();
    env.write(".hid/x", "inside");
    let ws = env.open();
    let before = tree_of(env.root());
    let snap = ws.snapshot(None).unwrap();
    fs::remove_dir_all(env.path(".hid")).unwrap();
    symlink(".", env.path(".hid")).unwrap();
    env.write("x", "a file at the root");
    ws.snapshot(None).unwrap();
    let out = ws.restore(&snap.id, RestoreOptions::default()).unwrap();
    assert!(out.left_alone.is_empty(), "{:?}", out.left_alone);
    assert_eq!(tree_of(env.root()), before);
}

#[test]
fn restore_replacing_a_directory_by_a_symlink_to_the_root_verifies() {
    // Regression (found by the property test): `a/x` is deleted and `a` becomes a symlink
    // to the root, where `x` is written; `a/x` then resolves to `x`, which must not count
    // as the deleted path coming back.
    let env = Env::new();
    symlink(".", env.path("a")).unwrap();
    env.write("x", "");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    let before = tree_of(env.root());
    fs::remove_file(env.path("a")).unwrap();
    fs::remove_file(env.path("x")).unwrap();
    env.write("a/x", "");
    env.write("b", "");
    ws.snapshot(None).unwrap();
    let out = ws.restore(&first.id, RestoreOptions::default()).unwrap();
    assert!(out.verified, "{:?}", out.verify_diff);
    assert_eq!(tree_of(env.root()), before);
}

/// The dirty refusal counts every change, not the sample it lists; files deleted since the
/// last snapshot that the target brings back exactly as they were are no unsaved work.
#[test]
fn a_dirty_refusal_counts_every_change_and_files_the_target_brings_back_are_no_loss() {
    use crate::common::{RETRACE, stderr, stdout};
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("f{i:02}.txt"), format!("{i}\n"));
    }
    let first = crate::common::snapshot_id(&env);
    for i in 0..30 {
        fs::remove_file(env.path(&format!("f{i:02}.txt"))).unwrap();
    }
    // Deleted since: the restore brings every one back as it was, with no --force.
    let o = env.run(RETRACE, &["restore", &first]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("f00.txt"), "0\n");
    assert_eq!(env.read("f29.txt"), "29\n");
    // 25 edits and a deletion: refused, all 26 counted (the message lists one).
    for i in 0..25 {
        env.write(&format!("f{i:02}.txt"), "edited\n");
    }
    fs::remove_file(env.path("f29.txt")).unwrap();
    let o = env.run(RETRACE, &["restore", &first]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("25 changes in no snapshot"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.read("f00.txt"), "edited\n");
    // A deleted file the target holds otherwise is no different: the target changed it,
    // so it is not brought back as it was.
    env.write("f29.txt", "29 again\n");
    let second = crate::common::snapshot_id(&env);
    fs::remove_file(env.path("f29.txt")).unwrap();
    let o = env.run(RETRACE, &["restore", &first, "--", "f29.txt"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 change in no snapshot"),
        "{}",
        stderr(&o)
    );
    let o = env.run(RETRACE, &["restore", &second, "--", "f29.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("f29.txt"), "29 again\n");
}
