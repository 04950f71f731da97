//! The first hour of a new user, command by command: what asking does (never creating a
//! store), how snapshots are named, what the logs, `config` and the refusals print, and the
//! exit code of each answer (0 success, empty included; 1 refused; 2 usage; 3 errors).

use crate::common::{Env, RETRACE, stderr, stdout};
use serde_json::Value;

fn run(env: &Env, args: &[&str]) -> (i32, String, String) {
    let o = env.run(RETRACE, args);
    (o.status.code().unwrap_or(-1), stdout(&o), stderr(&o))
}

fn ok(env: &Env, args: &[&str]) -> String {
    let (code, out, err) = run(env, args);
    assert_eq!(code, 0, "retrace {args:?}: {out}{err}");
    out
}

/// Every file under the retrace home.
fn home_files(env: &Env) -> Vec<String> {
    walkdir::WalkDir::new(env.home.path())
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().display().to_string())
        .collect()
}

#[test]
fn asking_about_a_fresh_project_creates_no_store() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    assert!(ok(&env, &["log"]).contains("no snapshots yet"));
    let v: Value = serde_json::from_str(&ok(&env, &["log", "--json"])).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "version": 1, "result": "log", "ok": true, "session": null, "entries": []
        })
    );
    assert!(ok(&env, &["status"]).contains("none yet"));
    let v: Value = serde_json::from_str(&ok(&env, &["status", "--json"])).unwrap();
    assert_eq!(v["workspace"]["snapshots"], 0, "{v}");
    assert!(ok(&env, &["sessions"]).contains("no sessions yet"));
    // A session no turn began is a usage error, and asking still creates nothing.
    for args in [["--session", "s", "log"], ["--session", "s", "status"]] {
        let (code, _, err) = run(&env, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("no session \"s\""), "{err}");
    }
    ok(&env, &["config"]);
    let (code, _, err) = run(&env, &["diff", "0123456789ab"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(home_files(&env), Vec::<String>::new());
    // The first snapshot creates it.
    ok(&env, &["snapshot"]);
    assert!(home_files(&env).iter().any(|f| f.ends_with("store.redb")));
}

#[test]
fn in_a_refused_place_the_refusal_is_said_once_and_no_refused_command_is_suggested() {
    let env = Env::new();
    // HOME is the home directory the tests give retrace: files are never snapshotted there.
    let home = env.home.path().display().to_string();
    let (code, out, err) = run(&env, &["-C", &home, "log"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("retrace snapshot"), "{out}");
    assert!(out.contains("home directory"), "{out}");
    // Refused (exit 1), said once; a checkpoint too.
    for args in [
        &["snapshot"][..],
        &["--session", "s", "checkpoint", "x"][..],
    ] {
        let mut all = vec!["-C", home.as_str()];
        all.extend_from_slice(args);
        let (code, out, err) = run(&env, &all);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        let said = format!("{out}{err}").matches("home directory").count();
        assert_eq!(said, 1, "{args:?}: {out}{err}");
    }
    let (code, out, err) = run(&env, &["-C", &home, "status"]);
    assert_eq!(code, 0, "{err}");
    let said = format!("{out}{err}").matches("home directory").count();
    assert_eq!(said, 1, "{out}{err}");
    // Nothing refused made a store.
    assert!(
        !home_files(&env).iter().any(|f| f.ends_with("store.redb")),
        "{:?}",
        home_files(&env)
    );
}

/// Commands that need a session's history, in a project retrace has never seen, are
/// refused without making a store.
#[test]
fn refused_session_commands_in_a_new_project_make_no_store() {
    let env = Env::new();
    env.write(
        "a.txt", "a
",
    );
    for args in [&["undo"][..], &["redo"], &["navigate", "turn:1"]] {
        let (code, out, err) = run(&env, args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.contains("no session"), "{args:?}: {err}");
    }
    let (code, _, err) = run(&env, &["--session", "s", "undo"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(home_files(&env), Vec::<String>::new());
}

/// A session `chat` with one turn that adds `new.txt`, and a checkpoint after it.
fn one_turn(env: &Env) {
    env.write("a.txt", "a\n");
    ok(
        env,
        &["--session", "chat", "turn", "begin", "--prompt", "add new"],
    );
    env.write("new.txt", "new\n");
    ok(env, &["--session", "chat", "turn", "end"]);
    ok(
        env,
        &["--session", "chat", "checkpoint", "--label", "after new"],
    );
}

#[test]
fn turns_checkpoints_and_labels_name_snapshots_wherever_an_id_does() {
    let env = Env::new();
    one_turn(&env);
    let diff = ok(
        &env,
        &["--session", "chat", "diff", "turn:1:before", "turn:1"],
    );
    assert_eq!(diff.trim(), "A new.txt");
    // Without --session: the only session with history, which goes without saying.
    let (code, out, err) = run(&env, &["diff", "turn:1:before"]);
    assert_eq!((code, out.trim()), (0, "A new.txt"), "{err}");
    assert!(!err.contains("session chat"), "{err}");
    assert_eq!(ok(&env, &["diff", "checkpoint:1"]).trim(), "");
    assert_eq!(ok(&env, &["diff", "after new"]).trim(), "");
    let dry = ok(&env, &["restore", "--dry-run", "turn:1:before"]);
    assert!(dry.contains("would delete new.txt"), "{dry}");
    // A snapshot's own label.
    ok(&env, &["snapshot", "mine"]);
    env.write("b.txt", "b\n");
    assert_eq!(ok(&env, &["diff", "mine"]).trim(), "A b.txt");
    // Names that are no snapshot: usage errors that say how snapshots are named.
    for bad in ["turn:9", "checkpoint:x", "no-such-label"] {
        let (code, _, err) = run(&env, &["diff", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("turn:N"), "{bad}: {err}");
    }
}

#[test]
fn navigating_to_a_checkpoint_names_the_checkpoint() {
    let env = Env::new();
    one_turn(&env);
    ok(&env, &["--session", "chat", "undo"]);
    let out = ok(&env, &["--session", "chat", "navigate", "checkpoint:1"]);
    assert!(out.starts_with("checkpoint:1: restored files"), "{out}");
    assert!(env.path("new.txt").exists());
}

#[test]
fn logs_are_newest_first_aligned_and_cut_by_n() {
    let env = Env::new();
    one_turn(&env);
    ok(
        &env,
        &["--session", "chat", "turn", "begin", "--prompt", "second"],
    );
    env.write("two.txt", "2\n");
    ok(&env, &["--session", "chat", "turn", "end"]);
    let log = ok(&env, &["--session", "chat", "log"]);
    let rows: Vec<&str> = log.lines().filter(|l| l.contains(':')).take(3).collect();
    assert!(rows[0].contains("turn:2"), "{log}");
    assert!(rows[1].contains("checkpoint:1"), "{log}");
    assert!(rows[2].contains("turn:1"), "{log}");
    // One column layout for turns and checkpoints: the time starts at the same place.
    let at = |row: &str| row.find("20").unwrap();
    assert_eq!(at(rows[0]), at(rows[1]), "{log}");
    assert_eq!(at(rows[1]), at(rows[2]), "{log}");
    let one = ok(&env, &["--session", "chat", "log", "-n", "1", "--json"]);
    let v: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);
    assert_eq!(v["entries"][0]["number"], 2);
    // The workspace's snapshots: newest first too, and -n.
    let snaps: Value = serde_json::from_str(&ok(&env, &["log", "--json"])).unwrap();
    let times: Vec<u64> = snaps["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time_ms"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{snaps}");
    assert_eq!(ok(&env, &["log", "-n", "2"]).lines().count(), 2);
}

#[test]
fn a_snapshot_of_an_unchanged_workspace_adds_no_row() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let first = ok(&env, &["snapshot"]);
    assert!(!first.contains("no change"), "{first}");
    let again = ok(&env, &["snapshot"]);
    let id = snapshot_line_id(&again);
    assert!(
        again.contains(&format!("no change since {}", &id[..12])),
        "{again}"
    );
    assert_eq!(ok(&env, &["log"]).lines().count(), 1);
    // A label names the same state: one row per state, with its labels.
    ok(&env, &["snapshot", "--label", "named"]);
    ok(&env, &["snapshot", "--label", "twice"]);
    let log = ok(&env, &["log"]);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("named, twice"), "{log}");
    assert!(log.contains("1 file "), "{log}");
    let v: Value = serde_json::from_str(&ok(&env, &["log", "--json"])).unwrap();
    assert_eq!(
        v["entries"][0]["labels"],
        serde_json::json!(["named", "twice"]),
        "{v}"
    );
    // Both labels name it, and status counts one state.
    ok(&env, &["diff", "named"]);
    ok(&env, &["diff", "twice"]);
    let v: Value = serde_json::from_str(&ok(&env, &["status", "--json"])).unwrap();
    assert_eq!(v["workspace"]["snapshots"], 1, "{v}");
    // A change is a new state.
    env.write("a.txt", "b\n");
    ok(&env, &["snapshot", "--label", "changed"]);
    assert_eq!(ok(&env, &["log"]).lines().count(), 2);
}

/// The id on the `snapshot ID` line of a `retrace snapshot`, or "" without one.
fn snapshot_line_id(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("snapshot "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_refusal_lists_each_path_once_and_a_restore_with_nothing_to_do_succeeds() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["snapshot"]);
    let id = crate::common::snapshot_id(&env);
    // Already equal: nothing to do is success.
    let (code, out, err) = run(&env, &["restore", &id]);
    assert_eq!(code, 0, "{out}{err}");
    one_turn(&env);
    env.write("new.txt", "my own edit\n");
    let (code, out, err) = run(&env, &["--session", "chat", "undo"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out.matches("new.txt").count(), 1, "{out}");
    assert!(out.contains("--force"), "{out}");
}

#[test]
fn config_shows_effective_values_and_where_the_home_comes_from() {
    let env = Env::new();
    let out = ok(&env, &["config"]);
    let home = env.home.path().display().to_string();
    let line = |k: &str| {
        out.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("{out}"))
            .to_string()
    };
    assert!(line("home").contains("RETRACE_HOME"), "{out}");
    assert!(
        line("runtime_dir").contains(&format!("{home}/runtime")),
        "{out}"
    );
    // Values in one column, however long a name; each file says whether it exists; how to
    // change a value is said.
    let column = |k: &str| {
        let l = line(k);
        l.len() - l[k.len()..].trim_start().len()
    };
    assert_eq!(column("watch_idle_minutes"), column("max_turns"), "{out}");
    assert!(line("project file").ends_with("(none yet)"), "{out}");
    assert!(out.contains("To change a value"), "{out}");
    env.write(".retrace.toml", "retention_days = 3\n");
    let out = ok(&env, &["config"]);
    let project = out.lines().find(|l| l.starts_with("project file")).unwrap();
    assert!(project.ends_with("(exists)"), "{out}");
    let v: Value = serde_json::from_str(&ok(&env, &["config", "--json"])).unwrap();
    assert_eq!(v["home_source"], "RETRACE_HOME");
    assert_eq!(v["runtime_dir"]["value"], format!("{home}/runtime"));
}

#[test]
fn diff_output_in_a_pipe_has_no_colour_codes() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let id = crate::common::snapshot_id(&env);
    env.write("b.txt", "b\n");
    let out = ok(&env, &["diff", &id]);
    assert_eq!(out, "A b.txt\n");
}

#[test]
fn mode_values_are_listed_in_help() {
    let env = Env::new();
    let help = ok(&env, &["undo", "--help"]);
    assert!(help.contains("both") && help.contains("files") && help.contains("conversation"));
    assert!(help.to_lowercase().contains("possible values"), "{help}");
}

#[test]
fn a_dirty_refusal_names_only_the_paths_no_snapshot_holds() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["snapshot", "start"]);
    ok(
        &env,
        &["--session", "chat", "turn", "begin", "--anchor", "m1"],
    );
    env.write("new.txt", "new\n");
    env.write("a.txt", "changed by the turn\n");
    ok(
        &env,
        &["--session", "chat", "turn", "end", "--anchor", "m2"],
    );
    // A restore moves the workspace's known state, not the session's.
    ok(&env, &["restore", "start"]);
    env.write("mine.txt", "my own edit\n");
    let (code, out, err) = run(&env, &["--session", "chat", "navigate", "turn:1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("mine.txt"), "{out}");
    assert!(!out.contains("new.txt") && !out.contains("a.txt"), "{out}");
    // Once checkpointed, the navigation runs, and the conversation moves to the turn's own
    // end anchor (not to the name `turn:1`).
    ok(&env, &["--session", "chat", "checkpoint"]);
    let out = ok(&env, &["--session", "chat", "navigate", "turn:1", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["anchor"], "m2", "{v}");
    let out = ok(
        &env,
        &["--session", "chat", "navigate", "turn:1:before", "--json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["anchor"], "m1", "{v}");
}

#[test]
fn labels_name_one_snapshot_the_session_s_own_first_and_never_a_session_name() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    // Two sessions label their checkpoints alike (as the hooks label every turn's).
    ok(&env, &["--session", "A", "checkpoint", "mine"]);
    env.write("b.txt", "only in B's\n");
    ok(&env, &["--session", "B", "checkpoint", "mine"]);
    env.write("c.txt", "c\n");
    let a = ok(&env, &["--session", "A", "diff", "mine"]);
    assert!(a.contains("A b.txt") && a.contains("A c.txt"), "{a}");
    let b = ok(&env, &["--session", "B", "diff", "mine"]);
    assert_eq!(b.trim(), "A c.txt");
    // A workspace snapshot label that two snapshots share is refused, naming both.
    ok(&env, &["snapshot", "dup"]);
    env.write("d.txt", "d\n");
    ok(&env, &["snapshot", "dup"]);
    let (code, _, err) = run(&env, &["diff", "dup"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("names 2 snapshots"), "{err}");
    // A hex-looking label still names its snapshot; a label like a session name is refused.
    ok(&env, &["snapshot", "deadbeef"]);
    assert_eq!(ok(&env, &["diff", "deadbeef"]).trim(), "");
    let (code, _, err) = run(&env, &["snapshot", "turn:5"]);
    assert_eq!(code, 2, "{err}");
    // `log -n 0` is an empty answer, not "no snapshots yet".
    let out = ok(&env, &["log", "-n", "0"]);
    assert!(!out.contains("no snapshots"), "{out}");
}

#[test]
fn a_new_session_whose_name_looks_like_a_key_prefix_is_its_own() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["--session", "my-chat", "turn", "begin"]);
    ok(&env, &["--session", "my-chat", "turn", "end"]);
    let prefix = retrace::history::db::SessionKey::of("my-chat").short()[..4].to_string();
    ok(&env, &["--session", &prefix, "turn", "begin"]);
    ok(&env, &["--session", &prefix, "turn", "end"]);
    let v: Value = serde_json::from_str(&ok(&env, &["sessions", "--json"])).unwrap();
    let names: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        names.contains(&"my-chat") && names.contains(&prefix.as_str()),
        "{v}"
    );
    assert!(
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["turns"] == 1),
        "{v}"
    );
}

#[test]
fn a_session_name_without_sessions_and_a_parse_error_with_json_are_usage_errors() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["snapshot"]);
    let (code, _, err) = run(&env, &["diff", "turn:1"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = run(&env, &["log", "-n", "x", "--json"]);
    assert_eq!(code, 2);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["result"], "usage");
}

