//! Workspace policy: the home directory (and above), a filesystem root and the temp
//! directory keep conversation history only, with a warning; their subfolders are ordinary
//! workspaces. And everything retrace keeps is private whatever the umask.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::{RETRACE, stderr, stdout};
use serde_json::Value;

struct Home {
    home: tempfile::TempDir,
    store: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let h = Home {
            home: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(h.home.path().join(".ssh")).unwrap();
        std::fs::write(h.home.path().join(".ssh/config"), "Host *").unwrap();
        std::fs::create_dir_all(h.home.path().join("project")).unwrap();
        std::fs::write(h.home.path().join("project/main.rs"), "fn main() {}").unwrap();
        h
    }

    fn run(&self, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
        Command::new(RETRACE)
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("HOME", self.home.path())
            .env("RETRACE_HOME", self.store.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .output()
            .unwrap()
    }
}

#[test]
fn the_home_directory_keeps_conversation_history_only() {
    let h = Home::new();
    let home = h.home.path();
    let o = h.run(home, &["snapshot"]);
    assert_eq!(o.status.code(), Some(1), "a refused place refuses (exit 1)");
    assert!(stderr(&o).contains("home directory"), "{}", stderr(&o));
    // A session still works, conversation-only, with a warning; nothing is captured.
    let o = h.run(home, &["--session", "s", "turn", "begin", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("never snapshots files"),
        "{}",
        stderr(&o)
    );
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["before"], "conversation_only", "{v}");
    let o = h.run(home, &["--session", "s", "turn", "end", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = h.run(home, &["--session", "s", "undo", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["result"], "conversation_only", "{v}");
    let o = h.run(home, &["status", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(
        v["workspace"]["conversation_only"]
            .as_str()
            .unwrap()
            .contains("home"),
        "{v}"
    );
    // Its subfolders are ordinary workspaces.
    let o = h.run(&home.join("project"), &["snapshot", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["files"], 1);
}

#[test]
fn a_filesystem_root_and_the_temp_directory_are_refused() {
    let h = Home::new();
    for dir in [std::path::PathBuf::from("/"), std::env::temp_dir()] {
        let o = h.run(&dir, &["snapshot"]);
        assert_eq!(o.status.code(), Some(1), "{}", dir.display());
        assert!(
            stderr(&o).contains("filesystem root") || stderr(&o).contains("temporary directory"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn everything_kept_is_private_under_umask_000() {
    let h = Home::new();
    let project = h.home.path().join("project");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000 && {RETRACE} -C '{}' snapshot && {RETRACE} -C '{}' --session s turn begin",
            project.display(),
            project.display()
        ))
        .env("HOME", h.home.path())
        .env("RETRACE_HOME", h.store.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut checked = 0;
    for e in walkdir::WalkDir::new(h.store.path()).min_depth(1) {
        let e = e.unwrap();
        let want = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(e.path()), want, "{}", e.path().display());
        checked += 1;
    }
    assert!(
        checked >= 6,
        "store dir, workspaces, store, statcache, lock, host-id..."
    );
}
