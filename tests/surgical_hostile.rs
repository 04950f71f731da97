//! Hostile review of issue 17 (`revert turn:N`, `restore ID -- PATH...`): each test is an
//! attack a hostile or unlucky user could make; none may lose a byte of the user's work.

use std::os::unix::fs::symlink;

use serde_json::Value;

use crate::common::{Env, RETRACE, snapshot_id, stderr, stdout};

fn json(env: &Env, args: &[&str]) -> (i32, Value) {
    let o = env.run(RETRACE, args);
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
        panic!("retrace {args:?}: {e}: {}{}", stdout(&o), stderr(&o));
    });
    (o.status.code().unwrap_or(-1), v)
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

#[test]
fn reverting_a_turn_that_created_a_directory_keeps_the_users_files_in_it() {
    let env = Env::new();
    env.write("keep.txt", "k\n");
    turn(&env, "first", || env.write("made/by_turn.txt", "turn\n"));
    // The user's own file inside the turn's directory, in no snapshot.
    env.write("made/mine.txt", "my work\n");
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert!(
        env.path("made/mine.txt").exists(),
        "the user's file was deleted: {code} {v}"
    );
    assert_eq!(env.read("made/mine.txt"), "my work\n");
}

#[test]
fn reverting_a_turn_that_deleted_a_directory_keeps_a_recreated_one() {
    let env = Env::new();
    env.write("d/old.txt", "old\n");
    turn(&env, "first", || {
        std::fs::remove_dir_all(env.path("d")).unwrap();
    });
    env.write("d/new.txt", "my new work\n");
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(env.read("d/new.txt"), "my new work\n", "{code} {v}");
    if code == 0 {
        assert_eq!(env.read("d/old.txt"), "old\n", "{v}");
    }
}

#[test]
fn a_merge_keeps_crlf_and_a_missing_final_newline() {
    let env = Env::new();
    env.write("a.txt", "1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7\r\n8\r\nlast");
    turn(&env, "first", || {
        env.write("a.txt", "1\r\nTWO\r\n3\r\n4\r\n5\r\n6\r\n7\r\n8\r\nlast")
    });
    env.write(
        "a.txt",
        "1\r\nTWO\r\n3\r\n4\r\n5\r\n6\r\n7\r\n8\r\nLAST by user",
    );
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        env.read("a.txt"),
        "1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7\r\n8\r\nLAST by user"
    );
}

#[test]
fn a_merge_of_an_empty_file() {
    let env = Env::new();
    env.write("a.txt", "");
    turn(&env, "first", || env.write("a.txt", "x\n"));
    env.write("a.txt", "x\ny by user\n");
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    // Either a clean merge keeping the user's line or a conflict: never the user's line lost.
    if code == 0 {
        assert!(env.read("a.txt").contains("y by user"), "{v}");
    } else {
        assert_eq!(env.read("a.txt"), "x\ny by user\n", "{v}");
    }
}

#[test]
fn a_path_restore_never_writes_through_a_symlink_out_of_the_workspace() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    env.write("out/x.txt", "in the workspace\n");
    let first = snapshot_id(&env);
    std::fs::remove_dir_all(env.path("out")).unwrap();
    symlink(outside.path(), env.path("out")).unwrap();
    snapshot_id(&env);
    let o = env.run(RETRACE, &["restore", &first, "--json", "--", "out/x.txt"]);
    assert!(
        !outside.path().join("x.txt").exists(),
        "written outside the workspace: {}{}",
        stdout(&o),
        stderr(&o)
    );
}