/// `retrace diff` alone, as `git diff`: what changed since the last snapshot (what `status`
/// counts); with no snapshot yet, a usage error that says how to take one.
#[test]
fn diff_alone_shows_the_changes_since_the_last_snapshot() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    env.write("b.txt", "b\n");
    let (code, _, err) = run(&env, &["diff"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("retrace snapshot"), "{err}");
    ok(&env, &["snapshot"]);
    assert_eq!(ok(&env, &["diff"]), "");
    env.write("a.txt", "a2\n");
    std::fs::remove_file(env.path("b.txt")).unwrap();
    env.write("c.txt", "c\n");
    assert_eq!(
        ok(&env, &["diff", "--name-status"]),
        "M a.txt\nD b.txt\nA c.txt\n"
    );
    let v: Value = serde_json::from_str(&ok(&env, &["diff", "--json"])).unwrap();
    assert_eq!(v["modified"][0], "a.txt", "{v}");
    // The disk is not snapshotted by asking: the same answer again.
    assert_eq!(
        ok(&env, &["diff", "--name-status"]),
        "M a.txt\nD b.txt\nA c.txt\n"
    );
}

/// `restore --help` and `navigate --help` say when to use which.
#[test]
fn restore_and_navigate_help_say_when_to_use_which() {
    let env = Env::new();
    let restore = ok(&env, &["restore", "--help"]);
    assert!(restore.contains("Restore or navigate?"), "{restore}");
    assert!(restore.contains("moves no session"), "{restore}");
    let navigate = ok(&env, &["navigate", "--help"]);
    assert!(navigate.contains("Navigate or restore?"), "{navigate}");
    assert!(navigate.contains("moves the session there"), "{navigate}");
}

