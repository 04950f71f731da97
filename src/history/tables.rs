//! The history's tables and meta keys in the store, declared through the store's typed
//! handles: the store knows none of them. `docs/format.md` ("redb tables") describes each
//! record field by field; names and key types are the file format, never to change.

use crate::error::StoreError;
use crate::object::ObjectId;
use crate::restore::journal::JOURNAL;
use crate::store::{BytesTable, KeyedTable, MetaKey, ReadTx, RowsTable, Table, WriteTx};

/// `sessions`: session key (blake3 of the host's session id) → postcard
/// [`super::record::SessionRecord`].
pub const SESSIONS: KeyedTable = KeyedTable::new("sessions");
/// `turns`: (session key, turn number) → postcard [`super::record::TurnRecord`].
pub const TURNS: RowsTable = RowsTable::new("turns");
/// `checkpoints`: (session key, number) → postcard [`super::record::CheckpointRecord`].
pub const CHECKPOINTS: RowsTable = RowsTable::new("checkpoints");
/// `oplog`: (session key, sequence number) → postcard [`super::record::OpRecord`].
pub const OPLOG: RowsTable = RowsTable::new("oplog");
/// `session_names`: (session key, 0) → postcard [`super::record::SessionName`]: the host's
/// name of the session (the number is always 0; the table is keyed as the other per-session
/// tables so that they share their code).
pub const SESSION_NAMES: RowsTable = RowsTable::new("session_names");
/// `leases`: (session key, turn number) → postcard [`crate::lease::LeaseRecord`]: the owner
/// of a pending turn.
pub const LEASES: RowsTable = RowsTable::new("leases");
/// `reverts`: (session key, turn number) → postcard [`super::record::RevertRecord`]: the
/// turn is a revert of an earlier turn (`retrace revert`), not an agent's.
pub const REVERTS: RowsTable = RowsTable::new("reverts");
/// `steps`: (session key, turn number × 2²⁰ + step number) → postcard
/// [`super::record::StepRecord`]: one tool call of a turn.
pub const STEPS: RowsTable = RowsTable::new("steps");
/// `ledger`: workspace-relative path bytes → postcard [`super::ledger::LedgerEntry`]: who
/// last wrote the path, and the version they left there.
pub const LEDGER: BytesTable = BytesTable::new("ledger");

/// Root tree id of the snapshot the ledger was last brought up to date with, 32 bytes.
pub const META_LEDGER_AT: MetaKey = MetaKey::new("ledger_at");
/// Paths writers claimed since the ledger was last brought up to date (an edit tool's files
/// at its step's end), postcard; the next update gives each the version it then finds.
pub const META_LEDGER_CLAIMS: MetaKey = MetaKey::new("ledger_claims");
/// Paths an edit step read since the ledger was last brought up to date, postcard: the next
/// update checks that each still holds the version read (another writer may have replaced
/// or deleted it since, between two snapshots that both lack it).
pub const META_LEDGER_OBSERVED: MetaKey = MetaKey::new("ledger_observed");

/// The tables a new store is created with, empty, besides the store's own: those a store
/// has had from its creation since the history's first commit (later tables appear at their
/// first write). Only the file of a new store depends on it: a missing table reads as empty.
pub const NEW_STORE: &[Table] = &[
    SESSIONS.table(),
    TURNS.table(),
    CHECKPOINTS.table(),
    OPLOG.table(),
    LEASES.table(),
    JOURNAL.table(),
];

/// Every table above the store (the history's, and the restore journal), in the order
/// `retrace-dump stats` lists them ([`crate::store::StoreReader::table_bytes`]).
pub const ALL: &[Table] = &[
    SESSIONS.table(),
    TURNS.table(),
    CHECKPOINTS.table(),
    OPLOG.table(),
    SESSION_NAMES.table(),
    LEASES.table(),
    REVERTS.table(),
    STEPS.table(),
    LEDGER.table(),
    JOURNAL.table(),
];

/// The tables of a session, keyed by (session key, number): what forgetting a session
/// removes besides its `sessions` record.
pub const OF_SESSION: [RowsTable; 7] = [
    TURNS,
    CHECKPOINTS,
    OPLOG,
    LEASES,
    SESSION_NAMES,
    REVERTS,
    STEPS,
];

/// The ledger's meta values ([`META_LEDGER_AT`], [`META_LEDGER_CLAIMS`],
/// [`META_LEDGER_OBSERVED`]), read in either kind of transaction.
pub trait LedgerMeta {
    /// The snapshot the ledger was last brought up to date with.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn ledger_at(&self) -> Result<Option<ObjectId>, StoreError>;

    /// The claims waiting for the ledger's next update (postcard, see `ledger.rs`).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn ledger_claims(&self) -> Result<Option<Vec<u8>>, StoreError>;

    /// The paths edit steps read since the ledger's last update (postcard, see `ledger.rs`).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn ledger_observed(&self) -> Result<Option<Vec<u8>>, StoreError>;
}

macro_rules! ledger_meta {
    ($tx:ty) => {
        impl LedgerMeta for $tx {
            fn ledger_at(&self) -> Result<Option<ObjectId>, StoreError> {
                Ok(self
                    .meta(META_LEDGER_AT)?
                    .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok().map(ObjectId)))
            }

            fn ledger_claims(&self) -> Result<Option<Vec<u8>>, StoreError> {
                self.meta(META_LEDGER_CLAIMS)
            }

            fn ledger_observed(&self) -> Result<Option<Vec<u8>>, StoreError> {
                self.meta(META_LEDGER_OBSERVED)
            }
        }
    };
}

ledger_meta!(ReadTx);
ledger_meta!(WriteTx<'_>);

/// The ledger's meta values, written.
pub trait SetLedgerMeta {
    /// Records the snapshot the ledger is now up to date with.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn set_ledger_at(&self, root: ObjectId) -> Result<(), StoreError>;

    /// Replaces the claims waiting for the ledger's next update (None: there are none).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn set_ledger_claims(&self, value: Option<&[u8]>) -> Result<(), StoreError>;

    /// Replaces the paths edit steps read since the ledger's last update (None: none).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    fn set_ledger_observed(&self, value: Option<&[u8]>) -> Result<(), StoreError>;
}

impl SetLedgerMeta for WriteTx<'_> {
    fn set_ledger_at(&self, root: ObjectId) -> Result<(), StoreError> {
        self.set_meta(META_LEDGER_AT, Some(root.0.as_slice()))
    }

    fn set_ledger_claims(&self, value: Option<&[u8]>) -> Result<(), StoreError> {
        self.set_meta(META_LEDGER_CLAIMS, value)
    }

    fn set_ledger_observed(&self, value: Option<&[u8]>) -> Result<(), StoreError> {
        self.set_meta(META_LEDGER_OBSERVED, value)
    }
}

#[cfg(test)]
#[path = "tables_tests.rs"]
mod tests;
