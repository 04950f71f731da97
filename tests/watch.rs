//! The watcher (`retrace watch`, `src/watch/`): a capture it vouches for must give exactly
//! the snapshot a walk gives, and whenever it cannot vouch (overflow, the watch limit, a
//! watcher killed mid-way) the capture walks and is still exact.
//!
//! The property test drives an in-process watcher (as `retrace serve` hosts it) through the
//! mutations of `listing_model.rs` plus the watcher's own hard cases: directories moved in
//! from outside and out of the workspace, files hard-linked in from outside and written
//! through the outside path. After each batch a watcher-assisted capture must equal a
//! capture from scratch (no stat cache, a full walk). 120 cases by default (each starts a
//! watcher); `WATCH_MODEL_CASES` sets another number (`=2000` for a longer hunt). Captures wait for the watcher up to 30 s here,
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
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the watcher never got ready"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Tree(listing_model::Op),
    /// A directory with files (and one inside) made outside, then moved in.
    MoveIn {
        dir: usize,
        fill: u8,
    },
    /// A directory moved out of the workspace.
    MoveOut {
        dir: usize,
    },
    /// A file hard-linked in from outside the workspace.
    LinkIn {
        dir: usize,
        file: usize,
    },
    /// Every file linked in is written through its outside path (no event in the
    /// workspace).
    WriteOutside {
        fill: u8,
    },
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