/// Counts are worded as counted: "1 file", not "1 files".
#[test]
fn a_snapshot_of_one_file_says_one_file() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let out = ok(&env, &["snapshot"]);
    assert!(out.contains("\n1 file, "), "{out}");
    assert!(out.contains("(1 file read)"), "{out}");
}

/// What `log` prints in its first column names the entry everywhere: a revert listed as
/// `revert:N` is turn N to `show`, `diff` and `restore`.
#[test]
fn a_revert_is_named_as_log_lists_it() {
    let env = Env::new();
    one_turn(&env);
    ok(&env, &["--session", "chat", "revert", "turn:1"]);
    assert!(!env.path("new.txt").exists());
    let log = ok(&env, &["--session", "chat", "log"]);
    let name = log
        .lines()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("revert:")))
        .unwrap_or_else(|| panic!("no revert in the log: {log}"))
        .to_string();
    let shown = ok(&env, &["--session", "chat", "show", &name]);
    assert!(shown.contains("new.txt"), "{shown}");
    let diff = ok(
        &env,
        &[
            "--session",
            "chat",
            "diff",
            &format!("{name}:before"),
            &name,
        ],
    );
    assert_eq!(diff.trim(), "D new.txt");
    ok(
        &env,
        &["restore", &format!("{name}:before"), "--", "new.txt"],
    );
    assert_eq!(env.read("new.txt"), "new\n");
}

