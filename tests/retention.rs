//! Retention with an injected clock (no sleeping): expiry at the boundary, 0 = forever,
//! tombstones, the session count, and the byte budget holding over 500 turns.

use std::time::Duration;

use crate::common::{Env, RETRACE, assert_verified, noise, stderr, stdout, wait_for_pass};
use retrace::config::Settings;
use retrace::store::now_ms;
use retrace::{Config, Mode, Outcome, Session, TurnState, Workspace};

const DAY: u64 = 86_400_000;
const HOUR: u64 = 3_600_000;

fn open(env: &Env, f: impl FnOnce(&mut Settings)) -> Workspace {
    Workspace::open(env.root(), &Config::with_home(env.home.path()).configure(f)).unwrap()
}

fn turn(s: &Session, edit: impl FnOnce()) {
    let t = s.begin_turn(None, None).unwrap();
    t.wait_before(Duration::from_mins(1)).unwrap();
    edit();
    t.end(None).unwrap();
}

#[test]
fn a_session_expires_just_after_the_retention_period_and_resumes() {
    let env = Env::new();
    let ws = open(&env, |s| s.retention_days.value = 7.0);
    let s = ws.session("old");
    turn(&s, || env.write("f.txt", noise(1, 100_000)));
    let t0 = now_ms();
    let r = ws.maintain(t0 + 7 * DAY - HOUR, 0).unwrap();
    assert!(r.expired_sessions.is_empty(), "{r:?}");
    let r = ws.maintain(t0 + 7 * DAY + HOUR, 0).unwrap();
    assert_eq!(r.expired_sessions.len(), 1, "{r:?}");
    assert!(
        r.gc.objects_freed > 0,
        "its snapshots were collected: {r:?}"
    );
    assert_verified(&env);
    // Resuming (a new handle, as a new process would): a warning, then the expired turn
    // moves only the conversation; new turns work normally.
    let again = open(&env, |s| s.retention_days.value = 7.0);
    let s = again.session("old");
    assert!(
        again.warnings().iter().any(|w| w.contains("expired")),
        "{:?}",
        again.warnings()
    );
    let o = s.undo(Mode::Both).unwrap();
    assert!(matches!(o, Outcome::Expired { .. }), "{o:?}");
    assert!(env.path("f.txt").exists());
    turn(&s, || env.write("g.txt", "new"));
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
    assert!(!env.path("g.txt").exists());
}

#[test]
fn zero_keeps_history_forever() {
    let env = Env::new();
    let ws = open(&env, |s| s.retention_days.value = 0.0);
    let s = ws.session("kept");
    turn(&s, || env.write("f.txt", "x"));
    let r = ws.maintain(now_ms() + 1000 * DAY, 0).unwrap();
    assert!(
        r.expired_sessions.is_empty() && r.tombstones_pruned == 0,
        "{r:?}"
    );
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
}

#[test]
fn expired_sessions_are_removed_after_twice_the_retention() {
    let env = Env::new();
    let ws = open(&env, |s| s.retention_days.value = 1.0);
    let s = ws.session("t");
    turn(&s, || env.write("f.txt", "x"));
    let t0 = now_ms();
    assert_eq!(
        ws.maintain(t0 + DAY + HOUR, 0)
            .unwrap()
            .expired_sessions
            .len(),
        1
    );
    assert_eq!(
        s.log().unwrap().entries.len(),
        1,
        "the tombstone keeps the turn's anchors"
    );
    let r = ws.maintain(t0 + 2 * DAY + HOUR, 0).unwrap();
    assert_eq!(r.tombstones_pruned, 1, "{r:?}");
    assert!(s.log().unwrap().entries.is_empty());
}

#[test]
fn the_least_recently_used_sessions_beyond_the_count_go() {
    let env = Env::new();
    let ws = open(&env, |s| s.max_sessions.value = 3);
    for i in 0..5 {
        let s = ws.session(&format!("s{i}"));
        turn(&s, || env.write(&format!("f{i}"), "x"));
        std::thread::sleep(Duration::from_millis(2)); // distinct "last used" times
    }
    // Two days on: no process has refreshed their "in use" marks since.
    let r = ws.maintain(now_ms() + 2 * DAY, 3600).unwrap();
    assert_eq!(r.sessions_dropped, 2, "{r:?}");
    for i in 0..5 {
        let turns = ws.session(&format!("s{i}")).status().unwrap().turns;
        assert_eq!(turns, usize::from(i >= 2), "session s{i}");
    }
}

