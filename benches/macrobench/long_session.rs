//! `--profile long-session` (issue 16): a small workspace edited again and again, through the
//! real CLI, beside git committing the same states.
//!
//! `cargo bench --bench macrobench -- --profile long-session [--turns N] [--dir PATH]`
//!
//! Workspace: 12 code-like text files of 60–200 KB (deterministic, the generator of
//! `docs/notes/delta-lab`). Then `--turns` turns (default 300), each run as an agent adapter
//! runs it: `retrace --session S turn begin --prompt ...`, 1–6 line edits (replace 70%,
//! insert 20%, delete 10%) in each of 3 distinct files, `retrace --session S turn end`; git
//! commits the same after-state with `git add -A && git commit` through a private
//! `GIT_DIR`/`GIT_INDEX_FILE` (the workspace is its work tree). Every command is a process
//! of its own, timed whole (spawn to exit) with its peak RSS (`wait4`).
//!
//! Printed side by side: store bytes before any gc and after `retrace gc --grace 0` (disk
//! blocks and file length of `store.redb`) against git's `objects/` before and after
//! `git gc`; the median turn (begin + end against add + commit); and after both gcs,
//! `retrace undo` of the newest turn and `retrace navigate turn:1:before` (a restore across
//! the whole session to the first turn's before-state, not an undo), against
//! `git read-tree -u --reset` to the same commits.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use retrace::{Config, Workspace};

use super::{Ran, Rng, Tools};

const FILES: usize = 12;
const SESSION: &str = "long";
/// How often each restore (undo, navigate) is timed.
const REPS: usize = 9;

impl Rng {
    fn range(&mut self, lo: u64, hi_incl: u64) -> u64 {
        lo + self.below(hi_incl - lo + 1)
    }
}

/// Code-like lines over a Zipf-ish vocabulary (ported from `docs/notes/delta-lab`).
struct Gen {
    words: Vec<String>,
    types: Vec<String>,
}

impl Gen {
    fn new(rng: &mut Rng) -> Gen {
        const SYL: &[&str] = &[
            "ka", "to", "ri", "mon", "sel", "ver", "ad", "ex", "tra", "pol", "in", "de", "qu",
            "ba", "lo", "ne", "st", "un", "fi", "gr", "op", "ch", "mi", "zo",
        ];
        let words: Vec<String> = (0..400)
            .map(|_| {
                (0..rng.range(1, 3))
                    .map(|_| SYL[rng.below(SYL.len() as u64) as usize])
                    .collect()
            })
            .collect();
        let types = (0..40)
            .map(|_| {
                let w = &words[rng.below(400) as usize];
                let mut c = w.chars();
                let f = c.next().unwrap().to_ascii_uppercase();
                format!("{f}{}", c.as_str())
            })
            .collect();
        Gen { words, types }
    }

    fn w(&self, r: &mut Rng) -> &str {
        // Zipf-ish: small ids far more frequent.
        &self.words[(r.below(400) * r.below(400) / 400) as usize]
    }

    fn t(&self, r: &mut Rng) -> &str {
        &self.types[r.below(self.types.len() as u64) as usize]
    }

    fn line(&self, r: &mut Rng) -> String {
        let ind = "    ".repeat(r.below(4) as usize);
        let n = r.below(100_000);
        let s = match r.below(10) {
            0 => format!(
                "let {} = {}.{}({}, {n});",
                self.w(r),
                self.w(r),
                self.w(r),
                self.w(r)
            ),
            1 => format!("if {} > {} {{", self.w(r), n % 1000),
            2 => "}".to_string(),
            3 => format!(
                "pub fn {}_{}(&mut self, {}: &{}) -> Result<{}, Error> {{",
                self.w(r),
                self.w(r),
                self.w(r),
                self.t(r),
                self.t(r)
            ),
            4 => format!(
                "// {} {} the {} {} when {}",
                self.w(r),
                self.w(r),
                self.w(r),
                self.w(r),
                self.w(r)
            ),
            5 => format!(
                "return {}.{}().map_err({}::{})?;",
                self.w(r),
                self.w(r),
                self.t(r),
                self.w(r)
            ),
            6 => format!("{}.push({}[{}]);", self.w(r), self.w(r), n % 64),
            7 => format!(
                "let {}: {}<{}> = {}::new();",
                self.w(r),
                self.t(r),
                self.t(r),
                self.t(r)
            ),
            8 => format!(
                "{}::{}({}, \"{} {}\")",
                self.t(r),
                self.w(r),
                self.w(r),
                self.w(r),
                self.w(r)
            ),
            _ => format!("self.{} += {}.len() as u64;", self.w(r), self.w(r)),
        };
        ind + &s
    }

    fn file(&self, r: &mut Rng, target: usize) -> Vec<String> {
        let mut v = Vec::new();
        let mut n = 0;
        while n < target {
            let l = self.line(r);
            n += l.len() + 1;
            v.push(l);
        }
        v
    }