/// `status` speaks to its reader: no temp-file globs of retrace's own in `excluded`.
#[test]
fn status_lists_what_is_excluded_without_retraces_own_temp_files() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["snapshot"]);
    let out = ok(&env, &["status"]);
    let excluded = out
        .lines()
        .find(|l| l.starts_with("excluded"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        excluded.contains(".git") && excluded.contains("node_modules"),
        "{excluded}"
    );
    assert!(!excluded.contains("retrace-tmp"), "{excluded}");
}

/// In a folder without git, a subfolder belongs to the workspace retrace already holds above
/// it, as a subfolder of a git repository belongs to the repository.
#[test]
fn a_subfolder_of_a_held_workspace_without_git_is_that_workspace() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}\n");
    let sub = env.path("src").display().to_string();
    // Before retrace holds the top, the subfolder is a workspace of its own (nothing asked
    // makes a store).
    assert!(ok(&env, &["-C", &sub, "log"]).contains("no snapshots yet"));
    ok(&env, &["snapshot", "--label", "top"]);
    let log = ok(&env, &["-C", &sub, "log"]);
    assert!(log.contains("top"), "{log}");
    env.write("src/main.rs", "fn main() { changed() }\n");
    let status = ok(&env, &["-C", &sub, "status"]);
    assert!(status.contains("src/main.rs"), "{status}");
    assert!(!status.contains("none yet"), "{status}");
    // A snapshot from the subfolder goes to the same store, with paths from the top.
    ok(&env, &["-C", &sub, "snapshot", "--label", "from below"]);
    let log = ok(&env, &["log"]);
    assert!(log.contains("from below"), "{log}");
    let stores = home_files(&env)
        .into_iter()
        .filter(|f| f.ends_with("store.redb"))
        .count();
    assert_eq!(stores, 1, "{:?}", home_files(&env));
}

