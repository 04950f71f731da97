//! `--profile steps`: what an agent's tool call costs when it is reported as a step.
//!
//! `cargo bench --bench macrobench -- --profile steps [--files N] [--layout macro|monorepo]
//! [--rounds R] [--shell-steps S] [--dir PATH] [--reuse] [--no-watcher]`
//!
//! Workspace: the default profile's (`--layout macro`, default N = 20,000: text-like files of
//! 1–20 KiB, a few big files, ignored `node_modules/` and `target/`) or the monorepo
//! profile's (`--layout monorepo`: N files of 200–3000 bytes, 25 to a directory). The base
//! directory is `retrace-bench-steps-<layout>-N` in the temporary directory unless `--dir`;
//! `--reuse` keeps a workspace an earlier run generated (the steps below change a few dozen of
//! its files, which changes nothing measured here).
//!
//! Every measurement is a whole command in a process of its own (`retrace -C ROOT --session
//! bench ...` on a fresh `RETRACE_HOME`), timed from spawn to exit with its peak RSS. A tool
//! call's added time is its `step begin` plus its `step end`: what an agent's hooks add to
//! the call. The call's own work (an edit, a deletion) is done by the benchmark between the
//! two and is not timed. Steps:
//!
//! 1. `retrace snapshot` (cold), the racy window, a settling snapshot, then a no-change
//!    `retrace snapshot` best of 3: the reference a captured step pays twice;
//! 2. without a watcher, `RETRACE_STEP_CAPTURES=auto` (the default): a turn of R rounds of 10
//!    tool calls, each round 5 edit steps (`--tool Write --file F`, one file appended to), 3
//!    shell commands that cannot destroy (`cargo test`, `ls`, `grep`: not captured under
//!    `auto`; they change nothing) and 2 that can (`rm F`, `git checkout -- F`: captured;
//!    the benchmark deletes or rewrites F);
//! 3. the same turn with `RETRACE_STEP_CAPTURES=always` (every shell step captured);
//! 4. unless `--no-watcher`: `retrace watch --detach`, a settling snapshot, a watched no-change
//!    `retrace snapshot --json` best of 3 (and why it walked, if it did), then the same turn
//!    under `auto` (with a watcher every shell step is captured) and S shell steps that each
//!    change 5 files (3 modified, 1 added, 1 deleted), then `retrace watch --stop`.
//!
//! Printed: per policy and kind of call, the mean added time per call, its begin and end,
//! its median and the largest, the CPU time (user + system) of the two commands (which the
//! machine's load moves less than wall time), and whether the step was captured; the mean
//! per call of the mix; and whether each target of issue 38 is met.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Ran, Rng, Tools, run};

const SESSION: &str = "bench";

/// The kinds of tool call the mix is made of.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `--tool Write --file F`: one file appended to.
    Edit,
    /// A shell command that cannot destroy work (captured only under `always` or a watcher).
    Shell,
    /// A shell command that can (`rm`, `git checkout --`): captured under `auto`.
    Destructive,
    /// A shell command that changes 5 files (3 modified, 1 added, 1 deleted).
    Shell5,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Edit => "edit step (1 file)",
            Kind::Shell => "shell, cannot destroy",
            Kind::Destructive => "shell, destructive",
            Kind::Shell5 => "shell changing 5 files",
        }
    }
}

/// One tool call: its begin and end commands and whether the step was captured.
struct Call {
    kind: Kind,
    begin: Ran,
    end: Ran,
    captured: bool,
}

impl Call {
    fn added(&self) -> Duration {
        self.begin.time + self.end.time
    }
}

/// The workspace's layout: which generator, and the path of managed file `i`.
#[derive(Clone, Copy)]
enum Layout {
    Macro,
    Monorepo,
}

impl Layout {
    fn rel(self, i: usize) -> String {
        match self {
            Layout::Macro => super::rel(i),
            Layout::Monorepo => super::monorepo::rel(i),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Layout::Macro => "macro",
            Layout::Monorepo => "monorepo",
        }
    }
}

/// Runs the tool calls of a turn against one workspace.
struct Runner<'a> {
    t: &'a Tools,
    layout: Layout,
    files: usize,
    rng: Rng,
    /// Files created by the 5-file shell steps (numbered).
    created: usize,
}

