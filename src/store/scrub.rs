//! Scrubbing parity frames: finding those that read back only thanks to their parity shard
//! (one damaged shard, rebuilt on every read), and writing them again with fresh shards, so
//! that a second damage does not lose them (`retrace-dump verify` reports them, `retrace
//! repair` writes them again).

use std::collections::{BTreeMap, HashMap};

use super::{Store, StoreReader, pack};
use crate::error::StoreError;
use crate::object::parity::{Shards, unprotect};
use crate::object::record::{Codec, DENSE_LEVEL, FrameMember, compress_protected};
use crate::object::{NewFrame, ObjectId, ObjectKind, ObjectRecord};

/// A parity frame with a damaged shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuiltFrame {
    /// Its offset in the pack log.
    pub offset: u64,
    /// The damaged shard (the parity shard is numbered last).
    pub shard: usize,
    /// The objects it holds.
    pub objects: usize,
}

impl StoreReader {
    /// The parity frames (codec `ZstdParity`) one of whose shards is damaged, by offset.
    /// Reads every parity frame's stored bytes (not decompressed); a frame that cannot be
    /// read at all is left to the object checks, which report its objects.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn rebuilt_frames(&self) -> Result<Vec<RebuiltFrame>, StoreError> {
        let mut frames: BTreeMap<u64, (u32, usize)> = BTreeMap::new();
        for (_, rec) in self.objects()? {
            if let Ok(rec) = rec
                && rec.codec == Codec::ZstdParity
            {
                frames.entry(rec.offset).or_insert((rec.stored_len, 0)).1 += 1;
            }
        }
        let Some(packs) = self.packs.as_ref() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (offset, (stored_len, objects)) in frames {
            let Some(stored) = pack::read(packs, offset, stored_len).map_err(|x| self.db_err(x))?
            else {
                continue;
            };
            if let Ok((_, Shards::Rebuilt(shard))) = unprotect(&stored) {
                out.push(RebuiltFrame {
                    offset,
                    shard,
                    objects,
                });
            }
        }
        Ok(out)
    }
}

impl Store {
    /// Writes every parity frame with a damaged shard again: the same objects, rebuilt and
    /// checked against their ids, in a new parity frame; the old frame's packs go when
    /// nothing else needs them. Returns the frames written again. A member whose bytes do
    /// not check is left where it is (the object checks report it).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written.
    pub fn rewrite_rebuilt_frames(&self) -> Result<u64, StoreError> {
        let reader = self.reader()?;
        let rebuilt = reader.rebuilt_frames()?;
        if rebuilt.is_empty() {
            return Ok(0);
        }
        let mut members: HashMap<u64, Vec<(ObjectId, ObjectRecord)>> = HashMap::new();
        for (id, rec) in reader.objects()? {
            if let Ok(rec) = rec
                && rebuilt.iter().any(|r| r.offset == rec.offset)
            {
                members.entry(rec.offset).or_default().push((id, rec));
            }
        }
        let mut frames = Vec::new();
        let mut written = HashMap::new();
        let mut moved_from = HashMap::new();
        for (_, members) in members {
            let (first_id, first) = &members[0];
            let Ok(raw) = reader.frame(first_id, first) else {
                continue;
            };
            let good: Vec<FrameMember> = members
                .iter()
                .filter(|(id, r)| {
                    raw.get(r.within as usize..(r.within + r.len) as usize)
                        .is_some_and(|p| r.delta.is_some() || super::reader::hashes_to(r.kind, p, id))
                })
                .map(|(id, r)| {
                    written.insert(*id, r.written);
                    moved_from.insert(*id, r.offset);
                    FrameMember::same_place(*id, r)
                })
                .collect();
            if good.is_empty() {
                continue;
            }
            // At the level its kind of frame was written at (`parity_groups.rs`).
            let level = if good.iter().any(|m| m.kind == ObjectKind::Tree) {
                DENSE_LEVEL
            } else {
                super::parity_groups::ROOT_LEVEL
            };
            let Some(stored) = compress_protected(&raw, level) else {
                continue;
            };
            frames.push(NewFrame {
                codec: Codec::ZstdParity,
                stored,
                raw_len: first.frame_len,
                members: good,
            });
        }
        drop(reader);
        let n = frames.len() as u64;
        self.rewrite(&[], frames, &written, false, Some(&moved_from))?;
        Ok(n)
    }
}
