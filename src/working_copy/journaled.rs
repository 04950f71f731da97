//! Journaled restores and their recovery.
//!
//! Every restore that writes files (undo, redo, navigation, `retrace restore`) goes through
//! [`Exclusive::journaled_apply`]: (1) one commit stores the target's new trees and the
//! journal; (2) files are written, each to a temp file renamed into place; (3) one commit
//! records the result (snapshot, last known state, the session's op) and removes the
//! journal. A process killed between (1) and (3) leaves the journal; the next process to take
//! the workspace lock calls [`Exclusive::recover`], which rolls the restore forward.
//!
//! What the result is recorded with (the history: the session's op) is the caller's `T`
//! ([`Then`]), kept in the journal so that a recovery records it too.

use std::collections::HashSet;
use std::fmt::Write;

use super::restore::Applied;
use super::{Exclusive, WorkingCopy};
use crate::capture::Capture;
use crate::object::FlatEntry;
use crate::diff::{Change, changes};
use crate::error::{RestoreError, StoreError};
use crate::inverse::{find, same, target_of};
use crate::object::{EntryKind, NewFrame, ObjectId, RelPath};
use crate::progress::Progress;
use crate::restore::journal::{self, JournalRecord, Then};
use crate::store::{SnapshotRecord, StoreReader};

/// What a journaled restore is about to do.
pub(crate) struct JournaledRestore<T> {
    /// For messages and the journal: "undo of turn 3".
    pub what: String,
    /// Stored snapshot of the disk now.
    pub source: ObjectId,
    /// Stored snapshot (once `frames` are written) the disk must become.
    pub target: ObjectId,
    /// Trees of the target the store lacks.
    pub frames: Vec<NewFrame>,
    /// What is recorded with the result (the history: the session's op).
    pub then: Option<T>,
    /// A snapshot record for the result when it is exactly the target.
    pub record: Option<SnapshotRecord>,
}

/// What [`Exclusive::journaled_apply`] did.
pub(crate) struct Finished {
    /// The files written, deleted, left alone.
    pub applied: Applied,
    /// The snapshot the disk now equals.
    pub snapshot: ObjectId,
    /// The capture taken when the disk could not be shown to equal the target.
    pub capture: Option<Capture>,
    /// Whether the result was recorded; on failure the journal stays, and the next
    /// operation completes the record.
    pub recorded: Result<(), StoreError>,
}

/// Paths of nested repositories in a sorted list.
fn nested(list: &[FlatEntry]) -> Vec<&[u8]> {
    list.iter()
        .filter(|e| e.kind == EntryKind::NestedRepo)
        .map(|e| e.path.as_bytes())
        .collect()
}

/// Every directory on the paths `paths` (their ancestors and themselves).
pub(crate) fn dirty_dirs<'a>(paths: impl Iterator<Item = &'a RelPath>) -> HashSet<RelPath> {
    let mut dirty = HashSet::new();
    for p in paths {
        for (i, _) in p.iter().enumerate().filter(|&(_, &b)| b == b'/') {
            dirty.insert(RelPath::from_bytes(&p[..i]));
        }
        dirty.insert(p.clone());
    }
    dirty
}

/// Files and bytes of a flat list (files and symlinks).
pub(crate) fn totals(list: &[FlatEntry]) -> (u64, u64) {
    list.iter()
        .filter(|e| e.kind.is_content())
        .fold((0, 0), |(n, b), e| (n + 1, b + e.size))
}

