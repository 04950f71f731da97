//! Capturing the workspace: the one call into the capture every variant goes through
//! (recorded or not, stored or not, with or without the list of every path), and the
//! snapshot of a list of entries the disk is about to hold.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Shared, WorkingCopy};
use crate::capture::{self, Capture, CaptureContext, CaptureOptions};
use crate::error::{CaptureError, StoreError};
use crate::object::{FlatEntry, ObjectId};
use crate::progress::Progress;
use crate::restore::journal::Then;

impl WorkingCopy {
    fn capture(&self, opts: &CaptureOptions<'_>) -> Result<Capture, CaptureError> {
        if let Some(why) = &self.refused {
            return Err(CaptureError::Refused {
                path: self.root.clone(),
                why: why.clone(),
            });
        }
        let statcache = self.dir.join("statcache");
        let runtime_dir = self.runtime_dir();
        // What the settings add to the walk's rules key: the credentials allowed back.
        let rules_settings = self.settings.allow_secrets.value.join("\0");
        let ctx = CaptureContext {
            allow_secrets: self.allow_secrets.as_deref(),
            rules_settings: rules_settings.as_bytes(),
            root: &self.root,
            store: &self.store,
            statcache: &statcache,
            store_dir: Some(&self.dir),
            nested_repos: self.settings.nested_repos.value,
            watch: Some(crate::capture::WatchAsk {
                runtime_dir: &runtime_dir,
                timeout: Duration::from_millis(self.settings.watch_timeout_ms.value),
                rescan: opts.rescan,
            }),
        };
        let captured = capture::capture(&ctx, opts);
        if let Ok(c) = &captured
            && c.walked_because.as_deref() == Some("watch_limit")
        {
            self.warn_watch_limit_once(&runtime_dir);
        }
        if captured.is_err() {
            // A disk that filled during the write: give its pages back now (see store::space).
            self.store.give_back();
        }
        captured
    }

    /// [`crate::Workspace::snapshot_with`]: recovers an interrupted restore, whose journal
    /// records a `T`, first.
    pub(crate) fn snapshot_with<T: Then>(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
        list: bool,
        rescan: bool,
    ) -> Result<Capture, CaptureError> {
        self.recover_if_needed::<T>(self.history_wait);
        let lock = self.lock_shared(crate::store::LOCK_WAIT)?;
        let c = lock.capture(&CaptureOptions {
            store_objects: true,
            record: Some(label),
            progress,
            also: None,
            list,
            rescan,
            cache: crate::capture::CacheRewrite::Always,
        })?;
        drop(lock);
        Ok(c)
    }

    /// Scans the disk and computes its snapshot id without storing anything.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn scan_disk(&self, progress: &dyn Progress) -> Result<Capture, CaptureError> {
        self.capture(&CaptureOptions::plain(false, None, progress))
    }
}

impl Shared<'_> {
    /// Captures and records a snapshot.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn record(&self, label: Option<String>, progress: &dyn Progress) -> Result<Capture, CaptureError> {
        self.capture(&CaptureOptions::plain(true, Some(label), progress))
    }

    /// Captures the disk, storing new objects but recording no snapshot (so every entry of
    /// the result is in the store).
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn store_disk(&self, progress: &dyn Progress) -> Result<Capture, CaptureError> {
        self.capture(&CaptureOptions::plain(true, None, progress))
    }

    /// [`Exclusive::store_disk`] without the list of every path (its `entries` are empty):
    /// a watcher's answer can then spare the walk, and no list of the whole workspace is
    /// built. An operation that changes some paths reads the disk there from the stored
    /// snapshot ([`partial::entries_at`]). The stat cache is left as it is when only a few
    /// files were read ([`crate::capture::CacheRewrite::Deferred`]): the operation is about to write
    /// those paths, so the next capture would find their records stale anyway.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub(crate) fn store_disk_unlisted(&self, progress: &dyn Progress) -> Result<Capture, CaptureError> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: None,
            progress,
            also: None,
            list: false,
            rescan: false,
            cache: crate::capture::CacheRewrite::Deferred,
        })
    }

    /// The snapshot `entries` stands for (a full sorted list of what the disk will hold,
    /// directory ids right except at `dirty` paths, every file's blob already in the store):
    /// only the directories on dirty paths are rebuilt. Returns the root and the trees the
    /// store lacks, to be written before the snapshot is used.
    pub(crate) fn prepare_list(
        &self,
        entries: &mut [FlatEntry],
        dirty: &std::collections::HashSet<crate::object::RelPath>,
    ) -> Result<(ObjectId, Vec<crate::object::NewFrame>), StoreError> {
        let reader = self.store.reader()?;
        // Called from several threads (sibling directories are built in parallel).
        let found = Mutex::new((Vec::new(), None));
        let root = crate::capture::tree_of_list(entries, dirty, &|id, bytes| {
            let known = reader.contains(&id);
            let mut found = found.lock().unwrap_or_else(PoisonError::into_inner);
            match known {
                Ok(true) => {}
                Ok(false) => found.0.push(crate::object::PendingObject::whole(
                    id,
                    crate::object::ObjectKind::Tree,
                    bytes.len() as u64,
                    bytes,
                )),
                Err(e) => {
                    found.1.get_or_insert(e);
                }
            }
        });
        let (trees, fault) = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = fault {
            return Err(e);
        }
        Ok((root, crate::object::NewFrame::pack_trees(&trees)))
    }

    /// [`Shared::record`], writing `also`'s records in the capture's final commit.
    pub(crate) fn record_with(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
        also: crate::capture::AlsoCommit<'_>,
    ) -> Result<Capture, CaptureError> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: Some(label),
            progress,
            also: Some(also),
            list: false,
            rescan: false,
            cache: crate::capture::CacheRewrite::Always,
        })
    }
}
