//! Action state for external clients: published while a process has a session open,
//! updated by every operation, removed when the process lets the session go; directories of
//! dead processes are swept.

use std::path::PathBuf;

use crate::common::{self, Env};
use retrace::{Config, Mode, Workspace};
use serde_json::Value;

fn state_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .min_depth(2)
        .into_iter()
        .flatten()
        .map(|e| e.path().to_path_buf())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    out.sort();
    out
}

#[test]
fn state_appears_follows_operations_and_disappears() {
    // A process sweeps once, at its first publish: that must be this test's.
    if !common::in_own_process("runtime_state::state_appears_follows_operations_and_disappears") {
        return;
    }
    let env = Env::new();
    let runtime = tempfile::tempdir().unwrap();
    // A stale directory of a process that no longer exists (pid far above pid_max).
    let stale = runtime.path().join("999999999");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("old.json"), "{}").unwrap();
    let rt = runtime.path().display().to_string();
    let ws = Workspace::open(
        env.root(),
        &Config::with_home(env.home.path()).configure(|s| s.runtime_dir.value = rt),
    )
    .unwrap();
    let s = ws.session("published");
    let t = s.begin_turn(Some("m1".into()), Some("p".into())).unwrap();
    t.wait_before(std::time::Duration::from_mins(1)).unwrap();
    env.write("f.txt", "x");
    t.end(Some("m2".into())).unwrap();
    assert!(!stale.exists(), "a dead process's state is swept");
    let files = state_files(runtime.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let dir = files[0].parent().unwrap();
    assert_eq!(
        dir.file_name().unwrap(),
        std::process::id().to_string().as_str()
    );
    let read = || -> Value { serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap() };
    let v = read();
    assert_eq!(
        (v["can_undo"].as_bool(), v["can_redo"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(v["leaf"], "m2");
    let rev = v["revision"].as_u64().unwrap();
    s.undo(Mode::Both).unwrap();
    let v = read();
    assert_eq!(
        (v["can_undo"].as_bool(), v["can_redo"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(v["last_result"]["result"], "restored");
    assert!(v["revision"].as_u64().unwrap() > rev);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // The process lets the session go: its state goes with it.
    drop((s, ws));
    assert!(state_files(runtime.path()).is_empty());
    assert!(!dir.exists());
}

/// A directory whose pid now belongs to another process (its recorded start time differs) is
/// swept; one whose owner is alive and the same is kept.
#[test]
fn a_reused_pid_does_not_keep_a_dead_processs_state() {
    let env = Env::new();
    let runtime = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let start = retrace::lease::start_time(me).unwrap();
    // This test process is alive; one directory says it was started at another time (the
    // pid was reused), the other at the right time.
    let reused = runtime.path().join(me.to_string());
    std::fs::create_dir_all(&reused).unwrap();
    std::fs::write(reused.join(".owner"), (start + 1).to_string()).unwrap();
    std::fs::write(reused.join("old.json"), "{}").unwrap();
    let parent = std::os::unix::process::parent_id();
    let alive = runtime.path().join(parent.to_string());
    std::fs::create_dir_all(&alive).unwrap();
    let parent_start = retrace::lease::start_time(parent).unwrap();
    std::fs::write(alive.join(".owner"), parent_start.to_string()).unwrap();
    std::fs::write(alive.join("live.json"), "{}").unwrap();
    // Another process publishes (and so sweeps once).
    let o = env
        .command(common::RETRACE, &["--session", "s", "turn", "begin"])
        .env("RETRACE_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(!reused.exists(), "the reused pid's directory is swept");
    assert!(
        alive.join("live.json").exists(),
        "a live owner's state is kept"
    );
}
