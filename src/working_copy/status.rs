//! What the workspace is, against its store: `retrace status`, the snapshot log, and the
//! diffs and patches between snapshots or the disk.

use super::{MAX_LISTED, Status, WorkingCopy};
use crate::capture::Capture;
use crate::diff::{Diff, below_any, diff, flatten, flatten_changed};
use crate::error::Error;
use crate::object::ObjectId;
use crate::progress::NoProgress;
use crate::restore::journal::Then;
use crate::scan::exclude::HARD_EXCLUSIONS;
use crate::store::SnapshotRecord;

/// How many states `log` (oldest first) holds: a run of snapshots of one root is one.
fn states(log: &[crate::store::SnapshotRecord]) -> u64 {
    let runs = 1 + log.windows(2).filter(|w| w[0].root != w[1].root).count();
    if log.is_empty() { 0 } else { runs as u64 }
}

impl WorkingCopy {
    /// Snapshots of this workspace, newest first.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn log(&self) -> Result<Vec<SnapshotRecord>, Error> {
        let mut all = self.store.reader()?.snapshots()?;
        all.reverse();
        Ok(all)
    }

    /// Paths that differ from snapshot `a` to snapshot `b`, or to the disk when `b` is None.
    ///
    /// # Errors
    /// [`Error::Store`] for missing or corrupt objects.
    pub fn diff(&self, a: &ObjectId, b: Option<&ObjectId>) -> Result<Diff, Error> {
        let reader = self.store.reader()?;
        let from = flatten(&reader, a)?;
        let to = match b {
            Some(b) => flatten(&reader, b)?,
            None => self.scan_disk(&NoProgress)?.entries,
        };
        Ok(diff(&from, &to))
    }

    /// The unified diffs ([`crate::patch`]) from snapshot `a` (or nothing) to snapshot `b`
    /// (or the disk) of the changed files that [`crate::diff::selected`] keeps of `only`,
    /// sorted by path.
    ///
    /// # Errors
    /// [`Error::Store`] for a damaged snapshot tree; a file whose content cannot be read is
    /// named in its patch instead.
    pub fn patches(
        &self,
        a: Option<&ObjectId>,
        b: Option<&ObjectId>,
        only: &[String],
    ) -> Result<Vec<crate::patch::FilePatch>, Error> {
        let reader = self.store.reader()?;
        let from = match a {
            Some(a) => flatten(&reader, a)?,
            None => Vec::new(),
        };
        let to = match b {
            Some(b) => flatten(&reader, b)?,
            None => self.scan_disk(&NoProgress)?.entries,
        };
        let sides = crate::patch::Sides {
            reader: &reader,
            disk: b.is_none().then_some(self.root()),
        };
        let mut out = Vec::new();
        for (old, new) in crate::diff::changed_pairs(&from, &to) {
            let path = old.or(new).map(|e| e.path.show()).unwrap_or_default();
            if crate::diff::selected(&path, only) {
                out.extend(crate::patch::patches(sides, old, new));
            }
        }
        Ok(out)
    }

    /// Root, store, counts, exclusions and whether the disk differs from the last known state.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub(crate) fn status<T: Then>(&self) -> Result<Status, Error> {
        let reader = self.store.reader()?;
        let last_known = reader.last_known()?;
        let mut current = if self.refused.is_some() {
            Capture::default()
        } else {
            self.scan_disk(&NoProgress)?
        };
        let changed = match last_known {
            Some(k) if k != current.id => {
                // Only the subtrees whose ids differ can hold changes.
                let (known, same) = flatten_changed(&reader, &k, &current.entries)?;
                current.entries.retain(|e| !below_any(&e.path, &same));
                diff(&known, &current.entries).paths()
            }
            _ => Vec::new(),
        };
        let mut exclusions: Vec<String> =
            HARD_EXCLUSIONS.iter().map(|s| (*s).to_string()).collect();
        exclusions.push(format!("{} (the store)", self.dir.display()));
        Ok(Status {
            root: self.root.clone(),
            store: self.store.path().to_path_buf(),
            store_bytes: crate::store::disk_bytes(self.store.path()),
            snapshots: states(&reader.snapshots()?),
            exclusions,
            last_known,
            changed_count: changed.len(),
            changed: changed.into_iter().take(MAX_LISTED).collect(),
            watcher: self.watcher_status(),
            walked_because: current.walked_because.clone(),
            nested_repos: current.nested_repos,
            nested_repos_mode: self.settings.nested_repos.value,
            captured_repos: current.captured_repos,
            pending_recovery: crate::restore::journal::get::<T>(&self.store.begin_read()?)?
                .map(|j| format!("{} (started by process {})", j.what, j.pid)),
            conversation_only: self.refused.clone(),
        })
    }
}