/// A restore of many files sums them up after the first ten; `-v` lists every one; its dry
/// run and an undo do the same.
#[test]
fn a_big_restore_lists_the_first_paths_and_sums_up_the_rest() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("f{i:02}.txt"), "v1\n");
    }
    ok(&env, &["snapshot", "--label", "one"]);
    for i in 0..30 {
        env.write(&format!("f{i:02}.txt"), "v2\n");
    }
    ok(&env, &["snapshot", "--label", "two"]);
    let dry = ok(&env, &["restore", "one", "--dry-run"]);
    assert_eq!(dry.matches("would write f").count(), 10, "{dry}");
    assert!(dry.contains("... and 20 more (-v lists them all)"), "{dry}");
    assert!(dry.contains("30 written, 0 deleted"), "{dry}");
    let all = ok(&env, &["restore", "one", "--dry-run", "-v"]);
    assert_eq!(all.matches("would write f").count(), 30, "{all}");
    assert!(!all.contains("more (-v"), "{all}");
    let done = ok(&env, &["restore", "one"]);
    assert_eq!(done.matches("wrote f").count(), 10, "{done}");
    assert!(done.contains("... and 20 more"), "{done}");
    assert_eq!(env.read("f29.txt"), "v1\n");
    // The JSON lists every path, whatever -v says.
    let v: Value = serde_json::from_str(&ok(&env, &["restore", "two", "--json"])).unwrap();
    assert_eq!(v["files_written"].as_array().map(Vec::len), Some(30), "{v}");
}

