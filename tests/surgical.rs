//! Surgical history (issue 17): `restore ID -- PATH...` and `revert turn:N`, through the
//! real CLI.

use std::os::unix::fs::MetadataExt;

use serde_json::Value;

use crate::common::{Env, RETRACE, snapshot_id, stderr, stdout};

fn run(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    assert!(o.status.success(), "retrace {args:?}: {}", stderr(&o));
    stdout(&o)
}

fn json(env: &Env, args: &[&str]) -> (i32, Value) {
    let o = env.run(RETRACE, args);
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
        panic!("retrace {args:?}: {e}: {}{}", stdout(&o), stderr(&o));
    });
    (o.status.code().unwrap_or(-1), v)
}

/// Modification time and inode of a file, in nanoseconds: a file a restore left alone keeps
/// both.
fn stamp(env: &Env, rel: &str) -> (i64, i64, u64) {
    let m = std::fs::symlink_metadata(env.path(rel)).unwrap();
    (m.mtime(), m.mtime_nsec(), m.ino())
}

#[test]
fn restoring_some_paths_leaves_every_other_path_untouched() {
    let env = Env::new();
    env.write("src/a.txt", "a1\n");
    env.write("src/sub/b.txt", "b1\n");
    env.write("docs/c.txt", "c1\n");
    env.write("top.txt", "t1\n");
    let first = snapshot_id(&env);
    env.write("src/a.txt", "a2\n");
    std::fs::remove_file(env.path("src/sub/b.txt")).unwrap();
    env.write("src/new.txt", "new\n");
    env.write("docs/c.txt", "c2\n");
    env.write("top.txt", "t2\n");
    snapshot_id(&env);
    let (docs, top) = (stamp(&env, "docs/c.txt"), stamp(&env, "top.txt"));

    // A dry run says what it would do and writes nothing.
    let (code, v) = json(
        &env,
        &["restore", &first, "--dry-run", "--json", "--", "src"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["paths"], serde_json::json!(["src"]));
    assert_eq!(env.read("src/a.txt"), "a2\n");

    let (code, v) = json(&env, &["restore", &first, "--json", "--", "./src/"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("src/a.txt"), "a1\n");
    assert_eq!(env.read("src/sub/b.txt"), "b1\n");
    assert!(!env.path("src/new.txt").exists());
    let mut written: Vec<&str> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    written.sort_unstable();
    assert_eq!(written, ["src/a.txt", "src/sub/b.txt"]);
    assert_eq!(v["deleted"], serde_json::json!(["src/new.txt"]));
    // Everything else: byte-identical, not rewritten.
    assert_eq!(env.read("docs/c.txt"), "c2\n");
    assert_eq!(env.read("top.txt"), "t2\n");
    assert_eq!(stamp(&env, "docs/c.txt"), docs);
    assert_eq!(stamp(&env, "top.txt"), top);
    // The result is the workspace's known state: nothing is unsnapshotted now.
    let status = run(&env, &["status", "--json"]);
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["changed_count"], 0, "{status}");

    // A single file, by an absolute path inside the workspace.
    let abs = env.path("top.txt");
    run(&env, &["restore", &first, "--", abs.to_str().unwrap()]);
    assert_eq!(env.read("top.txt"), "t1\n");
    assert_eq!(env.read("docs/c.txt"), "c2\n");
}

#[test]
fn the_dirty_guard_of_a_path_restore_covers_only_its_paths() {
    let env = Env::new();
    env.write("a.txt", "a1\n");
    env.write("b.txt", "b1\n");
    let first = snapshot_id(&env);
    env.write("a.txt", "a2\n");
    env.write("b.txt", "b2\n");
    snapshot_id(&env);
    // An edit no snapshot has, outside the restored path: no refusal, and it stays.
    env.write("b.txt", "b3 unsnapshotted\n");
    run(&env, &["restore", &first, "--", "a.txt"]);
    assert_eq!(env.read("a.txt"), "a1\n");
    assert_eq!(env.read("b.txt"), "b3 unsnapshotted\n");
    // An edit inside it: refused, nothing written; --force keeps it first.
    env.write("a.txt", "a3 unsnapshotted\n");
    let (code, v) = json(&env, &["restore", &first, "--json", "--", "a.txt"]);
    assert_eq!((code, v["result"].as_str()), (1, Some("refused")), "{v}");
    assert_eq!(env.read("a.txt"), "a3 unsnapshotted\n");
    let (code, v) = json(
        &env,
        &["restore", &first, "--force", "--json", "--", "a.txt"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("a.txt"), "a1\n");
    let safety = v["safety_snapshot"].as_str().unwrap().to_string();
    let out = run(
        &env,
        &["diff", &safety, "-p", "--color", "never", "--", "a.txt"],
    );
    assert!(out.contains("-a3 unsnapshotted\n+a1\n"), "{out}");
}

#[test]
fn a_path_restore_names_paths_it_cannot_restore() {
    let env = Env::new();
    env.write("a.txt", "a1\n");
    let first = snapshot_id(&env);
    for (path, says) in [
        ("nope.txt", "neither snapshot"),
        ("../outside", "`..` is not allowed"),
        ("/etc/passwd", "outside the workspace"),
    ] {
        let o = env.run(RETRACE, &["restore", &first, "--", path]);
        assert_eq!(o.status.code(), Some(2), "{path}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{path}: {}", stderr(&o));
    }
    assert_eq!(env.read("a.txt"), "a1\n");
}
