//! `--profile bursts`: local history (`retrace watch --record`) on a large workspace.
//!
//! `cargo bench --bench macrobench -- --profile bursts [--files N] [--layout macro|monorepo]
//! [--rounds R] [--idle SECS] [--dir PATH] [--reuse]`
//!
//! Workspace: the default profile's (`--layout macro`, N = 20,000 by default) or the monorepo
//! profile's (`--layout monorepo`, e.g. `--files 1000000`). Steps: a cold `retrace
//! snapshot`, the racy window, `retrace watch --detach --record` (default settings: quiet for
//! 1.5 s, at most a burst every 5 s), its first burst (what the workspace held), then R
//! rounds (10 by default) of an editor-like burst: 2 files appended to and 1 created at once,
//! then nothing until `retrace log --json` lists its burst. Per burst: the time from the last
//! write to the burst being in the log (what a user waits for it; the quiet period is most of
//! it), and the capture's own time as the recorder measured it (its log line). Then the
//! watcher's CPU time (user + system, from `/proc`) over `--idle` seconds (30 by default) of
//! an idle workspace. Targets (issue 42): a burst in the log within 2 s of the workspace going
//! quiet, its capture ≤ 30 ms at 1M files watched, nothing spent while idle.

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

fn bursts(t: &Tools) -> usize {
    let o = t.retrace(&["log", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
    v["entries"]
        .as_array()
        .map_or(0, |e| e.iter().filter(|e| !e["burst"].is_null()).count())
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn main(args: &[String]) {
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
    let wait_for = |n: usize| {
        let start = Instant::now();
        while bursts(&t) < n {
            assert!(start.elapsed() < Duration::from_mins(10), "no burst {n}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(1);
    let mut latency = Vec::new();
    let dir = t.root.join("bursts-bench");
    fs::create_dir_all(&dir).unwrap();
    for round in 0..rounds {
        // At most one burst every 5 s: the next burst waits out the interval first.
        std::thread::sleep(Duration::from_secs(5));
        let mut seed = round as u64 + 1;
        for i in 0..2 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let p = t
                .root
                .join(super::rel((seed >> 33) as usize % files.max(1)));
            if p.is_file() {
                let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
                std::io::Write::write_all(&mut f, format!("burst {round} {i}\n").as_bytes())
                    .unwrap();
            }
        }
        fs::write(dir.join(format!("new-{round}.txt")), "new\n").unwrap();
        let wrote = Instant::now();
        wait_for(round + 2);
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
        .skip(1) // the first burst: everything since the cold snapshot
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
