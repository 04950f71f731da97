//! `retrace watch`: the workspace's file watcher, in the foreground, detached, or stopped.

use crate::cli::commands::Ctx;
use crate::cli::exit::{BUSY, OK, REFUSED};
use crate::cli::open::open_to_snapshot;
use crate::cli::text::{burst_text, format_time};
use crate::local_history::RecorderEvent;
use crate::{BurstOutcome, Workspace};

/// Watch the files so that captures look only at what changed
///
/// Watches with inotify; captures walk as before whenever the watcher cannot vouch.
/// Exits after `watch_idle_minutes` without a capture.
#[derive(clap::Args)]
pub struct WatchArgs {
    /// Run in the background (its output goes to a log beside its socket).
    #[arg(long, conflicts_with = "stop")]
    detach: bool,
    /// Stop the workspace's watcher.
    #[arg(long)]
    stop: bool,
    /// Keep a local history: capture a snapshot after each burst of writes, once the
    /// workspace is quiet (as the `record = "bursts"` setting does; see `retrace log`).
    #[arg(long, conflicts_with = "stop")]
    record: bool,
}

/// Runs `retrace watch`.
pub fn run(args: WatchArgs, cx: &Ctx) -> Result<u8> {
    let ws = open_to_snapshot(cx.dir())?;
    let record = args.record || ws.settings().record.value == crate::Record::Bursts;
    watch(&ws, args.detach, args.stop, record)
}

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::WatchError;
use crate::watch::{self, WatchStatus, Watcher};
use anyhow::{Result, bail};

/// How long `--detach` waits for the new watcher's crawl before saying it still runs it.
const READY_WAIT: Duration = Duration::from_secs(30);

/// How long `--detach` asks once more, when a watcher that holds the workspace did not
/// answer at first (a loaded machine), before saying it does not answer.
const LATE_ANSWER: Duration = Duration::from_secs(5);

/// `retrace watch [--detach | --stop] [--record]`.
pub fn watch(ws: &Workspace, detach: bool, stop: bool, record: bool) -> Result<u8> {
    let mut spec = ws.watch_spec();
    if record {
        // Recording is what it is for: it stays until stopped, however quiet.
        spec.idle = Duration::from_hours(100 * 365 * 24);
    }
    let root = spec.root.display().to_string();
    if stop {
        if watch::stop(&spec.runtime_dir, &spec.root, Duration::from_secs(2)) {
            println!("retrace: the watcher of {root} stops");
        } else {
            println!("retrace: no watcher serves {root}");
        }
        return Ok(OK);
    }
    if let Some(s) = watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(1)) {
        if record && !s.recording {
            println!(
                "retrace: a watcher already serves {root} (pid {}) without recording bursts; \
                 none was started. Stop it (`retrace watch --stop`), then run `retrace watch \
                 --record`",
                s.pid
            );
            return Ok(REFUSED);
        }
        already(&spec.runtime_dir, &spec.root, &s);
        return Ok(OK);
    }
    if detach {
        return detached(&spec.runtime_dir, &spec.root, record);
    }
    let idle = spec.idle;
    let w = match Watcher::start(spec) {
        // One holds the workspace but did not answer above: busy, not broken.
        Err(e @ WatchError::Running { .. }) => {
            eprintln!("retrace: {e}");
            return Ok(BUSY);
        }
        w => w?,
    };
    if record {
        eprintln!(
            "retrace: watching {root} (pid {}) and recording a snapshot after each burst of \
             writes; it exits on Ctrl-C or with `retrace watch --stop`",
            std::process::id(),
        );
        // Thinning and collection run while it records, as in any long-running process.
        let _maintainer = ws.maintainer(None);
        w.set_recording(true);
        let stop = std::sync::atomic::AtomicBool::new(false);
        ws.record_bursts(&w, &stop, &mut |event| match event {
            RecorderEvent::Burst(BurstOutcome::Captured { root, summary, .. }, took) => {
                println!(
                    "{}  {}  {}  (captured in {} ms)",
                    format_time(crate::store::now_ms()),
                    root.short(),
                    burst_text(summary),
                    took.as_millis()
                );
            }
            RecorderEvent::Burst(..) => {}
            RecorderEvent::Failed(e) => eprintln!("retrace: a burst was not captured: {e}"),
        });
    } else {
        eprintln!(
            "retrace: watching {root} (pid {}); it exits after {} without a capture, on \
             Ctrl-C, or with `retrace watch --stop`",
            std::process::id(),
            minutes(idle)
        );
    }
    let exit = w.wait();
    eprintln!(
        "retrace: the watcher of {root} stopped: {}",
        exit.describe()
    );
    Ok(OK)
}

