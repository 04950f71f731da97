//! Macro benchmark: retrace beside `git add -A && git write-tree` (through a private
//! GIT_DIR and GIT_INDEX_FILE, as shadow-git checkpoint tools run it) and a bare parallel
//! `lstat` walk, on a generated deterministic workspace.
//!
//! `cargo bench --bench macrobench -- [--files N] [--dir PATH] [--turns N] [--reuse]`
//!
//! `cargo bench --bench macrobench -- --profile long-session [--turns N] [--dir PATH]` runs
//! the long-session workload of issue 16 instead, through the CLI (see `long_session.rs`).
//!
//! `cargo bench --bench macrobench -- --profile opencode [--files N] [--turns N]` runs the
//! same turns through the real OpenCode CLI with its own snapshots and with retrace's plugin,
//! and compares what each keeps (see `opencode_storage.rs`).
//!
//! `cargo bench --bench macrobench -- --profile monorepo [--files N] [--dir PATH] [--reuse]`
//! runs a large-workspace workload (1M small files by default) through the CLI, each command
//! a process of its own with its peak RSS, beside git and a bare walk (see `monorepo.rs`).
//!
//! `cargo bench --bench macrobench -- --profile steps [--files N] [--layout macro|monorepo]`
//! measures what reporting an agent's tool calls as steps (`retrace step begin` / `step end`)
//! adds to each call, by `step_captures` policy, with and without a watcher (see `steps.rs`).
//!
//! `cargo bench --bench macrobench -- --profile restore [--files N] [--dir PATH] [--reuse]`
//! measures a whole restore of this workspace (100k files by default) into an emptied
//! workspace on a tmpfs and on the disk, beside git's `read-tree -u --reset` and the floor of
//! `zstd -d | tar -x` (see `restore.rs`).
//!
//! `cargo bench --bench macrobench -- --profile undo [--files N] [--rounds R] [--au PATH]`
//! times undo and redo of a 25-file agent turn with a watcher (20k files by default), each a
//! whole command, beside agent-undo's `au oops` when its binary is given (see `undo.rs`).
//!
//! `cargo bench --bench macrobench -- --profile share [--files N] [--turns N] [--from PATH
//! --session NAME]` exports a session to git, imports it, bundles and unbundles it, each
//! beside git moving the same history (see `share.rs`).
//!
//! `cargo bench --bench macrobench -- --profile bursts [--files N] [--layout macro|monorepo]`
//! measures local history (`retrace watch --record`): how soon a burst of writes is in the
//! log, its capture's time, and the watcher's CPU while idle (see `bursts.rs`).
//!
//! Workspace: text-like files of 1–20 KiB built from shared lines, ~8% binary, ~3% exact
//! copies, a few files of 1–50 MiB, an ignored `node_modules/` and `target/`, and a nested
//! repository. After generating it the benchmark waits out the stat cache's racy window
//! (2 s) so that "no-change" measures the steady state an agent sees between turns.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use retrace::{Config, RestoreOptions, Workspace};

#[path = "macrobench/bursts.rs"]
mod bursts;
#[path = "macrobench/long_session.rs"]
mod long_session;
#[path = "macrobench/monorepo.rs"]
mod monorepo;
#[path = "macrobench/opencode_storage.rs"]
mod opencode_storage;
#[path = "macrobench/restore.rs"]
mod restore;
#[path = "macrobench/share.rs"]
mod share;
#[path = "macrobench/steps.rs"]
mod steps;
#[path = "macrobench/undo.rs"]
mod undo;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic and fast; quality is irrelevant here.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn lines(rng: &mut Rng) -> Vec<String> {
    let words = [
        "let", "fn", "self", "value", "config", "return", "match", "Some", "None", "error", "path",
        "file", "impl", "struct", "pub", "use", "for", "in", "if", "else", "result", "data",
    ];
    (0..600)
        .map(|_| {
            let n = 3 + rng.below(9);
            let indent = " ".repeat(4 * rng.below(4) as usize);
            let body: Vec<&str> = (0..n)
                .map(|_| words[rng.below(words.len() as u64) as usize])
                .collect();
            format!("{indent}{};\n", body.join(" "))
        })
        .collect()
}