impl Runner<'_> {
    /// `retrace --session bench <args>` under the policy `captures`.
    fn retrace(&self, captures: &str, args: &[&str]) -> Ran {
        let mut all = vec!["--session", SESSION];
        all.extend_from_slice(args);
        let mut c = self.t.retrace_cmd(&all);
        c.env("RETRACE_STEP_CAPTURES", captures);
        run(c)
    }

    /// A managed file that exists now (workspace-relative).
    fn existing(&mut self) -> String {
        loop {
            let rel = self.layout.rel(self.rng.below(self.files as u64) as usize);
            if self.t.root.join(&rel).is_file() {
                return rel;
            }
        }
    }

    /// One tool call of `kind` under the policy `captures`: begin, its work, end.
    fn call(&mut self, captures: &str, kind: Kind, n: usize) -> Call {
        let root = self.t.root.clone();
        let file = self.existing();
        let summary = match kind {
            Kind::Edit => String::new(),
            Kind::Shell => ["cargo test", "ls -la src", "grep -rn value src"][n % 3].to_string(),
            // The round's first destructive call (its 4th) removes, the second checks out.
            Kind::Destructive if n % 10 < 5 => format!("rm {file}"),
            Kind::Destructive => format!("git checkout -- {file}"),
            Kind::Shell5 => "python3 scripts/rename_symbol.py old_name new_name".to_string(),
        };
        let mut args = vec!["step", "begin", "--json", "--summary", summary.as_str()];
        match kind {
            Kind::Edit => args.extend(["--tool", "Write", "--file", file.as_str()]),
            _ => args.extend(["--tool", "Bash"]),
        }
        let begin = self.retrace(captures, &args);
        let v: serde_json::Value = serde_json::from_str(&begin.stdout)
            .unwrap_or_else(|e| panic!("step begin --json printed {:?}: {e}", begin.stdout));
        assert_eq!(v["ok"], true, "step begin: {}", begin.stdout);
        let captured = !v["snapshot"].is_null();
        match kind {
            Kind::Edit => append(&root.join(&file), n),
            Kind::Shell => {}
            Kind::Destructive if n % 10 < 5 => fs::remove_file(root.join(&file)).unwrap(),
            Kind::Destructive => {
                // What a checkout of the file would do: its content replaced whole.
                let mut d = fs::read(root.join(&file)).unwrap();
                d.reverse();
                fs::write(root.join(&file), d).unwrap();
            }
            Kind::Shell5 => {
                append(&root.join(&file), n);
                for _ in 0..2 {
                    let f = self.existing();
                    append(&root.join(f), n);
                }
                let new = root.join(format!("steps-new/s{}.txt", self.created));
                self.created += 1;
                fs::create_dir_all(new.parent().unwrap()).unwrap();
                fs::write(new, format!("created by shell step {n}\n")).unwrap();
                let gone = self.existing();
                fs::remove_file(root.join(gone)).unwrap();
            }
        }
        let end = self.retrace(captures, &["step", "end", "--json"]);
        assert!(
            end.stdout.contains("\"ok\":true"),
            "step end: {}",
            end.stdout
        );
        Call {
            kind,
            begin,
            end,
            captured,
        }
    }

    /// A turn of `rounds` rounds of the 10-call mix under `captures`, then `shell5` 5-file
    /// shell steps. Returns the calls and the turn's begin and end.
    fn turn(&mut self, captures: &str, rounds: usize, shell5: usize) -> (Vec<Call>, Ran, Ran) {
        use Kind::{Destructive, Edit, Shell, Shell5};
        const MIX: [Kind; 10] = [
            Edit,
            Shell,
            Edit,
            Destructive,
            Edit,
            Shell,
            Edit,
            Destructive,
            Edit,
            Shell,
        ];
        let begin = self.retrace(captures, &["turn", "begin", "--prompt", "steps"]);
        let mut calls = Vec::new();
        for r in 0..rounds {
            for (i, &k) in MIX.iter().enumerate() {
                calls.push(self.call(captures, k, r * 10 + i));
            }
        }
        for n in 0..shell5 {
            calls.push(self.call(captures, Shell5, n));
        }
        let end = self.retrace(captures, &["turn", "end"]);
        (calls, begin, end)
    }
}

