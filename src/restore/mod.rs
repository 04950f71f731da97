//! Restore: make the workspace's managed files equal to a snapshot, exactly and safely.
//!
//! [`plan`] compares the disk (a fresh scan) with the target and decides every write and
//! delete; [`apply`] reads and verifies every object first, then writes each file to a
//! temp file in its directory and renames it into place. Ignored and excluded files and
//! nested repositories are never touched.

pub mod apply;
pub mod beneath;
pub mod fault;
pub mod journal;
pub mod plan;

use serde::Serialize;

use crate::object::ObjectId;
use crate::scan::Skipped;

/// What a restore did (or, for a dry run, would do).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RestoreOutcome {
    /// The snapshot restored.
    pub target: Option<ObjectId>,
    /// The paths restored (relative to the workspace root); empty: the whole workspace.
    pub paths: Vec<String>,
    /// Paths written (created or replaced).
    pub written: Vec<String>,
    /// Paths deleted.
    pub deleted: Vec<String>,
    /// Directories removed because the restore emptied them.
    pub removed_dirs: Vec<String>,
    /// Paths of the snapshot left alone because something unmanaged (ignored, excluded,
    /// a nested repository) is in the way.
    pub left_alone: Vec<Skipped>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// The safety snapshot taken before a forced restore over unsnapshotted changes.
    pub safety_snapshot: Option<ObjectId>,
    /// False when the disk, scanned after the restore, does not equal the target (someone
    /// wrote during the restore); the paths are in `verify_diff`.
    pub verified: bool,
    /// Paths that differ from the target after the restore.
    pub verify_diff: Vec<String>,
}