#[test]
fn the_byte_budget_holds_over_500_turns() {
    const BUDGET: u64 = 3 << 20;
    const FILE: usize = 32 * 1024;
    let env = Env::new();
    let ws = open(&env, |s| s.max_store_bytes.value = BUDGET);
    let s = ws.session("busy");
    let other = ws.session("idle");
    turn(&other, || env.write("other.txt", noise(0, FILE)));
    // The clock runs two hours ahead: every object is past the grace period.
    let clock = || now_ms() + 2 * HOUR;
    let mut sizes = Vec::new();
    let mut peak = 0;
    for n in 0..500u64 {
        turn(&s, || {
            env.write(&format!("f{}.bin", n % 10), noise(n + 1, FILE))
        });
        let size = ws.maintain(clock(), 3600).unwrap().store_bytes;
        peak = peak.max(size);
        sizes.push(size);
        // Within the budget after every pass (the live state itself is about 350 KB).
        assert!(
            size <= BUDGET,
            "turn {n}: {size} bytes over the {BUDGET}-byte budget"
        );
    }
    println!(
        "store bytes per turn (every 50th): {:?}",
        sizes.iter().step_by(50).collect::<Vec<_>>()
    );
    println!("peak {peak} bytes for a {BUDGET}-byte budget over 500 turns of {FILE}-byte files");
    // Without eviction the history alone would be 500 × 32 KiB = 16 MB.
    assert!(peak > BUDGET / 2, "the budget was actually exercised");
    // The newest turn (the cursor's) is never evicted: it still undoes exactly.
    let o = s.undo(Mode::Both).unwrap();
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    assert_eq!(std::fs::read(env.path("f9.bin")).unwrap(), noise(490, FILE));
    // The idle session lost its old turn's files first, but keeps its applied one.
    assert!(other.status().unwrap().can_undo);
    assert_verified(&env);
}

/// The one warning of a pass that cannot meet the byte budget.
fn budget_warnings(text: &str) -> usize {
    text.matches("more than its byte budget").count()
}

#[test]
fn a_snapshot_over_the_byte_budget_stays_in_the_log_and_restores() {
    let env = Env::new();
    // The store, created within its budget: a new store is maintained as it is created.
    env.write("small.txt", "small");
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let budget = |args: &[&str]| {
        env.command(RETRACE, args)
            .env("RETRACE_MAX_STORE_BYTES", "64KiB")
            .output()
            .unwrap()
    };
    // A snapshot over the budget makes a pass due at once. The pass runs in the background
    // after the command has answered; what it warns about, the next command says.
    let snapshot = |content: &[u8]| {
        env.write("big.bin", content);
        let started = now_ms();
        let o = budget(&["snapshot"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(budget_warnings(&stderr(&o)), 0, "{}", stderr(&o));
        let id = stdout(&o).split_whitespace().nth(1).unwrap()[..12].to_string();
        wait_for_pass(&env, started);
        let log = budget(&["log"]);
        assert!(stdout(&log).contains(&id), "{id} missing from the log");
        (id, stderr(&log))
    };
    let restores = |id: &str, content: &[u8]| {
        std::fs::remove_file(env.path("big.bin")).unwrap();
        let o = env.run(RETRACE, &["restore", "--force", id]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read(env.path("big.bin")).unwrap(), content);
    };
    // The due pass after the snapshot finds nothing it may evict: it keeps the snapshot,
    // and the next command says so, once.
    let (id, err) = snapshot(&noise(1, 300_000));
    assert_eq!(budget_warnings(&err), 1, "{err}");
    restores(&id, &noise(1, 300_000));
    // Still over after the next snapshot: the newest is kept, the warning not repeated.
    let (id, err) = snapshot(&noise(2, 300_000));
    assert_eq!(budget_warnings(&err), 0, "{err}");
    restores(&id, &noise(2, 300_000));
    assert_verified(&env);
}

#[test]
fn the_byte_budget_never_evicts_the_tops_of_the_undo_and_redo_stacks() {
    let env = Env::new();
    let ws = open(&env, |s| s.max_store_bytes.value = 64 << 10);
    let s = ws.session("s");
    for n in 1..=3 {
        turn(&s, || env.write("f.bin", noise(n, 200_000)));
    }
    let o = s.undo(Mode::Both).unwrap(); // undo stack: 2, 1; redo stack: 3
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    let clock = now_ms() + 2 * HOUR; // every object is past the grace period
    let r = ws.maintain(clock, 3600).unwrap();
    // Only turn 1 may go, and evicting it cannot bring the store under the budget: it stays.
    assert_eq!(r.turns_evicted, 0, "{r:?}");
    assert!(r.over_budget, "{r:?}");
    assert_eq!(budget_warnings(&ws.warnings().join("\n")), 1);
    // Nothing changed: no second warning.
    assert!(ws.maintain(clock, 3600).unwrap().over_budget);
    assert_eq!(budget_warnings(&ws.warnings().join("\n")), 1);
    assert_verified(&env);
    // Redo and undo still restore files, each one step.
    let o = s.redo().unwrap();
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    assert_eq!(std::fs::read(env.path("f.bin")).unwrap(), noise(3, 200_000));
    let o = s.undo(Mode::Both).unwrap();
    assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    assert_eq!(std::fs::read(env.path("f.bin")).unwrap(), noise(2, 200_000));
}

#[test]
fn the_byte_budget_evicts_abandoned_branches_before_the_undo_stack() {
    let env = Env::new();
    let ws = open(&env, |_| {});
    let s = ws.session("s");
    turn(&s, || env.write("f.bin", noise(1, 200_000)));
    turn(&s, || env.write("f.bin", noise(2, 200_000)));
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
    // A new turn after the undo: turn 2 is left on an abandoned branch (navigate reaches
    // it, undo and redo do not); turn 1 is still on the undo stack below turn 3.
    turn(&s, || env.write("f.bin", noise(3, 200_000)));
    let clock = now_ms() + 2 * HOUR;
    let packed = ws.maintain(clock, 3600).unwrap().store_bytes;
    // Room for all but about one file: evicting turn 2 alone meets it.
    let r = ws.enforce_budget(packed - 100_000, clock, 3600).unwrap();
    assert_eq!(r.turns_evicted, 1, "{r:?}");
    assert!(!r.over_budget, "{r:?}");
    let states: Vec<_> = s.log().unwrap().entries.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            Some(TurnState::Complete),
            Some(TurnState::Expired),
            Some(TurnState::Complete)
        ]
    );
    // Both undos still restore files.
    for content in [noise(1, 200_000), Vec::new()] {
        assert!(matches!(
            s.undo(Mode::Both).unwrap(),
            Outcome::Restored { .. }
        ));
        assert_eq!(
            std::fs::read(env.path("f.bin")).unwrap_or_default(),
            content
        );
    }
}

