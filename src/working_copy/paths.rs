//! Restoring some paths of a snapshot (`retrace restore ID -- PATH...`): the named files and
//! directories become what the snapshot holds there, and nothing else on disk is touched.
//! The dirty guard covers only those paths. The result is a new state of the workspace, so it
//! is recorded as a snapshot of its own.

use super::guard::{Holders, dirty_guard, held_guard};
use super::{DirtyRefusal, WorkingCopy};
use crate::object::FlatEntry;
use crate::diff::{Change, diff, flatten, selected};
use crate::error::RestoreError;
use crate::inverse::target_of;
use crate::object::{EntryKind, ObjectId, RelPath};
use crate::progress::Progress;
use crate::restore::RestoreOutcome;
use crate::restore::journal::Then;
use crate::store::SnapshotRecord;

use super::RestoreOptions;
use super::journaled::{JournaledRestore, totals};
use super::partial::{entries_at, patched_root};

/// `only` as paths relative to the workspace root: `./` and trailing `/` dropped, an
/// absolute path inside `root` made relative. A path that leaves the workspace (`..`, an
/// absolute path elsewhere) or an empty one (`.` is the whole workspace) is refused.
///
/// # Errors
/// [`RestoreError::Path`] naming the path and why.
pub fn normalize_paths(
    root: &std::path::Path,
    only: &[String],
) -> Result<Vec<String>, RestoreError> {
    let mut out = Vec::with_capacity(only.len());
    for p in only {
        let bad = |reason: &str| RestoreError::Path {
            path: p.clone(),
            reason: reason.into(),
        };
        if p.is_empty() {
            // An empty argument (an unset shell variable, most often) would select the
            // whole workspace; `.` says that on purpose.
            return Err(bad(
                "an empty path is not allowed; give `.` to restore the whole workspace",
            ));
        }
        let rel = if p.starts_with('/') {
            match std::path::Path::new(p).strip_prefix(root) {
                Ok(r) => r.to_string_lossy().into_owned(),
                Err(_) => return Err(bad("it lies outside the workspace")),
            }
        } else {
            p.clone()
        };
        let parts: Vec<&str> = rel
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if parts.contains(&"..") {
            return Err(bad(
                "`..` is not allowed; give paths relative to the workspace root",
            ));
        }
        out.push(parts.join("/"));
    }
    Ok(out)
}

/// The changes that make the `disk` entries under `only` what `snap` holds there: one per
/// path whose entry differs (kind, or content for leaves), sorted by path.
fn changes_under(disk: &[FlatEntry], snap: &[FlatEntry], only: &[String]) -> Vec<Change> {
    let pick = |e: &&FlatEntry| selected(&e.path.show(), only);
    let a: Vec<&FlatEntry> = disk.iter().filter(pick).collect();
    let b: Vec<&FlatEntry> = snap.iter().filter(pick).collect();
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (old, new) = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.path == y.path => {
                i += 1;
                j += 1;
                let dirs = x.kind == EntryKind::Dir && y.kind == EntryKind::Dir;
                if dirs || (x.kind == y.kind && x.id == y.id) {
                    continue;
                }
                (Some(*x), Some(*y))
            }
            (Some(x), y) if y.is_none_or(|y| x.path < y.path) => {
                i += 1;
                (Some(*x), None)
            }
            (_, y) => {
                j += 1;
                (None, y.copied())
            }
        };
        out.push(Change {
            path: old.or(new).map(|e| e.path.clone()).unwrap_or_default(),
            old: old.cloned(),
            new: new.cloned(),
        });
    }
    out
}

