//! `--profile monorepo`: a large workspace of small files, through the real CLI, beside git
//! and a bare walk.
//!
//! `cargo bench --bench macrobench -- --profile monorepo [--files N] [--dir PATH] [--reuse]`
//!
//! Workspace (deterministic; default N = 1,000,000): N source-like text files of 200–3000
//! bytes built from shared lines, 25 to a leaf directory
//! (`pkg{:03}/src/mod{:02}/part{:02}/f{i}.ts`: about 42k directories at 1M files), a root
//! `.gitignore` with `node_modules/` (so N + 1 managed files), and an ignored `node_modules/`
//! of N/20 files in nested package directories. It is generated in parallel over the
//! directories, each file from an RNG seeded by its index, so the thread order changes
//! nothing. `--reuse` keeps a workspace an earlier run generated and left as it found it
//! (marked by `generated-monorepo-N` in the base directory). After generating, the benchmark
//! waits out the stat cache's racy window (2.5 s).
//!
//! Every measurement is a whole command in a process of its own, timed from spawn to exit,
//! with its peak RSS (`wait4`): `retrace -C ROOT ...` (a fresh `RETRACE_HOME` under the base
//! directory), `git add -A` then `git write-tree` through a private `GIT_DIR` and index (times
//! summed, the larger RSS), and the bare parallel `lstat` walk of the default profile (this
//! benchmark binary run again with `--bare-walk ROOT`). Steps:
//!
//! 1. the bare walk, best of 3;
//! 2. cold: `retrace snapshot` on a fresh home, then again on another fresh home with
//!    `RETRACE_TRACE=1` for the capture's own time (so the difference is time spent outside
//!    the capture); the cold row is the faster of the two (and the larger RSS): on a shared
//!    virtual disk the first write after a large delete can take several times as long;
//!    git's cold add + write-tree;
//! 3. after the racy window and one settling snapshot of each: no-change, best of 3 each;
//! 4. a 25-file turn (10 modified, 10 added in a new directory, 5 deleted) through a session:
//!    `turn begin` (a no-change capture), the change, `turn end` against git's add +
//!    write-tree of the same state; `undo` against `git read-tree -u --reset` to the tree
//!    before the turn (retrace redoes the turn first, so git meets the after-state too), then
//!    a check that both tools left the workspace as it was before the turn;
//! 5. store bytes: retrace's `store.redb` (disk blocks) against git's `objects/` (loose,
//!    no gc).
//!
//! Printed: a table of times, one of peak RSS, and whether each target of the issue is met.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use retrace::{Config, Workspace};

use super::{Ran, Rng, Tools, run};

/// Files per leaf directory.
const PER_DIR: usize = 25;
/// Leaf directories per `modNN`, and `modNN` per package.
const PARTS: usize = 20;
const MODS: usize = 20;
/// Files per package directory in `node_modules/`.
const PER_PACKAGE: usize = 20;
const SESSION: &str = "bench";

fn leaf(d: usize) -> String {
    format!(
        "pkg{:03}/src/mod{:02}/part{:02}",
        d / (MODS * PARTS),
        (d / PARTS) % MODS,
        d % PARTS
    )
}

pub(crate) fn rel(i: usize) -> String {
    format!("{}/f{i}.ts", leaf(i / PER_DIR))
}

fn ignored_rel(j: usize) -> String {
    let p = j / PER_PACKAGE;
    format!(
        "node_modules/pkg{:03}/node_modules/dep{:02}/lib/x{j}.js",
        p / 16,
        p % 16
    )
}

