//! The stat cache: a disposable file mapping each path to its last `lstat` data and content
//! id, so unchanged files skip hashing. Losing or corrupting it costs a full re-hash, never
//! data: every malformed input reads as an empty cache.
//!
//! Layout (little endian): header `b"RTSC"`, version u32, `written_ns` i64, store key
//! `[u8; 16]`, entry count u64, root tree id `[u8; 32]`, rules key `[u8; 32]`; then `count`
//! fixed records of [`RECORD_LEN`] bytes sorted by path; then the path bytes; then a 32-byte
//! blake3 of everything before it. A record is `path_off u64, path_len u32, mode u32, size
//! u64, mtime_ns i64, ctime_ns i64, ino u64, id [u8; 32], kind u8, flags u8, 6 bytes of
//! padding`. Flag bit 0 on a directory: its listing may be reused (see below).
//!
//! **Directory listings.** A directory's record keeps its own `lstat` data (its size field
//! holds the tree's size instead). When a later walk finds the directory with the same
//! mode, mtime, ctime and inode, settled (older than the walk that listed it by the racy
//! margin), and the rules key unchanged, its entries are the ones the cache lists below it:
//! the walk `lstat`s those and skips the `readdir` and the ignore matching (see
//! [`crate::scan`]). `written_ns` is the moment the capture began, before its walk, so every
//! listing and read it recorded happened after it.
//!
//! **Checksum.** A cached id is trusted for as long as its file's `lstat` holds, so one
//! flipped bit in an id would otherwise poison every later snapshot of that file (and every
//! tree rebuilt around it). The trailer is checked on every load; a cache that fails it
//! reads as empty and the capture rewrites it (tested by
//! `a_flipped_bit_anywhere_empties_the_cache` and `tests/incremental.rs`). Hashing reads
//! the file once, as the merge with the scan does anyway (about 130 bytes per path).
//!
//! Every path of the snapshot is listed — files, symlinks, directories (with their tree id)
//! and nested repositories — so that a capture can prove a whole directory unchanged (all
//! its descendants hit, none missing) and reuse its tree id without rebuilding it.
//!
//! **Racy timestamps.** A file modified in the same timestamp tick as an earlier write can
//! keep its `lstat` data. So, like git, an entry is trusted only when its mtime and ctime
//! are older than the moment the cache was written by at least [`RACY_MARGIN_NS`]; younger
//! entries are re-hashed next time (tested by `racy_entries_are_not_trusted` and
//! `tests/racy.rs`). The margin covers coarse kernel clocks and 2-second filesystems.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;

use crate::object::ObjectId;
use crate::dirent::{ScanEntry, ScanKind};

const MAGIC: &[u8; 4] = b"RTSC";
/// Version 3 added the checksum trailer, version 4 the rules key and the listing flag,
/// version 5 the watcher token, the totals, the header checksum and the linked flag; older
/// caches read as empty (a full re-hash).
const VERSION: u32 = 5;
/// Length of the checksum trailer.
/// Bytes of the blake3 checksum that ends the file.
pub const CHECKSUM_LEN: usize = 32;
/// Bytes of the header before the first record: the fields, then a blake3 of them.
pub const HEADER_LEN: usize = HEAD_FIELDS + 32;
/// Bytes of the header's fields (before its own checksum).
const HEAD_FIELDS: usize = 4 + 4 + 8 + 16 + 8 + 32 + 32 + 8 + 8 + 8 + 8 + 8;
/// Header flag: the capture that wrote the cache left nothing out but by ignore rules,
/// found no nested repository, and every directory's listing may be reused.
const HEAD_QUIET: u64 = 1;
/// Header flag: as [`HEAD_QUIET`], but the snapshot holds nested repositories left alone
/// (`nested_repos = "skip"`), whose records the cache holds. A bit of its own, so that a
/// reader that knows only [`HEAD_QUIET`] takes such a head as not quiet and walks.
const HEAD_QUIET_NESTED: u64 = 2;
/// Flag bit: the directory's listing may be reused while its `lstat` data hold.
const FLAG_LISTING: u8 = 1;
/// Flag bit: the file had more than one hard link (see [`Stat::linked`]).
const FLAG_LINKED: u8 = 2;
/// Bytes per record.
pub const RECORD_LEN: usize = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 32 + 8;
/// Numbers the temp files of concurrent writes.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Entries whose mtime or ctime is within this of the cache's write time are not trusted.
pub const RACY_MARGIN_NS: i64 = 2_000_000_000;