/// Says that the watcher `s` serves the workspace at `root` already, and where it answers.
fn already(runtime_dir: &Path, root: &Path, s: &WatchStatus) {
    println!(
        "retrace: a watcher already serves {} (pid {}, {} directories; its socket is {}); \
         none was started. `retrace watch --stop` stops it",
        root.display(),
        s.pid,
        s.watches,
        watch::socket_path(runtime_dir, root).display()
    );
}

fn minutes(d: Duration) -> String {
    let m = d.as_secs_f64() / 60.0;
    if m >= 1.0 && m.fract() == 0.0 {
        format!("{m:.0} minutes")
    } else {
        format!("{:.0} seconds", d.as_secs_f64())
    }
}

/// Starts `retrace watch` for the workspace at `root` as a process of its own, in its own
/// process group, its output in `<id>.log` beside its socket.
pub fn spawn(runtime_dir: &Path, root: &Path, record: bool) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let log_path = watch::socket_path(runtime_dir, root).with_extension("log");
    if let Some(dir) = log_path.parent() {
        crate::home::create_private_dir(dir)?;
    }
    let log = std::fs::File::create(&log_path)?;
    Ok(std::process::Command::new(std::env::current_exe()?)
        .arg("-C")
        .arg(root)
        .arg("watch")
        .args(record.then_some("--record"))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?)
}

/// For `retrace hook AGENT --watch`: starts the workspace's watcher unless one answers
/// (without waiting for it: the turn in progress walks, the next ones use it).
pub fn ensure(root: &Path) {
    let Ok(ws) = Workspace::open(root, &crate::Config::from_env()) else {
        return;
    };
    let spec = ws.watch_spec();
    let socket = watch::socket_path(&spec.runtime_dir, &spec.root);
    let req = watch::Request {
        v: watch::PROTOCOL,
        op: "status".into(),
        since: None,
    };
    if watch::request(&socket, &req, Duration::from_millis(500)).is_err() {
        let _ = spawn(&spec.runtime_dir, &spec.root, false);
    }
}

/// Starts `retrace watch` as a process of its own and waits until it answers.
fn detached(runtime_dir: &Path, root: &Path, record: bool) -> Result<u8> {
    let log_path = watch::socket_path(runtime_dir, root).with_extension("log");
    let mut child = spawn(runtime_dir, root, record)?;
    let started = Instant::now();
    loop {
        let answer = watch::status(runtime_dir, root, Duration::from_secs(1));
        if let Some(s) = &answer
            && s.pid != child.id()
        {
            // Another watcher, which the first look missed: ours finds it and exits.
            already(runtime_dir, root, s);
            return Ok(OK);
        }
        if let Some(s) = answer
            && s.ready
        {
            println!(
                "retrace: watching {} ({} directories), pid {}{}; `retrace watch --stop` stops \
                 it",
                root.display(),
                s.watches,
                s.pid,
                if record {
                    ", recording bursts of writes"
                } else {
                    ""
                }
            );
            return Ok(OK);
        }
        if let Some(status) = child.try_wait()? {
            // Ours found another watcher (exit 0, having said so in its log) or its lock held
            // (busy): one serves already.
            if status.success() || status.code() == Some(BUSY.into()) {
                return Ok(held(runtime_dir, root));
            }
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "the watcher exited ({status}) before it was ready: {}",
                said.trim()
            );
        }
        if started.elapsed() > READY_WAIT {
            println!(
                "retrace: the watcher of {} (pid {}) is still crawling; captures walk until it \
                 is ready",
                root.display(),
                child.id()
            );
            return Ok(OK);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--detach` found the workspace held by a watcher that did not answer (the new one could
/// not take its lock): asks it once more, then says it serves but does not answer.
fn held(runtime_dir: &Path, root: &Path) -> u8 {
    if let Some(s) = watch::status(runtime_dir, root, LATE_ANSWER) {
        already(runtime_dir, root, &s);
        return OK;
    }
    println!(
        "retrace: a watcher already serves {} but does not answer on its socket, {} (stopped, \
         or overloaded); none was started. Captures walk until it answers; end its process to \
         start another",
        root.display(),
        watch::socket_path(runtime_dir, root).display()
    );
    BUSY
}