/// An RNG of its own for item `i` of stream `salt` (splitmix64 of both; xorshift needs a
/// nonzero state).
fn rng_for(salt: u64, i: usize) -> Rng {
    let mut z = (i as u64 ^ salt.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Rng((z ^ (z >> 31)) | 1)
}

/// 200–3000 bytes of whole lines from the vocabulary, cut to size on a newline.
fn small_file(rng: &mut Rng, vocab: &[String]) -> Vec<u8> {
    let target = 200 + rng.below(2801) as usize;
    let mut out = Vec::with_capacity(target + 100);
    while out.len() < target {
        out.extend_from_slice(vocab[rng.below(vocab.len() as u64) as usize].as_bytes());
    }
    out.truncate(target);
    out[target - 1] = b'\n';
    out
}

fn vocab() -> Vec<String> {
    super::lines(&mut Rng(0x0000_5eed_3000))
}

/// Removes the directory `p` and everything in it (if it exists), directories in parallel.
pub(crate) fn remove_tree(p: &Path) {
    let Ok(rd) = fs::read_dir(p) else { return };
    let entries: Vec<(PathBuf, bool)> = rd
        .flatten()
        .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
        .collect();
    entries.par_iter().for_each(|(e, dir)| {
        if *dir {
            remove_tree(e);
        } else {
            let _ = fs::remove_file(e);
        }
    });
    let _ = fs::remove_dir(p);
}

pub(crate) fn generate(root: &Path, files: usize) {
    remove_tree(root);
    fs::create_dir_all(root).unwrap();
    let vocab = vocab();
    fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
    (0..files.div_ceil(PER_DIR)).into_par_iter().for_each(|d| {
        let dir = root.join(leaf(d));
        fs::create_dir_all(&dir).unwrap();
        for i in d * PER_DIR..((d + 1) * PER_DIR).min(files) {
            let data = small_file(&mut rng_for(1, i), &vocab);
            fs::write(dir.join(format!("f{i}.ts")), data).unwrap();
        }
    });
    let ignored = files / 20;
    (0..ignored.div_ceil(PER_PACKAGE))
        .into_par_iter()
        .for_each(|p| {
            let first = root.join(ignored_rel(p * PER_PACKAGE));
            fs::create_dir_all(first.parent().unwrap()).unwrap();
            for j in p * PER_PACKAGE..((p + 1) * PER_PACKAGE).min(ignored) {
                let data = small_file(&mut rng_for(2, j), &vocab);
                fs::write(root.join(ignored_rel(j)), data).unwrap();
            }
        });
}

/// The turn's change: 10 files modified, 10 added in a new directory, 5 deleted (15
/// distinct existing files). Returns the paths it changed.
fn turn(root: &Path, files: usize) -> Vec<String> {
    let mut rng = Rng(0x0007_0e5e_ed00);
    let vocab = vocab();
    let mut picked: Vec<usize> = Vec::new();
    while picked.len() < 15 {
        let i = rng.below(files as u64) as usize;
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    let mut changed = Vec::new();
    for &i in &picked[..10] {
        let p = root.join(rel(i));
        let mut d = fs::read(&p).unwrap();
        d.extend_from_slice(b"// edited by the turn\n");
        fs::write(&p, d).unwrap();
        changed.push(rel(i));
    }
    let dir = root.join("pkg000/src/turn");
    fs::create_dir_all(&dir).unwrap();
    for k in 0..10 {
        fs::write(dir.join(format!("t{k}.ts")), small_file(&mut rng, &vocab)).unwrap();
        changed.push(format!("pkg000/src/turn/t{k}.ts"));
    }
    for &i in &picked[10..] {
        fs::remove_file(root.join(rel(i))).unwrap();
        changed.push(rel(i));
    }
    changed
}

/// git's counterpart of a capture: `add -A` then `write-tree`.
struct GitCapture {
    time: Duration,
    rss: u64,
    tree: String,
}

impl Tools {
    fn git_capture(&self) -> GitCapture {
        let add = self.git(&["add", "-A"]);
        let tree = self.git(&["write-tree"]);
        GitCapture {
            time: add.time + tree.time,
            rss: add.rss.max(tree.rss),
            tree: tree.stdout.trim().to_string(),
        }
    }

    /// Best of 3 (time), the largest peak RSS of the 3.
    fn git_capture3(&self) -> GitCapture {
        let runs: Vec<GitCapture> = (0..3).map(|_| self.git_capture()).collect();
        GitCapture {
            time: runs.iter().map(|g| g.time).min().unwrap(),
            rss: runs.iter().map(|g| g.rss).max().unwrap(),
            tree: runs[2].tree.clone(),
        }
    }
}

/// Best of the runs' times, the largest of their peak RSS.
fn best(runs: &[Ran]) -> (Duration, u64) {
    (
        runs.iter().map(|r| r.time).min().unwrap(),
        runs.iter().map(|r| r.rss).max().unwrap(),
    )
}

/// The id `retrace snapshot` printed (`snapshot <id>`).
fn snapshot_id(r: &Ran) -> String {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("snapshot "))
        .unwrap_or_else(|| panic!("no snapshot id in {:?}", r.stdout))
        .trim()
        .to_string()
}

/// The capture's own time from `RETRACE_TRACE=1` output: the total on its last
/// `retrace trace: capture ...` line, and on its `capture commit` line if there is one.
fn capture_total(stderr: &str) -> (Option<Duration>, Option<Duration>) {
    let total = |l: &str| {
        let v = l.rsplit_once("(total ")?.1.split_once(" ms")?.0;
        v.trim()
            .parse::<f64>()
            .ok()
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
    };
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("retrace trace: capture "))
        .collect();
    let last = lines.last().and_then(|l| total(l));
    let commit = lines
        .iter()
        .find(|l| l.starts_with("retrace trace: capture commit:"))
        .and_then(|l| total(l));
    (last, commit)
}

