//! The workspace store: one redb database holding objects (in the pack log), snapshots and
//! the workspace's last known state.
//!
//! Several processes may open one store at once: it is opened in redb's multi-process
//! `MultiWriter` mode, and write transactions (one at a time across processes) are taken
//! with a bounded wait, so a second `retrace snapshot` started at the same moment waits its
//! turn instead of failing.

mod dense;
mod gc;
mod heal;
mod pack;
pub mod schema;
mod space;
mod staged;
mod tx;

pub use dense::DenseReport;
pub use gc::GcReport;
pub use space::{FreeSpace, free_space};
#[cfg(feature = "internals")]
pub use staged::decode_staged_row;
pub use staged::{Staged, StagedRow};
pub use tx::{LedgerRows, ReadTx, Rows, WriteTx};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redb::{
    ConcurrencyMode, Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TransactionError, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::object::NewFrame;
use crate::object::record::decompress_prefix;
use crate::object::{ChunkList, ObjectId, ObjectKind, ObjectRecord, Tree};
use schema::{
    CHECKPOINTS, FORMAT_DELTAS, FORMAT_VERSION, META, META_FORMAT, META_LAST_KNOWN, META_LOG_END,
    META_STORE_ID, META_WORKSPACE, OBJECTS, OPLOG, PACKS, SESSIONS, SNAPSHOTS, TURNS,
};

/// Stores smaller than this are never compacted (redb's own metadata dominates them).
const COMPACT_MIN_FILE: u64 = 8 * 1024 * 1024;
/// Compact when the disk blocks in use exceed this percentage of the pack log.
const COMPACT_RATIO_PERCENT: u64 = 130;

/// Whether `objects` holds a record for `id` that can be read: stored whole, or a delta whose
/// chain of bases is indexed (an object whose base was forgotten is written again).
fn readable_in(
    objects: &redb::Table<'_, &[u8; 32], &[u8]>,
    id: &ObjectId,
) -> Result<bool, redb::Error> {
    let mut at = *id;
    for _ in 0..=crate::object::delta::MAX_DEPTH {
        let Some(g) = objects.get(&at.0)? else {
            return Ok(false);
        };
        match ObjectRecord::decode(g.value()) {
            Ok(ObjectRecord { delta: Some(d), .. }) => at = d.base,
            // A record that does not decode is damage the readers deal with.
            _ => return Ok(true),
        }
    }
    Ok(false)
}

/// Records in `meta` that the store holds delta objects (format [`FORMAT_DELTAS`]).
fn mark_deltas(meta: &mut redb::Table<'_, &str, &[u8]>) -> Result<(), redb::StorageError> {
    let format = meta
        .get(META_FORMAT)?
        .and_then(|g| g.value().try_into().ok().map(u32::from_le_bytes));
    if format != Some(FORMAT_DELTAS) {
        meta.insert(META_FORMAT, FORMAT_DELTAS.to_le_bytes().as_slice())?;
    }
    Ok(())
}

/// Bytes of disk a file occupies (its blocks), which for redb's sparse growth is less than
/// its length.
#[must_use]
pub fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// Classifies a failure to open: damage (the file's content) apart from everything else.
fn open_error(path: &Path, source: redb::DatabaseError, need: &'static str) -> StoreError {
    use std::io::ErrorKind;
    let source = match source {
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == ErrorKind::PermissionDenied =>
        {
            return StoreError::Permission {
                path: path.into(),
                need,
                source: e,
            };
        }
        other => other,
    };
    let damaged = match &source {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(d)) => Some(d.clone()),
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if matches!(e.kind(), ErrorKind::InvalidData | ErrorKind::UnexpectedEof) =>
        {
            Some(e.to_string())
        }
        redb::DatabaseError::UpgradeRequired(v) => Some(format!("redb file format {v}")),
        _ => None,
    };
    match damaged {
        Some(detail) => StoreError::Damaged {
            path: path.into(),
            detail,
        },
        None => StoreError::Open {
            path: path.into(),
            source: source.into(),
        },
    }
}

/// Opens (creating if needed) the database at `path`, waiting up to [`LOCK_WAIT`] for other
/// processes (when `wait`); damage is classified by [`open_error`].
fn open_db(path: &Path, wait: bool) -> Result<Database, StoreError> {
    let started = Instant::now();
    loop {
        // redb 4.6 panics ("unreachable code") on some corrupted pages while opening;
        // a damaged file must be reported, never take the process down.
        let opened = std::panic::catch_unwind(|| builder().create(path)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(
                format!("redb gave up reading it: {what}"),
            )))
        });
        match opened {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen)
                if wait && started.elapsed() < LOCK_WAIT =>
            {
                thread::sleep(Duration::from_millis(20));
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StoreError::Busy {
                    path: path.into(),
                    secs: LOCK_WAIT.as_secs(),
                });
            }
            Err(source) => return Err(open_error(path, source, "read and write")),
        }
    }
}

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

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Unix milliseconds now.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The lines of a [`schema::META_WARNINGS`] value.
fn warning_lines(value: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(value)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// 16 unpredictable-enough bytes (time, pid, address entropy) for a store id.
fn random_id() -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(&format!("{:?}{}", SystemTime::now(), std::process::id()).into_bytes());
    h.update(&(std::ptr::from_ref(&h) as usize).to_le_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    out
}

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_concurrency_mode(ConcurrencyMode::MultiWriter);
    // redb holds up to this much of the file in memory, half of it at most dirty pages of
    // the open write. Upper B-tree levels fit easily; leaf pages come from the OS page cache
    // with one `pread`. Measured on cold captures: 64 MiB cost 49 MB more peak RSS than
    // 16 MiB at 300k files, and saved at most 0.5 s of 12 at a million (docs/benchmarks.md,
    // "Monorepo scale").
    b.set_cache_size(16 * 1024 * 1024);
    b
}

