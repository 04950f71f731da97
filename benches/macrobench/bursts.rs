//! `--profile bursts`: local history (`retrace watch --record`) on a large workspace.
//!
//! `cargo bench --bench macrobench -- --profile bursts [--files N] [--layout macro|monorepo]
//! [--rounds R] [--idle SECS] [--dir PATH] [--reuse]`
//!
//! Workspace: the default profile's (`--layout macro`, N = 20,000 by default) or the monorepo
//! profile's (`--layout monorepo`, e.g. `--files 1000000`). Steps: a cold `retrace
//! snapshot`, the racy window, `retrace watch --detach --record` (default settings: quiet for
//! 1.5 s, at most a burst every 5 s), then R
//! rounds (10 by default) of an editor-like burst: 2 files appended to and 1 created at once,
//! then nothing until `retrace log --json` lists its burst. Per burst: the time from the last
//! write to the burst being in the log (what a user waits for it; the quiet period is most of
//! it), and the capture's own time as the recorder measured it (its log line). Then the
//! watcher's CPU time (user + system, from `/proc`) over `--idle` seconds (30 by default) of
//! an idle workspace. Targets (issue 42): a burst in the log within 2 s of the workspace going
//! quiet, its capture ≤ 30 ms at 1M files watched, nothing spent while idle.
//!
//! `... --profile bursts --week [--files N] [--every SECS]` simulates a week of local history
//! in minutes, in this process (the store's clock moved ahead, `store::set_clock_ahead`): 8
//! hours of work a day, a burst every `--every` seconds of it (10 by default) changing 2
//! files and adding 1, a maintenance pass every simulated hour (thinning, collection), on a
//! workspace of N files (2,000 by default). Then: the bursts `retrace log` lists against the
//! count docs/retention.md gives, and the store's bytes against what the kept snapshots alone
//! need (the same states captured into a fresh store, in order): the target is ≤ 1.2×.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::Tools;

const SESSION: &str = "bench";

/// `/proc/<pid>/stat`'s user + system time, in clock ticks (100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), counted from its `)`.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the `)`.
    field(11) + field(12)
}