fn text_file(rng: &mut Rng, vocab: &[String]) -> Vec<u8> {
    let target = 1024 + rng.below(19 * 1024) as usize;
    let mut out = Vec::with_capacity(target + 100);
    while out.len() < target {
        out.extend_from_slice(vocab[rng.below(vocab.len() as u64) as usize].as_bytes());
    }
    out
}

fn binary(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

fn rel(i: usize) -> String {
    format!("src/m{:02}/d{:03}/f{i:06}.rs", i % 37, (i / 37) % 113)
}

fn generate(root: &Path, files: usize) {
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root).unwrap();
    let mut rng = Rng(0x5eed);
    let vocab = lines(&mut rng);
    fs::write(root.join(".gitignore"), "target/\nnode_modules/\n").unwrap();
    let mut previous: Vec<u8> = Vec::new();
    for i in 0..files {
        let p = root.join(rel(i));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let roll = rng.below(100);
        let data = if roll < 8 {
            let len = 1024 + rng.below(16 * 1024) as usize;
            binary(&mut rng, len)
        } else if roll < 11 && !previous.is_empty() {
            previous.clone()
        } else {
            text_file(&mut rng, &vocab)
        };
        fs::write(&p, &data).unwrap();
        previous = data;
    }
    let big_dir = root.join("assets");
    fs::create_dir_all(&big_dir).unwrap();
    for (i, mib) in [1usize, 3, 8, 20, 50].iter().enumerate() {
        let data: Vec<u8> = if i % 2 == 0 {
            binary(&mut rng, mib << 20)
        } else {
            let mut d = Vec::with_capacity(mib << 20);
            while d.len() < mib << 20 {
                d.extend_from_slice(vocab[rng.below(vocab.len() as u64) as usize].as_bytes());
            }
            d
        };
        fs::write(big_dir.join(format!("big{i}.bin")), data).unwrap();
    }
    for dir in ["node_modules/pkg/lib", "target/release/deps"] {
        fs::create_dir_all(root.join(dir)).unwrap();
        for i in 0..(files / 20).max(10) {
            fs::write(
                root.join(dir).join(format!("x{i}.js")),
                text_file(&mut rng, &vocab),
            )
            .unwrap();
        }
    }
    fs::create_dir_all(root.join("vendor/nested/.git")).unwrap();
    fs::write(
        root.join("vendor/nested/.git/HEAD"),
        "ref: refs/heads/main\n",
    )
    .unwrap();
    fs::write(root.join("vendor/nested/lib.c"), "int nested;\n").unwrap();
}

/// What turn `n` changes: 10 files to modify (appended to, if they exist), 10 to add (with
/// their contents) and 5 to delete (if they exist). Workspace-relative paths; the draws do
/// not depend on the disk, so two copies of a workspace get the same turn.
pub(crate) struct TurnPlan {
    pub(crate) modify: Vec<String>,
    pub(crate) add: Vec<(String, Vec<u8>)>,
    pub(crate) delete: Vec<String>,
}

impl TurnPlan {
    /// Every path the turn names, modified, added and deleted, without repeats.
    pub(crate) fn paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self.modify.clone();
        all.extend(self.add.iter().map(|(p, _)| p.clone()));
        all.extend(self.delete.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        all.retain(|p| seen.insert(p.clone()));
        all
    }
}

