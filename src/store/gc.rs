//! Garbage collection: mark every object reachable from the given roots, sweep unreferenced
//! objects older than a grace period, rewrite frames that became mostly dead, move the small
//! surviving frames out of pack values left mostly dead, free the pack log's unreferenced
//! values, then compact the file.
//!
//! The caller (`retention::gc`, under an `Exclusive` guard) holds the workspace lock exclusively, so no capture runs
//! meanwhile: a capture decides "already stored" by looking an object up, and must not see
//! it vanish before it records the snapshot that names it. The grace period additionally
//! keeps objects that a crashed capture wrote but never recorded until they are an hour old.

use std::collections::{HashMap, HashSet};

use redb::{ReadableTable, ReadableTableMetadata};
use serde::Serialize;

use super::schema::{META, META_LOG_END, OBJECTS, PACK_BYTES, PACKS};
use super::{Store, disk_bytes, now_secs, pack};
use crate::error::StoreError;
use crate::object::record::{Codec, FrameMember};
use crate::object::{
    DeltaBase, EntryKind, NewFrame, ObjectId, ObjectKind, ObjectRecord, PendingObject,
};

/// A frame is rewritten when at least this share (percent) of its payload is dead; below it,
/// only the dead records go and their bytes wait for a later collection.
const REWRITE_DEAD_PERCENT: u64 = 25;

/// A pack value whose surviving frames fill less than this share (percent) of it has them
/// moved to the end of the log, so that it goes (thinned local history leaves packs mostly
/// dead whose every frame holds something live).
const SPARSE_PACK_PERCENT: u64 = 50;

/// After recompression or tree regrouping, which leave holes all over the log, a pack
/// whose frames fill less than this share of it has them moved byte for byte (a copy costs
/// no compression, so the bar is higher than a collection's).
const HOLEY_PACK_PERCENT: u64 = 90;

/// Only frames up to this size are moved out of a sparse pack: a bigger one spans packs
/// whose freeing would not pay for moving it.
const MOVABLE_FRAME_BYTES: u64 = PACK_BYTES / 2;

/// What a collection found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GcReport {
    /// Nothing was changed: this is what a collection would do.
    pub dry_run: bool,
    /// Objects in the store before.
    pub objects: u64,
    /// Objects reachable from a root.
    pub reachable: u64,
    /// Unreferenced objects kept because they are younger than the grace period.
    pub young_kept: u64,
    /// Objects removed.
    pub objects_freed: u64,
    /// Frames whose live objects were copied into new frames.
    pub frames_rewritten: u64,
    /// Deltas whose base was not kept, stored whole again or re-based on one of them that
    /// was (the chain below them freed).
    pub materialised: u64,
    /// Compressed bytes of the pack log no longer referenced.
    pub stored_bytes_freed: u64,
    /// Objects an interrupted capture stored and never recorded (`staged` rows at rest),
    /// counted by a dry run: collection frees them, and their bytes are in
    /// `stored_bytes_freed`.
    pub leftover_objects: u64,
    /// In a dry run: the compressed bytes the collection would write again (survivors of
    /// rewritten frames, deltas stored whole or re-based), estimated by compressing each. What
    /// a collection frees is `stored_bytes_freed` less this: a budget pass evicts only when
    /// that is positive.
    pub stored_bytes_added: u64,
    /// Pack values deleted.
    pub packs_freed: u64,
    /// Disk space of the store file before.
    pub disk_bytes_before: u64,
    /// Disk space of the store file after (and after compaction; in a maintenance pass's
    /// report, after the whole pass).
    pub disk_bytes_after: u64,
    /// Whether compaction ran (it needs no reader in any process; in a maintenance pass's
    /// report, the collection's or the pass's own at its end).
    pub compacted: bool,
}

struct Frame {
    stored_len: u32,
    raw_len: u32,
    live: Vec<(ObjectId, ObjectRecord)>,
    dead: Vec<ObjectId>,
    dead_bytes: u64,
}

impl Store {
    /// Collects garbage: objects not reachable from `roots` and written more than
    /// `grace_secs` ago are removed. See the module documentation; the caller must hold
    /// the workspace lock exclusively.
    ///
    /// # Errors
    /// [`StoreError`] when the store fails; a root that references a corrupt tree stops the
    /// collection before anything is written (what it references cannot be known).
    pub fn collect(
        &self,
        roots: &[ObjectId],
        grace_secs: u64,
        dry_run: bool,
    ) -> Result<GcReport, StoreError> {
        self.collect_at(roots, grace_secs, dry_run, now_secs())
    }

