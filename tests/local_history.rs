//! Local history: `retrace watch --record` captures a snapshot after each burst of writes
//! (an editor's saves: atomic renames, backup files, appends), never while a session's turn
//! runs; `retrace log` names each burst and what it changed, `retrace restore` brings any
//! back exactly, and maintenance thins them by age (with a clock the test sets).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Env, RETRACE, stderr, stdout};
use retrace::{BurstOutcome, Config, Workspace};

fn cli(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// The snapshot log's entries, newest first.
fn log(env: &Env) -> Vec<Value> {
    let v: Value = serde_json::from_str(&cli(env, &["log", "--json"])).unwrap();
    v["entries"].as_array().unwrap().clone()
}

fn bursts(env: &Env) -> Vec<Value> {
    log(env)
        .into_iter()
        .filter(|e| !e["burst"].is_null())
        .collect()
}

/// Waits (without a deadline a loaded machine could miss: five minutes) until the newest
/// burst names `path`, and returns it.
fn burst_naming(env: &Env, path: &str, after: usize) -> Value {
    let start = Instant::now();
    loop {
        let b = bursts(env);
        if b.len() > after
            && b[0]["burst"]["paths"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == path)
        {
            return b[0].clone();
        }
        assert!(
            start.elapsed() < Duration::from_mins(5),
            "no burst names {path}: {b:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An editor's save: the new content to a temporary file, renamed over the old.
fn save_atomically(dir: &Path, name: &str, content: &str) {
    let tmp = dir.join(format!(".{name}.swp-tmp"));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// vim's save with `backup`: the old file kept as `name~` while the new one is written,
/// then the backup removed.
fn save_with_backup(dir: &Path, name: &str, content: &str) {
    let backup = dir.join(format!("{name}~"));
    std::fs::rename(dir.join(name), &backup).unwrap();
    std::fs::write(dir.join(name), content).unwrap();
    std::fs::remove_file(backup).unwrap();
}

fn append(dir: &Path, name: &str, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join(name))
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

#[test]
fn an_editors_saves_become_bursts_that_the_log_names_and_restore_brings_back_exactly() {
    let env = Env::new();
    env.write("notes.txt", "v0\n");
    env.write("app.log", "start\n");
    let o = env
        .command(RETRACE, &["watch", "--detach", "--record"])
        .env("RETRACE_BURST_QUIET_MS", "200")
        .env("RETRACE_BURST_INTERVAL_MS", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("recording bursts"), "{}", stdout(&o));
    let dir = env.root();
    // The recorder's first capture: what the workspace held when it started.
    let start = Instant::now();
    while bursts(&env).is_empty() {
        assert!(start.elapsed() < Duration::from_mins(5), "no first burst");
        std::thread::sleep(Duration::from_millis(50));
    }

    save_atomically(dir, "notes.txt", "v1\n");
    let first = burst_naming(&env, "notes.txt", 0);
    let n = bursts(&env).len();
    save_with_backup(dir, "notes.txt", "v2\n");
    burst_naming(&env, "notes.txt", n);
    let n = bursts(&env).len();
    append(dir, "app.log", "more\n");
    let third = burst_naming(&env, "app.log", n);
    assert!(third["burst"]["modified"].as_u64() >= Some(1), "{third:#}");

    // The text log names the burst and what it changed (a machine that stalled inside the
    // backup save may have taken its last part, the backup's removal, with the append).
    let text = cli(&env, &["log"]);
    assert!(
        text.lines()
            .any(|l| l.contains("burst: ") && l.contains("~1") && l.contains("app.log")),
        "{text}"
    );

    // Any burst restores exactly.
    let id = first["id"].as_str().unwrap();
    cli(&env, &["restore", id]);
    assert_eq!(env.read("notes.txt"), "v1\n");
    assert_eq!(env.read("app.log"), "start\n");
    assert!(!env.path("notes.txt~").exists());

    // While a session's turn runs, its writes are the turn's: no burst takes them.
    let n = bursts(&env).len();
    cli(
        &env,
        &["--session", "s1", "turn", "begin", "--prompt", "edit"],
    );
    env.write("by-agent.txt", "agent\n");
    cli(&env, &["--session", "s1", "turn", "end"]);
    env.write("after.txt", "user\n");
    burst_naming(&env, "after.txt", n);
    for b in bursts(&env) {
        let paths = b["burst"]["paths"].as_array().unwrap();
        assert!(!paths.iter().any(|p| p == "by-agent.txt"), "{b:#}");
    }
    cli(&env, &["watch", "--stop"]);
}

#[test]
fn maintenance_thins_old_bursts_and_frees_what_only_they_held() {
    let env = Env::new();
    env.write("f.txt", "0\n");
    let ws = Workspace::open(env.root(), &Config::with_home(env.home.path())).unwrap();
    let base = ws.snapshot(Some("base".into())).unwrap().id;
    let mut ids = Vec::new();
    for i in 1..=4 {
        env.write("f.txt", format!("version {i}\n"));
        match ws.capture_burst().unwrap() {
            BurstOutcome::Captured { root, summary, .. } => {
                assert_eq!(summary.counts, [0, 1, 0]);
                assert_eq!(summary.paths, ["f.txt"]);
                ids.push(root);
            }
            other => panic!("{other:?}"),
        }
        if i == 2 {
            // A snapshot the user took is never thinned.
            ws.snapshot(Some("mine".into())).unwrap();
        }
        if i == 3 {
            // Nor is one taken of a burst's state, though it adds no row of its own: the
            // burst's row becomes the user's.
            ws.snapshot(None).unwrap();
        }
    }
    // Nothing changed: no burst.
    assert_eq!(ws.capture_burst().unwrap(), BurstOutcome::Unchanged);
    let wc = ws.working_copy();
    let now = retrace::store::now_ms();
    // Half an hour later, every burst is kept.
    let r = retrace::retention::maintain(wc, now + 1_800_000, 0).unwrap();
    assert_eq!(r.bursts_thinned, 0);
    assert_eq!(ws.log().unwrap().len(), 6);
    // Two days later: one a day, the newest, which is also the log's newest.
    let r = retrace::retention::maintain(wc, now + 2 * 86_400_000, 0).unwrap();
    assert_eq!(
        r.bursts_thinned, 2,
        "burst 4 is the day's newest; 'mine' and burst 3 are the user's"
    );
    let left: Vec<_> = ws.log().unwrap().iter().map(|s| s.root).collect();
    assert_eq!(
        left,
        [ids[3], ids[2], ids[1], base],
        "newest first: burst 4, burst 3 (the user's), 'mine' (= burst 2), 'base'"
    );
    // What only the thinned bursts held is collected: version 1 is gone.
    let reader = wc.store().reader().unwrap();
    for (i, gone) in [(1, true), (2, false), (3, false), (4, false)] {
        let blob = retrace::ObjectId::of_blob(format!("version {i}\n").as_bytes());
        assert_eq!(!reader.contains(&blob).unwrap(), gone, "version {i}");
    }
    // Eight days later the daily window is over, but the log's newest snapshot stays.
    retrace::retention::maintain(wc, now + 8 * 86_400_000, 0).unwrap();
    assert!(ws.log().unwrap().iter().any(|s| s.root == ids[3]));
}