/// The plan of turn `n` on a workspace of `files` generated files.
pub(crate) fn turn_plan(files: usize, n: u64) -> TurnPlan {
    let mut rng = Rng(0xabc0 + n);
    let vocab = lines(&mut rng);
    let modify = (0..10)
        .map(|_| rel(rng.below(files as u64) as usize))
        .collect();
    let add = (0..10)
        .map(|i| (format!("src/new/t{n}/f{i}.rs"), text_file(&mut rng, &vocab)))
        .collect();
    let delete = (0..5)
        .map(|_| rel(rng.below(files as u64) as usize))
        .collect();
    TurnPlan {
        modify,
        add,
        delete,
    }
}

/// Applies turn `n`'s plan: appends `// turn n` to the files to modify, writes the new ones
/// (their directory created first; `pause` after creating it, so that a watcher has added
/// its watch before the files appear in it), deletes the files to delete.
pub(crate) fn apply_turn(root: &Path, plan: &TurnPlan, n: u64, pause: Duration) {
    for rel in &plan.modify {
        let p = root.join(rel);
        if p.exists() {
            let mut d = fs::read(&p).unwrap();
            d.extend_from_slice(format!("// turn {n}\n").as_bytes());
            fs::write(&p, d).unwrap();
        }
    }
    for (i, (rel, data)) in plan.add.iter().enumerate() {
        let p = root.join(rel);
        if i == 0 && !p.parent().unwrap().exists() {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::thread::sleep(pause);
        }
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    for rel in &plan.delete {
        let _ = fs::remove_file(root.join(rel));
    }
}

/// Changes 25 files: 10 modified, 10 added, 5 deleted.
fn turn(root: &Path, files: usize, n: u64) {
    apply_turn(root, &turn_plan(files, n), n, Duration::ZERO);
}

/// The value after `name` on the command line.
fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn reset_peak() {
    let _ = fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

/// The largest peak RSS of any child process that has ended (git's commands here).
fn children_peak_rss() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a plain-data struct into memory we own; on failure it writes
    // nothing and the zeroed struct reads as 0.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr());
        usage.assume_init()
    };
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// One whole command: its wall time from spawn to exit, its peak RSS, its output.
pub(crate) struct Ran {
    pub(crate) time: Duration,
    /// Its CPU time, user + system (`wait4`'s rusage).
    pub(crate) cpu: Duration,
    pub(crate) rss: u64,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `cmd` to its end as a process of its own (it must succeed) and measures it. The
/// peak RSS is `wait4`'s `ru_maxrss`, which also counts the memory this process had mapped
/// when it spawned the child (the exec replaces a copy, or with vfork the very same address
/// space): this process's high-water mark is reset to its current RSS first, so that floor is
/// what the benchmark holds now, not the most it ever held.
#[allow(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its rusage"
)]
pub(crate) fn run(mut cmd: Command) -> Ran {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    reset_peak();
    let t = Instant::now();
    let mut child = cmd.spawn().expect("the command starts");
    let mut stdout = String::new();
    let mut stderr = String::new();
    // Small outputs (a few lines): reading one pipe to its end cannot block on the other.
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 reaps our own child and writes plain data into memory we own; the
    // result is checked before the struct is read. `child` is never waited on again.
    let usage = unsafe {
        let r = libc::wait4(pid, &raw mut status, 0, usage.as_mut_ptr());
        assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
        usage.assume_init()
    };
    let time = t.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed ({status}):\n{stdout}{stderr}"
    );
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ran {
        time,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        stdout,
        stderr,
    }
}

/// The tools a profile runs side by side, each command a process of its own: retrace on a
/// private home, git on a private `GIT_DIR` and index ([`shadow_git`]).
pub(crate) struct Tools {
    pub(crate) retrace: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) git_dir: PathBuf,
    /// The session [`Tools::session`] runs in.
    pub(crate) session: &'static str,
}

impl Tools {
    /// The tools of a profile working under `base` (`ws/`, `home/`, `shadow.git/`), running
    /// `retrace` (this package's binary unless a profile compares another) in `session`.
    pub(crate) fn under(base: &Path, retrace: PathBuf, session: &'static str) -> Tools {
        Tools {
            retrace,
            root: base.join("ws"),
            home: base.join("home"),
            git_dir: base.join("shadow.git"),
            session,
        }
    }