/// `show` takes a snapshot as well as a turn: by id or label, with what it holds and what
/// changed from the snapshot before it.
#[test]
fn show_shows_a_snapshot_by_id_or_label() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    ok(&env, &["snapshot", "--label", "first"]);
    env.write("a.txt", "a\nb\n");
    env.write("c.txt", "c\n");
    let id = snapshot_line_id(&ok(&env, &["snapshot", "--label", "second"]));
    let again = snapshot_line_id(&ok(&env, &["snapshot", "--label", "first again"]));
    assert_eq!(again, id, "a label is given to the state as it is now");
    let out = ok(&env, &["show", &id[..10]]);
    assert!(out.starts_with(&format!("snapshot {id}")), "{out}");
    assert!(out.contains("labels   second, first again"), "{out}");
    assert!(out.contains("holds    2 files, 6 B"), "{out}");
    assert!(out.contains("2 paths changed:"), "{out}");
    assert!(out.contains("M a.txt  +1 -0"), "{out}");
    assert!(out.contains("A c.txt  +1 -0"), "{out}");
    assert_eq!(ok(&env, &["show", "second"]), out);
    let v: Value = serde_json::from_str(&ok(&env, &["show", "first", "--json"])).unwrap();
    assert_eq!(v["previous"], Value::Null, "{v}");
    assert_eq!(v["paths"][0]["path"], "a.txt", "{v}");
    let (code, _, err) = run(&env, &["show", "nothing-named-so"]);
    assert_eq!(code, 2, "{err}");
}

/// The top-level help groups the commands, one short line each, wraps to the terminal and
/// leaves plumbing out of the list; `--session` and `-v` show only where they do something,
/// in one line under `-h`.
#[test]
fn help_is_grouped_short_and_wrapped() {
    let env = Env::new();
    let help = |args: &[&str]| {
        let o = env
            .command(RETRACE, args)
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    for args in [
        &["--help"][..],
        &["-h"],
        &["undo", "--help"],
        &["restore", "-h"],
    ] {
        let out = help(args);
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{args:?}: {line:?}");
        }
    }
    let top = help(&["--help"]);
    for heading in [
        "Get started:",
        "Look at history:",
        "Go back:",
        "Record:",
        "Maintain:",
    ] {
        assert!(top.contains(heading), "{top}");
    }
    assert!(!top.contains("\n  hook "), "{top}");
    assert!(!top.contains("\nCommands:"), "one list: {top}");
    assert!(
        top.contains("For agent adapters: hook, serve, mcp, step"),
        "{top}"
    );
    // --session: one line under -h, the whole rule under --help, absent where it does nothing.
    let short = help(&["undo", "-h"]);
    let session: Vec<&str> = short.lines().filter(|l| l.contains("--session")).collect();
    assert_eq!(session.len(), 1, "{short}");
    assert!(help(&["undo", "--help"]).contains("at least an hour"));
    for args in [["config", "-h"], ["watch", "-h"], ["install", "-h"]] {
        let out = help(&args);
        assert!(!out.contains("--session"), "{args:?}: {out}");
        assert!(!out.contains("--verbose"), "{args:?}: {out}");
    }
    // Hidden where it does nothing, still accepted there (RETRACE_SESSION may be set).
    let o = env.run(RETRACE, &["--session", "x", "config"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every --json is described one way.
    for args in [
        ["diff", "-h"],
        ["log", "-h"],
        ["undo", "-h"],
        ["blame", "-h"],
    ] {
        let out = help(&args);
        let json = out
            .lines()
            .find(|l| l.contains("--json"))
            .unwrap_or_default();
        assert!(
            json.ends_with("Print JSON instead of text"),
            "{args:?}: {json:?}"
        );
    }
}

/// `--json` is one global flag: before or after the command alike; a command with no JSON
/// answer refuses it as a usage error (exit 2), answered in JSON with nothing on stderr.
#[test]
fn json_is_one_global_flag_that_commands_without_a_json_answer_refuse() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    ok(&env, &["snapshot"]);
    let mut answers = Vec::new();
    for args in [&["--json", "log"][..], &["log", "--json"]] {
        let o = env.run(RETRACE, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["ok"], true, "{args:?}: {v}");
        answers.push(v);
    }
    assert_eq!(answers[0], answers[1]);
    for args in [
        &["watch", "--stop", "--json"][..],
        &["--json", "turn", "round", "a1"],
        &["install", "claude-code", "--json"],
        &["--json", "demo"],
    ] {
        let o = env.run(RETRACE, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["result"], "usage", "{args:?}: {v}");
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains("has no JSON answer"),
            "{args:?}: {message}"
        );
    }
    // Nothing was installed by the refused install.
    assert!(!env.root().join(".claude").exists());
    // Their help does not offer it.
    let o = env.run(RETRACE, &["watch", "--help"]);
    assert!(!stdout(&o).contains("--json"), "{}", stdout(&o));
}

