//! The session commands driven exactly as an adapter drives them: one `retrace` process per
//! step (begin, the agent's edits, end, undo, redo), JSON results and exit codes.

use crate::common::{self, Env, RETRACE, assert_verified, stderr, stdout};
use serde_json::Value;

fn json(env: &Env, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--session", "chat-42"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = env.run(RETRACE, &all);
    let code = o.status.code().unwrap_or(-1);
    let text = stdout(&o);
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "retrace {args:?} printed no JSON ({e}):\n{text}{}",
            stderr(&o)
        )
    });
    (v, code)
}

#[test]
fn an_adapter_session_through_the_cli() {
    let env = Env::new();
    env.write("src/lib.rs", "pub fn one() {}\n");
    env.write("README", "hello\n");

    // Turn 1: the agent adds a file and edits another.
    let (v, code) = json(
        &env,
        &["turn", "begin", "--anchor", "u1", "--prompt", "add two"],
    );
    assert_eq!(
        (code, v["before"].as_str(), v["turn"].as_u64()),
        (0, Some("ready"), Some(1))
    );
    env.write("src/two.rs", "pub fn two() {}\n");
    let o = env.run(
        RETRACE,
        &["--session", "chat-42", "turn", "round", "tool-1"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    env.write("src/lib.rs", "pub fn one() {}\nmod two;\n");
    let (v, code) = json(&env, &["turn", "end", "--anchor", "a1"]);
    assert_eq!(code, 0);
    assert_eq!(
        (v["added"].as_u64(), v["modified"].as_u64()),
        (Some(1), Some(1))
    );

    // A round anchor names its turn but no snapshot of its own.
    let (v, code) = json(&env, &["navigate", "tool-1"]);
    assert_eq!(code, 2, "a name that is no snapshot is a usage error");
    assert!(
        v["message"].as_str().unwrap().contains("inside turn 1"),
        "{v}"
    );

    // The user edits by hand; turn 2 starts from that baseline and deletes the README.
    env.write("NOTES", "mine\n");
    json(
        &env,
        &[
            "turn",
            "begin",
            "--anchor",
            "a1",
            "--prompt",
            "drop the readme",
        ],
    );
    std::fs::remove_file(env.path("README")).unwrap();
    json(&env, &["turn", "end", "--anchor", "a2"]);

    // `log --session` shows what each turn changed.
    let o = env.run(RETRACE, &["--session", "chat-42", "log"]);
    let text = stdout(&o);
    assert!(
        text.contains("turn:1") && text.contains("+1 ~1 -0"),
        "{text}"
    );
    assert!(
        text.contains("turn:2") && text.contains("+0 ~0 -1"),
        "{text}"
    );

    // Undo turn 2: the README comes back, the manual NOTES stay.
    let (v, code) = json(&env, &["undo"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["result"], "restored");
    assert_eq!(v["anchor"], "a1");
    assert_eq!(v["prompt"], "drop the readme");
    assert_eq!(v["files_written"], serde_json::json!(["README"]));
    assert!(v["message"].as_str().unwrap().contains("restored"));
    assert_eq!(env.read("README"), "hello\n");
    assert_eq!(env.read("NOTES"), "mine\n");

    // Undo turn 1 in another process: state came from the store, not from memory.
    let (v, _) = json(&env, &["undo"]);
    assert_eq!(
        (v["result"].as_str(), v["anchor"].as_str()),
        (Some("restored"), Some("u1"))
    );
    assert!(!env.path("src/two.rs").exists());
    assert_eq!(env.read("src/lib.rs"), "pub fn one() {}\n");
    let (v, code) = json(&env, &["undo"]);
    assert_eq!((v["result"].as_str(), code), (Some("nothing_to_undo"), 1));

    let (v, _) = json(&env, &["status"]);
    assert_eq!(
        (
            v["session"]["can_undo"].as_bool(),
            v["session"]["can_redo"].as_bool()
        ),
        (Some(false), Some(true))
    );

    // Redo both, in order, each in its own process.
    let (v, code) = json(&env, &["redo"]);
    assert_eq!(
        (code, v["turn"].as_u64(), v["anchor"].as_str()),
        (0, Some(1), Some("a1"))
    );
    assert!(env.path("src/two.rs").exists());
    json(&env, &["redo"]);
    assert!(!env.path("README").exists());
    let (v, code) = json(&env, &["redo"]);
    assert_eq!((v["result"].as_str(), code), (Some("nothing_to_redo"), 1));

    // A path edited after the turn: conflict, exit 1, nothing written; --force overrides.
    env.write("README", "recreated by hand\n");
    let (v, code) = json(&env, &["undo", "--mode", "files"]);
    assert_eq!((v["result"].as_str(), code), (Some("conflict"), 1));
    assert!(env.path("NOTES").exists());
    let (v, code) = json(&env, &["undo", "--mode", "files", "--force"]);
    assert_eq!((v["result"].as_str(), code), (Some("restored"), 0));
    assert!(v["safety_snapshot"].is_string());
    assert_eq!(
        v["anchor"],
        Value::Null,
        "files mode leaves the conversation alone"
    );
    assert_eq!(env.read("README"), "hello\n");

    // Checkpoint and navigate by label.
    let (v, code) = json(&env, &["checkpoint", "by hand"]);
    assert_eq!(
        (v["result"].as_str(), v["number"].as_u64(), code),
        (Some("checkpointed"), Some(1), 0)
    );
    let (v, code) = json(&env, &["navigate", "turn:1:before"]);
    assert_eq!((v["result"].as_str(), code), (Some("restored"), 0), "{v}");
    assert!(!env.path("src/two.rs").exists());
    json(&env, &["navigate", "by hand"]);
    assert!(env.path("README").exists());
    let o = env.run(RETRACE, &["--session", "chat-42", "navigate", "nowhere"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown anchor is a usage error"
    );
    assert!(stderr(&o).contains("nowhere"), "{}", stderr(&o));
    let (v, code) = json(&env, &["navigate", "nowhere"]);
    assert_eq!(
        (v["result"].as_str(), v["ok"].as_bool(), code),
        (Some("usage"), Some(false), 2)
    );
    assert!(v["message"].as_str().unwrap().contains("nowhere"));

    // While a turn is in progress another process's undo answers busy (exit 2).
    json(&env, &["turn", "begin", "--prompt", "work"]);
    env.write("wip", "agent is writing");
    let (v, code) = json(&env, &["undo"]);
    assert_eq!((v["result"].as_str(), code), (Some("busy"), 2));
    assert!(env.path("wip").exists());
    json(&env, &["turn", "end"]);
    let (v, code) = json(&env, &["turn", "end"]);
    assert_eq!((v["result"].as_str(), code), (Some("no_pending_turn"), 1));

    // Sessions are isolated: another session has nothing to undo.
    let o = env.run(RETRACE, &["--session", "other", "turn", "begin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = env.run(RETRACE, &["--session", "other", "turn", "end"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = env.run(RETRACE, &["--session", "other", "undo", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["result"], "restored", "{v}");
    let o = env.run(RETRACE, &["--session", "other", "undo", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["result"], "nothing_to_undo");
    // A session no turn began is a usage error naming the sessions there.
    let o = env.run(RETRACE, &["--session", "nobody", "undo", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["result"].as_str(), o.status.code()),
        (Some("usage"), Some(2))
    );
    assert!(v["message"].as_str().unwrap().contains("other"), "{v}");
    assert_verified(&env);

    // retrace-dump shows the session by key, and its turns by the host's id.
    let o = env.run(common::RETRACE_DUMP, &["sessions", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let ours = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["turns"] == 3)
        .expect("the chat-42 session");
    assert_eq!(ours["pending"], Value::Null);
    let o = env.run(common::RETRACE_DUMP, &["turns", "chat-42", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["session"], ours["session"]);
    assert_eq!(v["turns"][1]["prompt"], "drop the readme");
    assert_eq!(v["checkpoints"][0]["label"], "by hand");

    // Everything retrace keeps is private to its owner, whatever the umask.
    let store =
        retrace::Workspace::locate_store(env.root(), &retrace::Config::with_home(env.home.path()))
            .unwrap();
    let dir = store.parent().unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs_mode(dir), 0o700);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(
            m.permissions().mode() & 0o777,
            want,
            "{}",
            e.path().display()
        );
    }
}

fn fs_mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn bad_modes_are_refused_by_the_parser() {
    let env = Env::new();
    let o = env.run(RETRACE, &["undo", "--mode", "everything"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: both, files, conversation]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn two_undo_processes_at_once_undo_two_different_turns() {
    let env = Env::new();
    env.write("base", "0");
    for i in 1..=2 {
        json(&env, &["turn", "begin", "--prompt", &format!("p{i}")]);
        env.write(&format!("file{i}"), "agent");
        json(&env, &["turn", "end"]);
    }
    let spawn = || {
        env.command(RETRACE, &["--session", "chat-42", "undo", "--json"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let mut turns: Vec<u64> = [a, b]
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
            assert_eq!(v["result"], "restored", "{v}");
            v["turn"].as_u64().unwrap()
        })
        .collect();
    turns.sort_unstable();
    assert_eq!(turns, [1, 2], "each turn undone exactly once");
    assert!(!env.path("file1").exists() && !env.path("file2").exists());
    assert_eq!(env.read("base"), "0");
    let (v, _) = json(&env, &["status"]);
    assert_eq!(v["session"]["cursor"], Value::Null, "{v}");
    assert_eq!(
        v["session"]["redo_turn"],
        serde_json::json!([1, "both"]),
        "{v}"
    );
    assert_verified(&env);
}

/// `retrace --session S ARGS...`.
fn in_session(env: &Env, session: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--session", session];
    all.extend_from_slice(args);
    env.run(RETRACE, &all)
}

/// The output of a command that must succeed.
fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    stdout(&o) + &stderr(&o)
}

/// Session A's undo and navigation never touch what session B's turn, still running under a
/// live owner, has changed so far; B's turn then ends with its own change.
#[test]
fn an_undo_never_touches_another_sessions_running_turn() {
    let env = Env::new();
    env.write("shared.txt", "base\n");
    let owner = common::LiveOwner::start();
    let pid = owner.pid();
    let run = |session: &str, args: &[&str]| in_session(&env, session, args);
    ok(run("A", &["turn", "begin", "--prompt", "a"]));
    ok(run(
        "B",
        &["turn", "begin", "--prompt", "b", "--owner-pid", &pid],
    ));
    env.write("a.txt", "by agent A\n");
    env.write("b.txt", "by agent B\n");
    env.write("shared.txt", "base\nB's line\n");
    ok(run("A", &["turn", "end"]));
    // Whole-workspace snapshots cannot tell who wrote `a.txt` while B's turn ran: every
    // path is B's, so nothing is restored (exit 1) and A's turn stays the one to undo.
    let o = run("A", &["undo"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let said = stdout(&o) + &stderr(&o);
    assert_eq!(env.read("b.txt"), "by agent B\n", "{said}");
    assert_eq!(env.read("shared.txt"), "base\nB's line\n", "{said}");
    assert!(said.contains("still running"), "{said}");
    // A navigation in A that would change them is a conflict; nothing is written.
    let o = run("A", &["navigate", "turn:1:before"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(env.path("b.txt").exists());
    assert_eq!(env.read("shared.txt"), "base\nB's line\n");
    // B's turn ends with its change intact.
    ok(run("B", &["turn", "end"]));
    let log = ok(run("B", &["log"]));
    assert!(!log.contains("+0 ~0 -0"), "{log}");
    assert!(log.contains("~1"), "{log}");
    drop(owner);
}

#[test]
fn an_undo_that_can_restore_none_of_its_files_says_so_and_leaves_the_cursor() {
    let env = Env::new();
    env.write("shared.txt", "base\n");
    let owner = common::LiveOwner::start();
    let pid = owner.pid();
    let run = |session: &str, args: &[&str]| in_session(&env, session, args);
    ok(run(
        "A",
        &["turn", "begin", "--prompt", "a", "--anchor", "m1"],
    ));
    ok(run(
        "B",
        &["turn", "begin", "--prompt", "b", "--owner-pid", &pid],
    ));
    // Only B's agent writes while both turns run: every path of A's turn is B's.
    env.write("b.txt", "by agent B\n");
    env.write("shared.txt", "base\nB's line\n");
    ok(run("A", &["turn", "end"]));
    for _ in 0..2 {
        let o = run("A", &["undo", "--json"]);
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["result"], "nothing_restored", "{v}");
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(v["count"], 2, "{v}");
        assert!(v.get("anchor").is_none(), "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("still running"),
            "{v}"
        );
        assert_eq!(env.read("b.txt"), "by agent B\n");
        assert_eq!(env.read("shared.txt"), "base\nB's line\n");
        // The cursor did not move: turn 1 is still the one to undo, nothing to redo.
        let s: serde_json::Value =
            serde_json::from_str(&stdout(&run("A", &["status", "--json"]))).unwrap();
        assert_eq!(s["session"]["can_undo"], true, "{s}");
        assert_eq!(s["session"]["can_redo"], false, "{s}");
    }
    // Once B's turn ended it still ran at the same time: the paths stay B's.
    ok(run("B", &["turn", "end"]));
    let o = run("A", &["undo", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("nothing_restored"), "{}", stdout(&o));
    // A conversation-only undo moves the conversation, and leaves the files.
    let said = ok(run("A", &["undo", "--mode", "conversation"]));
    assert!(said.contains("m1"), "{said}");
    assert_eq!(env.read("b.txt"), "by agent B\n");
    drop(owner);
}

/// An empty `RETRACE_SESSION=` means unset: `status` shows the workspace, as without it,
/// not a session whose id is the empty string.
#[test]
fn an_empty_retrace_session_means_unset() {
    let env = Env::new();
    env.write("a.txt", "one");
    ok(env.run(RETRACE, &["snapshot"]));
    let with_empty = ok(env
        .command(RETRACE, &["status"])
        .env("RETRACE_SESSION", "")
        .output()
        .unwrap());
    let without = ok(env
        .command(RETRACE, &["status"])
        .env_remove("RETRACE_SESSION")
        .output()
        .unwrap());
    assert!(with_empty.starts_with("workspace "), "{with_empty}");
    assert!(!with_empty.contains("session "), "{with_empty}");
    assert_eq!(
        with_empty.lines().next(),
        without.lines().next(),
        "{with_empty}\n{without}"
    );
}

/// `undo --dry-run` and `redo --dry-run` say what the files would become, in the shape of
/// `revert --dry-run`, and write nothing: not the files, not the session's cursor.
#[test]
fn undo_and_redo_dry_runs_list_what_they_would_do_and_write_nothing() {
    let env = Env::new();
    env.write("keep.txt", "keep\n");
    env.write("edit.txt", "v1\n");
    let owner = common::LiveOwner::start();
    ok(in_session(
        &env,
        "s",
        &["turn", "begin", "--owner-pid", &owner.pid()],
    ));
    env.write("edit.txt", "v2\n");
    env.write("new.txt", "new\n");
    ok(in_session(&env, "s", &["turn", "end"]));
    let before = common::tree_of(env.root());

    let out = ok(in_session(&env, "s", &["undo", "--dry-run"]));
    assert!(out.contains("would write edit.txt"), "{out}");
    assert!(out.contains("would delete new.txt"), "{out}");
    assert!(
        out.contains("dry run of undo of turn 1: 1 to write (0 merged), 1 to delete"),
        "{out}"
    );
    let o = in_session(&env, "s", &["undo", "--dry-run", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["would_write"], serde_json::json!(["edit.txt"]), "{v}");
    assert_eq!(v["would_delete"], serde_json::json!(["new.txt"]), "{v}");
    assert_eq!(common::tree_of(env.root()), before);

    // An edit since: the dry run names the conflict and exits 1, as the undo would.
    env.write("edit.txt", "v3 by hand\n");
    let o = in_session(&env, "s", &["undo", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("conflict edit.txt"), "{}", stdout(&o));
    env.write("edit.txt", "v2\n");

    // Nothing undone yet: nothing to redo.
    let o = in_session(&env, "s", &["redo", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    ok(in_session(&env, "s", &["undo"]));
    let undone = common::tree_of(env.root());
    let out = ok(in_session(&env, "s", &["redo", "--dry-run"]));
    assert!(
        out.contains("would write edit.txt") && out.contains("would write new.txt"),
        "{out}"
    );
    assert_eq!(common::tree_of(env.root()), undone);
    // The cursor did not move: the redo still redoes turn 1.
    ok(in_session(&env, "s", &["redo"]));
    assert_eq!(env.read("new.txt"), "new\n");
    assert!(
        in_session(&env, "s", &["undo", "--dry-run", "--mode", "files"])
            .status
            .code()
            == Some(2)
    );
}

/// `navigate --dry-run` says what the files would become, in the shape of the other dry
/// runs, refuses as the navigation would over unsaved work, and writes nothing.
#[test]
fn a_navigate_dry_run_lists_what_it_would_do_and_writes_nothing() {
    let env = Env::new();
    env.write("edit.txt", "v1\n");
    let owner = common::LiveOwner::start();
    ok(in_session(
        &env,
        "s",
        &["turn", "begin", "--owner-pid", &owner.pid()],
    ));
    env.write("edit.txt", "v2\n");
    env.write("new.txt", "new\n");
    ok(in_session(&env, "s", &["turn", "end"]));
    let before = common::tree_of(env.root());

    let out = ok(in_session(
        &env,
        "s",
        &["navigate", "turn:1:before", "--dry-run"],
    ));
    assert!(out.contains("would write edit.txt"), "{out}");
    assert!(out.contains("would delete new.txt"), "{out}");
    assert!(
        out.contains("dry run of navigation to turn:1:before: 1 to write (0 merged), 1 to delete"),
        "{out}"
    );
    let o = in_session(
        &env,
        "s",
        &["navigate", "turn:1:before", "--dry-run", "--json"],
    );
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["would_write"], serde_json::json!(["edit.txt"]), "{v}");
    assert_eq!(v["would_delete"], serde_json::json!(["new.txt"]), "{v}");
    assert_eq!(common::tree_of(env.root()), before);

    // Unsaved work: refused (exit 1) as the navigation would be, with the real count;
    // forced, the plan alone.
    env.write("hand.txt", "mine\n");
    let o = in_session(&env, "s", &["navigate", "turn:1:before", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("hand.txt"), "{}", stdout(&o));
    let out = ok(in_session(
        &env,
        "s",
        &["navigate", "turn:1:before", "--dry-run", "--force"],
    ));
    assert!(out.contains("would delete hand.txt"), "{out}");
    std::fs::remove_file(env.path("hand.txt")).unwrap();
    // The cursor did not move: an undo still undoes turn 1.
    let out = ok(in_session(&env, "s", &["undo"]));
    assert!(out.contains("turn 1"), "{out}");
    assert_eq!(env.read("edit.txt"), "v1\n");
}
