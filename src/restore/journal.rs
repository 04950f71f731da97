//! The restore journal: what a restore is about to do, committed before its first file write
//! and removed in the same transaction that records its result.
//!
//! The record names two stored snapshots: `source` (the disk when the restore began) and
//! `target` (what the disk must become). The files the restore touches are exactly the paths
//! where those two trees differ, so the journal holds the file list in the store's own
//! deduplicated form, and recovery recomputes it with a two-tree walk. A restore killed
//! midway leaves the record; the next process that takes the workspace lock rolls the
//! restore *forward* (see `Workspace` recovery and `docs/crash-model.md`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::object::ObjectId;
use crate::store::{NamedTable, ReadTx, Table, WriteTx};

/// The journal record's version.
pub const JOURNAL_VERSION: u8 = 1;

/// `journal`: at most one entry, key [`KEY`] → postcard [`JournalRecord`]: a restore that has
/// begun writing files and not finished.
pub const JOURNAL: NamedTable = NamedTable::new("journal");

/// The key of the journal's single entry.
pub const KEY: &str = "restore";

/// What a journaled restore records together with its result, in the same commit: the layer
/// above supplies it (the history: the session's op), so restore knows nothing of sessions.
/// It is kept in the journal, so a recovery can record it too.
pub trait Then: Serialize + DeserializeOwned + Clone {
    /// The tables a new store is created with (empty, in this order, besides the store's
    /// own), the journal's included: the layer above names its own. Only a new store's file
    /// depends on it; a missing table reads as empty.
    const NEW_STORE_TABLES: &'static [Table] = &[JOURNAL.table()];

    /// Writes the record inside `tx`, with `snapshot` (what the disk now equals); `reader`
    /// reads the store as committed before `tx` (the snapshot's trees included).
    ///
    /// # Errors
    /// [`StoreError`] from the writes; nothing is committed then.
    fn record(
        self,
        tx: &WriteTx<'_>,
        snapshot: ObjectId,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError>;

    /// Records a restore done for no one (the user's `retrace restore`), inside `tx`: from
    /// `source` (the disk it found, stored) to `snapshot` (what the disk now equals).
    /// Nothing by default.
    ///
    /// # Errors
    /// [`StoreError`] from the writes; nothing is committed then.
    fn record_unclaimed(
        tx: &WriteTx<'_>,
        what: &str,
        source: ObjectId,
        snapshot: ObjectId,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError> {
        let _ = (tx, what, source, snapshot, reader);
        Ok(())
    }
}

/// A restore in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord<T> {
    /// Record version (1).
    pub version: u8,
    /// What it is, for messages: "undo of turn 3", "restore to 3f2a9c1e".
    pub what: String,
    /// Stored snapshot of the disk when the restore began.
    pub source: ObjectId,
    /// Stored snapshot the disk must become.
    pub target: ObjectId,
    /// What to record once the files are done (the history: a session and the op to
    /// append, its snapshot field filled with the result).
    pub then: Option<T>,
    /// Unix milliseconds.
    pub started_ms: u64,
    /// Process that wrote it (for `retrace status`).
    pub pid: u32,
}

impl<T> JournalRecord<T> {
    /// A new record.
    #[must_use]
    pub fn new(
        what: String,
        source: ObjectId,
        target: ObjectId,
        then: Option<T>,
    ) -> JournalRecord<T> {
        JournalRecord {
            version: JOURNAL_VERSION,
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
pub fn put<T: Serialize>(tx: &WriteTx<'_>, rec: &JournalRecord<T>) -> Result<(), StoreError> {
    let bytes = crate::object::record::to_bytes(rec).map_err(|detail| StoreError::Encode {
        path: tx.path().into(),
        detail,
    })?;
    tx.put_named(JOURNAL, KEY, &bytes)
}

/// Removes the journal inside `tx`.
///
/// # Errors
/// [`StoreError::Db`].
pub fn clear(tx: &WriteTx<'_>) -> Result<(), StoreError> {
    tx.remove_named(JOURNAL, KEY)
}

/// The journal, if a restore is in progress or was interrupted.
///
/// # Errors
/// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode (a future
/// version is refused, never guessed at).
pub fn get<T: DeserializeOwned>(tx: &ReadTx) -> Result<Option<JournalRecord<T>>, StoreError> {
    tx.named(JOURNAL, KEY)?
        .map(|v| {
            decode(&v).map_err(|detail| StoreError::History {
                path: tx.path().into(),
                detail: format!("restore journal: {detail}"),
            })
        })
        .transpose()
}

/// Decodes a journal record, refusing unknown versions and trailing bytes.
fn decode<T: DeserializeOwned>(
    bytes: &[u8],
) -> Result<JournalRecord<T>, crate::object::record::DecodeError> {
    crate::object::record::decode_versioned(bytes, JOURNAL_VERSION, "history record")
}