/// `gc` speaks of bytes freed and space, not of frames, levels or "young" objects.
#[test]
fn gc_says_what_it_freed_in_plain_words() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    ok(&env, &["snapshot"]);
    for args in [&["gc", "--dry-run"][..], &["gc"]] {
        let out = ok(&env, args);
        for jargon in ["young", "frames", "dense level", "packs", "(s)"] {
            assert!(!out.contains(jargon), "{args:?}: {out}");
        }
        assert!(out.contains("still in use"), "{args:?}: {out}");
    }
    assert!(ok(&env, &["gc"]).contains("of its 2 GiB budget"));
}

/// A usage error reads like every other error (`retrace: ...`), keeps clap's tip, and with
/// `--json` its detail; the dirty refusal is worded one way.
#[test]
fn usage_errors_have_one_style_and_keep_their_detail() {
    let env = Env::new();
    let (code, out, err) = run(&env, &["undo", "--forse"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.starts_with("retrace: unexpected argument '--forse'"),
        "{err}"
    );
    assert!(
        err.contains("tip: a similar argument exists: '--force'"),
        "{err}"
    );
    assert!(!err.contains("error:"), "{err}");
    let (code, out, _) = run(&env, &["undo", "--forse", "--json"]);
    assert_eq!(code, 2);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["result"], "usage");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("'--forse'") && message.contains("'--force'"),
        "{v}"
    );
    // The dirty refusal: one wording from restore and navigate.
    one_turn(&env);
    env.write("unsaved.txt", "mine\n");
    let (code, _, restore) = run(&env, &["restore", "turn:1:before"]);
    assert_eq!(code, 1);
    let (code, navigate, _) = run(&env, &["--session", "chat", "navigate", "turn:1:before"]);
    assert_eq!(code, 1);
    let wording = "the workspace has 1 change in no snapshot; nothing written; take a checkpoint \
                   first or use --force";
    assert!(restore.contains(wording), "{restore}");
    assert!(navigate.contains(wording), "{navigate}");
}

/// Ctrl-C during a cold snapshot says that nothing was recorded (exit 130), and what the
/// capture had stored is counted by `gc --dry-run` and freed by `gc`.
#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn an_interrupted_snapshot_says_so_and_gc_counts_what_it_left() {
    let env = Env::new();
    // More than one 16 MiB batch of incompressible files, so part is stored before the end.
    for i in 0..24 {
        env.write(&format!("big{i:02}.bin"), crate::common::noise(i, 1 << 20));
    }
    let pause = env.home.path().join("paused");
    let mut child = crate::common::spawn_paused(&env, &["snapshot"], Some(("read", 24, &pause)));
    assert!(
        crate::common::wait_paused(&mut child, &pause),
        "the capture never paused"
    );
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let o = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&pause);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("interrupted: nothing recorded"),
        "{}",
        stderr(&o)
    );
    assert!(ok(&env, &["log"]).contains("no snapshots yet"));
    let dry = ok(&env, &["gc", "--dry-run"]);
    assert!(
        dry.contains("an interrupted snapshot stored and never recorded"),
        "{dry}"
    );
    assert!(dry.contains(" MiB ("), "counts its bytes: {dry}");
    let v: Value = serde_json::from_str(&ok(&env, &["gc", "--dry-run", "--json"])).unwrap();
    assert!(v["stored_bytes_freed"].as_u64().unwrap() >= 16 << 20, "{v}");
    ok(&env, &["gc"]);
    let v: Value = serde_json::from_str(&ok(&env, &["gc", "--dry-run", "--json"])).unwrap();
    assert_eq!(v["leftover_objects"], 0, "{v}");
}