    /// [`Store::collect`] with the clock given (Unix seconds): tests age objects this way.
    ///
    /// # Errors
    /// As [`Store::collect`].
    pub fn collect_at(
        &self,
        roots: &[ObjectId],
        grace_secs: u64,
        dry_run: bool,
        now: u64,
    ) -> Result<GcReport, StoreError> {
        let mut report = GcReport {
            dry_run,
            disk_bytes_before: disk_bytes(&self.path),
            ..GcReport::default()
        };
        let reader = self.reader()?;
        let mut live = mark(&reader, roots)?;
        let objects = reader.objects()?;
        let young = |rec: &ObjectRecord| rec.written.saturating_add(grace_secs) > now;
        // An object kept for its age keeps its delta base, and so what the base references
        // (a young tree's base must stay a whole tree).
        let young_bases: Vec<ObjectId> = objects
            .iter()
            .filter_map(|(id, rec)| match rec {
                Ok(rec) if !live.contains(id) && young(rec) => {
                    rec.delta.map(|d| d.base).filter(|b| !live.contains(b))
                }
                _ => None,
            })
            .collect();
        if !young_bases.is_empty() {
            live.extend(mark(&reader, &young_bases)?);
        }
        // Live deltas whose base goes: each is re-based on its nearest ancestor that stays
        // (thinning a chain), or, when none does, the first of those sharing the dead base is
        // stored whole and the others re-based on it (a file's versions re-based on their
        // root at the depth cap share it). So the dead part of a chain is freed at the cost
        // of at most one whole version per chain whose start was evicted. Those it cannot
        // rebuild keep their chain, bytes only.
        let young_ids: HashSet<ObjectId> = objects
            .iter()
            .filter_map(|(id, rec)| match rec {
                Ok(rec) if !live.contains(id) && young(rec) => Some(*id),
                _ => None,
            })
            .collect();
        let kept = |id: &ObjectId| live.contains(id) || young_ids.contains(id);
        let mut orphans: HashMap<ObjectId, Vec<(ObjectId, &ObjectRecord)>> = HashMap::new();
        let mut ancestors: HashMap<ObjectId, Option<(ObjectId, u8)>> = HashMap::new();
        for (id, rec) in &objects {
            if let Ok(rec) = rec
                && let Some(d) = rec.delta
                && live.contains(id)
                && !kept(&d.base)
            {
                ancestors
                    .entry(d.base)
                    .or_insert_with(|| kept_ancestor(&reader, d.base, &kept));
                orphans.entry(d.base).or_default().push((*id, rec));
            }
        }
        let mut materialised: HashMap<ObjectId, (PendingObject, u64)> = HashMap::new();
        let mut unrebuilt = Vec::new();
        for (dead, mut deps) in orphans {
            deps.sort_unstable_by_key(|(id, _)| *id);
            // What the others are re-based on: the kept ancestor, else the first stored whole.
            let mut base: Option<(ObjectId, u8, Vec<u8>)> = ancestors
                .get(&dead)
                .copied()
                .flatten()
                .filter(|(_, depth)| *depth < crate::object::delta::MAX_DEPTH)
                .and_then(|(a, depth)| {
                    let rec = reader.record(&a).ok()?;
                    let bytes = reader.payload(&a, &rec).ok()?;
                    super::reader::hashes_to(rec.kind, &bytes, &a).then_some((a, depth, bytes))
                });
            for (id, rec) in deps {
                let payload = match reader.payload(&id, rec) {
                    Ok(p) if super::reader::hashes_to(rec.kind, &p, &id) => p,
                    _ => {
                        unrebuilt.push(dead);
                        continue;
                    }
                };
                report.stored_bytes_freed += u64::from(rec.stored_len);
                let rebased = base.as_ref().and_then(|(b, depth, bytes)| {
                    let d = crate::object::delta::encode(bytes, &payload).ok()?;
                    crate::object::delta::pays(d.len(), &payload).then_some(PendingObject {
                        id,
                        kind: rec.kind,
                        size: rec.size,
                        payload: d,
                        delta: Some(DeltaBase {
                            base: *b,
                            depth: depth + 1,
                        }),
                    })
                });
                let o = rebased.unwrap_or_else(|| {
                    if base.is_none() {
                        base = Some((id, 0, payload.clone()));
                    }
                    PendingObject::whole(id, rec.kind, rec.size, payload)
                });
                materialised.insert(id, (o, rec.written));
            }
        }
        keep_bases(&reader, unrebuilt, &mut live)?;
        report.materialised = materialised.len() as u64;
        let mut frames: HashMap<u64, Frame> = HashMap::new();
        for (id, rec) in objects {
            report.objects += 1;
            // A record that does not decode is kept: it cannot be placed, so it is not ours
            // to judge (`retrace-dump verify` reports it).
            let Ok(rec) = rec else { continue };
            let f = frames.entry(rec.offset).or_insert_with(|| Frame {
                stored_len: rec.stored_len,
                raw_len: rec.frame_len,
                live: Vec::new(),
                dead: Vec::new(),
                dead_bytes: 0,
            });
            if live.contains(&id) {
                report.reachable += 1;
                f.live.push((id, rec));
            } else if rec.written.saturating_add(grace_secs) > now {
                report.young_kept += 1;
                f.live.push((id, rec));
            } else {
                f.dead_bytes += u64::from(rec.len);
                f.dead.push(id);
            }
        }
        let moved = frames_out_of_sparse_packs(&frames, SPARSE_PACK_PERCENT);
        let mut removed: Vec<ObjectId> = Vec::new();
        let mut rewrite: Vec<PendingObject> = Vec::new();
        let mut rewritten_written: HashMap<ObjectId, u64> = HashMap::new();
        for (offset, f) in &frames {
            let sparse = moved.contains(offset);
            if f.dead.is_empty() && !sparse {
                continue;
            }
            removed.extend(&f.dead);
            if f.live.is_empty() {
                report.stored_bytes_freed += u64::from(f.stored_len);
            } else if sparse || f.dead_bytes * 100 >= u64::from(f.raw_len) * REWRITE_DEAD_PERCENT {
                report.frames_rewritten += 1;
                report.stored_bytes_freed += u64::from(f.stored_len);
                for (id, rec) in f
                    .live
                    .iter()
                    .filter(|(id, _)| !materialised.contains_key(id))
                {
                    rewrite.push(PendingObject {
                        id: *id,
                        kind: rec.kind,
                        size: rec.size,
                        payload: reader.payload_of(id, rec)?,
                        delta: rec.delta,
                    });
                    rewritten_written.insert(*id, rec.written);
                }
            }
        }
        report.objects_freed = removed.len() as u64;
        let mut made_whole = Vec::new();
        for (id, (o, written)) in materialised {
            rewritten_written.insert(id, written);
            if o.delta.is_some() {
                rewrite.push(o);
            } else {
                made_whole.push(o);
            }
        }
        let idle = removed.is_empty() && rewrite.is_empty() && made_whole.is_empty();
        if dry_run {
            report.stored_bytes_added = rewrite
                .iter()
                .chain(&made_whole)
                .map(|o| crate::object::record::compress(&o.payload).1.len() as u64)
                .sum();
        }
        if dry_run {
            // Collection runs with no capture: every staged row is a dead capture's, and
            // goes with its frames.
            let (objects, bytes) = reader.staged_leftovers()?;
            report.leftover_objects = objects;
            report.stored_bytes_freed += bytes;
        }
        if dry_run || (idle && reader.staged_rows()? == 0) {
            report.disk_bytes_after = report.disk_bytes_before;
            return Ok(report);
        }
        // New frames for the survivors of rewritten frames, about 1 MiB each like capture's;
        // versions stored whole again in small frames of their own, so that their next
        // versions can be deltas against them (see `StoreReader::delta_base`).
        let mut new_frames = Vec::new();
        // Trees stored whole keep frames of their own, as capture writes them (the next
        // maintenance pass packs them into parity frames, leaving nothing behind in a frame
        // of files).
        let mut trees = Vec::new();
        for (objects, cap) in [
            (rewrite, crate::object::record::FRAME_RAW_BYTES),
            (made_whole, super::reader::MAX_SHARED_BASE_FRAME as usize / 2),
        ] {
            let mut batch: Vec<PendingObject> = Vec::new();
            let mut batch_bytes = 0;
            for o in objects {
                // Deltas move as they are, each in a raw frame of its own as capture writes
                // them.
                if o.delta.is_some() {
                    new_frames.push(NewFrame::raw(&[o]));
                    continue;
                }
                if o.kind == ObjectKind::Tree {
                    trees.push(o);
                    continue;
                }
                if o.payload.len() >= crate::object::record::SOLID_MAX_OBJECT {
                    new_frames.push(NewFrame::pack(&[o]));
                    continue;
                }
                batch_bytes += o.payload.len();
                batch.push(o);
                if batch_bytes >= cap {
                    new_frames.push(NewFrame::pack(&batch));
                    batch.clear();
                    batch_bytes = 0;
                }
            }
            if !batch.is_empty() {
                new_frames.push(NewFrame::pack(&batch));
            }
        }
        new_frames.extend(NewFrame::pack_trees(&trees));
        drop(reader);
        let moved_bytes: u64 = new_frames.iter().map(|f| f.stored.len() as u64).sum();
        report.stored_bytes_freed = report.stored_bytes_freed.saturating_sub(moved_bytes);
        report.packs_freed = self.rewrite(&removed, new_frames, &rewritten_written, true, None)?;
        report.compacted = self.compact_now();
        report.disk_bytes_after = disk_bytes(&self.path);
        Ok(report)
    }

