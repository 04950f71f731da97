//! Trees packed by maintenance: trees stored whole, written one capture at a time into small
//! frames of their own, are packed together into parity frames (codec `ZstdParity`,
//! [`crate::object::parity`]) at the dense level, in the log's order. A directory's next
//! version, written by a later capture, lies a few trees on and differs in a few entries, so
//! zstd stores it as little more than its changed ids, as git's tree deltas do (measured on
//! the long-session workload: 602 trees from 160.8 KiB to about 47 KiB, docs/benchmarks.md);
//! and the log's order keeps a snapshot's trees together for the walks that read them all.
//! No tree depends on another's bytes, and the parity shard rebuilds any one damaged shard,
//! so a flipped byte costs no snapshot, where a tree delta chain lost every later tree.
//!
//! Frames hold at most [`TREE_FRAME_RAW_BYTES`], so a read of one tree decompresses at most
//! that much; a parity frame under half of it is packed again with newer trees. Records are
//! moved only where they still point where the pass read them. The caller holds the
//! workspace lock (shared is enough, as for recompression).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;

use super::Store;
use super::reader::hashes_to;
use crate::error::StoreError;
use crate::object::record::{
    Codec, FrameMember, TREE_FRAME_RAW_BYTES, compress_protected,
};
use crate::object::{NewFrame, ObjectId, ObjectKind, ObjectRecord};

/// Raw tree bytes one pass regroups at most (a slice of a big store; the next pass goes on).
const PASS_BYTES: usize = 64 << 20;

/// A parity frame of trees holding less than this (raw; half of [`TREE_FRAME_RAW_BYTES`]) is
/// regrouped with newer trees: each
/// pass packs only what was written since the last, and small frames would keep a
/// directory's versions apart for good.
const UNDERFILLED: u32 = 32 * 1024;

/// What a regrouping pass did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TreeGroupReport {
    /// Trees moved into parity frames.
    pub trees: u64,
    /// Parity frames written.
    pub frames: u64,
    /// Stored bytes of the frames the trees left (all of each, other members included).
    pub bytes_before: u64,
    /// Stored bytes of the parity frames written.
    pub bytes_after: u64,
    /// Whether every tree that could be packed was (false when the deadline or the pass's
    /// size cap stopped it).
    pub finished: bool,
}

/// A tree waiting for a parity frame.
struct Loose {
    id: ObjectId,
    rec: ObjectRecord,
    payload: Vec<u8>,
}

impl Store {
    /// Moves trees stored whole outside parity frames into new parity frames, oldest frames
    /// first, until `deadline`. Does nothing while they lie in fewer than two frames (a
    /// store's first capture, or what a pass left): one frame has nothing to share.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written. A frame that does not
    /// decompress, or a tree that does not hash to its id, is left where it is (readers
    /// report it as damage).
    pub fn group_trees(&self, deadline: Option<Instant>) -> Result<TreeGroupReport, StoreError> {
        let reader = self.reader()?;
        let mut frames: BTreeMap<u64, Vec<(ObjectId, ObjectRecord)>> = BTreeMap::new();
        for (id, rec) in reader.objects()? {
            if let Ok(rec) = rec
                && rec.kind == ObjectKind::Tree
                && rec.delta.is_none()
                && (rec.codec != Codec::ZstdParity || rec.frame_len < UNDERFILLED)
            {
                frames.entry(rec.offset).or_default().push((id, rec));
            }
        }
        let mut report = TreeGroupReport {
            finished: true,
            ..TreeGroupReport::default()
        };
        if frames.len() < 2 {
            return Ok(report);
        }
        // In the log's order: a capture writes its trees in the order of its walk, so a
        // snapshot's trees stay together for the walks that read them all (a restore, GC's
        // mark), and a directory's next version, written by a later capture, follows a few
        // trees on, within the frame's reach.
        let mut loose = Vec::new();
        let mut raw = 0;
        for mut members in frames.into_values() {
            if raw >= PASS_BYTES || deadline.is_some_and(|d| Instant::now() >= d) {
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
                if !hashes_to(ObjectKind::Tree, payload, &id) {
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
            return Ok(report);
        }
        let mut moved_from: HashMap<ObjectId, u64> = HashMap::new();
        let mut written: HashMap<ObjectId, u64> = HashMap::new();
        let mut out = Vec::new();
        let mut group: Vec<&Loose> = Vec::new();
        let mut group_bytes = 0;
        for t in &loose {
            if group_bytes + t.payload.len() > TREE_FRAME_RAW_BYTES && !group.is_empty() {
                out.push(parity_frame(&self.path, &group)?);
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
            out.push(parity_frame(&self.path, &group)?);
        }
        report.trees = moved_from.len() as u64;
        report.frames = out.len() as u64;
        report.bytes_after = out.iter().map(|f| f.stored.len() as u64).sum();
        self.rewrite(&[], out, &written, false, Some(&moved_from))?;
        Ok(report)
    }
}

/// One parity frame of `trees`, laid end to end in order.
fn parity_frame(path: &std::path::Path, trees: &[&Loose]) -> Result<NewFrame, StoreError> {
    let mut raw = Vec::new();
    let mut members = Vec::with_capacity(trees.len());
    for t in trees {
        members.push(FrameMember {
            id: t.id,
            kind: ObjectKind::Tree,
            size: t.rec.size,
            within: u32::try_from(raw.len()).unwrap_or(u32::MAX),
            len: t.rec.len,
            delta: None,
        });
        raw.extend_from_slice(&t.payload);
    }
    let stored = compress_protected(&raw).ok_or_else(|| StoreError::Encode {
        path: path.to_path_buf(),
        detail: "zstd could not compress a tree frame".into(),
    })?;
    Ok(NewFrame {
        codec: Codec::ZstdParity,
        stored,
        raw_len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
        members,
    })
}

#[cfg(test)]
#[path = "tree_frames_tests.rs"]
mod tests;
