//! Crash safety with real processes: a restore aborted at an exact point is rolled forward by
//! the next command without overwriting later edits, and a loop SIGKILLs undo, redo,
//! navigation, restore, capture and garbage collection at random moments, checking after
//! each kill that the next command works, the store verifies, and the workspace is the state
//! before or after the interrupted operation (never a mix) with a history that agrees. A
//! second loop kills captures that write deltas and collections that evict turns for a byte
//! budget and store deltas whole again, checking the store and every turn left.
//! `RETRACE_KILL_ITERATIONS` sets the loop's length (default 200). The aborted restore uses
//! the hook `RETRACE_FAULT_ABORT_AFTER_WRITES`: it needs the cargo feature `fault-injection`
//! and is ignored without it.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{self, Env, Node, RETRACE, RETRACE_DUMP, stderr, stdout, tree_of};
use serde_json::Value;

type Tree = BTreeMap<PathBuf, Node>;

/// A workspace of `files` files in 16 directories, and one session turn that modifies half
/// of them, deletes a tenth and adds a tenth. Returns the states before and after the turn.
fn setup(env: &Env, files: usize) -> (Tree, Tree) {
    for i in 0..files {
        let body: String = (0..40).map(|l| format!("file {i} line {l}\n")).collect();
        env.write(&format!("d{:02}/f{i:04}.txt", i % 16), body);
    }
    run_ok(env, &["turn", "begin", "--prompt", "big change"]);
    let before = tree_of(env.root());
    for i in 0..files {
        let p = format!("d{:02}/f{i:04}.txt", i % 16);
        if i % 10 == 3 {
            fs::remove_file(env.path(&p)).unwrap();
        } else if i % 2 == 0 {
            env.write(&p, format!("rewritten by the agent {i}\n").repeat(30));
        }
    }
    for i in 0..files / 10 {
        env.write(&format!("new/n{i:04}.txt"), format!("new file {i}\n"));
    }
    run_ok(env, &["turn", "end"]);
    (before, tree_of(env.root()))
}

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--session", "crash"];
    a.extend_from_slice(rest);
    a
}

