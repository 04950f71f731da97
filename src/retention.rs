//! Keeping the store small: garbage collection from every live root (and, as they land,
//! retention rules that decide which history stops being a root).

use crate::error::Error;
use crate::history::db;
use crate::lock::LockMode;
use crate::object::ObjectId;
use crate::restore::journal;
use crate::statcache::StatCache;
use crate::store::GcReport;
use crate::workspace::Workspace;

/// Objects younger than this are never collected, referenced or not: a capture in another
/// process may have written them and not yet recorded the snapshot that names them.
pub const DEFAULT_GRACE_SECS: u64 = 3600;

impl Workspace {
    /// Every snapshot something still refers to: the snapshot log, the last known state,
    /// every session's turns, checkpoints and derived state, an interrupted restore's
    /// journal, and the stat cache's snapshot (whose ids the next capture trusts unread).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn gc_roots(&self) -> Result<Vec<ObjectId>, Error> {
        let reader = self.store.reader()?;
        let mut roots: Vec<ObjectId> = reader.snapshots()?.into_iter().map(|s| s.root).collect();
        roots.extend(reader.last_known()?);
        let tx = self.store.begin_read()?;
        let path = self.store.path();
        for (key, _) in db::sessions(&tx, path)? {
            let l = db::load(&tx, path, &key)?;
            for t in &l.turns {
                roots.extend(t.before);
                roots.extend(t.after);
            }
            roots.extend(l.checkpoints.iter().map(|c| c.snapshot));
            roots.extend(l.state.last_known);
        }
        if let Some(j) = journal::get(&tx, path)? {
            roots.push(j.source);
            roots.push(j.target);
        }
        let cache = StatCache::load(&self.dir.join("statcache"), &reader.store_id()?);
        if cache.root() != ObjectId::ZERO {
            roots.push(cache.root());
        }
        roots.sort_unstable();
        roots.dedup();
        Ok(roots)
    }

    /// Collects unreferenced objects older than `grace_secs` and compacts the store. Holds
    /// the workspace lock exclusively (captures wait; the wait is bounded), and completes an
    /// interrupted restore first.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or stays busy.
    pub fn gc(&self, grace_secs: u64, dry_run: bool) -> Result<GcReport, Error> {
        let _lock = self.lock(LockMode::Exclusive, crate::store::LOCK_WAIT)?;
        if let Some(report) = self.recover_locked(&crate::progress::NoProgress)? {
            self.warn(report);
        }
        let roots = self.gc_roots()?;
        Ok(self.store.collect(&roots, grace_secs, dry_run)?)
    }
}
