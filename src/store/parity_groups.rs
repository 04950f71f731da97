//! Objects packed by maintenance into parity frames (codec `ZstdParity`,
//! [`crate::object::parity`]): a zstd frame cut into checked shards with a parity shard, so
//! one damaged shard is rebuilt on read and a flipped byte costs nothing. Two kinds of
//! objects are packed, each in the log's order, from the frames captures wrote them in:
//!
//! * **Trees** stored whole, written one capture at a time into small frames of their own,
//!   into frames of at most [`TREE_FRAME_RAW_BYTES`] at the dense level. A directory's next
//!   version, written by a later capture, lies a few trees on and differs in a few entries,
//!   so zstd stores it as little more than its changed ids, as git's tree deltas do
//!   (measured on the long-session workload: 602 trees from 160.8 KiB to about 47 KiB,
//!   docs/benchmarks.md); and the log's order keeps a snapshot's trees together for the
//!   walks that read them all. No tree depends on another's bytes, so a flipped byte costs no
//!   snapshot, where a tree delta chain lost every later tree.
//! * **Roots**: file versions stored whole that deltas are stored against (a file's first
//!   version, on which each later version's chain starts), into frames of at most
//!   [`ROOT_FRAME_RAW_BYTES`] at [`ROOT_LEVEL`]. Similar files compress together as they do
//!   in git's packs (the long session's 12 files: 384 KB apart at level 12, 324 KB in three
//!   such frames at level 16). Every version of a file reads its root, so a root is what a
//!   flipped byte must never cost: the parity shard rebuilds it. A delta's base may lie in
//!   such a frame ([`super::reader`]'s rule for shared frames admits them): reading it
//!   decompresses at
//!   most [`ROOT_FRAME_RAW_BYTES`], once per store reader (its frame cache) for all the roots
//!   it holds. Roots move only from frames every object of which moves (bytes moved out of
//!   a frame that stays would stay in it, live to GC for as long as the frame), and versions
//!   stored nearly as large as they are (random bytes, a binary's chunks) stay alone.
//!
//! A parity frame under half of its kind's size is packed again with newer objects of its
//! kind: each pass packs only what was written since the last, and small frames would keep
//! related versions apart for good. Records are moved only where they still point where the
//! pass read them. The caller holds the workspace lock (shared is enough, as for
//! recompression).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;

use super::Store;
use super::reader::hashes_to;
use crate::error::StoreError;
use crate::object::record::{
    Codec, DENSE_LEVEL, FrameMember, TREE_FRAME_RAW_BYTES, compress_protected,
};
use crate::object::{NewFrame, ObjectId, ObjectKind, ObjectRecord};


/// Roots share parity frames of at most this many raw bytes: what a capture decompresses
/// to read a delta base there.
pub const ROOT_FRAME_RAW_BYTES: usize = 512 * 1024;

/// The zstd level of roots' frames. Written once and read by every version of their files:
/// worth a high level (measured with the zstd CLI on the long session's 12 files, 1.4 MB,
/// in frames of [`ROOT_FRAME_RAW_BYTES`]: 356 KB at level 12, 324 KB at 16, 320 KB at 19;
/// level 16 compresses at about 5 MB/s, 19 at 3, 12 at 33).
pub const ROOT_LEVEL: i32 = 16;

/// What a regrouping pass did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupReport {
    /// Objects moved into parity frames.
    pub objects: u64,
    /// Parity frames written.
    pub frames: u64,
    /// Stored bytes of the frames the objects left (all of each, other members included).
    pub bytes_before: u64,
    /// Stored bytes of the parity frames written.
    pub bytes_after: u64,
    /// Whether every object that could be packed was (false when the deadline or the pass's
    /// size cap stopped it).
    pub finished: bool,
}

/// What one kind of regrouping packs, and how.
#[derive(Clone, Copy)]
struct Grouping {
    kind: ObjectKind,
    /// Raw bytes per frame at most.
    frame_bytes: usize,
    /// zstd level.
    level: i32,
    /// Raw bytes one pass regroups at most (a slice of a big store; the next pass goes on):
    /// a few seconds of compression at the level.
    pass_bytes: usize,
    /// Only from frames every object of which moves: bytes moved out of a frame that stays
    /// would stay in it too, live to GC's eyes for as long as the frame's other objects.
    /// Roots share capture frames with other files; trees have had frames of their own
    /// since before format 2 (a store of an older build leaves a few tree bytes behind).
    whole_frames: bool,
}

