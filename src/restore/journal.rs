//! The restore journal: what a restore is about to do, committed before its first file write
//! and removed in the same transaction that records its result.
//!
//! The record names two stored snapshots: `source` (the disk when the restore began) and
//! `target` (what the disk must become). The files the restore touches are exactly the paths
//! where those two trees differ, so the journal holds the file list in the store's own
//! deduplicated form, and recovery recomputes it with a two-tree walk. A restore killed
//! midway leaves the record; the next process that takes the workspace lock rolls the
//! restore *forward* (see `Workspace` recovery and `docs/crash-model.md`).

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::history::db::SessionKey;
use crate::history::record::{HISTORY_VERSION, Op, decode, encode};
use crate::object::ObjectId;
use crate::store::{ReadTx, WriteTx};

/// A restore in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// Record version (1).
    pub version: u8,
    /// What it is, for messages: "undo of turn 3", "restore to 3f2a9c1e".
    pub what: String,
    /// Stored snapshot of the disk when the restore began.
    pub source: ObjectId,
    /// Stored snapshot the disk must become.
    pub target: ObjectId,
    /// The session whose history records the operation, with the op to append once the
    /// files are done (its snapshot field is filled with the result).
    pub then: Option<(SessionKey, Op)>,
    /// Unix milliseconds.
    pub started_ms: u64,
    /// Process that wrote it (for `retrace status`).
    pub pid: u32,
}

impl JournalRecord {
    /// A new record.
    #[must_use]
    pub fn new(
        what: String,
        source: ObjectId,
        target: ObjectId,
        then: Option<(SessionKey, Op)>,
    ) -> JournalRecord {
        JournalRecord {
            version: HISTORY_VERSION,
            what,
            source,
            target,
            then,
            started_ms: crate::store::now_ms(),
            pid: std::process::id(),
        }
    }
}

/// Writes the journal inside `tx`.
///
/// # Errors
/// [`StoreError::Db`].
pub fn put(tx: &WriteTx<'_>, rec: &JournalRecord) -> Result<(), StoreError> {
    tx.put_journal(&encode(rec))
}

/// Removes the journal inside `tx`.
///
/// # Errors
/// [`StoreError::Db`].
pub fn clear(tx: &WriteTx<'_>) -> Result<(), StoreError> {
    tx.clear_journal()
}

/// The journal, if a restore is in progress or was interrupted.
///
/// # Errors
/// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode (a future
/// version is refused, never guessed at).
pub fn get(tx: &ReadTx) -> Result<Option<JournalRecord>, StoreError> {
    tx.journal()?
        .map(|v| {
            decode(&v).map_err(|detail| StoreError::History {
                path: tx.path().into(),
                detail: format!("restore journal: {detail}"),
            })
        })
        .transpose()
}