/// Waits for the kernel to write dirty pages back (`sync`), so the next timed command does
/// not pay for what ran before it.
pub(crate) fn settle_disk() {
    let _ = Command::new("sync").status();
}

pub(crate) fn wait_racy_window() {
    std::thread::sleep(Duration::from_millis(2500));
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    assert!(files >= 100, "--files must be at least 100");
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("retrace-bench-monorepo-{files}")),
        PathBuf::from,
    );
    let t = Tools::under(&base, PathBuf::from(env!("CARGO_BIN_EXE_retrace")), SESSION);
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    };
    fs::create_dir_all(&base).unwrap();
    for d in [&t.home, &t.git_dir] {
        remove_tree(d);
    }
    // The marker is removed while the turn changes the workspace and written back once both
    // tools have restored it, so `--reuse` never meets a half-changed workspace.
    let marker = base.join(format!("generated-monorepo-{files}"));
    if args.iter().any(|a| a == "--reuse") && marker.exists() {
        progress(&format!("reusing {files} files in {}", t.root.display()));
    } else {
        let _ = fs::remove_file(&marker);
        progress(&format!(
            "generating {files} files (+{} ignored) in {} ...",
            files / 20,
            t.root.display()
        ));
        generate(&t.root, files);
        fs::write(&marker, "").unwrap();
        progress("generated");
    }
    let managed = files as u64 + 1;
    // The generated files (and, below, a deleted store) are written back before anything is
    // timed, so no command pays for the writeback of what ran before it.
    settle_disk();
    wait_racy_window();

    // What every peak RSS below includes at least: this process's memory at the spawn.
    let floor = run(Command::new("true")).rss;

    progress("1. bare walk (best of 3)");
    let me = std::env::current_exe().unwrap();
    let walks: Vec<Ran> = (0..3)
        .map(|_| {
            let mut c = Command::new(&me);
            c.arg("--bare-walk").arg(&t.root);
            run(c)
        })
        .collect();
    let walk_count = walks[0].stdout.trim().to_string();
    let (walk, walk_rss) = best(&walks);

    progress("2. cold: retrace snapshot on a fresh home");
    fs::create_dir_all(&t.home).unwrap();
    let cold = t.retrace(&["snapshot", "cold"]);
    progress("2. cold again, with RETRACE_TRACE=1, on another fresh home");
    remove_tree(&t.home);
    fs::create_dir_all(&t.home).unwrap();
    settle_disk();
    let mut c = t.retrace_cmd(&["snapshot", "cold"]);
    c.env("RETRACE_TRACE", "1");
    let traced = run(c);
    let (cold_time, cold_rss) = (cold.time.min(traced.time), cold.rss.max(traced.rss));
    let (capture_alone, capture_commit) = capture_total(&traced.stderr);
    if capture_alone.is_none() {
        eprintln!(
            "warning: no `retrace trace: capture` line in:\n{}",
            traced.stderr
        );
    }
    progress("2. git cold: add -A + write-tree");
    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&t.git_dir)
        .status();
    assert!(init.is_ok_and(|s| s.success()), "git init");
    settle_disk();
    let git_cold = t.git_capture();

    progress("3. no-change: racy window, one settling capture each, then best of 3 each");
    wait_racy_window();
    let settle = t.retrace(&["snapshot"]);
    let git_settle = t.git_capture();
    let nochange_runs: Vec<Ran> = (0..3).map(|_| t.retrace(&["snapshot"])).collect();
    let (nochange, nochange_rss) = best(&nochange_runs);
    let before_id = snapshot_id(&nochange_runs[2]);
    let hashed = nochange_runs[2]
        .stdout
        .lines()
        .nth(1)
        .unwrap_or("")
        .to_string();
    let git_nochange = t.git_capture3();
    let git_before_tree = git_nochange.tree.clone();

    progress("4. a turn of 25 files through a session");
    let begin = t.session(&["turn", "begin", "--prompt", "p"]);
    fs::remove_file(&marker).unwrap();
    let changed = turn(&t.root, files);
    let end = t.session(&["turn", "end"]);
    let git_turn = t.git_capture();
    wait_racy_window();
    progress("4. undo, redo, git read-tree to the tree before the turn");
    let undo = t.session(&["undo"]);
    let undo_written = undo
        .stdout
        .lines()
        .filter(|l| l.starts_with("  wrote "))
        .count();
    let undo_deleted = undo
        .stdout
        .lines()
        .filter(|l| l.starts_with("  deleted "))
        .count();
    let redo = t.session(&["redo"]);
    let git_undo = t.git(&["read-tree", "-u", "--reset", &git_before_tree]);
    progress("4. checking both tools restored the state before the turn");
    let after = t.retrace(&["snapshot"]);
    let after_id = snapshot_id(&after);
    let git_after = t.git_capture();
    let mut restored = true;
    if after_id != before_id {
        restored = false;
        eprintln!(
            "warning: the workspace after the undos is snapshot {after_id}, not {before_id} \
             as before the turn"
        );
    }
    if git_after.tree != git_before_tree {
        restored = false;
        eprintln!(
            "warning: git's tree after the undos is {}, not {git_before_tree} as before the turn",
            git_after.tree
        );
    }
    if (undo_written, undo_deleted) != (15, 10) {
        eprintln!(
            "warning: retrace undo wrote {undo_written} and deleted {undo_deleted} files \
             (expected 15 and 10):\n{}",
            undo.stdout
        );
    }
    if restored {
        fs::write(&marker, "").unwrap();
    }

    progress("5. store bytes");
    let store = Workspace::locate_store(&t.root, &Config::with_home(&t.home)).unwrap();
    let store_bytes = retrace::store::disk_bytes(&store);
    let git_bytes = super::dir_size(&t.git_dir.join("objects"));

    progress("6. with a live watcher: start it, settle, no-change best of 3, the turn again");
    let watched = watched(&t, files, &before_id);
    progress("done");

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "\nmonorepo: {files} files of 200-3000 B in {} leaf directories (+ .gitignore = \
         {managed} managed), {} ignored in node_modules/; bare walk: {walk_count} entries; \
         each command a process of its own",
        files.div_ceil(PER_DIR),
        files / 20
    );
    println!(
        "| measurement                 |    retrace    |      git      |  bare walk   | git/ret  | ret/walk |"
    );
    println!(
        "|-----------------------------|---------------|---------------|--------------|----------|----------|"
    );
    let row = |name: &str, r: Duration, g: Duration| {
        println!(
            "| {name:<27} | {:>10.0} ms | {:>10.0} ms | {:>9.0} ms | {:>7.2}x | {:>7.2}x |",
            ms(r),
            ms(g),
            ms(walk),
            ms(g) / ms(r),
            ms(r) / ms(walk)
        );
    };
    row("cold snapshot (command)", cold_time, git_cold.time);
    if let Some(c) = capture_alone {
        row("cold capture alone (trace)", c, git_cold.time);
    }
    row("no-change snapshot", nochange, git_nochange.time);
    row("session: turn begin", begin.time, git_nochange.time);
    row("session: turn end (25)", end.time, git_turn.time);
    row("session: undo it", undo.time, git_undo.time);
    row("session: redo it", redo.time, git_undo.time);
    println!(
        "| store bytes                 | {:>10.1} MB | {:>10.1} MB |              | ret/git {:.2}x |",
        mb(store_bytes),
        mb(git_bytes),
        store_bytes as f64 / git_bytes.max(1) as f64
    );
    println!(
        "(git: add -A + write-tree, best of 3 for no-change, against its own index; undo: \
         read-tree -u --reset to the tree before the turn; objects loose, no gc)"
    );
    match capture_alone {
        Some(c) => println!(
            "(cold, traced run: whole command {:.0} ms, capture {:.0} ms{}, so {:.0} ms outside \
             the capture)",
            ms(traced.time),
            ms(c),
            capture_commit.map_or(String::new(), |c| format!(
                " (of which up to its commit {:.0} ms)",
                ms(c)
            )),
            ms(traced.time.saturating_sub(c))
        ),
        None => println!("(cold, traced run: no capture trace found)"),
    }
    println!(
        "(settling runs after cold: retrace {:.0} ms, git {:.0} ms; the last no-change \
         snapshot: {hashed})",
        ms(settle.time),
        ms(git_settle.time)
    );

    println!(
        "\n| peak RSS                    |    retrace    |      git      |  bare walk   | retrace B/file |"
    );
    println!(
        "|-----------------------------|---------------|---------------|--------------|----------------|"
    );
    let rss_row = |name: &str, r: u64, g: u64| {
        println!(
            "| {name:<27} | {:>10.1} MB | {:>10.1} MB | {:>9.1} MB | {:>14} |",
            mb(r),
            mb(g),
            mb(walk_rss),
            r / managed
        );
    };
    rss_row("cold snapshot", cold_rss, git_cold.rss);
    rss_row("no-change snapshot", nochange_rss, git_nochange.rss);
    rss_row("session: turn begin", begin.rss, git_nochange.rss);
    rss_row("session: turn end (25)", end.rss, git_turn.rss);
    rss_row("session: undo it", undo.rss, git_undo.rss);
    rss_row("session: redo it", redo.rss, git_undo.rss);
    rss_row("watched: no-change", watched.nochange_rss, git_nochange.rss);
    rss_row("watched: turn end (25)", watched.end.rss, git_turn.rss);
    println!(
        "(wait4 ru_maxrss, the largest of a step's runs; each includes this benchmark's own \
         {:.1} MB at the spawn)",
        mb(floor)
    );
    watched.print(git_nochange.time, git_turn.time, walk);

    println!("\ntargets:");
    let target = |name: &str, ok: bool, detail: String| {
        println!(
            "- [{}] {name}: {detail}",
            if ok { "met" } else { "NOT met" }
        );
    };
    let ratio = |a: Duration, b: Duration| ms(a) / ms(b);
    let (r_git, r_walk) = (ratio(nochange, git_nochange.time), ratio(nochange, walk));
    target(
        "no-change <= 0.5x git and <= 0.8x the bare walk",
        r_git <= 0.5 && r_walk <= 0.8,
        format!("retrace/git {r_git:.2}x, retrace/walk {r_walk:.2}x"),
    );
    let r_end = ratio(end.time, git_turn.time);
    target(
        "turn end <= 0.5x git's add + write-tree",
        r_end <= 0.5,
        format!("retrace/git {r_end:.2}x"),
    );
    let speedup = ratio(git_cold.time, cold_time);
    target(
        "cold (whole command) >= 8x faster than git",
        speedup >= 8.0,
        format!("git/retrace {speedup:.2}x"),
    );
    target(
        "with a watcher, no-change (whole command) <= 20 ms",
        watched.nochange <= Duration::from_millis(20),
        format!("{:.1} ms", ms(watched.nochange)),
    );
    target(
        "with a watcher, turn end of 25 files (whole command) <= 60 ms",
        watched.end.time <= Duration::from_millis(60),
        format!("{:.1} ms", ms(watched.end.time)),
    );
    let allowed = 100 * watched.dirs + 20_000_000;
    target(
        "watcher memory <= 100 B per watched directory + 20 MB",
        watched.rss <= allowed,
        format!(
            "peak RSS {:.1} MB for {} directories, {:.1} MB allowed",
            mb(watched.rss),
            watched.dirs,
            mb(allowed)
        ),
    );
    let limit = |per_file: u64, mb_: u64| per_file * managed + mb_ * 1_000_000;
    target(
        "peak RSS, no-change <= 150 B/file + 30 MB",
        nochange_rss <= limit(150, 30),
        format!(
            "{:.1} MB of {:.1} MB allowed",
            mb(nochange_rss),
            mb(limit(150, 30))
        ),
    );
    target(
        "peak RSS, cold <= 250 B/file + 100 MB",
        cold_rss <= limit(250, 100),
        format!(
            "{:.1} MB of {:.1} MB allowed",
            mb(cold_rss),
            mb(limit(250, 100))
        ),
    );
    println!(
        "\n(turn: {} paths changed; retrace undo wrote {undo_written} and deleted {undo_deleted}; \
         the workspace after both undos {} the state before the turn; whole run {:.0} s)",
        changed.len(),
        if restored { "is" } else { "is NOT" },
        started.elapsed().as_secs_f64()
    );
}