/// Whether a burst in the log names `path`.
fn burst_names(t: &Tools, path: &str) -> bool {
    let o = t.retrace(&["log", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
    v["entries"].as_array().is_some_and(|e| {
        e.iter().any(|e| {
            e["burst"]["paths"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p == path))
        })
    })
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn main(args: &[String]) {
    if args.iter().any(|a| a == "--week") {
        return week(args);
    }
    let arg = |name: &str| super::arg(args, name);
    let monorepo = match arg("--layout").as_deref() {
        None | Some("macro") => false,
        Some("monorepo") => true,
        Some(l) => panic!("unknown --layout {l:?} (known: macro, monorepo)"),
    };
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rounds: usize = arg("--rounds").and_then(|v| v.parse().ok()).unwrap_or(10);
    let idle: u64 = arg("--idle").and_then(|v| v.parse().ok()).unwrap_or(30);
    let layout = if monorepo { "monorepo" } else { "macro" };
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("retrace-bench-bursts-{layout}-{files}")),
        PathBuf::from,
    );
    let t = Tools::under(&base, PathBuf::from(env!("CARGO_BIN_EXE_retrace")), SESSION);
    let started = Instant::now();
    let progress = |what: &str| eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    fs::create_dir_all(&base).unwrap();
    super::monorepo::remove_tree(&t.home);
    let marker = base.join(format!("generated-bursts-{layout}-{files}"));
    if args.iter().any(|a| a == "--reuse") && marker.exists() {
        progress(&format!("reusing {files} files in {}", t.root.display()));
    } else {
        let _ = fs::remove_file(&marker);
        progress(&format!("generating {files} files ({layout} layout) ..."));
        if monorepo {
            super::monorepo::generate(&t.root, files);
        } else {
            super::generate(&t.root, files);
        }
        fs::write(&marker, "").unwrap();
    }
    fs::create_dir_all(&t.home).unwrap();
    super::monorepo::settle_disk();
    let _ = fs::remove_dir_all(t.root.join("bursts-bench"));
    fs::create_dir_all(t.root.join("bursts-bench")).unwrap();
    progress("cold snapshot");
    t.retrace(&["snapshot", "cold"]);
    super::monorepo::wait_racy_window();

    progress("retrace watch --detach --record");
    let o = t.retrace(&["watch", "--detach", "--record"]);
    let pid: u32 = o
        .stdout
        .split("pid ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {:?}", o.stdout));
    let wait_for = |path: &str| {
        let start = Instant::now();
        while !burst_names(&t, path) {
            assert!(
                start.elapsed() < Duration::from_mins(10),
                "no burst names {path}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut latency = Vec::new();
    let dir = t.root.join("bursts-bench");
    for round in 0..rounds {
        // At most one burst every 5 s: the next burst waits out the interval first.
        std::thread::sleep(Duration::from_secs(5));
        let mut seed = round as u64 + 1;
        for i in 0..2 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let i_file = (seed >> 33) as usize % files.max(1);
            let p = t.root.join(if monorepo {
                super::monorepo::rel(i_file)
            } else {
                super::rel(i_file)
            });
            assert!(p.is_file(), "{} is not a file of the layout", p.display());
            let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
            std::io::Write::write_all(&mut f, format!("burst {round} {i}\n").as_bytes()).unwrap();
        }
        fs::write(dir.join(format!("new-{round}.txt")), "new\n").unwrap();
        let wrote = Instant::now();
        wait_for(&format!("bursts-bench/new-{round}.txt"));
        latency.push(wrote.elapsed());
    }
    // The recorder's own capture times, from its log lines.
    let log = fs::read_dir(t.home.join("runtime/watch"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    let mut capture: Vec<Duration> = log
        .lines()
        .filter_map(|l| l.split("(captured in ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse().ok())
        .map(Duration::from_millis)
        .collect();
    progress(&format!("idle for {idle} s"));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(idle));
    let idle_ticks = cpu_ticks(pid) - before;
    t.retrace(&["watch", "--stop"]);

    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    println!("\nlocal history on {files} files ({layout} layout), {rounds} bursts");
    println!("| measure | median | max |");
    println!("|---------|--------|-----|");
    let max_latency = *latency.iter().max().unwrap();
    println!(
        "| last write → burst in `retrace log` | {} | {} |",
        ms(median(&mut latency)),
        ms(max_latency)
    );
    if !capture.is_empty() {
        let max_capture = *capture.iter().max().unwrap();
        println!(
            "| the burst's capture (recorder) | {} | {} |",
            ms(median(&mut capture)),
            ms(max_capture)
        );
    }
    println!(
        "| watcher CPU while idle | {:.2} s in {idle} s | |",
        idle_ticks as f64 / 100.0
    );
    let quiet = Duration::from_millis(1500);
    println!(
        "\ntargets: in the log within 2 s of going quiet (median {} after the 1.5 s quiet \
         period): {}; idle CPU ≈ 0: {}",
        ms(median(&mut latency).saturating_sub(quiet)),
        if median(&mut latency) <= quiet + Duration::from_secs(2) {
            "met"
        } else {
            "NOT met"
        },
        if idle_ticks <= idle / 10 {
            "met"
        } else {
            "NOT met"
        }
    );
}

const HOUR_MS: u64 = 3_600_000;

/// `--week`: see the module docs.
fn week(args: &[String]) {
    use retrace::{BurstOutcome, Config, Workspace};
    let arg = |name: &str| super::arg(args, name);
    let files: usize = arg("--files").and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let every: u64 = arg("--every").and_then(|v| v.parse().ok()).unwrap_or(10);
    let base = std::env::temp_dir().join(format!("retrace-bench-bursts-week-{files}"));
    let _ = fs::remove_dir_all(&base);
    let (root, home) = (base.join("ws"), base.join("home"));
    super::generate(&root, files);
    let started = Instant::now();
    let progress = |what: &str| eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    let ws = Workspace::open(&root, &Config::with_home(&home)).unwrap();
    ws.snapshot(Some("start".into())).unwrap();
    // The simulated clock: day 0 09:00 is now; each burst moves it `every` seconds on.
    let real_start = retrace::store::now_ms();
    let day0 = real_start - real_start % (24 * HOUR_MS) + 24 * HOUR_MS + 9 * HOUR_MS;
    let mut seed = 1u64;
    let mut n = 0usize;
    let per_day = 8 * 3600 / every;
    let mut last_pass = day0;
    let end = day0 + 6 * 24 * HOUR_MS + 8 * HOUR_MS;
    for day in 0..7u64 {
        for i in 0..per_day {
            let sim = day0 + day * 24 * HOUR_MS + i * every * 1000;
            // Set the clock so that now_ms() reads `sim`.
            retrace::store::set_clock_ahead(0);
            let real = retrace::store::now_ms();
            retrace::store::set_clock_ahead(sim.saturating_sub(real));
            for _ in 0..2 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let p = root.join(super::rel((seed >> 33) as usize % files));
                if p.is_file() {
                    let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
                    std::io::Write::write_all(&mut f, format!("burst {n}\n").as_bytes()).unwrap();
                }
            }
            fs::create_dir_all(root.join("week")).unwrap();
            fs::write(root.join(format!("week/new-{n}.txt")), format!("new {n}\n")).unwrap();
            n += 1;
            match ws.capture_burst().unwrap() {
                BurstOutcome::Captured { .. } => {}
                other => panic!("burst {n}: {other:?}"),
            }
            if sim - last_pass >= HOUR_MS {
                retrace::retention::maintain(ws.working_copy(), sim, 3600).unwrap();
                last_pass = sim;
            }
        }
        progress(&format!("day {day}: {n} bursts"));
    }
    retrace::store::set_clock_ahead(0);
    let real = retrace::store::now_ms();
    retrace::store::set_clock_ahead(end.saturating_sub(real));
    // Two passes, as an hour apart: a pass's recompression leaves the frames it replaced for
    // the next pass's collection.
    retrace::retention::maintain(ws.working_copy(), end, 0).unwrap();
    retrace::retention::maintain(ws.working_copy(), end, 0).unwrap();
    let log = ws.snapshot_log(&[]).unwrap();
    let kept: Vec<_> = log.iter().filter(|e| e.burst.is_some()).collect();
    let live = |w: &Workspace| {
        w.working_copy()
            .store()
            .reader()
            .and_then(|r| r.stats())
            .map(|st| (st.packed_bytes, st.frame_bytes))
            .unwrap_or_default()
    };
    let (store_bytes, store_live) = live(&ws);

    // What the kept snapshots alone need: the same states, oldest first, in a fresh store.
    progress(&format!(
        "{} bursts kept; capturing them into a fresh store",
        kept.len()
    ));
    let (root2, home2) = (base.join("ws2"), base.join("home2"));
    fs::create_dir_all(&root2).unwrap();
    let fresh = Workspace::open(&root2, &Config::with_home(&home2)).unwrap();
    let mut roots: Vec<_> = log.iter().map(|e| e.snapshot.root).collect();
    roots.reverse();
    for r in &roots {
        // Read from the first store, written into the second through a scratch workspace.
        ws.restore_with(
            r,
            retrace::RestoreOptions {
                force: true,
                ..Default::default()
            },
            &retrace::NoProgress,
        )
        .unwrap();
        copy_tree(&root, &root2);
        fresh.snapshot(None).unwrap();
    }
    retrace::retention::maintain(fresh.working_copy(), end, 0).unwrap();
    retrace::retention::maintain(fresh.working_copy(), end, 0).unwrap();
    let (needed, needed_live) = live(&fresh);
    println!(
        "\na simulated week of local history: {n} bursts, one every {every} s of 8 h days, {files} files"
    );
    println!("| measure | value |");
    println!("|---------|-------|");
    println!(
        "| bursts in `retrace log` | {} (docs/retention.md: 373 at one every 10 s) |",
        kept.len()
    );
    println!("| snapshots in the log | {} |", log.len());
    println!("| store, packed bytes (its frames' bytes) | {store_bytes} ({store_live}) |");
    println!("| the kept states alone, packed bytes (frames) | {needed} ({needed_live}) |");
    #[allow(clippy::cast_precision_loss)]
    let ratio = store_bytes as f64 / needed.max(1) as f64;
    println!(
        "\ntarget: store ≤ 1.2× what the kept snapshots need: {ratio:.2}× ({})",
        if ratio <= 1.2 { "met" } else { "NOT met" }
    );
}

/// Makes `to` hold exactly the files of `from` (a plain copy, for the fresh store's captures).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    let _ = fs::remove_dir_all(to);
    fs::create_dir_all(to).unwrap();
    for e in walkdir::WalkDir::new(from).into_iter().flatten() {
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else if e.file_type().is_file() {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}
