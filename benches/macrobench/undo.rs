//! `--profile undo`: undo and redo of a 25-file agent turn with a watcher, beside
//! agent-undo's `au oops` (issue 39).
//!
//! `cargo bench --bench macrobench -- --profile undo [--files N] [--rounds R] [--dir PATH]
//! [--reuse] [--au PATH] [--pause MS] [--no-strace]`
//!
//! Workspace: the default profile's (N = 20,000 text-like files of 1–20 KiB, a few big
//! files, ignored `node_modules/` and `target/`, a nested repository), in `ws/` under
//! `retrace-bench-undo-N` in the temporary directory unless `--dir`; `--reuse` keeps one an
//! earlier run generated (the rounds leave their turns applied in it). With `--au PATH` (the
//! `au` binary of agent-undo, `cargo install agent-undo`), a copy of it in `ws-au/` for
//! agent-undo, so that neither tool's watcher sees the other's writes; without it, or when
//! PATH is not a file, agent-undo is skipped with a message.
//!
//! Setup: retrace on a fresh home: a cold `retrace snapshot`, the racy window waited out,
//! `retrace watch --detach`, a settling snapshot and a watched no-change snapshot (best of
//! 3). agent-undo: `au init` (its initial scan stores every file) and `au serve --daemon`,
//! ready once a probe file's event is in its log.
//!
//! Each of R rounds (default 5) makes turn r of the default profile (10 files appended to,
//! 10 added in a new directory, 5 deleted) in each workspace, as an agent turn:
//! - retrace: `retrace --session bench turn begin`, the edits, `turn end`, with its watcher;
//! - agent-undo: the same edits, its watcher recording them (the benchmark waits until its
//!   log has an event for every changed path; a round's edits start at least 31 s after the
//!   previous `au oops`, since `au oops` undoes the burst of the last 30 s);
//!
//! then times, each a whole command in a process of its own (`wait4`: wall, CPU user +
//! system, peak RSS), `--pause` (default 1000 ms) apart, in an order that rotates with the
//! round: retrace `undo`, retrace `redo` (always after its undo) and `au oops --confirm`.
//! agent-undo has no redo command (its undo of an undo is `au restore <event-id>` per
//! file), so it has no redo column. After each undo the benchmark checks that the turn's
//! paths hold again, byte for byte, what they held before the turn (absent where they were
//! absent), and after retrace's redo what they held after it.
//!
//! Then, unless `--no-strace` or without `strace`, one more round of each under
//! `strace -f -c -w` counts the sync calls (`fsync`, `fdatasync`, ...) of each command and
//! the wall time spent in them; and a probe times `fdatasync` of a 4 KiB write beside the
//! store, rewritten in place and appended, the price of one sync on this disk at that
//! moment.
//!
//! Printed: every round (wall, CPU, peak RSS, the 1-minute load average when it began),
//! min / median / max of each command, the ratio of retrace's median to the 30 ms target and
//! to agent-undo's median, and whether the target is met.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use retrace::{Config, Workspace};

use super::{Ran, Tools, apply_turn, run, turn_plan};

const SESSION: &str = "bench";

/// The target of issue 39: undo and redo of a 25-file turn with a watcher at 20k.
const TARGET: Duration = Duration::from_millis(30);

/// A path's content (None: absent).
type State = Vec<(String, Option<Vec<u8>>)>;

fn read_state(root: &Path, paths: &[String]) -> State {
    paths
        .iter()
        .map(|p| (p.clone(), fs::read(root.join(p)).ok()))
        .collect()
}

/// How many of `want`'s paths do not hold what `want` says in `root`.
fn mismatches(root: &Path, want: &State) -> usize {
    want.iter()
        .filter(|(p, data)| fs::read(root.join(p)).ok() != *data)
        .count()
}