/// One cache entry to write; the path is borrowed from the capture's entries.
#[derive(Clone, Copy, Debug)]
pub struct CacheEntry<'a> {
    /// Path relative to the workspace root.
    pub path: &'a [u8],
    /// `lstat` data.
    pub stat: Stat,
    /// Content id: blob, or tree for a directory, zero for a nested repository.
    pub id: ObjectId,
    /// What the path is.
    pub kind: ScanKind,
    /// For a directory: its listing may be reused while its `lstat` data hold
    /// ([`ScanEntry::listing`]).
    pub listing: bool,
}

fn kind_of_byte(b: u8) -> Option<ScanKind> {
    match b {
        0 => Some(ScanKind::File),
        1 => Some(ScanKind::Symlink),
        2 => Some(ScanKind::Dir),
        3 => Some(ScanKind::NestedRepo),
        _ => None,
    }
}

fn kind_byte(k: ScanKind) -> u8 {
    match k {
        ScanKind::File => 0,
        ScanKind::Symlink => 1,
        ScanKind::Dir => 2,
        ScanKind::NestedRepo => 3,
    }
}

/// The `lstat` fields the cache compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
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
    /// A file with more than one hard link: written through another path, it changes with
    /// no event in its directory, so a watcher never vouches for it.
    pub linked: bool,
}

impl Stat {
    /// The fields of a scanned entry.
    #[must_use]
    pub fn of(e: &ScanEntry) -> Stat {
        Stat {
            mode: e.mode,
            size: e.size,
            mtime_ns: e.mtime_ns,
            ctime_ns: e.ctime_ns,
            ino: e.ino,
            linked: e.linked,
        }
    }
}

impl CacheEntry<'_> {
    /// An entry for a scanned path with a known id.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    #[must_use]
    pub fn from_scan(e: &ScanEntry, id: ObjectId) -> CacheEntry<'_> {
        CacheEntry {
            path: &e.path,
            stat: Stat::of(e),
            id,
            kind: e.kind,
            listing: e.listing,
        }
    }
}

/// A path the cache lists, as [`StatCache::children`] gives it.
#[derive(Clone, Copy, Debug)]
pub struct Cached<'a> {
    /// The full path.
    pub path: &'a [u8],
    /// What it was.
    pub kind: ScanKind,
    /// Its `lstat` data then (a directory's size field holds its tree's size).
    pub stat: Stat,
    /// For a directory: whether its listing may be reused.
    pub listing: bool,
}

/// The bytes a cache was read from: the mapped file, or bytes handed to
/// [`StatCache::decode`].
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // `Owned`: `decode`
enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A loaded stat cache (memory-mapped).
pub struct StatCache {
    map: Option<Bytes>,
    /// Bytes of `map` before the checksum trailer.
    body: usize,
    count: usize,
    written_ns: i64,
    root: ObjectId,
    rules: [u8; 32],
    head: Head,
}

