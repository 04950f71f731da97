//! Background maintenance, two ways.
//!
//! Long-running hosts (`retrace serve`, `retrace mcp`, agents that link the crate) run
//! [`start`]: a thread that runs [`crate::retention::maintain_if_due`] on a timer and when
//! nudged, recompresses new frames at the dense level a slice at a time in between, and is
//! stopped and joined when its handle drops, so the store is never left open by a detached
//! thread when the process exits.
//!
//! Short-lived commands (`retrace snapshot`, `turn end`, `checkpoint`, `retrace hook`) call
//! [`maintain_later`]: when a pass is due it starts the running executable again as
//! `retrace maintain-due -C <root>` ([`BACKGROUND_COMMAND`]), detached and at the lowest
//! priority, and returns at once; that process runs [`run_detached_pass`] and leaves what the
//! pass warned about in the store, for the next command to print
//! ([`crate::store::Store::take_deferred_warnings`]). No command waits for maintenance it did
//! not ask for; `retrace gc` is the way to ask.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::retention::MaintenanceReport;
use crate::working_copy::WorkingCopy;

/// How often a [`Maintainer`] checks whether maintenance is due, unless
/// `RETRACE_MAINTAIN_EVERY_MS` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_mins(10);

/// How long one background slice of recompression may hold the workspace (shared: captures
/// proceed; restores and GC wait at most this long).
const DENSE_SLICE: Duration = Duration::from_millis(500);

/// The pause between slices while frames remain to be recompressed.
const DENSE_PAUSE: Duration = Duration::from_secs(2);