impl Store {
    /// Opens (creating if needed) the store at `path`, waiting up to [`LOCK_WAIT`] for other
    /// processes, and checks the format version.
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be opened, stays busy, or has an unknown format.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests
    pub fn open(path: &Path, workspace: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, workspace, free_space)
    }

    /// [`Store::open`], measuring free disk space with `free_space` (tests give a full disk).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(
        path: &Path,
        workspace: &Path,
        free_space: FreeSpace,
    ) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            crate::home::create_private_dir(dir)?;
        }
        let db = open_db(path, true)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let store = Store {
            db: Arc::new(RwLock::new(Some(db))),
            path: path.to_path_buf(),
            damage: Arc::default(),
            free_space,
            write_failed: std::sync::atomic::AtomicBool::new(false),
        };
        store.init(workspace)?;
        Ok(store)
    }

    /// Opens an existing store read-only (for `retrace-dump`); never changes it.
    ///
    /// # Errors
    /// [`StoreError`] when it cannot be opened or has an unknown format.
    pub fn open_read_only(path: &Path) -> Result<ReadOnlyStore, StoreError> {
        let db = builder()
            .open_read_only(path)
            .map_err(|source| match source {
                redb::DatabaseError::RepairAborted => StoreError::NeedsRepair { path: path.into() },
                redb::DatabaseError::Storage(redb::StorageError::Io(e))
                    if e.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    StoreError::Permission {
                        path: path.into(),
                        need: "read",
                        source: e,
                    }
                }
                source => StoreError::Open {
                    path: path.into(),
                    source: source.into(),
                },
            })?;
        let store = ReadOnlyStore {
            db,
            path: path.to_path_buf(),
        };
        let r = store.reader()?;
        r.check_format()?;
        Ok(store)
    }

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

    fn init(&self, workspace: &Path) -> Result<(), StoreError> {
        let r = self.reader()?;
        if r.format()?.is_some() {
            return r.check_format();
        }
        drop(r);
        let tx = self.begin_write()?;
        {
            let e = self.db_err();
            let mut meta = tx.open_table(META).map_err(|x| e(x.into()))?;
            let existing = meta
                .get(META_FORMAT)
                .map_err(|x| e(x.into()))?
                .map(|g| g.value().to_vec());
            if existing.is_none() {
                meta.insert(META_FORMAT, FORMAT_VERSION.to_le_bytes().as_slice())
                    .map_err(|x| e(x.into()))?;
                meta.insert(META_WORKSPACE, workspace.as_os_str().as_encoded_bytes())
                    .map_err(|x| e(x.into()))?;
                meta.insert(META_STORE_ID, random_id().as_slice())
                    .map_err(|x| e(x.into()))?;
                // A new store has nothing to maintain: it counts as maintained now, so the
                // first command after it never finds a pass due (only the byte budget can
                // make one due sooner).
                meta.insert(schema::META_MAINTAINED, now_ms().to_le_bytes().as_slice())
                    .map_err(|x| e(x.into()))?;
            }
            tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
            tx.open_table(PACKS).map_err(|x| e(x.into()))?;
            tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
            tx.open_table(SESSIONS).map_err(|x| e(x.into()))?;
            tx.open_table(TURNS).map_err(|x| e(x.into()))?;
            tx.open_table(CHECKPOINTS).map_err(|x| e(x.into()))?;
            tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
            tx.open_table(schema::LEASES).map_err(|x| e(x.into()))?;
            tx.open_table(schema::JOURNAL).map_err(|x| e(x.into()))?;
        }
        tx.commit().map_err(|x| self.db_err()(x.into()))?;
        self.reader()?.check_format()
    }

    /// Begins a write transaction, waiting up to [`LOCK_WAIT`] for other writers.
    fn begin_write(&self) -> Result<WriteTransaction, StoreError> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let attempt = self.with_db(|db| Ok(db.try_begin_write()))?;
            match attempt {
                Ok(tx) => return Ok(tx),
                Err(TransactionError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(TransactionError::WouldBlock) => {
                    return Err(StoreError::Busy {
                        path: self.path.clone(),
                        secs: LOCK_WAIT.as_secs(),
                    });
                }
                Err(e) => return Err(self.db_err()(e.into())),
            }
        }
    }

    /// Runs `f` in one write transaction and commits it durably (redb's multi-process mode
    /// always syncs), waiting up to [`LOCK_WAIT`] for other writers. Nothing is committed
    /// when `f` fails.
    ///
    /// # Errors
    /// [`StoreError`] from `f`, the wait or the commit.
    #[track_caller]
    pub fn transact<T>(
        &self,
        f: impl FnOnce(&WriteTx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        crate::trace::commit(std::panic::Location::caller());
        let tx = self.begin_write()?;
        let out = f(&WriteTx {
            tx: &tx,
            path: &self.path,
        })?;
        tx.commit().map_err(|x| self.db_err()(x.into()))?;
        Ok(out)
    }

    /// A read transaction over the history tables.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn begin_read(&self) -> Result<ReadTx, StoreError> {
        let tx = self.with_db(|db| db.begin_read().map_err(|x| self.db_err()(x.into())))?;
        Ok(ReadTx {
            tx,
            path: self.path.clone(),
        })
    }

    /// A consistent read view of the store.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        let mut r = self.with_db(|db| StoreReader::new(db, &self.path))?;
        r.heal = Some(heal::Heal {
            db: Arc::clone(&self.db),
            damage: Arc::clone(&self.damage),
            path: self.path.clone(),
        });
        Ok(r)
    }

    /// Compacts the file when it holds much more than its live data, best effort.
    ///
    /// redb grows a file by doubling its length (until 4 GiB), but the growth is sparse: the
    /// disk blocks actually used stay close to the data (measured 1.04× the pack log, see
    /// docs/benchmarks.md). So the trigger is the blocks in use, not the length; compacting on
    /// length would run after nearly every commit, since the next commit grows the file
    /// again. Real dead space (pages freed and not reused) is what this reclaims. It needs
    /// no live transaction in any process, so it is skipped (not waited for) when another
    /// process is busy. Returns whether it ran.
    pub fn compact_if_sparse(&self) -> bool {
        if !self.is_sparse() {
            return false;
        }
        let ran = self.compact_now();
        // What compaction could not give back is not asked for again until the file grows.
        let after = disk_bytes(&self.path);
        let e = self.db_err();
        let _ = self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            meta.insert(schema::META_COMPACTED, after.to_le_bytes().as_slice())
                .map_err(|x| e(x.into()))?;
            Ok(())
        });
        ran
    }

    /// Whether [`Store::compact_if_sparse`] would compact: the disk blocks in use exceed
    /// 1.3× the pack log, and the file grew by a tenth since the last compaction attempt.
    /// One read transaction and one `stat`; for deciding whether to start a background
    /// pass.
    #[must_use]
    pub fn is_sparse(&self) -> bool {
        let Ok(reader) = self.reader() else {
            return false;
        };
        let live = reader.log_end().unwrap_or(0);
        let floor = reader
            .meta_value(schema::META_COMPACTED)
            .ok()
            .flatten()
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0);
        drop(reader);
        let disk = disk_bytes(&self.path);
        disk >= COMPACT_MIN_FILE
            && disk * 100 > live * COMPACT_RATIO_PERCENT
            && disk * 10 > floor * 11
    }

    /// Compacts the file now if no live transaction (in any process) prevents it; returns
    /// whether it ran. Busy elsewhere: skipped, tried again next time.
    pub(crate) fn compact_now(&self) -> bool {
        let Ok(mut db) = self.db.write() else {
            return false;
        };
        let Some(db) = db.as_mut() else {
            return false;
        };
        let mut ran = false;
        for _ in 0..4 {
            match db.compact() {
                Ok(true) => ran = true,
                Ok(false) | Err(_) => break,
            }
        }
        ran
    }

    /// Writes `frames` (skipping frames whose objects are all present already), optionally a
    /// snapshot record and the new last known state, in one durable transaction. (redb's
    /// multi-process mode has no non-durable commits, so capture batches its frames into
    /// few, large transactions instead.)
    ///
    /// # Errors
    /// [`StoreError`] when the write fails; nothing is committed then.
    ///
    /// # Panics
    /// Never: encoding a plain record into memory cannot fail.
    #[track_caller]
    pub fn write(
        &self,
        frames: Vec<NewFrame>,
        snapshot: Option<&SnapshotRecord>,
        last_known: Option<ObjectId>,
    ) -> Result<WriteStats, StoreError> {
        self.write_with(frames, snapshot, last_known, |_| Ok(()))
    }

    /// [`Store::write`], running `also` in the same transaction (journal and history
    /// records), so everything commits together with one sync.
    ///
    /// # Errors
    /// As [`Store::write`], or `also`'s error; nothing is committed then.
    ///
    /// # Panics
    /// Never: encoding a plain record into memory cannot fail.
    #[allow(clippy::needless_pass_by_value)] // takes the batch: it is dropped once written
    #[track_caller]
    pub fn write_with(
        &self,
        frames: Vec<NewFrame>,
        snapshot: Option<&SnapshotRecord>,
        last_known: Option<ObjectId>,
        also: impl FnOnce(&WriteTx<'_>) -> Result<(), StoreError>,
    ) -> Result<WriteStats, StoreError> {
        crate::trace::commit(std::panic::Location::caller());
        let e = self.db_err();
        self.check_space(&frames)?;
        let tx = self.begin_write()?;
        let stats;
        {
            let mut meta = tx.open_table(META).map_err(|x| e(x.into()))?;
            let mut index = tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
            let mut packs = tx.open_table(PACKS).map_err(|x| e(x.into()))?;
            let (records, added) =
                self.append_frames(&mut meta, &index, &mut packs, &frames, true)?;
            stats = added;
            for (id, rec) in &records {
                let bytes = rec.encode().map_err(|detail| StoreError::Encode {
                    path: self.path.clone(),
                    detail,
                })?;
                index
                    .insert(&id.0, bytes.as_slice())
                    .map_err(|x| e(x.into()))?;
            }
            if let Some(rec) = snapshot {
                let mut snaps = tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
                let last = snaps.last().map_err(|x| e(x.into()))?.map(|(k, v)| {
                    let same = postcard::from_bytes::<SnapshotRecord>(v.value()).is_ok_and(|l| {
                        l.root == rec.root && (rec.label.is_none() || l.label == rec.label)
                    });
                    (k.value(), same)
                });
                // A snapshot equal to the newest one, with no new label, adds no row: the
                // log lists what changed, not every time someone asked.
                if !last.is_some_and(|(_, same)| same) {
                    let next = last.map_or(1, |(k, _)| k + 1);
                    let bytes = crate::object::record::to_bytes(rec).map_err(|detail| {
                        StoreError::Encode {
                            path: self.path.clone(),
                            detail,
                        }
                    })?;
                    snaps
                        .insert(next, bytes.as_slice())
                        .map_err(|x| e(x.into()))?;
                }
            }
            if let Some(root) = last_known {
                meta.insert(META_LAST_KNOWN, root.0.as_slice())
                    .map_err(|x| e(x.into()))?;
            }
        }
        also(&WriteTx {
            tx: &tx,
            path: &self.path,
        })?;
        tx.commit().map_err(|x| e(x.into()))?;
        Ok(stats)
    }
}