/// What step 6 measured: the same commands with a live watcher.
struct Watched {
    /// `retrace watch --detach`, until the watcher answers ready (its crawl).
    start: Duration,
    /// The first capture after it started (walks: the watcher is newer than the cache).
    settle: Ran,
    nochange: Duration,
    nochange_rss: u64,
    /// Why each no-change capture walked, if one did.
    nochange_walked: Vec<String>,
    begin: Ran,
    end: Ran,
    undo: Ran,
    /// Why the turn's captures walked, if one did (`retrace status` after the turn).
    turn_walked: Option<String>,
    /// Whether the undo gave back the snapshot from before the turn.
    restored: bool,
    /// The watcher's peak RSS (`VmHWM`), its directories and its own heap estimate.
    rss: u64,
    dirs: u64,
    heap: u64,
}

/// `retrace snapshot --json`, and why it walked (`walked_because`), if it did.
fn snapshot_json(t: &Tools) -> (Ran, Option<String>, String) {
    let r = t.retrace(&["snapshot", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("snapshot --json printed {:?}: {e}", r.stdout));
    let walked = v["walked_because"].as_str().map(str::to_string);
    let id = v["id"].as_str().unwrap_or_default().to_string();
    (r, walked, id)
}

/// The peak resident set of process `pid` (`VmHWM` in `/proc/<pid>/status`), in bytes.
fn vm_hwm(pid: u32) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Step 6: `retrace watch --detach`, a settling capture, the no-change capture best of 3, the
/// turn of step 4 again through the session, its undo (which must give back `before_id`), and
/// the watcher's memory; then `retrace watch --stop`.
fn watched(t: &Tools, files: usize, before_id: &str) -> Watched {
    let ws = Workspace::open(&t.root, &Config::with_home(&t.home)).unwrap();
    let spec = ws.watch_spec();
    let started = Instant::now();
    let detach = t.retrace(&["watch", "--detach"]);
    let start = started.elapsed();
    assert!(
        detach.stdout.contains("watching"),
        "retrace watch --detach: {}{}",
        detach.stdout,
        detach.stderr
    );
    let (settle, _, _) = snapshot_json(t);
    let runs: Vec<(Ran, Option<String>, String)> = (0..3).map(|_| snapshot_json(t)).collect();
    let nochange = runs.iter().map(|r| r.0.time).min().unwrap();
    let nochange_rss = runs.iter().map(|r| r.0.rss).max().unwrap();
    let nochange_walked = runs.iter().filter_map(|r| r.1.clone()).collect();
    let ask = || {
        retrace::watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(2))
            .expect("the watcher answers its status")
    };
    let walks = ask().walks;
    let begin = t.session(&["turn", "begin", "--prompt", "watched"]);
    turn(&t.root, files);
    let end = t.session(&["turn", "end"]);
    let w = ask();
    let turn_walked = (w.walks > walks).then(|| {
        format!(
            "{} of the turn's captures walked, the last because {}",
            w.walks - walks,
            w.last_fallback.unwrap_or_default()
        )
    });
    let undo = t.session(&["undo"]);
    let (_, _, after) = snapshot_json(t);
    let w = ask();
    let rss = vm_hwm(w.pid);
    let _ = t.retrace(&["watch", "--stop"]);
    Watched {
        start,
        settle,
        nochange,
        nochange_rss,
        nochange_walked,
        begin,
        end,
        undo,
        turn_walked,
        restored: after == before_id,
        rss,
        dirs: w.watches,
        heap: w.heap_bytes,
    }
}

