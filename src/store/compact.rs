//! Compacting the store file: when the disk blocks it uses grow well past its live data,
//! redb's pages freed and not reused are given back.

use super::schema::{self, META};
use super::{Store, disk_bytes};

/// Stores smaller than this are never compacted (redb's own metadata dominates them).
const COMPACT_MIN_FILE: u64 = 8 * 1024 * 1024;
/// Compact when the disk blocks in use exceed this percentage of the pack log.
const COMPACT_RATIO_PERCENT: u64 = 130;

impl Store {
    /// Compacts the file when it holds much more than its live data, best effort.
    ///
    /// redb grows a file by doubling its length (until 4 GiB), but the growth is sparse: the
    /// disk blocks actually used stay close to the data (measured 1.04× the pack log, see
    /// docs/benchmarks.md). So the trigger is the blocks in use, not the length; compacting on
    /// length would run after nearly every commit, since the next commit grows the file
    /// again. Real dead space (pages freed and not reused) is what this reclaims. It needs
    /// no live transaction in any process, so it is skipped (not waited for) when another
    /// process is busy. Returns whether it ran.
    pub fn compact_if_sparse(&self) -> bool {
        if !self.is_sparse() {
            return false;
        }
        let ran = self.compact_now();
        // What compaction could not give back is not asked for again until the file grows.
        let after = disk_bytes(&self.path);
        let e = self.db_err();
        let _ = self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            meta.insert(schema::META_COMPACTED, after.to_le_bytes().as_slice())
                .map_err(|x| e(x.into()))?;
            Ok(())
        });
        ran
    }

    /// Whether [`Store::compact_if_sparse`] would compact: the disk blocks in use exceed
    /// 1.3× the pack log, and the file grew by a tenth since the last compaction attempt.
    /// One read transaction and one `stat`; for deciding whether to start a background
    /// pass.
    #[must_use]
    pub fn is_sparse(&self) -> bool {
        let Ok(reader) = self.reader() else {
            return false;
        };
        let live = reader.log_end().unwrap_or(0);
        let floor = reader
            .meta_value(schema::META_COMPACTED)
            .ok()
            .flatten()
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0);
        drop(reader);
        let disk = disk_bytes(&self.path);
        disk >= COMPACT_MIN_FILE
            && disk * 100 > live * COMPACT_RATIO_PERCENT
            && disk * 10 > floor * 11
    }

    /// Compacts the file now if no live transaction (in any process) prevents it; returns
    /// whether it ran. Busy elsewhere: skipped, tried again next time.
    pub(crate) fn compact_now(&self) -> bool {
        let Ok(mut db) = self.db.write() else {
            return false;
        };
        let Some(db) = db.as_mut() else {
            return false;
        };
        let mut ran = false;
        for _ in 0..4 {
            match db.compact() {
                Ok(true) => ran = true,
                Ok(false) | Err(_) => break,
            }
        }
        ran
    }
}