    /// `retrace -C <root> <args>` on the private home, with no session or trace inherited.
    pub(crate) fn retrace_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.retrace);
        c.arg("-C")
            .arg(&self.root)
            .args(args)
            .env("RETRACE_HOME", &self.home)
            .env_remove("RETRACE_SESSION")
            .env_remove("RETRACE_TRACE")
            .current_dir(&self.root);
        c
    }

    /// Runs `retrace <args>`.
    pub(crate) fn retrace(&self, args: &[&str]) -> Ran {
        run(self.retrace_cmd(args))
    }

    /// Runs `retrace --session <session> <args>`.
    pub(crate) fn session(&self, args: &[&str]) -> Ran {
        let mut all = vec!["--session", self.session];
        all.extend_from_slice(args);
        self.retrace(&all)
    }

    /// Runs `git <args>` without automatic gc, signing or hooks.
    pub(crate) fn git(&self, args: &[&str]) -> Ran {
        let mut c = shadow_git(&self.git_dir, &self.root);
        c.args([
            "-c",
            "gc.auto=0",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args);
        run(c)
    }
}

fn bare_walk(root: &Path) -> usize {
    let count = std::sync::atomic::AtomicUsize::new(0);
    let mut b = ignore::WalkBuilder::new(root);
    b.standard_filters(false)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false);
    b.build_parallel().run(|| {
        Box::new(|e| {
            if let Ok(e) = e
                && e.path().symlink_metadata().is_ok()
            {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            ignore::WalkState::Continue
        })
    });
    count.into_inner()
}

struct Git {
    git_dir: PathBuf,
    root: PathBuf,
    head: Option<String>,
}

/// `git` on a private `GIT_DIR` and index with `root` as its work tree, as shadow-git
/// checkpoint tools run it.
fn shadow_git(git_dir: &Path, root: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", root)
        .env("GIT_INDEX_FILE", git_dir.join("shadow-index"))
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .current_dir(root);
    c
}

impl Git {
    fn cmd(&self, args: &[&str]) -> String {
        let o = shadow_git(&self.git_dir, &self.root)
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// What shadow-git tools do per checkpoint: add everything, write the tree, commit it.
    fn capture(&mut self) -> String {
        self.cmd(&["add", "-A"]);
        let tree = self.cmd(&["write-tree"]);
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "checkpoint"];
        let parent = self.head.clone();
        if let Some(p) = &parent {
            args.extend(["-p", p.as_str()]);
        }
        let commit = self.cmd(&args);
        self.cmd(&["update-ref", "refs/heads/main", &commit]);
        self.head = Some(commit);
        tree
    }
}