/// How many paths differ between two states of the same paths.
fn changed(a: &State, b: &State) -> usize {
    a.iter().zip(b).filter(|(x, y)| x.1 != y.1).count()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn load1() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// agent-undo in its own copy of the workspace.
struct Au {
    bin: PathBuf,
    root: PathBuf,
    /// When the last `au oops` (or the readiness probe) ended: the next edits wait 31 s.
    quiet_since: Instant,
}

impl Au {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .current_dir(&self.root)
            .env("RUST_LOG", "agent_undo=warn");
        c
    }

    fn run(&self, args: &[&str]) -> Ran {
        run(self.cmd(args))
    }

    /// `au log -n 500`: one line per event, newest last.
    fn log(&self) -> Vec<String> {
        self.run(&["log", "-n", "500"])
            .stdout
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The id of the newest event (0 if none).
    fn last_id(&self) -> u64 {
        self.log().last().map_or(0, |l| event_id(l))
    }

    /// Waits until every path of `paths` has an event newer than `after` in the log, then
    /// until the log stops growing for 300 ms (at most `limit`). Returns the paths that
    /// never showed up.
    fn wait_recorded(&self, paths: &[String], after: u64, limit: Duration) -> Vec<String> {
        let start = Instant::now();
        let mut missing: Vec<String> = paths.to_vec();
        let mut last = (0, Instant::now());
        loop {
            let log = self.log();
            let newer: Vec<&String> = log.iter().filter(|l| event_id(l) > after).collect();
            missing.retain(|p| !newer.iter().any(|l| l.contains(&format!(" {p}  ["))));
            if newer.len() != last.0 {
                last = (newer.len(), Instant::now());
            }
            if (missing.is_empty() && last.1.elapsed() >= Duration::from_millis(300))
                || start.elapsed() > limit
            {
                return missing;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sleeps until 31 s after the last `au oops`, so that the next edits are a burst of
    /// their own.
    fn wait_window(&self) {
        let window = Duration::from_secs(31);
        if let Some(left) = window.checked_sub(self.quiet_since.elapsed()) {
            std::thread::sleep(left);
        }
    }
}

/// The event id at the start of an `au log` line (`#123  ...`).
fn event_id(line: &str) -> u64 {
    line.strip_prefix('#')
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// One timed command and whether it left the turn's paths as they should be.
struct Timed {
    ran: Ran,
    /// Paths not as expected afterwards.
    wrong: usize,
    /// The watcher's walks during the command (retrace only).
    walks: u64,
}

/// What one round measured.
struct Round {
    order: &'static str,
    load: String,
    /// Paths the turn changed in retrace's and in agent-undo's workspace.
    changed: (usize, usize),
    begin: Ran,
    end: Ran,
    undo: Timed,
    redo: Timed,
    oops: Option<Timed>,
    /// Paths agent-undo's watcher never recorded.
    au_missed: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Undo,
    Redo,
    Oops,
}

/// The order of round `r`: each command in each place in turn, redo after undo.
fn order(r: usize) -> ([Op; 3], &'static str) {
    match r % 3 {
        0 => ([Op::Undo, Op::Redo, Op::Oops], "undo redo oops"),
        1 => ([Op::Undo, Op::Oops, Op::Redo], "undo oops redo"),
        _ => ([Op::Oops, Op::Undo, Op::Redo], "oops undo redo"),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// `strace -f -c` of one command: the sync calls it made and the seconds spent in them, as
/// strace's summary rows (`calls`, `seconds`, `syscall`).
fn strace_syncs(cmd: Command, out: &Path) -> Vec<(u64, f64, String)> {
    let prog = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(ToOwned::to_owned).collect();
    let mut s = Command::new("strace");
    s.args([
        "-f",
        "-c",
        "-e",
        "trace=fsync,fdatasync,sync_file_range,syncfs,msync",
        "-o",
    ])
    .arg(out)
    .arg(prog)
    .args(args);
    if let Some(d) = cmd.get_current_dir() {
        s.current_dir(d);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => s.env(k, v),
            None => s.env_remove(k),
        };
    }
    let _ = run(s);
    let text = fs::read_to_string(out).unwrap_or_default();
    // Rows: "% time  seconds  usecs/call  calls  [errors]  syscall".
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = (*f.last()?).to_string();
            if !["fsync", "fdatasync", "sync_file_range", "syncfs", "msync"]
                .contains(&name.as_str())
            {
                return None;
            }
            Some((f.get(3)?.parse().ok()?, f.get(1)?.parse().ok()?, name))
        })
        .collect()
}

fn syncs_line(rows: &[(u64, f64, String)]) -> String {
    if rows.is_empty() {
        return "no sync calls".into();
    }
    rows.iter()
        .map(|(calls, secs, name)| format!("{calls} {name} ({:.1} ms in them)", secs * 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The time of `fdatasync` after a 4 KiB write in `dir`, `n` times: (median, max) when the
/// write rewrites the file's first 4 KiB in place (as a redb commit rewrites pages of its
/// file: no metadata to journal) and when it appends (the file grows: the filesystem's
/// journal commits too).
fn sync_probe(dir: &Path, n: usize) -> [(Duration, Duration); 2] {
    use std::os::unix::fs::FileExt;
    let p = dir.join("sync-probe");
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&p)
        .unwrap();
    f.write_all(&[0u8; 4096]).unwrap();
    f.sync_all().unwrap();
    let mut probe = |append: bool| {
        let mut times = Vec::new();
        for i in 0..n {
            let block = [u8::try_from(i % 251).unwrap(); 4096];
            if append {
                f.write_all(&block).unwrap();
            } else {
                f.write_all_at(&block, 0).unwrap();
            }
            let t = Instant::now();
            f.sync_data().unwrap();
            times.push(t.elapsed());
        }
        let max = times.iter().copied().max().unwrap_or_default();
        (median(times), max)
    };
    let in_place = probe(false);
    let appending = probe(true);
    drop(f);
    let _ = fs::remove_file(p);
    [in_place, appending]
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    assert!(files >= 100, "--files must be at least 100");
    let rounds: usize = arg("--rounds").and_then(|v| v.parse().ok()).unwrap_or(5);
    let pause = Duration::from_millis(arg("--pause").and_then(|v| v.parse().ok()).unwrap_or(1000));
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("retrace-bench-undo-{files}")),
        PathBuf::from,
    );
    let t = Tools::under(&base, PathBuf::from(env!("CARGO_BIN_EXE_retrace")), SESSION);
    let au_bin = arg("--au").map(PathBuf::from);
    let with_strace = !args.iter().any(|a| a == "--no-strace")
        && Command::new("strace").arg("-V").output().is_ok();
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    };
    let au_bin = match au_bin {
        Some(b) if b.is_file() => Some(b),
        Some(b) => {
            println!("agent-undo skipped: {} is not a file", b.display());
            None
        }
        None => {
            println!("agent-undo skipped: no --au PATH (the `au` binary of agent-undo)");
            None
        }
    };
    fs::create_dir_all(&base).unwrap();
    super::monorepo::remove_tree(&t.home);
    let marker = base.join(format!("generated-undo-{files}"));
    if args.iter().any(|a| a == "--reuse") && marker.exists() {
        progress(&format!("reusing {files} files in {}", t.root.display()));
    } else {
        let _ = fs::remove_file(&marker);
        progress(&format!(
            "generating {files} files in {} ...",
            t.root.display()
        ));
        super::generate(&t.root, files);
        fs::write(&marker, "").unwrap();
        progress("generated");
    }
    let au_root = base.join("ws-au");
    super::monorepo::remove_tree(&au_root);
    if au_bin.is_some() {
        progress("copying the workspace for agent-undo (cp -a)");
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&t.root)
            .arg(&au_root)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cp -a {} {}", t.root.display(), au_root.display());
    }
    fs::create_dir_all(&t.home).unwrap();
    super::monorepo::settle_disk();
    super::monorepo::wait_racy_window();

    progress("retrace: cold snapshot, watch --detach, settle, no-change best of 3");
    let cold = t.retrace(&["snapshot", "cold"]);
    super::monorepo::wait_racy_window();
    let ws = Workspace::open(&t.root, &Config::with_home(&t.home)).unwrap();
    let spec = ws.watch_spec();
    drop(ws);
    let detach = t.retrace(&["watch", "--detach"]);
    assert!(
        detach.stdout.contains("watching"),
        "retrace watch --detach: {}{}",
        detach.stdout,
        detach.stderr
    );
    let walks = || {
        retrace::watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(2))
            .expect("the watcher answers its status")
    };
    let settle = t.retrace(&["snapshot"]);
    let nochange = (0..3).map(|_| t.retrace(&["snapshot"]).time).min().unwrap();
    let spawn = (0..5)
        .map(|_| t.retrace(&["--version"]).time)
        .min()
        .unwrap();

    let mut au = au_bin.map(|bin| {
        progress("agent-undo: au init (its initial scan), au serve --daemon, probe");
        let mut a = Au {
            bin,
            root: au_root.clone(),
            quiet_since: Instant::now(),
        };
        let init = a.run(&["init"]);
        let daemon = a.run(&["serve", "--daemon"]);
        assert!(
            daemon.stdout.contains("started"),
            "au serve --daemon: {}{}",
            daemon.stdout,
            daemon.stderr
        );
        // Ready once it records a probe (rewritten until it does: its watches are set up
        // after the command returns).
        let probe = "au-probe.txt".to_string();
        let before = a.last_id();
        let ready = Instant::now();
        for i in 0.. {
            fs::write(au_root.join(&probe), format!("probe {i}\n")).unwrap();
            if a.wait_recorded(
                std::slice::from_ref(&probe),
                before,
                Duration::from_millis(500),
            )
            .is_empty()
            {
                break;
            }
            assert!(
                ready.elapsed() < Duration::from_secs(120),
                "agent-undo's daemon records nothing"
            );
        }
        let ready = ready.elapsed();
        let before = a.last_id();
        fs::remove_file(au_root.join(&probe)).unwrap();
        let _ = a.wait_recorded(&[probe], before, Duration::from_secs(10));
        a.quiet_since = Instant::now();
        let version = (0..5).map(|_| a.run(&["--version"]).time).min().unwrap();
        (a, init, ready, version)
    });

    let mut all: Vec<Round> = Vec::new();
    for r in 0..rounds {
        let n = 1000 + r as u64;
        let plan = turn_plan(files, n);
        let paths = plan.paths();
        let (ops, order_name) = order(r);
        progress(&format!("round {}: the turn, then {order_name}", r + 1));
        let load = load1();

        // retrace: the turn through the session, its watcher running.
        let before = read_state(&t.root, &paths);
        let begin = t.session(&["turn", "begin", "--prompt", "undo bench"]);
        apply_turn(&t.root, &plan, n, Duration::from_millis(100));
        let end = t.session(&["turn", "end"]);
        let after = read_state(&t.root, &paths);

        // agent-undo: the same edits, recorded by its watcher.
        let au_turn = au.as_mut().map(|(a, ..)| {
            a.wait_window();
            let before = read_state(&a.root, &paths);
            let last = a.last_id();
            apply_turn(&a.root, &plan, n, Duration::from_millis(100));
            let after = read_state(&a.root, &paths);
            let changed_paths: Vec<String> = before
                .iter()
                .zip(&after)
                .filter(|(x, y)| x.1 != y.1)
                .map(|(x, _)| x.0.clone())
                .collect();
            let missed = a
                .wait_recorded(&changed_paths, last, Duration::from_secs(30))
                .len();
            (before, after, missed)
        });
        std::thread::sleep(pause);

        let mut undo = None;
        let mut redo = None;
        let mut oops = None;
        for op in ops {
            match op {
                Op::Undo | Op::Redo => {
                    let w = walks().walks;
                    let ran = t.session(&[if op == Op::Undo { "undo" } else { "redo" }]);
                    let want = if op == Op::Undo { &before } else { &after };
                    let timed = Timed {
                        ran,
                        wrong: mismatches(&t.root, want),
                        walks: walks().walks - w,
                    };
                    if op == Op::Undo {
                        undo = Some(timed);
                    } else {
                        redo = Some(timed);
                    }
                }
                Op::Oops => {
                    if let (Some((a, ..)), Some((before, ..))) = (&mut au, &au_turn) {
                        let ran = a.run(&["oops", "--confirm"]);
                        a.quiet_since = Instant::now();
                        oops = Some(Timed {
                            ran,
                            wrong: mismatches(&a.root, before),
                            walks: 0,
                        });
                    } else {
                        continue;
                    }
                }
            }
            std::thread::sleep(pause);
        }
        all.push(Round {
            order: order_name,
            load,
            changed: (
                changed(&before, &after),
                au_turn.as_ref().map_or(0, |(b, a, _)| changed(b, a)),
            ),
            begin,
            end,
            undo: undo.unwrap(),
            redo: redo.unwrap(),
            oops,
            au_missed: au_turn.as_ref().map_or(0, |x| x.2),
        });
    }

    // One more round of each under strace: the sync calls and the time in them.
    let traced = with_strace.then(|| {
        progress("one more round under strace -f -c: the sync calls of each command");
        let n = 1000 + rounds as u64;
        let plan = turn_plan(files, n);
        let dir = base.join("strace");
        fs::create_dir_all(&dir).unwrap();
        let _ = t.session(&["turn", "begin", "--prompt", "undo bench (strace)"]);
        apply_turn(&t.root, &plan, n, Duration::from_millis(100));
        let _ = t.session(&["turn", "end"]);
        std::thread::sleep(pause);
        let undo = strace_syncs(
            t.retrace_cmd(&["--session", SESSION, "undo"]),
            &dir.join("undo.txt"),
        );
        std::thread::sleep(pause);
        let redo = strace_syncs(
            t.retrace_cmd(&["--session", SESSION, "redo"]),
            &dir.join("redo.txt"),
        );
        let oops = au.as_mut().map(|(a, ..)| {
            a.wait_window();
            let last = a.last_id();
            let paths = plan.paths();
            let before = read_state(&a.root, &paths);
            apply_turn(&a.root, &plan, n, Duration::from_millis(100));
            let after = read_state(&a.root, &paths);
            let changed_paths: Vec<String> = before
                .iter()
                .zip(&after)
                .filter(|(x, y)| x.1 != y.1)
                .map(|(x, _)| x.0.clone())
                .collect();
            let _ = a.wait_recorded(&changed_paths, last, Duration::from_secs(30));
            std::thread::sleep(pause);
            let rows = strace_syncs(a.cmd(&["oops", "--confirm"]), &dir.join("oops.txt"));
            a.quiet_since = Instant::now();
            rows
        });
        (undo, redo, oops)
    });
    let probe = sync_probe(&t.home, 20);
    let w = walks();
    let _ = t.retrace(&["watch", "--stop"]);
    let au = au.map(|(a, init, ready, version)| {
        let _ = a.run(&["stop"]);
        (init, ready, version)
    });
    progress("done");

    println!(
        "\nundo: macro workspace, {files} files; a 25-file agent turn (10 modified, 10 added, 5 \
         deleted), each tool with its watcher; every command a process of its own, spawn to \
         exit (wall, CPU user + system, peak RSS), {} ms apart",
        pause.as_millis()
    );
    println!(
        "retrace: cold snapshot {:.0} ms; watch --detach {:.0} ms; settling snapshot {:.0} ms; \
         watched no-change `retrace snapshot` {:.1} ms (best of 3); `retrace --version` {:.1} \
         ms (best of 5); the watcher: {} directories, {} walks answered",
        ms(cold.time),
        ms(detach.time),
        ms(settle.time),
        ms(nochange),
        ms(spawn),
        w.watches,
        w.walks
    );
    if let Some((init, ready, version)) = &au {
        println!(
            "agent-undo: `au init` {:.0} ms (its initial scan stores every file, {:.1} MB peak \
             RSS); `au serve --daemon` until a probe is recorded {:.0} ms; `au --version` \
             {:.1} ms (best of 5)",
            ms(init.time),
            init.rss as f64 / 1e6,
            ms(*ready),
            ms(*version)
        );
    }
    println!(
        "\n| round | load | order | retrace turn begin / end | **retrace undo** | **retrace \
         redo** | au oops | paths changed (ret / au) | not restored (ret undo / redo / au) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let cell = |t: &Timed| {
        format!(
            "{:.1} ms ({:.1} CPU, {:.1} MB{})",
            ms(t.ran.time),
            ms(t.ran.cpu),
            t.ran.rss as f64 / 1e6,
            if t.walks > 0 {
                format!(", {} walk", t.walks)
            } else {
                String::new()
            }
        )
    };
    for (i, r) in all.iter().enumerate() {
        println!(
            "| {} | {} | {} | {:.1} / {:.1} ms | {} | {} | {} | {} / {} | {} / {} / {} |",
            i + 1,
            r.load,
            r.order,
            ms(r.begin.time),
            ms(r.end.time),
            cell(&r.undo),
            cell(&r.redo),
            r.oops.as_ref().map_or("–".into(), cell),
            r.changed.0,
            if au.is_some() {
                r.changed.1.to_string()
            } else {
                "–".into()
            },
            r.undo.wrong,
            r.redo.wrong,
            r.oops.as_ref().map_or("–".into(), |o| {
                if r.au_missed > 0 {
                    format!("{} ({} never recorded)", o.wrong, r.au_missed)
                } else {
                    o.wrong.to_string()
                }
            }),
        );
    }
    let stats = |name: &str, v: Vec<Duration>, cpu: Vec<Duration>| -> Duration {
        let med = median(v.clone());
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x |",
            ms(v.iter().copied().min().unwrap_or_default()),
            ms(med),
            ms(v.iter().copied().max().unwrap_or_default()),
            ms(median(cpu)),
            ms(med) / ms(TARGET)
        );
        med
    };
    println!(
        "\n| command (whole, {} rounds) | min ms | median ms | max ms | median CPU ms | median / 30 ms |",
        all.len()
    );
    println!("|---|---|---|---|---|---|");
    let undo = stats(
        "retrace undo",
        all.iter().map(|r| r.undo.ran.time).collect(),
        all.iter().map(|r| r.undo.ran.cpu).collect(),
    );
    let redo = stats(
        "retrace redo",
        all.iter().map(|r| r.redo.ran.time).collect(),
        all.iter().map(|r| r.redo.ran.cpu).collect(),
    );
    let oops: Vec<&Timed> = all.iter().filter_map(|r| r.oops.as_ref()).collect();
    let oops_med = (!oops.is_empty()).then(|| {
        stats(
            "au oops",
            oops.iter().map(|o| o.ran.time).collect(),
            oops.iter().map(|o| o.ran.cpu).collect(),
        )
    });
    if let Some(o) = oops_med {
        println!(
            "(retrace / agent-undo, medians: undo {:.2}x, redo {:.2}x)",
            ms(undo) / ms(o),
            ms(redo) / ms(o)
        );
    }
    println!(
        "\nsync: one fdatasync of a 4 KiB write beside the store (20 probes each, after the \
         rounds): rewriting in place (as redb's commits) median {:.2} ms, max {:.2} ms; \
         appending median {:.2} ms, max {:.2} ms",
        ms(probe[0].0),
        ms(probe[0].1),
        ms(probe[1].0),
        ms(probe[1].1)
    );
    if let Some((undo, redo, oops)) = &traced {
        println!(
            "strace -f -c, one more round: retrace undo: {}",
            syncs_line(undo)
        );
        println!(
            "strace -f -c, one more round: retrace redo: {}",
            syncs_line(redo)
        );
        if let Some(o) = oops {
            println!("strace -f -c, one more round: au oops: {}", syncs_line(o));
        }
    }
    let wrong = all
        .iter()
        .map(|r| r.undo.wrong + r.redo.wrong)
        .sum::<usize>();
    if wrong > 0 {
        println!("warning: retrace left {wrong} path(s) not as expected (see the table)");
    }
    println!("\ntargets ({files} files):");
    let target = |name: &str, ok: bool, detail: String| {
        println!(
            "- [{}] {name}: {detail}",
            if ok { "met" } else { "NOT met" }
        );
    };
    let worst = |v: Vec<Duration>| v.into_iter().max().unwrap_or_default();
    target(
        "with a watcher, undo of a 25-file turn <= 30 ms, whole command (median of the rounds)",
        undo <= TARGET && wrong == 0,
        format!(
            "median {:.1} ms, max {:.1} ms",
            ms(undo),
            ms(worst(all.iter().map(|r| r.undo.ran.time).collect()))
        ),
    );
    target(
        "with a watcher, redo of a 25-file turn <= 30 ms, whole command (median of the rounds)",
        redo <= TARGET && wrong == 0,
        format!(
            "median {:.1} ms, max {:.1} ms",
            ms(redo),
            ms(worst(all.iter().map(|r| r.redo.ran.time).collect()))
        ),
    );
    if let Some(o) = oops_med {
        target(
            "ahead of agent-undo's `au oops` (medians)",
            undo < o && redo < o,
            format!(
                "undo {:.1} ms, redo {:.1} ms against {:.1} ms",
                ms(undo),
                ms(redo),
                ms(o)
            ),
        );
    }
    println!(
        "(load average at the end: {}; whole run {:.0} s)",
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim(),
        started.elapsed().as_secs_f64()
    );
}