/// A running maintenance thread; dropping it stops the thread and waits for a pass in
/// progress to finish.
#[derive(Debug)]
pub struct Maintainer {
    nudge: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Maintainer {
    /// Asks for a check now (after a turn is recorded, say), without waiting for it.
    pub fn nudge(&self) {
        if let Some(tx) = &self.nudge {
            let _ = tx.send(());
        }
    }
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        drop(self.nudge.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts checking every `interval` (and whenever [`Maintainer::nudge`] is called)
/// whether maintenance is due, running it in the background when it is. `None` for the
/// interval means [`DEFAULT_INTERVAL`], or `RETRACE_MAINTAIN_EVERY_MS` when set.
#[must_use = "maintenance stops when the Maintainer is dropped"]
pub fn start(wc: &WorkingCopy, interval: Option<Duration>) -> Maintainer {
    let interval = interval.unwrap_or_else(|| {
        std::env::var("RETRACE_MAINTAIN_EVERY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_INTERVAL, Duration::from_millis)
    });
    let (tx, rx) = mpsc::channel::<()>();
    let ws = wc.clone();
    let thread = std::thread::Builder::new()
        .name("retrace-maintenance".into())
        .spawn(move || {
            let mut wait = interval;
            loop {
                match rx.recv_timeout(wait) {
                    Ok(()) | Err(RecvTimeoutError::Timeout) => {
                        // A due pass; else a slice of recompression, and the next slice
                        // soon while frames remain.
                        let more = match crate::retention::maintain_if_due(&ws) {
                            Some(r) => !r.dense.finished,
                            None => crate::retention::recompress_if_free(&ws, DENSE_SLICE)
                                .is_some_and(|r| !r.finished),
                        };
                        wait = if more { DENSE_PAUSE } else { interval };
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .ok();
    Maintainer {
        nudge: Some(tx),
        thread,
    }
}

/// The hidden subcommand of the `retrace` binary that runs [`run_detached_pass`]:
/// `retrace maintain-due -C <root>`.
pub const BACKGROUND_COMMAND: &str = "maintain-due";

/// The environment variable that chooses how [`maintain_later`] runs a due pass: `inline`
/// runs it in the calling process, before it returns (what tests that need the pass done
/// when the command exits use); anything else, or unset, starts it in the background.
pub const MAINTAIN_VAR: &str = "RETRACE_MAINTAIN";

/// What `maintain_later` did.
#[derive(Debug)]
pub enum Later {
    /// No pass was due.
    NotDue,
    /// A detached process was started to run the pass: its pid.
    Started(u32),
    /// The pass ran in this process (`RETRACE_MAINTAIN=inline`): its report (None when the
    /// workspace was busy) and the lines it added to `WorkingCopy::warnings`.
    Ran {
        /// What the pass did.
        report: Option<Box<MaintenanceReport>>,
        /// What it warned about.
        warnings: Vec<String>,
    },
    /// A pass was due but no process could be started for it; the next command tries again.
    NotStarted(std::io::Error),
}

/// After a command's own work is durable: when a maintenance pass is due
/// ([`crate::retention::is_due`], one read transaction), starts it in a detached background
/// process and returns without waiting for it; with `RETRACE_MAINTAIN=inline`
/// ([`MAINTAIN_VAR`]), runs it here instead (it still skips when the workspace is busy).
///
/// The background process is the running executable with the arguments
/// `maintain-due -C <root>` and `RETRACE_HOME` set to the workspace's home: the `retrace`
/// binary's hidden command, which calls [`lower_priority`] and then [`run_detached_pass`].
/// So only the `retrace` binary (and the agent hooks, which run inside it) should
/// call this; a host that links the crate runs [`start`] or
/// [`crate::retention::maintain_if_due`] instead.
///
/// The process gets its own process group (the terminal's Ctrl-C and hangup, sent to the
/// foreground group, do not reach it) and `/dev/null` for stdin, stdout and stderr (it never
/// holds a caller's pipe open, so whoever reads this command's output sees it end when the
/// command does). It is not waited for: a thread of this process reaps it when it ends, so a
/// long-lived caller is left no zombie, and a short-lived one exits at once and leaves it to
/// be reparented. No `pre_exec` is needed: the process group is set by `std`
/// (`process_group`), and the priority is lowered by the process itself before it starts
/// any thread.
#[must_use = "Later says whether the pass ran here, and what it warned about"]
pub fn maintain_later(wc: &WorkingCopy) -> Later {
    if !crate::retention::is_due(wc) {
        return Later::NotDue;
    }
    if std::env::var(MAINTAIN_VAR).is_ok_and(|v| v == "inline") {
        let shown = wc.warnings().len();
        let report = crate::retention::maintain_if_due(wc).map(Box::new);
        let warnings = wc.warnings().into_iter().skip(shown).collect();
        return Later::Ran { report, warnings };
    }
    match spawn_pass(wc) {
        Ok(pid) => Later::Started(pid),
        Err(e) => Later::NotStarted(e),
    }
}

fn spawn_pass(wc: &WorkingCopy) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(BACKGROUND_COMMAND)
        .arg("-C")
        .arg(wc.root())
        .env("RETRACE_HOME", wc.home())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    // Reaped when it ends, by a thread that holds nothing else (a process that exits first
    // leaves it to init). Should the thread not start, it is reaped when this process exits.
    let _ = std::thread::Builder::new()
        .name("retrace-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
    Ok(pid)
}

/// Makes this process a background one: the lowest CPU priority (nice 19) and, on Linux,
/// the idle I/O class (`ioprio_set`, `IOPRIO_CLASS_IDLE`: its reads and writes wait while
/// any other process uses the disk). Failures are ignored (the pass runs at the normal
/// priority). Linux applies both to the calling thread, and threads inherit them when they
/// start: call it first, before any thread is started.
pub fn lower_priority() {
    let _ = rustix::process::setpriority_process(None, 19);
    crate::platform::idle_io_priority();
}

/// What the background process of [`maintain_later`] runs: the pass, if it is still due
/// and nobody holds the workspace ([`crate::retention::maintain_if_due`]); what it warned
/// about (a byte budget it cannot meet, say) is left in the store
/// ([`crate::store::Store::defer_warnings`]) for the next command to print, since this
/// process has no terminal to say it on.
///
/// With the feature `fault-injection`, `RETRACE_FAULT_MAINTAIN_PAUSE=<file>` makes a due
/// pass create `<file>` and wait until it is removed before it starts (at most 10 minutes),
/// so that a test can see a command exit while its maintenance is still running.
#[must_use = "the report says what maintenance did"]
pub fn run_detached_pass(wc: &WorkingCopy) -> Option<MaintenanceReport> {
    if !crate::retention::is_due(wc) {
        return None;
    }
    #[cfg(feature = "fault-injection")]
    pause_for_test();
    let shown = wc.warnings().len();
    let report = crate::retention::maintain_if_due(wc);
    let warnings: Vec<String> = wc.warnings().into_iter().skip(shown).collect();
    let _ = wc.store().defer_warnings(&warnings);
    report
}

#[cfg(feature = "fault-injection")]
fn pause_for_test() {
    let Some(file) = std::env::var_os("RETRACE_FAULT_MAINTAIN_PAUSE") else {
        return;
    };
    let file = std::path::PathBuf::from(file);
    if std::fs::write(&file, b"paused\n").is_err() {
        return;
    }
    let until = std::time::Instant::now() + Duration::from_mins(10);
    while file.exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
#[path = "maintainer_tests.rs"]
mod tests;