/// Disk space used by the files under `p` (blocks, so sparse files count what they use).
fn dir_size(p: &Path) -> u64 {
    walkdir::WalkDir::new(p)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--apply-turn") {
        return opencode_storage::apply_turn(&args);
    }
    if let Some(root) = arg(&args, "--bare-walk") {
        // The monorepo profile's walk, in a process of its own (for its own peak RSS).
        println!("{}", bare_walk(Path::new(&root)));
        return;
    }
    match args
        .iter()
        .position(|a| a == "--profile")
        .map(|i| args.get(i + 1).map(String::as_str))
    {
        None => {}
        Some(Some("long-session")) => return long_session::main(&args),
        Some(Some("opencode")) => return opencode_storage::main(&args),
        Some(Some("monorepo")) => return monorepo::main(&args),
        Some(Some("steps")) => return steps::main(&args),
        Some(Some("restore")) => return restore::main(&args),
        Some(Some("undo")) => return undo::main(&args),
        Some(Some("bursts")) => return bursts::main(&args),
        Some(Some("share")) => return share::main(&args),
        Some(p) => panic!(
            "unknown --profile {p:?} (known: long-session, opencode, monorepo, steps, restore, \
             undo, bursts, share)"
        ),
    }
    let arg = |name: &str| arg(&args, name);
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let turns: u64 = arg("--turns").and_then(|v| v.parse().ok()).unwrap_or(10);
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("retrace-bench-{files}")),
        PathBuf::from,
    );
    let root = base.join("ws");
    let home = base.join("home");
    let git_dir = base.join("shadow.git");
    let _ = fs::remove_dir_all(&home);
    let _ = fs::remove_dir_all(&git_dir);
    // `--reuse` keeps a workspace generated by an earlier run (marked by the file count);
    // the history turns below modify it, so by default it is generated afresh.
    let marker = base.join(format!("generated-{files}"));
    if !(args.iter().any(|a| a == "--reuse") && marker.exists()) {
        eprintln!("generating {files} files in {} ...", root.display());
        generate(&root, files);
        fs::write(&marker, "").unwrap();
    }
    let logical = dir_size(&root.join("src")) + dir_size(&root.join("assets"));
    std::thread::sleep(Duration::from_millis(2500));

    let walk = (0..3).map(|_| timed(|| bare_walk(&root)).0).min().unwrap();

    let ws = Workspace::open(&root, &Config::with_home(&home)).unwrap();
    reset_peak();
    let (cold, snap0) = timed(|| ws.snapshot(Some("cold".into())).unwrap());
    let cold_rss = peak_rss();
    std::thread::sleep(Duration::from_millis(2500));
    // Settles the entries the cold run wrote within the racy window.
    let (warm, _) = timed(|| ws.snapshot(None).unwrap());
    reset_peak();
    let nochange = (0..3)
        .map(|_| timed(|| ws.snapshot(None).unwrap()).0)
        .min()
        .unwrap();
    let nochange_rss = peak_rss();
    let hashed = ws.snapshot(None).unwrap().hashed;
    turn(&root, files, 0);
    let (turn_t, _) = timed(|| ws.snapshot(Some("turn 0".into())).unwrap());
    let (restore_t, r) = timed(|| ws.restore(&snap0.id, RestoreOptions::default()).unwrap());
    assert!(r.verified);

    fs::create_dir_all(&git_dir).unwrap();
    let mut git = Git {
        git_dir: git_dir.clone(),
        root: root.clone(),
        head: None,
    };
    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&git_dir)
        .status();
    assert!(init.is_ok_and(|s| s.success()), "git init");
    let (git_cold, git_tree0) = timed(|| git.capture());
    let git_nochange = (0..3).map(|_| timed(|| git.capture()).0).min().unwrap();
    turn(&root, files, 0);
    let (git_turn, _) = timed(|| git.capture());
    let (git_restore, _) = timed(|| git.cmd(&["read-tree", "-u", "--reset", &git_tree0]));

    // Before `git gc`, whose memory is not a capture's.
    let git_rss = children_peak_rss();

    // A history of `turns` turns for both, from the cold state.
    ws.snapshot(None).unwrap();
    ws.restore(
        &snap0.id,
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    for n in 1..turns {
        turn(&root, files, n);
        ws.snapshot(None).unwrap();
        git.capture();
    }
    let store_bytes = retrace::store::disk_bytes(ws.store_path());

    // An agent session: one turn of 25 files, then undo and redo it.
    std::thread::sleep(Duration::from_millis(2500));
    let session = ws.session("bench");
    let (begin_t, t) = timed(|| {
        let t = session.begin_turn(None, None).unwrap();
        t.wait_before(Duration::from_secs(600)).unwrap();
        t
    });
    turn(&root, files, turns);
    let (end_t, _) = timed(|| t.end(None).unwrap());
    let (undo_t, o) = timed(|| session.undo(retrace::Mode::Both).unwrap());
    assert!(o.is_success(), "{o:?}");
    let (redo_t, o) = timed(|| session.redo().unwrap());
    assert!(o.is_success(), "{o:?}");
    let (gc_t, _) = timed(|| git.cmd(&["gc", "-q"]));
    let git_bytes = dir_size(&git_dir.join("objects"));
    // retrace's counterpart of `git gc`: a full maintenance pass (collection, then every
    // frame recompressed at the dense level).
    let (maintain_t, m) = timed(|| {
        ws.maintain(retrace::store::now_ms(), ws.settings().gc_grace_secs.value)
            .unwrap()
    });
    let maintained_bytes = retrace::store::disk_bytes(ws.store_path());

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let row = |name: &str, r: Duration, g: Duration| {
        println!(
            "| {name:<22} | {:>10.0} ms | {:>10.0} ms | {:>9.0} ms | {:>7.2}x | {:>7.2}x |",
            ms(r),
            ms(g),
            ms(walk),
            ms(g) / ms(r),
            ms(r) / ms(walk)
        );
    };
    println!(
        "\nworkspace: {files} files + 5 big files, {:.0} MB of managed content",
        logical as f64 / 1e6
    );
    println!(
        "| measurement            |    retrace    |      git      |  bare walk   | git/ret  | ret/walk |"
    );
    println!(
        "|------------------------|---------------|---------------|--------------|----------|----------|"
    );
    row("cold capture", cold, git_cold);
    row("no-change capture", nochange, git_nochange);
    row("turn of 25 files", turn_t, git_turn);
    row("restore of that turn", restore_t, git_restore);
    row("session: begin turn", begin_t, git_nochange);
    row("session: end turn (25)", end_t, git_turn);
    row("session: undo it", undo_t, git_restore);
    row("session: redo it", redo_t, git_restore);
    println!(
        "| store after {turns} turns   | {:>10.1} MB | {:>10.1} MB | git gc {:.0} ms | ret/git {:.2}x |",
        store_bytes as f64 / 1e6,
        git_bytes as f64 / 1e6,
        ms(gc_t),
        store_bytes as f64 / git_bytes as f64
    );
    println!(
        "| store after `retrace gc` | {:>8.1} MB | {:>10.1} MB | retrace gc {:.0} ms | ret/git {:.2}x |",
        maintained_bytes as f64 / 1e6,
        git_bytes as f64 / 1e6,
        ms(maintain_t),
        maintained_bytes as f64 / git_bytes as f64
    );
    println!(
        "(recompressed {} frames at the dense level: {:.1} MB -> {:.1} MB stored)",
        m.dense.frames,
        m.dense.bytes_before as f64 / 1e6,
        m.dense.bytes_after as f64 / 1e6
    );
    println!(
        "| peak RSS, cold capture | {:>10.1} MB | {:>10.1} MB (largest git process) | ret/git {:.2}x | {} bytes/file |",
        cold_rss as f64 / 1e6,
        git_rss as f64 / 1e6,
        cold_rss as f64 / git_rss.max(1) as f64,
        cold_rss / files as u64
    );
    println!(
        "| peak RSS, no-change    | {:>10.1} MB | {} bytes/file |",
        nochange_rss as f64 / 1e6,
        nochange_rss / files as u64
    );
    println!(
        "(settling capture after cold: {:.0} ms; files re-read by a no-change capture: {hashed})",
        ms(warm)
    );
    let s = Workspace::locate_store(&root, &Config::with_home(&home)).unwrap();
    drop(ws);
    let st = retrace::store::Store::open_read_only(&s)
        .unwrap()
        .reader()
        .unwrap()
        .stats()
        .unwrap();
    println!(
        "(store file: {} B on disk, length {} B, for {} B of compressed payload: {:.3}x)",
        st.disk_bytes,
        st.file_bytes,
        st.log_bytes,
        st.disk_bytes as f64 / st.log_bytes as f64
    );
}