    /// One transaction: remove `removed`, append `frames` (re-recording their members), and
    /// delete every pack value no remaining object needs, staged ones included
    /// ([`super::staged`]); `drop_staged` (collection, when no capture runs) deletes the
    /// staged rows first. With `moved_from` (passes under the shared lock, which captures
    /// run beside), a member is re-recorded only while its record still names the frame at
    /// the offset given, the one the pass read: a record a capture forgot (found damaged) or
    /// replaced meanwhile stays as that capture left it. Returns the packs deleted.
    pub(super) fn rewrite(
        &self,
        removed: &[ObjectId],
        frames: Vec<NewFrame>,
        written: &HashMap<ObjectId, u64>,
        drop_staged: bool,
        moved_from: Option<&HashMap<ObjectId, u64>>,
    ) -> Result<u64, StoreError> {
        let e = self.db_err();
        let path = self.path.clone();
        self.transact(move |tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            let mut index = tx.tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
            let mut packs = tx.tx.open_table(PACKS).map_err(|x| e(x.into()))?;
            for id in removed {
                index.remove(&id.0).map_err(|x| e(x.into()))?;
            }
            let mut log_end = pack::log_end(&meta).map_err(|x| e(x.into()))?;
            let mut tail = None;
            if frames
                .iter()
                .any(|f| f.members.iter().any(|m| m.delta.is_some()))
            {
                super::write::mark_deltas(&mut meta).map_err(|x| e(x.into()))?;
            }
            if frames.iter().any(|f| f.codec == Codec::ZstdParity) {
                super::write::raise_format(&mut meta, super::schema::FORMAT_PARITY)
                    .map_err(|x| e(x.into()))?;
            }
            for f in &frames {
                let stored_len =
                    u32::try_from(f.stored.len()).map_err(|_| StoreError::Corrupt {
                        path: path.clone(),
                        id: f.members.first().map_or(ObjectId::ZERO, |m| m.id),
                        detail: "frame over 4 GiB".into(),
                    })?;
                let offset =
                    pack::append(&mut packs, &mut log_end, &mut tail, &f.stored).map_err(&e)?;
                for m in &f.members {
                    if let Some(from) = moved_from {
                        let still = index
                            .get(&m.id.0)
                            .map_err(|x| e(x.into()))?
                            .and_then(|g| ObjectRecord::decode(g.value()).ok())
                            .is_some_and(|r| Some(&r.offset) == from.get(&m.id));
                        if !still {
                            continue;
                        }
                    }
                    let when = written.get(&m.id).copied().unwrap_or_else(now_secs);
                    let rec = f.record(m, offset, stored_len, when);
                    let bytes = rec.encode().map_err(|detail| StoreError::Encode {
                        path: path.clone(),
                        detail,
                    })?;
                    index
                        .insert(&m.id.0, bytes.as_slice())
                        .map_err(|x| e(x.into()))?;
                }
            }
            pack::flush_tail(&mut packs, log_end, tail).map_err(&e)?;
            meta.insert(META_LOG_END, log_end.to_le_bytes().as_slice())
                .map_err(|x| e(x.into()))?;
            // Packs still needed: those under a remaining frame, and the tail.
            let mut needed: HashSet<u64> = HashSet::new();
            for item in index.iter().map_err(|x| e(x.into()))? {
                let (_, v) = item.map_err(|x| e(x.into()))?;
                let Ok(rec) = ObjectRecord::decode(v.value()) else {
                    continue;
                };
                let last = rec.offset + u64::from(rec.stored_len).max(1) - 1;
                needed.extend(rec.offset / PACK_BYTES..=last / PACK_BYTES);
            }
            needed.insert(log_end / PACK_BYTES);
            // A running capture's staged objects are in no index yet; collection (no capture
            // runs) drops leftover rows first, so their bytes go.
            if drop_staged {
                super::staged::drop_staged(tx.tx, &path)?;
            }
            needed.extend(super::staged::staged_packs(tx.tx, &path)?);
            let total = packs.len().map_err(|x| e(x.into()))?;
            packs
                .retain(|k, _| needed.contains(&k))
                .map_err(|x| e(x.into()))?;
            Ok(total - packs.len().map_err(|x| e(x.into()))?)
        })
    }
}

