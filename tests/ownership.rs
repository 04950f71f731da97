//! Many writers in one checkout (issue 38): every tool call a step, a ledger of who last
//! wrote each path, one ownership rule. Each fault the issue found has its test here, with
//! the real binary and sessions whose turns overlap in time.

use serde_json::Value;

use crate::common::{Env, LiveOwner, RETRACE, stderr, stdout};
use retrace::{Mode, NoProgress, OpOptions, Outcome};

/// `retrace --session S ARGS...`, which must succeed; its output.
fn ok(env: &Env, session: &str, args: &[&str]) -> String {
    let o = run(env, session, args);
    assert!(
        o.status.success(),
        "{session} {args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o) + &stderr(&o)
}

fn run(env: &Env, session: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--session", session];
    all.extend_from_slice(args);
    env.run(RETRACE, &all)
}

/// An edit tool's call: a step naming `file`, which `write` writes.
fn edit(env: &Env, session: &str, file: &str, write: impl FnOnce()) {
    ok(
        env,
        session,
        &["step", "begin", "--tool", "Write", "--file", file],
    );
    write();
    ok(env, session, &["step", "end"]);
}

/// A shell tool's call: a step with `command` as its summary, which `run` stands for.
fn shell(env: &Env, session: &str, command: &str, run: impl FnOnce()) {
    ok(
        env,
        session,
        &["step", "begin", "--tool", "Bash", "--summary", command],
    );
    run();
    ok(env, session, &["step", "end"]);
}

fn append(env: &Env, file: &str, line: &str) {
    let mut text = std::fs::read_to_string(env.path(file)).unwrap_or_default();
    text.push_str(line);
    env.write(file, text);
}

/// Fault 1: B's revert of its turn takes back nothing of A's concurrent work (A's file, A's
/// line in a shared file), and does take back B's own file.
#[test]
fn a_revert_never_takes_back_another_sessions_concurrent_work() {
    let env = Env::new();
    env.write("shared.txt", "base\n");
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &pid]);
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    edit(&env, "A", "a.txt", || env.write("a.txt", "by A\n"));
    edit(&env, "B", "b.txt", || env.write("b.txt", "by B\n"));
    edit(&env, "A", "shared.txt", || {
        append(&env, "shared.txt", "A's line\n")
    });
    ok(&env, "A", &["turn", "end"]);
    ok(&env, "B", &["turn", "end"]);
    let said = ok(&env, "B", &["revert", "turn:1", "--json"]);
    assert_eq!(env.read("a.txt"), "by A\n", "{said}");
    assert_eq!(env.read("shared.txt"), "base\nA's line\n", "{said}");
    assert!(!env.path("b.txt").exists(), "{said}");
    assert!(
        said.contains("written during the turn by session A, turn 1 step"),
        "{said}"
    );
    // A's undo, in turn, takes back exactly A's work.
    let said = ok(&env, "A", &["undo"]);
    assert!(!env.path("a.txt").exists(), "{said}");
    assert_eq!(env.read("shared.txt"), "base\n", "{said}");
    drop(owner);
}

/// Without steps (an agent whose adapter reports none), changes made while both turns ran
/// cannot be told apart: they are left alone by both and named as ambiguous.
#[test]
fn without_steps_overlapping_turns_leave_each_others_paths_alone_and_say_why() {
    let env = Env::new();
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &pid]);
    env.write("early.txt", "by A before B began\n");
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    env.write("a.txt", "by A\n");
    ok(&env, "A", &["turn", "end"]);
    ok(&env, "B", &["turn", "end"]);
    let o = run(&env, "B", &["revert", "turn:1", "--json"]);
    let said = stdout(&o) + &stderr(&o);
    assert_eq!(env.read("a.txt"), "by A\n", "{said}");
    assert!(said.contains("several sessions at once"), "{said}");
    // What A wrote before B's turn began is A's alone.
    let said = ok(&env, "A", &["undo"]);
    assert!(!env.path("early.txt").exists(), "{said}");
    assert_eq!(env.read("a.txt"), "by A\n", "{said}");
    drop(owner);
}