#[test]
fn the_newest_snapshot_outlives_the_retention_period() {
    let env = Env::new();
    let ws = open(&env, |s| s.retention_days.value = 1.0);
    env.write("a.txt", "one");
    ws.snapshot(None).unwrap();
    env.write("a.txt", "two");
    let newest = ws.snapshot(None).unwrap().id;
    let r = ws.maintain(now_ms() + 30 * DAY, 0).unwrap();
    assert_eq!(r.snapshots_pruned, 1, "{r:?}");
    let log = ws.log().unwrap();
    assert!(log.len() == 1 && log[0].root == newest, "{log:?}");
}

#[test]
fn a_session_open_in_some_process_is_never_expired() {
    let env = Env::new();
    let ws = open(&env, |s| s.retention_days.value = 1.0);
    let s = ws.session("open elsewhere");
    turn(&s, || env.write("f.txt", "x"));
    let later = now_ms() + 3 * DAY;
    // Another process that keeps the session open refreshes its mark every ten minutes.
    let mark = std::fs::read_dir(
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path()))
            .unwrap()
            .with_file_name("active"),
    )
    .unwrap()
    .next()
    .unwrap()
    .unwrap()
    .path();
    let at = std::time::UNIX_EPOCH + Duration::from_millis(later - HOUR);
    std::fs::File::options()
        .write(true)
        .open(&mark)
        .unwrap()
        .set_modified(at)
        .unwrap();
    let r = ws.maintain(later, 0).unwrap();
    assert!(
        r.expired_sessions.is_empty() && r.tombstones_pruned == 0,
        "{r:?}"
    );
    assert_eq!(r.in_use_kept, 1);
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
    // A day after its last refresh, it is no longer in use.
    let r = ws.maintain(later + DAY, 0).unwrap();
    assert_eq!(r.tombstones_pruned, 1, "{r:?}");
}

/// A workspace folder with one snapshot, its handles dropped.
fn workspace_at(path: &std::path::Path, home: &std::path::Path) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::write(path.join("a.txt"), "a").unwrap();
    let ws = Workspace::open(path, &Config::with_home(home)).unwrap();
    ws.snapshot(None).unwrap();
}