impl Store {
    /// Moves whole frames, byte for byte, out of packs that live frames fill less than
    /// [`HOLEY_PACK_PERCENT`] of (see [`frames_out_of_sparse_packs`]), and deletes the
    /// packs then unused; returns how many. For after recompression and tree regrouping,
    /// which leave holes beside the small raw frames of deltas: unlike a collection it
    /// needs no reachability, and the caller's shared workspace lock is enough (a frame
    /// moves in one transaction, its records with it).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written.
    pub fn vacate_sparse_packs(&self) -> Result<u64, StoreError> {
        let reader = self.reader()?;
        let mut frames: HashMap<u64, Frame> = HashMap::new();
        for (id, rec) in reader.objects()? {
            let Ok(rec) = rec else { continue };
            frames
                .entry(rec.offset)
                .or_insert_with(|| Frame {
                    stored_len: rec.stored_len,
                    raw_len: rec.frame_len,
                    live: Vec::new(),
                    dead: Vec::new(),
                    dead_bytes: 0,
                })
                .live
                .push((id, rec));
        }
        let moved = frames_out_of_sparse_packs(&frames, HOLEY_PACK_PERCENT);
        // Worth a pass only when it gives back half a pack or more: a frame that straddles
        // into a pack left alone moves with its pack, and leaves that one a hole to fill.
        let packs_emptied = moved
            .iter()
            .flat_map(|o| {
                let len = u64::from(frames[o].stored_len).max(1);
                *o / PACK_BYTES..=(*o + len - 1) / PACK_BYTES
            })
            .collect::<HashSet<u64>>()
            .len() as u64;
        let moved_bytes: u64 = moved.iter().map(|o| u64::from(frames[o].stored_len)).sum();
        if moved.is_empty() || (packs_emptied * PACK_BYTES) < moved_bytes + PACK_BYTES * 3 / 2 {
            return Ok(0);
        }
        let packs = reader
            .packs
            .as_ref()
            .ok_or_else(|| reader.corrupt(&ObjectId::ZERO, "no pack log".into()))?;
        let mut new_frames = Vec::new();
        let mut written = HashMap::new();
        let mut moved_from = HashMap::new();
        for offset in moved {
            let f = &frames[&offset];
            let Some(stored) = pack::read(packs, offset, f.stored_len).map_err(|x| reader.db_err(x))?
            else {
                continue;
            };
            let codec = f.live[0].1.codec;
            new_frames.push(NewFrame {
                codec,
                stored,
                raw_len: f.raw_len,
                members: f
                    .live
                    .iter()
                    .map(|(id, r)| {
                        written.insert(*id, r.written);
                        moved_from.insert(*id, r.offset);
                        FrameMember::same_place(*id, r)
                    })
                    .collect(),
            });
        }
        drop(reader);
        self.rewrite(&[], new_frames, &written, false, Some(&moved_from))
    }
}

