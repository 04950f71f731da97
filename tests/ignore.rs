//! Which files a snapshot holds: git's ignore rules, hard exclusions, nested repositories.

use std::fs;

use crate::common::{Env, RETRACE, stdout};

fn captured(env: &Env) -> Vec<String> {
    let ws = env.open();
    let c = ws.snapshot(None).unwrap();
    let mut paths: Vec<String> = c
        .entries()
        .iter()
        .filter(|e| e.kind != retrace::object::EntryKind::Dir)
        .map(|e| e.path.show())
        .collect();
    paths.sort();
    paths
}

#[test]
fn nested_gitignores_and_negation_apply_outside_git_repos() {
    let env = Env::new();
    env.write(".gitignore", "*.log\n!keep.log\n/top-only.txt\n");
    env.write("a.log", "x");
    env.write("keep.log", "x");
    env.write("top-only.txt", "x");
    env.write("sub/top-only.txt", "x");
    env.write("sub/.gitignore", "generated/\n");
    env.write("sub/generated/g.rs", "x");
    env.write("sub/b.log", "x");
    env.write("sub/code.rs", "x");
    env.write(".hidden", "hidden files are included");
    assert_eq!(
        captured(&env),
        vec![
            ".gitignore",
            ".hidden",
            "keep.log",
            "sub/.gitignore",
            "sub/code.rs",
            "sub/top-only.txt"
        ]
    );
}

#[test]
fn git_info_exclude_applies_in_a_git_repo() {
    let env = Env::new();
    env.write(".git/info/exclude", "secret-notes.md\n");
    env.write(".git/HEAD", "ref: refs/heads/main\n");
    env.write("secret-notes.md", "x");
    env.write("main.rs", "x");
    assert_eq!(captured(&env), vec!["main.rs"]);
}

#[test]
fn hard_exclusions_beat_negation() {
    let env = Env::new();
    env.write(
        ".gitignore",
        "!.env\n!.env.local\n!node_modules/\n!node_modules/**\n",
    );
    env.write(".env", "SECRET=1");
    env.write(".env.local", "SECRET=2");
    env.write("node_modules/pkg/index.js", "x");
    env.write("deep/node_modules/pkg/index.js", "x");
    env.write("deep/.env.production", "SECRET=3");
    env.write("app.js", "x");
    assert_eq!(captured(&env), vec![".gitignore", "app.js"]);
}

#[test]
fn the_global_excludes_file_applies() {
    let env = Env::new();
    // HOME is the temp home for child processes; git's default global excludes file.
    let git_cfg = env.home.path().join(".config/git");
    fs::create_dir_all(&git_cfg).unwrap();
    fs::write(git_cfg.join("ignore"), "*.swp\n").unwrap();
    env.write("notes.txt.swp", "editor swap");
    env.write("notes.txt", "x");
    let o = env.run(RETRACE, &["snapshot", "--json"]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["files"], 1, "{v}");
}

#[test]
fn nested_repositories_are_recorded_not_entered() {
    let env = Env::new();
    env.write("app/main.rs", "x");
    env.write("third_party/lib/.git/HEAD", "ref: refs/heads/main\n");
    env.write("third_party/lib/src.c", "x");
    env.write("sub2/.git", "gitdir: ../.git/modules/sub2\n"); // a submodule's .git file
    env.write("sub2/file", "x");
    let ws = env.open();
    let c = ws.snapshot(None).unwrap();
    assert_eq!(c.nested_repos, vec!["sub2", "third_party/lib"]);
    assert_eq!(c.files, 1);
    let status = ws.status().unwrap();
    assert_eq!(status.nested_repos, vec!["sub2", "third_party/lib"]);
}

#[test]
fn the_store_is_never_inside_the_workspace() {
    let env = Env::new();
    env.write("a", "x");
    let err = retrace::Workspace::open(env.root(), &retrace::Config::with_home(env.path("state")))
        .err()
        .expect("store inside the workspace is refused");
    assert!(err.to_string().contains("RETRACE_HOME"), "{err}");
}

#[test]
fn nested_repositories_are_found_even_when_dotfiles_are_ignored() {
    // A `.gitignore` that ignores every dotfile also matches `.git`: the nested repository
    // must still be detected (and its files left alone), not captured as plain files.
    let env = Env::new();
    env.write(".gitignore", ".*\n!/.gitignore\n");
    env.write("lib/.git/HEAD", "ref: refs/heads/main\n");
    env.write("lib/code.c", "int x;");
    env.write("main.c", "int main;");
    let c = env.open().snapshot(None).unwrap();
    assert_eq!(c.nested_repos, vec!["lib"]);
    assert_eq!(captured_now(&c), vec![".gitignore", "lib", "main.c"]);
}

fn captured_now(c: &retrace::Capture) -> Vec<String> {
    c.entries().iter().map(|e| e.path.show()).collect()
}

/// A FIFO or a socket in the workspace cannot be snapshotted: it is left out and named in
/// the capture result like any other path left out, and the rest is captured.
#[test]
fn fifos_and_sockets_are_left_out_and_named() {
    let env = Env::new();
    env.write("a.txt", "a");
    let fifo =
        std::ffi::CString::new(env.path("pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let _socket = std::os::unix::net::UnixListener::bind(env.path("sock")).unwrap();
    env.write(".gitignore", "ignored.sock\n");
    let _ignored = std::os::unix::net::UnixListener::bind(env.path("ignored.sock")).unwrap();
    let c = env.open().snapshot(None).unwrap();
    let skipped: Vec<(&str, &str)> = c
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "pipe");
    assert!(skipped[0].1.contains("FIFO"), "{skipped:?}");
    assert_eq!(skipped[1].0, "sock");
    assert!(skipped[1].1.contains("socket"), "{skipped:?}");
    for (_, why) in &skipped {
        assert!(
            why.contains("not a regular file, directory or symlink: left out"),
            "{skipped:?}"
        );
    }
    assert_eq!(c.files, 2, "a.txt and .gitignore are captured");
    // The CLI names them too.
    let out = stdout(&env.run(RETRACE, &["snapshot"]));
    assert!(out.contains("skipped pipe: a FIFO"), "{out}");
}

/// A FIFO where the walk reads rules (`.gitignore`, the root's `.git`, a captured nested
/// repository's `.git`) is never opened: reading it would block the capture for ever.
#[test]
fn a_fifo_named_like_a_rules_file_never_blocks_a_capture() {
    let env = Env::new();
    env.write("a.txt", "a");
    env.write("sub/b.txt", "b");
    env.write("repo/c.txt", "c");
    let mkfifo = |rel: &str| {
        let p =
            std::ffi::CString::new(env.path(rel).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
        assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o600) }, 0);
    };
    mkfifo("sub/.gitignore");
    mkfifo(".git");
    mkfifo("repo/.git");
    for mode in ["skip", "capture"] {
        let o = crate::common::output_within(
            env.command(RETRACE, &["snapshot"])
                .env("RETRACE_NESTED_REPOS", mode),
            std::time::Duration::from_secs(120),
        );
        assert!(o.status.success(), "{mode}: {}", crate::common::stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains("skipped sub/.gitignore: a FIFO"),
            "{mode}: {out}"
        );
    }
}