impl Exclusive<'_> {
    /// Journals, applies and records a restore from `current` to `target_entries` (sorted
    /// lists, possibly restricted to the subtrees that differ). An error after the journal
    /// was written leaves it for recovery.
    pub(crate) fn journaled_apply<T: Then>(
        &self,
        reader: &StoreReader,
        j: JournaledRestore<T>,
        current: &[FlatEntry],
        target_entries: &[FlatEntry],
        progress: &dyn Progress,
    ) -> Result<Finished, RestoreError> {
        // Everything that can fail without writing (plan, objects, permissions) fails here,
        // before the journal: such a failure leaves nothing to recover.
        let prepared = self.prepare_target(reader, current, target_entries, false)?;
        let mut phases = crate::trace::Phases::new("restore");
        let rec = JournalRecord::new(j.what.clone(), j.source, j.target, j.then.clone());
        // What the restore stores (the versions it keeps aside) counts as what its row added.
        let stored = self.store.write_with(
            j.frames,
            None,
            None,
            crate::store::WriteStats::default(),
            |tx| journal::put(tx, &rec),
        )?;
        phases.mark("journal");
        let applied = match self.execute(reader, prepared, progress) {
            Ok(a) => a,
            Err(f) => {
                // Refused or failed before touching the disk: nothing to recover, and the
                // history stays as it was (a journal left here would be "completed" later).
                if !f.touched {
                    self.store
                        .write_with(Vec::new(), None, None, crate::store::WriteStats::default(), journal::clear)?;
                    return Err(*f.error);
                }
                // Failed midway (a write the disk refused): put back what was changed, so
                // that the workspace is as it was; if that fails too, the journal stays and
                // the next command completes the restore.
                return Err(match self.roll_back(reader, j.source, j.target, progress) {
                    Ok((restored, kept)) => RestoreError::RolledBack {
                        cause: f.error,
                        restored,
                        kept,
                    },
                    Err(back) => RestoreError::Stopped {
                        cause: f.error,
                        back: back.to_string(),
                    },
                });
            }
        };
        let exact = !applied.rescan
            && applied.verify_diff.is_empty()
            && applied.left_alone.is_empty()
            && nested(current) == nested(target_entries);
        let (snapshot, capture, record) = if exact {
            (j.target, None, j.record)
        } else {
            // Something was left alone or is not as planned: record what the disk holds.
            let c = self.record(Some(format!("after {}", j.what)), progress)?;
            (c.id, Some(c), None)
        };
        phases.mark("apply");
        let recorded = self.store.reader().and_then(|fresh| {
            self.store
                .write_with(Vec::new(), record.as_ref(), Some(snapshot), stored, |tx| {
                    if j.then.is_none() {
                        T::record_unclaimed(tx, &j.what, j.source, snapshot, &fresh)?;
                    }
                    finish(tx, j.then, snapshot, &fresh)
                })
                .map(|_| ())
        });
        phases.mark("record");
        Ok(Finished {
            applied,
            snapshot,
            capture,
            recorded,
        })
    }

    /// Puts back the paths a restore from `source` to `target` that failed midway had
    /// changed (those the disk shows at their `target` version), then removes its journal:
    /// the history stays as it was. Paths someone else changed meanwhile are left as they are
    /// and named (up to 5). Returns how many paths were put back.
    ///
    /// # Errors
    /// [`Error`] when the disk cannot be read or written back; the journal then stays, and
    /// the next command completes the restore instead.
    fn roll_back(
        &self,
        reader: &StoreReader,
        source: ObjectId,
        target: ObjectId,
        progress: &dyn Progress,
    ) -> Result<(usize, Vec<String>), RestoreError> {
        let disk = self.store_disk(progress)?;
        let mut kept = Vec::new();
        let back: Vec<Change> = changes(reader, &source, &target)?
            .into_iter()
            .filter_map(|c| {
                let d = find(&disk.entries, &c.path);
                if same(d, c.old.as_ref()) {
                    None // not reached
                } else if same(d, c.new.as_ref()) {
                    Some(Change {
                        path: c.path,
                        old: c.new,
                        new: c.old,
                    })
                } else {
                    kept.push(c.path.show());
                    None
                }
            })
            .collect();
        let wanted = target_of(&disk.entries, &back);
        let applied = self.apply_target(reader, &disk.entries, &wanted, false, progress)?;
        let exact = !applied.rescan && applied.verify_diff.is_empty() && kept.is_empty();
        // Exactly as it was: the last known state is the source again.
        let last_known = exact.then_some(source);
        self.store
            .write_with(Vec::new(), None, last_known, crate::store::WriteStats::default(), journal::clear)?;
        kept.extend(applied.verify_diff);
        kept.truncate(5);
        Ok((back.len(), kept))
    }

    /// Completes a restore interrupted by a crash, if the journal names one: rolls it
    /// forward. The disk as found is recorded first (nothing the user did since is lost);
    /// paths the user changed after the crash (neither the restore's source nor its target)
    /// are left as they are and listed. The journal records a `T`. Returns a one-line
    /// report.
    ///
    /// # Errors
    /// [`Error`] when the store or the disk cannot be read or written; the journal then
    /// stays and the next operation tries again.
    pub(crate) fn recover<T: Then>(
        &self,
        progress: &dyn Progress,
    ) -> Result<Option<String>, RestoreError> {
        let tx = self.store.begin_read()?;
        let Some(rec) = journal::get::<T>(&tx)? else {
            return Ok(None);
        };
        drop(tx);
        let reader = self.store.reader()?;
        let mut disk = self.store_disk(progress)?;
        let (files, bytes) = totals(&disk.entries);
        let kept_at = SnapshotRecord::now(
            disk.id,
            Some(format!("found when recovering an interrupted {}", rec.what)),
            files,
            bytes,
        );
        self.store.write(Vec::new(), Some(&kept_at), None)?;
        let mut kept = Vec::new();
        let all = changes(&reader, &rec.source, &rec.target)?;
        // Every directory the restore was changing may hold its temp files.
        let dirs: HashSet<RelPath> = all
            .iter()
            .map(|c| RelPath::from_bytes(crate::restore::beneath::split(&c.path).0))
            .collect();
        let doable: Vec<_> = all
            .into_iter()
            .filter(|c| {
                let d = find(&disk.entries, &c.path);
                let ours = same(d, c.old.as_ref()) || same(d, c.new.as_ref());
                if !ours {
                    kept.push(c.path.show());
                }
                ours
            })
            .collect();
        let beneath = crate::restore::beneath::Beneath::open(&self.root)?;
        let rescued =
            beneath.sweep_temp_files(dirs.iter().map(RelPath::as_bytes), rec.pid, &|id| {
                reader.contains(id).unwrap_or(false)
            });
        drop(beneath);
        let mut target = target_of(&disk.entries, &doable);
        let dirty = dirty_dirs(doable.iter().map(|c| &c.path));
        let applied = match self.apply_target(&reader, &disk.entries, &target, false, progress) {
            Ok(a) => a,
            // (A store or capture failure propagates: the next operation tries again.)
            Err(e) if !matches!(e, RestoreError::Store(_) | RestoreError::Capture(_)) => {
                // The files cannot be restored as the journal says (a name the filesystem
                // refuses, a directory replaced): a recovery must never be stuck for good.
                // The disk as found is kept above; the operation is dropped, unclaimed.
                self.store.write_with(Vec::new(), None, None, crate::store::WriteStats::default(), |tx| {
                    finish::<T>(tx, None, disk.id, &reader)
                })?;
                return Ok(Some(format!(
                    "an interrupted {} (started by process {}) cannot be completed ({e}); it \
                     was abandoned and its history left as it was; the disk as found is kept \
                     as snapshot {}",
                    rec.what,
                    rec.pid,
                    kept_at.root.short()
                )));
            }
            Err(e) => return Err(e),
        };
        let exact = !applied.rescan
            && applied.verify_diff.is_empty()
            && applied.left_alone.is_empty()
            && rescued.is_empty();
        let (now, frames, missed) = if exact {
            let (now, frames) = self.prepare_list(&mut target, &dirty)?;
            (now, frames, Vec::new())
        } else {
            disk = self.record(
                Some(format!("after recovering an interrupted {}", rec.what)),
                progress,
            )?;
            // Only what the disk now shows counts as done.
            let missed: Vec<String> = doable
                .iter()
                .filter(|c| !same(find(&disk.entries, &c.path), c.new.as_ref()))
                .map(|c| c.path.show())
                .collect();
            (disk.id, Vec::new(), missed)
        };
        // The operation is recorded only when every path it could still do is done: a
        // recovery never claims what it did not do.
        let then = if missed.is_empty() {
            rec.then.clone()
        } else {
            None
        };
        let fresh = self.store.reader()?;
        self.store
            .write_with(frames, None, Some(now), crate::store::WriteStats::default(), |tx| finish(tx, then, now, &fresh))?;
        let mut msg = if missed.is_empty() {
            format!(
                "recovered an interrupted {} (started by process {}): completed it ({} written, \
                 {} deleted); the disk as found is kept as snapshot {}",
                rec.what,
                rec.pid,
                applied.written.len(),
                applied.deleted.len(),
                kept_at.root.short()
            )
        } else {
            format!(
                "an interrupted {} (started by process {}) could not be completed: {} path(s) \
                 are not as it meant ({}); its history was left as it was, and the disk as \
                 found is kept as snapshot {}",
                rec.what,
                rec.pid,
                missed.len(),
                missed
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                kept_at.root.short()
            )
        };
        if !kept.is_empty() {
            let _ = write!(
                msg,
                "; {} path(s) edited since were left as they are: {}",
                kept.len(),
                kept.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            );
        }
        if !rescued.is_empty() {
            let _ = write!(
                msg,
                "; {} file(s) written during the restore were kept as {}",
                rescued.len(),
                rescued
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(Some(msg))
    }
}

impl WorkingCopy {
    /// Recovers an interrupted restore if there is one, taking the exclusive lock for it
    /// (waiting at most `wait`). Reports go to [`WorkingCopy::warnings`].
    pub(crate) fn recover_if_needed<T: Then>(&self, wait: std::time::Duration) {
        let pending = self
            .store
            .begin_read()
            .ok()
            .and_then(|tx| journal::get::<T>(&tx).ok().flatten());
        let Some(rec) = pending else {
            return;
        };
        let report = match self.lock_exclusive(wait) {
            Ok(ex) => match ex.recover::<T>(&crate::progress::NoProgress) {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(e) => format!(
                    "an interrupted {} could not be completed yet ({e}); the next retrace \
                     command tries again",
                    rec.what
                ),
            },
            Err(_) => format!(
                "a restore ({}) is in progress in process {}; it will be completed by it or \
                 by the next retrace command",
                rec.what, rec.pid
            ),
        };
        self.warn(report);
    }
}

/// The closing record of a restore: journal removed, `then` recorded with the result's
/// snapshot.
fn finish<T: Then>(
    tx: &crate::store::WriteTx<'_>,
    then: Option<T>,
    snapshot: ObjectId,
    reader: &StoreReader,
) -> Result<(), StoreError> {
    journal::clear(tx)?;
    match then {
        Some(then) => then.record(tx, snapshot, reader),
        None => Ok(()),
    }
}
