//! `retrace watch`: the workspace's file watcher, in the foreground, detached, or stopped.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use retrace::Workspace;
use retrace::watch::{self, Watcher};

use crate::OK;

/// How long `--detach` waits for the new watcher's crawl before saying it still runs it.
const READY_WAIT: Duration = Duration::from_secs(30);

/// `retrace watch [--detach | --stop]`.
pub fn watch(ws: &Workspace, detach: bool, stop: bool) -> Result<u8> {
    let spec = ws.watch_spec();
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
        println!(
            "retrace: a watcher already serves {root} (pid {}, {} directories)",
            s.pid, s.watches
        );
        return Ok(OK);
    }
    if detach {
        return detached(&spec.runtime_dir, &spec.root);
    }
    let idle = spec.idle;
    let w = Watcher::start(spec)?;
    eprintln!(
        "retrace: watching {root} (pid {}); it exits after {} without a capture, on Ctrl-C, \
         or with `retrace watch --stop`",
        std::process::id(),
        minutes(idle)
    );
    let exit = w.wait();
    eprintln!(
        "retrace: the watcher of {root} stopped: {}",
        exit.describe()
    );
    Ok(OK)
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
pub fn spawn(runtime_dir: &Path, root: &Path) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let log_path = watch::socket_path(runtime_dir, root).with_extension("log");
    if let Some(dir) = log_path.parent() {
        retrace::home::create_private_dir(dir)?;
    }
    let log = std::fs::File::create(&log_path)?;
    Ok(std::process::Command::new(std::env::current_exe()?)
        .arg("-C")
        .arg(root)
        .arg("watch")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?)
}

/// For `retrace hook AGENT --watch`: starts the workspace's watcher unless one answers
/// (without waiting for it: the turn in progress walks, the next ones use it).
pub fn ensure(root: &Path) {
    let Ok(ws) = Workspace::open(root, &retrace::Config::from_env()) else {
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
        let _ = spawn(&spec.runtime_dir, &spec.root);
    }
}

/// Starts `retrace watch` as a process of its own and waits until it answers.
fn detached(runtime_dir: &Path, root: &Path) -> Result<u8> {
    let log_path = watch::socket_path(runtime_dir, root).with_extension("log");
    let mut child = spawn(runtime_dir, root)?;
    let started = Instant::now();
    loop {
        if let Some(s) = watch::status(runtime_dir, root, Duration::from_secs(1))
            && s.ready
        {
            println!(
                "retrace: watching {} ({} directories), pid {}; `retrace watch --stop` stops it",
                root.display(),
                s.watches,
                s.pid
            );
            return Ok(OK);
        }
        if let Some(status) = child.try_wait()? {
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