fn stores(home: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(home.join("workspaces"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_vanished_workspace_is_evicted_only_after_two_checks_a_day_idle_and_seven_days_aside() {
    use retrace::retention::sweep_home;
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    let (gone, back) = (base.path().join("gone"), base.path().join("back"));
    workspace_at(&gone, &home);
    workspace_at(&back, &home);
    let t0 = now_ms();
    std::fs::remove_dir_all(&gone).unwrap();
    std::fs::remove_dir_all(&back).unwrap();
    // First check: noted missing, nothing evicted.
    let r = sweep_home(&home, limits(64, 0), t0);
    assert_eq!(r.missing_noted.len(), 2, "{r:?}");
    assert!(r.vanished_evicted.is_empty());
    // One comes back (a remounted disk): its note is dropped.
    std::fs::create_dir_all(&back).unwrap();
    // Missing again later, but used recently: kept.
    let r = sweep_home(&home, limits(64, 0), t0 + 10_000);
    assert!(r.vanished_evicted.is_empty(), "{r:?}");
    // Idle a day and still missing: renamed aside, not deleted.
    let r = sweep_home(&home, limits(64, 0), t0 + DAY + HOUR);
    assert!(
        r.vanished_evicted.len() == 1 && r.vanished_evicted[0].ends_with("gone"),
        "{r:?}"
    );
    assert_eq!(
        stores(&home)
            .iter()
            .filter(|s| s.contains(".evicted-"))
            .count(),
        1
    );
    assert_eq!(
        stores(&home).len(),
        2,
        "the returned workspace's store stays"
    );
    // Seven days later the set-aside store is deleted.
    let r = sweep_home(&home, limits(64, 0), t0 + 9 * DAY);
    assert_eq!(r.deleted.len(), 1, "{r:?}");
    assert_eq!(stores(&home).len(), 1);
}

#[test]
fn the_least_recently_used_workspaces_beyond_the_count_are_set_aside() {
    use retrace::retention::sweep_home;
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    for name in ["one", "two", "three"] {
        workspace_at(&base.path().join(name), &home);
        std::thread::sleep(Duration::from_millis(5));
    }
    // Recently used: kept whatever the count.
    assert!(
        sweep_home(&home, limits(2, 0), now_ms())
            .lru_evicted
            .is_empty()
    );
    let r = sweep_home(&home, limits(2, 0), now_ms() + 2 * DAY);
    assert_eq!(r.lru_evicted.len(), 1, "{r:?}");
    assert!(r.lru_evicted[0].ends_with("one"), "{r:?}");
}

fn limits(max_workspaces: u64, max_total_bytes: u64) -> retrace::retention::HomeLimits {
    retrace::retention::HomeLimits {
        max_workspaces,
        max_total_bytes,
    }
}

#[test]
fn the_budget_across_workspaces_trims_the_least_recently_used_first() {
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    let mut names = Vec::new();
    for name in ["older", "newer"] {
        let root = base.path().join(name);
        std::fs::create_dir_all(&root).unwrap();
        let ws = Workspace::open(&root, &Config::with_home(&home)).unwrap();
        let s = ws.session("s");
        // Forty turns of a rewritten 32 KiB file: about 1.3 MB of history each.
        for n in 0..40u64 {
            let t = s.begin_turn(None, None).unwrap();
            t.wait_before(Duration::from_mins(1)).unwrap();
            std::fs::write(root.join("f.bin"), noise(n + 1, 32 * 1024)).unwrap();
            t.end(None).unwrap();
        }
        names.push(root);
        std::thread::sleep(Duration::from_millis(5));
    }
    let budget = 2 << 20;
    let r = retrace::retention::sweep_home(&home, limits(64, budget), now_ms() + 2 * DAY);
    assert!(r.total_bytes <= budget, "{r:?}");
    assert_eq!(
        r.budget_trimmed.len(),
        1,
        "only the older one needed trimming: {r:?}"
    );
    assert!(r.budget_trimmed[0].0.ends_with("older"), "{r:?}");
    // Both still undo their newest turn.
    for root in &names {
        let ws = Workspace::open(root, &Config::with_home(&home)).unwrap();
        assert!(ws.session("s").undo(Mode::Both).unwrap().is_success());
    }
}

fn packed_bytes(ws: &Workspace) -> u64 {
    ws.working_copy()
        .store()
        .reader()
        .unwrap()
        .packed_bytes()
        .unwrap()
}

#[test]
fn a_budget_over_delta_versions_keeps_the_history_and_never_grows_the_store() {
    // 40 turns each changing 16 bytes of a 200 KB random file: every version after the first
    // is a small delta. A budget a little below the packed size cannot be met by evicting
    // turns (each eviction stores a surviving version whole again): the pass keeps every
    // turn, leaves the store as it was, and says so once.
    let env = Env::new();
    let ws = open(&env, |_| {});
    let s = ws.session("s");
    let mut data = noise(9, 200_000);
    for n in 0..40usize {
        let at = (n * 4099) % (data.len() - 16);
        data[at..at + 16].copy_from_slice(&noise(1000 + n as u64, 16));
        turn(&s, || std::fs::write(env.path("r.bin"), &data).unwrap());
    }
    for _ in 0..3 {
        let o = s.undo(Mode::Both).unwrap();
        assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
    }
    let packed = packed_bytes(&ws);
    drop((s, ws));
    let clock = now_ms() + 2 * HOUR;
    for budget in [packed - 11 * 1024, packed - 4 * 1024, 100 * 1024] {
        let ws = open(&env, |s| s.max_store_bytes.value = budget);
        let r = ws.maintain(clock, 3600).unwrap();
        assert_eq!(r.turns_evicted, 0, "budget {budget}: {r:?}");
        assert!(r.over_budget, "budget {budget}: {r:?}");
        let after = packed_bytes(&ws);
        assert!(
            after <= packed,
            "budget {budget}: the store grew from {packed} to {after}"
        );
    }
    // Every turn still navigates.
    let ws = open(&env, |_| {});
    let s = ws.session("s");
    assert_eq!(s.log().unwrap().entries.len(), 40);
    drop((s, ws));
    assert_verified(&env);
}

/// The op-log records a session's turns write are folded (`docs/retention.md`, "The op
/// log"), as turns end and by a pass, and nothing a user sees changes: the timeline keeps
/// its undo, redo and checkpoint in the middle, the log its turns, the session its state;
/// undo and redo work after it.
#[test]
fn the_turns_ops_are_folded_and_the_session_reads_the_same() {
    let env = Env::new();
    let ws = open(&env, |_| {});
    let s = ws.session("long");
    let mut text = String::new();
    let mut edit = |i: u32| {
        text.push_str(&format!("line {i}\n"));
        env.write("f.txt", &text);
    };
    for i in 0..30 {
        turn(&s, || edit(i));
    }
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
    assert!(matches!(s.redo().unwrap(), Outcome::Restored { .. }));
    s.checkpoint(Some("middle".into())).unwrap();
    for i in 30..80 {
        turn(&s, || edit(i));
    }
    let key = retrace::history::db::session_key("long");
    let ops = |ws: &Workspace| {
        let tx = ws.working_copy().store().begin_read().unwrap();
        retrace::history::db::ops(&tx, &key).unwrap().len()
    };
    // 243 ops written; the turns' ends folded them as they went.
    assert!(ops(&ws) < 128, "{}", ops(&ws));
    let timeline = s.timeline().unwrap();
    let moments = |m: retrace::Moment| {
        timeline
            .entries
            .iter()
            .filter(|e| e.moment == m)
            .map(|e| e.entry.as_ref().map(|e| e.number))
            .collect::<Vec<_>>()
    };
    use retrace::Moment as M;
    assert_eq!(moments(M::Undo), [Some(30)]);
    assert_eq!(moments(M::Redo), [Some(30)]);
    assert_eq!(moments(M::Checkpoint), [Some(1)]);
    assert_eq!(moments(M::Turn).len(), 80);
    // What the session shows, but the bytes each entry added: recompression changes them.
    let shown = |v: serde_json::Value| {
        let mut text = v.to_string();
        while let Some(at) = text.find("\"bytes_added\":") {
            let end = at + text[at..].find([',', '}']).unwrap();
            text.replace_range(at..end, "");
        }
        text
    };
    let seen = |s: &Session| {
        (
            shown(serde_json::to_value(s.timeline().unwrap()).unwrap()),
            shown(serde_json::to_value(s.log().unwrap()).unwrap()),
            serde_json::to_value(s.status().unwrap()).unwrap(),
        )
    };
    let before = seen(&s);
    let ops_before = ops(&ws);
    let r = ws.maintain(now_ms(), 3600).unwrap();
    assert!(r.ops_folded > 0, "{r:?}");
    assert_eq!(ops(&ws), ops_before - r.ops_folded as usize);
    assert_eq!(before, seen(&s));
    // A second pass finds nothing more; the session goes on as before.
    assert_eq!(ws.maintain(now_ms(), 3600).unwrap().ops_folded, 0);
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::Restored { .. }
    ));
    assert_eq!(env.read("f.txt").lines().count(), 79);
    assert!(matches!(s.redo().unwrap(), Outcome::Restored { .. }));
    assert_eq!(env.read("f.txt").lines().count(), 80);
    assert_verified(&env);
}
