//! The pack log: object payloads appended end to end into one logical byte stream, cut into
//! fixed-size `packs` values so that redb pads nothing (see [`super::schema::PACK_BYTES`]).

use std::collections::HashSet;

use redb::{ReadableTable, Table};

use super::schema::{META_LOG_END, PACK_BYTES};
use super::write::{mark_deltas, readable_in};
use super::{Store, WriteStats, now_secs};
use crate::error::StoreError;
use crate::object::{NewFrame, ObjectId, ObjectRecord};

/// Appends `payload` at `log_end`, rewriting the partial tail pack. Returns the payload's
/// offset. `tail` caches the partial tail pack across calls in one transaction.
pub(crate) fn append(
    packs: &mut Table<u64, &[u8]>,
    log_end: &mut u64,
    tail: &mut Option<Vec<u8>>,
    payload: &[u8],
) -> Result<u64, redb::Error> {
    let offset = *log_end;
    let mut buf = match tail.take() {
        Some(b) => b,
        None if !offset.is_multiple_of(PACK_BYTES) => packs
            .get(offset / PACK_BYTES)?
            .map(|g| g.value().to_vec())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut pack_no = offset / PACK_BYTES;
    let mut rest = payload;
    loop {
        let room = usize::try_from(PACK_BYTES).unwrap_or(usize::MAX) - buf.len();
        let take = room.min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if buf.len() as u64 == PACK_BYTES {
            packs.insert(pack_no, buf.as_slice())?;
            buf.clear();
            pack_no += 1;
        }
        if rest.is_empty() {
            break;
        }
    }
    *log_end = offset + payload.len() as u64;
    *tail = Some(buf);
    Ok(offset)
}

/// The length of the pack log (`meta.log_end`; 0 in a new store).
pub(crate) fn log_end(meta: &Table<&str, &[u8]>) -> Result<u64, redb::StorageError> {
    Ok(meta
        .get(META_LOG_END)?
        .and_then(|g| g.value().try_into().ok().map(u64::from_le_bytes))
        .unwrap_or(0))
}

/// Writes the cached partial tail pack, if any.
pub(crate) fn flush_tail(
    packs: &mut Table<u64, &[u8]>,
    log_end: u64,
    tail: Option<Vec<u8>>,
) -> Result<(), redb::Error> {
    if let Some(buf) = tail
        && !buf.is_empty()
    {
        packs.insert(log_end / PACK_BYTES, buf.as_slice())?;
    }
    Ok(())
}

/// Reads `len` bytes at `offset`. `None` when a pack is missing or too short (corruption).
pub(crate) fn read(
    packs: &impl ReadableTable<u64, &'static [u8]>,
    offset: u64,
    len: u32,
) -> Result<Option<Vec<u8>>, redb::Error> {
    let mut out = Vec::with_capacity(len as usize);
    let end = offset + u64::from(len);
    let mut pos = offset;
    while pos < end {
        let pack_no = pos / PACK_BYTES;
        let Some(guard) = packs.get(pack_no)? else {
            return Ok(None);
        };
        let data = guard.value();
        let start = usize::try_from(pos % PACK_BYTES).unwrap_or(usize::MAX);
        let want = usize::try_from((end - pos).min(PACK_BYTES - pos % PACK_BYTES)).unwrap_or(0);
        let Some(slice) = data.get(start..start + want) else {
            return Ok(None);
        };
        out.extend_from_slice(slice);
        pos += want as u64;
    }
    Ok(Some(out))
}

impl Store {
    /// Appends `frames` to the pack log in the open transaction (moving `log_end` on), and
    /// returns the records of their objects, sorted by id, with what was added. Repeats
    /// within `frames` get no record, nor (with `skip_held`) objects the index already holds
    /// readably (another process wrote them since the capture looked); a frame with none is
    /// not appended.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::Corrupt`] for a frame over 4 GiB or a delta whose
    /// base the index no longer holds (it was forgotten meanwhile: capture again).
    pub(super) fn append_frames(
        &self,
        meta: &mut Table<&str, &[u8]>,
        index: &Table<&[u8; 32], &[u8]>,
        packs: &mut Table<u64, &[u8]>,
        frames: &[NewFrame],
        skip_held: bool,
    ) -> Result<(Vec<(ObjectId, ObjectRecord)>, WriteStats), StoreError> {
        let e = self.db_err();
        let mut stats = WriteStats::default();
        let mut log_end = log_end(meta).map_err(|x| e(x.into()))?;
        let mut tail = None;
        let written = now_secs();
        // What the store already holds readably, asked in key order: a batch's ids are
        // random, and sorted lookups find their pages in the cache the one before filled.
        let mut ids: Vec<ObjectId> = frames
            .iter()
            .flat_map(|f| f.members.iter().map(|m| m.id))
            .filter(|_| skip_held)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        // An object another member of this batch is a delta against is written whatever
        // the index holds: the delta's depth was counted from this copy, and another
        // process may have stored the same content meanwhile as a delta of its own (whose
        // depth would break the chain's descending order).
        let bases: HashSet<ObjectId> = frames
            .iter()
            .flat_map(|f| f.members.iter().filter_map(|m| m.delta.map(|d| d.base)))
            .collect();
        let mut held = HashSet::new();
        for id in ids {
            if !bases.contains(&id) && readable_in(index, &id).map_err(&e)? {
                held.insert(id);
            }
        }
        let mut records: Vec<(ObjectId, ObjectRecord)> = Vec::new();
        let mut seen = HashSet::new();
        for f in frames {
            let mut fresh = Vec::new();
            for m in &f.members {
                if held.contains(&m.id) || !seen.insert(m.id) {
                    continue;
                }
                fresh.push(m);
            }
            if fresh.is_empty() {
                continue;
            }
            let stored_len = u32::try_from(f.stored.len()).map_err(|_| StoreError::Corrupt {
                path: self.path.clone(),
                id: fresh[0].id,
                detail: "frame over 4 GiB".into(),
            })?;
            let offset = append(packs, &mut log_end, &mut tail, &f.stored).map_err(&e)?;
            for m in fresh {
                records.push((m.id, f.record(m, offset, stored_len, written)));
            }
            stats.stored_bytes += u64::from(stored_len);
        }
        // Sorted keys insert about twice as fast into redb's B-tree.
        records.sort_unstable_by_key(|r| r.0);
        if records.iter().any(|(_, r)| r.delta.is_some()) {
            // A base forgotten (found damaged by another process) since the capture chose
            // it would leave the new delta unreadable: fail the capture instead, and the
            // next one stores the file whole (forgetting reset the stat cache).
            for (id, r) in &records {
                let Some(d) = r.delta else { continue };
                let present = seen.contains(&d.base)
                    || index.get(&d.base.0).map_err(|x| e(x.into()))?.is_some();
                if !present {
                    return Err(StoreError::Corrupt {
                        path: self.path.clone(),
                        id: *id,
                        detail: format!(
                            "its delta base {} was forgotten while it was written; capture again",
                            d.base.to_hex()
                        ),
                    });
                }
            }
            mark_deltas(meta).map_err(|x| e(x.into()))?;
        }
        stats.objects = records.len() as u64;
        flush_tail(packs, log_end, tail).map_err(&e)?;
        meta.insert(META_LOG_END, log_end.to_le_bytes().as_slice())
            .map_err(|x| e(x.into()))?;
        Ok((records, stats))
    }
}