/// What a cache's header says, checked by its own checksum: all a capture needs when a
/// watcher says nothing changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// The snapshot the records describe.
    pub root: ObjectId,
    /// The walk's rules key.
    pub rules: [u8; 32],
    /// When the capture that wrote it began.
    pub written_ns: i64,
    /// The watcher token taken before that capture observed anything.
    pub token: Option<crate::vouch::Token>,
    /// Files and symlinks of the snapshot, and their bytes.
    pub files: u64,
    /// See `files`.
    pub bytes: u64,
    /// See [`Header::quiet`].
    pub quiet: bool,
    /// See [`Header::nested`].
    pub nested: bool,
    /// The checksum of the cache file's own header: which version of the cache this head
    /// goes with.
    pub cache: [u8; 32],
    /// This head is a watched capture's, written beside the cache
    /// ([`StatCache::write_watched`]): the disk is as it says, the cache's records are
    /// older (those of the capture that wrote the cache).
    pub beside: bool,
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
            body: 0,
            count: 0,
            written_ns: 0,
            root: ObjectId::ZERO,
            rules: [0; 32],
            head: Head::default(),
        }
    }

    /// The header of the cache at `path` alone (no record is read, nor the body's checksum
    /// checked), when it is whole and written for `store_id`; or, when a watched capture
    /// wrote one beside it for this version of the cache, that one
    /// ([`StatCache::write_watched`]).
    #[must_use]
    pub fn load_head(path: &Path, store_id: &[u8; 16]) -> Option<Head> {
        let mut f = File::open(path).ok()?;
        let mut buf = [0u8; HEADER_LEN];
        std::io::Read::read_exact(&mut f, &mut buf).ok()?;
        let head = parse_head(&buf, store_id)?;
        Some(Self::load_watched(path, &head, store_id).unwrap_or(head))
    }

    /// The head a watched capture wrote beside the cache whose own head is `base`, if it is
    /// whole, written for `store_id` and for that version of the cache.
    fn load_watched(path: &Path, base: &Head, store_id: &[u8; 16]) -> Option<Head> {
        let mut b = Vec::with_capacity(WATCHED_LEN + 1);
        let f = File::open(watched_path(path)).ok()?;
        std::io::Read::read_to_end(&mut std::io::Read::take(f, WATCHED_LEN as u64 + 1), &mut b)
            .ok()?;
        if b.len() != WATCHED_LEN
            || blake3::hash(&b[..WATCHED_LEN - 32]).as_bytes()[..] != b[WATCHED_LEN - 32..]
            || b[HEADER_LEN..HEADER_LEN + 32] != base.cache
        {
            return None;
        }
        let head = parse_head(&b[..HEADER_LEN], store_id)?;
        Some(Head {
            cache: base.cache,
            beside: true,
            ..head
        })
    }

    /// Writes `header` beside the cache at `path` for the cache whose own head is `base`
    /// (`<path>.watched`, atomically: a temp file, then rename): what a capture that a
    /// watcher told where to look found, without rewriting every record. The cache's records
    /// stay those of `base`'s capture, which [`StatCache::load`] still gives; a later write
    /// of the cache makes this head stale (it names another version) and removes it.
    ///
    /// # Errors
    /// I/O errors; callers may ignore them (the next capture then walks).
    pub fn write_watched(path: &Path, base: &Head, header: &Header<'_>) -> std::io::Result<()> {
        let mut b = encode_head(header, 0);
        b.extend_from_slice(&base.cache);
        let sum = blake3::hash(&b);
        b.extend_from_slice(sum.as_bytes());
        let dir = path.parent().unwrap_or(Path::new("."));
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".statcache.tmp.{}.{n}", std::process::id()));
        let wrote = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&b));
        match wrote {
            Ok(()) => fs::rename(&tmp, watched_path(path)),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The cache at `path` mapped without checking its trailer (the header's own checksum
    /// is checked): for a capture that checks every id it takes from it against a tree of
    /// the store, so that a flipped bit costs a read, never a wrong id. `None` when the file
    /// is not whole or its header is not `expect` (it was replaced meanwhile).
    #[must_use]
    pub fn load_unverified(path: &Path, store_id: &[u8; 16], expect: &Head) -> Option<StatCache> {
        let file = File::open(path).ok()?;
        // SAFETY: as in `load`: the file is only ever replaced by rename, and every read of
        // the map is bounds-checked (and a truncation in place, which retrace never does,
        // would raise SIGBUS, as said there).
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let cache = StatCache::parse(Bytes::Map(map), store_id, false);
        (cache.head.cache == expect.cache && cache.map.is_some()).then_some(cache)
    }

    /// Whether the body matches its checksum trailer: what [`StatCache::load`] checks, for a
    /// cache mapped by [`StatCache::load_unverified`] whose records a capture means to trust
    /// as a walk does (one pass over the file).
    #[must_use]
    pub fn verify(&self) -> bool {
        self.map.as_deref().is_some_and(|map| {
            map.get(self.body..)
                .is_some_and(|sum| blake3::hash(&map[..self.body]).as_bytes()[..] == *sum)
        })
    }

    /// The header (see [`StatCache::load_head`]).
    #[must_use]
    pub fn head(&self) -> Head {
        self.head
    }

    /// Loads the cache at `path`; anything missing, malformed, failing its checksum, or
    /// written for another store (or store state: see `StoreReader::cache_key`) gives an
    /// empty cache.
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
        // One thing a mapping can do that a read cannot: a process that truncated the file
        // in place would make a read of a page past the new end raise SIGBUS and kill this
        // process. retrace never truncates it (a new cache is written beside it and renamed
        // over it), the file lives in retrace's own home, not the workspace, and a process
        // that truncates files there can as well delete the store: the risk is accepted.
        // Measured: mapping avoids reading the whole file for a no-change capture.
        let Ok(map) = (unsafe { Mmap::map(&file) }) else {
            return StatCache::empty();
        };
        StatCache::parse(Bytes::Map(map), store_id, true)
    }

    /// The cache held in `bytes`, checked exactly as [`StatCache::load`] checks a file:
    /// anything malformed, or written for another store, gives an empty cache. Captures use
    /// `load`; this is the same decoder for tests and the fuzzer.
    #[must_use]
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    pub fn decode(bytes: Vec<u8>, store_id: &[u8; 16]) -> StatCache {
        StatCache::parse(Bytes::Owned(bytes), store_id, true)
    }

    fn parse(map: Bytes, store_id: &[u8; 16], check: bool) -> StatCache {
        if map.len() < HEADER_LEN + CHECKSUM_LEN {
            return StatCache::empty();
        }
        let Some(head) = parse_head(&map[..HEADER_LEN], store_id) else {
            return StatCache::empty();
        };
        let body = map.len() - CHECKSUM_LEN;
        if check && blake3::hash(&map[..body]).as_bytes()[..] != map[body..] {
            return StatCache::empty();
        }
        let written_ns = head.written_ns;
        let Ok(count) = usize::try_from(u64_at(&map, 32)) else {
            return StatCache::empty();
        };
        let records_end = count
            .checked_mul(RECORD_LEN)
            .and_then(|n| n.checked_add(HEADER_LEN));
        if records_end.is_none_or(|end| end > body) {
            return StatCache::empty();
        }
        let root = ObjectId(map[40..72].try_into().unwrap_or([0; 32]));
        let rules = map[72..104].try_into().unwrap_or([0; 32]);
        StatCache {
            map: Some(map),
            body,
            count,
            written_ns,
            root,
            rules,
            head,
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
        // Past the last record lie the path bytes: never read them as a record.
        if i >= self.count {
            return None;
        }
        let map = self.map.as_deref()?.get(..self.body)?;
        let at = HEADER_LEN + i * RECORD_LEN;
        let rec = map.get(at..at + RECORD_LEN)?;
        let off = usize::try_from(u64_at(rec, 0)).ok()?;
        let len = u32_at(rec, 8) as usize;
        let path = map.get(off..off.checked_add(len)?)?;
        Some((path, rec))
    }

    /// The root tree id of the snapshot the cache was written for.
    #[must_use]
    pub fn root(&self) -> ObjectId {
        self.root
    }

    /// The rules key the walk that wrote the cache ran with (see [`crate::scan`]).
    #[must_use]
    pub fn rules(&self) -> [u8; 32] {
        self.rules
    }

    /// When the capture that wrote the cache began (ns since the epoch).
    #[must_use]
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    pub fn written_ns(&self) -> i64 {
        self.written_ns
    }

    /// Whether `stat` is older than the cache's racy horizon (mtime and ctime both).
    #[must_use]
    pub fn settled(&self, stat: &Stat) -> bool {
        // Saturating: a damaged `written_ns` near i64::MIN must not wrap to the far future.
        let horizon = self.written_ns.saturating_sub(RACY_MARGIN_NS);
        stat.mtime_ns < horizon && stat.ctime_ns < horizon
    }

    /// Record `i` as [`StatCache::children`] gives it; `None` past the end or when it is
    /// malformed.
    #[must_use]
    pub fn at(&self, i: usize) -> Option<Cached<'_>> {
        self.cached(i)
    }

    fn cached(&self, i: usize) -> Option<Cached<'_>> {
        let (path, rec) = self.record(i)?;
        Some(Cached {
            path,
            kind: kind_of_byte(rec[80])?,
            stat: Stat {
                mode: u32_at(rec, 12),
                size: u64_at(rec, 16),
                mtime_ns: u64_at(rec, 24).cast_signed(),
                ctime_ns: u64_at(rec, 32).cast_signed(),
                ino: u64_at(rec, 40),
                linked: rec[81] & FLAG_LINKED != 0,
            },
            listing: rec[81] & FLAG_LISTING != 0,
        })
    }

    /// The paths of the records of nested repositories, in path order (one pass over the
    /// records' kinds; `None` when a record is malformed).
    #[must_use]
    pub fn nested_repos(&self) -> Option<Vec<&[u8]>> {
        use rayon::prelude::*;
        let map = self.map.as_deref()?;
        (0..self.count)
            .into_par_iter()
            .with_min_len(1 << 16)
            .filter(|&i| {
                map.get(HEADER_LEN + i * RECORD_LEN + 80)
                    .is_none_or(|&k| k == kind_byte(ScanKind::NestedRepo))
            })
            .map(|i| self.record(i).map(|(path, _)| path))
            .collect()
    }

    /// The record of exactly `path`.
    #[must_use]
    pub fn get(&self, path: &[u8]) -> Option<Cached<'_>> {
        let i = self.lower_bound(path);
        self.cached(i).filter(|c| c.path == path)
    }

    /// The records directly inside the directory `prefix` (empty for the root, else ending
    /// in `/`), in path order; `None` when a record is malformed. Deeper records are
    /// skipped a subtree at a time.
    #[must_use]
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    pub fn children(&self, prefix: &[u8]) -> Option<Vec<Cached<'_>>> {
        self.child_indices(prefix)?
            .into_iter()
            .map(|i| self.cached(i))
            .collect()
    }

    /// [`StatCache::children`] as record indices (ascending, so in path order).
    #[must_use]
    pub fn child_indices(&self, prefix: &[u8]) -> Option<Vec<usize>> {
        let mut out = Vec::new();
        let mut i = self.lower_bound(prefix);
        while i < self.count {
            let (path, _) = self.record(i)?;
            let Some(rest) = path.strip_prefix(prefix) else {
                break;
            };
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    out.push(i);
                    i += 1;
                }
                // Inside a subdirectory (which sorts after names like `sub.txt`): jump past
                // every path of that subdirectory. Always forward: unsorted records (a
                // crafted file with a valid checksum) must not send it round in a loop.
                Some(slash) => {
                    i = self.past_prefix(&path[..=prefix.len() + slash]).max(i + 1);
                }
            }
        }
        Some(out)
    }

    /// The path of record `i`; `None` past the end or when it is malformed.
    #[must_use]
    pub fn path(&self, i: usize) -> Option<&[u8]> {
        self.record(i).map(|(p, _)| p)
    }

    /// Record `i` whole; `None` past the end or when it is malformed.
    #[must_use]
    pub fn entry(&self, i: usize) -> Option<CacheEntry<'_>> {
        let c = self.cached(i)?;
        let (_, rec) = self.record(i)?;
        Some(CacheEntry {
            path: c.path,
            stat: c.stat,
            id: ObjectId(rec[48..80].try_into().ok()?),
            kind: c.kind,
            listing: c.listing,
        })
    }

    /// Index of the first record past every path starting with `prefix`.
    /// The indices of the records below `prefix` (which ends in `/`): `start..end`.
    #[must_use]
    pub fn prefix_range(&self, prefix: &[u8]) -> (usize, usize) {
        (self.lower_bound(prefix), self.past_prefix(prefix))
    }

    fn past_prefix(&self, prefix: &[u8]) -> usize {
        // The first path past every "prefix..." path: the prefix with its last byte raised
        // (a trailing 0xff carries into the byte before it; all 0xff: the end).
        let mut end = prefix.to_vec();
        while end.pop_if(|b| *b == u8::MAX).is_some() {}
        match end.last_mut() {
            Some(last) => {
                *last += 1;
                self.lower_bound(&end)
            }
            None => self.count,
        }
    }

    /// Index of the first record whose path is not below `path`.
    #[must_use]
    pub fn position(&self, path: &[u8]) -> usize {
        self.lower_bound(path)
    }

    fn lower_bound(&self, path: &[u8]) -> usize {
        self.lower_bound_from(0, path)
    }

    /// [`StatCache::lower_bound`] among the records from `lo` on.
    fn lower_bound_from(&self, lo: usize, path: &[u8]) -> usize {
        let (mut lo, mut hi) = (lo.min(self.count), self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.record(mid) {
                Some((p, _)) if p < path => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// How many records have paths starting with `prefix` (a directory's, ending in `/`).
    #[must_use]
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    pub fn count_prefix(&self, prefix: &[u8]) -> usize {
        self.past_prefix(prefix)
            .saturating_sub(self.lower_bound(prefix))
    }

    /// The cached id and size for `e`. Directories and nested repositories hit on path and
    /// kind alone (whether their contents changed is decided from their descendants); files
    /// and symlinks hit only when their `lstat` data match and the entry is not racy.
    #[must_use]
    pub fn lookup(&self, e: &ScanEntry) -> Option<(ObjectId, u64)> {
        let mut pos = self.lower_bound(&e.path);
        self.lookup_at(e, &mut pos)
    }

    /// [`StatCache::lookup`] for entries visited in path order: `pos` starts at the
    /// [`StatCache::position`] of the first entry and only moves forward, so a sorted scan
    /// merges with the cache in one linear pass instead of a binary search per path.
    #[must_use]
    pub fn lookup_at(&self, e: &ScanEntry, pos: &mut usize) -> Option<(ObjectId, u64)> {
        let mut steps = 0;
        while let Some((path, _)) = self.record(*pos) {
            if path >= e.path.as_slice() {
                break;
            }
            // Far behind (the scan leaves out the files of clean directories): search the
            // rest instead of stepping through every record in between.
            steps += 1;
            if steps == 8 {
                *pos = self.lower_bound_from(*pos, &e.path);
                break;
            }
            *pos += 1;
        }
        let (path, rec) = self.record(*pos)?;
        if path != e.path.as_slice() || rec[80] != kind_byte(e.kind) {
            return None;
        }
        let id = ObjectId(rec[48..80].try_into().ok()?);
        let size = u64_at(rec, 16);
        if matches!(e.kind, ScanKind::Dir | ScanKind::NestedRepo) {
            return Some((id, size));
        }
        let mtime = u64_at(rec, 24).cast_signed();
        let ctime = u64_at(rec, 32).cast_signed();
        let fresh = u32_at(rec, 12) == e.mode
            && size == e.size
            && mtime == e.mtime_ns
            && ctime == e.ctime_ns
            && u64_at(rec, 40) == e.ino;
        let settled = self.settled(&Stat {
            mode: e.mode,
            size,
            mtime_ns: mtime,
            ctime_ns: ctime,
            ino: e.ino,
            linked: false,
        });
        (fresh && settled).then_some((id, size))
    }

    /// The id the cache holds for `e`'s path when `e` is a file or symlink of the same kind,
    /// fresh or not: the previous version of a changed file, which capture stores its new
    /// version as a delta against. `pos` is where [`StatCache::lookup_at`] left it.
    #[must_use]
    pub fn previous_at(&self, e: &ScanEntry, pos: usize) -> Option<ObjectId> {
        let (path, rec) = self.record(pos)?;
        if path != e.path.as_slice() || rec[80] != kind_byte(e.kind) {
            return None;
        }
        Some(ObjectId(rec[48..80].try_into().ok()?))
    }

    /// Writes `entries` (any order) as the new cache at `path`, atomically: a temp file in
    /// the same directory, then rename. `written_ns` is when the capture began, before its
    /// walk (injected for tests); `rules` the walk's rules key.
    ///
    /// # Errors
    /// I/O errors; callers may ignore them (the cache is disposable).
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests and the fuzzer
    pub fn write(
        path: &Path,
        store_id: &[u8; 16],
        root: &ObjectId,
        mut entries: Vec<CacheEntry<'_>>,
        written_ns: i64,
        rules: &[u8; 32],
    ) -> std::io::Result<()> {
        entries.sort_unstable_by(|a, b| a.path.cmp(b.path));
        entries.dedup_by(|a, b| a.path == b.path);
        let header = Header {
            store_id,
            root,
            written_ns,
            rules,
            token: None,
            files: 0,
            bytes: 0,
            quiet: false,
            nested: false,
        };
        StatCache::write_sorted(path, &header, entries.len(), || entries.iter().copied())
    }

    /// Writes `count` records, sorted by path and unique, as the new cache at `path`,
    /// streaming: `records` is called twice (once for the fixed records, once for the
    /// paths), so no copy of the cache is ever held in memory. Records out of order make it
    /// write nothing and fail with `InvalidInput`, as does a count that does not match.
    ///
    /// # Errors
    /// I/O errors, and the `InvalidInput` above; callers may ignore them (the cache is
    /// disposable).
    pub fn write_sorted<'a, I>(
        path: &Path,
        header: &Header<'_>,
        count: usize,
        records: impl Fn() -> I,
    ) -> std::io::Result<()>
    where
        I: Iterator<Item = CacheEntry<'a>>,
    {
        let dir = path.parent().unwrap_or(Path::new("."));
        // Unique per process and per call: two captures of one workspace may run at once.
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".statcache.tmp.{}.{n}", std::process::id()));
        // It lists every path of the workspace: readable by its owner only.
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = Hashing::run(f, |w| write_body(w, header, count, records));
        match written {
            Ok(()) => fs::rename(&tmp, path),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// What a stat cache's header says besides its record count (see [`StatCache::write_sorted`]).
#[derive(Clone, Copy, Debug)]
pub struct Header<'a> {
    /// The store the ids belong to ([`crate::store::StoreReader::cache_key`]).
    pub store_id: &'a [u8; 16],
    /// The snapshot the records describe.
    pub root: &'a ObjectId,
    /// When the capture began, before its walk: the racy margin counts from it.
    pub written_ns: i64,
    /// The walk's rules key ([`crate::scan::Scan::rules`]).
    pub rules: &'a [u8; 32],
    /// The watcher token taken before the capture observed anything, if one was.
    pub token: Option<crate::vouch::Token>,
    /// Files and symlinks of the snapshot.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The capture left nothing out but by ignore rules (no credential, special file or
    /// unreadable path), found no nested repository, and every directory's listing may be
    /// reused, and no file has several links: a capture that a watcher says changed nothing
    /// would find the same.
    pub quiet: bool,
    /// With `quiet`: the snapshot holds nested repositories left alone, as the cache's
    /// records of kind [`ScanKind::NestedRepo`] name them (the only thing not quiet about
    /// it). A capture a watcher says changed nothing, or changed nothing about them, finds
    /// the same repositories.
    pub nested: bool,
}

/// The header in `b` (at least [`HEADER_LEN`] bytes), if it is this version's, whole, and
/// written for `store_id`.
fn parse_head(b: &[u8], store_id: &[u8; 16]) -> Option<Head> {
    if b.len() < HEADER_LEN || &b[..4] != MAGIC || u32_at(b, 4) != VERSION {
        return None;
    }
    if b[16..32] != store_id[..]
        || blake3::hash(&b[..HEAD_FIELDS]).as_bytes()[..] != b[HEAD_FIELDS..HEADER_LEN]
    {
        return None;
    }
    let (epoch, seq) = (u64_at(b, 104), u64_at(b, 112));
    Some(Head {
        root: ObjectId(b[40..72].try_into().ok()?),
        rules: b[72..104].try_into().ok()?,
        written_ns: u64_at(b, 8).cast_signed(),
        token: (epoch != 0).then_some(crate::vouch::Token { epoch, seq }),
        files: u64_at(b, 120),
        bytes: u64_at(b, 128),
        quiet: u64_at(b, 136) & (HEAD_QUIET | HEAD_QUIET_NESTED) != 0,
        nested: u64_at(b, 136) & HEAD_QUIET_NESTED != 0,
        cache: b[HEAD_FIELDS..HEADER_LEN].try_into().ok()?,
        beside: false,
    })
}

/// The file beside the cache at `path` that holds a watched capture's head
/// ([`StatCache::write_watched`]).
#[must_use]
pub fn watched_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".watched");
    name.into()
}