impl Store {
    /// Records when maintenance last ran, and the packed bytes it could not go below when
    /// the byte budget could not be met (`over_budget`; 0 = it was met).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_maintained(&self, now_ms: u64, over_budget: u64) -> Result<(), StoreError> {
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            meta.insert(schema::META_MAINTAINED, now_ms.to_le_bytes().as_slice())
                .map_err(|x| e(x.into()))?;
            if over_budget == 0 {
                meta.remove(schema::META_OVER_BUDGET)
                    .map_err(|x| e(x.into()))?;
            } else {
                meta.insert(
                    schema::META_OVER_BUDGET,
                    over_budget.to_le_bytes().as_slice(),
                )
                .map_err(|x| e(x.into()))?;
            }
            Ok(())
        })
    }

    /// Adds `lines` to the warnings a background maintenance pass leaves for the next
    /// command to print ([`Store::take_deferred_warnings`]), after those already there.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn defer_warnings(&self, lines: &[String]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            let mut text = meta
                .get(schema::META_WARNINGS)
                .map_err(|x| e(x.into()))?
                .map(|g| String::from_utf8_lossy(g.value()).into_owned())
                .unwrap_or_default();
            for line in lines {
                // One warning per line: a line break inside one would make two.
                let line = line.replace(['\n', '\r'], " ");
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&line);
            }
            meta.insert(schema::META_WARNINGS, text.as_bytes())
                .map_err(|x| e(x.into()))?;
            Ok(())
        })
    }

    /// Takes the warnings background maintenance left ([`Store::defer_warnings`]): returns
    /// them and removes them in one transaction, so that each is said once. Reads first, and
    /// writes only when there are some.
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Busy`] when other writers hold the store.
    pub fn take_deferred_warnings(&self) -> Result<Vec<String>, StoreError> {
        if self.reader()?.deferred_warnings()?.is_empty() {
            return Ok(Vec::new());
        }
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            let taken = meta
                .remove(schema::META_WARNINGS)
                .map_err(|x| e(x.into()))?
                .map(|g| warning_lines(g.value()))
                .unwrap_or_default();
            Ok(taken)
        })
    }

    /// Deletes snapshot-log records older than `cutoff_ms` (they stop being GC roots),
    /// except the newest: the snapshot a command just printed is never taken from the log,
    /// whatever the age rule or the byte budget. Returns how many.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn prune_snapshots(&self, cutoff_ms: u64) -> Result<u64, StoreError> {
        let e = self.db_err();
        self.transact(|tx| {
            let mut t = tx.tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
            let before = t.len().map_err(|x| e(x.into()))?;
            let newest = t.last().map_err(|x| e(x.into()))?.map(|(k, _)| k.value());
            t.retain(|k, v| {
                Some(k) == newest
                    || postcard::from_bytes::<SnapshotRecord>(v)
                        .map_or(true, |r| r.time_ms >= cutoff_ms)
            })
            .map_err(|x| e(x.into()))?;
            Ok(before - t.len().map_err(|x| e(x.into()))?)
        })
    }
}

/// A store opened read-only (`retrace-dump`).
pub struct ReadOnlyStore {
    db: redb::ReadOnlyDatabase,
    path: PathBuf,
}

impl ReadOnlyStore {
    /// A read transaction over the history tables.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn begin_read(&self) -> Result<ReadTx, StoreError> {
        let tx = self.db.begin_read().map_err(|x| StoreError::Db {
            path: self.path.clone(),
            source: redb::Error::from(x).into(),
        })?;
        Ok(ReadTx {
            tx,
            path: self.path.clone(),
        })
    }

    /// A consistent read view.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        StoreReader::new(&self.db, &self.path)
    }

    /// The store file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
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

/// Decompressed frames a reader keeps (each at most about 1 MiB).
const FRAME_CACHE: usize = 8;

/// A version in a shared frame larger than this is not used as a delta base (see
/// [`StoreReader::delta_base`]).
const MAX_SHARED_BASE_FRAME: u32 = 256 * 1024;

/// Rebuilt delta payloads a reader keeps, and the largest it keeps.
const REBUILT_CACHE: usize = 8;
const REBUILT_MAX_BYTES: usize = 4 << 20;

/// Where a delta chain's rebuilding starts.
enum Start {
    /// From an object stored whole.
    Whole(ObjectId, ObjectRecord),
    /// From a payload rebuilt recently.
    Cached(Arc<Vec<u8>>),
}

/// Whether `bytes` are the payload of object `id` of `kind` (a chunk list's id is its
/// file's, so it cannot be checked alone; chunk lists are never deltas or bases).
fn hashes_to(kind: ObjectKind, bytes: &[u8], id: &ObjectId) -> bool {
    match kind {
        ObjectKind::Blob => ObjectId::of_blob(bytes) == *id,
        ObjectKind::Tree => ObjectId::of_tree(bytes) == *id,
        ObjectKind::ChunkedBlob => false,
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

impl StoreReader {
    fn new(db: &impl ReadableDatabase, path: &Path) -> Result<StoreReader, StoreError> {
        let e = |source: redb::Error| StoreError::Db {
            path: path.into(),
            source: source.into(),
        };
        let tx = db.begin_read().map_err(|x| e(x.into()))?;
        Ok(StoreReader {
            path: path.into(),
            meta: open_opt(&tx, META).map_err(e)?,
            objects: open_opt(&tx, OBJECTS).map_err(e)?,
            packs: open_opt(&tx, PACKS).map_err(e)?,
            snapshots: open_opt(&tx, SNAPSHOTS).map_err(e)?,
            frames: Mutex::new(Vec::with_capacity(FRAME_CACHE)),
            decompressed: Default::default(),
            rebuilt: Mutex::new(Vec::with_capacity(REBUILT_CACHE)),
            found: Mutex::new(Vec::new()),
            heal: None,
            tx,
        })
    }

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

    fn format(&self) -> Result<Option<u32>, StoreError> {
        Ok(self
            .meta_value(META_FORMAT)?
            .map(|v| v.try_into().map_or(u32::MAX, u32::from_le_bytes)))
    }

    fn check_format(&self) -> Result<(), StoreError> {
        match self.format()? {
            Some(FORMAT_VERSION | FORMAT_DELTAS) => Ok(()),
            // The creating process has not committed its first transaction yet.
            None => Err(StoreError::BeingCreated {
                path: self.path.clone(),
            }),
            Some(found) => Err(StoreError::UnknownFormat {
                path: self.path.clone(),
                found,
                expected: FORMAT_DELTAS,
            }),
        }
    }

    /// The workspace root recorded when the store was created.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn workspace(&self) -> Result<Option<PathBuf>, StoreError> {
        Ok(self.meta_value(META_WORKSPACE)?.map(|b| {
            use std::os::unix::ffi::OsStringExt;
            PathBuf::from(std::ffi::OsString::from_vec(b))
        }))
    }

    /// The store's random id (see [`schema::META_STORE_ID`]).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn store_id(&self) -> Result<[u8; 16], StoreError> {
        Ok(self
            .meta_value(META_STORE_ID)?
            .and_then(|v| <[u8; 16]>::try_from(v.as_slice()).ok())
            .unwrap_or([0; 16]))
    }

    /// The root id of the workspace's last known state.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn last_known(&self) -> Result<Option<ObjectId>, StoreError> {
        Ok(self
            .meta_value(META_LAST_KNOWN)?
            .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok().map(ObjectId)))
    }

    /// Whether the object is present.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn contains(&self, id: &ObjectId) -> Result<bool, StoreError> {
        let Some(t) = &self.objects else {
            return Ok(false);
        };
        Ok(t.get(&id.0).map_err(|x| self.db_err(x))?.is_some())
    }

    /// The index record of an object.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`].
    pub fn record(&self, id: &ObjectId) -> Result<ObjectRecord, StoreError> {
        let missing = || StoreError::Missing {
            path: self.path.clone(),
            id: *id,
        };
        let t = self.objects.as_ref().ok_or_else(missing)?;
        let g = t
            .get(&id.0)
            .map_err(|x| self.db_err(x))?
            .ok_or_else(missing)?;
        ObjectRecord::decode(g.value()).map_err(|x| self.damaged(id, x.to_string()))
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

    /// The payload of an object as stored in its frame (unverified; a delta's is its delta
    /// frame), through a small cache of decompressed frames: neighbours in a restore or a
    /// tree walk usually share a frame.
    fn stored_payload(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Vec<u8>, StoreError> {
        self.stored_slice(id, rec, <[u8]>::to_vec)
    }

    /// `f` of the payload as stored, borrowed from its frame.
    fn stored_slice<R>(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StoreError> {
        let start = rec.within as usize;
        // Decompressed only as far as the object: an object near the start of a 1 MiB frame
        // costs a block or two, not the whole frame.
        let frame = self.frame_upto(id, rec, start.saturating_add(rec.len as usize))?;
        frame
            .get(start..start + rec.len as usize)
            .map(f)
            .ok_or_else(|| self.damaged(id, "payload outside its frame".into()))
    }

    /// `f` of the payload of an object (unverified), borrowed from its decompressed frame when
    /// it is stored whole: a restore writes 1 GB of files, which a copy each would double.
    fn with_payload<R>(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StoreError> {
        if rec.delta.is_some() {
            return Ok(f(&self.payload(id, rec)?));
        }
        self.stored_slice(id, rec, f)
    }

    /// The payload of an object (unverified): for a delta, rebuilt from its chain of bases.
    /// Callers verify the result's id; on a mismatch [`StoreReader::chain_damage`] names the
    /// object in the chain that is damaged.
    fn payload(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Vec<u8>, StoreError> {
        if rec.delta.is_none() {
            return self.stored_payload(id, rec);
        }
        if let Some(bytes) = self.rebuilt(id) {
            return Ok(bytes.as_ref().clone());
        }
        let (start, chain) = self.chain(id, rec)?;
        let mut bytes = match start {
            Start::Cached(bytes) => bytes.as_ref().clone(),
            Start::Whole(root, root_rec) => self.stored_payload(&root, &root_rec)?,
        };
        for (step, step_rec) in chain.iter().rev() {
            let delta = self.stored_payload(step, step_rec)?;
            let size = usize::try_from(step_rec.size).unwrap_or(usize::MAX);
            bytes = crate::object::delta::decode(&bytes, &delta, size)
                .map_err(|x| self.damaged(step, x))?;
            self.remember_rebuilt(step, &bytes);
        }
        Ok(bytes)
    }

    /// The deltas from `id` down to the first object stored whole (or rebuilt recently),
    /// newest first, checking that each step can be: bases of the same kind and strictly
    /// smaller depth, so a damaged record can never make a loop.
    fn chain(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
    ) -> Result<(Start, Vec<(ObjectId, ObjectRecord)>), StoreError> {
        let mut chain = vec![(*id, rec.clone())];
        loop {
            let (top, top_rec) = &chain[chain.len() - 1];
            let Some(d) = top_rec.delta else {
                let (root, root_rec) = chain
                    .pop()
                    .ok_or_else(|| self.corrupt(id, "empty chain".into()))?;
                return Ok((Start::Whole(root, root_rec), chain));
            };
            if let Some(bytes) = self.rebuilt(&d.base) {
                return Ok((Start::Cached(bytes), chain));
            }
            let base_rec = match self.record(&d.base) {
                Ok(r) => r,
                // Not damage of the delta itself: it is kept, and reads again once its base
                // is stored again (a capture or `retrace repair` that meets the base's
                // content); a capture that meets the delta's own content stores it whole.
                Err(StoreError::Missing { .. }) => {
                    return Err(self.corrupt(
                        top,
                        format!(
                            "its delta base {} is missing (capture the file again, or run \
                             `retrace repair`)",
                            d.base.to_hex()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            };
            let base_depth = base_rec.delta.map_or(0, |b| b.depth);
            if base_rec.kind != top_rec.kind || base_depth >= d.depth {
                return Err(self.damaged(
                    top,
                    format!("its delta base {} cannot be its base", d.base.to_hex()),
                ));
            }
            chain.push((d.base, base_rec));
        }
    }

    fn rebuilt(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        let cache = self.rebuilt.lock().ok()?;
        cache
            .iter()
            .find(|(o, _)| o == id)
            .map(|(_, b)| Arc::clone(b))
    }

    /// Keeps a rebuilt payload for the next delta against it (versions of one file are
    /// often read in a row: verification, a walk of every snapshot, a capture's base).
    fn remember_rebuilt(&self, id: &ObjectId, bytes: &[u8]) {
        if bytes.len() > REBUILT_MAX_BYTES {
            return;
        }
        if let Ok(mut cache) = self.rebuilt.lock() {
            if cache.iter().any(|(o, _)| o == id) {
                return;
            }
            if cache.len() >= REBUILT_CACHE {
                cache.remove(0);
            }
            cache.push((*id, Arc::new(bytes.to_vec())));
        }
    }

    /// What a new version of object `previous` (of `kind`) can be stored as a delta against,
    /// with that base's payload (verified): `previous` itself, or, when its chain is at
    /// [`MAX_DEPTH`](crate::object::delta::MAX_DEPTH), the object its chain starts from.
    /// `None` when `previous` is not stored, not of `kind`, a chunk list, or damaged (the
    /// damage is recorded, and the new version is stored whole).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn delta_base(
        &self,
        previous: &ObjectId,
        kind: ObjectKind,
    ) -> Result<Option<(crate::object::DeltaBase, Vec<u8>)>, StoreError> {
        let rec = match self.record(previous) {
            Ok(rec) => rec,
            Err(StoreError::Db { path, source }) => return Err(StoreError::Db { path, source }),
            Err(_) => return Ok(None),
        };
        if rec.kind != kind || kind == ObjectKind::ChunkedBlob {
            return Ok(None);
        }
        let (mut base, mut base_rec) = (*previous, rec);
        // A version sharing a big frame with others (a cold capture packs small files into
        // 1 MiB frames) costs that whole frame's decompression to read: about 1.5 ms for a
        // few KB of base, per changed file of every turn. Its next version is stored whole
        // (in the turn's own small frame), and the versions after it are deltas.
        if base_rec.len < base_rec.frame_len && base_rec.frame_len > MAX_SHARED_BASE_FRAME {
            return Ok(None);
        }
        if base_rec
            .delta
            .is_some_and(|d| d.depth >= crate::object::delta::MAX_DEPTH)
        {
            // Re-base on the chain's root: depth 1 again, and reads stay bounded.
            while let Some(d) = base_rec.delta {
                match self.record(&d.base) {
                    Ok(r) if r.delta.map_or(0, |b| b.depth) < d.depth => {
                        (base, base_rec) = (d.base, r);
                    }
                    _ => return Ok(None),
                }
            }
        }
        let Ok(bytes) = self.payload(&base, &base_rec) else {
            return Ok(None);
        };
        if !hashes_to(kind, &bytes, &base) {
            let _ = self.content_damage(&base, &base_rec, "content does not hash to its id".into());
            return Ok(None);
        }
        let depth = base_rec.delta.map_or(0, |d| d.depth) + 1;
        Ok(Some((crate::object::DeltaBase { base, depth }, bytes)))
    }

    /// The error for object `id` whose payload does not hash to it: the object is damaged,
    /// or (a delta) the object of its chain that [`StoreReader::chain_damage`] finds.
    fn content_damage(&self, id: &ObjectId, rec: &ObjectRecord, detail: String) -> StoreError {
        if rec.delta.is_none() {
            return self.damaged(id, detail);
        }
        match self.chain_damage(id, rec) {
            Some(bad) if bad != *id => self.corrupt(
                id,
                format!("{detail}: its delta base {} is damaged", bad.to_hex()),
            ),
            Some(_) => self.corrupt(id, detail),
            None => self.damaged(id, detail),
        }
    }

    /// After a delta object failed verification: walks its chain from the whole root up,
    /// verifying each step, and records the first that does not hash to its id as damaged
    /// (everything above it depends on it and is forgotten with it). Returns that object.
    fn chain_damage(&self, id: &ObjectId, rec: &ObjectRecord) -> Option<ObjectId> {
        if let Ok(mut cache) = self.rebuilt.lock() {
            cache.clear();
        }
        let Ok((Start::Whole(root, root_rec), chain)) = self.chain(id, rec) else {
            return None;
        };
        let mut bytes = self.stored_payload(&root, &root_rec).ok()?;
        if !hashes_to(root_rec.kind, &bytes, &root) {
            let _ = self.damaged(&root, "content does not hash to its id".into());
            return Some(root);
        }
        for (step, step_rec) in chain.iter().rev() {
            let size = usize::try_from(step_rec.size).unwrap_or(usize::MAX);
            let next = self
                .stored_payload(step, step_rec)
                .ok()
                .and_then(|delta| crate::object::delta::decode(&bytes, &delta, size).ok());
            match next {
                Some(b) if hashes_to(step_rec.kind, &b, step) => bytes = b,
                _ => {
                    let _ = self.damaged(step, "delta does not rebuild its content".into());
                    return Some(*step);
                }
            }
        }
        None
    }

    fn frame(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Arc<Vec<u8>>, StoreError> {
        self.frame_upto(id, rec, rec.frame_len as usize)
    }

    /// The frame holding `id` (record `rec`), decompressed at least up to byte `end`
    /// ([`decompress_prefix`]; the whole frame, length checked, when `end` reaches its
    /// length). The cache keeps the longest prefix of each frame read.
    fn frame_upto(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        end: usize,
    ) -> Result<Arc<Vec<u8>>, StoreError> {
        let whole = rec.frame_len as usize;
        let mut end = end;
        if let Ok(cache) = self.frames.lock() {
            match cache.iter().find(|(o, _)| *o == rec.offset) {
                Some((_, f)) if f.len() >= end.min(whole) => return Ok(Arc::clone(f)),
                // A shorter prefix was read: this frame is being read on (a restore writes a
                // frame's objects in the order they lie), so all of it now, not prefix after
                // growing prefix from its start.
                Some(_) => end = whole,
                None => {}
            }
        }
        let packs = self
            .packs
            .as_ref()
            .ok_or_else(|| self.damaged(id, "no pack log".into()))?;
        let stored = pack::read(packs, rec.offset, rec.stored_len)
            .map_err(|x| self.db_err(x))?
            .ok_or_else(|| self.damaged(id, "frame outside the pack log".into()))?;
        let frame = Arc::new(
            decompress_prefix(rec.codec, &stored, rec.frame_len, end)
                .map_err(|x| self.damaged(id, x))?,
        );
        self.decompressed[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.decompressed[1].fetch_add(frame.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut cache) = self.frames.lock() {
            // A shorter prefix of the same frame gives way to this one.
            cache.retain(|(o, f)| *o != rec.offset || f.len() > frame.len());
            if cache.iter().all(|(o, _)| *o != rec.offset) {
                if cache.len() >= FRAME_CACHE {
                    cache.remove(0);
                }
                cache.push((rec.offset, Arc::clone(&frame)));
            }
        }
        Ok(frame)
    }

    /// How many frames this reader decompressed so far, and their bytes (a frame read again
    /// after it left the reader's small cache counts again).
    #[must_use]
    pub fn frames_decompressed(&self) -> (u64, u64) {
        let n = |i: usize| self.decompressed[i].load(std::sync::atomic::Ordering::Relaxed);
        (n(0), n(1))
    }

    /// The payload of an object as stored (unverified: the collector moves bytes it does not
    /// interpret, deltas as deltas; readers verify on use).
    pub(crate) fn payload_of(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
    ) -> Result<Vec<u8>, StoreError> {
        self.stored_payload(id, rec)
    }

    /// The verified content of a blob or chunked blob.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`] (the bytes do not hash to `id`).
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let rec = self.record(id)?;
        // Only a hint: a corrupt size must not make us allocate it.
        let mut out = Vec::with_capacity(usize::try_from(rec.size).unwrap_or(0).min(64 << 20));
        self.blob_into(id, &rec, &mut out)
            .map_err(|e| e.unwrap_or_else(|io| self.corrupt(id, io.to_string())))?;
        Ok(out)
    }

    /// Streams the content of a blob or chunked blob into `out`, chunk by chunk, so a big
    /// file never sits whole in memory. The content is verified as it streams; on
    /// [`StoreError::Corrupt`] `out` has received unverified bytes and must be discarded
    /// (restore writes to a temp file and renames only on success).
    ///
    /// # Errors
    /// The outer error is the store's (missing, corrupt); the inner one, a failure to write
    /// to `out`.
    pub fn read_blob_into(
        &self,
        id: &ObjectId,
        out: &mut dyn std::io::Write,
    ) -> Result<Result<(), std::io::Error>, StoreError> {
        let rec = self.record(id)?;
        match self.blob_into(id, &rec, out) {
            Ok(()) => Ok(Ok(())),
            Err(Ok(store)) => Err(store),
            Err(Err(io)) => Ok(Err(io)),
        }
    }

    /// The shared body of [`StoreReader::read_blob`] and [`StoreReader::read_blob_into`]:
    /// `Err(Ok(_))` is a store fault, `Err(Err(_))` a failure of `out`.
    fn blob_into(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        out: &mut dyn std::io::Write,
    ) -> Result<(), Result<StoreError, std::io::Error>> {
        let mut hasher = blake3::Hasher::new();
        let mut chunks = None;
        let mut emit = |bytes: &[u8]| {
            hasher.update(bytes);
            out.write_all(bytes).map_err(Err)
        };
        match rec.kind {
            ObjectKind::Blob => self.with_payload(id, rec, &mut emit).map_err(Ok)??,
            ObjectKind::ChunkedBlob => {
                let list = ChunkList::decode(&self.payload(id, rec).map_err(Ok)?)
                    .map_err(|x| Ok(self.damaged(id, x.to_string())))?;
                for (chunk, _) in &list.chunks {
                    let crec = self.record(chunk).map_err(Ok)?;
                    if crec.kind != ObjectKind::Blob {
                        return Err(Ok(self.damaged(id, "chunk is not a blob".into())));
                    }
                    self.with_payload(chunk, &crec, &mut emit).map_err(Ok)??;
                }
                chunks = Some(list);
            }
            ObjectKind::Tree => {
                return Err(Ok(self.corrupt(id, "expected a blob, found a tree".into())));
            }
        }
        if ObjectId(*hasher.finalize().as_bytes()) != *id {
            // Forget what is damaged: the chunks that do not hash to their ids, else the
            // chunk list (or the blob, or the object of its delta chain that is) itself.
            let bad_chunks = chunks.map_or(0, |list| self.damaged_chunks(&list));
            let detail = "content does not hash to its id".to_string();
            if bad_chunks > 0 {
                return Err(Ok(
                    self.corrupt(id, format!("{detail}: {bad_chunks} chunk(s) damaged"))
                ));
            }
            return Err(Ok(self.content_damage(id, rec, detail)));
        }
        Ok(())
    }

    /// The chunk list of a chunked blob (for verification and stats).
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`].
    pub fn chunk_list(&self, id: &ObjectId) -> Result<ChunkList, StoreError> {
        let rec = self.record(id)?;
        if rec.kind != ObjectKind::ChunkedBlob {
            return Err(self.corrupt(id, "not a chunked blob".into()));
        }
        ChunkList::decode(&self.payload(id, &rec)?).map_err(|x| self.damaged(id, x.to_string()))
    }

    /// A verified, validated tree.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`] (bad id, hostile names, bad order).
    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        let rec = self.record(id)?;
        if rec.kind != ObjectKind::Tree {
            return Err(self.corrupt(id, "expected a tree".into()));
        }
        let bytes = self.payload(id, &rec)?;
        if ObjectId::of_tree(&bytes) != *id {
            return Err(self.content_damage(id, &rec, "tree does not hash to its id".into()));
        }
        Tree::decode(&bytes).map_err(|x| self.corrupt(id, x.to_string()))
    }

    /// Every object id with its record, in id order. Records that do not decode are
    /// returned as errors in place.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn objects(&self) -> Result<Vec<ObjectListing>, StoreError> {
        let Some(t) = &self.objects else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (k, v) = item.map_err(|x| self.db_err(x))?;
            let id = ObjectId(*k.value());
            out.push((
                id,
                ObjectRecord::decode(v.value()).map_err(|x| self.corrupt(&id, x.to_string())),
            ));
        }
        Ok(out)
    }

    /// Snapshots, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Corrupt`] for a record that does not decode.
    pub fn snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        let Some(t) = &self.snapshots else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (_, v) = item.map_err(|x| self.db_err(x))?;
            let bytes = v.value();
            if bytes.first() != Some(&SNAPSHOT_VERSION) {
                return Err(
                    self.corrupt(&ObjectId::ZERO, "snapshot record of unknown version".into())
                );
            }
            out.push(
                postcard::from_bytes(bytes)
                    .map_err(|x| self.corrupt(&ObjectId::ZERO, format!("snapshot record: {x}")))?,
            );
        }
        Ok(out)
    }

    /// Resolves a snapshot id given in full or by a unique prefix of at least 8 hex digits.
    ///
    /// # Errors
    /// [`StoreError::BadSnapshotId`] when it matches nothing or several snapshots.
    pub fn resolve(&self, prefix: &str) -> Result<ObjectId, StoreError> {
        let p = prefix.to_ascii_lowercase();
        if p.len() < 8 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::BadSnapshotId(format!(
                "{prefix:?} is not a snapshot id: give at least 8 hex digits (see `retrace log`)"
            )));
        }
        let mut found: Vec<ObjectId> = Vec::new();
        for s in self.snapshots()? {
            if s.root.to_hex().starts_with(&p) && !found.contains(&s.root) {
                found.push(s.root);
            }
        }
        if let Some(full) = ObjectId::from_hex(&p)
            && found.is_empty()
            && self.contains(&full)?
        {
            return Ok(full);
        }
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(StoreError::BadSnapshotId(format!(
                "no snapshot starts with {prefix}; see `retrace log`"
            ))),
            _ => Err(StoreError::BadSnapshotId(format!(
                "{prefix} matches {} snapshots; give more digits",
                found.len()
            ))),
        }
    }

    /// Number of snapshots recorded.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn snapshot_count(&self) -> Result<u64, StoreError> {
        match &self.snapshots {
            Some(t) => t.len().map_err(|x| self.db_err(x)),
            None => Ok(0),
        }
    }

    /// Number of objects indexed.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn object_count(&self) -> Result<u64, StoreError> {
        match &self.objects {
            Some(t) => t.len().map_err(|x| self.db_err(x)),
            None => Ok(0),
        }
    }

    /// Bytes the pack log's values hold now (what a byte budget counts: compressed objects,
    /// independent of whether the file has been compacted yet).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn packed_bytes(&self) -> Result<u64, StoreError> {
        match &self.packs {
            Some(t) => Ok(t.len().map_err(|x| self.db_err(x))? * schema::PACK_BYTES),
            None => Ok(0),
        }
    }

    /// Unix milliseconds of the last maintenance pass (0: never).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn maintained_ms(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(schema::META_MAINTAINED)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }

    /// The warnings background maintenance left for the next command to print (see
    /// [`Store::defer_warnings`]), oldest first.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn deferred_warnings(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .meta_value(schema::META_WARNINGS)?
            .map(|v| warning_lines(&v))
            .unwrap_or_default())
    }

    /// Packed bytes the last maintenance pass could not go below without evicting what is
    /// never evicted (0: it met the byte budget, or there is none).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn over_budget(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(schema::META_OVER_BUDGET)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }

    /// Length of the pack log in bytes.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn log_end(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(META_LOG_END)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }

    /// Object and byte counts.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut s = StoreStats::default();
        let mut frames = std::collections::HashSet::new();
        for (_, rec) in self.objects()? {
            let Ok(rec) = rec else { continue };
            if frames.insert(rec.offset) {
                s.frame_bytes += u64::from(rec.stored_len);
            }
            match rec.delta {
                Some(d) => {
                    s.deltas += 1;
                    *s.depths.entry(d.depth).or_default() += 1;
                    s.delta_saved_bytes += rec.size.saturating_sub(u64::from(rec.len));
                }
                None => s.whole += 1,
            }
            match rec.kind {
                ObjectKind::Blob => {
                    s.blobs += 1;
                    s.logical_bytes += rec.size;
                }
                ObjectKind::ChunkedBlob => s.chunked += 1,
                ObjectKind::Tree => s.trees += 1,
            }
            s.payload_bytes += u64::from(rec.len);
        }
        s.log_bytes = self.log_end()?;
        s.packed_bytes = self.packed_bytes()?;
        s.file_bytes = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        s.disk_bytes = disk_bytes(&self.path);
        s.snapshots = self.snapshot_count()?;
        Ok(s)
    }
}

