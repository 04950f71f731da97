//! A hostile world during a restore: a directory swapped for a symlink to elsewhere, files
//! edited while the restore writes and deletes. Each race is run at exact points (the
//! `RETRACE_FAULT_PAUSE` hook stops the restore, the test changes the workspace, the restore
//! goes on) and free-running (a helper thread acts as soon as the restore's first temp file
//! appears), and proves that nothing outside the workspace is written or deleted and that
//! every concurrent edit survives in the workspace. The tests that use the hooks
//! (`RETRACE_FAULT_*`) need the cargo feature `fault-injection` and are ignored without it.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::{self, Env, Node, RETRACE, stderr, stdout, tree_of, wait_paused};

/// A workspace with `a/f0000..` at v1 (snapshot S1), then v2 (S2); with `extra`, S2 also
/// adds `a/x0000..` (so restoring S1 deletes them). Returns (S1, S2).
fn setup(env: &Env, files: usize, extra: bool) -> (String, String) {
    for i in 0..files {
        env.write(&format!("a/f{i:04}"), format!("v1 of {i}\n"));
    }
    let s1 = snapshot(env);
    for i in 0..files {
        env.write(&format!("a/f{i:04}"), format!("v2 of {i}, longer\n"));
        if extra {
            env.write(&format!("a/x{i:04}"), format!("added in v2: {i}\n"));
        }
    }
    (s1, snapshot(env))
}

fn snapshot(env: &Env) -> String {
    common::snapshot_id(env)
}

/// A directory outside the workspace holding files with the workspace's names.
fn outside(files: usize) -> (tempfile::TempDir, BTreeMap<PathBuf, Node>) {
    let d = tempfile::tempdir().unwrap();
    for i in 0..files {
        fs::write(d.path().join(format!("f{i:04}")), "outside: must survive\n").unwrap();
        fs::write(d.path().join(format!("x{i:04}")), "outside: must survive\n").unwrap();
    }
    let before = tree_of(d.path());
    (d, before)
}

fn swap(env: &Env, target: &Path) {
    fs::rename(env.path("a"), env.path("a.real")).unwrap();
    std::os::unix::fs::symlink(target, env.path("a")).unwrap();
}

fn restore(env: &Env, id: &str, pause: Option<(&str, usize, &Path)>) -> Child {
    common::spawn_paused(env, &["restore", id, "--force"], pause)
}

fn finish(child: Child) -> String {
    let o = child.wait_with_output().unwrap();
    stdout(&o) + &stderr(&o)
}

