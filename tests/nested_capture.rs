//! `nested_repos = "capture"`: a folder holding several repositories, each captured with its
//! own ignore rules and never its `.git`, undone, redone and restored through the real
//! binary; the default (`skip`) still leaves them alone; switching modes deletes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{Env, Node, RETRACE, assert_verified, stderr, stdout, tree_of};
use retrace::config::NestedRepos;

/// How a command runs: with `RETRACE_NESTED_REPOS=capture`, or with the variable unset
/// (the default, `skip`).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Capture,
    Default,
}

fn command(env: &Env, mode: Mode, args: &[&str]) -> Command {
    let mut c = env.command(RETRACE, args);
    c.env_remove("RETRACE_SESSION");
    match mode {
        Mode::Capture => c.env("RETRACE_NESTED_REPOS", "capture"),
        Mode::Default => c.env_remove("RETRACE_NESTED_REPOS"),
    };
    c
}

/// Runs `retrace --session chat ARGS --json` and returns its JSON and exit code.
fn json(env: &Env, mode: Mode, args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--session", "chat"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = command(env, mode, &all).output().unwrap();
    let text = stdout(&o);
    let v = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("retrace {args:?}: no JSON ({e}):\n{text}{}", stderr(&o)));
    (v, o.status.code().unwrap_or(-1))
}

#[track_caller]
fn restored(env: &Env, mode: Mode, verb: &str) -> Value {
    let (v, code) = json(env, mode, &[verb]);
    assert_eq!((v["result"].as_str(), code), (Some("restored"), 0), "{v}");
    v
}