impl StoreReader {
    /// What each table of the store takes (see [`TableBytes`]).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn table_bytes(&self) -> Result<Vec<TableBytes>, StoreError> {
        use redb::TableHandle;
        fn one<K: redb::Key + 'static>(
            tx: &ReadTransaction,
            def: redb::TableDefinition<K, &'static [u8]>,
        ) -> Result<Option<TableBytes>, redb::Error> {
            let Some(t) = open_opt(tx, def)? else {
                return Ok(None);
            };
            let st = t.stats()?;
            Ok(Some(TableBytes {
                table: def.name().to_string(),
                entries: t.len()?,
                stored: st.stored_bytes(),
                metadata: st.metadata_bytes(),
                fragmented: st.fragmented_bytes(),
            }))
        }
        let tx = &self.tx;
        let all = [
            one(tx, META),
            one(tx, OBJECTS),
            one(tx, PACKS),
            one(tx, SNAPSHOTS),
            one(tx, SESSIONS),
            one(tx, TURNS),
            one(tx, CHECKPOINTS),
            one(tx, OPLOG),
            one(tx, schema::SESSION_NAMES),
            one(tx, schema::LEASES),
            one(tx, schema::REVERTS),
            one(tx, schema::STEPS),
            one(tx, schema::LEDGER),
            one(tx, schema::JOURNAL),
            one(tx, schema::STAGED),
        ];
        let mut out = Vec::new();
        for t in all {
            out.extend(t.map_err(|x| self.db_err(x))?);
        }
        Ok(out)
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
