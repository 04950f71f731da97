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
    assert_eq!((code, v["result"].as_str()), (0, Some("preview")), "{v}");
    assert_eq!(v["requested_paths"], serde_json::json!(["src"]));
    assert_eq!(env.read("src/a.txt"), "a2\n");

    let (code, v) = json(&env, &["restore", &first, "--json", "--", "./src/"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("src/a.txt"), "a1\n");
    assert_eq!(env.read("src/sub/b.txt"), "b1\n");
    assert!(!env.path("src/new.txt").exists());
    let mut written: Vec<&str> = v["files_written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    written.sort_unstable();
    assert_eq!(written, ["src/a.txt", "src/sub/b.txt"]);
    assert_eq!(v["files_deleted"], serde_json::json!(["src/new.txt"]));
    // Everything else: byte-identical, not rewritten.
    assert_eq!(env.read("docs/c.txt"), "c2\n");
    assert_eq!(env.read("top.txt"), "t2\n");
    assert_eq!(stamp(&env, "docs/c.txt"), docs);
    assert_eq!(stamp(&env, "top.txt"), top);
    // The result is the workspace's known state: nothing is unsnapshotted now.
    let status = run(&env, &["status", "--json"]);
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["workspace"]["changed_count"], 0, "{status}");

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
    // Named and listed as the session commands' refusals are (and nothing on stderr).
    assert_eq!((code, v["result"].as_str()), (1, Some("dirty")), "{v}");
    assert_eq!(v["paths"], serde_json::json!(["a.txt"]), "{v}");
    assert_eq!(v["count"], 1, "{v}");
    let o = env.run(
        crate::common::RETRACE,
        &["restore", &first, "--json", "--", "a.txt"],
    );
    assert_eq!(
        crate::common::stderr(&o),
        "",
        "--json answers on stdout alone"
    );
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

/// Ten numbered lines, with the given lines replaced.
fn lines(changed: &[(usize, &str)]) -> String {
    (1..=10)
        .map(|i| {
            changed
                .iter()
                .find(|(n, _)| *n == i)
                .map_or_else(|| format!("line {i}\n"), |(_, l)| format!("{l}\n"))
        })
        .collect()
}

/// `retrace --session s ARGS --json`.
fn in_session(env: &Env, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--session", "s"];
    all.extend_from_slice(args);
    all.push("--json");
    json(env, &all)
}

/// A turn of session `s` that runs `work`.
fn turn(env: &Env, prompt: &str, work: impl FnOnce()) {
    let (code, v) = in_session(env, &["turn", "begin", "--prompt", prompt]);
    assert_eq!(code, 0, "{v}");
    work();
    let (code, v) = in_session(env, &["turn", "end"]);
    assert_eq!(code, 0, "{v}");
}

/// Every file of the workspace with its content.
fn files(env: &Env) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in walk(env.root()) {
        let rel = e.strip_prefix(env.root()).unwrap();
        out.push((
            rel.to_string_lossy().into_owned(),
            std::fs::read_to_string(&e).unwrap(),
        ));
    }
    out.sort();
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn reverting_an_earlier_turn_keeps_later_turns_and_the_users_edits() {
    let env = Env::new();
    env.write("a.txt", lines(&[]));
    env.write("gone.txt", "old\n");
    turn(&env, "first", || {
        env.write("a.txt", lines(&[(2, "two by turn 1")]));
        env.write("new1.txt", "added by turn 1\n");
        std::fs::remove_file(env.path("gone.txt")).unwrap();
    });
    turn(&env, "second", || {
        env.write(
            "a.txt",
            lines(&[(2, "two by turn 1"), (9, "nine by turn 2")]),
        );
        env.write("b.txt", "turn 2\n");
    });
    // The user's edit, in no snapshot.
    let before_revert = lines(&[
        (2, "two by turn 1"),
        (5, "five by user"),
        (9, "nine by turn 2"),
    ]);
    env.write("a.txt", &before_revert);
    let disk_before = files(&env);

    let (code, v) = in_session(&env, &["revert", "turn:1", "--dry-run"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["merged"], serde_json::json!(["a.txt"]), "{v}");
    assert_eq!(files(&env), disk_before, "a dry run writes nothing");

    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!((code, v["result"].as_str()), (0, Some("restored")), "{v}");
    assert_eq!(v["merged"], serde_json::json!(["a.txt"]), "{v}");
    assert_eq!(
        env.read("a.txt"),
        lines(&[(5, "five by user"), (9, "nine by turn 2")])
    );
    assert_eq!(env.read("gone.txt"), "old\n");
    assert!(!env.path("new1.txt").exists());
    assert_eq!(env.read("b.txt"), "turn 2\n");
    let disk_after = files(&env);

    // The log shows the revert as an entry of its own.
    let (_, log) = in_session(&env, &["log"]);
    let newest = &log["entries"][0];
    assert_eq!(
        (newest["kind"].as_str(), newest["reverts"].as_u64()),
        (Some("revert"), Some(1)),
        "{log}"
    );
    // Reverting it again says it is done already.
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(
        (code, v["result"].as_str()),
        (1, Some("nothing_to_undo")),
        "{v}"
    );

    // Undo takes the revert back exactly; redo redoes it exactly.
    let (code, v) = in_session(&env, &["undo"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(files(&env), disk_before);
    let (code, v) = in_session(&env, &["redo"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(files(&env), disk_after);
}

#[test]
fn a_revert_that_conflicts_writes_nothing_unless_forced() {
    let env = Env::new();
    env.write("a.txt", lines(&[]));
    env.write("keep.txt", "k\n");
    turn(&env, "first", || {
        env.write("a.txt", lines(&[(2, "two by turn 1")]));
        env.write("clean.txt", "turn 1\n");
    });
    turn(&env, "second", || env.write("later.txt", "turn 2\n"));
    // The user rewrote the very line the turn changed.
    env.write("a.txt", lines(&[(2, "two by user")]));
    let disk = files(&env);
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!((code, v["result"].as_str()), (1, Some("conflict")), "{v}");
    assert_eq!(v["paths"], serde_json::json!(["a.txt"]), "{v}");
    assert_eq!(files(&env), disk, "nothing written for any path");
    let (_, v) = in_session(&env, &["revert", "turn:1", "--dry-run"]);
    assert_eq!(v["conflicts"][0]["path"], "a.txt", "{v}");
    assert!(
        v["conflicts"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("same lines"),
        "{v}"
    );

    let (code, v) = in_session(&env, &["revert", "turn:1", "--force"]);
    assert_eq!((code, v["result"].as_str()), (0, Some("restored")), "{v}");
    assert_eq!(env.read("a.txt"), lines(&[]));
    assert!(!env.path("clean.txt").exists());
    assert_eq!(env.read("later.txt"), "turn 2\n");
    // The user's line is kept in the safety snapshot.
    let safety = v["safety_snapshot"].as_str().unwrap().to_string();
    let out = run(
        &env,
        &["diff", &safety, "-p", "--color", "never", "--", "a.txt"],
    );
    assert!(out.contains("-two by user\n+line 2\n"), "{out}");
}

#[test]
fn only_applied_turns_can_be_reverted() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    turn(&env, "first", || env.write("a.txt", "b\n"));
    let (code, _) = in_session(&env, &["undo"]);
    assert_eq!(code, 0);
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(
        (code, v["result"].as_str()),
        (1, Some("nothing_to_undo")),
        "{v}"
    );
    assert!(
        v["message"].as_str().unwrap().contains("not applied"),
        "{v}"
    );
    let (code, v) = in_session(&env, &["revert", "turn:7"]);
    assert_eq!(code, 1, "{v}");
    let o = env.run(RETRACE, &["--session", "s", "revert", "seven"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