fn snapshot(env: &Env, mode: Mode) -> Value {
    let o = command(env, mode, &["snapshot", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Asserts two trees are equal, naming only the paths that differ (a `.git` is large).
#[track_caller]
fn same_tree(now: &BTreeMap<PathBuf, Node>, want: &BTreeMap<PathBuf, Node>) {
    let differ: Vec<&PathBuf> = now
        .keys()
        .chain(want.keys())
        .filter(|k| now.get(*k) != want.get(*k))
        .collect();
    assert!(differ.is_empty(), "paths that differ: {differ:?}");
}

fn git_available() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs git in `dir`, isolated from the machine's and the user's configuration.
fn git(env: &Env, dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("HOME", env.home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
}

/// Makes `rel` a repository holding `files`, committed: with git when it is installed, else
/// a `.git` directory written by hand (what the scan looks for is the `.git` entry).
fn repo(env: &Env, rel: &str, files: &[(&str, &str)]) {
    for (path, content) in files {
        env.write(&format!("{rel}/{path}"), content);
    }
    if git_available() {
        git(env, &env.path(rel), &["init", "-q"]);
        git(env, &env.path(rel), &["add", "-A"]);
        git(env, &env.path(rel), &["commit", "-qm", "first"]);
    } else {
        env.write(&format!("{rel}/.git/HEAD"), "ref: refs/heads/main\n");
        env.write(&format!("{rel}/.git/config"), "[core]\n\tbare = false\n");
        env.write(&format!("{rel}/.git/objects/ab/cdef"), [0u8, 1, 2, 3]);
        env.write(&format!("{rel}/.git/info/exclude"), "# excludes\n");
    }
}

/// Appends `pattern` to the repository's `.git/info/exclude`.
fn exclude(env: &Env, rel: &str, pattern: &str) {
    let path = env.path(&format!("{rel}/.git/info/exclude"));
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(pattern);
    text.push('\n');
    env.write(&format!("{rel}/.git/info/exclude"), text);
}

/// Every file, symlink and directory under each `.git` (a directory, or a worktree's `.git`
/// file), byte for byte with its executable bit.
fn git_dirs(env: &Env, repos: &[&str]) -> BTreeMap<PathBuf, Node> {
    let mut all = BTreeMap::new();
    for r in repos {
        let dot = env.path(&format!("{r}/.git"));
        if dot.is_dir() {
            for (p, n) in tree_of(&dot) {
                all.insert(Path::new(r).join(".git").join(p), n);
            }
        } else {
            let data = std::fs::read(&dot).unwrap();
            all.insert(Path::new(r).join(".git"), Node::File { data, exec: false });
        }
    }
    assert!(!all.is_empty());
    all
}

/// The paths an in-process capture in `mode` holds.
fn captured_paths(env: &Env, mode: NestedRepos) -> Vec<String> {
    let config = retrace::Config::with_home(env.home.path()).configure(|s| {
        s.nested_repos.value = mode;
    });
    let ws = retrace::Workspace::open(env.root(), &config).unwrap();
    let c = ws.snapshot(Some("in process".into())).unwrap();
    c.entries().iter().map(|e| e.path.show()).collect()
}

/// The folder of the issue: `app/` and `api/` are repositories (app with its own ignore
/// rules and excludes), `tools/` a worktree whose `.git` is a file, and a file at the top.
fn multi_repo_folder(env: &Env) {
    env.write("top.txt", "top v1\n");
    repo(
        env,
        "app",
        &[
            ("src/main.rs", "fn main() {}\n"),
            (".gitignore", "*.log\ntarget/\n"),
            ("README.md", "app\n"),
        ],
    );
    env.write("app/debug.log", "ignored by app's .gitignore\n");
    env.write("app/target/bin", "build output\n");
    exclude(env, "app", "local-notes.txt");
    env.write("app/local-notes.txt", "excluded by app/.git/info/exclude\n");
    repo(env, "api", &[("handler.go", "package api\n")]);
    env.write("tools/.git", "gitdir: /nowhere/.git/worktrees/tools\n");
    env.write("tools/run.sh", "#!/bin/sh\n");
}

#[test]
fn a_turn_in_two_captured_repositories_is_undone_and_redone_in_both() {
    let env = Env::new();
    multi_repo_folder(&env);
    let dot_git = git_dirs(&env, &["app", "api", "tools"]);

    let (v, code) = json(
        &env,
        Mode::Capture,
        &["turn", "begin", "--prompt", "edit all"],
    );
    assert_eq!((code, v["before"].as_str()), (0, Some("ready")), "{v}");
    env.write("top.txt", "top v2\n");
    env.write("app/src/main.rs", "fn main() { println!(\"v2\"); }\n");
    env.write("app/src/new.rs", "pub fn new() {}\n");
    env.write("app/debug.log", "the agent's log\n");
    env.write("api/handler.go", "package api // v2\n");
    std::fs::remove_file(env.path("tools/run.sh")).unwrap();
    let (v, code) = json(&env, Mode::Capture, &["turn", "end"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (
            v["added"].as_u64(),
            v["modified"].as_u64(),
            v["deleted"].as_u64()
        ),
        (Some(1), Some(3), Some(1)),
        "the ignored app/debug.log is not part of the turn: {v}"
    );
    let after = tree_of(env.root());

    let v = restored(&env, Mode::Capture, "undo");
    let mut written = strings(&v["files_written"]);
    written.sort();
    assert_eq!(
        written,
        vec![
            "api/handler.go",
            "app/src/main.rs",
            "tools/run.sh",
            "top.txt"
        ],
        "{v}"
    );
    assert_eq!(strings(&v["files_deleted"]), vec!["app/src/new.rs"], "{v}");
    assert_eq!(env.read("top.txt"), "top v1\n");
    assert_eq!(env.read("app/src/main.rs"), "fn main() {}\n");
    assert!(!env.path("app/src/new.rs").exists());
    assert_eq!(env.read("api/handler.go"), "package api\n");
    assert_eq!(env.read("tools/run.sh"), "#!/bin/sh\n");
    // Ignored and excluded files of a repository are never written or deleted.
    assert_eq!(env.read("app/debug.log"), "the agent's log\n");
    assert_eq!(env.read("app/target/bin"), "build output\n");
    assert_eq!(
        env.read("app/local-notes.txt"),
        "excluded by app/.git/info/exclude\n"
    );
    same_tree(&git_dirs(&env, &["app", "api", "tools"]), &dot_git);

    restored(&env, Mode::Capture, "redo");
    same_tree(&tree_of(env.root()), &after);
    same_tree(&git_dirs(&env, &["app", "api", "tools"]), &dot_git);

    // What the snapshots hold: the repositories' files, never a `.git`, nothing ignored.
    let paths = captured_paths(&env, NestedRepos::Capture);
    for p in [
        "app/src/main.rs",
        "app/.gitignore",
        "api/handler.go",
        "top.txt",
    ] {
        assert!(paths.iter().any(|x| x == p), "{p} missing from {paths:?}");
    }
    for p in &paths {
        assert!(
            !p.split('/').any(|c| c == ".git"),
            "a .git was captured: {p}"
        );
        assert!(
            !["app/debug.log", "app/target", "app/local-notes.txt"]
                .iter()
                .any(|x| p == x || p.starts_with(&format!("{x}/"))),
            "an ignored or excluded path was captured: {p}"
        );
    }
    let v = snapshot(&env, Mode::Capture);
    assert_eq!(strings(&v["captured_repos"]), vec!["api", "app", "tools"]);
    assert_eq!(strings(&v["nested_repos"]), Vec::<String>::new());
    assert_verified(&env);
}

#[test]
fn by_default_nested_repositories_are_still_left_alone() {
    let env = Env::new();
    multi_repo_folder(&env);
    let v = snapshot(&env, Mode::Default);
    assert_eq!(strings(&v["nested_repos"]), vec!["api", "app", "tools"]);
    assert_eq!(strings(&v["captured_repos"]), Vec::<String>::new());
    assert_eq!(v["files"], 1, "only top.txt: {v}");

    json(&env, Mode::Default, &["turn", "begin"]);
    env.write("top.txt", "top v2\n");
    env.write("app/src/main.rs", "changed by the agent\n");
    json(&env, Mode::Default, &["turn", "end"]);
    let v = restored(&env, Mode::Default, "undo");
    assert_eq!(strings(&v["files_written"]), vec!["top.txt"], "{v}");
    assert_eq!(env.read("top.txt"), "top v1\n");
    assert_eq!(env.read("app/src/main.rs"), "changed by the agent\n");
}

#[test]
fn status_says_the_mode_and_lists_the_repositories() {
    let env = Env::new();
    multi_repo_folder(&env);
    snapshot(&env, Mode::Default);
    for (mode, word, json_mode) in [
        (Mode::Default, "skipped (3): api, app, tools", "skip"),
        (Mode::Capture, "captured (3): api, app, tools", "capture"),
    ] {
        let o = command(&env, mode, &["status"]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        let line = text
            .lines()
            .find(|l| l.starts_with("nested "))
            .unwrap_or_else(|| panic!("no nested line:\n{text}"));
        assert!(line.contains(word), "{line}");
        let o = command(&env, mode, &["status", "--json"]).output().unwrap();
        let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(v["session"], Value::Null, "{v}");
        let w = &v["workspace"];
        assert_eq!(w["nested_repos_mode"], json_mode, "{v}");
        let (listed, empty) = if mode == Mode::Capture {
            ("captured_repos", "nested_repos")
        } else {
            ("nested_repos", "captured_repos")
        };
        assert_eq!(strings(&w[listed]), vec!["api", "app", "tools"], "{v}");
        assert_eq!(strings(&w[empty]), Vec::<String>::new(), "{v}");
    }
    // A session's status carries the workspace's.
    json(&env, Mode::Capture, &["checkpoint"]);
    let (v, _) = json(&env, Mode::Capture, &["status"]);
    assert_eq!(v["workspace"]["nested_repos_mode"], "capture", "{v}");

    // `retrace config` shows the setting and where it came from; a bad value is named.
    let o = command(&env, Mode::Capture, &["config"]).output().unwrap();
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.starts_with("nested_repos"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("\"capture\"") && line.contains("$RETRACE_NESTED_REPOS"),
        "{line}"
    );
    let o = env
        .command(RETRACE, &["config", "--json"])
        .env("RETRACE_NESTED_REPOS", "sometimes")
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["nested_repos"]["value"], "skip", "{v}");
    assert!(
        stderr(&o).contains("\"sometimes\"") && stderr(&o).contains("\"skip\" or \"capture\""),
        "{}",
        stderr(&o)
    );
    // And from the workspace's file.
    env.write(".retrace.toml", "nested_repos = \"capture\"\n");
    let o = command(&env, Mode::Default, &["status", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["workspace"]["nested_repos_mode"], "capture", "{v}");
}

#[test]
fn restoring_an_earlier_snapshot_leaves_every_git_alone() {
    let env = Env::new();
    env.write("top.txt", "top v1\n");
    // Before any repository exists.
    let empty = snapshot(&env, Mode::Capture)["id"]
        .as_str()
        .unwrap()
        .to_string();
    multi_repo_folder(&env);
    let dot_git = git_dirs(&env, &["app", "api", "tools"]);
    let first = snapshot(&env, Mode::Capture);
    let first_tree = tree_of(env.root());
    env.write("app/src/main.rs", "rewritten\n");
    env.write("app/src/extra.rs", "extra\n");
    std::fs::remove_file(env.path("api/handler.go")).unwrap();
    snapshot(&env, Mode::Capture);

    let o = command(
        &env,
        Mode::Capture,
        &["restore", first["id"].as_str().unwrap()],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    same_tree(&tree_of(env.root()), &first_tree);
    same_tree(&git_dirs(&env, &["app", "api", "tools"]), &dot_git);

    // The snapshot from before the repositories has no `app/.git` (no snapshot ever has):
    // their managed files go, every `.git` and every ignored file stays.
    let o = command(&env, Mode::Capture, &["restore", &empty, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!env.path("app/src/main.rs").exists());
    assert!(!env.path("api/handler.go").exists());
    assert!(!env.path("tools/run.sh").exists());
    assert_eq!(env.read("app/debug.log"), "ignored by app's .gitignore\n");
    same_tree(&git_dirs(&env, &["app", "api", "tools"]), &dot_git);

    // And back. (That restore deleted app/.gitignore, so the files it ignored have been
    // captured since, and `first` lacks them: they go, as in any directory.)
    let o = command(
        &env,
        Mode::Capture,
        &["restore", first["id"].as_str().unwrap()],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("app/src/main.rs"), "fn main() {}\n");
    assert_eq!(env.read("api/handler.go"), "package api\n");
    assert_eq!(env.read("tools/run.sh"), "#!/bin/sh\n");
    same_tree(&git_dirs(&env, &["app", "api", "tools"]), &dot_git);
    assert_verified(&env);
}

/// Switching from skip to capture in the middle of a session: the next capture sees the
/// repositories' files as added; undoing turns from before the switch, or the turn that
/// spans it, deletes none of them, and switching back deletes nothing either.
#[test]
fn switching_to_capture_mid_session_deletes_no_repository_file() {
    let env = Env::new();
    multi_repo_folder(&env);
    let repo_files = |env: &Env| {
        tree_of(env.root())
            .into_iter()
            .filter(|(p, _)| p.starts_with("app") || p.starts_with("api"))
            .collect::<BTreeMap<_, _>>()
    };

    // Turn 1, skipped.
    json(&env, Mode::Default, &["turn", "begin"]);
    env.write("top.txt", "top v2\n");
    json(&env, Mode::Default, &["turn", "end"]);
    // Turn 2 begins skipped and ends captured.
    json(&env, Mode::Default, &["turn", "begin"]);
    env.write("top.txt", "top v3\n");
    env.write("app/src/main.rs", "edited in the spanning turn\n");
    let (v, _) = json(&env, Mode::Capture, &["turn", "end"]);
    assert!(
        v["added"].as_u64().unwrap() >= 4,
        "the repositories' files appear as added: {v}"
    );
    // Turn 3, captured.
    json(&env, Mode::Capture, &["turn", "begin"]);
    env.write("top.txt", "top v4\n");
    env.write("api/handler.go", "package api // v3\n");
    json(&env, Mode::Capture, &["turn", "end"]);
    let at_turn_3 = repo_files(&env);

    restored(&env, Mode::Capture, "undo");
    assert_eq!(env.read("api/handler.go"), "package api\n");
    assert_eq!(env.read("top.txt"), "top v3\n");
    let at_turn_2 = repo_files(&env);
    // Undoing the spanning turn: its before-snapshot never knew app's files, so they stay
    // as they are (the edit too); top.txt goes back.
    let v = restored(&env, Mode::Capture, "undo");
    assert_eq!(strings(&v["files_written"]), vec!["top.txt"], "{v}");
    assert_eq!(strings(&v["files_deleted"]), Vec::<String>::new(), "{v}");
    assert_eq!(env.read("top.txt"), "top v2\n");
    same_tree(&repo_files(&env), &at_turn_2);
    restored(&env, Mode::Capture, "undo");
    assert_eq!(env.read("top.txt"), "top v1\n");
    same_tree(&repo_files(&env), &at_turn_2);
    assert_eq!(env.read("app/src/main.rs"), "edited in the spanning turn\n");

    // Redo all three; then back to skip mode: an undo there writes nothing into a repository.
    for _ in 0..3 {
        restored(&env, Mode::Capture, "redo");
    }
    same_tree(&repo_files(&env), &at_turn_3);
    assert_eq!(env.read("top.txt"), "top v4\n");
    json(&env, Mode::Default, &["turn", "begin"]);
    env.write("top.txt", "top v5\n");
    json(&env, Mode::Default, &["turn", "end"]);
    restored(&env, Mode::Default, "undo");
    // Turn 3 changed api/handler.go while it was captured: skipped now, it is left alone
    // and named, and the rest of the turn is undone.
    let v = restored(&env, Mode::Default, "undo");
    assert_eq!(strings(&v["files_written"]), vec!["top.txt"], "{v}");
    let left: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(left, vec!["api/handler.go"], "{v}");
    assert_eq!(env.read("top.txt"), "top v3\n");
    same_tree(&repo_files(&env), &at_turn_3);

    // Captured again, navigating to a snapshot taken while they were skipped (turn 1's)
    // restores the top of the folder and deletes nothing of the repositories. (Their files
    // are in no snapshot yet in this mode: the guard wants them checkpointed first.)
    let (v, code) = json(&env, Mode::Capture, &["navigate", "turn:1"]);
    assert_eq!((v["result"].as_str(), code), (Some("dirty"), 1), "{v}");
    json(&env, Mode::Capture, &["checkpoint"]);
    let (v, code) = json(&env, Mode::Capture, &["navigate", "turn:1"]);
    assert_eq!((v["result"].as_str(), code), (Some("restored"), 0), "{v}");
    assert_eq!(env.read("top.txt"), "top v2\n");
    same_tree(&repo_files(&env), &at_turn_3);
    assert_verified(&env);
}

/// The stat cache lists a nested repository as such in one mode and as a directory in the
/// other, and an entry hits only with its kind: switching modes back and forth gives the
/// snapshot a cold capture (another home, no cache) gives.
#[test]
fn switching_modes_never_reuses_a_stale_cache() {
    let env = Env::new();
    multi_repo_folder(&env);
    let id = |env: &Env, mode: Mode| snapshot(env, mode)["id"].as_str().unwrap().to_string();
    let skipped = id(&env, Mode::Default);
    let captured = id(&env, Mode::Capture);
    assert_ne!(skipped, captured);
    assert_eq!(id(&env, Mode::Default), skipped);
    assert_eq!(id(&env, Mode::Capture), captured);
    env.write("app/src/main.rs", "changed while captured\n");
    let changed = id(&env, Mode::Capture);
    assert_eq!(id(&env, Mode::Default), skipped, "app's change is not seen");
    assert_eq!(id(&env, Mode::Capture), changed);
    let cold = tempfile::tempdir().unwrap();
    for (mode, want) in [(Mode::Capture, &changed), (Mode::Default, &skipped)] {
        let o = command(&env, mode, &["snapshot", "--json"])
            .env("RETRACE_HOME", cold.path())
            .output()
            .unwrap();
        let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(&v["id"], want.as_str());
    }
}

/// Inside a repository only its own rules apply, as git sees it: the enclosing folder's
/// `*.json` does not hide `app/config.json`. The enclosing rules do decide whether the
/// repository is there at all: one they ignore stays out, as in skip mode.
#[test]
fn the_enclosing_folders_rules_stop_at_a_repository() {
    let env = Env::new();
    env.write(".gitignore", "*.json\nvendor/\n");
    env.write("top.json", "{}");
    repo(&env, "app", &[("config.json", "{\"a\": 1}")]);
    repo(&env, "vendor/lib", &[("lib.c", "int x;")]);
    let paths = captured_paths(&env, NestedRepos::Capture);
    assert_eq!(paths, vec![".gitignore", "app", "app/config.json"]);
}

/// `revert` covers captured repositories too (issue 17): an earlier turn's change in two
/// repositories is taken back, a later turn's kept, and every `.git` is left byte-identical.
#[test]
fn a_revert_in_capture_mode_covers_both_repositories() {
    let env = Env::new();
    repo(&env, "app", &[("main.rs", "app v1\n")]);
    repo(&env, "api", &[("lib.rs", "api v1\n")]);
    let gits = git_dirs(&env, &["app", "api"]);
    let turn = |prompt: &str, work: &dyn Fn()| {
        let (v, code) = json(&env, Mode::Capture, &["turn", "begin", "--prompt", prompt]);
        assert_eq!(code, 0, "{v}");
        work();
        let (v, code) = json(&env, Mode::Capture, &["turn", "end"]);
        assert_eq!(code, 0, "{v}");
    };
    turn("both repos", &|| {
        env.write("app/main.rs", "app v2\n");
        env.write("api/lib.rs", "api v2\n");
        env.write("api/new.rs", "new\n");
    });
    turn("later", &|| env.write("app/later.rs", "kept\n"));
    let (v, code) = json(&env, Mode::Capture, &["revert", "turn:1"]);
    assert_eq!((v["result"].as_str(), code), (Some("restored"), 0), "{v}");
    assert_eq!(env.read("app/main.rs"), "app v1\n");
    assert_eq!(env.read("api/lib.rs"), "api v1\n");
    assert!(!env.path("api/new.rs").exists());
    assert_eq!(env.read("app/later.rs"), "kept\n");
    same_tree(&git_dirs(&env, &["app", "api"]), &gits);
    restored(&env, Mode::Capture, "undo");
    assert_eq!(env.read("api/lib.rs"), "api v2\n");
    same_tree(&git_dirs(&env, &["app", "api"]), &gits);
}
