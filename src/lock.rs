//! The workspace lock: a `flock` on `<store dir>/lock` that orders file-writing operations
//! against captures, across threads and processes.
//!
//! Restores (undo, redo, navigate, `retrace restore`) take it exclusively: nothing else
//! reads or writes the workspace's managed files meanwhile. Captures that record history
//! (turn begin and end, checkpoints, snapshots) take it shared, so a capture never sees half
//! of a restore. The kernel releases a `flock` when its holder dies, so a killed process
//! never leaves a stale lock behind. Waits are bounded: past the deadline the caller answers
//! "busy" instead of hanging.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::StoreError;

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Several holders at once (captures).
    Shared,
    /// One holder (restores).
    Exclusive,
}

/// A held workspace lock; released on drop.
#[derive(Debug)]
pub struct WorkspaceLock {
    _file: File,
}

/// Takes the lock at `path`, waiting at most `wait`.
///
/// # Errors
/// [`StoreError::Busy`] when it stays held elsewhere; [`StoreError::Lock`] when the lock
/// file cannot be opened.
pub fn lock(path: &Path, mode: LockMode, wait: Duration) -> Result<WorkspaceLock, StoreError> {
    let file = OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| StoreError::Lock {
            path: path.into(),
            source,
        })?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let attempt = match mode {
            LockMode::Shared => file.try_lock_shared(),
            LockMode::Exclusive => file.try_lock(),
        };
        match attempt {
            Ok(()) => return Ok(WorkspaceLock { _file: file }),
            Err(TryLockError::WouldBlock) if started.elapsed() < wait => {
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Busy {
                    path: PathBuf::from(path),
                    secs: wait.as_secs(),
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StoreError::Lock {
                    path: path.into(),
                    source,
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