/// The frames (by offset) to move out of sparse pack values: a frame survives the
/// collection when it keeps something live and is not rewritten for its own dead share; a
/// pack whose survivors fill less than `percent` of it, all of them small
/// ([`MOVABLE_FRAME_BYTES`]), has them moved so that it is freed. The log's last pack (its
/// tail, still being filled) is left alone.
fn frames_out_of_sparse_packs(frames: &HashMap<u64, Frame>, percent: u64) -> HashSet<u64> {
    let surviving = |f: &Frame| {
        !f.live.is_empty()
            && f.dead_bytes * 100 < u64::from(f.raw_len) * REWRITE_DEAD_PERCENT
    };
    let end = frames
        .iter()
        .map(|(offset, f)| offset + u64::from(f.stored_len))
        .max()
        .unwrap_or(0);
    let tail = end / PACK_BYTES;
    // Per pack: the bytes of surviving frames in it, whether all are small, and their offsets.
    let mut packs: HashMap<u64, (u64, bool, Vec<u64>)> = HashMap::new();
    for (offset, f) in frames.iter().filter(|(_, f)| surviving(f)) {
        let len = u64::from(f.stored_len).max(1);
        let small = len <= MOVABLE_FRAME_BYTES;
        for p in offset / PACK_BYTES..=(offset + len - 1) / PACK_BYTES {
            let (start, stop) = (p * PACK_BYTES, (p + 1) * PACK_BYTES);
            let overlap = (offset + len).min(stop) - (*offset).max(start);
            let e = packs.entry(p).or_insert((0, true, Vec::new()));
            e.0 += overlap;
            e.1 &= small;
            e.2.push(*offset);
        }
    }
    packs
        .into_iter()
        .filter(|(p, (bytes, small, _))| {
            *p < tail && *small && bytes * 100 < PACK_BYTES * percent
        })
        .flat_map(|(_, (_, _, offsets))| offsets)
        .collect()
}

