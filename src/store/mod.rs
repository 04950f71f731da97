//! The workspace store: one redb database holding objects (in the pack log), snapshots and
//! the workspace's last known state, and the tables the layers above declare (see
//! [`RowsTable`] and its kin) read and written through [`ReadTx`] / [`WriteTx`].
//!
//! Several processes may open one store at once: it is opened in redb's multi-process
//! `MultiWriter` mode, and write transactions (one at a time across processes) are taken
//! with a bounded wait, so a second `retrace snapshot` started at the same moment waits its
//! turn instead of failing.

mod compact;
mod dense;
mod gc;
mod heal;
mod meta;
mod open;
mod pack;
mod reader;
pub mod schema;
mod scrub;
mod space;
mod staged;
mod stats;
mod table;
mod parity_groups;
mod tx;
mod write;

pub use dense::DenseReport;
pub use gc::GcReport;
pub use space::{FreeSpace, free_space};
pub use parity_groups::GroupReport;
#[cfg(feature = "internals")]
pub use staged::decode_staged_row;
pub use staged::{Staged, StagedRow};
pub use table::{BytesTable, KeyKind, KeyedTable, MetaKey, NamedTable, RowsTable, Table};
pub use tx::{BytesEntries, ReadTx, WriteTx};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redb::{Database, ReadOnlyTable, ReadTransaction};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::object::{ObjectId, ObjectRecord};

/// How long an open or a write waits for other processes before answering "busy".
pub const LOCK_WAIT: Duration = Duration::from_mins(2);

/// The version [`SnapshotRecord`]s are written with.
pub const SNAPSHOT_VERSION: u8 = 1;

/// One entry of `retrace log`: a captured snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// Record version (`SNAPSHOT_VERSION`).
    pub version: u8,
    /// Root tree id; the snapshot's id.
    pub root: ObjectId,
    /// Unix milliseconds when captured.
    pub time_ms: u64,
    /// Optional label.
    pub label: Option<String>,
    /// Number of files (and symlinks) captured.
    pub files: u64,
    /// Total bytes of those files.
    pub bytes: u64,
}

impl SnapshotRecord {
    /// The record of snapshot `root` captured now, of `files` files holding `bytes` bytes.
    #[must_use]
    pub fn now(root: ObjectId, label: Option<String>, files: u64, bytes: u64) -> SnapshotRecord {
        SnapshotRecord {
            version: SNAPSHOT_VERSION,
            root,
            time_ms: now_ms(),
            label,
            files,
            bytes,
        }
    }
}

/// What [`Store::write`] did.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteStats {
    /// Objects actually added (absent before).
    pub objects: u64,
    /// Stored (compressed) bytes added.
    pub stored_bytes: u64,
}

/// Object, byte and file counts of a store (`retrace-dump stats`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct StoreStats {
    /// Blob objects (including chunks).
    pub blobs: u64,
    /// Chunked blobs.
    pub chunked: u64,
    /// Trees.
    pub trees: u64,
    /// Sum of content lengths of blobs (logical bytes held).
    pub logical_bytes: u64,
    /// Sum of payload lengths (uncompressed, as framed).
    pub payload_bytes: u64,
    /// Compressed bytes of the frames the index names (each frame once): what the live
    /// objects take in the pack log.
    pub frame_bytes: u64,
    /// Bytes of the pack log still held in packs (what the byte budget counts); frames no
    /// object names wait there until GC frees their packs.
    pub packed_bytes: u64,
    /// The pack log's end: every compressed byte ever appended, freed or not.
    pub log_bytes: u64,
    /// Length of the redb file.
    pub file_bytes: u64,
    /// Disk space the redb file occupies (its growth is sparse).
    pub disk_bytes: u64,
    /// Snapshots recorded.
    pub snapshots: u64,
    /// Objects stored whole (their payload is their content, or a chunk list).
    pub whole: u64,
    /// Objects stored as deltas against a base.
    pub deltas: u64,
    /// Deltas by chain depth (1: against an object stored whole).
    pub depths: std::collections::BTreeMap<u8, u64>,
    /// Content bytes the deltas stand for, less the bytes their payloads take: what storing
    /// them as deltas saved before compression.
    pub delta_saved_bytes: u64,
    /// The compressed bytes of [`StoreStats::frame_bytes`] by what they hold (a shared
    /// frame's bytes shared out by its members' payload lengths).
    pub stored_by_kind: StoredByKind,
}

/// Compressed bytes in the pack log by kind of object (`retrace-dump stats`, "where").
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StoredByKind {
    /// File contents and chunks of big files stored whole.
    pub contents: u64,
    /// Deltas (of files, chunks and trees).
    pub deltas: u64,
    /// Chunk lists of big files.
    pub chunk_lists: u64,
    /// Trees stored whole.
    pub trees: u64,
}

/// The bytes one redb table takes: its entries, its B-tree's metadata and the free space
/// inside its pages (`retrace-dump stats`).
#[derive(Debug, Clone, Serialize)]
pub struct TableBytes {
    /// Table name (`docs/format.md`, "redb tables").
    pub table: String,
    /// Entries.
    pub entries: u64,
    /// Key and value bytes.
    pub stored: u64,
    /// B-tree metadata bytes.
    pub metadata: u64,
    /// Unused bytes inside its pages.
    pub fragmented: u64,
}

