//! Writing what a capture stores: new objects queued into frames, frames written in
//! batches (staged in the pack log, indexed together later), and the capture's final commit.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::PoisonError;

use super::hash::Hasher;
use super::{Capture, CaptureContext, CaptureOptions, Captured};
use crate::error::{CaptureError, StoreError};
use crate::object::record::{FRAME_RAW_BYTES, SOLID_MAX_OBJECT, TREE_FRAME_RAW_BYTES};
use crate::object::{NewFrame, ObjectId, ObjectKind, PendingObject};
use crate::store::{SnapshotRecord, Staged, StagedRow, WriteStats};

/// Queued bytes that trigger an intermediate batch write (bounds memory on cold captures).
pub(super) const BATCH_BYTES: usize = 16 * 1024 * 1024;

/// Batches are staged (appended to the pack log, indexed later: [`crate::store::Staged`])
/// until their objects number this many, or the `1/STAGE_SHARE` of the index, whichever is
/// more; then the next batch indexes them all in one sorted pass. Each pass rewrites most
/// of the index's leaves, so passes in proportion to the index keep its rewriting linear.
const STAGE_MIN: usize = if cfg!(test) { 20 } else { 65_536 };
const STAGE_SHARE: usize = 2;

/// Objects waiting to be framed and frames waiting to be written.
#[derive(Default)]
pub(super) struct Pending {
    /// Small objects for the shared frame being filled.
    pub(super) solid: Vec<PendingObject>,
    pub(super) solid_bytes: usize,
    /// Trees for the tree frame being filled ([`TREE_FRAME_RAW_BYTES`]).
    pub(super) trees: Vec<PendingObject>,
    pub(super) trees_bytes: usize,
    /// Ids queued in this capture and not yet committed (identical files are stored once).
    pub(super) queued: HashSet<ObjectId>,
    /// The first 8 bytes of every id this capture queued, committed or not: an id whose
    /// prefix is new is new to the capture, and only the rest (identical files) ask the
    /// store whether an earlier batch holds them. A set of full ids would hold 69 MB at a
    /// million new files; this one 19 MB.
    pub(super) seen: HashSet<u64, BuildHasherDefault<crate::object::Prehashed>>,
    /// Batches this capture wrote and has not indexed yet; the final commit indexes them.
    pub(super) staged: Staged,
    /// Objects indexed: the store's at the start, and those this capture indexed since.
    pub(super) indexed: usize,
    pub(super) frames: Vec<NewFrame>,
    pub(super) frame_bytes: usize,
}

/// The first 8 bytes of an id: already uniformly spread, so they are their own hash.
pub(super) fn prefix(id: &ObjectId) -> u64 {
    let [a, b, c, d, e, f, g, h, ..] = id.0;
    u64::from_le_bytes([a, b, c, d, e, f, g, h])
}

/// The capture's final commit: what it queued, its snapshot record (with
/// `opts.record`) and `opts.also`'s records, shown what the snapshot holds (`seen`). The
/// commit indexes what the capture staged: nothing names an object before it, and from it
/// on every object it names is found. Counts what it stored into `capture`.
pub(super) fn commit(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
    hasher: Hasher<'_>,
    seen: &Captured<'_>,
    capture: &mut Capture,
) -> Result<(), CaptureError> {
    let (root, files, bytes) = (capture.id, capture.files, capture.bytes);
    let (batch, staged, flushed) = hasher.finish();
    if batch.is_empty() && staged.is_empty() && opts.record.is_none() && opts.also.is_none() {
        // Nothing new to store and nothing to record (the disk an undo found as the turn
        // left it): no commit.
        capture.new_objects = flushed.objects;
        capture.new_bytes = flushed.stored_bytes;
        return Ok(());
    }
    let record = opts
        .record
        .as_ref()
        .map(|label| SnapshotRecord::now(root, label.clone(), files, bytes));
    if batch.is_empty() && staged.is_empty() && record.is_none() && opts.also.is_none() {
        // Nothing to write (every object it saw was stored, and it records nothing): a
        // commit would only sync. Batches written before are indexed by staged rows, so
        // none was.
        capture.new_objects = flushed.objects;
        capture.new_bytes = flushed.stored_bytes;
        return Ok(());
    }
    let last_known = record.as_ref().map(|_| root);
    let written = ctx
        .store
        .write_with(batch, record.as_ref(), last_known, flushed, |tx| {
            tx.index_staged(&staged)?;
            match opts.also {
                Some(also) => also(tx, root, seen),
                None => Ok(()),
            }
        })?;
    capture.new_objects = written.objects + flushed.objects;
    capture.new_bytes = written.stored_bytes + flushed.stored_bytes;
    Ok(())
}