/// The nearest object below `dead` in its delta chain that `kept` keeps, with its depth
/// (0: stored whole); `None` when the chain's start goes too, or cannot be read.
fn kept_ancestor(
    reader: &super::StoreReader,
    dead: ObjectId,
    kept: &dyn Fn(&ObjectId) -> bool,
) -> Option<(ObjectId, u8)> {
    let mut at = dead;
    for _ in 0..=crate::object::delta::MAX_DEPTH {
        let base = reader.record(&at).ok()?.delta?.base;
        if kept(&base) {
            let depth = reader.record(&base).ok()?.delta.map_or(0, |d| d.depth);
            return Some((base, depth));
        }
        at = base;
    }
    None
}

/// Adds `bases` and the delta bases below them to `live` (their bytes only: a base tree
/// keeps no entries alive). An id already in `live` has had its own base listed.
fn keep_bases(
    reader: &super::StoreReader,
    mut bases: Vec<ObjectId>,
    live: &mut HashSet<ObjectId>,
) -> Result<(), StoreError> {
    while let Some(id) = bases.pop() {
        if !live.insert(id) {
            continue;
        }
        match reader.record(&id) {
            Ok(rec) => bases.extend(rec.delta.map(|d| d.base)),
            Err(StoreError::Missing { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Every object reachable from `roots`: trees, their entries, chunked blobs' chunks (not
/// delta bases: see [`Store::collect_at`]).
fn mark(reader: &super::StoreReader, roots: &[ObjectId]) -> Result<HashSet<ObjectId>, StoreError> {
    let mut live = HashSet::new();
    let mut stack: Vec<ObjectId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if !live.insert(id) {
            continue;
        }
        let rec = match reader.record(&id) {
            Ok(r) => r,
            Err(StoreError::Missing { .. }) => continue,
            Err(e) => return Err(e),
        };
        match rec.kind {
            ObjectKind::Blob => {}
            ObjectKind::ChunkedBlob => {
                stack.extend(reader.chunk_list(&id)?.chunks.into_iter().map(|(c, _)| c));
            }
            ObjectKind::Tree => {
                for e in reader.read_tree(&id)?.entries {
                    if e.kind != EntryKind::NestedRepo {
                        stack.push(e.id);
                    }
                }
            }
        }
    }
    Ok(live)
}