/// Bytes of a watched head: a header, the checksum of the cache header it goes with, and a
/// blake3 of both.
const WATCHED_LEN: usize = HEADER_LEN + 32 + 32;

/// A header's bytes ([`HEADER_LEN`]), its own checksum last.
fn encode_head(h: &Header<'_>, count: usize) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEADER_LEN);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&h.written_ns.to_le_bytes());
    head.extend_from_slice(h.store_id);
    head.extend_from_slice(&(count as u64).to_le_bytes());
    head.extend_from_slice(&h.root.0);
    head.extend_from_slice(h.rules);
    let token = h.token.unwrap_or(crate::vouch::Token { epoch: 0, seq: 0 });
    head.extend_from_slice(&token.epoch.to_le_bytes());
    head.extend_from_slice(&token.seq.to_le_bytes());
    head.extend_from_slice(&h.files.to_le_bytes());
    head.extend_from_slice(&h.bytes.to_le_bytes());
    let flags = match (h.quiet, h.nested) {
        (false, _) => 0,
        (true, false) => HEAD_QUIET,
        (true, true) => HEAD_QUIET_NESTED,
    };
    head.extend_from_slice(&flags.to_le_bytes());
    let sum = blake3::hash(&head);
    head.extend_from_slice(sum.as_bytes());
    head
}

