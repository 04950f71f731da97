//! `--profile restore`: a whole restore of the macro workspace into an emptied workspace,
//! beside git's checkout of the same tree and the floor of unpacking the same files.
//!
//! `cargo bench --bench macrobench -- --profile restore [--files N] [--dir PATH]
//! [--disk-dir PATH] [--no-disk] [--no-tmpfs] [--rounds R] [--reuse] [--retrace PATH]
//! [--baseline PATH]`
//!
//! Workspace: the default profile's generator (default N = 100,000: text-like files of
//! 1–20 KiB, ~8% binary, ~3% copies, five big files of 1–50 MiB, an ignored `node_modules/`
//! and `target/`; its nested repository is removed, since no contender restores one). It is
//! measured twice, each time with everything
//! (workspace, retrace's home, git's directory, the archive) under one base directory: first
//! on a tmpfs (`--dir`, default `/dev/shm/retrace-bench-restore-N`), where the disk is out of
//! the picture, then on the machine's disk (`--disk-dir`, default
//! `$TMPDIR/retrace-bench-restore-N`; `--no-disk` skips it). `--reuse` keeps a workspace an
//! earlier run left restored (marked by `generated-restore-N`): its managed files, without
//! the ignored ones, which no contender writes back.
//!
//! Before anything is timed: `retrace snapshot` on a fresh home; `git add -A && git
//! write-tree` through a private `GIT_DIR` and index; the managed files (`git ls-files`
//! without the nested repository's gitlink, the same set retrace manages) packed with
//! `tar -c | zstd -3`.
//!
//! Then R rounds (default 3), each running the three contenders in a rotated order, each a
//! whole command in a process of its own (wall time from spawn to exit, CPU time and peak
//! RSS from `wait4`), each writing into an empty workspace:
//!
//! - retrace: `retrace restore --force ID` (forced: the emptied workspace differs from the
//!   last known state, so it first records the empty disk as a safety snapshot);
//! - git: `git read-tree -u --reset TREE` from the private `GIT_DIR`, its private index
//!   removed first, so that git too checks out into an empty directory;
//! - the floor: `zstd -d -c ARCHIVE | tar -x -C WS` (one shell pipeline; `wait4` gives the
//!   pipeline's CPU and its largest process's peak RSS);
//! - with `--baseline PATH`: the same `retrace restore` with another retrace binary (say, a
//!   build from before a change), in the same rounds. `--retrace PATH` picks the binary
//!   measured as retrace (default: the one this build made).
//!
//! Between runs the workspace is removed (every file and directory, ignored ones too) and
//! created empty, then `sync` writes back the removal, so that no run pays for what ran
//! before it. The page cache is not dropped: the sources (retrace's store, git's objects,
//! the archive) were just written or read, and every contender reads its own from memory
//! alike (on a tmpfs there is nothing else). On the disk the writes of a run may still sit in
//! the page cache when its command exits (none of the three syncs its files), so the disk
//! rows also give the time of the command plus a `sync` right after it: the time until the
//! files are on the disk.
//!
//! After every run the workspace's managed files (path, executable bit, content) are hashed
//! and compared with the generated workspace's: a contender that wrote something else
//! fails the benchmark. The first retrace run of each place sets `RETRACE_TRACE=1`, and its
//! phases are printed (the trace costs a few lines of stderr).
//!
//! Printed: per place, best of R (time; CPU of that run, the largest peak RSS of the R),
//! ratios, and whether each target of issue 39 is met on the tmpfs (the peak RSS target on
//! the traced run's own `VmHWM`, which `wait4`'s figure exceeds by what the benchmark held at
//! the spawn).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::monorepo::{remove_tree, settle_disk, wait_racy_window};
use super::{Ran, Tools, run};

/// The contenders.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Who {
    Retrace,
    Git,
    Floor,
    /// Another retrace binary (`--baseline PATH`), the same command.
    Baseline,
}

