//! Restoring the workspace to a snapshot: the restore (or its dry run) behind its guards,
//! and the two halves every restore shares, the plan verified before anything is written
//! and its execution, checked after.

use super::guard::{Holders, dirty_guard, held_guard};
use super::{DirtyRefusal, Exclusive, RestoreOptions, WorkingCopy, journaled, partial};
use crate::diff::{below_any, diff, flatten, flatten_changed};
use crate::error::RestoreError;
use crate::object::{FlatEntry, ObjectId};
use crate::progress::Progress;
use crate::restore::journal::Then;
use crate::restore::{RestoreOutcome, apply, plan};

/// Restores touching fewer paths than this read back every file they wrote; bigger ones
/// check their `lstat` (see [`apply::Look`]).
const CONTENT_CHECK_BELOW: usize = 1000;

/// A restore planned and verified, not yet written.
pub(crate) struct Prepared {
    plan: crate::restore::plan::Plan,
    data: apply::Content,
    pub(super) out: Applied,
    /// The directories the plan acts in, opened below the root (`None` for a dry run).
    beneath: Option<crate::restore::beneath::Beneath>,
}

/// What [`Exclusive::apply_target`] did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub written: Vec<String>,
    pub deleted: Vec<String>,
    pub left_alone: Vec<crate::scan::Skipped>,
    pub removed_dirs: Vec<String>,
    /// Paths not as planned after the restore (see [`apply::Look`]).
    pub verify_diff: Vec<String>,
    /// A restore that left something as someone else wrote it, or a directory it meant to
    /// remove: the caller stores the disk as it is.
    pub rescan: bool,
}

impl RestoreOutcome {
    /// Takes in what applying the restore did. Without `verify` (a dry run, or a restore the
    /// disk was not read back after) the result stands as verified; with it, the paths found
    /// not as planned decide.
    pub(crate) fn absorb(&mut self, applied: Applied, verify: bool) {
        self.written = applied.written;
        self.deleted = applied.deleted;
        self.left_alone = applied.left_alone;
        self.removed_dirs = applied.removed_dirs;
        self.verify_diff = applied.verify_diff;
        self.verified = !verify || self.verify_diff.is_empty();
    }
}

impl WorkingCopy {
    /// A restore, or with `dry_run` its plan plus the refusal a real restore would meet
    /// (journals record a `T`: `then`, recorded with its result, or the user's restore).
    pub(crate) fn restore_or_plan<T: Then>(
        &self,
        id: &ObjectId,
        opts: RestoreOptions,
        then: Option<T>,
        holders: &dyn Holders,
        progress: &dyn Progress,
    ) -> Result<(RestoreOutcome, Option<DirtyRefusal>), RestoreError> {
        let mut phases = crate::trace::Phases::new("restore");
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
        // Stored unless a dry run: the journal's source must be a complete snapshot. Stored
        // without a list of every path (a watcher then spares the walk): the trees say what
        // differs, and the disk is read from its snapshot where it does.
        let mut current = match &lock {
            None => self.scan_disk(progress)?,
            Some(ex) => ex.store_disk_unlisted(progress)?,
        };
        let reader = self.store.reader()?;
        phases.mark("scan disk");
        let mut outcome = RestoreOutcome {
            target: Some(*id),
            dry_run: opts.dry_run,
            ..RestoreOutcome::default()
        };
        let label = format!("safety: before forced restore to {}", id.short());
        let (refused, safety) = dirty_guard(
            &reader,
            (&mut current, id),
            &[],
            opts,
            lock.as_ref(),
            label,
            progress,
        )?;
        outcome.safety_snapshot = safety;
        // Only the subtrees whose ids differ from the disk's are read and compared (read by
        // a reader that sees the safety snapshot's trees, if one was stored).
        let reader = if safety.is_some() {
            self.store.reader()?
        } else {
            reader
        };
        let target = if lock.is_some() {
            let (disk, target) = partial::sides(crate::diff::changes(&reader, &current.id, id)?);
            current.entries = disk;
            target
        } else {
            let (target, same) = flatten_changed(&reader, id, &current.entries)?;
            current.entries.retain(|e| !below_any(&e.path, &same));
            target
        };
        // The disk's entries where the restore changes it: the paths the guard asks about.
        let held = holders.held(
            &reader,
            &current.entries,
            lock.is_some().then_some(current.id),
        )?;
        let changed = || diff(&current.entries, &target).paths().into_iter();
        let refused = match refused {
            Some(r) => Some(r),
            None if held.is_empty() => None,
            None => held_guard(&held, changed(), opts)?,
        };
        phases.mark("read changed trees");
        let Some(ex) = lock else {
            let applied = self
                .prepare_target(&reader, &current.entries, &target, true)?
                .out;
            outcome.absorb(applied, false);
            return Ok((outcome, refused));
        };
        let fin = ex.journaled_apply::<T>(
            &reader,
            journaled::JournaledRestore {
                what: format!("restore to {}", id.short()),
                source: current.id,
                target: *id,
                frames: Vec::new(),
                then,
                record: None,
            },
            &current.entries,
            &target,
            progress,
        )?;
        phases.mark("plan and apply");
        fin.recorded?;
        outcome.absorb(fin.applied, true);
        if let Some(after) = fin.capture {
            // Not exactly as planned: the disk as stored says what differs from the target,
            // apart from what was left alone.
            let left: std::collections::HashSet<&str> =
                outcome.left_alone.iter().map(|s| s.path.as_str()).collect();
            outcome.verify_diff = diff(&flatten(&reader, id)?, &after.entries)
                .paths()
                .into_iter()
                .filter(|p| !left.contains(p.as_str()))
                .collect();
        }
        outcome.verified = outcome.verify_diff.is_empty();
        phases.mark("check and record");
        drop(reader);
        Ok((outcome, None))
    }