fn append(p: &Path, n: usize) {
    let mut d = fs::read(p).unwrap();
    d.extend_from_slice(format!("// step {n}\n").as_bytes());
    fs::write(p, d).unwrap();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mean(ds: impl Iterator<Item = Duration>) -> Duration {
    let v: Vec<Duration> = ds.collect();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / u32::try_from(v.len()).unwrap()
}

/// Prints one policy's rows; returns the mean added time per call of its mix (the 10-call
/// rounds, not the 5-file shell steps) and of its 5-file shell steps.
fn print_policy(title: &str, calls: &[Call], turn: (&Ran, &Ran)) -> (Duration, Duration) {
    println!("\n{title}:");
    println!(
        "| tool call                 | calls | captured | begin avg | end avg  | added avg | added med | added max | CPU avg  | peak RSS |"
    );
    println!(
        "|---------------------------|-------|----------|-----------|----------|-----------|-----------|-----------|----------|----------|"
    );
    let row = |name: &str, cs: &[&Call]| {
        if cs.is_empty() {
            return;
        }
        println!(
            "| {name:<25} | {:>5} | {:>3} of {:<2} | {:>6.1} ms | {:>5.1} ms | {:>6.1} ms | {:>6.1} ms | {:>6.1} ms | {:>5.1} ms | {:>5.1} MB |",
            cs.len(),
            cs.iter().filter(|c| c.captured).count(),
            cs.len(),
            ms(mean(cs.iter().map(|c| c.begin.time))),
            ms(mean(cs.iter().map(|c| c.end.time))),
            ms(mean(cs.iter().map(|c| c.added()))),
            ms(median(cs.iter().map(|c| c.added()).collect())),
            ms(cs.iter().map(|c| c.added()).max().unwrap()),
            ms(mean(cs.iter().map(|c| c.begin.cpu + c.end.cpu))),
            cs.iter().map(|c| c.begin.rss.max(c.end.rss)).max().unwrap() as f64 / 1e6,
        );
    };
    for k in [Kind::Edit, Kind::Shell, Kind::Destructive, Kind::Shell5] {
        let cs: Vec<&Call> = calls.iter().filter(|c| c.kind == k).collect();
        row(k.name(), &cs);
    }
    let mix: Vec<&Call> = calls.iter().filter(|c| c.kind != Kind::Shell5).collect();
    row("mix: mean per tool call", &mix);
    println!(
        "(turn begin {:.1} ms, turn end {:.1} ms: once per turn, not per tool call)",
        ms(turn.0.time),
        ms(turn.1.time)
    );
    let shell5: Vec<&Call> = calls.iter().filter(|c| c.kind == Kind::Shell5).collect();
    (
        mean(mix.iter().map(|c| c.added())),
        mean(shell5.iter().map(|c| c.added())),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let layout = match arg("--layout").as_deref() {
        None | Some("macro") => Layout::Macro,
        Some("monorepo") => Layout::Monorepo,
        Some(l) => panic!("unknown --layout {l:?} (known: macro, monorepo)"),
    };
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    assert!(files >= 100, "--files must be at least 100");
    let rounds: usize = arg("--rounds").and_then(|v| v.parse().ok()).unwrap_or(2);
    let shell5: usize = arg("--shell-steps")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let with_watcher = !args.iter().any(|a| a == "--no-watcher");
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("retrace-bench-steps-{}-{files}", layout.name())),
        PathBuf::from,
    );
    let t = Tools::under(&base, PathBuf::from(env!("CARGO_BIN_EXE_retrace")), SESSION);
    let started = Instant::now();
    let progress = |what: &str| {
        eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
    };
    fs::create_dir_all(&base).unwrap();
    super::monorepo::remove_tree(&t.home);
    let marker = base.join(format!("generated-steps-{}-{files}", layout.name()));
    if args.iter().any(|a| a == "--reuse") && marker.exists() {
        progress(&format!("reusing {files} files in {}", t.root.display()));
    } else {
        let _ = fs::remove_file(&marker);
        progress(&format!(
            "generating {files} files ({} layout) in {} ...",
            layout.name(),
            t.root.display()
        ));
        match layout {
            Layout::Macro => super::generate(&t.root, files),
            Layout::Monorepo => super::monorepo::generate(&t.root, files),
        }
        fs::write(&marker, "").unwrap();
        progress("generated");
    }
    fs::create_dir_all(&t.home).unwrap();
    super::monorepo::settle_disk();
    super::monorepo::wait_racy_window();

    progress("1. cold snapshot, settling snapshot, no-change best of 3");
    let cold = t.retrace(&["snapshot", "cold"]);
    super::monorepo::wait_racy_window();
    let settle = t.retrace(&["snapshot"]);
    let nochange = (0..3).map(|_| t.retrace(&["snapshot"]).time).min().unwrap();
    // The floor of any command: a process of this binary that opens nothing.
    let spawn = (0..5)
        .map(|_| t.retrace(&["--version"]).time)
        .min()
        .unwrap();

    let mut r = Runner {
        t: &t,
        layout,
        files,
        rng: Rng(0x57e9_5eed),
        created: 0,
    };
    progress("2. without a watcher, step_captures = auto: the mix");
    let (auto, auto_b, auto_e) = r.turn("auto", rounds, 0);
    progress("3. without a watcher, step_captures = always: the mix");
    let (always, always_b, always_e) = r.turn("always", rounds, 0);

    let watched = with_watcher.then(|| {
        progress("4. with a watcher: watch --detach, settle, the mix and the 5-file shell steps");
        let detach = t.retrace(&["watch", "--detach"]);
        assert!(
            detach.stdout.contains("watching"),
            "retrace watch --detach: {}{}",
            detach.stdout,
            detach.stderr
        );
        let settle = t.retrace(&["snapshot"]);
        // The reference: a watched no-change capture, and why it walked, if it did (a
        // nested repository, say, keeps every watched capture walking).
        let refs: Vec<(Ran, Option<String>)> = (0..3)
            .map(|_| {
                let r = t.retrace(&["snapshot", "--json"]);
                let v: serde_json::Value = serde_json::from_str(&r.stdout)
                    .unwrap_or_else(|e| panic!("snapshot --json printed {:?}: {e}", r.stdout));
                let walked = v["walked_because"].as_str().map(str::to_string);
                (r, walked)
            })
            .collect();
        let nochange = refs.iter().map(|r| r.0.time).min().unwrap();
        let walked = refs.iter().find_map(|r| r.1.clone());
        let (calls, b, e) = r.turn("auto", rounds, shell5);
        let _ = t.retrace(&["watch", "--stop"]);
        (detach, settle, nochange, walked, calls, b, e)
    });
    progress("done");

    println!(
        "\nsteps: {} layout, {files} files; each command a process of its own; a tool call's \
         added time = its `step begin` + `step end` (whole commands, spawn to exit)",
        layout.name()
    );
    println!(
        "reference: no-change `retrace snapshot` {:.1} ms (best of 3; a captured step takes two \
         captures); `retrace --version` {:.1} ms (best of 5: a process that opens nothing); \
         cold snapshot {:.0} ms, settling snapshot {:.0} ms",
        ms(nochange),
        ms(spawn),
        ms(cold.time),
        ms(settle.time)
    );
    let (auto_mix, _) = print_policy(
        "without a watcher, step_captures = auto (the default)",
        &auto,
        (&auto_b, &auto_e),
    );
    let (always_mix, _) = print_policy(
        "without a watcher, step_captures = always",
        &always,
        (&always_b, &always_e),
    );
    let watched_figures = watched.map(|(detach, settle, nochange, walked, calls, b, e)| {
        let (mix, shell5_mean) = print_policy(
            "with a watcher (`retrace watch --detach`), step_captures = auto",
            &calls,
            (&b, &e),
        );
        let s5: Vec<Duration> = calls
            .iter()
            .filter(|c| c.kind == Kind::Shell5)
            .map(Call::added)
            .collect();
        let s5_median = median(s5.clone());
        let s5_max = s5.iter().copied().max().unwrap_or_default();
        println!(
            "(watch --detach until ready {:.0} ms; settling capture {:.0} ms; watched no-change \
             `retrace snapshot` {:.1} ms (best of 3), {}; 5-file shell step added: mean {:.1} ms, \
             median {:.1} ms, max {:.1} ms)",
            ms(detach.time),
            ms(settle.time),
            ms(nochange),
            walked.map_or("which did not walk".to_string(), |w| format!(
                "which walked because {w}"
            )),
            ms(shell5_mean),
            ms(s5_median),
            ms(s5_max)
        );
        (mix, shell5_mean, s5_max)
    });

    println!("\ntargets ({files} files):");
    let target = |name: &str, ok: bool, detail: String| {
        println!(
            "- [{}] {name}: {detail}",
            if ok { "met" } else { "NOT met" }
        );
    };
    if let Some((mix, shell5_mean, s5_max)) = watched_figures {
        target(
            "with a watcher, a shell step's two captures (5 files changed) add <= 30 ms",
            shell5_mean <= Duration::from_millis(30),
            format!(
                "mean {:.1} ms (max {:.1} ms); the mix under auto with a watcher: {:.1} ms \
                 per tool call",
                ms(shell5_mean),
                ms(s5_max),
                ms(mix)
            ),
        );
    }
    target(
        "without a watcher, auto adds <= 50 ms to an average tool call",
        auto_mix <= Duration::from_millis(50),
        format!(
            "{:.1} ms per tool call (always: {:.1} ms)",
            ms(auto_mix),
            ms(always_mix)
        ),
    );
    println!("(whole run {:.0} s)", started.elapsed().as_secs_f64());
}