impl Who {
    fn name(self) -> &'static str {
        match self {
            Who::Retrace => "retrace restore",
            Who::Git => "git read-tree -u",
            Who::Floor => "floor: zstd -d | tar -x",
            Who::Baseline => "retrace restore, baseline",
        }
    }
}

/// The retrace binaries measured: `--retrace PATH` (default: this build's) and, with
/// `--baseline PATH`, a second one run the same way in the same rounds (before and after a
/// change, under the same load).
struct Binaries {
    retrace: PathBuf,
    baseline: Option<PathBuf>,
}

impl Binaries {
    fn contenders(&self) -> Vec<Who> {
        let mut all = vec![Who::Retrace, Who::Git, Who::Floor];
        if self.baseline.is_some() {
            all.push(Who::Baseline);
        }
        all
    }
}

/// One contender's runs at one place.
#[derive(Default)]
struct Runs {
    runs: Vec<Ran>,
    /// Each run's time plus the `sync` right after it (disk only).
    synced: Vec<Duration>,
}

impl Runs {
    fn best(&self) -> &Ran {
        self.runs
            .iter()
            .min_by_key(|r| r.time)
            .expect("at least one run")
    }

    fn max_rss(&self) -> u64 {
        self.runs.iter().map(|r| r.rss).max().unwrap_or(0)
    }

    fn best_synced(&self) -> Option<Duration> {
        self.synced.iter().min().copied()
    }
}

/// What one place (tmpfs or disk) measured.
struct Place {
    label: &'static str,
    base: PathBuf,
    managed_files: usize,
    managed_bytes: u64,
    store_bytes: u64,
    archive_bytes: u64,
    results: [Runs; 4],
    contenders: Vec<Who>,
    /// `RETRACE_TRACE=1` lines of the traced retrace run, and that run's time.
    trace: Vec<String>,
    trace_time: Duration,
    /// What the benchmark process itself holds at a spawn (every peak RSS includes it).
    floor_rss: u64,
}

impl Place {
    /// The traced retrace run's own peak RSS (`retrace trace: peak RSS N KiB`: its `VmHWM`,
    /// without what the benchmark held at the spawn), in bytes.
    fn traced_peak(&self) -> Option<u64> {
        self.trace
            .iter()
            .find_map(|l| {
                let kib = l.strip_prefix("retrace trace: peak RSS ")?;
                kib.trim_end_matches(" KiB").trim().parse::<u64>().ok()
            })
            .map(|kib| kib * 1024)
    }
}

impl Place {
    fn of(&self, who: Who) -> &Runs {
        &self.results[who as usize]
    }
}

/// A digest of the managed files under `root`: path, executable bit and content of each
/// path of `paths` (sorted), hashed in parallel.
fn digest(root: &Path, paths: &[String]) -> Result<blake3::Hash, String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let each: Vec<Result<[u8; 33], String>> = paths
        .par_iter()
        .map(|p| {
            let at = root.join(p);
            let meta = at.symlink_metadata().map_err(|e| format!("{p}: {e}"))?;
            let mut h = blake3::Hasher::new();
            let kind = if meta.file_type().is_symlink() {
                let t = fs::read_link(&at).map_err(|e| format!("{p}: {e}"))?;
                h.update(t.as_os_str().as_bytes());
                2
            } else {
                let f = fs::File::open(&at).map_err(|e| format!("{p}: {e}"))?;
                h.update_reader(f).map_err(|e| format!("{p}: {e}"))?;
                u8::from(meta.permissions().mode() & 0o100 != 0)
            };
            let mut out = [0u8; 33];
            out[..32].copy_from_slice(h.finalize().as_bytes());
            out[32] = kind;
            Ok(out)
        })
        .collect();
    let mut all = blake3::Hasher::new();
    for (p, e) in paths.iter().zip(each) {
        all.update(p.as_bytes());
        all.update(&[0]);
        all.update(&e?);
    }
    Ok(all.finalize())
}

