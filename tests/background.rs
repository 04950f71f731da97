//! Maintenance never holds up a command (issue 19): a new store starts maintained, so a first
//! command finds no pass due; a due pass runs in a detached low-priority process after the
//! command has answered; what that pass warns about, the next command says, once. The test
//! of a pass still running after its command has exited uses the hook
//! `RETRACE_FAULT_MAINTAIN_PAUSE` (`retrace::maintainer::run_detached_pass`): it needs the
//! cargo feature `fault-injection` and is ignored without it. No assertion is timed: the
//! background pass is waited for by polling, with generous deadlines.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Env, RETRACE, maintained_ms, noise, stderr, wait_for_pass};
use retrace::store::{Store, now_ms};
use retrace::{Config, Workspace};

/// The one warning of a pass that cannot meet the byte budget.
fn budget_warnings(text: &str) -> usize {
    text.matches("more than its byte budget").count()
}

/// Whether frames captured at the fast level are still waiting for recompression (a pass
/// recompresses them all).
fn frames_left_to_recompress(env: &Env) -> bool {
    let ws = env.open();
    let store = Store::open(ws.store_path(), ws.root()).unwrap();
    // Out of time at once: does nothing, and says whether anything is left.
    !store.recompress(Some(Instant::now())).unwrap().finished
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 180 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The nice value of the running `retrace maintain-due` of `root`, if one runs.
fn background_nice(root: &Path) -> Option<i64> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args.contains(&b"maintain-due".as_slice())
            && args.contains(&root.as_os_str().as_encoded_bytes());
        if !ours {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // Fields after the command name in parentheses: state is field 3, nice field 19.
        let rest = &stat[stat.rfind(')')? + 2..];
        return rest.split_whitespace().nth(16)?.parse().ok();
    }
    None
}

#[test]
fn a_new_stores_first_snapshot_runs_no_maintenance() {
    let env = Env::new();
    for i in 0..200 {
        env.write(
            &format!("src/m{i}.rs"),
            format!("fn f{i}() {{}}\n").repeat(50),
        );
    }
    let before = now_ms();
    // Inline: a pass, were one due, would be done when the command exits.
    let o = env
        .command(RETRACE, &["snapshot"])
        .env("RETRACE_MAINTAIN", "inline")
        .output()
        .unwrap();
    let after = now_ms();
    assert!(o.status.success(), "{}", stderr(&o));
    // `maintained` is the store's creation, and no pass recompressed the capture.
    let m = maintained_ms(&env);
    assert!((before..=after).contains(&m), "{before} <= {m} <= {after}");
    assert!(frames_left_to_recompress(&env));
    // Nor through the library: nothing is due in a new store.
    let env = Env::new();
    env.write("a.txt", "a");
    let ws = env.open();
    ws.snapshot(None).unwrap();
    assert!(!retrace::retention::is_due(ws.working_copy()));
    assert!(ws.maintain_if_due().is_none());
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_due_pass_runs_after_its_command_has_exited_and_the_next_command_says_its_warning() {
    let env = Env::new();
    let pause = env.home.path().join("maintenance-paused");
    let with_budget = |args: &[&str]| {
        env.command(RETRACE, args)
            .env("RETRACE_MAX_STORE_BYTES", "64KiB")
            .env("RETRACE_FAULT_MAINTAIN_PAUSE", &pause)
            .output()
            .unwrap()
    };
    // Over the byte budget: a pass is due as soon as the snapshot is recorded.
    env.write("big.bin", noise(1, 300_000));
    env.write("text.rs", "fn main() {}\n".repeat(5000));
    let o = with_budget(&["snapshot"]);
    // The command has exited (its output is complete, its status known)...
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(budget_warnings(&stderr(&o)), 0, "{}", stderr(&o));
    let created = maintained_ms(&env);
    assert!(created > 0);
    // ...while its pass runs on, held at the hook, in a process of its own at nice 19.
    wait_until("the background pass starts", || pause.exists());
    let root = env.root().canonicalize().unwrap();
    assert_eq!(background_nice(&root), Some(19));
    assert_eq!(maintained_ms(&env), created, "the pass has not finished");
    assert!(frames_left_to_recompress(&env), "nor recompressed anything");
    // Let it go: it finishes by itself.
    std::fs::remove_file(&pause).unwrap();
    let done = wait_for_pass(&env, created + 1);
    assert!(done > created);
    wait_until("the background process exits", || {
        background_nice(&root).is_none()
    });
    assert!(!frames_left_to_recompress(&env), "the pass recompressed");
    // The pass could not meet the budget: the next command says so, once; the one after
    // it does not (the pass remembered the size, and nothing grew since).
    let o = env.run(RETRACE, &["status"]);
    assert_eq!(budget_warnings(&stderr(&o)), 1, "{}", stderr(&o));
    let o = with_budget(&["status"]);
    assert_eq!(budget_warnings(&stderr(&o)), 0, "{}", stderr(&o));
    let o = with_budget(&["snapshot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(budget_warnings(&stderr(&o)), 0, "{}", stderr(&o));
    let config =
        Config::with_home(env.home.path()).configure(|s| s.max_store_bytes.value = 64 << 10);
    let ws = Workspace::open(env.root(), &config).unwrap();
    assert!(
        !retrace::retention::is_due(ws.working_copy()),
        "nothing grew: no pass is due"
    );
}

/// The hooks leave due maintenance to a background process too.
#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_turn_end_leaves_its_pass_to_the_background() {
    let env = Env::new();
    let pause = env.home.path().join("maintenance-paused");
    let run = |args: &[&str]| {
        let o = env
            .command(RETRACE, args)
            .env("RETRACE_MAX_STORE_BYTES", "64KiB")
            .env("RETRACE_FAULT_MAINTAIN_PAUSE", &pause)
            .env("RETRACE_SESSION", "s")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    run(&["turn", "begin", "--prompt", "p"]);
    env.write("big.bin", noise(2, 300_000));
    run(&["turn", "end"]);
    let created = maintained_ms(&env);
    wait_until("the background pass starts", || pause.exists());
    assert_eq!(maintained_ms(&env), created, "the pass has not finished");
    std::fs::remove_file(&pause).unwrap();
    wait_for_pass(&env, created + 1);
    let o = env.run(RETRACE, &["--session", "s", "status"]);
    assert_eq!(budget_warnings(&stderr(&o)), 1, "{}", stderr(&o));
}