impl Grouping {
    const TREES: Grouping = Grouping {
        kind: ObjectKind::Tree,
        frame_bytes: TREE_FRAME_RAW_BYTES,
        level: DENSE_LEVEL,
        pass_bytes: 64 << 20,
        whole_frames: false,
    };
    const ROOTS: Grouping = Grouping {
        kind: ObjectKind::Blob,
        frame_bytes: ROOT_FRAME_RAW_BYTES,
        level: ROOT_LEVEL,
        pass_bytes: 16 << 20,
        whole_frames: true,
    };

    /// Whether an object stored whole of this kind, in a frame of `rec`'s, is (still) to pack.
    fn loose(self, rec: &ObjectRecord) -> bool {
        rec.kind == self.kind
            && rec.delta.is_none()
            && (rec.codec != Codec::ZstdParity || (rec.frame_len as usize) < self.frame_bytes / 2)
    }
}

/// An object waiting for a parity frame.
struct Loose {
    id: ObjectId,
    rec: ObjectRecord,
    payload: Vec<u8>,
}

/// The index's records that decode, as one scan read them: what a maintenance pass's
/// regroupings and recompression share, so a background slice scans the index once.
pub(super) type Listing = [(ObjectId, ObjectRecord)];

impl Store {
    /// The index's records that decode (a pass's [`Listing`]).
    pub(super) fn listing(&self) -> Result<Vec<(ObjectId, ObjectRecord)>, StoreError> {
        Ok(self
            .reader()?
            .objects()?
            .into_iter()
            .filter_map(|(id, rec)| rec.ok().map(|rec| (id, rec)))
            .collect())
    }

    /// Moves trees stored whole outside parity frames, of `listing`, into new parity frames,
    /// oldest frames first, until `deadline`; returns what it did and the ids it moved. Does
    /// nothing while they lie in fewer than two frames (a store's first capture, or what a
    /// pass left): one frame has nothing to share.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written. A frame that does not
    /// decompress, or a tree that does not hash to its id, is left where it is (readers
    /// report it as damage).
    pub(super) fn group_trees_in(
        &self,
        listing: &Listing,
        deadline: Option<Instant>,
    ) -> Result<(GroupReport, HashSet<ObjectId>), StoreError> {
        self.regroup(listing, Grouping::TREES, |_| true, deadline)
    }

    /// Moves roots (whole file versions some delta is stored against) of at most half a
    /// root frame, of `listing`, outside parity frames into new parity frames, as
    /// [`Store::group_trees_in`] does trees. Bigger versions stay alone.
    ///
    /// # Errors
    /// As [`Store::group_trees_in`].
    pub(super) fn group_roots_in(
        &self,
        listing: &Listing,
        deadline: Option<Instant>,
    ) -> Result<(GroupReport, HashSet<ObjectId>), StoreError> {
        let bases: HashSet<ObjectId> = listing
            .iter()
            .filter_map(|(_, rec)| rec.delta.map(|d| d.base))
            .collect();
        // A frame of roots is packed again whole (a member no longer a base included); a
        // version stored nearly as large as it is (random bytes, a binary's chunk) gains
        // nothing from company and would cost the level's time.
        let compressible = |r: &ObjectRecord| u64::from(r.stored_len) * 10 < u64::from(r.frame_len) * 9;
        self.regroup(
            listing,
            Grouping::ROOTS,
            |(id, rec)| {
                rec.codec == Codec::ZstdParity
                    || (bases.contains(id)
                        && (rec.len as usize) <= ROOT_FRAME_RAW_BYTES / 2
                        && compressible(rec))
            },
            deadline,
        )
    }

