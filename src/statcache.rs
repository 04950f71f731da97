//! The stat cache: a disposable file mapping each path to its last `lstat` data and content
//! id, so unchanged files skip hashing. Losing or corrupting it costs a full re-hash, never
//! data: every malformed input reads as an empty cache.
//!
//! Layout (little endian): header `b"RTSC"`, version u32, `written_ns` i64, store id
//! `[u8; 16]`, entry count u64; then `count` fixed records of [`RECORD_LEN`] bytes sorted
//! by path; then the path bytes. A record is `path_off u64, path_len u32, mode u32, size
//! u64, mtime_ns i64, ctime_ns i64, ino u64, id [u8; 32]`.
//!
//! **Racy timestamps.** A file modified in the same timestamp tick as an earlier write can
//! keep its `lstat` data. So, like git, an entry is trusted only when its mtime and ctime
//! are older than the moment the cache was written by at least [`RACY_MARGIN_NS`]; younger
//! entries are re-hashed next time (tested by `racy_entries_are_not_trusted` and
//! `tests/racy.rs`). The margin covers coarse kernel clocks and 2-second filesystems.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use memmap2::Mmap;

use crate::object::ObjectId;
use crate::scan::ScanEntry;

const MAGIC: &[u8; 4] = b"RTSC";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 4 + 4 + 8 + 16 + 8;
/// Bytes per record.
pub const RECORD_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 32;
/// Entries whose mtime or ctime is within this of the cache's write time are not trusted.
pub const RACY_MARGIN_NS: i64 = 2_000_000_000;

/// One cache entry to write.
#[derive(Clone, Debug)]
pub struct CacheEntry {
    /// Path relative to the workspace root.
    pub path: Vec<u8>,
    /// `st_mode`.
    pub mode: u32,
    /// `st_size`.
    pub size: u64,
    /// mtime in nanoseconds.
    pub mtime_ns: i64,
    /// ctime in nanoseconds.
    pub ctime_ns: i64,
    /// inode number.
    pub ino: u64,
    /// Content id.
    pub id: ObjectId,
}

impl CacheEntry {
    /// An entry for a scanned path with a known id.
    #[must_use]
    pub fn from_scan(e: &ScanEntry, id: ObjectId) -> CacheEntry {
        CacheEntry {
            path: e.path.clone(),
            mode: e.mode,
            size: e.size,
            mtime_ns: e.mtime_ns,
            ctime_ns: e.ctime_ns,
            ino: e.ino,
            id,
        }
    }
}

/// A loaded stat cache (memory-mapped).
pub struct StatCache {
    map: Option<Mmap>,
    count: usize,
    written_ns: i64,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

impl StatCache {
    /// An empty cache (every lookup misses).
    #[must_use]
    pub fn empty() -> StatCache {
        StatCache {
            map: None,
            count: 0,
            written_ns: 0,
        }
    }