    /// The first half of [`Exclusive::apply_target`], which writes nothing: the plan, every
    /// object read and verified, and every directory it writes into checked writable. Its
    /// failures leave the workspace untouched.
    pub(crate) fn prepare_target(
        &self,
        reader: &crate::store::StoreReader,
        current: &[FlatEntry],
        target: &[FlatEntry],
        dry_run: bool,
    ) -> Result<Prepared, RestoreError> {
        let mut phases = crate::trace::Phases::new("restore");
        let plan = plan::plan(&self.root, current, target)?;
        let mut left_alone = plan.left_alone.clone();
        plan::explain_left_alone(&self.root, current, &mut left_alone);
        phases.mark("plan");
        let out = Applied {
            written: plan.writes.iter().map(|w| w.entry.path.show()).collect(),
            deleted: plan.deletes.iter().map(|d| d.path.show()).collect(),
            left_alone,
            ..Applied::default()
        };
        let (data, beneath) = if dry_run {
            (apply::Content::default(), None)
        } else {
            let data = apply::verify(reader, &plan)?;
            self.check_workspace_space(&plan)?;
            let beneath = crate::restore::beneath::Beneath::open(&self.root)?;
            apply::preflight(&beneath, &plan)?;
            phases.mark("space and preflight");
            (data, Some(beneath))
        };
        Ok(Prepared {
            plan,
            data,
            out,
            beneath,
        })
    }

    /// Refuses, before anything is written or deleted, a restore whose writes cannot fit on
    /// the workspace's disk: their bytes, a block per file and 1 MiB (each version is written
    /// beside the one it replaces before that one is freed).
    fn check_workspace_space(&self, plan: &plan::Plan) -> Result<(), RestoreError> {
        if plan.writes.is_empty() {
            return Ok(());
        }
        let bytes: u64 = plan
            .writes
            .iter()
            .map(|w| w.entry.size.saturating_add(4096))
            .sum();
        let needed = bytes.saturating_add(1 << 20);
        let free = self.store.free_bytes_at(&self.root);
        if free < needed {
            return Err(RestoreError::NoSpace {
                path: self.root.clone(),
                needed,
                free,
            });
        }
        Ok(())
    }
}

