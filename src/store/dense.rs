//! Recompression of written frames at a high zstd level ("dense" frames). Captures compress
//! at level 3 for speed; maintenance later recompresses each frame at
//! [`DENSE_LEVEL`](crate::object::record::DENSE_LEVEL), where the time is free. A dense frame
//! decompresses to the same bytes, so only its members' records change (offset, stored
//! length, codec `ZstdDense`), in one transaction per batch; the packs the old frames used are
//! freed in the same transaction. Oldest frames go first, and a deadline bounds a pass, so
//! background maintenance recompresses a large store a slice at a time.
//!
//! Objects never disappear in between: a concurrent capture that looks one up finds it, and a
//! reader holding an older transaction still reads the old frame. The caller holds the
//! workspace lock (shared is enough: it excludes GC and restores, not captures).
//!
//! A pass first regroups trees and roots into parity frames (`parity_groups.rs`).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;

use super::{Store, pack};
use crate::error::StoreError;
use crate::object::record::{Codec, FrameMember, compress_dense};
use crate::object::{NewFrame, ObjectId, ObjectRecord};

/// Output bytes per transaction.
const BATCH_BYTES: usize = 64 << 20;

/// What a recompression pass did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DenseReport {
    /// Frames recompressed.
    pub frames: u64,
    /// Their stored bytes before.
    pub bytes_before: u64,
    /// Their stored bytes after.
    pub bytes_after: u64,
    /// Whether every frame is now dense (false when the deadline stopped the pass).
    pub finished: bool,
    /// The trees regrouped into parity frames first (`docs/format.md`, "Parity frames").
    pub trees: super::parity_groups::GroupReport,
    /// The roots (file versions deltas are stored against) regrouped into parity frames
    /// next (`docs/format.md`, "Parity frames").
    pub roots: super::parity_groups::GroupReport,
    /// Packs freed after, by moving the small frames left in packs mostly emptied.
    pub packs_freed: u64,
}

impl Store {
    /// Recompresses frames not yet dense, oldest first, until `deadline` (or all of them).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read or written; a frame that does not
    /// decompress stops the pass before anything of its batch is written.
    pub fn recompress(&self, deadline: Option<Instant>) -> Result<DenseReport, StoreError> {
        // Trees and roots first: the frames they leave need no recompression. One scan of
        // the index serves all three steps (a background slice is half a second).
        let listing = self.listing()?;
        let (trees, mut moved) = self.group_trees_in(&listing, deadline)?;
        let (roots, roots_moved) = self.group_roots_in(&listing, deadline)?;
        moved.extend(roots_moved);
        let reader = self.reader()?;
        let mut frames: BTreeMap<u64, Vec<(ObjectId, ObjectRecord)>> = BTreeMap::new();
        for (id, rec) in listing {
            if rec.codec == Codec::Zstd && !moved.contains(&id) {
                frames.entry(rec.offset).or_default().push((id, rec));
            }
        }
        let mut report = DenseReport {
            finished: trees.finished && roots.finished,
            trees,
            roots,
            ..DenseReport::default()
        };
        let mut batch: Vec<NewFrame> = Vec::new();
        let mut batch_bytes = 0;
        let mut written: HashMap<ObjectId, u64> = HashMap::new();
        let mut moved_from: HashMap<ObjectId, u64> = HashMap::new();
        for members in frames.into_values() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                report.finished = false;
                break;
            }
            let (first_id, first) = &members[0];
            let raw = reader.frame(first_id, first)?;
            let stored = match compress_dense(&raw) {
                Some(d) if d.len() < first.stored_len as usize => d,
                // Not smaller: the same bytes, marked dense so no pass tries again.
                _ => {
                    let packs = reader
                        .packs
                        .as_ref()
                        .ok_or_else(|| reader.corrupt(first_id, "no pack log".into()))?;
                    pack::read(packs, first.offset, first.stored_len)
                        .map_err(|x| reader.db_err(x))?
                        .ok_or_else(|| {
                            reader.corrupt(first_id, "frame outside the pack log".into())
                        })?
                }
            };
            report.frames += 1;
            report.bytes_before += u64::from(first.stored_len);
            report.bytes_after += stored.len() as u64;
            batch_bytes += stored.len();
            batch.push(NewFrame {
                codec: Codec::ZstdDense,
                stored,
                raw_len: first.frame_len,
                members: members
                    .iter()
                    .map(|(id, r)| {
                        written.insert(*id, r.written);
                        moved_from.insert(*id, r.offset);
                        FrameMember::same_place(*id, r)
                    })
                    .collect(),
            });
            if batch_bytes >= BATCH_BYTES {
                let batch = std::mem::take(&mut batch);
                self.rewrite(&[], batch, &written, false, Some(&moved_from))?;
                written.clear();
                moved_from.clear();
                batch_bytes = 0;
            }
        }
        if !batch.is_empty() {
            self.rewrite(&[], batch, &written, false, Some(&moved_from))?;
        }
        // The holes this pass left (a full maintenance pass also looks when it did nothing).
        if report.frames > 0 || report.trees.objects > 0 || report.roots.objects > 0 {
            report.packs_freed = self.vacate_sparse_packs()?;
        }
        Ok(report)
    }
}