/// A buffered writer that hashes what it writes (the cache's trailing checksum), a whole
/// buffer at a time: blake3 is several times faster on large inputs than on the 88-byte
/// records it is handed. A thread of its own hashes and writes each full buffer while the
/// caller encodes the next (at a million paths the rewrite went from 120–140 to 60–90 ms),
/// and hands the emptied buffer back for reuse.
struct Hashing {
    full: std::sync::mpsc::SyncSender<Vec<u8>>,
    empty: std::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
}

impl Hashing {
    const BUF: usize = 1 << 20;

    /// Runs `body` with a writer into `out`, then writes the checksum of everything it put.
    fn run<W: Write + Send>(
        mut out: W,
        body: impl FnOnce(&mut Hashing) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let (full, filled) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
        let (back, empty) = std::sync::mpsc::channel::<Vec<u8>>();
        std::thread::scope(|s| {
            let writer = s.spawn(move || -> std::io::Result<()> {
                let mut hash = blake3::Hasher::new();
                for mut b in filled {
                    hash.update(&b);
                    out.write_all(&b)?;
                    b.clear();
                    let _ = back.send(b);
                }
                out.write_all(hash.finalize().as_bytes())?;
                out.flush()
            });
            let mut w = Hashing {
                full,
                empty,
                buf: Vec::with_capacity(Self::BUF + RECORD_LEN),
            };
            let put = body(&mut w).and_then(|()| w.drain());
            // Dropping the sender ends the writer's loop; its error (the first) wins.
            drop(w);
            let wrote = writer
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("stat cache writer panicked")));
            wrote.and(put)
        })
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= Self::BUF {
            self.drain()?;
        }
        Ok(())
    }

    fn drain(&mut self) -> std::io::Result<()> {
        let next = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(Self::BUF + RECORD_LEN));
        let full = std::mem::replace(&mut self.buf, next);
        self.full
            .send(full)
            .map_err(|_| std::io::Error::other("stat cache writer stopped"))
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, what.to_string())
}