/// Whether `o` keeps a capture's head quiet (see `statcache::Header::quiet`): no
/// credential by name or content, no file linked in. Nested repositories left alone are
/// quiet: a `.git` made or removed makes the next capture walk, and changes inside a
/// repository are then looked past. Half the cases run with only such operations, so that
/// most captures can look at the changed directories alone.
fn quiet(o: &Op) -> bool {
    use listing_model::Op as T;
    const SECRET: usize = 3;
    assert_eq!(FILES[SECRET], ".env");
    match o {
        Op::Tree(T::Key { .. }) | Op::LinkIn { .. } => false,
        Op::Tree(
            T::Write { file, .. }
            | T::Delete { file, .. }
            | T::Replace { file, .. }
            | T::Chmod { file, .. }
            | T::Symlink { file, .. }
            | T::Touch { file, .. },
        ) => *file != SECRET,
        Op::Tree(T::Rename { from, to }) => from.1 != SECRET && to.1 != SECRET,
        _ => true,
    }
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
static FOCUSED: AtomicU64 = AtomicU64::new(0);

fn case(start: &[listing_model::Op], rounds: &[Vec<Op>], plain: bool) -> Result<(), TestCaseError> {
    let env = Env::new();
    let root = env.root().to_path_buf();
    let mut out = Outside {
        dir: tempfile::tempdir().unwrap(),
        n: 0,
        linked: Vec::new(),
    };
    let keep = |o: &Op| !plain || quiet(o);
    for o in start {
        if keep(&Op::Tree(o.clone())) {
            listing_model::apply(&root, o);
        }
    }
    let ws = open(&env);
    let w = Watcher::start(ws.watch_spec()).unwrap();
    ready(&w);
    // The first capture walks (no token yet) and records one.
    let first = ws.snapshot_summary(None, &NoProgress).unwrap();
    prop_assert!(first.walked_because.is_some());
    for (n, batch) in rounds.iter().enumerate() {
        for o in batch.iter().filter(|o| keep(o)) {
            apply(&root, &mut out, o);
        }
        let watched = ws.snapshot_summary(None, &NoProgress).unwrap();
        if watched.walked_because.is_none() {
            VOUCHED.fetch_add(1, Ordering::Relaxed);
            if watched.listed == 0 && watched.reused == 0 {
                FAST.fetch_add(1, Ordering::Relaxed);
            }
            if watched.focused {
                FOCUSED.fetch_add(1, Ordering::Relaxed);
            }
        }
        // From scratch: no cache, a full walk; then the watched capture's cache (and the
        // head it wrote beside it) is put back, so the next round builds on what it recorded.
        let cache = common::statcache(&env);
        let beside = retrace::statcache::watched_path(&cache);
        let kept = (fs::read(&cache).ok(), fs::read(&beside).ok());
        let _ = fs::remove_file(&cache);
        let scratch = ws.snapshot_rescan(None, &NoProgress).unwrap();
        prop_assert!(scratch.walked_because.is_some());
        prop_assert!(!beside.exists(), "a walk left the watched head in place");
        for (path, bytes) in [(&cache, kept.0), (&beside, kept.1)] {
            if let Some(b) = bytes {
                fs::write(path, b).unwrap();
            }
        }
        prop_assert_eq!(
            listing_model::seen(&watched),
            listing_model::seen(&scratch),
            "round {}: {:?} after {:?}",
            n,
            batch,
            start
        );
        prop_assert_eq!(
            (watched.files, watched.bytes),
            (scratch.files, scratch.bytes),
            "round {}: totals",
            n
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
        .unwrap_or(120);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let strategy = (
        prop::collection::vec(listing_model::op(), 5..25),
        prop::collection::vec(prop::collection::vec(op(), 0..5), 1..4),
        any::<bool>(),
    );
    runner
        .run(&strategy, |(start, rounds, plain)| {
            case(&start, &rounds, plain)
        })
        .unwrap();
    // Only worth something if the watcher vouched, and the no-change answer was taken.
    let vouched = VOUCHED.load(Ordering::Relaxed);
    assert!(
        vouched > u64::from(cases),
        "only {vouched} captures vouched in {cases} cases"
    );
    assert!(
        FAST.load(Ordering::Relaxed) > 0,
        "no capture took the unchanged answer"
    );
    // And captures looked only where the watcher pointed. How often depends on the clock
    // (a directory written within the timestamp granularity of a capture is racy, and the
    // capture after it walks), so a loaded machine sees fewer (36 of 120 cases seen, against
    // about half on an idle one): at least one proves the path is taken and checked.
    let focused = FOCUSED.load(Ordering::Relaxed);
    assert!(
        focused > 0,
        "only {focused} captures looked at the changed directories alone in {cases} cases"
    );
}

/// A watched capture from scratch's point of view: a walk with no stat cache gives the
/// same snapshot, files and bytes (the cache and the head beside it are put back after).
fn equals_scratch(env: &Env, ws: &Workspace, watched: &retrace::Capture, what: &str) {
    let cache = common::statcache(env);
    let beside = retrace::statcache::watched_path(&cache);
    let kept = (fs::read(&cache).ok(), fs::read(&beside).ok());
    let _ = fs::remove_file(&cache);
    let scratch = ws.snapshot_rescan(None, &NoProgress).unwrap();
    for (path, bytes) in [(&cache, kept.0), (&beside, kept.1)] {
        let _ = fs::remove_file(path);
        if let Some(b) = bytes {
            fs::write(path, b).unwrap();
        }
    }
    assert_eq!(
        listing_model::seen(watched),
        listing_model::seen(&scratch),
        "{what}"
    );
    assert_eq!(
        (watched.files, watched.bytes),
        (scratch.files, scratch.bytes),
        "{what}: totals"
    );
}

/// A big directory the watcher names: edited in place (its names are the stat cache's, so
/// they are `lstat`ed by the cache's records instead of listed), then given new files,
/// deleted ones, a file turned into a directory, a mode change, a symlink swapped and an
/// ignored file (listed); every capture equals a walk from scratch. The cache is aged as in
/// `listing_model.rs`, so its records are settled.
#[test]
fn a_big_directory_named_by_the_watcher_is_captured_as_a_walk_captures_it() {
    let env = Env::new();
    let root = env.root().to_path_buf();
    let big = root.join("big");
    fs::create_dir_all(big.join("sub")).unwrap();
    for i in 0..3000 {
        fs::write(big.join(format!("f{i:04}.txt")), format!("file {i}\n")).unwrap();
    }
    fs::write(big.join("sub/inner.txt"), "inner").unwrap();
    fs::write(big.join(".gitignore"), "*.log\n").unwrap();
    fs::write(big.join("kept.log"), "ignored").unwrap();
    std::os::unix::fs::symlink("f0001.txt", big.join("link")).unwrap();
    fs::create_dir_all(root.join("other")).unwrap();
    fs::write(root.join("other/x"), "x").unwrap();
    let ws = open(&env);
    let w = Watcher::start(ws.watch_spec()).unwrap();
    ready(&w);
    let settle = |ws: &Workspace| {
        let first = ws.snapshot_rescan(None, &NoProgress).unwrap();
        assert!(first.walked_because.is_some());
        common::age_statcache(&env);
        // No edit lands in the clock tick of the listing the cache recorded.
        std::thread::sleep(Duration::from_millis(30));
    };
    settle(&ws);
    let watched_round = |what: &str, relisted: bool| {
        let watched = ws.snapshot_summary(None, &NoProgress).unwrap();
        assert!(watched.walked_because.is_none(), "{what}: walked");
        assert!(watched.focused, "{what}: not focused");
        assert_eq!(watched.reused > 0, relisted, "{what}: relisted");
        equals_scratch(&env, &ws, &watched, what);
    };

    // In place: the directory's names are unchanged.
    for i in [0, 7, 1500, 2999] {
        fs::write(
            big.join(format!("f{i:04}.txt")),
            format!("edited {i}, longer\n"),
        )
        .unwrap();
    }
    fs::write(big.join("sub/inner.txt"), "inner, edited").unwrap();
    watched_round("edited in place", true);

    // Names come and go: listed.
    for i in 3000..3100 {
        fs::write(big.join(format!("f{i:04}.txt")), format!("new {i}\n")).unwrap();
    }
    for i in (100..400).step_by(3) {
        fs::remove_file(big.join(format!("f{i:04}.txt"))).unwrap();
    }
    fs::remove_file(big.join("f0050.txt")).unwrap();
    fs::create_dir(big.join("f0050.txt")).unwrap();
    fs::write(big.join("f0050.txt/now_a_dir"), "d").unwrap();
    fs::set_permissions(
        big.join("f0060.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    fs::remove_file(big.join("link")).unwrap();
    std::os::unix::fs::symlink("f0002.txt", big.join("link")).unwrap();
    fs::write(big.join("more.log"), "ignored too").unwrap();
    fs::remove_dir_all(big.join("sub")).unwrap();
    watched_round("files added, deleted, changed kind and mode", false);

    // A walk records the new names; in place again, the file turned directory included.
    settle(&ws);
    fs::write(big.join("f0060.txt"), "executable, edited").unwrap();
    fs::write(big.join("f0050.txt/now_a_dir"), "dir, edited").unwrap();
    fs::write(root.join("other/x"), "x, edited").unwrap();
    watched_round("edited in place after the walk", true);

    // A file turned into a directory the watcher names as new, and one removed: the
    // relisted directory's count of files changes only through those.
    settle(&ws);
    fs::write(big.join("f0100.txt"), "edited").unwrap();
    fs::remove_dir_all(big.join("f0050.txt")).unwrap();
    watched_round("a directory removed", false);
    drop(w);
}

/// A `retrace` command as the tests run one, waiting up to 30 s for the watcher (a slow
/// machine makes captures slow, never walk for lack of an answer) and with a short idle time.
fn cli(env: &Env, args: &[&str]) -> std::process::Output {
    env.command(RETRACE, args)
        .env("RETRACE_WATCH_TIMEOUT_MS", "30000")
        .env("RETRACE_WATCH_IDLE_MINUTES", "0.1")
        .output()
        .unwrap()
}

fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// The id a capture from scratch gives (no stat cache, a full walk); the cache on disk is
/// put back after.
fn scratch(env: &Env, ws: &Workspace) -> retrace::ObjectId {
    let kept = fs::read(common::statcache(env)).ok();
    let _ = fs::remove_file(common::statcache(env));
    let id = ws.snapshot_rescan(None, &NoProgress).unwrap().id;
    if let Some(k) = kept {
        fs::write(common::statcache(env), k).unwrap();
    }
    id
}

fn status(ws: &Workspace) -> Option<watch::WatchStatus> {
    let spec = ws.watch_spec();
    watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(5))
}

/// Polls `f` until it holds (a liveness wait, no timing assertion: a generous bound only
/// keeps a broken build from hanging).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(300), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn detach(env: &Env, extra: &[(&str, &Path)]) {
    let mut c = env.command(RETRACE, &["watch", "--detach"]);
    c.env("RETRACE_WATCH_IDLE_MINUTES", "5");
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("watching"), "{}", stdout(&o));
}

fn stop(ws: &Workspace) {
    let spec = ws.watch_spec();
    let _ = watch::stop(&spec.runtime_dir, &spec.root, Duration::from_secs(5));
    until("the watcher stopped", || status(ws).is_none());
}

#[test]
fn a_watcher_killed_mid_way_makes_captures_walk_and_stay_exact() {
    let env = Env::new();
    env.write("a/b/f", "1");
    env.write("c", "2");
    let ws = open(&env);
    detach(&env, &[]);
    let first = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(first.walked_because.as_deref(), Some("no_token"));
    env.write("a/b/f", "changed");
    let vouched = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(vouched.walked_because, None);
    assert_eq!(vouched.id, scratch(&env, &ws));

    let pid = status(&ws).unwrap().pid;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    until("the killed watcher stops answering", || {
        status(&ws).is_none()
    });
    env.write("a/g", "made while no watcher ran");
    fs::remove_file(env.path("c")).unwrap();
    let walked = ws.snapshot_summary(None, &NoProgress).unwrap();
    // Refused, reset or gone, depending on how far the kill got: a walk in every case.
    let why = walked.walked_because.clone().unwrap_or_default();
    assert!(
        ["no watcher", "the watcher went away"].contains(&why.as_str()),
        "walked because {why:?}"
    );
    assert_eq!(walked.id, scratch(&env, &ws));

    // A new watcher is a new epoch: the first capture walks, the next is vouched again.
    detach(&env, &[]);
    let again = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(again.walked_because.as_deref(), Some("epoch"));
    env.write("a/b/h", "new");
    let vouched = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(vouched.walked_because, None);
    assert_eq!(vouched.id, scratch(&env, &ws));
    stop(&ws);
}

#[cfg(feature = "fault-injection")]
#[test]
fn an_overflowed_queue_makes_the_capture_walk_and_stay_exact() {
    let queued: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(16_384);
    if queued > 200_000 {
        eprintln!("skipped: max_queued_events is {queued}, too many files to overflow it");
        return;
    }
    let env = Env::new();
    env.write("a/f", "1");
    // Watched before the flood: files made in a directory not yet watched queue no events.
    fs::create_dir(env.path("flood")).unwrap();
    let pause_dir = tempfile::tempdir().unwrap();
    let pause = pause_dir.path().join("pause");
    let ws = open(&env);
    detach(&env, &[("RETRACE_FAULT_WATCH_PAUSE", &pause)]);
    ws.snapshot_summary(None, &NoProgress).unwrap();
    // The reader stops reading; more events than the kernel queues arrive meanwhile.
    fs::write(&pause, b"").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..queued + 2_000 {
        fs::write(env.path(&format!("flood/{i}")), b"").unwrap();
    }
    env.write("a/f", "changed while the events were lost");
    fs::remove_file(&pause).unwrap();
    let c = ws.snapshot_summary(None, &NoProgress).unwrap();
    let why = c.walked_because.clone().unwrap_or_default();
    assert!(
        ["overflow", "cookie_timeout", "starting"].contains(&why.as_str()),
        "walked because {why:?}"
    );
    assert_eq!(c.id, scratch(&env, &ws));
    until("the watcher rebuilt its view", || {
        status(&ws).is_some_and(|s| s.ready && s.last_break.as_deref() == Some("overflow"))
    });
    // The rebuilt view is a new epoch; then captures are vouched again.
    let again = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(again.walked_because.as_deref(), Some("epoch"));
    env.write("a/f", "after the rebuild");
    let vouched = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert_eq!(vouched.walked_because, None);
    assert_eq!(vouched.id, scratch(&env, &ws));
    stop(&ws);
}

#[test]
fn the_watch_limit_is_said_once_and_captures_walk() {
    let can = std::process::Command::new("unshare")
        .args([
            "-Ur",
            "sh",
            "-c",
            "echo 3 > /proc/sys/user/max_inotify_watches",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !can {
        eprintln!("skipped: no user namespace with its own inotify limit here (unshare -Ur)");
        return;
    }
    let env = Env::new();
    for d in ["a", "b", "c/d", "c/e"] {
        env.write(&format!("{d}/f"), d);
    }
    let ws = open(&env);
    // The watcher runs in a user namespace allowed 3 watches: its crawl of 6 directories
    // hits the limit.
    let mut watcher = env
        .command(
            "unshare",
            &[
                "-Ur",
                "sh",
                "-c",
                "echo 3 > /proc/sys/user/max_inotify_watches && exec \"$0\" watch",
                RETRACE,
            ],
        )
        .env("RETRACE_WATCH_IDLE_MINUTES", "5")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    until("the watcher hit the limit", || {
        status(&ws).is_some_and(|s| s.last_break.as_deref() == Some("watch_limit"))
    });
    let first = ok(cli(&env, &["snapshot"]));
    let o = cli(&env, &["snapshot", "--json"]);
    let v: serde_json::Value = serde_json::from_str(ok(o.clone()).trim()).unwrap();
    assert_eq!(v["walked_because"], "watch_limit");
    let said = |o: &std::process::Output| stderr(o).contains("max_user_watches");
    let second = cli(&env, &["snapshot"]);
    assert!(!said(&second), "said twice: {}", stderr(&second));
    assert!(
        first.contains("snapshot") && !said(&o),
        "the first capture says it, the later ones do not"
    );
    assert_eq!(
        v["id"].as_str().unwrap(),
        scratch(&env, &ws).to_hex(),
        "the walk is exact"
    );
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn a_turn_undo_and_redo_with_a_detached_watcher_then_it_exits_when_idle() {
    let env = Env::new();
    env.write("src/lib.rs", "pub fn one() {}\n");
    env.write("README", "hello\n");
    ok(cli(&env, &["watch", "--detach"]));
    let session = ["--session", "chat-1"];
    let run = |args: &[&str]| ok(cli(&env, &[&session[..], args].concat()));
    run(&["turn", "begin", "--prompt", "edit"]);
    env.write("src/lib.rs", "pub fn one() {}\npub fn two() {}\n");
    env.write("src/new.rs", "new\n");
    fs::remove_file(env.path("README")).unwrap();
    run(&["turn", "end"]);
    let after = common::tree_of(env.root());
    run(&["undo"]);
    assert_eq!(env.read("src/lib.rs"), "pub fn one() {}\n");
    assert_eq!(env.read("README"), "hello\n");
    assert!(!env.path("src/new.rs").exists());
    run(&["redo"]);
    assert_eq!(common::tree_of(env.root()), after);
    // A second turn: its end looks only at the directories the watcher names, and its
    // counts come from comparing trees.
    run(&["turn", "begin", "--prompt", "more"]);
    env.write("src/lib.rs", "pub fn three() {}\n");
    env.write("src/deep/er/b.rs", "b\n");
    fs::remove_file(env.path("src/new.rs")).unwrap();
    let end = env
        .command(RETRACE, &[&session[..], &["turn", "end"]].concat())
        .env("RETRACE_WATCH_TIMEOUT_MS", "30000")
        .env("RETRACE_WATCH_IDLE_MINUTES", "0.1")
        .env("RETRACE_TRACE", "1")
        .output()
        .unwrap();
    assert!(
        stderr(&end).contains("capture changed directories"),
        "{}",
        stderr(&end)
    );
    assert!(stdout(&end).contains("ended: +1 ~1 -1"), "{}", stdout(&end));
    let second = common::tree_of(env.root());
    run(&["undo"]);
    assert_eq!(common::tree_of(env.root()), after);
    run(&["redo"]);
    assert_eq!(common::tree_of(env.root()), second);
    let ws = open(&env);
    let s = status(&ws).expect("the watcher serves the workspace");
    assert!(s.vouched > 0, "no capture was vouched: {s:?}");
    // The undo deleted directories (renamed out, then removed, before the watcher read
    // their events): its view held, no capture had to walk for it.
    assert_eq!(s.last_break, None, "the watcher's view broke: {s:?}");
    let shown = ok(cli(&env, &["status"]));
    assert!(
        shown.contains(&format!("watcher    pid {}", s.pid)),
        "{shown}"
    );
    // Nothing asks it anything now: it exits after its idle time (6 s here).
    until("the idle watcher exited", || status(&ws).is_none());
    let shown = ok(cli(&env, &["status"]));
    assert!(shown.contains("watcher    none"), "{shown}");
}

#[test]
fn install_with_watch_writes_hooks_that_start_a_watcher_and_uninstall_removes_them() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let root = env.root().display().to_string();
    ok(cli(
        &env,
        &["-C", &root, "install", "claude-code", "--watch"],
    ));
    let settings = env.path(".claude/settings.json");
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&settings).unwrap()).unwrap();
    let commands: Vec<String> = v["hooks"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|groups| groups.as_array().unwrap().iter())
        .flat_map(|g| g["hooks"].as_array().unwrap().iter())
        .map(|h| h["command"].as_str().unwrap().to_string())
        .collect();
    assert!(!commands.is_empty());
    assert!(
        commands
            .iter()
            .all(|c| c.ends_with("hook claude-code --watch")),
        "{commands:?}"
    );
    // Installing again finds its own hooks (with the flag) and changes nothing.
    let again = ok(cli(
        &env,
        &["-C", &root, "install", "claude-code", "--watch"],
    ));
    assert!(again.contains("nothing to change"), "{again}");
    // The hook, run as the agent runs it, starts the workspace's watcher.
    let ws = open(&env);
    assert!(status(&ws).is_none());
    let event = serde_json::json!({"session_id": "w1", "transcript_path": "/tmp/t.jsonl",
        "cwd": env.root(), "hook_event_name": "UserPromptSubmit", "prompt": "go"});
    let o = env.run_with_input(
        RETRACE,
        &["hook", "claude-code", "--watch"],
        event.to_string().as_bytes(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    until("the hook's watcher answers", || status(&ws).is_some());
    ok(cli(&env, &["watch", "--stop"]));
    until("the watcher stopped", || status(&ws).is_none());
    // Uninstall takes the hooks out, flag and all.
    ok(cli(&env, &["-C", &root, "uninstall", "claude-code"]));
    let left = fs::read_to_string(&settings).unwrap_or_default();
    assert!(!left.contains("hook claude-code"), "{left}");
}

/// Sends `signal` (`-STOP`, `-CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let o = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "kill {signal} {pid}: {}", stderr(&o));
}

/// A stopped process, continued when this is dropped (also when the test fails).
struct Thawed(u32);

impl Drop for Thawed {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// `retrace watch --detach` with a watcher already serving starts none and says which one
/// serves and where it answers; when that watcher does not answer (stopped here with
/// SIGSTOP: it holds the workspace but never replies), it says that too, busy.
#[test]
fn detach_with_a_watcher_already_running_says_which_one_serves_and_where() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    detach(&env, &[]);
    let ws = open(&env);
    let s = status(&ws).expect("the watcher serves the workspace");
    let spec = ws.watch_spec();
    let socket = watch::socket_path(&spec.runtime_dir, &spec.root);
    let o = cli(&env, &["watch", "--detach"]);
    let said = ok(o);
    let root = spec.root.display();
    assert!(
        said.contains(&format!("a watcher already serves {root} (pid {}", s.pid)),
        "{said}"
    );
    assert!(said.contains(&socket.display().to_string()), "{said}");
    assert!(said.contains("none was started"), "{said}");
    assert_eq!(status(&ws).map(|t| t.pid), Some(s.pid));

    signal(s.pid, "-STOP");
    let thawed = Thawed(s.pid);
    let o = cli(&env, &["watch", "--detach"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let said = stdout(&o);
    assert!(
        said.contains(&format!(
            "a watcher already serves {root} but does not answer"
        )),
        "{said}{}",
        stderr(&o)
    );
    assert!(said.contains(&socket.display().to_string()), "{said}");
    drop(thawed);
    assert_eq!(status(&ws).map(|t| t.pid), Some(s.pid));
    stop(&ws);
}

/// A repository's `.git` as `git init` leaves the part a walk looks at (the name).
fn git_init(dir: &Path) {
    fs::create_dir_all(dir.join(".git/objects")).unwrap();
    fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
}

/// With a nested repository left alone (`nested_repos = "skip"`), captures the watcher
/// points stay watched: a change outside it, and changes inside it (none captured), are
/// captured from the named directories alone, each equal to a walk from scratch (snapshot,
/// totals, the repositories named). A repository that stops being one, a directory that
/// becomes one (a `.git` directory, or a submodule's `.git` file), one moved, cloned in or
/// deleted with its parent: every capture equals a walk from scratch, and the next change
/// outside is watched again.
#[test]
fn watched_captures_stay_watched_and_exact_beside_nested_repositories() {
    let env = Env::new();
    let root = env.root().to_path_buf();
    env.write("src/a.txt", "a");
    env.write("src/b.txt", "b");
    env.write("vendor/nested/lib.rs", "lib");
    env.write("vendor/nested/sub/deep.rs", "deep");
    env.write("vendor/keep.txt", "keep");
    env.write("plain/c.txt", "c");
    env.write("plain/sub/d.txt", "d");
    git_init(&root.join("vendor/nested"));
    let ws = open(&env);
    let w = Watcher::start(ws.watch_spec()).unwrap();
    ready(&w);
    let first = ws.snapshot_rescan(None, &NoProgress).unwrap();
    assert_eq!(first.nested_repos, vec!["vendor/nested"]);
    let watched = |what: &str| {
        let c = ws.snapshot_summary(None, &NoProgress).unwrap();
        assert!(
            c.walked_because.is_none(),
            "{what}: walked ({:?})",
            c.walked_because
        );
        assert!(c.focused, "{what}: not looked at where the watcher points");
        equals_scratch(&env, &ws, &c, what);
        c
    };
    // Walking is allowed; being exact is not optional.
    let exact = |what: &str| {
        let c = ws.snapshot_summary(None, &NoProgress).unwrap();
        equals_scratch(&env, &ws, &c, what);
        c
    };

    // (1) A change outside the repository.
    env.write("src/a.txt", "a, edited");
    env.write("src/new.txt", "new");
    let c = watched("a change outside the nested repository");
    assert_eq!(c.nested_repos, vec!["vendor/nested"]);

    // Nothing changed: the head's snapshot, recorded again, names the repository too.
    let again = ws.snapshot_summary(None, &NoProgress).unwrap();
    assert!(again.walked_because.is_none());
    assert_eq!(again.id, c.id);
    equals_scratch(&env, &ws, &again, "nothing changed");

    // (2) Changes inside it (its top level, a subdirectory, a new subdirectory, its `.git`):
    // nothing captured changes.
    env.write("vendor/nested/lib.rs", "lib, edited");
    env.write("vendor/nested/sub/deep.rs", "deep, edited");
    env.write("vendor/nested/newdir/inner/x.rs", "x");
    env.write("vendor/nested/.git/HEAD", "ref: refs/heads/other\n");
    fs::remove_file(root.join("vendor/nested/sub/deep.rs")).unwrap();
    let inside = watched("changes inside the nested repository");
    assert_eq!(
        inside.id, c.id,
        "a change inside the repository was captured"
    );
    // With one outside in the same batch.
    env.write("vendor/nested/sub/more.rs", "more");
    env.write("vendor/keep.txt", "keep, edited");
    let both = watched("changes inside and beside the nested repository");
    assert_ne!(both.id, c.id);

    // (3) Its `.git` removed: its files are captured, exactly.
    env.write("vendor/nested/sub/late.rs", "written before .git went");
    fs::remove_dir_all(root.join("vendor/nested/.git")).unwrap();
    let gone = exact("a nested repository's .git removed");
    assert!(gone.nested_repos.is_empty());
    env.write("src/b.txt", "b, edited");
    watched("a change after the repository became a directory");
    env.write("vendor/nested/sub/late.rs", "now captured");
    watched("a change inside the former repository");

    // (4) A directory becomes a repository.
    env.write("plain/sub/d.txt", "d, edited just before");
    git_init(&root.join("plain"));
    let made = exact("a directory given a .git");
    assert_eq!(made.nested_repos, vec!["plain"]);
    env.write("plain/sub/d.txt", "d, inside the new repository");
    env.write("src/a.txt", "a, again");
    watched("a change inside and outside the new repository");

    // (5) A submodule's `.git` file.
    env.write("sm/file.rs", "sm");
    exact("a new directory");
    env.write("sm/.git", "gitdir: ../.git/modules/sm\n");
    let sub = exact("a directory given a .git file");
    assert_eq!(sub.nested_repos, vec!["plain", "sm"]);
    env.write("sm/file.rs", "sm, edited");
    env.write("src/new.txt", "new, edited");
    watched("a change inside the submodule and outside");
    // Its `.git` file rewritten in place: still a repository.
    env.write("sm/.git", "gitdir: ../.git/modules/sm-moved\n");
    watched("a submodule's .git file rewritten");
    // Replaced by a `.git` directory: still one.
    fs::remove_file(root.join("sm/.git")).unwrap();
    git_init(&root.join("sm"));
    watched("a submodule's .git file replaced by a directory");

    // A repository moved, one cloned in (made outside, moved in), one made in place, one
    // deleted with its parent.
    fs::rename(root.join("plain"), root.join("moved")).unwrap();
    assert_eq!(
        exact("a nested repository moved").nested_repos,
        vec!["moved", "sm"]
    );
    let outside = tempfile::tempdir().unwrap();
    let clone = outside.path().join("clone");
    fs::create_dir_all(clone.join("src")).unwrap();
    fs::write(clone.join("src/main.rs"), "fn main() {}").unwrap();
    git_init(&clone);
    fs::rename(&clone, root.join("vendor/clone")).unwrap();
    exact("a repository cloned in");
    fs::create_dir_all(root.join("vendor/inplace/src")).unwrap();
    fs::write(root.join("vendor/inplace/src/x"), "x").unwrap();
    git_init(&root.join("vendor/inplace"));
    let three = exact("a repository made in place");
    assert_eq!(
        three.nested_repos,
        vec!["moved", "sm", "vendor/clone", "vendor/inplace"]
    );
    env.write("vendor/clone/src/main.rs", "fn main() { edited }");
    env.write("src/a.txt", "a, once more");
    watched("a change inside the cloned repository and outside");
    fs::remove_dir_all(root.join("vendor")).unwrap();
    let after = exact("a repository deleted with its parent");
    assert_eq!(after.nested_repos, vec!["moved", "sm"]);
    env.write("src/b.txt", "b, last");
    watched("a change after the deletion");
    drop(w);
}