impl WorkingCopy {
    /// Restores the paths `only` (non-empty, normalized by [`normalize_paths`]) of snapshot
    /// `id`, or with `dry_run` plans it and says whether it would be refused.
    pub(crate) fn restore_paths_or_plan<T: Then>(
        &self,
        id: &ObjectId,
        only: &[String],
        opts: RestoreOptions,
        then: Option<T>,
        holders: &dyn Holders,
        progress: &dyn Progress,
    ) -> Result<(RestoreOutcome, Option<DirtyRefusal>), RestoreError> {
        let lock = if opts.dry_run {
            None
        } else {
            Some(self.lock_exclusive(crate::store::LOCK_WAIT)?)
        };
        if let Some(ex) = &lock
            && let Some(report) = ex.recover::<T>(progress)?
        {
            self.warn(report);
        }
        // Stored unless a dry run: the journal's source must be a complete snapshot. Stored,
        // the disk and the snapshot are read at the paths alone (and on the way to them):
        // a restore of a few files costs what it reads, whatever the size of the workspace.
        let partial = lock.is_some() && only.iter().all(|p| !p.is_empty());
        let mut current = match &lock {
            Some(ex) if partial => ex.store_disk_unlisted(progress)?,
            Some(ex) => ex.store_disk(progress)?,
            None => self.scan_disk(progress)?,
        };
        let reader = self.store.reader()?;
        let at: Vec<RelPath> = only.iter().map(|p| RelPath::from(p.as_str())).collect();
        let snap = if partial {
            current.entries = entries_at(&reader, &current.id, at.iter())?;
            entries_at(&reader, id, at.iter())?
        } else {
            flatten(&reader, id)?
        };
        for p in only {
            let one = std::slice::from_ref(p);
            let known = |l: &[FlatEntry]| l.iter().any(|e| selected(&e.path.show(), one));
            if !known(&snap) && !known(&current.entries) {
                return Err(RestoreError::Path {
                    path: p.clone(),
                    reason: format!(
                        "neither snapshot {} nor the workspace has it (paths are relative to \
                         the workspace root, {})",
                        id.short(),
                        self.root.display()
                    ),
                });
            }
        }
        let mut outcome = RestoreOutcome {
            target: Some(*id),
            paths: only.to_vec(),
            dry_run: opts.dry_run,
            verified: true,
            ..RestoreOutcome::default()
        };
        let label = format!("safety: before forced restore of paths from {}", id.short());
        let (refused, safety) = dirty_guard(
            &reader,
            (&mut current, id),
            only,
            opts,
            lock.as_ref(),
            label,
            progress,
        )?;
        outcome.safety_snapshot = safety;
        let change = changes_under(&current.entries, &snap, only);
        let refused = match refused {
            Some(r) => Some(r),
            None if change.is_empty() => None,
            None => {
                let stored = lock.is_some().then_some(current.id);
                let held = holders.held(&reader, &current.entries, stored)?;
                held_guard(&held, change.iter().map(|c| c.path.show()), opts)?
            }
        };
        let target = target_of(&current.entries, &change);
        let Some(ex) = lock else {
            let applied = self
                .prepare_target(&reader, &current.entries, &target, true)?
                .out;
            outcome.absorb(applied, false);
            return Ok((outcome, refused));
        };
        if change.is_empty() {
            return Ok((outcome, None));
        }
        // The result: the stored disk with the directories on the changed paths rebuilt.
        let (root, frames) = patched_root(&reader, &current.id, &current.entries, &target)?;
        let (files, bytes) = {
            let (was_files, was_bytes) = totals(&current.entries);
            let (now_files, now_bytes) = totals(&target);
            (
                (current.files + now_files).saturating_sub(was_files),
                (current.bytes + now_bytes).saturating_sub(was_bytes),
            )
        };
        let what = format!("restore of {} from {}", only.join(", "), id.short());
        let fin = ex.journaled_apply::<T>(
            &reader,
            JournaledRestore {
                what: what.clone(),
                source: current.id,
                target: root,
                frames,
                then,
                record: Some(SnapshotRecord::now(root, Some(what), files, bytes)),
            },
            &current.entries,
            &target,
            progress,
        )?;
        fin.recorded?;
        outcome.absorb(fin.applied, true);
        if let Some(after) = fin.capture {
            // Not exactly as planned: what differs from the target under the paths, apart
            // from what was left alone.
            let left: std::collections::HashSet<&str> =
                outcome.left_alone.iter().map(|s| s.path.as_str()).collect();
            outcome.verify_diff = diff(&target, &after.entries)
                .paths()
                .into_iter()
                .filter(|p| selected(p, only) && !left.contains(p.as_str()))
                .collect();
        }
        outcome.verified = outcome.verify_diff.is_empty();
        Ok((outcome, None))
    }
}
