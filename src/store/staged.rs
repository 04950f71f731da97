//! Staged objects: a cold capture appends its frames to the pack log batch by batch, but
//! indexes their objects only now and then, in a few large sorted passes.
//!
//! A batch of random ids touches nearly every leaf of the `objects` B-tree, so indexing
//! every batch of a million-file capture rewrote the whole index 25 times (2.5 GB written
//! for a 400 MB store). A staged batch instead writes its records as one `staged` row,
//! which costs what the records weigh. Staged objects are in no index, so no other process
//! finds them, and nothing names them before the capture's snapshot, whose commit indexes
//! every row the capture staged and deletes the rows. A capture that dies leaves rows
//! naming objects nothing refers to: pack rewrites keep their bytes (a concurrent capture
//! may still index its own rows), and collection, which runs with no capture at all,
//! deletes the rows so the bytes are freed.

use std::collections::HashSet;

use redb::{ReadableTable, ReadableTableMetadata, Table, WriteTransaction};

use super::schema::{META, OBJECTS, PACK_BYTES, PACKS, STAGED};
use super::write::readable_in;
use super::{Store, WriteStats, WriteTx};
use crate::error::StoreError;
use crate::object::{ObjectId, ObjectRecord};

/// What one capture staged: per `staged` row, its number and the sorted ids it holds.
#[derive(Debug, Default)]
pub struct Staged {
    rows: Vec<(u64, Vec<ObjectId>)>,
    objects: usize,
}

impl Staged {
    /// Whether the capture staged `id`.
    #[must_use]
    pub fn contains(&self, id: &ObjectId) -> bool {
        self.rows
            .iter()
            .any(|(_, ids)| ids.binary_search(id).is_ok())
    }

    /// Objects staged and not indexed yet.
    #[must_use]
    pub fn len(&self) -> usize {
        self.objects
    }

    /// Nothing is staged.
    #[cfg_attr(not(test), allow(dead_code))] // beside `len`; the tests ask
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// The row numbers, for [`Store::stage`] and [`WriteTx::index_staged`].
    #[must_use]
    pub fn rows(&self) -> Vec<u64> {
        self.rows.iter().map(|(n, _)| *n).collect()
    }

    /// Adds a row [`Store::stage`] wrote.
    pub fn add(&mut self, row: StagedRow) {
        self.objects += row.ids.len();
        self.rows.push((row.number, row.ids));
    }

    /// Lets go of the rows numbered `indexed` once their objects are indexed.
    pub fn indexed(&mut self, indexed: &[u64]) {
        self.rows.retain(|(n, _)| !indexed.contains(n));
        self.objects = self.rows.iter().map(|(_, ids)| ids.len()).sum();
    }
}

/// One `staged` row written by [`Store::stage`]: its number and its sorted ids.
#[derive(Debug)]
pub struct StagedRow {
    number: u64,
    ids: Vec<ObjectId>,
}

impl Store {
    /// Appends `frames` to the pack log in one durable transaction. With `index` false,
    /// their objects' records go in one new `staged` row, returned; with `index` true, they
    /// are indexed, together with the staged rows numbered `rows`, which are deleted.
    ///
    /// # Errors
    /// As [`Store::write`]; nothing is committed then.
    #[allow(clippy::needless_pass_by_value)] // takes the batch: it is dropped once written
    #[track_caller]
    pub fn stage(
        &self,
        frames: Vec<crate::object::NewFrame>,
        rows: &[u64],
        index: bool,
    ) -> Result<(Option<StagedRow>, WriteStats), StoreError> {
        crate::trace::commit(std::panic::Location::caller());
        let e = self.db_err();
        self.check_space(&frames)?;
        let tx = self.begin_write()?;
        let (row, stats) = {
            let mut meta = tx.open_table(META).map_err(|x| e(x.into()))?;
            let mut objects = tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
            let mut packs = tx.open_table(PACKS).map_err(|x| e(x.into()))?;
            // Not asked here whether the index holds them already: the capture's own
            // lookups found them new, and a batch's lookups read every index leaf. Should
            // another process have stored one meanwhile, indexing keeps that record
            // (`insert_sorted`), and this copy's bytes wait for GC.
            let (records, stats) =
                self.append_frames(&mut meta, &objects, &mut packs, &frames, false)?;
            drop(frames);
            let encoded = encode(&self.path, &records)?;
            let mut staged = tx.open_table(STAGED).map_err(|x| e(x.into()))?;
            if index {
                let mut all = take_rows(&mut staged, rows, &self.path)?;
                all.push(encoded);
                insert_sorted(&mut objects, &all, &self.path)?;
                (None, stats)
            } else if records.is_empty() {
                (None, stats)
            } else {
                let number = staged
                    .last()
                    .map_err(|x| e(x.into()))?
                    .map_or(0, |(k, _)| k.value() + 1);
                staged
                    .insert(number, encoded.as_slice())
                    .map_err(|x| e(x.into()))?;
                let ids = records.into_iter().map(|(id, _)| id).collect();
                (Some(StagedRow { number, ids }), stats)
            }
        };
        tx.commit().map_err(|x| e(x.into()))?;
        Ok((row, stats))
    }
}

