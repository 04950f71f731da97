//! Disk space. A write that does not fit must fail before it starts, saying how much it
//! needs and how much is free; and a write that fails anyway (the disk filled meanwhile)
//! must give back what it allocated. redb writes a transaction's pages into the file before
//! committing; when the commit fails for lack of space those pages stay allocated on disk
//! (sparse holes filled), redb refuses further writes until the file is reopened, and the
//! store then holds no more data but much more disk. Reopening and compacting truncates the
//! file back to its live pages (measured: a 16 MB failed capture on a full 40 MB tmpfs gives
//! back all but 36 KB, with 0 bytes free: compaction moves live pages down into pages that
//! already exist on disk). `tests/full_disk.rs` exercises both paths.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::Store;
use super::open::open_db;
use crate::error::StoreError;
use crate::object::NewFrame;

/// Measures the bytes free for an unprivileged writer on the filesystem holding `dir`.
pub type FreeSpace = fn(&Path) -> std::io::Result<u64>;

/// The real [`FreeSpace`]: `statvfs`'s blocks available to unprivileged users.
///
/// # Errors
/// When `statvfs` fails.
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    let s = rustix::fs::statvfs(dir)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Writes of at least this many stored bytes are checked against the free space first.
const LARGE_WRITE: u64 = 1 << 20;

/// Below this much free space, maintenance compacts before it writes anything.
const LOW_SPACE: u64 = 64 << 20;

/// Whether redb failed because the filesystem is full.
pub(super) fn is_full(e: &redb::Error) -> bool {
    const ENOSPC: i32 = 28;
    match e {
        redb::Error::Io(io) => {
            io.raw_os_error() == Some(ENOSPC) || io.kind() == std::io::ErrorKind::StorageFull
        }
        _ => false,
    }
}

impl Store {
    /// Free bytes where the store lives (`u64::MAX` when it cannot be measured: an
    /// unmeasurable disk is not a reason to refuse a write).
    pub(super) fn free_bytes(&self) -> u64 {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        (self.free_space)(dir).unwrap_or(u64::MAX)
    }

    /// Free bytes on the filesystem holding `dir`, measured as the store measures its own
    /// (`u64::MAX` when it cannot be measured).
    pub(crate) fn free_bytes_at(&self, dir: &Path) -> u64 {
        (self.free_space)(dir).unwrap_or(u64::MAX)
    }

    /// Refuses a large write that cannot fit: its frames, plus an eighth for redb's pages
    /// (leaf headers, index records, copied-on-write branches), plus 1 MiB.
    pub(super) fn check_space(&self, frames: &[NewFrame]) -> Result<(), StoreError> {
        let bytes: u64 = frames.iter().map(|f| f.stored.len() as u64).sum();
        if bytes < LARGE_WRITE {
            return Ok(());
        }
        let needed = bytes + bytes / 8 + (1 << 20);
        let free = self.free_bytes();
        if free < needed {
            return Err(StoreError::NoSpace {
                path: self.path.clone(),
                needed: Some(needed),
                free,
            });
        }
        Ok(())
    }

    /// After a write failed for lack of space: reopens the file (redb refuses writes until
    /// then) and compacts it, giving back the failed transaction's pages. Skipped while a
    /// reader of this store is alive (it keeps the old file open); tried again next time.
    /// Returns whether it compacted.
    pub fn give_back(&self) -> bool {
        if !self.write_failed.load(Ordering::Relaxed) || std::sync::Arc::strong_count(&self.db) > 1
        {
            return false;
        }
        {
            let Ok(mut db) = self.db.write() else {
                return false;
            };
            *db = None; // closes the file: redb allows one open per process
            match open_db(&self.path, false) {
                Ok(fresh) => *db = Some(fresh),
                Err(_) => return false,
            }
        }
        self.write_failed.store(false, Ordering::Relaxed);
        self.compact_now()
    }

    /// Before maintenance writes anything: gives back a failed write's pages, and on a
    /// nearly full disk compacts first, so `retrace gc` can run where every new page would
    /// fail. Returns whether it compacted.
    pub fn make_room(&self) -> bool {
        let gave = self.give_back();
        gave || (self.free_bytes() < LOW_SPACE && self.compact_now())
    }
}
