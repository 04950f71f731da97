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
//! Agent undo lives in `history`: a [`Session`] per host conversation, a [`Turn`] per
//! prompt (before- and after-snapshots), and [`Session::undo`], [`Session::redo`],
//! [`Session::checkpoint`] and [`Session::navigate`], each answering an [`Outcome`].

#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(clippy::pedantic)]
// Every type a public item shows must be in the `pub use` list below (with `internals`,
// the modules are public and their own types reachable: not API, not checked).
#![cfg_attr(not(feature = "internals"), warn(unnameable_types))]
// Without the front ends, the parts of the library only they drive (the watcher's server,
// home-wide retention, the read side they print) have no caller in this crate.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]
// Capture and plan are one pass each over sorted data; split, they would scatter it.
#![allow(clippy::too_many_lines)]
// Counting '/' in short paths: not worth a dependency.
#![allow(clippy::naive_bytecount)]
// Merge loops name their cursors i, j, a, b: clearer than long names.
#![allow(clippy::many_single_char_names, clippy::similar_names)]

/// Declares the library's modules: crate-private, so that the API is the `pub use` list
/// below; with the `internals` feature (retrace's own tests, benches and fuzz targets turn it
/// on; it is not API and may change in any release) public and hidden from the docs.
macro_rules! modules {
    ($($(#[$attr:meta])* mod $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

/// Declares an inherent function that the crate and, with the `internals` feature, retrace's
/// own tests reach, but that is not API (its types are the crate's internals).
macro_rules! internal {
    ($(#[$attr:meta])* fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code)] // some serve only the tests
        pub(crate) fn $($rest)*
    };
}

modules! {
    mod capture;
    mod config;
    mod diff;
    mod dirent;
    mod error;
    mod fault;
    mod history;
    mod home;
    mod inverse;
    mod lease;
    mod local_history;
    mod lock;
    mod maintainer;
    mod merge;
    mod object;
    mod patch;
    mod platform;
    mod progress;
    #[cfg(feature = "cli")]
    mod protocol;
    mod repair;
    mod restore;
    mod retention;
    mod scan;
    mod share;
    mod statcache;
    mod store;
    mod trace;
    #[cfg(feature = "ui")]
    mod ui;
    mod verify;
    mod vouch;
    mod watch;
    mod working_copy;
    mod workspace;
}

pub mod format;

/// The front ends (the `retrace` and `retrace-dump` binaries call in here): not API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
#[cfg(test)]
mod test_util;

// The API: what a program embedding retrace needs, and nothing else (`docs/architecture.md`,
// "The library's API"; `.ci/public_api.py` fails when an item appears outside this list).

// Opening a workspace, snapshots, restores.
pub use capture::Capture;
pub use diff::Diff;
pub use object::{ObjectId, RelPath};
pub use patch::FilePatch;
pub use restore::RestoreOutcome;
pub use scan::Skipped;
pub use store::SnapshotRecord;
pub use working_copy::{Config, DirtyRefusal, DryRun, MAX_LISTED, RestoreOptions, Status};
pub use workspace::Workspace;

// Settings.
pub use config::{
    DEFAULT_HISTORY_WAIT, DEFAULT_MAX_TURNS, NestedRepos, Record, Setting, Settings,
    Source as SettingSource, StepCaptures,
};

// Sessions, turns and their operations.
pub use history::blame::{Blame, BlameRange, Origin, OriginKind};
pub use history::bursts::BurstSummary;
pub use history::db::SessionKey;
pub use history::inspect::{
    Among, EntryDetail, FileLogEntry, PathChange, SnapshotDetail, SnapshotLogEntry,
};
pub use history::list::{Choice, DEFAULT_SESSION, Pick, SessionRef};
pub use history::record::{Counts, UnknownMode};
pub use history::timeline::{Moment, Timeline, TimelineEntry};
pub use history::{
    BeforeStatus, LogEntry, Lookup, Mode, OpOptions, Outcome, Report, RevertPreview, Session,
    SessionInfo, SessionLog, SessionStatus, StepInfo, StepLog, StepRecord, Turn, TurnState,
    TurnSummary,
};

// Sharing a session: git commits on a side ref, bundles.
pub use share::git::{GitExport, GitImport};
pub use share::{Bundled, Exported, Imported};

// Maintenance, repair, the watcher's status, local history.
pub use local_history::BurstOutcome;
pub use maintainer::{Later, Maintainer};
pub use repair::{BrokenSnapshot, RepairReport};
pub use retention::MaintenanceReport;
pub use store::{DenseReport, GcReport, GroupReport};
pub use watch::WatchStatus;

// Progress and errors.
pub use error::{
    CaptureError, DbError, Error, HeldPath, OpenError, RestoreError, ShareError, StoreError,
    WatchError,
};
pub use progress::{NoProgress, Progress};
pub use trace::report_peak_memory;