/// `snapshot` and `log` give one byte figure for a snapshot, under one name.
#[test]
fn snapshot_and_log_say_the_same_bytes_added() {
    let env = Env::new();
    env.write("a.txt", "x".repeat(5000));
    env.write("b.txt", "some text\n");
    let first = ok(&env, &["snapshot"]);
    env.write("c.txt", "y".repeat(3000));
    let second = ok(&env, &["snapshot"]);
    let log = ok(&env, &["log"]);
    let figure = |out: &str| -> String {
        let (before, _) = out.split_once(" added").unwrap_or_else(|| panic!("{out}"));
        let words: Vec<&str> = before.split_whitespace().collect();
        words[words.len() - 2..].join(" ")
    };
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(figure(&second), figure(lines[0]), "{second}\n{log}");
    assert_eq!(figure(&first), figure(lines[1]), "{first}\n{log}");
    assert!(!second.contains("new stored"), "{second}");
    let v: Value = serde_json::from_str(&ok(&env, &["log", "--json"])).unwrap();
    env.write("d.txt", "z\n");
    let s: Value = serde_json::from_str(&ok(&env, &["snapshot", "--json"])).unwrap();
    let v2: Value = serde_json::from_str(&ok(&env, &["log", "--json"])).unwrap();
    assert_eq!(
        s["bytes_added"], v2["entries"][0]["bytes_added"],
        "{s}\n{v2}"
    );
    // Recorded with the row: everything the capture stored, its directory listings too.
    assert_eq!(s["bytes_added"], s["new_bytes"], "{s}");
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(2), "{v}");
}

/// On a terminal, `log`, `diff`, `show` and `blame` go through the pager (`RETRACE_PAGER`,
/// else `PAGER`, else `less`); `--no-pager` and a pipe print directly.
#[test]
fn long_output_goes_through_the_pager_on_a_terminal() {
    use std::io::Read;
    let env = Env::new();
    env.write("a.txt", "one\n");
    ok(&env, &["snapshot", "--label", "first"]);
    // In a pipe: never paged.
    let o = env
        .command(RETRACE, &["log"])
        .env("RETRACE_PAGER", "sed s/^/PAGED:/")
        .output()
        .unwrap();
    assert!(!stdout(&o).contains("PAGED:"), "{}", stdout(&o));
    let in_terminal = |args: &[&str]| -> String {
        let pty = portable_pty::native_pty_system();
        let pair = pty
            .openpty(portable_pty::PtySize {
                rows: 24,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = portable_pty::CommandBuilder::new(RETRACE);
        cmd.args(args);
        cmd.cwd(env.root());
        cmd.env("RETRACE_HOME", env.home.path());
        cmd.env("HOME", env.home.path());
        cmd.env("RETRACE_PAGER", "sed s/^/PAGED:/");
        cmd.env_remove("RETRACE_SESSION");
        let mut child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let reading = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            out
        });
        let status = child.wait().unwrap();
        assert!(status.success(), "{args:?}");
        drop(pair.master);
        String::from_utf8_lossy(&reading.join().unwrap()).into_owned()
    };
    let paged = in_terminal(&["log"]);
    assert!(paged.contains("PAGED:"), "{paged}");
    assert!(paged.contains("first"), "{paged}");
    let direct = in_terminal(&["log", "--no-pager"]);
    assert!(
        !direct.contains("PAGED:") && direct.contains("first"),
        "{direct}"
    );
    // Commands that print little are never paged.
    assert!(!in_terminal(&["status"]).contains("PAGED:"));
}