#[test]
fn a_path_restore_of_a_file_that_is_now_a_directory_keeps_the_users_files() {
    let env = Env::new();
    env.write("p", "a file\n");
    let first = snapshot_id(&env);
    std::fs::remove_file(env.path("p")).unwrap();
    env.write("p/in.txt", "snapshotted\n");
    snapshot_id(&env);
    env.write("p/mine.txt", "unsnapshotted\n");
    let o = env.run(RETRACE, &["restore", &first, "--json", "--", "p"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("p/mine.txt"), "unsnapshotted\n");
    // Forced: a safety snapshot holds the user's file.
    let (code, v) = json(&env, &["restore", &first, "--force", "--json", "--", "p"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["safety_snapshot"].is_string(), "{v}");
}

#[test]
fn restore_of_an_empty_path_is_not_the_whole_workspace() {
    let env = Env::new();
    env.write("a.txt", "1\n");
    let first = snapshot_id(&env);
    env.write("a.txt", "2\n");
    env.write("b.txt", "b\n");
    snapshot_id(&env);
    // `-- "$UNSET"`: a usage error naming what to do, not a restore of everything.
    let o = env.run(RETRACE, &["restore", &first, "--json", "--", ""]);
    assert_eq!(env.read("b.txt"), "b\n", "{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains('.') || stdout(&o).contains('.'),
        "{}",
        stderr(&o)
    );
}

#[test]
fn reverting_a_revert_then_undo_brings_everything_back() {
    let env = Env::new();
    env.write("a.txt", "0\n");
    turn(&env, "first", || env.write("a.txt", "1\n"));
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("a.txt"), "0\n");
    let (code, v) = in_session(&env, &["revert", "turn:2"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("a.txt"), "1\n");
    let (code, v) = in_session(&env, &["undo"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("a.txt"), "0\n");
    let (code, v) = in_session(&env, &["undo"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("a.txt"), "1\n");
}

#[test]
fn a_revert_then_the_users_edit_then_undo_keeps_the_edit_or_refuses() {
    let env = Env::new();
    env.write("a.txt", "0\n");
    turn(&env, "first", || env.write("a.txt", "1\n"));
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 0, "{v}");
    env.write("a.txt", "my edit after the revert\n");
    let (code, v) = in_session(&env, &["undo"]);
    if code == 0 {
        assert!(v["safety_snapshot"].is_string(), "{v}");
    } else {
        assert_eq!(env.read("a.txt"), "my edit after the revert\n", "{v}");
    }
}

#[test]
fn reverting_a_turn_that_replaced_a_file_with_a_symlink() {
    let env = Env::new();
    env.write("t.txt", "target\n");
    env.write("f", "a file\n");
    turn(&env, "first", || {
        std::fs::remove_file(env.path("f")).unwrap();
        symlink("t.txt", env.path("f")).unwrap();
    });
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("f"), "a file\n");
    assert!(
        !std::fs::symlink_metadata(env.path("f"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(env.read("t.txt"), "target\n");
}

#[test]
fn a_revert_keeps_an_exec_bit_the_user_set() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("s.sh", "#!/bin/sh\n1\n2\n3\n4\n5\n6\n");
    turn(&env, "first", || {
        env.write("s.sh", "#!/bin/sh\n1\n2\n3\n4\n5\nSIX\n")
    });
    std::fs::set_permissions(env.path("s.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("s.sh"), "#!/bin/sh\n1\n2\n3\n4\n5\n6\n");
    let mode = std::fs::metadata(env.path("s.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0, "the user's exec bit was dropped: {v}");
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_revert_killed_midway_is_recovered_and_recorded_once() {
    let env = Env::new();
    for i in 0..12 {
        env.write(&format!("f{i:02}.txt"), format!("{i} before\n"));
    }
    turn(&env, "first", || {
        for i in 0..12 {
            env.write(&format!("f{i:02}.txt"), format!("{i} by the turn\n"));
        }
    });
    turn(&env, "second", || env.write("later.txt", "turn 2\n"));
    let o = env
        .command(RETRACE, &["--session", "s", "revert", "turn:1", "--json"])
        .env("RETRACE_FAULT_ABORT_AFTER_WRITES", "5")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the fault hook must abort the revert");
    // The next command finishes the revert.
    let (code, log) = in_session(&env, &["log"]);
    assert_eq!(code, 0, "{log}");
    for i in 0..12 {
        assert_eq!(env.read(&format!("f{i:02}.txt")), format!("{i} before\n"));
    }
    assert_eq!(env.read("later.txt"), "turn 2\n");
    let text = log.to_string();
    assert_eq!(
        text.matches("\"revert\"").count(),
        1,
        "one revert turn: {log}"
    );
    // Reverting again is refused as already reverted; undo brings the turn back.
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(code, 1, "{v}");
    let (code, v) = in_session(&env, &["undo"]);
    assert_eq!(code, 0, "{v}");
    for i in 0..12 {
        assert_eq!(
            env.read(&format!("f{i:02}.txt")),
            format!("{i} by the turn\n")
        );
    }
}

#[test]
fn a_revert_with_a_non_utf8_name_and_a_file_of_exactly_one_mib() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    let big: Vec<u8> = (0..1024 * 1024)
        .map(|i| b"abcdefghijklmno\n"[i % 16])
        .collect();
    env.write("big.txt", &big);
    turn(&env, "first", || {
        std::fs::write(env.root().join(odd), "by the turn\n").unwrap();
        let mut b = big.clone();
        b[0] = b'X';
        env.write("big.txt", &b);
    });
    // The user edits the far end of the big file: a merge at the size bound.
    let mut mine = big.clone();
    mine[0] = b'X';
    let n = mine.len();
    mine[n - 2] = b'Y';
    env.write("big.txt", &mine);
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    if code == 0 {
        let now = std::fs::read(env.path("big.txt")).unwrap();
        assert_eq!(now[n - 2], b'Y', "the user's edit was lost: {v}");
        assert_eq!(now[0], b'a', "{v}");
        assert!(!env.root().join(odd).exists(), "{v}");
    } else {
        assert_eq!(std::fs::read(env.path("big.txt")).unwrap(), mine, "{v}");
    }
}

#[test]
fn a_revert_leaves_alone_what_another_sessions_running_turn_is_changing() {
    let env = Env::new();
    env.write("a.txt", "0\n");
    env.write("b.txt", "0\n");
    turn(&env, "first", || {
        env.write("a.txt", "1\n");
        env.write("b.txt", "1\n");
    });
    let (code, v) = json(
        &env,
        &["--session", "o", "turn", "begin", "--prompt", "x", "--json"],
    );
    assert_eq!(code, 0, "{v}");
    env.write("a.txt", "1\nby the other session\n");
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_eq!(env.read("a.txt"), "1\nby the other session\n", "{code} {v}");
    if code == 0 {
        assert_eq!(env.read("b.txt"), "0\n", "{v}");
    }
}

#[test]
fn path_restores_refuse_dotdot_and_accept_overlapping_paths() {
    let env = Env::new();
    env.write("src/a.txt", "a1\n");
    env.write("src/b.txt", "b1\n");
    env.write("other.txt", "o1\n");
    let first = snapshot_id(&env);
    env.write("src/a.txt", "a2\n");
    env.write("src/b.txt", "b2\n");
    env.write("other.txt", "o2\n");
    snapshot_id(&env);
    let o = env.run(
        RETRACE,
        &["restore", &first, "--json", "--", "src/../other.txt"],
    );
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("other.txt"), "o2\n");
    let (code, v) = json(
        &env,
        &["restore", &first, "--json", "--", "src", "src/a.txt"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(env.read("src/a.txt"), "a1\n");
    assert_eq!(env.read("src/b.txt"), "b1\n");
    assert_eq!(env.read("other.txt"), "o2\n");
}

#[test]
fn a_revert_whose_before_version_is_damaged_writes_nothing() {
    use retrace::object::ObjectId;
    use retrace::store::Store;
    let env = Env::new();
    // Over 64 KiB, so the blob has a frame of its own.
    let original = "the before-version of big\n".repeat(4000);
    env.write("big.txt", &original);
    env.write("small.txt", "0\n");
    turn(&env, "first", || {
        env.write("big.txt", "by the turn\n");
        env.write("small.txt", "1\n");
    });
    let offset = {
        let store = Store::open_read_only(env.open().store_path()).unwrap();
        let id = ObjectId::of_blob(original.as_bytes());
        store.reader().unwrap().record(&id).unwrap().offset
    };
    crate::common::flip_byte(&env, offset);
    let (code, v) = in_session(&env, &["revert", "turn:1"]);
    assert_ne!(code, 0, "{v}");
    assert_eq!(env.read("big.txt"), "by the turn\n", "{v}");
    assert_eq!(env.read("small.txt"), "1\n", "nothing written: {v}");
}

#[test]
fn a_revert_survives_compaction_of_older_turns() {
    let env = Env::new();
    env.write(".retrace.toml", "max_turns = 3\n");
    env.write("a.txt", "0\n");
    env.write("b.txt", "0\n");
    turn(&env, "first", || env.write("a.txt", "1\n"));
    turn(&env, "second", || env.write("b.txt", "2\n"));
    let (code, v) = in_session(&env, &["revert", "turn:2"]);
    assert_eq!(code, 0, "{v}");
    turn(&env, "fourth", || env.write("c.txt", "4\n"));
    turn(&env, "fifth", || env.write("d.txt", "5\n"));
    let (code, log) = in_session(&env, &["log"]);
    assert_eq!(code, 0, "{log}");
    assert!(log.to_string().contains("\"revert\""), "{log}");
    assert_eq!(
        log["session"]["turns"], 3,
        "turns 1 and 2 are compacted: {log}"
    );
    for _ in 0..2 {
        let (code, v) = in_session(&env, &["undo"]);
        assert_eq!(code, 0, "{v}");
    }
    assert!(!env.path("c.txt").exists());
    assert_eq!(env.read("b.txt"), "0\n");
    let (code, v) = in_session(&env, &["undo"]);
    assert_eq!(code, 0, "the revert is undone: {v}");
    assert_eq!(env.read("b.txt"), "2\n");
    assert_eq!(env.read("a.txt"), "1\n");
}
