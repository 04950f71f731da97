//! Writing to the store: write transactions (waiting their turn across processes), and
//! frames of new objects appended and indexed together with a snapshot record.

use std::thread;
use std::time::{Duration, Instant};

use redb::{ReadableTable, TransactionError, WriteTransaction};

use super::schema::{
    FORMAT_DELTAS, META, META_FORMAT, META_LAST_KNOWN, OBJECTS, PACKS, SNAPSHOT_ADDED, SNAPSHOTS,
};
use super::{LOCK_WAIT, SnapshotRecord, Store, WriteStats, WriteTx};
use crate::error::StoreError;
use crate::object::{NewFrame, ObjectId, ObjectRecord};

/// Whether `objects` holds a record for `id` that can be read: stored whole, or a delta whose
/// chain of bases is indexed (an object whose base was forgotten is written again).
pub(super) fn readable_in(
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

/// Records in `meta` that the store holds delta objects (format [`FORMAT_DELTAS`], or
/// higher when it already says so).
pub(super) fn mark_deltas(meta: &mut redb::Table<'_, &str, &[u8]>) -> Result<(), redb::StorageError> {
    raise_format(meta, FORMAT_DELTAS)
}

/// Sets `meta.format` to `to` unless it is that or higher already: a format only rises, so
/// that a retrace reading only the older ones refuses the store instead of misreading it.
pub(super) fn raise_format(
    meta: &mut redb::Table<'_, &str, &[u8]>,
    to: u32,
) -> Result<(), redb::StorageError> {
    let format = meta
        .get(META_FORMAT)?
        .and_then(|g| g.value().try_into().ok().map(u32::from_le_bytes));
    if format.is_none_or(|f| f < to) {
        meta.insert(META_FORMAT, to.to_le_bytes().as_slice())?;
    }
    Ok(())
}

impl Store {
    /// Begins a write transaction, waiting up to [`LOCK_WAIT`] for other writers.
    pub(super) fn begin_write(&self) -> Result<WriteTransaction, StoreError> {
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
        self.write_with(frames, snapshot, last_known, WriteStats::default(), |_| Ok(()))
    }

    /// [`Store::write`], running `also` in the same transaction (journal and history
    /// records), so everything commits together with one sync. `earlier` is what the same
    /// operation stored in transactions before this one (a capture's flushed batches): a
    /// snapshot row it adds records those bytes and this write's as what it added
    /// ([`schema::SNAPSHOT_ADDED`](super::schema::SNAPSHOT_ADDED)).
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
        earlier: WriteStats,
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
                    let added = earlier.stored_bytes + stats.stored_bytes;
                    tx.open_table(SNAPSHOT_ADDED)
                        .map_err(|x| e(x.into()))?
                        .insert(next, added.to_le_bytes().as_slice())
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