    /// 1–6 line edits: replace 70%, insert 20%, delete 10%.
    fn edit(&self, r: &mut Rng, lines: &mut Vec<String>) {
        for _ in 0..r.range(1, 6) {
            let i = r.below(lines.len() as u64) as usize;
            match r.below(10) {
                0..=6 => lines[i] = self.line(r),
                7 | 8 => lines.insert(i, self.line(r)),
                _ => {
                    lines.remove(i);
                }
            }
        }
    }
}

fn rel(i: usize) -> String {
    format!("src/module_{i:02}.rs")
}

fn write(root: &Path, i: usize, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    fs::write(root.join(rel(i)), s).unwrap();
}

/// Disk blocks and length of a file.
fn file_bytes(p: &Path) -> (u64, u64) {
    let m = fs::metadata(p).unwrap();
    (std::os::unix::fs::MetadataExt::blocks(&m) * 512, m.len())
}

/// Disk blocks and apparent bytes (`du -sb`) of the files under `p`.
fn tree_bytes(p: &Path) -> (u64, u64) {
    walkdir::WalkDir::new(p)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .fold((0, 0), |(b, l), m| {
            (
                b + std::os::unix::fs::MetadataExt::blocks(&m) * 512,
                l + m.len(),
            )
        })
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn p90(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

fn median_u64(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[v.len() / 2]
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let turns: usize = arg("--turns").and_then(|v| v.parse().ok()).unwrap_or(300);
    assert!(turns >= 1, "--turns must be at least 1");
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join("retrace-bench-long-session"),
        PathBuf::from,
    );
    let t = Tools::under(&base, PathBuf::from(env!("CARGO_BIN_EXE_retrace")), SESSION);
    let started = Instant::now();
    for d in [&t.root, &t.home, &t.git_dir] {
        let _ = fs::remove_dir_all(d);
    }
    fs::create_dir_all(t.root.join("src")).unwrap();
    fs::create_dir_all(&t.home).unwrap();

    let mut rng = Rng(0x16_5eed);
    let g = Gen::new(&mut rng);
    let mut files: Vec<Vec<String>> = (0..FILES)
        .map(|_| {
            let size = rng.range(60_000, 200_000) as usize;
            g.file(&mut rng, size)
        })
        .collect();
    for (i, f) in files.iter().enumerate() {
        write(&t.root, i, f);
    }
    let logical = tree_bytes(&t.root).1;
    eprintln!(
        "long session: {FILES} files ({:.2} MB) in {}, {turns} turns ...",
        logical as f64 / 1e6,
        t.root.display()
    );

    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&t.git_dir)
        .status();
    assert!(init.is_ok_and(|s| s.success()), "git init");
    let git_cold =
        t.git(&["add", "-A"]).time + t.git(&["commit", "-q", "--no-verify", "-m", "cold"]).time;

    let (mut begin, mut end, mut ret_turn) = (Vec::new(), Vec::new(), Vec::new());
    let (mut add, mut commit, mut git_turn) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ret_rss, mut git_rss) = (Vec::new(), Vec::new());
    for n in 1..=turns {
        let b = t.session(&["turn", "begin", "--prompt", &format!("prompt {n}")]);
        let mut picked = Vec::new();
        while picked.len() < 3 {
            let f = rng.below(FILES as u64) as usize;
            if !picked.contains(&f) {
                picked.push(f);
            }
        }
        for &f in &picked {
            g.edit(&mut rng, &mut files[f]);
            write(&t.root, f, &files[f]);
        }
        let e = t.session(&["turn", "end"]);
        let a = t.git(&["add", "-A"]);
        let c = t.git(&["commit", "-q", "--no-verify", "-m", &format!("turn {n}")]);
        ret_turn.push(b.time + e.time);
        ret_rss.push(b.rss.max(e.rss));
        begin.push(b.time);
        end.push(e.time);
        git_turn.push(a.time + c.time);
        git_rss.push(a.rss.max(c.rss));
        add.push(a.time);
        commit.push(c.time);
        if n % 50 == 0 {
            eprintln!("  {n} turns, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    let session_t = started.elapsed();

    let store = Workspace::locate_store(&t.root, &Config::with_home(&t.home)).unwrap();
    let store_before = file_bytes(&store);
    let objects = t.git_dir.join("objects");
    let git_before = tree_bytes(&objects);

    let ret_gc = t.session(&["gc", "--grace", "0"]);
    let store_after = file_bytes(&store);
    let git_gc = t.git(&["gc", "-q"]);
    let git_after = tree_bytes(&objects);

    // Each restore is timed REPS times and the median kept, undo and navigate in turn so
    // that both meet the same load (the machine is shared). The gcs' writes are flushed
    // first, and before each timed pair the files last written leave the stat cache's racy
    // window (2 s), as between the turns of a real session. The two tools share the work
    // tree, so each sees the other's writes (same content, new mtimes) and re-hashes those
    // files: a millisecond at this size.
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let root_commit = t.git(&["rev-list", "--max-parents=0", "HEAD"]).stdout;
    let root_commit = root_commit.trim();
    let last = format!("turn:{turns}");
    let (mut undo, mut git_undo, mut navigate, mut git_navigate) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPS {
        std::thread::sleep(Duration::from_millis(2500));
        undo.push(t.session(&["undo"]));
        git_undo.push(t.git(&["read-tree", "-u", "--reset", "HEAD~1"]));
        t.session(&["redo"]);
        t.git(&["read-tree", "-u", "--reset", "HEAD"]);
        std::thread::sleep(Duration::from_millis(2500));
        navigate.push(t.session(&["navigate", "turn:1:before"]));
        git_navigate.push(t.git(&["read-tree", "-u", "--reset", root_commit]));
        t.session(&["navigate", &last]);
        t.git(&["read-tree", "-u", "--reset", "HEAD"]);
    }
    let times = |v: &[Ran]| v.iter().map(|r| r.time).collect::<Vec<_>>();
    let rss = |v: &[Ran]| v.iter().map(|r| r.rss).max().unwrap_or(0);
    let total_t = started.elapsed();

    let mb = |b: u64| b as f64 / 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "\nlong session: {FILES} files, {:.2} MB; {turns} turns of 1-6 lines in 3 files, \
         each command a process of its own",
        mb(logical)
    );
    println!(
        "| measurement                              |     retrace     |       git       | ret/git |"
    );
    println!(
        "|------------------------------------------|-----------------|-----------------|---------|"
    );
    let bytes_row = |name: &str, r: u64, g: u64| {
        println!(
            "| {name:<40} | {:>12.2} MB | {:>12.2} MB | {:>6.2}x |",
            mb(r),
            mb(g),
            r as f64 / g as f64
        );
    };
    bytes_row("store before gc, disk blocks", store_before.0, git_before.0);
    bytes_row(
        "store before gc, file length / apparent",
        store_before.1,
        git_before.1,
    );
    bytes_row("store after gc, disk blocks", store_after.0, git_after.0);
    bytes_row(
        "store after gc, file length / apparent",
        store_after.1,
        git_after.1,
    );
    let time_row = |name: &str, r: Duration, g: Duration| {
        println!(
            "| {name:<40} | {:>12.1} ms | {:>12.1} ms | {:>6.2}x |",
            ms(r),
            ms(g),
            ms(r) / ms(g)
        );
    };
    time_row(
        "gc (retrace gc --grace 0 / git gc)",
        ret_gc.time,
        git_gc.time,
    );
    time_row(
        "turn, median (begin+end / add+commit)",
        median(&ret_turn),
        median(&git_turn),
    );
    time_row("turn, p90", p90(&ret_turn), p90(&git_turn));
    time_row("  begin / add, median", median(&begin), median(&add));
    time_row("  end / commit, median", median(&end), median(&commit));
    time_row(
        "turn 1 (cold capture) / cold add+commit",
        ret_turn[0],
        git_cold,
    );
    let (undo_t, git_undo_t) = (median(&times(&undo)), median(&times(&git_undo)));
    let (nav_t, git_nav_t) = (median(&times(&navigate)), median(&times(&git_navigate)));
    time_row("undo newest turn / read-tree HEAD~1", undo_t, git_undo_t);
    time_row("navigate turn:1:before / read-tree root", nav_t, git_nav_t);
    let rss_row = |name: &str, r: u64, g: u64| {
        println!(
            "| {name:<40} | {:>12.1} MB | {:>12.1} MB | {:>6.2}x |",
            mb(r),
            mb(g),
            r as f64 / g as f64
        );
    };
    rss_row(
        "peak RSS of a turn's commands, median",
        median_u64(&ret_rss),
        median_u64(&git_rss),
    );
    rss_row("peak RSS, gc", ret_gc.rss, git_gc.rss);
    rss_row("peak RSS, undo newest", rss(&undo), rss(&git_undo));
    rss_row(
        "peak RSS, navigate turn:1:before",
        rss(&navigate),
        rss(&git_navigate),
    );
    println!(
        "(retrace before any gc / git after git gc: {:.2}x in disk blocks)",
        store_before.0 as f64 / git_after.0 as f64
    );
    println!(
        "(turns: median of {turns}; undo and navigate: median of {REPS}, each after the racy \
         window; peak RSS: the largest of a command's runs)"
    );
    let spread = |v: &[Ran]| {
        let t = times(v);
        format!(
            "{:.0}-{:.0} ms",
            ms(*t.iter().min().unwrap()),
            ms(*t.iter().max().unwrap())
        )
    };
    println!(
        "(range of the {REPS} runs: undo {}, navigate {}; git {}, {})",
        spread(&undo),
        spread(&navigate),
        spread(&git_undo),
        spread(&git_navigate)
    );
    println!(
        "(navigate turn:1:before / undo newest: {:.2}x for retrace, {:.2}x for git; \
         navigating {turns} turns back is one restore to the cold state, not {turns} undos)",
        ms(nav_t) / ms(undo_t),
        ms(git_nav_t) / ms(git_undo_t)
    );
    println!("(retrace gc: {})", ret_gc.stdout.trim().replace('\n', "; "));
    println!(
        "(whole run {:.0} s, of which the {turns} turns {:.0} s; the store directory with its stat cache: {:.2} MB on disk)",
        total_t.as_secs_f64(),
        session_t.as_secs_f64(),
        mb(tree_bytes(store.parent().unwrap()).0)
    );
}