    /// Loads the cache at `path`; anything missing, malformed, or written for another store
    /// gives an empty cache.
    #[must_use]
    pub fn load(path: &Path, store_id: &[u8; 16]) -> StatCache {
        let Ok(file) = File::open(path) else {
            return StatCache::empty();
        };
        // SAFETY: the cache file is only ever replaced by rename, never written in place
        // (see `write`), so the mapped inode does not change under us. A process that wrote
        // it in place anyway could only make lookups return wrong ids for paths, and every
        // id read is bounds-checked; that would cost a wrong snapshot entry, never memory
        // safety in this process beyond what the kernel guarantees for a private read map.
        // Measured: mapping avoids reading the whole file for a no-change capture.
        let Ok(map) = (unsafe { Mmap::map(&file) }) else {
            return StatCache::empty();
        };
        if map.len() < HEADER_LEN || &map[..4] != MAGIC || u32_at(&map, 4) != VERSION {
            return StatCache::empty();
        }
        if map[16..32] != store_id[..] {
            return StatCache::empty();
        }
        let written_ns = i64::from_le_bytes(map[8..16].try_into().unwrap_or([0; 8]));
        let Ok(count) = usize::try_from(u64_at(&map, 32)) else {
            return StatCache::empty();
        };
        let records_end = count
            .checked_mul(RECORD_LEN)
            .and_then(|n| n.checked_add(HEADER_LEN));
        if records_end.is_none_or(|end| end > map.len()) {
            return StatCache::empty();
        }
        StatCache {
            map: Some(map),
            count,
            written_ns,
        }
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn record(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let map = self.map.as_deref()?;
        let at = HEADER_LEN + i * RECORD_LEN;
        let rec = map.get(at..at + RECORD_LEN)?;
        let off = usize::try_from(u64_at(rec, 0)).ok()?;
        let len = u32_at(rec, 8) as usize;
        let path = map.get(off..off.checked_add(len)?)?;
        Some((path, rec))
    }

    /// The cached id for `e`, when its `lstat` data match and the entry is not racy.
    #[must_use]
    pub fn lookup(&self, e: &ScanEntry) -> Option<ObjectId> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (path, rec) = self.record(mid)?;
            match path.cmp(e.path.as_slice()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let mtime = u64_at(rec, 24).cast_signed();
                    let ctime = u64_at(rec, 32).cast_signed();
                    let fresh = u32_at(rec, 12) == e.mode
                        && u64_at(rec, 16) == e.size
                        && mtime == e.mtime_ns
                        && ctime == e.ctime_ns
                        && u64_at(rec, 40) == e.ino;
                    let settled = mtime < self.written_ns - RACY_MARGIN_NS
                        && ctime < self.written_ns - RACY_MARGIN_NS;
                    return (fresh && settled)
                        .then(|| rec[48..80].try_into().ok().map(ObjectId))
                        .flatten();
                }
            }
        }
        None
    }

    /// Writes `entries` (any order) as the new cache at `path`, atomically: a temp file in
    /// the same directory, then rename. `written_ns` is the current time (injected for tests).
    ///
    /// # Errors
    /// I/O errors; callers may ignore them (the cache is disposable).
    pub fn write(
        path: &Path,
        store_id: &[u8; 16],
        mut entries: Vec<CacheEntry>,
        written_ns: i64,
    ) -> std::io::Result<()> {
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        entries.dedup_by(|a, b| a.path == b.path);
        let paths_len: usize = entries.iter().map(|e| e.path.len()).sum();
        let mut buf = Vec::with_capacity(HEADER_LEN + entries.len() * RECORD_LEN + paths_len);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&written_ns.to_le_bytes());
        buf.extend_from_slice(store_id);
        buf.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let mut off = (HEADER_LEN + entries.len() * RECORD_LEN) as u64;
        for e in &entries {
            buf.extend_from_slice(&off.to_le_bytes());
            buf.extend_from_slice(&u32::try_from(e.path.len()).unwrap_or(0).to_le_bytes());
            buf.extend_from_slice(&e.mode.to_le_bytes());
            buf.extend_from_slice(&e.size.to_le_bytes());
            buf.extend_from_slice(&e.mtime_ns.to_le_bytes());
            buf.extend_from_slice(&e.ctime_ns.to_le_bytes());
            buf.extend_from_slice(&e.ino.to_le_bytes());
            buf.extend_from_slice(&e.id.0);
            off += e.path.len() as u64;
        }
        for e in &entries {
            buf.extend_from_slice(&e.path);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".statcache.tmp.{}", std::process::id()));
        let mut f = File::create(&tmp)?;
        f.write_all(&buf)?;
        drop(f);
        fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::ScanKind;

    fn scan_entry(path: &[u8], mtime_ns: i64) -> ScanEntry {
        ScanEntry {
            path: path.to_vec(),
            kind: ScanKind::File,
            size: 5,
            mtime_ns,
            ctime_ns: mtime_ns,
            ino: 7,
            mode: 0o100_644,
        }
    }

    const STORE: [u8; 16] = [3; 16];
    const T0: i64 = 1_000_000_000_000;

    fn write(dir: &Path, entries: &[ScanEntry], at: i64) {
        let id = ObjectId::of_blob(b"hello");
        let list = entries
            .iter()
            .map(|e| CacheEntry::from_scan(e, id))
            .collect();
        StatCache::write(&dir.join("c"), &STORE, list, at).unwrap();
    }

    #[test]
    fn hits_only_on_identical_stat_data() {
        let d = tempfile::tempdir().unwrap();
        let entries: Vec<_> = (0..50)
            .map(|i| scan_entry(format!("f{i:03}").as_bytes(), T0))
            .collect();
        write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
        let c = StatCache::load(&d.path().join("c"), &STORE);
        assert_eq!(c.len(), 50);
        for e in &entries {
            assert_eq!(c.lookup(e), Some(ObjectId::of_blob(b"hello")));
        }
        let mut changed = entries[3].clone();
        changed.size = 6;
        assert_eq!(c.lookup(&changed), None);
        assert_eq!(c.lookup(&scan_entry(b"absent", T0)), None);
    }

    #[test]
    fn racy_entries_are_not_trusted() {
        let d = tempfile::tempdir().unwrap();
        let e = scan_entry(b"racy", T0);
        // Written in the same instant the file was modified: must be re-hashed.
        write(d.path(), std::slice::from_ref(&e), T0);
        assert_eq!(
            StatCache::load(&d.path().join("c"), &STORE).lookup(&e),
            None
        );
        write(d.path(), std::slice::from_ref(&e), T0 + RACY_MARGIN_NS - 1);
        assert_eq!(
            StatCache::load(&d.path().join("c"), &STORE).lookup(&e),
            None
        );
        write(d.path(), std::slice::from_ref(&e), T0 + RACY_MARGIN_NS + 1);
        assert!(
            StatCache::load(&d.path().join("c"), &STORE)
                .lookup(&e)
                .is_some()
        );
    }

    #[test]
    fn garbage_and_foreign_caches_read_as_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c");
        fs::write(&p, b"RTSC\x01\0\0\0garbage").unwrap();
        assert!(StatCache::load(&p, &STORE).is_empty());
        write(d.path(), &[scan_entry(b"a", T0)], T0 * 2);
        assert!(StatCache::load(&p, &[9; 16]).is_empty());
        let mut bytes = fs::read(&p).unwrap();
        bytes[32] = 0xff; // absurd count
        fs::write(&p, &bytes).unwrap();
        assert!(StatCache::load(&p, &STORE).is_empty());
    }
}
