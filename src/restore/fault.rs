//! Test hooks that stop a restore at exact points, compiled in only with the cargo feature
//! `fault-injection` (off by default: the binaries users build and install have none of this
//! and read no such variable). With it, they are read once per restore from the environment
//! (one lookup each when unset):
//!
//! - `RETRACE_FAULT_ABORT_AFTER_WRITES=N`: the process aborts (as abruptly as a SIGKILL)
//!   once the restore has deleted or written N files.
//! - `RETRACE_FAULT_FAIL_WRITE=N`: the N-th file the restore writes fails as a full disk
//!   does (`ENOSPC`, its temp file already created), once per process, so that a test can
//!   see a restore that fails midway put the workspace back.
//! - `RETRACE_FAULT_PAUSE=<point>:<N>:<file>`: at the N-th time the restore reaches
//!   `<point>` (`done`: a file written or deleted; `taken`: a version taken out of its path,
//!   before it is checked; `back`: the restore's own version swapped back out of a path
//!   someone edited, checked and not yet unlinked), it creates `<file>` and waits until the
//!   file is removed, so that a test can change the workspace at that exact point and then
//!   let the restore go on. Several pauses are separated by `,`. Tests run such restores
//!   with `RAYON_NUM_THREADS=1`, which makes the points exact.
//! - `RETRACE_FAULT_KEEP_BYTES=N`: a restore writing more than N bytes takes the path of
//!   big restores (objects checked present up front, verified as they are written; see
//!   `apply::verify`), so that a test reaches it with a small workspace.
//!
//! Without the feature, [`Faults`] is empty and its methods do nothing.

#[cfg(feature = "fault-injection")]
use std::path::PathBuf;
#[cfg(feature = "fault-injection")]
use std::sync::Mutex;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::{AtomicUsize, Ordering};

/// A point of a restore where a hook can stop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// A file was written or deleted.
    Done,
    /// A version was taken out of its path (exchanged or renamed out), not yet checked.
    Taken,
    /// The restore's own version came back out of a path someone edited (it was checked and
    /// is about to be unlinked).
    Back,
}

/// The hooks of one restore.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Default)]
pub struct Faults {
    abort_after: Option<usize>,
    fail_write: Option<usize>,
    writes: AtomicUsize,
    pause: Vec<(Point, usize, PathBuf)>,
    done: AtomicUsize,
    taken: AtomicUsize,
    back: AtomicUsize,
    gate: Mutex<()>,
}

#[cfg(feature = "fault-injection")]
impl Faults {
    /// The hooks the environment asks for.
    #[must_use]
    pub fn from_env() -> Faults {
        let abort_after = std::env::var("RETRACE_FAULT_ABORT_AFTER_WRITES")
            .ok()
            .and_then(|v| v.parse().ok());
        let fail_write = std::env::var("RETRACE_FAULT_FAIL_WRITE")
            .ok()
            .and_then(|v| v.parse().ok());
        let var = std::env::var("RETRACE_FAULT_PAUSE").unwrap_or_default();
        let pause = var
            .split(',')
            .filter_map(|spec| {
                let mut it = spec.splitn(3, ':');
                let point = match it.next()? {
                    "done" => Point::Done,
                    "taken" => Point::Taken,
                    "back" => Point::Back,
                    _ => return None,
                };
                let n = it.next()?.parse().ok()?;
                Some((point, n, PathBuf::from(it.next()?)))
            })
            .collect();
        Faults {
            abort_after,
            fail_write,
            pause,
            ..Faults::default()
        }
    }

    /// Called as each file's bytes are about to be written.
    ///
    /// # Errors
    /// `ENOSPC` for the write `RETRACE_FAULT_FAIL_WRITE` names.
    pub fn writing(&self) -> std::io::Result<()> {
        // Once per process: the restore that puts the workspace back writes normally.
        static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let Some(at) = self.fail_write else {
            return Ok(());
        };
        if self.writes.fetch_add(1, Ordering::SeqCst) + 1 == at
            && !FIRED.swap(true, Ordering::SeqCst)
        {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    }

    /// Marks that `point` was reached once more.
    pub fn reached(&self, point: Point) {
        if self.abort_after.is_none() && self.pause.is_empty() {
            return;
        }
        let counter = match point {
            Point::Done => &self.done,
            Point::Taken => &self.taken,
            Point::Back => &self.back,
        };
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        if point == Point::Done && self.abort_after.is_some_and(|a| n >= a) {
            std::process::abort();
        }
        for (_, _, file) in self
            .pause
            .iter()
            .filter(|(p, at, _)| *p == point && *at == n)
        {
            let _gate = self.gate.lock();
            crate::fault::hold(file);
        }
    }
}

/// The hooks of one restore: none, without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
#[derive(Debug, Default)]
pub struct Faults;

#[cfg(not(feature = "fault-injection"))]
impl Faults {
    /// No hooks: the environment is not read.
    #[must_use]
    #[inline]
    pub fn from_env() -> Faults {
        Faults
    }

    /// Does nothing.
    #[inline]
    #[allow(clippy::unused_self)] // the signature of the hooks with the feature
    pub fn reached(&self, _point: Point) {}

    /// Never fails.
    ///
    /// # Errors
    /// None.
    #[inline]
    #[allow(clippy::unused_self, clippy::unnecessary_wraps)] // the hooks' signature with the feature
    pub fn writing(&self) -> std::io::Result<()> {
        Ok(())
    }
}
