//! retrace: a workspace time machine for AI coding agents.
//!
//! retrace captures a whole workspace (every file git would not ignore) into its own
//! content-addressed store — blake3 ids, zstd compression, an embedded redb database kept
//! outside the workspace — and restores any snapshot exactly and safely. See
//! `docs/architecture.md` for the design and `docs/format.md` for the on-disk format.
//!
//! The entry point is [`Workspace`]:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let home = tempfile::tempdir()?;
//! use retrace::{Config, Workspace};
//! std::fs::write(dir.path().join("main.rs"), "fn main() {}")?;
//! let ws = Workspace::open(dir.path(), &Config::with_home(home.path()))?;
//! let snap = ws.snapshot(None)?;
//! assert_eq!(snap.files, 1);
//! # Ok(())
//! # }
//! ```
//!
//! Agent undo lives in [`history`]: a [`Session`] per host conversation, a [`Turn`] per
//! prompt (before- and after-snapshots), and [`Session::undo`], [`Session::redo`],
//! [`Session::checkpoint`] and [`Session::navigate`], each answering an [`Outcome`].

#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Capture and plan are one pass each over sorted data; split, they would scatter it.
#![allow(clippy::too_many_lines)]
// Counting '/' in short paths: not worth a dependency.
#![allow(clippy::naive_bytecount)]
// Merge loops name their cursors i, j, a, b: clearer than long names.
#![allow(clippy::many_single_char_names, clippy::similar_names)]

pub mod capture;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod config;
pub mod diff;
pub mod error;
mod fault;
pub mod history;
pub mod home;
mod inverse;
pub mod lease;
pub mod lock;
pub mod maintainer;
pub mod merge;
pub mod object;
pub mod patch;
pub mod progress;
#[cfg(feature = "cli")]
pub mod protocol;
pub mod repair;
pub mod restore;
pub mod retention;
pub mod scan;
pub mod statcache;
pub mod store;
#[cfg(test)]
mod test_util;
mod trace;
pub use trace::report_peak_memory;
#[cfg(feature = "ui")]
pub mod ui;
pub mod verify;
pub mod watch;
pub mod working_copy;
mod workspace;

pub use capture::Capture;
pub use config::{DEFAULT_HISTORY_WAIT, DEFAULT_MAX_TURNS};
pub use diff::Diff;
pub use error::{CaptureError, Error, HeldPath, RestoreError, StoreError};
pub use history::{
    BeforeStatus, LogEntry, Lookup, Mode, OpOptions, Outcome, Report, Session, SessionInfo,
    SessionLog, SessionStatus, StepInfo, StepLog, StepRecord, Turn, TurnState, TurnSummary,
};
pub use maintainer::Maintainer;
pub use object::ObjectId;
pub use progress::{NoProgress, Progress};
pub use restore::RestoreOutcome;
pub use store::SnapshotRecord;
pub use working_copy::{
    Config, DirtyRefusal, DryRun, MAX_LISTED, RestoreOptions, Status, WorkingCopy,
};
pub use workspace::Workspace;