impl Watched {
    fn print(&self, git_nochange: Duration, git_turn: Duration, walk: Duration) {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "\nwith a live watcher (`retrace watch --detach`), each command a process of its own:"
        );
        println!(
            "| measurement                 |    retrace    |      git      |  bare walk   | git/ret  | ret/walk |"
        );
        println!(
            "|-----------------------------|---------------|---------------|--------------|----------|----------|"
        );
        let row = |name: &str, r: Duration, g: Duration| {
            println!(
                "| {name:<27} | {:>10.1} ms | {:>10.0} ms | {:>9.0} ms | {:>7.2}x | {:>7.2}x |",
                ms(r),
                ms(g),
                ms(walk),
                ms(g) / ms(r),
                ms(r) / ms(walk)
            );
        };
        row("no-change snapshot", self.nochange, git_nochange);
        row("session: turn begin", self.begin.time, git_nochange);
        row("session: turn end (25)", self.end.time, git_turn);
        row("session: undo it", self.undo.time, git_turn);
        println!(
            "(watch --detach until ready: {:.0} ms; the settling capture, which walks: {:.0} ms; \
             the watcher: {} directories, peak RSS {:.1} MB, own heap estimate {:.1} MB)",
            ms(self.start),
            ms(self.settle.time),
            self.dirs,
            self.rss as f64 / 1e6,
            self.heap as f64 / 1e6
        );
        if !self.nochange_walked.is_empty() {
            println!(
                "warning: no-change captures walked: {:?}",
                self.nochange_walked
            );
        }
        if let Some(w) = &self.turn_walked {
            println!("note: {w}");
        }
        if !self.restored {
            println!(
                "warning: the undo with a watcher did not give back the snapshot before the turn"
            );
        }
    }
}
