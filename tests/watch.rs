//! The watcher (`retrace watch`, `src/watch/`): a capture it vouches for must give exactly
//! the snapshot a walk gives, and whenever it cannot vouch (overflow, the watch limit, a
//! watcher killed mid-way) the capture walks and is still exact.
//!
//! The property test drives an in-process watcher (as `retrace serve` hosts it) through the
//! mutations of `listing_model.rs` plus the watcher's own hard cases: directories moved in
//! from outside and out of the workspace, files hard-linked in from outside and written
//! through the outside path. After each batch a watcher-assisted capture must equal a
//! capture from scratch (no stat cache, a full walk). 500 cases by default;
//! `WATCH_MODEL_CASES` sets another number. Captures wait for the watcher up to 30 s here,
//! so a loaded machine makes them slow, never walk for lack of an answer.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use retrace::watch::{self, Watcher};
use retrace::{Config, NoProgress, Workspace};

use crate::common::{self, Env, RETRACE, stderr, stdout};
use crate::listing_model::{self, DIRS, FILES};

fn open(env: &Env) -> Workspace {
    let config = Config::with_home(env.home.path()).configure(|s| {
        s.watch_timeout_ms.value = 30_000;
    });
    Workspace::open(env.root(), &config).unwrap()
}

/// Waits (without a deadline that could fail a slow machine's run) until the watcher's
/// crawl is done.
fn ready(w: &Watcher) {
    let start = Instant::now();
    while !w.ready() {
        assert!(start.elapsed() < Duration::from_secs(300), "the watcher never got ready");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Tree(listing_model::Op),
    /// A directory with files (and one inside) made outside, then moved in.
    MoveIn { dir: usize, fill: u8 },
    /// A directory moved out of the workspace.
    MoveOut { dir: usize },
    /// A file hard-linked in from outside the workspace.
    LinkIn { dir: usize, file: usize },
    /// Every file linked in is written through its outside path (no event in the
    /// workspace).
    WriteOutside { fill: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0..DIRS.len();
    prop_oneof![
        8 => listing_model::op().prop_map(Op::Tree),
        1 => (d.clone(), any::<u8>()).prop_map(|(dir, fill)| Op::MoveIn { dir, fill }),
        1 => d.clone().prop_map(|dir| Op::MoveOut { dir }),
        1 => (d, 0..FILES.len()).prop_map(|(dir, file)| Op::LinkIn { dir, file }),
        1 => any::<u8>().prop_map(|fill| Op::WriteOutside { fill }),
    ]
}

struct Outside {
    dir: tempfile::TempDir,
    n: u64,
    linked: Vec<PathBuf>,
}

fn apply(root: &Path, out: &mut Outside, op: &Op) {
    out.n += 1;
    match op {
        Op::Tree(o) => listing_model::apply(root, o),
        Op::MoveIn { dir, fill } => {
            let parent = root.join(DIRS[*dir]);
            if !parent.is_dir() {
                return;
            }
            let made = out.dir.path().join(format!("made-{}", out.n));
            fs::create_dir_all(made.join("inner")).unwrap();
            fs::write(made.join("f"), vec![*fill; 10]).unwrap();
            fs::write(made.join("inner/g"), vec![*fill; 3]).unwrap();
            let _ = fs::rename(&made, parent.join(format!("moved-{}", out.n % 3)));
        }
        Op::MoveOut { dir } => {
            let _ = fs::rename(
                root.join(DIRS[*dir]),
                out.dir.path().join(format!("gone-{}", out.n)),
            );
        }
        Op::LinkIn { dir, file } => {
            let target = root.join(DIRS[*dir]).join(FILES[*file]);
            if !target.parent().unwrap().is_dir() || target.is_dir() {
                return;
            }
            let src = out.dir.path().join(format!("src-{}", out.n));
            fs::write(&src, b"linked in").unwrap();
            listing_model::remove(&target);
            if fs::hard_link(&src, &target).is_ok() {
                out.linked.push(src);
            }
        }
        Op::WriteOutside { fill } => {
            for src in &out.linked {
                let _ = fs::write(src, vec![*fill; 7]);
            }
        }
    }
}

static VOUCHED: AtomicU64 = AtomicU64::new(0);
static FAST: AtomicU64 = AtomicU64::new(0);

fn case(start: &[listing_model::Op], rounds: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let env = Env::new();
    let root = env.root().to_path_buf();
    let mut out = Outside {
        dir: tempfile::tempdir().unwrap(),
        n: 0,
        linked: Vec::new(),
    };
    for o in start {
        listing_model::apply(&root, o);
    }
    let ws = open(&env);
    let w = Watcher::start(ws.watch_spec()).unwrap();
    ready(&w);
    // The first capture walks (no token yet) and records one.
    let first = ws.snapshot_summary(None, &NoProgress).unwrap();
    prop_assert!(first.walked_because.is_some());
    for (n, batch) in rounds.iter().enumerate() {
        for o in batch {
            apply(&root, &mut out, o);
        }
        let watched = ws.snapshot_summary(None, &NoProgress).unwrap();
        if watched.walked_because.is_none() {
            VOUCHED.fetch_add(1, Ordering::Relaxed);
            if watched.listed == 0 && watched.reused == 0 {
                FAST.fetch_add(1, Ordering::Relaxed);
            }
        }
        // From scratch: no cache, a full walk; then the watched capture's cache is put back,
        // so the next round builds on what it recorded.
        let kept = fs::read(common::statcache(&env)).ok();
        let _ = fs::remove_file(common::statcache(&env));
        let scratch = ws.snapshot_rescan(None, &NoProgress).unwrap();
        prop_assert!(scratch.walked_because.is_some());
        if let Some(k) = kept {
            fs::write(common::statcache(&env), k).unwrap();
        }
        prop_assert_eq!(
            listing_model::seen(&watched),
            listing_model::seen(&scratch),
            "round {}: {:?} after {:?}",
            n,
            batch,
            start
        );
    }
    drop(w);
    Ok(())
}

#[test]
fn watched_captures_equal_walks_from_scratch() {
    let cases = std::env::var("WATCH_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let strategy = (
        prop::collection::vec(listing_model::op(), 5..25),
        prop::collection::vec(prop::collection::vec(op(), 0..5), 1..4),
    );
    runner
        .run(&strategy, |(start, rounds)| case(&start, &rounds))
        .unwrap();
    // Only worth something if the watcher vouched, and the no-change answer was taken.
    let vouched = VOUCHED.load(Ordering::Relaxed);
    assert!(
        vouched > u64::from(cases),
        "only {vouched} captures vouched in {cases} cases"
    );
    assert!(FAST.load(Ordering::Relaxed) > 0, "no capture took the unchanged answer");
}