fn write_body<'a, I>(
    w: &mut Hashing,
    h: &Header<'_>,
    count: usize,
    records: impl Fn() -> I,
) -> std::io::Result<()>
where
    I: Iterator<Item = CacheEntry<'a>>,
{
    let head = encode_head(h, count);
    w.put(&head)?;
    let mut off = (HEADER_LEN + count * RECORD_LEN) as u64;
    let mut seen = 0usize;
    let mut last: Option<&[u8]> = None;
    let mut rec = [0u8; RECORD_LEN];
    for e in records() {
        if last.is_some_and(|l| l >= e.path) {
            return Err(invalid("stat cache records out of order"));
        }
        last = Some(e.path);
        seen += 1;
        let len = u32::try_from(e.path.len()).map_err(|_| invalid("path too long"))?;
        rec[..8].copy_from_slice(&off.to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&e.stat.mode.to_le_bytes());
        rec[16..24].copy_from_slice(&e.stat.size.to_le_bytes());
        rec[24..32].copy_from_slice(&e.stat.mtime_ns.to_le_bytes());
        rec[32..40].copy_from_slice(&e.stat.ctime_ns.to_le_bytes());
        rec[40..48].copy_from_slice(&e.stat.ino.to_le_bytes());
        rec[48..80].copy_from_slice(&e.id.0);
        rec[80] = kind_byte(e.kind);
        rec[81] =
            if e.listing { FLAG_LISTING } else { 0 } | if e.stat.linked { FLAG_LINKED } else { 0 };
        w.put(&rec)?;
        off += e.path.len() as u64;
    }
    if seen != count {
        return Err(invalid("stat cache record count does not match"));
    }
    for e in records() {
        w.put(e.path)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "statcache_tests.rs"]
mod tests;