/// One row of [`StoreReader::objects`]: an id and its record (or why it does not decode).
pub type ObjectListing = (ObjectId, Result<ObjectRecord, StoreError>);

/// The database, shared with the store's readers (a reader that finds a damaged object
/// makes the store forget it, see `heal`). Write-locked only to compact (redb's `compact`
/// needs `&mut`) and to reopen after a failed write; `None` only if that reopening failed.
type SharedDb = Arc<RwLock<Option<Database>>>;

/// A handle on one store file.
pub struct Store {
    db: SharedDb,
    path: PathBuf,
    /// Damaged objects found by readers and not forgotten yet.
    damage: Arc<heal::Damage>,
    /// Free bytes on the store's filesystem (a seam: tests inject a full disk).
    free_space: FreeSpace,
    /// A write failed for lack of space: redb needs the file reopened, and the failed
    /// transaction's pages are given back by compacting (see `space`).
    write_failed: std::sync::atomic::AtomicBool,
}

impl Store {
    /// The store file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Maps redb's errors; a full disk becomes [`StoreError::NoSpace`] (and is remembered,
    /// so the failed write's pages are given back).
    fn db_err(&self) -> impl Fn(redb::Error) -> StoreError + '_ {
        move |source| {
            if space::is_full(&source) {
                self.write_failed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return StoreError::NoSpace {
                    path: self.path.clone(),
                    needed: None,
                    free: self.free_bytes(),
                };
            }
            StoreError::Db {
                path: self.path.clone(),
                source: source.into(),
            }
        }
    }

    /// Runs `f` on the open database.
    fn with_db<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.read().unwrap_or_else(PoisonError::into_inner);
        match &*db {
            Some(db) => f(db),
            None => Err(StoreError::Closed {
                path: self.path.clone(),
            }),
        }
    }
}

fn now_secs() -> u64 {
    now_ms() / 1000
}

/// How far ahead of the system clock the store's clock runs: retrace's own benchmarks
/// simulate days of history in minutes (`set_clock_ahead`); 0 in every other use.
#[cfg(feature = "internals")]
static CLOCK_AHEAD_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Moves this process's store clock (record times, object ages) `ms` ahead of the system's.
/// For retrace's own benchmarks and tests only (the `internals` feature).
#[cfg(feature = "internals")]
pub fn set_clock_ahead(ms: u64) {
    CLOCK_AHEAD_MS.store(ms, std::sync::atomic::Ordering::SeqCst);
}

fn clock_ahead() -> u64 {
    #[cfg(feature = "internals")]
    return CLOCK_AHEAD_MS.load(std::sync::atomic::Ordering::SeqCst);
    #[cfg(not(feature = "internals"))]
    0
}

/// Unix milliseconds now.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .saturating_add(clock_ahead())
}

/// Bytes of disk a file occupies (its blocks), which for redb's sparse growth is less than
/// its length.
#[must_use]
pub fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// A store opened read-only (`retrace-dump`).
pub struct ReadOnlyStore {
    db: redb::ReadOnlyDatabase,
    path: PathBuf,
}

/// A read transaction with the object tables open; cheap to share between threads.
pub struct StoreReader {
    path: PathBuf,
    meta: Option<ReadOnlyTable<&'static str, &'static [u8]>>,
    objects: Option<ReadOnlyTable<&'static [u8; 32], &'static [u8]>>,
    packs: Option<ReadOnlyTable<u64, &'static [u8]>>,
    snapshots: Option<ReadOnlyTable<u64, &'static [u8]>>,
    frames: Mutex<Vec<(u64, Arc<Vec<u8>>)>>,
    /// Frames this reader decompressed, and their bytes (for `RETRACE_TRACE`).
    decompressed: [std::sync::atomic::AtomicU64; 2],
    /// Payloads of deltas rebuilt recently (see [`StoreReader::payload`]).
    rebuilt: Mutex<Vec<(ObjectId, Arc<Vec<u8>>)>>,
    /// Damaged objects this reader found (handed to the store when it is dropped).
    found: Mutex<Vec<(ObjectId, Vec<u8>)>>,
    /// How to make a read-write store forget what it found (`None`: read-only store).
    heal: Option<heal::Heal>,
    /// The read transaction every table above belongs to.
    tx: ReadTransaction,
}

impl StoreReader {
    fn db_err(&self, source: impl Into<redb::Error>) -> StoreError {
        StoreError::Db {
            path: self.path.clone(),
            source: source.into().into(),
        }
    }

    fn meta_value(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(meta) = &self.meta else {
            return Ok(None);
        };
        Ok(meta
            .get(key)
            .map_err(|x| self.db_err(x))?
            .map(|g| g.value().to_vec()))
    }

    /// The store file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corrupt(&self, id: &ObjectId, detail: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            id: *id,
            detail,
        }
    }
}

fn open_opt<K: redb::Key + 'static, V: redb::Value + 'static>(
    tx: &ReadTransaction,
    def: redb::TableDefinition<K, V>,
) -> Result<Option<ReadOnlyTable<K, V>>, redb::Error> {
    match tx.open_table(def) {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl From<redb::Error> for crate::error::DbError {
    fn from(e: redb::Error) -> Self {
        crate::error::DbError(Box::new(e))
    }
}

impl From<redb::DatabaseError> for crate::error::DbError {
    fn from(e: redb::DatabaseError) -> Self {
        crate::error::DbError(Box::new(e))
    }
}