/// Fault 2: the model's own undo inside its running turn (MCP) is not taken back by another
/// session's undo; that undo takes back its own file.
#[test]
fn an_undo_inside_a_running_turn_is_not_taken_back_by_another_sessions_undo() {
    let env = Env::new();
    env.write("notes.txt", "notes\n");
    env.write("conf.txt", "conf v1\n");
    let ws = env.open();
    let (d, b) = (ws.session("D"), ws.session("B"));
    let td = d.begin_turn(None, Some("d".into())).unwrap();
    td.wait_before(std::time::Duration::from_secs(60)).unwrap();
    std::fs::remove_file(env.path("notes.txt")).unwrap();
    env.write("conf.txt", "conf v2 by D\n");
    let tb = b.begin_turn(None, Some("b".into())).unwrap();
    tb.wait_before(std::time::Duration::from_secs(60)).unwrap();
    b.begin_step("1", "Write", "b.txt", &["b.txt".into()])
        .unwrap();
    env.write("b.txt", "by B\n");
    b.end_step("1").unwrap();
    let opts = OpOptions {
        force: false,
        progress: &NoProgress,
    };
    let o = d.undo_running_turn(Mode::Files, opts).unwrap();
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    assert_eq!(env.read("notes.txt"), "notes\n");
    assert_eq!(env.read("conf.txt"), "conf v1\n");
    td.end(None).unwrap();
    tb.end(None).unwrap();
    let o = b.undo(Mode::Both).unwrap();
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    assert!(!env.path("b.txt").exists(), "{o:?}");
    assert_eq!(env.read("notes.txt"), "notes\n", "{o:?}");
    assert_eq!(env.read("conf.txt"), "conf v1\n", "{o:?}");
}

