//! Background maintenance for long-running hosts (`retrace serve`, `retrace mcp`, agents that
//! link the crate): a thread that runs [`crate::retention::maintain_if_due`] on a timer and when
//! nudged, recompresses new frames at the dense level a slice at a time in between, and is
//! stopped and joined when its handle drops, so the store is never left open by a detached
//! thread when the process exits.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

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