/// Removes the workspace and everything in it, creates it empty and writes the removal back.
fn empty(root: &Path) {
    remove_tree(root);
    assert!(!root.exists(), "{} could not be removed", root.display());
    fs::create_dir_all(root).unwrap();
    settle_disk();
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

/// The managed files git's index lists (its gitlinks, nested repositories, left out).
fn managed_paths(t: &Tools) -> Vec<String> {
    let r = t.git(&["ls-files", "-s", "-z"]);
    let mut paths: Vec<String> = r
        .stdout
        .split('\0')
        .filter(|l| !l.is_empty() && !l.starts_with("160000 "))
        .filter_map(|l| l.split_once('\t').map(|(_, p)| p.to_string()))
        .collect();
    paths.sort();
    paths
}

#[allow(clippy::too_many_lines)] // one sequence of steps, read top to bottom
fn measure(
    label: &'static str,
    bins: &Binaries,
    base: &Path,
    files: usize,
    rounds: usize,
    reuse: bool,
    progress: &dyn Fn(&str),
) -> Place {
    let t = Tools::under(base, bins.retrace.clone(), "bench");
    let archive = base.join("managed.tar.zst");
    let list = base.join("managed.list");
    fs::create_dir_all(base).unwrap();
    for d in [&t.home, &t.git_dir] {
        remove_tree(d);
    }
    // Removed while the runs empty and rewrite the workspace; written back once the last
    // run's result is checked, so `--reuse` never meets a half-written workspace.
    let marker = base.join(format!("generated-restore-{files}"));
    if reuse && marker.exists() {
        progress(&format!(
            "{label}: reusing {files} files in {}",
            t.root.display()
        ));
    } else {
        let _ = fs::remove_file(&marker);
        progress(&format!(
            "{label}: generating {files} files in {} ...",
            t.root.display()
        ));
        remove_tree(&t.root);
        super::generate(&t.root, files);
        // No contender restores a nested repository (retrace leaves one alone, git makes an
        // empty directory of its gitlink): without it all three write the same files.
        remove_tree(&t.root.join("vendor"));
    }
    settle_disk();
    wait_racy_window();

    progress(&format!("{label}: retrace snapshot (fresh home)"));
    fs::create_dir_all(&t.home).unwrap();
    let id = snapshot_id(&t.retrace(&["snapshot", "restore source"]));
    let store =
        retrace::Workspace::locate_store(&t.root, &retrace::Config::with_home(&t.home)).unwrap();
    let store_bytes = retrace::store::disk_bytes(&store);

    progress(&format!("{label}: git add -A && git write-tree"));
    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&t.git_dir)
        .status();
    assert!(init.is_ok_and(|s| s.success()), "git init");
    t.git(&["add", "-A"]);
    let tree = t.git(&["write-tree"]).stdout.trim().to_string();

    progress(&format!("{label}: tar | zstd -3 of the managed files"));
    let paths = managed_paths(&t);
    let mut nul = Vec::new();
    for p in &paths {
        nul.extend_from_slice(p.as_bytes());
        nul.push(0);
    }
    fs::write(&list, nul).unwrap();
    let mut pack = Command::new("sh");
    pack.arg("-c")
        .arg(r#"tar -c -f - -C "$1" --null -T "$2" | zstd -q -3 -T0 -f -o "$3""#)
        .arg("sh")
        .arg(&t.root)
        .arg(&list)
        .arg(&archive);
    run(pack);
    let archive_bytes = fs::metadata(&archive).map_or(0, |m| m.len());
    let managed_bytes: u64 = paths
        .iter()
        .filter_map(|p| t.root.join(p).symlink_metadata().ok())
        .map(|m| m.len())
        .sum();
    let want = digest(&t.root, &paths).unwrap();
    let _ = fs::remove_file(&marker);

    let floor_rss = run(Command::new("true")).rss;
    let contenders = bins.contenders();
    let mut results: [Runs; 4] = Default::default();
    let mut trace = Vec::new();
    let mut trace_time = Duration::ZERO;
    let on_disk = label == "disk";
    for round in 0..rounds {
        for k in 0..contenders.len() {
            let who = contenders[(round + k) % contenders.len()];
            progress(&format!(
                "{label}: round {}/{rounds}: {}",
                round + 1,
                who.name()
            ));
            empty(&t.root);
            let cmd = match who {
                Who::Retrace | Who::Baseline => {
                    let mut c = t.retrace_cmd(&["restore", "--force", &id]);
                    if who == Who::Baseline
                        && let Some(b) = &bins.baseline
                    {
                        c = Command::new(b);
                        c.arg("-C")
                            .arg(&t.root)
                            .args(["restore", "--force", &id])
                            .env("RETRACE_HOME", &t.home)
                            .env_remove("RETRACE_SESSION")
                            .env_remove("RETRACE_TRACE")
                            .current_dir(&t.root);
                    }
                    if round == 0 {
                        c.env("RETRACE_TRACE", "1");
                    }
                    c
                }
                Who::Git => {
                    let _ = fs::remove_file(t.git_dir.join("shadow-index"));
                    let mut c = super::shadow_git(&t.git_dir, &t.root);
                    c.args(["-c", "gc.auto=0", "read-tree", "-u", "--reset", &tree]);
                    c
                }
                Who::Floor => {
                    let mut c = Command::new("sh");
                    c.arg("-c")
                        .arg(r#"zstd -d -q -c "$1" | tar -x -f - -C "$2""#)
                        .arg("sh")
                        .arg(&archive)
                        .arg(&t.root);
                    c
                }
            };
            let started = Instant::now();
            let ran = run(cmd);
            if on_disk {
                settle_disk();
                results[who as usize].synced.push(started.elapsed());
            }
            if matches!(who, Who::Retrace | Who::Baseline) {
                assert!(
                    !ran.stdout.contains("warning:")
                        && ran
                            .stdout
                            .contains(&format!("{} written, 0 deleted", paths.len())),
                    "retrace restore did not write every file:\n{}",
                    ran.stdout
                        .lines()
                        .rev()
                        .take(5)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                if round == 0 && who == Who::Retrace {
                    trace = ran
                        .stderr
                        .lines()
                        .filter(|l| l.starts_with("retrace trace:"))
                        .map(str::to_string)
                        .collect();
                    trace_time = ran.time;
                }
            }
            match digest(&t.root, &paths) {
                Ok(got) if got == want => {}
                Ok(_) => panic!(
                    "{}: the restored files differ from the workspace's",
                    who.name()
                ),
                Err(e) => panic!("{}: a restored file is missing: {e}", who.name()),
            }
            results[who as usize].runs.push(ran);
        }
    }
    // The last run restored every managed file (checked above). The ignored files are gone:
    // a `--reuse` run measures the same managed files.
    fs::write(&marker, "").unwrap();
    Place {
        label,
        base: base.to_path_buf(),
        managed_files: paths.len(),
        managed_bytes,
        store_bytes,
        archive_bytes,
        results,
        contenders,
        trace,
        trace_time,
        floor_rss,
    }
}

fn print(p: &Place, rounds: usize) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "\n{} ({}): {} managed files, {:.0} MB; retrace's store {:.0} MB, the archive {:.0} MB; \
         best of {rounds}",
        p.label,
        p.base.display(),
        p.managed_files,
        mb(p.managed_bytes),
        mb(p.store_bytes),
        mb(p.archive_bytes)
    );
    let synced = p.label == "disk";
    print!(
        "| contender                 |    wall    |    CPU     | peak RSS  | /floor | git/this |"
    );
    println!("{}", if synced { " + sync   |" } else { "" });
    print!(
        "|---------------------------|------------|------------|-----------|--------|----------|"
    );
    println!("{}", if synced { "----------|" } else { "" });
    let floor = p.of(Who::Floor).best().time;
    let git = p.of(Who::Git).best().time;
    for &who in &p.contenders {
        let r = p.of(who);
        let b = r.best();
        print!(
            "| {:<25} | {:>7.0} ms | {:>7.0} ms | {:>6.1} MB | {:>5.2}x | {:>7.2}x |",
            who.name(),
            ms(b.time),
            ms(b.cpu),
            mb(r.max_rss()),
            ms(b.time) / ms(floor),
            ms(git) / ms(b.time)
        );
        match r.best_synced() {
            Some(s) if synced => println!(" {:>5.0} ms |", ms(s)),
            _ => println!(),
        }
    }
    println!(
        "(all runs, ms: {}; peak RSS includes the benchmark's own {:.1} MB at the spawn)",
        p.contenders
            .iter()
            .map(|&w| format!(
                "{} {}",
                w.name(),
                p.of(w)
                    .runs
                    .iter()
                    .map(|r| format!("{:.0}", ms(r.time)))
                    .collect::<Vec<_>>()
                    .join("/")
            ))
            .collect::<Vec<_>>()
            .join("; "),
        mb(p.floor_rss)
    );
    println!(
        "retrace's phases (RETRACE_TRACE=1, first run, {:.0} ms):",
        ms(p.trace_time)
    );
    for l in &p.trace {
        println!("  {l}");
    }
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rounds: usize = arg("--rounds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let reuse = args.iter().any(|a| a == "--reuse");
    let shm = arg("--dir").map_or_else(
        || PathBuf::from(format!("/dev/shm/retrace-bench-restore-{files}")),
        PathBuf::from,
    );
    let disk = (!args.iter().any(|a| a == "--no-disk")).then(|| {
        arg("--disk-dir").map_or_else(
            || std::env::temp_dir().join(format!("retrace-bench-restore-{files}")),
            PathBuf::from,
        )
    });
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    };
    let bins = Binaries {
        retrace: arg("--retrace").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_retrace")),
            PathBuf::from,
        ),
        baseline: arg("--baseline").map(PathBuf::from),
    };
    // `--no-tmpfs`: the disk alone (a second run of a long, noisy measurement).
    let tmpfs = (!args.iter().any(|a| a == "--no-tmpfs"))
        .then(|| measure("tmpfs", &bins, &shm, files, rounds, reuse, &progress));
    let on_disk = disk.map(|d| measure("disk", &bins, &d, files, rounds, reuse, &progress));
    progress("done");

    println!(
        "\nwhole restore of the macro workspace ({files} files + 5 big files) into an emptied \
         workspace; each command a process of its own"
    );
    for p in tmpfs.iter().chain(&on_disk) {
        print(p, rounds);
    }
    let Some(tmpfs) = tmpfs else {
        println!("(whole run {:.0} s)", started.elapsed().as_secs_f64());
        return;
    };

    println!("\ntargets (tmpfs):");
    let target = |name: &str, ok: bool, detail: String| {
        println!(
            "- [{}] {name}: {detail}",
            if ok { "met" } else { "NOT met" }
        );
    };
    let secs = |w: Who| tmpfs.of(w).best().time.as_secs_f64();
    let vs_git = secs(Who::Git) / secs(Who::Retrace);
    target(
        "whole restore >= 2x faster than git's read-tree -u --reset",
        vs_git >= 2.0,
        format!("git/retrace {vs_git:.2}x"),
    );
    let vs_floor = secs(Who::Retrace) / secs(Who::Floor);
    target(
        "whole restore <= 1.3x the floor (zstd -d | tar -x)",
        vs_floor <= 1.3,
        format!("retrace/floor {vs_floor:.2}x"),
    );
    // Decided on the process's own peak (the traced run's `VmHWM`): `wait4`'s figure also
    // counts what the benchmark held when it spawned the command.
    let rss = tmpfs.of(Who::Retrace).max_rss();
    let own = tmpfs.traced_peak();
    target(
        "peak RSS <= 150 MB",
        own.unwrap_or(rss) <= 150_000_000,
        format!(
            "own peak (VmHWM, traced run) {}; wait4 {:.1} MB, which includes the benchmark's \
             {:.1} MB",
            own.map_or("unknown".to_string(), |b| format!(
                "{:.1} MB",
                b as f64 / 1e6
            )),
            rss as f64 / 1e6,
            tmpfs.floor_rss as f64 / 1e6
        ),
    );
    println!("(whole run {:.0} s)", started.elapsed().as_secs_f64());
}