impl Hasher<'_> {
    /// What the final commit writes (the frames left, the staged batches to index) and
    /// what the batches written before it stored.
    fn finish(self) -> (Vec<NewFrame>, Vec<u64>, WriteStats) {
        let pending = self
            .pending
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut batch = pending.frames;
        if !pending.solid.is_empty() {
            batch.push(NewFrame::pack(&pending.solid));
        }
        if !pending.trees.is_empty() {
            batch.push(NewFrame::pack(&pending.trees));
        }
        let flushed = self.flushed.into_inner().unwrap_or_default();
        (batch, pending.staged.rows(), flushed)
    }

    /// The first error a batch write met, taken.
    pub(super) fn failed(&self) -> Option<StoreError> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Whether `id` is new to this capture, which then claims it for writing: it is not
    /// queued, and not in a batch this capture already committed (staged or indexed).
    pub(super) fn claim(&self, p: &mut Pending, id: &ObjectId) -> bool {
        if p.queued.contains(id) {
            return false;
        }
        if !p.seen.insert(prefix(id)) {
            // Identical to a file queued before (or, once in 2^64, a prefix twin).
            if p.staged.contains(id) {
                return false;
            }
            let committed = self
                .committed
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match committed.as_ref().map(|r| r.contains(id)) {
                Some(Ok(true)) => return false,
                Some(Ok(false)) | None => {}
                Some(Err(e)) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        p.queued.insert(*id);
        true
    }

    pub(super) fn fail(&self, e: StoreError) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }

    /// Queues objects for writing: small ones into the shared frame, others alone. Frames
    /// are compressed by the calling worker, outside the lock, so compression stays parallel.
    pub(super) fn queue(&self, objects: Vec<PendingObject>) {
        if !self.store_objects {
            return;
        }
        for o in objects {
            let full = {
                let Ok(mut p) = self.pending.lock() else {
                    return;
                };
                if !self.claim(&mut p, &o.id) {
                    continue;
                }
                if o.delta.is_some() {
                    drop(p);
                    self.push_frame(NewFrame::raw(&[o]));
                    continue;
                }
                if o.payload.len() >= SOLID_MAX_OBJECT {
                    drop(p);
                    self.push_frame(NewFrame::pack(&[o]));
                    continue;
                }
                if o.kind == ObjectKind::Tree {
                    p.trees_bytes += o.payload.len();
                    p.trees.push(o);
                    if p.trees_bytes < TREE_FRAME_RAW_BYTES {
                        continue;
                    }
                    p.trees_bytes = 0;
                    std::mem::take(&mut p.trees)
                } else {
                    p.solid_bytes += o.payload.len();
                    p.solid.push(o);
                    if p.solid_bytes < FRAME_RAW_BYTES {
                        continue;
                    }
                    p.solid_bytes = 0;
                    std::mem::take(&mut p.solid)
                }
            };
            self.push_frame(NewFrame::pack(&full));
        }
    }

    fn push_frame(&self, frame: NewFrame) {
        {
            let Ok(mut p) = self.pending.lock() else {
                return;
            };
            p.frame_bytes += frame.stored.len();
            p.frames.push(frame);
            if p.frame_bytes < BATCH_BYTES {
                return;
            }
        }
        // One batch is written at a time, and a worker that fills the next one waits here
        // instead of reading on: queued frames stay within two batches however many workers
        // read big files at once.
        let Ok(_writing) = self.writing.lock() else {
            return;
        };
        let batch = {
            let Ok(mut p) = self.pending.lock() else {
                return;
            };
            if p.frame_bytes < BATCH_BYTES {
                return; // the worker before us wrote it
            }
            p.frame_bytes = 0;
            std::mem::take(&mut p.frames)
        };
        let ids: Vec<ObjectId> = batch
            .iter()
            .flat_map(|f| f.members.iter().map(|m| m.id))
            .collect();
        let (rows, index) = {
            let Ok(p) = self.pending.lock() else {
                return;
            };
            let due = (p.indexed / STAGE_SHARE).max(STAGE_MIN);
            (p.staged.rows(), p.staged.len() + ids.len() >= due)
        };
        match self.store.stage(batch, &rows, index) {
            Ok((row, w)) => {
                if let Ok(mut f) = self.flushed.lock() {
                    f.objects += w.objects;
                    f.stored_bytes += w.stored_bytes;
                }
                #[cfg(feature = "fault-injection")]
                if row.is_some() && std::env::var_os("RETRACE_FAULT_KILL_STAGED").is_some() {
                    // A test's capture dies right after its first staged batch commits.
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
                self.committed(&ids, row, index.then_some(rows.as_slice()));
            }
            Err(e) => self.fail(e),
        }
    }

    /// After a batch of `ids` committed, staged as `row` or indexed with the staged rows
    /// `indexed`: the set of queued ids lets go of them, and holds one or two batches' ids
    /// instead of every new object of the capture (a million at a million new files).
    /// Staged ids move to [`Pending::staged`] under the same lock; for indexed ones, a
    /// reader begun now knows them, and is in place before they leave the sets, so
    /// [`Hasher::claim`] finds each id in one place or another.
    fn committed(&self, ids: &[ObjectId], row: Option<StagedRow>, indexed: Option<&[u64]>) {
        if indexed.is_some() {
            match self.store.reader() {
                Ok(r) => {
                    *self
                        .committed
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) = Some(r);
                }
                Err(e) => return self.fail(e),
            }
        }
        if let Ok(mut p) = self.pending.lock() {
            if let Some(rows) = indexed {
                p.indexed += p.staged.len() + ids.len();
                p.staged.indexed(rows);
            }
            if let Some(row) = row {
                p.staged.add(row);
            }
            for id in ids {
                p.queued.remove(id);
            }
        }
    }
}