    fn regroup(
        &self,
        listing: &Listing,
        how: Grouping,
        select: impl Fn(&(ObjectId, ObjectRecord)) -> bool,
        deadline: Option<Instant>,
    ) -> Result<(GroupReport, HashSet<ObjectId>), StoreError> {
        let mut frames: BTreeMap<u64, Vec<(ObjectId, ObjectRecord)>> = BTreeMap::new();
        let mut in_frame: HashMap<u64, usize> = HashMap::new();
        for object in listing {
            *in_frame.entry(object.1.offset).or_default() += 1;
            if how.loose(&object.1) && select(object) {
                frames.entry(object.1.offset).or_default().push(object.clone());
            }
        }
        if how.whole_frames {
            frames.retain(|offset, members| in_frame.get(offset) == Some(&members.len()));
        }
        let mut report = GroupReport {
            finished: true,
            ..GroupReport::default()
        };
        if frames.len() < 2 {
            return Ok((report, HashSet::new()));
        }
        let reader = self.reader()?;
        // In the log's order: a capture writes its trees in the order of its walk, so a
        // snapshot's trees stay together for the walks that read them all (a restore, GC's
        // mark), and a directory's next version, written by a later capture, follows a few
        // trees on, within the frame's reach; a cold capture's files lie by directory.
        let mut loose = Vec::new();
        let mut raw = 0;
        for mut members in frames.into_values() {
            if raw >= how.pass_bytes || deadline.is_some_and(|d| Instant::now() >= d) {
                report.finished = false;
                break;
            }
            members.sort_unstable_by_key(|(_, r)| r.within);
            let (first_id, first) = &members[0];
            let Ok(frame) = reader.frame(first_id, first) else {
                continue;
            };
            report.bytes_before += u64::from(first.stored_len);
            for (id, rec) in members {
                let (start, end) = (rec.within as usize, rec.within as usize + rec.len as usize);
                let Some(payload) = frame.get(start..end) else {
                    continue;
                };
                if !hashes_to(how.kind, payload, &id) {
                    continue;
                }
                raw += payload.len();
                loose.push(Loose {
                    id,
                    rec,
                    payload: payload.to_vec(),
                });
            }
        }
        drop(reader);
        if loose.len() < 2 {
            return Ok((report, HashSet::new()));
        }
        let mut moved_from: HashMap<ObjectId, u64> = HashMap::new();
        let mut written: HashMap<ObjectId, u64> = HashMap::new();
        let mut out = Vec::new();
        let mut group: Vec<&Loose> = Vec::new();
        let mut group_bytes = 0;
        for t in &loose {
            if group_bytes + t.payload.len() > how.frame_bytes && !group.is_empty() {
                out.push(parity_frame(&self.path, how, &group)?);
                group.clear();
                group_bytes = 0;
                // Compressing is the pass's cost: what is left waits for the next pass.
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    report.finished = false;
                    break;
                }
            }
            group_bytes += t.payload.len();
            group.push(t);
            written.insert(t.id, t.rec.written);
            moved_from.insert(t.id, t.rec.offset);
        }
        if !group.is_empty() && report.finished {
            out.push(parity_frame(&self.path, how, &group)?);
        } else {
            // Not written: those objects stay where they are.
            for t in &group {
                moved_from.remove(&t.id);
                written.remove(&t.id);
            }
        }
        report.objects = moved_from.len() as u64;
        report.frames = out.len() as u64;
        report.bytes_after = out.iter().map(|f| f.stored.len() as u64).sum();
        self.rewrite(&[], out, &written, false, Some(&moved_from))?;
        Ok((report, moved_from.into_keys().collect()))
    }
}

/// One parity frame of `objects`, laid end to end in order.
fn parity_frame(
    path: &std::path::Path,
    how: Grouping,
    objects: &[&Loose],
) -> Result<NewFrame, StoreError> {
    let mut raw = Vec::new();
    let mut members = Vec::with_capacity(objects.len());
    for t in objects {
        members.push(FrameMember {
            id: t.id,
            kind: how.kind,
            size: t.rec.size,
            within: u32::try_from(raw.len()).unwrap_or(u32::MAX),
            len: t.rec.len,
            delta: None,
        });
        raw.extend_from_slice(&t.payload);
    }
    let stored = compress_protected(&raw, how.level).ok_or_else(|| StoreError::Encode {
        path: path.to_path_buf(),
        detail: "zstd could not compress a parity frame".into(),
    })?;
    Ok(NewFrame {
        codec: Codec::ZstdParity,
        stored,
        raw_len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
        members,
    })
}

#[cfg(test)]
impl Store {
    /// [`Store::group_trees_in`] over the whole index.
    fn group_trees(&self, deadline: Option<Instant>) -> Result<GroupReport, StoreError> {
        Ok(self.group_trees_in(&self.listing()?, deadline)?.0)
    }

    /// [`Store::group_roots_in`] over the whole index.
    fn group_roots(&self, deadline: Option<Instant>) -> Result<GroupReport, StoreError> {
        Ok(self.group_roots_in(&self.listing()?, deadline)?.0)
    }
}

#[cfg(test)]
#[path = "parity_groups_tests.rs"]
mod tests;
