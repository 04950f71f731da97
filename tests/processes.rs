//! Real processes: concurrent snapshots, unreadable files, exit codes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use crate::common::{self, Env, RETRACE, RETRACE_DUMP, assert_verified, is_root, stderr, stdout};

#[test]
fn two_snapshot_processes_started_together_both_succeed() {
    for round in 0..8 {
        let env = Env::new();
        for i in 0..200 {
            env.write(
                &format!("d{}/f{i}.txt", i % 10),
                format!("file {i} round {round}"),
            );
        }
        // The store does not exist yet: both processes race to create it too.
        let children: Vec<_> = (0..2)
            .map(|_| {
                env.command(RETRACE, &["snapshot", "--json"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        for o in &outputs {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
            let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
            assert_eq!(v["files"], 200);
        }
        let log = env.run(RETRACE, &["log", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&log)).unwrap();
        // Both captured the same tree: one row (an identical snapshot adds none).
        assert_eq!(v["entries"].as_array().unwrap().len(), 1, "round {round}");
        assert_verified(&env);
    }
}

#[test]
fn an_unreadable_file_is_left_out_and_named() {
    let env = Env::new();
    env.write("ok.txt", "fine");
    env.write("secret.txt", "no access");
    fs::set_permissions(env.path("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.command(RETRACE, &["snapshot", "--json"]);
    // As root every file is readable: run the snapshot as an unprivileged user instead.
    if is_root() {
        for dir in [env.root(), env.home.path()] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).unwrap();
        }
        fs::set_permissions(env.path("ok.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["files"], 1, "{v}");
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{v}");
    assert_eq!(skipped[0]["path"], "secret.txt");
    assert!(
        skipped[0]["reason"].as_str().unwrap().contains("ermission"),
        "{v}"
    );
}

/// A restore that meets a file no capture could read, or a FIFO, where the snapshot has a
/// file leaves it alone and says why: unreadable (with the OS error), not a regular file;
/// never "an ignored or excluded file".
#[test]
fn a_restore_names_unreadable_and_special_files_in_its_way() {
    let env = Env::new();
    env.write("secret.txt", "v1");
    env.write("pipe", "v1");
    let as_user = |args: &[&str]| env.run_as_user(RETRACE, args);
    if is_root() {
        for p in [env.root(), env.home.path()] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o777)).unwrap();
        }
        for p in ["secret.txt", "pipe"] {
            fs::set_permissions(env.path(p), fs::Permissions::from_mode(0o666)).unwrap();
        }
    }
    let o = as_user(&["snapshot", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.write("secret.txt", "v2");
    fs::remove_file(env.path("pipe")).unwrap();
    let fifo =
        std::ffi::CString::new(env.path("pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
    fs::set_permissions(env.path("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    let o = as_user(&["restore", &id[..12], "--force", "--json"]);
    // Every path left alone: refused (1), not an error.
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["result"], "restored", "{v}");
    // Not ok, as its exit code says: the files are not all the snapshot's.
    assert_eq!(v["ok"], false, "{v}");
    let reason = |path: &str| {
        v["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["path"] == path)
            .and_then(|s| s["reason"].as_str())
            .unwrap_or_else(|| panic!("{path} not left alone: {v}"))
            .to_string()
    };
    let secret = reason("secret.txt");
    assert!(
        secret.contains("unreadable") && secret.contains("ermission denied"),
        "{secret}"
    );
    let pipe = reason("pipe");
    assert!(
        pipe.contains("FIFO") && pipe.contains("not a regular file"),
        "{pipe}"
    );
    fs::set_permissions(env.path("secret.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(env.read("secret.txt"), "v2", "left alone");
}

/// `restore --dry-run` on a dirty workspace shows what the restore would do and that it
/// would be refused (listing the dirty paths), exits 1 like the refusal, writes nothing; with
/// `--force` it is not refused. `--json` carries the plan and the refusal.
#[test]
fn a_dry_run_on_a_dirty_workspace_shows_the_plan_and_the_refusal() {
    let env = Env::new();
    env.write("a.txt", "one");
    let id = common::snapshot_id(&env);
    env.write("a.txt", "two");
    env.write("b.txt", "new");
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    env.write("c.txt", "unsaved");

    let o = env.run(RETRACE, &["restore", &id[..12], "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    for line in [
        "would write a.txt",
        "would delete b.txt",
        "would delete c.txt",
        "the restore would be refused: the workspace has 1 change in no snapshot",
        "  c.txt",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    let o = env.run(RETRACE, &["restore", &id[..12], "--dry-run", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["result"], "preview", "{v}");
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["would_write"], serde_json::json!(["a.txt"]), "{v}");
    assert_eq!(
        v["would_delete"],
        serde_json::json!(["b.txt", "c.txt"]),
        "{v}"
    );
    assert_eq!(v["refused"]["result"], "dirty", "{v}");
    assert_eq!(v["refused"]["paths"], serde_json::json!(["c.txt"]), "{v}");
    assert_eq!(v["refused"]["count"], 1, "{v}");
    assert!(
        v["refused"]["message"]
            .as_str()
            .unwrap()
            .contains("--force")
    );
    // Nothing was written.
    assert_eq!(env.read("a.txt"), "two");
    assert_eq!(env.read("c.txt"), "unsaved");
    // With --force the restore would go ahead.
    let o = env.run(
        RETRACE,
        &["restore", &id[..12], "--dry-run", "--force", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["result"], "preview", "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["refused"], serde_json::Value::Null, "{v}");
    assert_eq!(v["would_write"], serde_json::json!(["a.txt"]), "{v}");
}

#[test]
fn exit_codes_distinguish_refusal_usage_and_errors() {
    let env = Env::new();
    env.write("a.txt", "one");
    let id = common::snapshot_id(&env);
    env.write("a.txt", "unsaved");
    let refused = env.run(RETRACE, &["restore", &id[..12]]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("a.txt"));
    assert_eq!(
        env.run(RETRACE, &["no-such-command"]).status.code(),
        Some(2)
    );
    let missing = env.run(RETRACE, &["-C", "/nonexistent/dir", "status"]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "a missing -C directory is a usage error"
    );
    assert!(stderr(&missing).contains("/nonexistent/dir"));
    let forced = env.run(RETRACE, &["restore", &id[..12], "--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(env.read("a.txt"), "one");
}

#[test]
fn the_demo_runs_to_the_end() {
    let env = Env::new();
    let o = env.run(RETRACE, &["demo"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("all steps passed"));
}

#[test]
fn cli_tour_snapshot_log_diff_restore_status() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}\n");
    env.write("notes.md", "# notes\n");
    let o = env.run(RETRACE, &["snapshot", "--label", "first", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let first: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for key in ["id", "files", "bytes", "new_bytes", "skipped"] {
        assert!(
            first.get(key).is_some(),
            "snapshot --json lacks {key}: {first}"
        );
    }
    let id = first["id"].as_str().unwrap().to_string();
    env.write("src/main.rs", "fn main() { broken }\n");
    env.write("added.txt", "new");
    let diff = env.run(RETRACE, &["diff", &id[..8], "--json"]);
    let d: serde_json::Value = serde_json::from_str(&stdout(&diff)).unwrap();
    assert_eq!(d["added"], serde_json::json!(["added.txt"]));
    assert_eq!(d["modified"], serde_json::json!(["src/main.rs"]));
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let log = env.run(RETRACE, &["log"]);
    assert!(stdout(&log).contains("first"), "{}", stdout(&log));
    let dry = env.run(RETRACE, &["restore", &id[..10], "--dry-run"]);
    assert!(
        stdout(&dry).contains("would delete added.txt"),
        "{}",
        stdout(&dry)
    );
    assert!(env.path("added.txt").exists());
    let r = env.run(RETRACE, &["restore", &id[..10]]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(!env.path("added.txt").exists());
    let status = env.run(RETRACE, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(s["workspace"]["changed_count"], 0, "{s}");
    assert_eq!(
        s["workspace"]["last_known"].as_str(),
        Some(id.as_str()),
        "{s}"
    );
    let human = stdout(&env.run(RETRACE, &["status"]));
    assert!(
        human.contains("node_modules") && human.contains("clean"),
        "{human}"
    );
    env.write("src/main.rs", "fn main() { edited }\n");
    let status = env.run(RETRACE, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert_eq!(
        s["workspace"]["changed"],
        serde_json::json!(["src/main.rs"]),
        "{s}"
    );
}

#[test]
fn a_snapshot_killed_midway_loses_nothing_and_the_next_one_repairs_the_store() {
    let env = Env::new();
    for i in 0..3000 {
        env.write(
            &format!("d{}/f{i}.txt", i % 30),
            format!("{i} ").repeat(400),
        );
    }
    let first = env.run(RETRACE, &["snapshot", "--json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let first_id = serde_json::from_str::<serde_json::Value>(&stdout(&first)).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for round in 0..6u64 {
        for i in 0..300 {
            env.write(
                &format!("d{}/f{i}.txt", i % 30),
                format!("round {round} {i} ").repeat(300),
            );
        }
        let mut child = env
            .command(RETRACE, &["snapshot"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Let it get some way in (different distances each round), then SIGKILL it.
        std::thread::sleep(std::time::Duration::from_millis(5 + round * 15));
        child.kill().unwrap();
        child.wait().unwrap();
        let dump = env.run(common::RETRACE_DUMP, &["verify"]);
        let out = stdout(&dump);
        assert!(
            dump.status.success() || out.contains("not closed cleanly"),
            "round {round}: {out}"
        );
        // The next command repairs the store; every earlier snapshot is intact.
        let next = env.run(RETRACE, &["snapshot", "--json"]);
        assert!(next.status.success(), "round {round}: {}", stderr(&next));
        assert_verified(&env);
        let diff = env.run(RETRACE, &["diff", &first_id[..12], "--json"]);
        assert!(diff.status.success(), "round {round}: {}", stderr(&diff));
    }
}

#[test]
fn retrace_dump_lists_trees_prints_objects_and_reports_stats() {
    let env = Env::new();
    env.write("src/lib.rs", "pub fn f() {}\n");
    env.write("README.md", "# readme\n");
    let id = common::snapshot_id(&env);
    let root = env.run(common::RETRACE_DUMP, &["tree", &id[..10]]);
    assert!(root.status.success(), "{}", stderr(&root));
    assert!(stdout(&root).contains("README.md") && stdout(&root).contains("dir "));
    let src = stdout(&env.run(common::RETRACE_DUMP, &["tree", &id[..10], "src"]));
    let line = src
        .lines()
        .find(|l| l.ends_with("lib.rs"))
        .expect("src/lib.rs listed");
    let blob = line.split_whitespace().nth(1).unwrap();
    let cat = env.run(common::RETRACE_DUMP, &["cat", blob]);
    assert_eq!(stdout(&cat), "pub fn f() {}\n");
    let stats = env.run(common::RETRACE_DUMP, &["stats", "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(stdout(&stats).lines().next().unwrap()).unwrap();
    assert_eq!(v["snapshots"], 1);
    assert_eq!(v["trees"], 2);
    assert!(v["disk_to_log_ratio"].as_f64().is_some(), "{v}");
}

#[test]
fn a_restore_that_cannot_write_one_directory_writes_nothing() {
    let env = Env::new();
    env.write("locked/a.txt", "v1");
    env.write("open/b.txt", "v1");
    let as_user = |args: &[&str]| env.run_as_user(RETRACE, args);
    if is_root() {
        for p in [env.root(), env.home.path()] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o777)).unwrap();
        }
        for p in ["locked", "open", "locked/a.txt", "open/b.txt"] {
            let mode = if p.ends_with(".txt") { 0o666 } else { 0o777 };
            fs::set_permissions(env.path(p), fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    let o = as_user(&["snapshot", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.write("locked/a.txt", "v2");
    env.write("open/b.txt", "v2");
    assert!(as_user(&["snapshot"]).status.success());
    // The user may no longer write in locked/.
    fs::set_permissions(env.path("locked"), fs::Permissions::from_mode(0o555)).unwrap();
    let o = as_user(&["restore", &id[..12]]);
    fs::set_permissions(env.path("locked"), fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("locked") && stderr(&o).contains("ermission"),
        "{}",
        stderr(&o)
    );
    // Nothing was written, and nothing is left to recover.
    assert_eq!(env.read("open/b.txt"), "v2");
    assert_eq!(env.read("locked/a.txt"), "v2");
    let o = as_user(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["workspace"].get("pending_recovery"),
        Some(&serde_json::Value::Null),
        "{v}"
    );
    // Once writable again the same restore succeeds.
    assert!(as_user(&["restore", &id[..12]]).status.success());
    assert_eq!(env.read("open/b.txt"), "v1");
    assert_eq!(env.read("locked/a.txt"), "v1");
}

#[test]
fn shell_completions_and_the_man_page_come_from_the_cli_definition() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = env.run(RETRACE, &["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        for word in ["undo", "navigate", "completions"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
        assert!(
            script.contains("--session") || script.contains("-l session"),
            "{shell} lacks --session"
        );
    }
    // The bash script is valid bash.
    let script = stdout(&env.run(RETRACE, &["completions", "bash"]));
    let f = env.home.path().join("retrace.bash");
    fs::write(&f, script).unwrap();
    let o = std::process::Command::new("bash")
        .arg("-n")
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The man page is roff naming every command.
    let o = env.run(RETRACE, &["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.contains(".TH retrace 1"), "{page}");
    for command in ["snapshot", "restore", "undo", "redo", "install", "navigate"] {
        assert!(page.contains(command), "the man page lacks {command}");
    }
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH EXAMPLES",
        "RETRACE_HOME",
        "RETRACE_SESSION",
    ] {
        assert!(page.contains(section), "the man page lacks {section}");
    }
    // The description says more than the tagline.
    assert!(page.contains("never over an edit made since"), "{page}");
    // A page per command, with its exit status and examples.
    let o = env.run(RETRACE, &["man", "undo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let undo = stdout(&o);
    assert!(undo.contains(".TH retrace-undo 1"), "{undo}");
    assert!(undo.contains(".SH \"EXIT STATUS\""), "{undo}");
    assert!(undo.contains("retrace undo \\-\\-dry\\-run"), "{undo}");
    let o = env.run(RETRACE, &["man", "no-such-command"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let dir = env.home.path().join("man1");
    let o = env.run(RETRACE, &["man", "--dir", &dir.display().to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for name in ["retrace.1", "retrace-undo.1", "retrace-restore.1"] {
        assert!(dir.join(name).is_file(), "no {name}: {}", stdout(&o));
    }
    assert!(!dir.join("retrace-hook.1").exists(), "plumbing has no page");
    let o = env.run(RETRACE, &["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Each binary names itself in `--version` (and so in its help and usage lines).
#[test]
fn each_binary_names_itself_in_its_version() {
    let env = Env::new();
    for (bin, name) in [(RETRACE, "retrace "), (RETRACE_DUMP, "retrace-dump ")] {
        let o = env.run(bin, &["--version"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).starts_with(name), "{bin}: {}", stdout(&o));
    }
}

/// Asserts the command `args` exited 0, showing its output if not.
fn exits_0(o: &std::process::Output, args: &[&str]) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}{}",
        stdout(o),
        stderr(o)
    );
}

/// `log` on a fresh project is an empty answer, not a refusal: exit 0 in text and JSON alike.
#[test]
fn log_of_a_fresh_project_succeeds_in_text_and_json() {
    let env = Env::new();
    for args in [&["log"][..], &["log", "--json"]] {
        let o = env.run(RETRACE, args);
        exits_0(&o, args);
    }
}

/// `diff` with no changes is an empty answer: exit 0, in text and JSON alike.
#[test]
fn a_diff_with_no_changes_succeeds() {
    let env = Env::new();
    env.write("a.txt", "one");
    let snap = env.run(RETRACE, &["snapshot", "--json"]);
    assert!(snap.status.success(), "{}", stderr(&snap));
    let v: serde_json::Value = serde_json::from_str(&stdout(&snap)).unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    for json in [false, true] {
        let mut args = vec!["diff", id.as_str()];
        if json {
            args.push("--json");
        }
        let o = env.run(RETRACE, &args);
        exits_0(&o, &args);
    }
}