impl super::StoreReader {
    /// Number of `staged` rows (at rest, with no capture running: leftovers).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub(super) fn staged_rows(&self) -> Result<u64, StoreError> {
        match self.tx.open_table(STAGED) {
            Ok(t) => t.len().map_err(|x| self.db_err(x)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(x) => Err(self.db_err(x)),
        }
    }

    /// What the `staged` rows hold: their objects, and the stored bytes of the frames under
    /// them (each frame once). At rest, with no capture running, the leftovers of captures
    /// that died (interrupted, killed), which collection frees.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub(super) fn staged_leftovers(&self) -> Result<(u64, u64), StoreError> {
        let t = match self.tx.open_table(STAGED) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok((0, 0)),
            Err(x) => return Err(self.db_err(x)),
        };
        let (mut objects, mut bytes) = (0, 0);
        let mut frames = HashSet::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (_, v) = item.map_err(|x| self.db_err(x))?;
            for (_, rec) in decode_staged_row(v.value()).unwrap_or_default() {
                objects += 1;
                if let Ok(rec) = ObjectRecord::decode(rec)
                    && frames.insert(rec.offset)
                {
                    bytes += u64::from(rec.stored_len);
                }
            }
        }
        Ok((objects, bytes))
    }
}

impl WriteTx<'_> {
    /// Indexes the objects of the staged rows numbered `rows` and deletes the rows, in this
    /// transaction (a capture's final commit).
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Corrupt`] for a row that does not decode.
    pub fn index_staged(&self, rows: &[u64]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let e = super::tx::db_error(self.path);
        let mut staged = self.tx.open_table(STAGED).map_err(|x| e(x.into()))?;
        let mut objects = self.tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
        let all = take_rows(&mut staged, rows, self.path)?;
        insert_sorted(&mut objects, &all, self.path)
    }
}

/// One row's value: each record as id, length (u16 LE), postcard bytes.
fn encode(
    path: &std::path::Path,
    records: &[(ObjectId, ObjectRecord)],
) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(records.len() * 64);
    for (id, rec) in records {
        let bytes = rec.encode().map_err(|detail| StoreError::Encode {
            path: path.into(),
            detail,
        })?;
        let len = u16::try_from(bytes.len()).map_err(|_| StoreError::Encode {
            path: path.into(),
            detail: format!("record of {} over 64 KiB", id.to_hex()),
        })?;
        out.extend_from_slice(&id.0);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// Removes the rows numbered `rows`, returning their values. A row that is not there fails:
/// its objects would be named by a snapshot and found nowhere.
fn take_rows(
    staged: &mut Table<u64, &[u8]>,
    rows: &[u64],
    path: &std::path::Path,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let e = super::tx::db_error(path);
    let mut out = Vec::with_capacity(rows.len());
    for &n in rows {
        let value = staged.remove(n).map_err(|x| e(x.into()))?;
        let Some(value) = value else {
            return Err(StoreError::Corrupt {
                path: path.into(),
                id: ObjectId::ZERO,
                detail: format!("staged row {n} of this capture vanished; capture again"),
            });
        };
        out.push(value.value().to_vec());
    }
    Ok(out)
}

/// Inserts the records of `values` (rows, each sorted) into the index in one id-ordered
/// merge, so each leaf page is written once. An id the index already holds readably keeps
/// its record (another process stored it meanwhile, and later deltas may be based on that
/// record's depth); a delta whose base is no longer readable fails the write, as
/// [`Store::append_frames`] does.
fn insert_sorted(
    objects: &mut Table<&[u8; 32], &[u8]>,
    values: &[Vec<u8>],
    path: &std::path::Path,
) -> Result<(), StoreError> {
    let e = super::tx::db_error(path);
    let bad = || StoreError::Corrupt {
        path: path.into(),
        id: ObjectId::ZERO,
        detail: "a staged row does not decode; `retrace gc` drops it".into(),
    };
    let mut heads: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    loop {
        heads.retain(|h| !h.is_empty());
        let Some((at, _)) = heads
            .iter()
            .enumerate()
            .min_by_key(|(_, h)| h.first_chunk::<32>())
        else {
            return Ok(());
        };
        let (id, rec, rest) = next_record(heads[at]).ok_or_else(bad)?;
        heads[at] = rest;
        if readable_in(objects, &id).map_err(&e)? {
            continue;
        }
        if let Some(d) = ObjectRecord::decode(rec).map_err(|_| bad())?.delta
            && !readable_in(objects, &d.base).map_err(&e)?
        {
            return Err(StoreError::Corrupt {
                path: path.into(),
                id,
                detail: format!(
                    "its delta base {} was forgotten while it was written; capture again",
                    d.base.to_hex()
                ),
            });
        }
        objects.insert(&id.0, rec).map_err(|x| e(x.into()))?;
    }
}

/// The records of a `staged` row's value, in order: (id, postcard `ObjectRecord` bytes);
/// `None` when the value is malformed (docs/format.md, "redb tables").
#[must_use]
pub fn decode_staged_row(value: &[u8]) -> Option<Vec<(ObjectId, &[u8])>> {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let (id, rec, after) = next_record(rest)?;
        out.push((id, rec));
        rest = after;
    }
    Some(out)
}

/// The first record of a row's value (id, record bytes) and the rest; `None` when the
/// value is malformed.
fn next_record(value: &[u8]) -> Option<(ObjectId, &[u8], &[u8])> {
    let (id, after) = value.split_first_chunk::<32>()?;
    let (len, after) = after.split_first_chunk::<2>()?;
    let (rec, rest) = after.split_at_checked(usize::from(u16::from_le_bytes(*len)))?;
    Some((ObjectId(*id), rec, rest))
}

/// The pack numbers under staged objects (a pack rewrite keeps them).
pub(super) fn staged_packs(
    tx: &WriteTransaction,
    path: &std::path::Path,
) -> Result<HashSet<u64>, StoreError> {
    let e = super::tx::db_error(path);
    let staged = tx.open_table(STAGED).map_err(|x| e(x.into()))?;
    let mut packs = HashSet::new();
    for item in staged.iter().map_err(|x| e(x.into()))? {
        let (_, v) = item.map_err(|x| e(x.into()))?;
        for (_, rec) in decode_staged_row(v.value()).unwrap_or_default() {
            if let Ok(rec) = ObjectRecord::decode(rec) {
                let last = rec.offset + u64::from(rec.stored_len).max(1) - 1;
                packs.extend(rec.offset / PACK_BYTES..=last / PACK_BYTES);
            }
        }
    }
    Ok(packs)
}

/// Deletes every staged row: with no capture running (collection), they are leftovers of
/// captures that died, naming objects nothing refers to.
pub(super) fn drop_staged(tx: &WriteTransaction, path: &std::path::Path) -> Result<(), StoreError> {
    let e = super::tx::db_error(path);
    let mut staged = tx.open_table(STAGED).map_err(|x| e(x.into()))?;
    staged.retain(|_, _| false).map_err(|x| e(x.into()))
}

#[cfg(test)]
#[path = "staged_tests.rs"]
mod tests;