impl Exclusive<'_> {
    /// Plans the change from `current` to `target` (both sorted flat lists), verifies every
    /// object it needs, then writes (unless `dry_run`).
    pub(crate) fn apply_target(
        &self,
        reader: &crate::store::StoreReader,
        current: &[FlatEntry],
        target: &[FlatEntry],
        dry_run: bool,
        progress: &dyn Progress,
    ) -> Result<Applied, RestoreError> {
        let prepared = self.prepare_target(reader, current, target, dry_run)?;
        if dry_run {
            return Ok(prepared.out);
        }
        self.execute(reader, prepared, progress)
            .map_err(|f| *f.error)
    }

    /// The second half of [`Exclusive::apply_target`]: writes, then checks. Paths someone
    /// changed while it ran are left (or kept) and listed in `left_alone`, not counted as
    /// written or deleted.
    pub(crate) fn execute(
        &self,
        reader: &crate::store::StoreReader,
        prepared: Prepared,
        progress: &dyn Progress,
    ) -> Result<Applied, apply::Failed> {
        let Prepared {
            plan,
            data,
            mut out,
            beneath,
        } = prepared;
        let failed = |e: RestoreError| apply::Failed {
            error: Box::new(e),
            touched: false,
        };
        let beneath = match beneath {
            Some(b) => b,
            None => crate::restore::beneath::Beneath::open(&self.root).map_err(failed)?,
        };
        // The stat cache spares reading a version before it is replaced or deleted, but
        // loading it reads every record of the workspace (its checksum): a restore of a few
        // files reads those files instead, and costs what it changes.
        let mut phases = crate::trace::Phases::new("restore");
        let path = self.dir.join("statcache");
        let cache_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let cache = if replaced_bytes(reader, &plan) < cache_bytes {
            crate::statcache::StatCache::empty()
        } else {
            reader.cache_key().map_or_else(
                |_| crate::statcache::StatCache::empty(),
                |id| crate::statcache::StatCache::load(&path, &id),
            )
        };
        phases.mark("stat cache");
        let applied = apply::apply(&beneath, reader, &plan, data, &cache, progress)?;
        phases.mark("apply");
        out.removed_dirs = applied.removed_dirs;
        if !applied.kept.is_empty() {
            let kept: std::collections::HashSet<&str> =
                applied.kept.iter().map(|k| k.path.as_str()).collect();
            out.written.retain(|p| !kept.contains(p.as_str()));
            out.deleted.retain(|p| !kept.contains(p.as_str()));
            out.left_alone.extend(applied.kept.iter().cloned());
            out.left_alone.sort_by(|a, b| a.path.cmp(&b.path));
            out.rescan = true;
        }
        // Re-read exactly what a small restore wrote; a big one was verified as it was
        // written, so its files are checked by their `lstat` (kind, mode, size). Either way
        // what it deleted must be gone. No full re-scan: files written just now are inside
        // the stat cache's racy window, so the next capture re-reads them whatever this one
        // would record (a re-scan was a third of a whole restore).
        let look = if plan.writes.len() + plan.deletes.len() < CONTENT_CHECK_BELOW {
            apply::Look::Content
        } else {
            apply::Look::Stat
        };
        out.verify_diff = apply::check(&self.root, &plan, look);
        phases.mark(&format!("check ({look:?})"));
        // A directory the plan meant to remove but that still holds ignored files stays on
        // disk: the disk is then not exactly the target list.
        if plan.prune.iter().any(|d| {
            crate::capture::abs_path(&self.root, d)
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir())
        }) {
            out.rescan = true;
        }
        Ok(out)
    }
}

/// The bytes of the versions `plan` replaces or deletes (what reading them to check them
/// costs); a version whose size the store cannot say counts as unbounded.
fn replaced_bytes(reader: &crate::store::StoreReader, plan: &plan::Plan) -> u64 {
    plan.writes
        .iter()
        .filter_map(|w| w.over)
        .chain(plan.deletes.iter().map(|d| d.expected))
        .map(|e| {
            if e.kind == crate::object::EntryKind::Symlink {
                return 0;
            }
            reader.record(&e.id).map_or(u64::MAX, |r| r.size)
        })
        .fold(0, u64::saturating_add)
}