fn run_ok(env: &Env, rest: &[&str]) -> String {
    let o = env.run(RETRACE, &args(rest));
    assert!(
        o.status.success(),
        "retrace {rest:?} failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o) + &stderr(&o)
}

fn cursor(env: &Env) -> Option<u64> {
    let o = env.run(RETRACE, &args(&["status", "--json"]));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    v["session"]["cursor"].as_u64()
}

fn verify(env: &Env) -> Result<(), String> {
    let o = env.run(RETRACE_DUMP, &["verify"]);
    if o.status.success() {
        Ok(())
    } else {
        Err(stdout(&o) + &stderr(&o))
    }
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn an_undo_aborted_midway_is_completed_without_overwriting_later_edits() {
    let env = Env::new();
    let (before, after) = setup(&env, 120);
    // The undo dies after 20 of its file operations.
    let o = env
        .command(RETRACE, &args(&["undo"]))
        .env("RETRACE_FAULT_ABORT_AFTER_WRITES", "20")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the fault hook must abort the undo");
    let mid = tree_of(env.root());
    assert!(
        mid != before && mid != after,
        "the abort left a partial undo"
    );

    // While another process holds the workspace, status reports the pending recovery, and
    // the read-only commands answer without waiting for the lock at all: with an hour's
    // wait configured, each must still finish (the limit only turns a hang into a failure).
    let lock = Env::lock_path(&env);
    let held = File::options().write(true).open(&lock).unwrap();
    held.lock().unwrap();
    let read_only = |rest: &[&str]| {
        let o = common::output_within(
            env.command(RETRACE, rest)
                .env("RETRACE_HISTORY_WAIT_MS", "3600000"),
            Duration::from_secs(300),
        );
        assert!(
            o.status.code().is_some(),
            "retrace {rest:?} waited for the lock"
        );
        let warning = stderr(&o);
        assert!(
            warning.contains("a restore (undo of turn 1) is in progress in process"),
            "retrace {rest:?}: {warning}"
        );
        stdout(&o)
    };
    let v: Value = serde_json::from_str(read_only(&["status", "--json"]).trim()).unwrap();
    assert!(
        v["workspace"]["pending_recovery"]
            .as_str()
            .is_some_and(|p| p.contains("undo of turn 1")),
        "{v}"
    );
    read_only(&["log"]);
    read_only(&args(&["status"]));
    read_only(&args(&["log"]));
    held.unlock().unwrap();

    // The user edits a path the undo had not reached yet, and another file, after the crash.
    let pending: Vec<PathBuf> = after
        .keys()
        .filter(|p| mid.get(*p) == after.get(*p) && before.get(*p) != after.get(*p))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .cloned()
        .collect();
    let edited = pending[0].to_string_lossy().into_owned();
    env.write(&edited, "the user's edit after the crash\n");
    env.write("notes.md", "unrelated user file\n");

    // The next command completes the undo and says so.
    let o = env.run(RETRACE, &args(&["status"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let report = stderr(&o);
    assert!(
        report.contains("recovered an interrupted undo of turn 1"),
        "{report}"
    );
    assert!(report.contains(&edited), "{report}");
    let now = tree_of(env.root());
    for (p, node) in &before {
        if p.to_string_lossy() != edited {
            assert_eq!(now.get(p), Some(node), "{} not restored", p.display());
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        assert!(!now.contains_key(p), "{} not removed", p.display());
    }
    assert_eq!(env.read(&edited), "the user's edit after the crash\n");
    assert_eq!(env.read("notes.md"), "unrelated user file\n");
    // The history agrees: the undo happened, redo is possible, and the disk as found was kept.
    assert_eq!(cursor(&env), None);
    let log = stdout(&env.run(RETRACE, &["log"]));
    assert!(
        log.contains("found when recovering an interrupted undo"),
        "{log}"
    );
    verify(&env).unwrap();
    // Nothing is left to recover.
    let o = env.run(RETRACE, &args(&["status"]));
    assert!(!stderr(&o).contains("recovered"), "{}", stderr(&o));
}

/// A small deterministic generator (no dependency needed for a test's random delays).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

#[test]
fn sigkill_at_random_moments_never_leaves_a_mix() {
    let iterations: usize = std::env::var("RETRACE_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("RETRACE_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let mut rng = Lcg(seed);
    let env = Env::new();
    let (s0, s1) = setup(&env, 400);
    // How long an uninterrupted undo and redo take: kills land within that span.
    let t = Instant::now();
    run_ok(&env, &["undo"]);
    run_ok(&env, &["redo"]);
    let span = (t.elapsed() / 2).as_micros() as u64 * 3 / 2;
    let log: Value =
        serde_json::from_str(run_ok(&env, &["log", "--json"]).lines().next().unwrap()).unwrap();
    let (id0, id1) = (
        log["entries"][0]["before"].as_str().unwrap().to_string(),
        log["entries"][0]["after"].as_str().unwrap().to_string(),
    );
    let (mut interrupted, mut failures) = (0, Vec::new());
    for i in 0..iterations {
        let at_s1 = tree_of(env.root()) == s1;
        let was = cursor(&env);
        // The operation, the state it leads to, and the cursor it leaves.
        let (op, expected, then): (Vec<&str>, &Tree, Option<u64>) = match (i % 7, at_s1) {
            // A collection (with compaction) changes no file and no history.
            (6, _) => (
                vec!["gc", "--grace", "0"],
                if at_s1 { &s1 } else { &s0 },
                was,
            ),
            (5, _) => (vec!["snapshot"], if at_s1 { &s1 } else { &s0 }, was),
            (4, true) => (vec!["restore", "--force", &id0], &s0, was),
            (4, false) => (vec!["restore", "--force", &id1], &s1, was),
            (3, true) => (vec!["navigate", "turn:1:before"], &s0, None),
            (3, false) => (vec!["navigate", "turn:1"], &s1, Some(1)),
            (_, true) => (vec!["undo"], &s0, None),
            (_, false) => (vec!["redo"], &s1, Some(1)),
        };
        let before = if at_s1 { &s1 } else { &s0 };
        let mut command = env.command(RETRACE, &args(&op));
        if i % 2 == 1 {
            // Half of them the way of a big restore: objects checked present, then verified
            // as they are written, frame by frame.
            command.env("RETRACE_FAULT_KEEP_BYTES", "0");
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(span)));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // The next command must work (it recovers whatever the kill interrupted).
        let o = env.run(RETRACE, &args(&["status"]));
        if !o.status.success() {
            failures.push(format!("{i} {op:?}: status failed: {}", stderr(&o)));
            continue;
        }
        if stderr(&o).contains("recovered an interrupted") {
            interrupted += 1;
        }
        let now = tree_of(env.root());
        let state = if now == *before {
            "before"
        } else if now == *expected {
            "after"
        } else {
            let odd: Vec<_> = now
                .iter()
                .filter(|(p, n)| before.get(*p) != Some(n) && expected.get(*p) != Some(n))
                .map(|(p, _)| p.display().to_string())
                .chain(
                    before
                        .keys()
                        .chain(expected.keys())
                        .filter(|p| !now.contains_key(*p))
                        .map(|p| format!("missing {}", p.display())),
                )
                .take(10)
                .collect();
            failures.push(format!(
                "{i} {op:?}: the workspace is a mix: {odd:?}; status said: {}",
                stderr(&o)
            ));
            break;
        };
        let want = if now == *before { was } else { then };
        if cursor(&env) != want && !(state == "before" && now == *expected) {
            failures.push(format!(
                "{i} {op:?} ({state}): the history disagrees with the files"
            ));
        }
        if let Err(e) = verify(&env) {
            failures.push(format!("{i} {op:?}: verify: {e}"));
        }
    }
    println!(
        "kill loop (seed {seed}): {iterations} iterations, {interrupted} killed mid-restore \
         and recovered, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
    assert!(
        interrupted > 0 || iterations < 50,
        "no kill landed inside a restore (seed {seed}); the timing window is wrong"
    );
}

/// A line-oriented text file of about 40 KB (version `v` differs in one line per step).
fn delta_file(n: usize, v: usize) -> String {
    (0..1500)
        .map(|l| {
            if l == (v * 53 + n * 7) % 1500 {
                format!("file {n} edited at step {v}\n")
            } else {
                format!("file {n} line {l}: let value_{l} = compute({n}, {l});\n")
            }
        })
        .collect()
}

/// Captures that write deltas, and collections that evict turns for a byte budget and store
/// the deltas left without their base whole again, SIGKILLed at random moments: after each
/// kill the store verifies, the newest turn undoes and redoes exactly, and at the end every
/// turn still in the history navigates to exactly the files it recorded.
#[test]
fn sigkill_during_delta_captures_and_rebasing_gc_loses_nothing() {
    let iterations: usize = std::env::var("RETRACE_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(45, |n| n / 4);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Lcg(seed);
    let env = Env::new();
    let mut version = [0usize; 6];
    for (n, v) in version.iter().enumerate() {
        env.write(&format!("src/f{n}.rs"), delta_file(n, *v));
    }
    run_ok(&env, &["snapshot"]);
    let timed = |op: &[&str]| {
        let t = Instant::now();
        run_ok(&env, op);
        t.elapsed().as_micros() as u64 * 3 / 2
    };
    let budget = ("RETRACE_MAX_STORE_BYTES", "400KiB");
    let (mut states, mut failures, mut killed) = (Vec::new(), Vec::new(), 0);
    for i in 0..iterations {
        run_ok(&env, &["turn", "begin", "--prompt", &format!("step {i}")]);
        let before = tree_of(env.root());
        for n in [i % 6, (i + 2) % 6] {
            version[n] += 1;
            env.write(&format!("src/f{n}.rs"), delta_file(n, version[n]));
        }
        // And 20 KB that does not compress, so the byte budget below evicts old turns.
        env.write("noise.bin", common::noise(i as u64, 20_000));
        let after = tree_of(env.root());
        // A capture of the new versions (deltas), killed somewhere; the turn's end then
        // captures whatever it did not commit.
        let span = if i == 0 {
            200_000
        } else {
            timed(&["status"]) * 4
        };
        let mut child = env
            .command(RETRACE, &args(&["snapshot"]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(span)));
        let _ = child.kill();
        killed += usize::from(!child.wait().unwrap().success());
        run_ok(&env, &["turn", "end"]);
        states.push((i + 1, before.clone(), after.clone()));
        if i % 3 == 2 {
            // A collection over a small budget: old turns go, deltas become whole.
            let mut child = env
                .command(RETRACE, &args(&["gc", "--grace", "0"]))
                .env(budget.0, budget.1)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_micros(rng.below(span * 3)));
            let _ = child.kill();
            killed += usize::from(!child.wait().unwrap().success());
        }
        // The next command repairs what a kill left (the read-only verifier cannot).
        run_ok(&env, &["status"]);
        if let Err(e) = verify(&env) {
            failures.push(format!("{i}: verify: {e}"));
            break;
        }
        run_ok(&env, &["undo"]);
        if tree_of(env.root()) != before {
            failures.push(format!("{i}: undo did not give the turn's before-state"));
            break;
        }
        run_ok(&env, &["redo"]);
        if tree_of(env.root()) != after {
            failures.push(format!("{i}: redo did not give the turn's after-state"));
            break;
        }
    }
    // One last collection, run to its end, then every turn that is left, both ways.
    let o = env
        .command(RETRACE, &args(&["gc", "--grace", "0"]))
        .env(budget.0, budget.1)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let log: Value =
        serde_json::from_str(run_ok(&env, &["log", "--json"]).lines().next().unwrap()).unwrap();
    let kept: Vec<u64> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "turn" && e["state"] == "complete")
        .filter_map(|e| e["number"].as_u64())
        .collect();
    for (n, before, after) in &states {
        if !kept.contains(&(*n as u64)) {
            continue;
        }
        let turn = format!("turn:{n}");
        for (target, want) in [(format!("{turn}:before"), before), (turn.clone(), after)] {
            let o = env.run(RETRACE, &args(&["navigate", &target]));
            let now = tree_of(env.root());
            if o.status.success() && now != *want {
                let odd: Vec<_> = want
                    .iter()
                    .filter(|(p, n)| now.get(*p) != Some(n))
                    .map(|(p, _)| p.display().to_string())
                    .collect();
                failures.push(format!("{target} differs at {odd:?}: {}", stdout(&o)));
            }
        }
    }
    println!(
        "delta kill loop (seed {seed}): {iterations} turns, {killed} commands killed, {} turns \
         kept, {} failures; the last collection: {}",
        kept.len(),
        failures.len(),
        stdout(&o).trim()
    );
    assert!(
        kept.len() >= 2 && kept.len() < iterations,
        "the budget evicted old turns but not all: {} kept",
        kept.len()
    );
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
    assert!(verify(&env).is_ok());
}

/// A restore whose write fails midway (the disk refuses it, as a full one does) puts back
/// every path it had changed and says so: no mix of states, no interrupted restore for the
/// next command, the history unchanged; once the cause is gone the same undo works.
#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_restore_whose_write_fails_midway_puts_the_workspace_back_and_says_so() {
    let env = Env::new();
    let (before, after) = setup(&env, 120);
    let cursor_after = cursor(&env);
    for (fail_at, cmd) in [("20", vec!["undo"]), ("1", vec!["undo"])] {
        let o = env
            .command(RETRACE, &args(&cmd))
            .env("RETRACE_FAULT_FAIL_WRITE", fail_at)
            .env("RAYON_NUM_THREADS", "1")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(!o.status.success(), "the failed write must fail the undo");
        assert!(
            err.contains("No space left on device")
                && err.contains("the restore stopped and put back")
                && err.contains("the workspace is as it was"),
            "{err}"
        );
        assert!(tree_of(env.root()) == after, "not put back exactly");
        assert_eq!(cursor(&env), cursor_after, "the history moved");
        let status = run_ok(&env, &["status"]);
        assert!(!status.contains("interrupted"), "{status}");
        verify(&env).unwrap();
    }
    // A forced restore of an older snapshot fails the same way and is put back too.
    let o = env.run(RETRACE, &args(&["log", "--snapshots", "--json"]));
    let log: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let oldest = log["entries"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|s| s["id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no snapshots: {log}"));
    let o = env
        .command(RETRACE, &args(&["restore", &oldest, "--force"]))
        .env("RETRACE_FAULT_FAIL_WRITE", "7")
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("put back"), "{}", stderr(&o));
    assert!(tree_of(env.root()) == after, "restore not put back exactly");
    // Without the fault, the undo goes through.
    run_ok(&env, &["undo"]);
    assert!(tree_of(env.root()) == before, "the undo after the failures");
    verify(&env).unwrap();
}