/// Every file's content anywhere under `root` (the user can get back anything here).
fn all_content(root: &Path) -> String {
    let mut out = String::new();
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        if e.file_type().is_file() {
            out.push_str(&fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

/// Every file's content in every snapshot the store keeps (log, history, last known state).
fn stored_content(env: &Env) -> String {
    let ws = env.open();
    let roots = ws.gc_roots().unwrap();
    let path = ws.store_path().to_path_buf();
    drop(ws);
    let store = retrace::store::Store::open_read_only(&path).unwrap();
    let reader = store.reader().unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    for root in roots {
        for e in retrace::diff::flatten(&reader, &root).unwrap() {
            let file = matches!(
                e.kind,
                retrace::object::EntryKind::File | retrace::object::EntryKind::Executable
            );
            if file && seen.insert(e.id) {
                out.push_str(&String::from_utf8_lossy(&reader.read_blob(&e.id).unwrap()));
            }
        }
    }
    out
}

/// Asserts that every line is in the workspace, or in a snapshot (an edit made before the
/// restore captured the disk is in its safety snapshot; a restore that left paths records
/// the disk after it).
fn assert_survived(env: &Env, lines: &[String], what: &str, log: &str) {
    let here = all_content(env.root());
    let missing: Vec<&String> = lines
        .iter()
        .filter(|l| !here.contains(l.as_str()))
        .collect();
    if missing.is_empty() {
        return;
    }
    let stored = stored_content(env);
    for line in missing {
        assert!(
            stored.contains(line.as_str()),
            "{what}: lost {line:?}\n{log}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_directory_swapped_for_a_symlink_at_exact_points_never_redirects_writes_or_deletes() {
    let files = 60;
    for (extra, point, n) in [
        (false, "done", 1),
        (false, "done", 30),
        (false, "done", 59),
        (false, "taken", 1),
        (false, "taken", 45),
        (true, "done", 1),
        (true, "done", 20),
        (true, "done", 100),
        (true, "taken", 2),
        (true, "taken", 70),
    ] {
        let env = Env::new();
        let (s1, _) = setup(&env, files, extra);
        let (out, before) = outside(files);
        let pause = env.home.path().join("paused");
        let mut child = restore(&env, &s1, Some((point, n, &pause)));
        assert!(wait_paused(&mut child, &pause), "{point}:{n} never reached");
        swap(&env, out.path());
        fs::remove_file(&pause).unwrap();
        let log = finish(child);
        assert_eq!(
            tree_of(out.path()),
            before,
            "{point}:{n} (deletes: {extra}): the outside directory changed\n{log}"
        );
        // Nothing was lost either: the next command works and `a.real` holds a version of
        // every file.
        let o = env.run(RETRACE, &["status"]);
        assert!(o.status.code() != Some(3), "{}", stderr(&o));
        for i in 0..files {
            assert!(env.path(&format!("a.real/f{i:04}")).exists(), "{log}");
        }
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_mid_restore_never_redirects_writes_or_deletes() {
    // 50 runs that swap during the writes, 50 during the deletes.
    let files = 120;
    for run in 0..100 {
        let extra = run % 2 == 1;
        let env = Env::new();
        let (s1, _) = setup(&env, files, extra);
        let (out, before) = outside(files);
        let child = restore(&env, &s1, None);
        // Swap as soon as the restore's first temp file appears in `a/`.
        let dir = env.path("a");
        let mut swapped = false;
        let mut child = child;
        while !swapped && child.try_wait().unwrap().is_none() {
            let busy = fs::read_dir(&dir).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(".retrace-tmp-"))
            });
            if busy {
                swap(&env, out.path());
                swapped = true;
            }
        }
        let log = finish(child);
        assert_eq!(
            tree_of(out.path()),
            before,
            "run {run} (deletes: {extra}, swapped: {swapped}): outside changed\n{log}"
        );
    }
}

/// Appends `line` as an editor would; returns whether it reached a file of the workspace
/// (false: the file was deleted before the line was written).
fn append_line(path: &Path, line: &str) -> bool {
    // A line written into a file the restore had already unlinked reached no file of the
    // workspace (see docs/crash-model.md, Limits): write it again, as an editor would.
    loop {
        let Ok(mut f) = fs::OpenOptions::new().append(true).open(path) else {
            return false;
        };
        f.write_all(line.as_bytes()).unwrap();
        if f.metadata().unwrap().nlink() > 0 {
            return true;
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn edits_made_at_exact_points_of_a_restore_survive() {
    let files = 40;
    // With `extra`, the restore first deletes 40 files, then writes 40.
    for (extra, point, n) in [
        (false, "done", 1),
        (false, "done", 20),
        (false, "taken", 1),
        (false, "taken", 10),
        (false, "taken", 39),
        (true, "done", 1),
        (true, "done", 39),
        (true, "taken", 1),
        (true, "taken", 20),
        (true, "taken", 41),
        (true, "taken", 70),
    ] {
        let env = Env::new();
        let (s1, _) = setup(&env, files, extra);
        let pause = env.home.path().join("paused");
        let mut child = restore(&env, &s1, Some((point, n, &pause)));
        assert!(wait_paused(&mut child, &pause), "{point}:{n} never reached");
        // Edit files the restore has written, the one it holds, and ones it has not reached;
        // the one taken out is at a temp name, so edit every file through the directory.
        let mut lines = Vec::new();
        for e in fs::read_dir(env.path("a")).unwrap().flatten() {
            let line = format!(
                "edit at {point}:{n} of {}\n",
                e.file_name().to_string_lossy()
            );
            assert!(append_line(&e.path(), &line));
            lines.push(line);
        }
        fs::remove_file(&pause).unwrap();
        let log = finish(child);
        assert_survived(
            &env,
            &lines,
            &format!("{point}:{n} (deletes: {extra})"),
            &log,
        );
        assert!(log.contains("changed during the restore"), "{log}");
    }
}

#[test]
fn edits_made_while_a_restore_runs_survive() {
    let files = 120;
    // 50 runs that edit files the restore writes, 50 that also edit files it deletes.
    for run in 0..100 {
        let env = Env::new();
        let extra = run % 2 == 1;
        let (s1, _) = setup(&env, files, extra);
        let stop = Arc::new(AtomicBool::new(false));
        let root = env.root().to_path_buf();
        let editor = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut lines = Vec::new();
                let mut k = 0;
                while !stop.load(Ordering::SeqCst) {
                    // The last ten files the restore writes, and (odd runs) deletes.
                    let i = files - 1 - (k % 10);
                    let name = if k % 20 < 10 || !extra {
                        format!("f{i:04}")
                    } else {
                        format!("x{i:04}")
                    };
                    let line = format!("run {run} edit {k} of {name}\n");
                    if append_line(&root.join("a").join(&name), &line) {
                        lines.push(line);
                    }
                    k += 1;
                    // Pacing, not timing: the restore needs the CPU too.
                    std::thread::yield_now();
                }
                lines
            })
        };
        let log = finish(restore(&env, &s1, None));
        stop.store(true, Ordering::SeqCst);
        let lines = editor.join().unwrap();
        assert_survived(&env, &lines, &format!("run {run}"), &log);
    }
}

#[test]
fn names_of_the_longest_length_restore_and_never_wedge_the_workspace() {
    let env = Env::new();
    let long = "n".repeat(255);
    let long240 = "m".repeat(240);
    env.write(&long, "v1\n");
    env.write(&format!("d/{long240}"), "v1\n");
    env.write("other", "other v1\n");
    let s1 = snapshot(&env);
    env.write(&long, "v2\n");
    fs::remove_file(env.path(&format!("d/{long240}"))).unwrap();
    env.write("other", "other v2 unsaved\n");
    let o = env.run(RETRACE, &["restore", &s1, "--force"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(env.read(&long), "v1\n");
    assert_eq!(env.read(&format!("d/{long240}")), "v1\n");
    assert_eq!(env.read("other"), "other v1\n");
    // Nothing is pending, and every later command works.
    for args in [&["status"][..], &["gc"], &["log"]] {
        let o = env.run(RETRACE, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("interrupted"), "{}", stderr(&o));
    }
}

#[test]
fn a_refused_forced_undo_leaves_the_history_as_it_was() {
    let env = Env::new();
    let s = |rest: &[&str]| {
        let mut a = vec!["--session", "s"];
        a.extend_from_slice(rest);
        env.run(RETRACE, &a)
    };
    env.write("a/keep", "keep\n");
    assert!(s(&["turn", "begin", "--prompt", "p"]).status.success());
    env.write("a/keep", "changed by the agent\n");
    assert!(s(&["turn", "end"]).status.success());
    let out = tempfile::tempdir().unwrap();
    fs::write(out.path().join("f"), "outside\n").unwrap();
    swap(&env, out.path());
    let o = s(&["undo", "--force"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("not a real directory"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        fs::read_to_string(out.path().join("f")).unwrap(),
        "outside\n"
    );
    // The next command finds nothing to recover, and turn 1 is still the one to undo.
    let o = s(&["status", "--json"]);
    let all = stdout(&o) + &stderr(&o);
    assert!(!all.contains("recovered"), "{all}");
    assert!(!all.contains("interrupted"), "{all}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["session"]["cursor"], 1, "{v}");
}

#[test]
fn only_snapshots_are_restorable() {
    let env = Env::new();
    env.write("top", "top\n");
    env.write("sub/inner", "inner\n");
    let s1 = snapshot(&env);
    let listing = stdout(&env.run(common::RETRACE_DUMP, &["tree", &s1]));
    // The ids of the sub-tree and of a file, from retrace-dump's listing.
    let id_of = |name: &str| {
        listing
            .lines()
            .find(|l| l.contains(name))
            .and_then(|l| l.split_whitespace().find(|w| w.len() == 64))
            .unwrap_or_else(|| panic!("{listing}"))
            .to_string()
    };
    let (sub, file) = (id_of("sub"), id_of("top"));
    for (id, what) in [(&sub, "directory"), (&file, "file")] {
        let o = env.run(RETRACE, &["restore", id, "--force"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("not a snapshot"), "{}", stderr(&o));
        assert!(stderr(&o).contains(what), "{}", stderr(&o));
    }
    assert_eq!(env.read("top"), "top\n");
    assert_eq!(env.read("sub/inner"), "inner\n");
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn an_edit_to_a_version_taken_out_survives_a_kill_and_the_recovery() {
    let env = Env::new();
    let (s1, _) = setup(&env, 20, false);
    let pause = env.home.path().join("paused");
    let mut child = restore(&env, &s1, Some(("taken", 5, &pause)));
    assert!(wait_paused(&mut child, &pause));
    // The version taken out of its path sits under a temp name: edit it, then kill the
    // restore before it can look.
    let taken: Vec<PathBuf> = fs::read_dir(env.path("a"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".retrace-tmp-"))
        .collect();
    assert_eq!(taken.len(), 1, "{taken:?}");
    append_line(&taken[0], "edited while taken out\n");
    child.kill().unwrap();
    child.wait().unwrap();
    fs::remove_file(&pause).unwrap();
    let o = env.run(RETRACE, &["status"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("kept as"), "{}", stderr(&o));
    assert!(
        all_content(env.root()).contains("edited while taken out\n"),
        "{}",
        stderr(&o)
    );
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_recovery_that_cannot_write_is_abandoned_unclaimed_and_never_wedges() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let env = Env::new();
    for i in 0..20 {
        env.write(&format!("a/f{i:02}"), "v1\n");
    }
    // As root every directory is writable: act as an unprivileged user instead.
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    if common::is_root() {
        for p in [env.root(), env.home.path(), &env.path("a")] {
            mode(p, 0o777);
        }
        for i in 0..20 {
            mode(&env.path(&format!("a/f{i:02}")), 0o666);
        }
    }
    let run = |args: &[&str], vars: &[(&str, &str)]| {
        let mut a = vec!["--session", "s"];
        a.extend_from_slice(args);
        let mut c = env.command(RETRACE, &a);
        c.envs(vars.iter().copied());
        if common::is_root() {
            c.uid(65534).gid(65534);
        }
        c.output().unwrap()
    };
    assert!(
        run(&["turn", "begin", "--prompt", "p"], &[])
            .status
            .success()
    );
    for i in 0..20 {
        env.write(&format!("a/f{i:02}"), "v2 by the agent\n");
    }
    assert!(run(&["turn", "end"], &[]).status.success());
    // The undo dies after 5 files; then its directory can no longer be written.
    let o = run(
        &["undo"],
        &[
            ("RETRACE_FAULT_ABORT_AFTER_WRITES", "5"),
            ("RAYON_NUM_THREADS", "1"),
        ],
    );
    assert!(!o.status.success());
    mode(&env.path("a"), 0o555);
    let o = run(&["status"], &[]);
    let said = stderr(&o);
    assert!(said.contains("cannot be completed"), "{said}");
    assert!(said.contains("history left as it was"), "{said}");
    // Never again: the next commands find nothing pending, and the turn is still applied.
    let o = run(&["status", "--json"], &[]);
    assert!(!stderr(&o).contains("interrupted"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["session"]["cursor"], 1, "{v}");
    // Once the directory is writable again, the user can finish the undo.
    mode(&env.path("a"), 0o777);
    let o = run(&["undo", "--force"], &[]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    for i in 0..20 {
        assert_eq!(env.read(&format!("a/f{i:02}")), "v1\n");
    }
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_write_into_the_restores_own_version_after_it_was_put_back_survives() {
    // An editor opens `a/f0001` while the restore's version is at the path, the restore
    // finds the version it took out was edited and swaps it back, and the editor writes
    // into the restore's version (now at a temp name) before it is unlinked.
    let env = Env::new();
    let (s1, _) = setup(&env, 4, false);
    let taken = env.home.path().join("taken");
    let back = env.home.path().join("back");
    let mut child = env.command(RETRACE, &["restore", &s1, "--force"]);
    child
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RAYON_NUM_THREADS", "1")
        .env(
            "RETRACE_FAULT_PAUSE",
            format!("taken:2:{},back:1:{}", taken.display(), back.display()),
        );
    let mut child = child.spawn().unwrap();
    assert!(wait_paused(&mut child, &taken), "taken:2 never reached");
    // The restore's version is at the path; the one taken out is the only temp file.
    let mut ours = fs::OpenOptions::new()
        .append(true)
        .open(env.path("a/f0001"))
        .unwrap();
    let out: Vec<PathBuf> = fs::read_dir(env.path("a"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".retrace-tmp-"))
        .collect();
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(append_line(&out[0], "the user's edit\n"));
    fs::remove_file(&taken).unwrap();
    assert!(wait_paused(&mut child, &back), "back:1 never reached");
    ours.write_all(b"a late write\n").unwrap();
    assert!(ours.metadata().unwrap().nlink() > 0);
    fs::remove_file(&back).unwrap();
    let log = finish(child);
    let lines = [
        "the user's edit\n".to_string(),
        "a late write\n".to_string(),
    ];
    let here = all_content(env.root());
    for line in &lines {
        assert!(here.contains(line.as_str()), "lost {line:?}\n{log}");
    }
    assert!(
        fs::read_to_string(env.path("a/f0001"))
            .unwrap()
            .contains("the user's edit"),
        "{log}"
    );
}