/// Fault 4: a user's `restore ID -- PATH` made during B's turn is not taken back by B's
/// undo, which takes back B's own file.
#[test]
fn a_users_restore_during_a_turn_is_not_taken_back_by_its_undo() {
    let env = Env::new();
    env.write("page.txt", "v1\n");
    let first = ok(&env, "B", &["snapshot", "--json"]);
    let id = serde_json::from_str::<Value>(first.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.write("page.txt", "v2\n");
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    env.write("b.txt", "by B\n");
    // The user, in a terminal, while B's turn runs.
    let o = env.run(RETRACE, &["restore", &id, "--force", "--", "page.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("page.txt"), "v1\n");
    ok(&env, "B", &["turn", "end"]);
    let said = ok(&env, "B", &["undo"]);
    assert_eq!(env.read("page.txt"), "v1\n", "{said}");
    assert!(!env.path("b.txt").exists(), "{said}");
    assert!(said.contains("by the user"), "{said}");
    drop(owner);
}

/// A user's edit saved while a turn runs, then destroyed by the agent's shell command, is
/// in the snapshot taken before that command, and comes back byte for byte.
#[test]
fn an_edit_saved_mid_turn_and_destroyed_by_a_shell_command_can_be_brought_back() {
    let env = Env::new();
    env.write("notes.txt", "old notes\n");
    ok(&env, "A", &["turn", "begin"]);
    // The user saves in the editor while the agent works.
    env.write("notes.txt", "the user's precious edit\n");
    let begun = ok(
        &env,
        "A",
        &[
            "step",
            "begin",
            "--tool",
            "Bash",
            "--summary",
            "echo generated > notes.txt",
            "--json",
        ],
    );
    env.write("notes.txt", "generated\n");
    ok(&env, "A", &["step", "end"]);
    ok(&env, "A", &["turn", "end"]);
    let step: Value = serde_json::from_str(begun.lines().next().unwrap()).unwrap();
    let id = step["snapshot"]
        .as_str()
        .expect("a snapshot before the command");
    let log = ok(&env, "A", &["log", "--snapshots", "--json"]);
    assert!(log.contains(id), "{log}");
    ok(&env, "A", &["restore", id, "--force", "--", "notes.txt"]);
    assert_eq!(env.read("notes.txt"), "the user's precious edit\n");
}

/// Twelve sessions in one checkout, turns all overlapping, each writing its own file with an
/// edit tool: each undo takes back exactly its own file.
#[test]
fn twelve_parallel_sessions_each_undo_exactly_their_own_file() {
    let env = Env::new();
    let owner = LiveOwner::start();
    let pid = owner.pid();
    let names: Vec<String> = (0..12).map(|i| format!("s{i:02}")).collect();
    for s in &names {
        ok(&env, s, &["turn", "begin", "--owner-pid", &pid]);
    }
    for s in &names {
        let file = format!("{s}.txt");
        edit(&env, s, &file, || env.write(&file, format!("by {s}\n")));
    }
    for s in &names {
        ok(&env, s, &["turn", "end"]);
    }
    for (i, s) in names.iter().enumerate() {
        let said = ok(&env, s, &["undo"]);
        assert!(!env.path(&format!("{s}.txt")).exists(), "{said}");
        for other in &names[i + 1..] {
            assert!(env.path(&format!("{other}.txt")).exists(), "{s}: {said}");
        }
    }
    drop(owner);
}

/// The id in a `snapshot --json` answer.
fn snapshot_id(env: &Env) -> String {
    let said = ok(env, "U", &["snapshot", "--json"]);
    serde_json::from_str::<Value>(said.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Fault 3: a restore (whole or `-- PATH`, the TUI's `p` alike) never overwrites what
/// another session's running turn has changed so far, even once a checkpoint holds the disk
/// as it is: it refuses, names the turn and the way out, and `--force` goes through. With a
/// session, a restore also leaves what another session wrote last to that session.
#[test]
fn a_restore_never_overwrites_a_running_turn_of_another_session_unless_forced() {
    let env = Env::new();
    env.write("f.txt", "f v1\n");
    env.write("other.txt", "other v1\n");
    let old = snapshot_id(&env);
    env.write("other.txt", "other v2\n");
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    edit(&env, "B", "f.txt", || env.write("f.txt", "f by B\n"));
    edit(&env, "B", "b.txt", || env.write("b.txt", "by B\n"));
    // The checkpoint the dirty refusal advises: the disk is now in a snapshot.
    ok(&env, "U", &["checkpoint", "before restoring"]);
    for args in [vec!["restore", &old], vec!["restore", &old, "--", "f.txt"]] {
        let o = env.run(RETRACE, &args);
        let said = stdout(&o) + &stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains("turn 1 of session B, which is still running"),
            "{said}"
        );
        assert!(said.contains("--force"), "{said}");
        assert_eq!(env.read("f.txt"), "f by B\n", "{args:?}: {said}");
        assert_eq!(env.read("b.txt"), "by B\n", "{args:?}: {said}");
        assert_eq!(env.read("other.txt"), "other v2\n", "{args:?}: {said}");
    }
    // The library's restore (what the TUI's `p` runs) refuses alike.
    let ws = env.open();
    let id = ws.resolve(&old).unwrap();
    let e = ws
        .restore_paths(&id, &["b.txt".into()], Default::default(), &NoProgress)
        .unwrap_err();
    assert!(matches!(&e, retrace::RestoreError::Held { .. }), "{e}");
    assert_eq!(env.read("b.txt"), "by B\n");
    // The dry run says it would be refused, and why.
    let o = env.run(RETRACE, &["restore", &old, "--dry-run", "--json"]);
    let plan: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(plan["refused"]["result"], "held", "{plan}");
    // What the running turn did not touch is the user's to restore.
    let o = env.run(RETRACE, &["restore", &old, "--", "other.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("other.txt"), "other v1\n");
    // Forced, it goes through; the turn's work stays in the checkpoint.
    let o = env.run(RETRACE, &["restore", &old, "--force", "--", "f.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("f.txt"), "f v1\n");
    ok(&env, "B", &["turn", "end"]);
    // Session A, another agent's conversation here.
    ok(&env, "A", &["turn", "begin", "--owner-pid", &pid]);
    ok(&env, "A", &["turn", "end"]);
    // B's turn has ended: b.txt is the user's to restore, but not session A's.
    let o = run(&env, "A", &["restore", &old, "--", "b.txt"]);
    let said = stdout(&o) + &stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(said.contains("last written by session B"), "{said}");
    assert_eq!(env.read("b.txt"), "by B\n");
    let o = env.run(RETRACE, &["restore", &old, "--", "b.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!env.path("b.txt").exists());
    drop(owner);
}

/// A navigation rewinds the whole workspace by design: it names the paths other writers
/// wrote last that it rewinds (another session's file, the user's edit), and not its own.
#[test]
fn a_navigation_names_the_other_writers_paths_it_rewinds() {
    let env = Env::new();
    ok(&env, "A", &["turn", "begin"]);
    edit(&env, "A", "a.txt", || env.write("a.txt", "by A\n"));
    ok(&env, "A", &["turn", "end"]);
    ok(&env, "B", &["turn", "begin"]);
    edit(&env, "B", "b.txt", || env.write("b.txt", "by B\n"));
    ok(&env, "B", &["turn", "end"]);
    env.write("u.txt", "the user's\n");
    ok(&env, "U", &["snapshot"]);
    let said = ok(&env, "A", &["navigate", "turn:1:before", "--mode", "files"]);
    assert!(!env.path("a.txt").exists(), "{said}");
    assert!(!env.path("b.txt").exists(), "{said}");
    assert!(
        said.contains("rewound b.txt: last written by session B"),
        "{said}"
    );
    assert!(
        said.contains("rewound u.txt: last written by the user"),
        "{said}"
    );
    assert!(!said.contains("rewound a.txt"), "{said}");
    let j = ok(
        &env,
        "A",
        &["navigate", "turn:1", "--mode", "files", "--json"],
    );
    let o: Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    // Back at A's turn: a.txt is A's own; nothing of another writer changes.
    assert_eq!(o["result"], "restored", "{o}");
    assert!(o.get("rewound").is_none(), "{o}");
}

/// Two sessions append to one file in turns that overlap in time, their tool calls apart:
/// each undo takes out exactly its own line (a three-way merge keeps the other's), and a
/// redo puts it back.
#[test]
fn two_sessions_appending_to_one_file_each_undo_exactly_their_own_lines() {
    let env = Env::new();
    env.write("log.txt", "base\n");
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &pid]);
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    edit(&env, "A", "log.txt", || {
        append(&env, "log.txt", "A's line\n")
    });
    edit(&env, "B", "log.txt", || {
        append(&env, "log.txt", "B's line\n")
    });
    ok(&env, "A", &["turn", "end"]);
    ok(&env, "B", &["turn", "end"]);
    let said = ok(&env, "A", &["undo", "--mode", "files"]);
    assert_eq!(env.read("log.txt"), "base\nB's line\n", "{said}");
    assert!(said.contains("1 merged"), "{said}");
    let said = ok(&env, "B", &["undo", "--mode", "files"]);
    assert_eq!(env.read("log.txt"), "base\n", "{said}");
    let said = ok(&env, "A", &["redo"]);
    assert_eq!(env.read("log.txt"), "base\nA's line\n", "{said}");
    let said = ok(&env, "B", &["redo"]);
    assert_eq!(env.read("log.txt"), "base\nA's line\nB's line\n", "{said}");
    drop(owner);
}

/// `log --steps` lists a turn's steps (tool, input, what changed); a captured shell step's
/// snapshots are named `turn:N.K:before` and `turn:N.K`, so `diff` shows what the command
/// did and `restore` brings back what it destroyed.
#[test]
fn a_turns_steps_are_listed_and_named_by_diff_and_restore() {
    let env = an_edit_step_then_a_shell_step();
    let said = ok(&env, "A", &["log", "--steps"]);
    assert!(said.contains("turn:1.1  Write  ~ a.txt"), "{said}");
    assert!(
        said.contains("turn:1.2  Bash  +0 ~0 -1  rm notes.txt"),
        "{said}"
    );
    let j = ok(&env, "A", &["log", "--steps", "--json"]);
    let log: Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    let steps = &log["entries"][0]["steps"];
    assert_eq!(steps[0]["tool"], "Write", "{log}");
    assert_eq!(steps[1]["counts"], serde_json::json!([0, 0, 1]), "{log}");
    assert!(steps[1]["before"].is_string(), "{log}");
    let said = ok(&env, "A", &["diff", "turn:1.2", "--name-status"]);
    assert!(said.contains("notes.txt"), "{said}");
    assert!(!said.contains("a.txt"), "{said}");
    ok(
        &env,
        "A",
        &["restore", "turn:1.2:before", "--", "notes.txt"],
    );
    assert_eq!(env.read("notes.txt"), "old notes\n");
    // An edit step names its files instead of taking snapshots: the name says so.
    let o = run(&env, "A", &["restore", "turn:1.1:before", "--", "a.txt"]);
    let said = stdout(&o) + &stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("an edit step names its files"), "{said}");
}

/// `blame` names the step that wrote a line: an edit step (its version of the file kept by
/// the ledger) and a captured shell step, each with its tool and input.
#[test]
fn blame_names_the_step_that_wrote_each_line() {
    let env = Env::new();
    env.write("a.txt", "base\n");
    ok(&env, "A", &["snapshot"]);
    ok(&env, "A", &["turn", "begin", "--prompt", "grow a.txt"]);
    edit(&env, "A", "a.txt", || {
        append(&env, "a.txt", "by the edit tool\n")
    });
    shell(&env, "A", "sed -i 's/x/y/' a.txt", || {
        append(&env, "a.txt", "by the shell\n")
    });
    ok(&env, "A", &["turn", "end"]);
    let said = ok(&env, "A", &["blame", "a.txt"]);
    let line = |text: &str| {
        said.lines()
            .find(|l| l.ends_with(text))
            .unwrap_or_else(|| panic!("{text}: {said}"))
            .to_string()
    };
    assert!(line("| base").contains("before retrace"), "{said}");
    assert!(
        line("| by the edit tool").contains("turn 1 step 1 (A)"),
        "{said}"
    );
    assert!(
        line("| by the edit tool").contains("Write: a.txt"),
        "{said}"
    );
    assert!(
        line("| by the shell").contains("turn 1 step 2 (A)"),
        "{said}"
    );
    assert!(line("| by the shell").contains("Bash: sed -i"), "{said}");
    let j = ok(&env, "A", &["blame", "a.txt", "--json"]);
    let b: Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    assert_eq!(b["ranges"][1]["origin"]["step"], 1, "{b}");
    assert_eq!(b["ranges"][2]["origin"]["step"], 2, "{b}");
}

/// `show turn:N.K` shows one step: its tool and input, and the paths it changed.
#[test]
fn show_of_a_step_lists_what_that_step_changed() {
    let env = an_edit_step_then_a_shell_step();
    let said = ok(&env, "A", &["show", "turn:1.2"]);
    assert!(said.contains("step     2: Bash rm notes.txt"), "{said}");
    assert!(said.contains("D notes.txt"), "{said}");
    assert!(!said.contains("a.txt"), "{said}");
    let said = ok(&env, "A", &["show", "turn:1.1"]);
    assert!(said.contains("a.txt"), "{said}");
    let o = run(&env, "A", &["show", "turn:1.9"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Session A's turn 1: step 1 writes a.txt with an edit tool, step 2 (`rm notes.txt`, a
/// command that can destroy, so captured around) deletes notes.txt.
fn an_edit_step_then_a_shell_step() -> Env {
    let env = Env::new();
    env.write("notes.txt", "old notes\n");
    ok(&env, "A", &["turn", "begin"]);
    edit(&env, "A", "a.txt", || env.write("a.txt", "by A\n"));
    shell(&env, "A", "rm notes.txt", || {
        std::fs::remove_file(env.path("notes.txt")).unwrap()
    });
    ok(&env, "A", &["turn", "end"]);
    env
}

/// `revert turn:N.K` takes back one tool call of a turn and keeps the rest: an edit step's
/// new file (from the versions the ledger kept), then a shell step's deletion (from its
/// captures), while another session appends to a file the turn also wrote; a shell step
/// without captures is refused, naming the way out.
#[test]
fn a_revert_of_one_step_takes_back_that_tool_call_alone() {
    let env = Env::new();
    env.write("notes.txt", "keep me\n");
    env.write("shared.txt", "base\n");
    let owner = LiveOwner::start();
    let pid = owner.pid();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &pid]);
    edit(&env, "A", "a.txt", || env.write("a.txt", "by A\n"));
    edit(&env, "A", "shared.txt", || {
        append(&env, "shared.txt", "A's line\n")
    });
    shell(&env, "A", "rm notes.txt", || {
        std::fs::remove_file(env.path("notes.txt")).unwrap()
    });
    shell(&env, "A", "cargo fmt", || {
        env.write("fmt.txt", "formatted\n")
    });
    ok(&env, "A", &["turn", "end"]);
    // Another session appends to the shared file afterwards.
    ok(&env, "B", &["turn", "begin", "--owner-pid", &pid]);
    edit(&env, "B", "shared.txt", || {
        append(&env, "shared.txt", "B's line\n")
    });
    ok(&env, "B", &["turn", "end"]);

    // The shell step that deleted notes.txt, alone.
    let said = ok(&env, "A", &["revert", "turn:1.3", "--json"]);
    assert_eq!(env.read("notes.txt"), "keep me\n", "{said}");
    assert_eq!(env.read("a.txt"), "by A\n", "{said}");
    assert_eq!(
        env.read("shared.txt"),
        "base\nA's line\nB's line\n",
        "{said}"
    );
    assert_eq!(env.read("fmt.txt"), "formatted\n", "{said}");
    // The edit step that appended A's line, alone: B's line stays (merged).
    let dry = ok(&env, "A", &["revert", "turn:1.2", "--dry-run", "--json"]);
    assert!(dry.contains("\"step\":2"), "{dry}");
    let said = ok(&env, "A", &["revert", "turn:1.2", "--json"]);
    assert_eq!(env.read("shared.txt"), "base\nB's line\n", "{said}");
    assert_eq!(env.read("a.txt"), "by A\n", "{said}");
    // The edit step that created a.txt.
    let said = ok(&env, "A", &["revert", "turn:1.1"]);
    assert!(!env.path("a.txt").exists(), "{said}");
    assert_eq!(env.read("notes.txt"), "keep me\n", "{said}");
    // `cargo fmt` is no destructive command: no captures around it without a watcher.
    let o = run(&env, "A", &["revert", "turn:1.4"]);
    assert!(!o.status.success());
    let said = stdout(&o) + &stderr(&o);
    assert!(said.contains("took no snapshots"), "{said}");
    assert!(said.contains("retrace revert turn:1"), "{said}");
    assert_eq!(env.read("fmt.txt"), "formatted\n", "{said}");
    // A step that does not exist.
    let o = run(&env, "A", &["revert", "turn:1.9"]);
    assert!(!o.status.success());
    assert!((stdout(&o) + &stderr(&o)).contains("steps 1 to 4"));
}

/// A capture that scanned the disk before another session's capture recorded a newer
/// state commits after it (two `turn begin`/`end` racing under load): its older view of a
/// path is no write. The race test's failure: A's before-snapshot, paused after listing the
/// workspace, missed B's file that B's whole turn created meanwhile; the ledger read the
/// file as deleted then, and as created again by A's turn at its end, so A's undo deleted
/// B's file.
#[test]
fn a_capture_that_saw_the_disk_before_another_sessions_turn_does_not_take_its_files() {
    let env = Env::new();
    env.write("base.txt", "base\n");
    let pause = env.home.path().join("paused");
    let mut a = crate::common::spawn_paused(
        &env,
        &["--session", "A", "turn", "begin", "--prompt", "a"],
        Some(("listed", 1, &pause)),
    );
    assert!(
        crate::common::wait_paused(&mut a, &pause),
        "A's capture never paused"
    );
    ok(&env, "B", &["turn", "begin", "--prompt", "b"]);
    env.write("b.txt", "by B\n");
    ok(&env, "B", &["turn", "end"]);
    std::fs::remove_file(&pause).unwrap();
    let o = a.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    env.write("a.txt", "by A\n");
    ok(&env, "A", &["turn", "end"]);
    let said = ok(&env, "A", &["undo", "--json"]);
    assert!(!env.path("a.txt").exists(), "{said}");
    assert_eq!(
        env.read("b.txt"),
        "by B\n",
        "A's undo took B's file: {said}"
    );
}

/// A user's forced restore: what the user changed before it (deleted, added, unsnapshotted
/// or not) is the user's, and what the restore then wrote is the restore's, both in each
/// path's entry (a path changed twice gets both, in one pass over the ledger).
#[test]
fn a_forced_restore_records_the_users_changes_and_then_its_own() {
    use retrace::history::ledger::Writer;
    let env = Env::new();
    env.write("a.txt", "a1\n");
    env.write("b.txt", "b1\n");
    let first = crate::common::snapshot_id(&env);
    // A session's turn starts the ledger.
    let owner = LiveOwner::start();
    ok(&env, "B", &["turn", "begin", "--owner-pid", &owner.pid()]);
    ok(&env, "B", &["turn", "end"]);
    drop(owner);
    std::fs::remove_file(env.path("a.txt")).unwrap();
    env.write("c.txt", "c by the user\n");
    crate::common::snapshot_id(&env);
    // Not snapshotted: the restore's safety snapshot finds it.
    std::fs::remove_file(env.path("b.txt")).unwrap();
    let o = env.run(RETRACE, &["restore", &first, "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ledger = crate::ledger_retention::ledger(&env.open());
    let restore = |w: &Writer| matches!(w, Writer::Op { session: None, what } if what.starts_with("restore to"));
    for (path, restored) in [("a.txt", true), ("b.txt", true), ("c.txt", false)] {
        let e = &ledger[path];
        assert!(restore(&e.writer), "{path}: {e:?}");
        assert_eq!(e.left.is_some(), restored, "{path}: {e:?}");
        let (before, by) = &e.earlier[0];
        assert_eq!(*by, Writer::User, "{path}: {e:?}");
        assert_eq!(before.is_some(), !restored, "{path}: {e:?}");
    }
}

/// A turn that made directories, undone and redone twice: each undo takes the directories
/// back with the files (an operation's ledger entries for directories must not make them
/// someone else's), and each redo makes them again.
#[test]
fn undo_and_redo_of_a_turn_that_made_directories_take_them_back_each_time() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let owner = LiveOwner::start();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &owner.pid()]);
    env.write("pkg/src/turn/x.txt", "x\n");
    env.write("pkg/src/turn/deep/y.txt", "y\n");
    ok(&env, "A", &["turn", "end"]);
    drop(owner);
    for round in 0..3 {
        let said = ok(&env, "A", &["undo"]);
        assert!(!env.path("pkg").exists(), "round {round}: {said}");
        assert_eq!(env.read("a.txt"), "a\n");
        let said = ok(&env, "A", &["redo"]);
        assert_eq!(
            env.read("pkg/src/turn/deep/y.txt"),
            "y\n",
            "round {round}: {said}"
        );
    }
    // Undone, then made again by the next turns (this session's, then another's): each
    // undo takes them back too.
    for session in ["A", "B"] {
        ok(&env, "A", &["undo"]);
        assert!(!env.path("pkg").exists());
        let owner = LiveOwner::start();
        ok(
            &env,
            session,
            &["turn", "begin", "--owner-pid", &owner.pid()],
        );
        env.write("pkg/src/turn/x.txt", "x2\n");
        ok(&env, session, &["turn", "end"]);
        drop(owner);
        let said = ok(&env, session, &["undo"]);
        assert!(!env.path("pkg").exists(), "{session}: {said}");
        ok(&env, session, &["redo"]);
    }
    // The ledger names files alone: a directory follows what it holds.
    let ledger = crate::ledger_retention::ledger(&env.open());
    for dir in ["pkg", "pkg/src", "pkg/src/turn", "pkg/src/turn/deep"] {
        assert!(!ledger.contains_key(dir), "{dir}: {:?}", ledger.get(dir));
    }
    assert!(ledger.contains_key("pkg/src/turn/x.txt"));
}

/// Where no session ever ran, the ledger has not begun (docs/format.md, `ledger_at`), and a
/// user's restore does not begin it: a whole restore writes no entry per path.
#[test]
fn a_users_restore_where_no_session_ran_begins_no_ledger() {
    let env = Env::new();
    env.write("a.txt", "a1\n");
    env.write("b.txt", "b1\n");
    let first = crate::common::snapshot_id(&env);
    env.write("a.txt", "a2\n");
    crate::common::snapshot_id(&env);
    let o = env.run(RETRACE, &["restore", &first]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(env.read("a.txt"), "a1\n");
    // Again, into a workspace whose files are gone.
    std::fs::remove_file(env.path("a.txt")).unwrap();
    std::fs::remove_file(env.path("b.txt")).unwrap();
    let o = env.run(RETRACE, &["restore", &first]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(env.read("b.txt"), "b1\n");
    assert!(crate::ledger_retention::ledger(&env.open()).is_empty());
    // A session's first turn begins it.
    let owner = LiveOwner::start();
    ok(&env, "A", &["turn", "begin", "--owner-pid", &owner.pid()]);
    env.write("b.txt", "b by A\n");
    ok(&env, "A", &["turn", "end"]);
    let ledger = crate::ledger_retention::ledger(&env.open());
    assert_eq!(ledger.keys().collect::<Vec<_>>(), ["b.txt"]);
}
