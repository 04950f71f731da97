//! Capture: scan + stat cache + hash + trees → a snapshot (root tree id) in the store.
//!
//! Files the stat cache vouches for are not read. Others are read once: hashed, and, when
//! the store lacks them, compressed and queued. Files over [`CHUNK_THRESHOLD`] are split by
//! FastCDC so an edit to a big file stores only the changed chunks. A file whose `fstat`
//! changes while it is read is re-read (up to 3 times) and then reported as unstable.
//! Queued objects are written in batches of 16 MiB, the last one together with the
//! snapshot record, so a capture costs one commit (fsync) plus one per batch of new data
//! (and none when it stores nothing and records nothing: an empty commit would only sync).
//! A big file's chunks are queued as they are read, so a capture's memory is bounded by the
//! batch, not by the size of any file.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::BuildHasherDefault;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{CaptureError, StoreError};
use crate::object::record::{FRAME_RAW_BYTES, SOLID_MAX_OBJECT, TREE_FRAME_RAW_BYTES};
use crate::object::{
    CHUNK_AVG, CHUNK_MAX, CHUNK_MIN, CHUNK_THRESHOLD, ChunkList, DeltaBase, EntryKind, FlatEntry, NewFrame,
    ObjectId, ObjectKind, PendingObject, RelPath, Tree, TreeEntry,
};
use crate::progress::Progress;
use crate::scan::{self, ScanEntry, ScanKind, Skipped};
use crate::statcache::{CacheEntry, RACY_MARGIN_NS, Stat, StatCache};
use crate::store::{SnapshotRecord, Staged, StagedRow, Store, StoreReader, WriteStats, WriteTx};

mod changed;

/// Entries per parallel job when looking paths up: large enough to merge with the cache in
/// long linear runs, small enough to balance files of very different sizes.
const LOOK_BLOCK: usize = 256;

/// Queued bytes that trigger an intermediate batch write (bounds memory on cold captures).
const BATCH_BYTES: usize = 16 * 1024 * 1024;

/// Batches are staged (appended to the pack log, indexed later: [`crate::store::Staged`])
/// until their objects number this many, or the `1/STAGE_SHARE` of the index, whichever is
/// more; then the next batch indexes them all in one sorted pass. Each pass rewrites most
/// of the index's leaves, so passes in proportion to the index keep its rewriting linear.
const STAGE_MIN: usize = if cfg!(test) { 20 } else { 65_536 };
const STAGE_SHARE: usize = 2;

/// Objects smaller than this are stored whole: in a shared frame they compress to about what
/// a delta's extra 33 record bytes and its frame header cost.
const DELTA_MIN_BYTES: usize = 256;

/// What a capture found and stored.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Capture {
    /// Root tree id: the snapshot id.
    pub id: ObjectId,
    /// Files and symlinks captured.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Objects added to the store.
    pub new_objects: u64,
    /// Stored (compressed) bytes added to the store.
    pub new_bytes: u64,
    /// Files that had to be read (stat cache misses).
    pub hashed: u64,
    /// Paths left out (unreadable, unstable), with the reason.
    pub skipped: Vec<Skipped>,
    /// Nested repositories recorded but not entered (the `nested_repos` setting is `skip`).
    pub nested_repos: Vec<String>,
    /// Nested repositories whose working files were captured (the setting is `capture`).
    pub captured_repos: Vec<String>,
    /// Credentials left out (by name or by a private-key header), sorted.
    pub secrets: Vec<String>,
    /// Directories the walk listed, and directories whose listing it took from the stat
    /// cache (not serialized).
    #[serde(skip)]
    pub listed: u64,
    /// See [`Capture::listed`].
    #[serde(skip)]
    pub reused: u64,
    /// `None` when a watcher vouched for what the capture did not look at; else why the
    /// capture walked the workspace (no watcher, it started after the last capture, its
    /// queue overflowed…).
    pub walked_because: Option<String>,
    /// The capture looked only at the directories the watcher named, and took every other
    /// one from the last snapshot's trees (not serialized).
    #[serde(skip)]
    pub focused: bool,
    /// Every path of the snapshot, sorted by path bytes (not serialized); empty when the
    /// capture was not asked for it ([`CaptureOptions::list`]).
    #[serde(skip)]
    pub(crate) entries: Vec<FlatEntry>,
}

impl Capture {
    internal! {
        /// Every path of the snapshot (see the field).
        #[must_use]
        fn entries(&self) -> &[FlatEntry] {
            &self.entries
        }
    }
}

/// Records written in a capture's final commit, given the root id and what the capture
/// saw of it (history records ride along, so a turn's capture and its record cost one sync).
pub type AlsoCommit<'a> =
    &'a dyn Fn(&WriteTx<'_>, ObjectId, &Captured<'_>) -> Result<(), StoreError>;

/// What a capture's commit records ([`AlsoCommit`]) see of the snapshot: every path (when
/// the caller asked for the list anyway), or only the trees the capture built (when a
/// watcher told it where to look, or no list was asked for: a turn's capture at a million
/// files then holds a few dozen trees instead of a million paths).
pub enum Captured<'a> {
    /// Every path of the snapshot, sorted by path bytes.
    Flat(&'a [FlatEntry]),
    /// The trees the capture built, encoded, by id; every other tree of the snapshot is in
    /// the store already.
    Trees(&'a std::collections::HashMap<ObjectId, Vec<u8>>),
}

impl Captured<'_> {
    /// Paths added, modified and deleted from snapshot `before` (in the store) to this one
    /// (`root`): only the subtrees whose ids differ are read.
    ///
    /// # Errors
    /// [`StoreError`] for a tree of `before` that is missing or damaged.
    pub fn diff_from(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<crate::diff::Diff, StoreError> {
        let (old, now) = self.flat_pair(reader, before, root)?;
        Ok(crate::diff::diff(&old, &now))
    }

    /// [`Captured::diff_from`] as typed changes of files and symlinks (paths as bytes, the
    /// entries on both sides).
    ///
    /// # Errors
    /// As [`Captured::diff_from`].
    pub fn changes_from(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<Vec<crate::diff::Change>, StoreError> {
        let (old, now) = self.flat_pair(reader, before, root)?;
        Ok(crate::diff::pair(&old, &now))
    }

    fn flat_pair(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<(Vec<FlatEntry>, Vec<FlatEntry>), StoreError> {
        Ok(match self {
            Captured::Flat(after) => {
                let (old, same) = crate::diff::flatten_changed(reader, before, after)?;
                (old, crate::diff::outside(after, &same))
            }
            Captured::Trees(built) => {
                let read = |id: &ObjectId| match built.get(id) {
                    Some(bytes) => {
                        crate::object::Tree::decode(bytes).map_err(|e| StoreError::Corrupt {
                            path: reader.path().into(),
                            id: *id,
                            detail: format!("a tree this capture built does not decode: {e}"),
                        })
                    }
                    None => reader.read_tree(id),
                };
                crate::diff::flatten_pair(&read, before, root)?
            }
        })
    }
}

/// How to capture.
pub struct CaptureOptions<'a> {
    /// Write new objects to the store (false: only compute ids, e.g. to compare).
    pub store_objects: bool,
    /// Append a snapshot record (`retrace log`) and make it the last known state.
    pub record: Option<Option<String>>,
    /// Progress sink.
    pub progress: &'a dyn Progress,
    /// More records for the final commit.
    pub also: Option<AlsoCommit<'a>>,
    /// Fill [`Capture::entries`]. Without it the list stays empty, which spares a capture
    /// a list of every path when its caller needs only the id and the counts (`also` sees
    /// the snapshot as [`Captured`] either way).
    pub list: bool,
    /// Walk the whole workspace whatever a watcher says (`retrace snapshot --rescan`).
    pub rescan: bool,
    /// When the stat cache is rewritten.
    pub cache: CacheRewrite,
}

/// When a capture rewrites the stat cache ([`CaptureOptions::cache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRewrite {
    /// Whenever it is not exactly the disk as found.
    Always,
    /// Not when rewriting it would only record a few files read again (at most
    /// [`DEFER_CACHE_READS`]) and directories relisted: for the capture an undo, a redo or a
    /// path restore takes of the disk right before it writes the paths that changed, which
    /// leaves those records stale anyway. The cache on disk stays valid (every record is
    /// checked against the disk before it is trusted); the next capture reads those files
    /// again and rewrites it. Never deferred when the rewrite records a watcher's token, goes
    /// past a watched capture's head, or marks a directory whose path was left out.
    Deferred,
}

/// How many files a capture with [`CacheRewrite::Deferred`] may have read and still leave
/// the stat cache as it was (reading them again costs the next capture less than a rewrite
/// of a million records costs this one).
pub const DEFER_CACHE_READS: u64 = 1000;

pub(crate) struct CaptureContext<'a> {
    pub root: &'a Path,
    pub store: &'a Store,
    pub statcache: &'a Path,
    pub store_dir: Option<&'a Path>,
    /// Paths allowed although they look like credentials (the `allow_secrets` setting).
    pub allow_secrets: Option<&'a globset::GlobSet>,
    /// The settings' part of the walk's rules key (see [`scan::Scan::rules`]): the
    /// `allow_secrets` patterns.
    pub rules_settings: &'a [u8],
    /// Whether nested repositories are entered (the `nested_repos` setting). Needs no place
    /// in the stat cache's key: a nested repository is a `NestedRepo` entry in one mode and a
    /// `Dir` in the other, and an entry hits only with its kind, so a cache written in one
    /// mode never vouches for a directory in the other.
    pub nested_repos: crate::config::NestedRepos,
    /// The workspace's watcher, to ask what changed (None: always walk).
    pub watch: Option<WatchAsk<'a>>,
}

/// How a capture asks the workspace's watcher (see [`crate::watch`]).
#[derive(Clone, Copy)]
pub(crate) struct WatchAsk<'a> {
    /// Where its socket is.
    pub runtime_dir: &'a Path,
    /// How long to wait for its answer before walking.
    pub timeout: std::time::Duration,
    /// Walk whatever it says (`retrace snapshot --rescan`), taking only a fresh token.
    pub rescan: bool,
}

/// Objects waiting to be framed and frames waiting to be written.
#[derive(Default)]
struct Pending {
    /// Small objects for the shared frame being filled.
    solid: Vec<PendingObject>,
    solid_bytes: usize,
    /// Trees for the tree frame being filled ([`TREE_FRAME_RAW_BYTES`]).
    trees: Vec<PendingObject>,
    trees_bytes: usize,
    /// Ids queued in this capture and not yet committed (identical files are stored once).
    queued: HashSet<ObjectId>,
    /// The first 8 bytes of every id this capture queued, committed or not: an id whose
    /// prefix is new is new to the capture, and only the rest (identical files) ask the
    /// store whether an earlier batch holds them. A set of full ids would hold 69 MB at a
    /// million new files; this one 19 MB.
    seen: HashSet<u64, BuildHasherDefault<crate::object::Prehashed>>,
    /// Batches this capture wrote and has not indexed yet; the final commit indexes them.
    staged: Staged,
    /// Objects indexed: the store's at the start, and those this capture indexed since.
    indexed: usize,
    frames: Vec<NewFrame>,
    frame_bytes: usize,
}

/// The first 8 bytes of an id: already uniformly spread, so they are their own hash.
fn prefix(id: &ObjectId) -> u64 {
    let [a, b, c, d, e, f, g, h, ..] = id.0;
    u64::from_le_bytes([a, b, c, d, e, f, g, h])
}

/// A file's content is a private key (see [`scan::exclude::looks_like_private_key`]).
#[derive(Debug)]
struct SecretFound;

impl std::fmt::Display for SecretFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("holds a private key")
    }
}

impl std::error::Error for SecretFound {}

struct Hasher<'a> {
    /// Objects the store forgot as damaged: met again, stored whole (see
    /// [`crate::store::schema::META_FORGOTTEN_IDS`]).
    revived: HashSet<ObjectId>,
    /// The root, open: every file and symlink is read beneath it, following no symlink
    /// (`None` when it could not be opened: every read then fails, named).
    beneath: Option<scan::beneath::Root>,
    allow_secrets: Option<&'a globset::GlobSet>,
    /// The store as the capture began: what it knows is what the capture need not write.
    reader: &'a StoreReader,
    /// The store as of the last batch this capture committed ([`Hasher::push_frame`]),
    /// asked only about ids the capture may have written itself ([`Pending::seen`]). The
    /// reader from the start answers all the other lookups: its tree stays as small as
    /// the store was, which at a million new files makes the read phase 25% faster.
    committed: RwLock<Option<StoreReader>>,
    store_objects: bool,
    pending: Mutex<Pending>,
    store: &'a Store,
    error: Mutex<Option<StoreError>>,
    flushed: Mutex<WriteStats>,
    /// Held while a full batch is written (see [`Hasher::push_frame`]).
    writing: Mutex<()>,
}

/// One parallel job's place in the merge of the scan with the stat cache: the index it
/// expects next (a job takes a contiguous run), where the cache stands, and the files it
/// looked at since it last reported progress (reported when the job ends too).
struct Merge<'a> {
    next: usize,
    pos: usize,
    files: u64,
    progress: &'a dyn Progress,
    parent: Parent,
}

/// The directory of the file a job read last, open (`O_PATH`): files are opened relative to
/// it, so the kernel resolves one name per file instead of every component of its path
/// (a sixth of a cold capture's CPU went to path lookups at a million files). It is opened
/// beneath the root ([`scan::beneath`]): a directory swapped for a symlink since the walk
/// is never followed.
#[derive(Default)]
struct Parent {
    dir: Vec<u8>,
    fd: Option<rustix::fd::OwnedFd>,
}

/// Why a path is left out when a directory on its way turned into a symlink.
fn swapped_parent() -> std::io::Error {
    std::io::Error::other(
        "a directory on its path was replaced by a symlink or a file while the capture ran \
         (never followed): left out, captured next time",
    )
}

impl Parent {
    /// The directory of `rel`, open beneath the root, and `rel`'s last component.
    fn at<'r>(
        &mut self,
        root: Option<&scan::beneath::Root>,
        rel: &'r [u8],
    ) -> std::io::Result<(&rustix::fd::OwnedFd, &'r [u8])> {
        let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&rel[..0], rel),
        };
        if self.fd.is_none() || self.dir != dir {
            self.fd = None;
            let root =
                root.ok_or_else(|| std::io::Error::other("the workspace root cannot be opened"))?;
            let fd = match root.dir(dir) {
                Ok(fd) => fd,
                Err(e) if scan::beneath::swapped(e) => return Err(swapped_parent()),
                Err(e) => return Err(e.into()),
            };
            self.dir.clear();
            self.dir.extend_from_slice(dir);
            self.fd = Some(fd);
        }
        match &self.fd {
            Some(fd) => Ok((fd, name)),
            None => Err(std::io::ErrorKind::NotFound.into()),
        }
    }

    /// Opens `rel` (a regular file by the walk) for reading, without following a symlink
    /// that replaced it since (`ELOOP`, reported as not found: no file is there now), nor
    /// blocking on a FIFO put in its place.
    fn open(&mut self, root: Option<&scan::beneath::Root>, rel: &[u8]) -> std::io::Result<File> {
        use rustix::fs::{Mode, OFlags};
        let (fd, name) = self.at(root, rel)?;
        match rustix::fs::openat(
            fd,
            std::ffi::OsStr::from_bytes(name),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(f) => Ok(File::from(f)),
            Err(rustix::io::Errno::LOOP) => Err(std::io::ErrorKind::NotFound.into()),
            Err(e) => Err(e.into()),
        }
    }

    /// The target of the symlink `rel`, read beneath the root.
    fn read_link(
        &mut self,
        root: Option<&scan::beneath::Root>,
        rel: &[u8],
    ) -> std::io::Result<Vec<u8>> {
        let (fd, name) = self.at(root, rel)?;
        let target = rustix::fs::readlinkat(fd, std::ffi::OsStr::from_bytes(name), Vec::new())?;
        Ok(target.into_bytes())
    }
}

impl Merge<'_> {
    fn flush(&mut self) {
        self.progress.advance(self.files);
        self.files = 0;
    }
}

impl Drop for Merge<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Why a scanned path is not in the snapshot after all.
enum Fate {
    /// A credential by content.
    Secret,
    /// Unreadable or unstable: the reason.
    Skip(String),
    /// Deleted between the walk and the read.
    Gone,
}

/// The result of looking at one scanned path.
enum Looked {
    Done {
        /// Blob id (files, symlinks); for directories the cached tree id on a hit.
        id: ObjectId,
        size: u64,
        /// The stat cache vouched for it (a directory: it was listed).
        hit: bool,
        /// The file was read.
        hashed: bool,
        /// `fstat` taken when the file was read, which the next stat cache records.
        fresh: Option<Stat>,
    },
    Skip(String),
    /// Deleted between the walk and the read: it is simply not there any more.
    Gone,
    /// Its first KiB holds a private-key header: left out and named.
    Secret,
}

/// The capture's final commit: what it queued, its snapshot record (with
/// `opts.record`) and `opts.also`'s records, shown what the snapshot holds (`seen`). The
/// commit indexes what the capture staged: nothing names an object before it, and from it
/// on every object it names is found. Counts what it stored into `capture`.
fn commit(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
    hasher: Hasher<'_>,
    seen: &Captured<'_>,
    capture: &mut Capture,
) -> Result<(), CaptureError> {
    let (root, files, bytes) = (capture.id, capture.files, capture.bytes);
    let (batch, staged, flushed) = hasher.finish();
    if batch.is_empty() && staged.is_empty() && opts.record.is_none() && opts.also.is_none() {
        // Nothing new to store and nothing to record (the disk an undo found as the turn
        // left it): no commit.
        capture.new_objects = flushed.objects;
        capture.new_bytes = flushed.stored_bytes;
        return Ok(());
    }
    let record = opts
        .record
        .as_ref()
        .map(|label| SnapshotRecord::now(root, label.clone(), files, bytes));
    if batch.is_empty() && staged.is_empty() && record.is_none() && opts.also.is_none() {
        // Nothing to write (every object it saw was stored, and it records nothing): a
        // commit would only sync. Batches written before are indexed by staged rows, so
        // none was.
        capture.new_objects = flushed.objects;
        capture.new_bytes = flushed.stored_bytes;
        return Ok(());
    }
    let last_known = record.as_ref().map(|_| root);
    let written = ctx
        .store
        .write_with(batch, record.as_ref(), last_known, |tx| {
            tx.index_staged(&staged)?;
            match opts.also {
                Some(also) => also(tx, root, seen),
                None => Ok(()),
            }
        })?;
    capture.new_objects = written.objects + flushed.objects;
    capture.new_bytes = written.stored_bytes + flushed.stored_bytes;
    Ok(())
}

impl<'a> Hasher<'a> {
    fn new(
        ctx: &CaptureContext<'a>,
        reader: &'a StoreReader,
        store_objects: bool,
    ) -> Result<Hasher<'a>, StoreError> {
        Ok(Hasher {
            revived: reader.forgotten_ids()?,
            beneath: scan::beneath::Root::open(ctx.root).ok(),
            allow_secrets: ctx.allow_secrets,
            reader,
            committed: RwLock::new(None),
            store_objects,
            pending: Mutex::new(Pending {
                indexed: usize::try_from(reader.object_count()?).unwrap_or(usize::MAX),
                ..Pending::default()
            }),
            store: ctx.store,
            error: Mutex::new(None),
            flushed: Mutex::new(WriteStats::default()),
            writing: Mutex::new(()),
        })
    }

    /// What the final commit writes (the frames left, the staged batches to index) and
    /// what the batches written before it stored.
    fn finish(self) -> (Vec<NewFrame>, Vec<u64>, WriteStats) {
        let pending = self
            .pending
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut batch = pending.frames;
        if !pending.solid.is_empty() {
            batch.push(NewFrame::pack(&pending.solid));
        }
        if !pending.trees.is_empty() {
            batch.push(NewFrame::pack(&pending.trees));
        }
        let flushed = self.flushed.into_inner().unwrap_or_default();
        (batch, pending.staged.rows(), flushed)
    }

    /// The first error a batch write met, taken.
    fn failed(&self) -> Option<StoreError> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Hasher<'_> {
    /// Whether the store holds `id` readably: a delta whose base was forgotten is not
    /// known, so the capture stores it again (whole, or against a sound base).
    fn known(&self, id: &ObjectId) -> bool {
        match self.reader.contains(id) {
            Ok(true) => self.reader.bases_present(id),
            Ok(b) => b,
            Err(e) => {
                self.fail(e);
                true
            }
        }
    }

    /// Whether the stored copy of `id`, which this capture just read as `data`, holds
    /// exactly `data`: a snapshot that reports success must restore what it reported, so a
    /// damaged copy is forgotten at once and the capture stores `data` in its place. Only
    /// files whose content is already stored pay this (a frame read, shared by the files
    /// of that frame), never a stat-cache hit.
    fn sound(&self, id: &ObjectId, data: &[u8]) -> bool {
        if self.reader.holds_exactly(id, data) {
            return true;
        }
        // Forgotten now, waiting for the write lock if it must: the commit keeps a record
        // the index still holds, so the damaged one must be gone before it.
        self.reader.forget_found();
        if let Err(e) = self.store.forget_damaged() {
            self.fail(e);
        }
        false
    }

    /// Whether `id` is new to this capture, which then claims it for writing: it is not
    /// queued, and not in a batch this capture already committed (staged or indexed).
    fn claim(&self, p: &mut Pending, id: &ObjectId) -> bool {
        if p.queued.contains(id) {
            return false;
        }
        if !p.seen.insert(prefix(id)) {
            // Identical to a file queued before (or, once in 2^64, a prefix twin).
            if p.staged.contains(id) {
                return false;
            }
            let committed = self
                .committed
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match committed.as_ref().map(|r| r.contains(id)) {
                Some(Ok(true)) => return false,
                Some(Ok(false)) | None => {}
                Some(Err(e)) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        p.queued.insert(*id);
        true
    }

    fn fail(&self, e: StoreError) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }

    /// Queues objects for writing: small ones into the shared frame, others alone. Frames
    /// are compressed by the calling worker, outside the lock, so compression stays parallel.
    fn queue(&self, objects: Vec<PendingObject>) {
        if !self.store_objects {
            return;
        }
        for o in objects {
            let full = {
                let Ok(mut p) = self.pending.lock() else {
                    return;
                };
                if !self.claim(&mut p, &o.id) {
                    continue;
                }
                if o.delta.is_some() {
                    drop(p);
                    self.push_frame(NewFrame::raw(&[o]));
                    continue;
                }
                if o.payload.len() >= SOLID_MAX_OBJECT {
                    drop(p);
                    self.push_frame(NewFrame::pack(&[o]));
                    continue;
                }
                if o.kind == ObjectKind::Tree {
                    p.trees_bytes += o.payload.len();
                    p.trees.push(o);
                    if p.trees_bytes < TREE_FRAME_RAW_BYTES {
                        continue;
                    }
                    p.trees_bytes = 0;
                    std::mem::take(&mut p.trees)
                } else {
                    p.solid_bytes += o.payload.len();
                    p.solid.push(o);
                    if p.solid_bytes < FRAME_RAW_BYTES {
                        continue;
                    }
                    p.solid_bytes = 0;
                    std::mem::take(&mut p.solid)
                }
            };
            self.push_frame(NewFrame::pack(&full));
        }
    }

    fn push_frame(&self, frame: NewFrame) {
        {
            let Ok(mut p) = self.pending.lock() else {
                return;
            };
            p.frame_bytes += frame.stored.len();
            p.frames.push(frame);
            if p.frame_bytes < BATCH_BYTES {
                return;
            }
        }
        // One batch is written at a time, and a worker that fills the next one waits here
        // instead of reading on: queued frames stay within two batches however many workers
        // read big files at once.
        let Ok(_writing) = self.writing.lock() else {
            return;
        };
        let batch = {
            let Ok(mut p) = self.pending.lock() else {
                return;
            };
            if p.frame_bytes < BATCH_BYTES {
                return; // the worker before us wrote it
            }
            p.frame_bytes = 0;
            std::mem::take(&mut p.frames)
        };
        let ids: Vec<ObjectId> = batch
            .iter()
            .flat_map(|f| f.members.iter().map(|m| m.id))
            .collect();
        let (rows, index) = {
            let Ok(p) = self.pending.lock() else {
                return;
            };
            let due = (p.indexed / STAGE_SHARE).max(STAGE_MIN);
            (p.staged.rows(), p.staged.len() + ids.len() >= due)
        };
        match self.store.stage(batch, &rows, index) {
            Ok((row, w)) => {
                if let Ok(mut f) = self.flushed.lock() {
                    f.objects += w.objects;
                    f.stored_bytes += w.stored_bytes;
                }
                #[cfg(feature = "fault-injection")]
                if row.is_some() && std::env::var_os("RETRACE_FAULT_KILL_STAGED").is_some() {
                    // A test's capture dies right after its first staged batch commits.
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
                self.committed(&ids, row, index.then_some(rows.as_slice()));
            }
            Err(e) => self.fail(e),
        }
    }

    /// After a batch of `ids` committed, staged as `row` or indexed with the staged rows
    /// `indexed`: the set of queued ids lets go of them, and holds one or two batches' ids
    /// instead of every new object of the capture (a million at a million new files).
    /// Staged ids move to [`Pending::staged`] under the same lock; for indexed ones, a
    /// reader begun now knows them, and is in place before they leave the sets, so
    /// [`Hasher::claim`] finds each id in one place or another.
    fn committed(&self, ids: &[ObjectId], row: Option<StagedRow>, indexed: Option<&[u64]>) {
        if indexed.is_some() {
            match self.store.reader() {
                Ok(r) => {
                    *self
                        .committed
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) = Some(r);
                }
                Err(e) => return self.fail(e),
            }
        }
        if let Ok(mut p) = self.pending.lock() {
            if let Some(rows) = indexed {
                p.indexed += p.staged.len() + ids.len();
                p.staged.indexed(rows);
            }
            if let Some(row) = row {
                p.staged.add(row);
            }
            for id in ids {
                p.queued.remove(id);
            }
        }
    }

    /// The object for `data`, unless the store already has it or nothing is stored: a
    /// delta against `previous` (the version it replaces) when that pays, else whole.
    fn object(
        &self,
        kind: ObjectKind,
        data: Vec<u8>,
        id: ObjectId,
        previous: Option<ObjectId>,
    ) -> Option<PendingObject> {
        if !self.store_objects || self.known(&id) && self.sound(&id, &data) {
            return None;
        }
        let size = data.len() as u64;
        // A forgotten object stored again is whole: the deltas that named it as their base
        // then read again whatever their depth.
        if let Some(previous) = previous.filter(|p| *p != id && !self.revived.contains(&id))
            && let Some((base, delta)) = self.delta(kind, &data, &previous)
        {
            return Some(PendingObject {
                id,
                kind,
                size,
                payload: delta,
                delta: Some(base),
            });
        }
        Some(PendingObject::whole(id, kind, size, data))
    }

    /// `data` as a delta against `previous` (or its chain's root), when it is clearly
    /// smaller than `data` stored whole ([`crate::object::delta::pays`]).
    fn delta(
        &self,
        kind: ObjectKind,
        data: &[u8],
        previous: &ObjectId,
    ) -> Option<(DeltaBase, Vec<u8>)> {
        if data.len() < DELTA_MIN_BYTES {
            return None;
        }
        let (base, bytes) = match self.reader.delta_base(previous, kind) {
            Ok(found) => found?,
            Err(e) => {
                self.fail(e);
                return None;
            }
        };
        let delta = crate::object::delta::encode(&bytes, data).ok()?;
        crate::object::delta::pays(delta.len(), data).then_some((base, delta))
    }

    /// The target of the symlink `rel`, read beneath the root.
    fn read_link(&self, parent: &mut Parent, rel: &[u8]) -> std::io::Result<Vec<u8>> {
        crate::fault::reached(crate::fault::Point::Read);
        parent.read_link(self.beneath.as_ref(), rel)
    }

    /// Looks at one scanned path: a stat cache hit, or (files, symlinks) a read.
    /// `previous`: the id the stat cache held for the path on a miss (a delta base).
    fn look(
        &self,
        e: &ScanEntry,
        cached: Option<(ObjectId, u64)>,
        previous: Option<ObjectId>,
        parent: &mut Parent,
    ) -> Looked {
        // A cache hit is trusted without asking the store: the cache is written only after
        // its objects committed, and it names the store (id) it vouches for.
        if let Some((id, size)) = cached {
            return Looked::Done {
                id,
                size,
                hit: true,
                hashed: false,
                fresh: None,
            };
        }
        match e.kind {
            // Filled in when the trees are built.
            ScanKind::Dir | ScanKind::NestedRepo => Looked::Done {
                id: ObjectId::ZERO,
                size: 0,
                hit: false,
                hashed: false,
                fresh: None,
            },
            ScanKind::Symlink => match self.read_link(parent, &e.path) {
                Ok(bytes) => {
                    let id = ObjectId::of_blob(&bytes);
                    let blob = self.object(ObjectKind::Blob, bytes, id, None);
                    self.queue(blob.into_iter().collect());
                    Looked::Done {
                        id,
                        size: e.size,
                        hit: false,
                        hashed: false,
                        fresh: None,
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Looked::Gone,
                Err(err) => Looked::Skip(err.to_string()),
            },
            ScanKind::File => {
                // The walk's `lstat` is the first read's "before": one `fstat` fewer per file.
                // A file changed since fails the check after the read and is read again, with
                // its own `fstat` this time.
                let mut known = Some(Stat::of(e));
                crate::fault::reached(crate::fault::Point::Read);
                for _ in 0..3 {
                    let allowed = self
                        .allow_secrets
                        .is_some_and(|a| a.is_match(std::ffi::OsStr::from_bytes(&e.path)));
                    let mut open = || parent.open(self.beneath.as_ref(), &e.path);
                    match self.read_file(&mut open, !allowed, previous, known.take()) {
                        Err(err)
                            if err.get_ref().is_some_and(
                                <dyn std::error::Error + Send + Sync>::is::<SecretFound>,
                            ) =>
                        {
                            return Looked::Secret;
                        }
                        Ok(Some((id, stat, objects))) => {
                            self.queue(objects);
                            let (size, fresh) = (stat.size, Some(stat));
                            return Looked::Done {
                                id,
                                size,
                                hit: false,
                                hashed: true,
                                fresh,
                            };
                        }
                        Ok(None) => {}
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                            return Looked::Gone;
                        }
                        Err(err) => return Looked::Skip(err.to_string()),
                    }
                }
                Looked::Skip(
                    "file kept changing while it was read; it will be captured next time".into(),
                )
            }
        }
    }

    /// The chunks of `previous` when it is a chunked blob in the store, for delta bases.
    fn old_chunks(&self, previous: Option<ObjectId>) -> OldChunks {
        let list =
            previous
                .filter(|_| self.store_objects)
                .and_then(|p| match self.reader.record(&p) {
                    Ok(r) if r.kind == ObjectKind::ChunkedBlob => self.reader.chunk_list(&p).ok(),
                    _ => None,
                });
        let mut starts = Vec::new();
        let mut at = 0u64;
        for (id, len) in list.map(|l| l.chunks).unwrap_or_default() {
            starts.push((at, id));
            at += u64::from(len);
        }
        OldChunks(starts)
    }

    /// Reads and hashes one file. `Ok(None)` when it changed while being read (or since
    /// `known`, its `lstat` data from the walk, when given). New content is stored as deltas
    /// against `previous`, the version it replaces, where that pays.
    fn read_file(
        &self,
        open: &mut dyn FnMut() -> std::io::Result<File>,
        check_secret: bool,
        previous: Option<ObjectId>,
        known: Option<Stat>,
    ) -> std::io::Result<Option<(ObjectId, Stat, Vec<PendingObject>)>> {
        let mut f = open()?;
        let before = if let Some(k) = known {
            k
        } else {
            let m = f.metadata()?;
            // Opened beneath the root without following a symlink; a FIFO or device put in
            // the file's place since the walk is not content.
            if !m.is_file() {
                return Err(std::io::Error::other(scan::special_reason(m.file_type())));
            }
            Stat {
                mode: m.mode(),
                size: m.len(),
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
                ino: m.ino(),
                linked: m.nlink() > 1,
            }
        };
        let mut objects = Vec::new();
        let id = if before.size <= CHUNK_THRESHOLD {
            let mut data = Vec::with_capacity(usize::try_from(before.size).unwrap_or(0));
            // Exactly the size `before` names: no read past it to find the end (growth shows
            // in the `fstat` after the read).
            (&mut f).take(before.size).read_to_end(&mut data)?;
            if data.len() as u64 != before.size {
                return Ok(None);
            }
            if check_secret && scan::exclude::looks_like_private_key(&data[..data.len().min(1024)])
            {
                return Err(std::io::Error::other(SecretFound));
            }
            let id = ObjectId::of_blob(&data);
            objects.extend(self.object(ObjectKind::Blob, data, id, previous));
            id
        } else {
            let mut whole = blake3::Hasher::new();
            let mut chunks = Vec::new();
            let mut total = 0u64;
            let old = self.old_chunks(previous);
            let stream = fastcdc::v2020::StreamCDC::new(&mut f, CHUNK_MIN, CHUNK_AVG, CHUNK_MAX);
            for chunk in stream {
                let chunk = chunk.map_err(std::io::Error::other)?;
                whole.update(&chunk.data);
                let cid = ObjectId::of_blob(&chunk.data);
                total += chunk.data.len() as u64;
                chunks.push((cid, u32::try_from(chunk.data.len()).unwrap_or(u32::MAX)));
                // Queued as it is read (framed, compressed, written with the next batch): a
                // big file never sits whole in memory (tests/memory.rs). Chunks of a file that
                // then turns out unstable are unreferenced and GC takes them after the grace.
                let base = old.base_at(total - chunk.data.len() as u64);
                self.queue(
                    self.object(ObjectKind::Blob, chunk.data, cid, base)
                        .into_iter()
                        .collect(),
                );
            }
            if total != before.size {
                return Ok(None);
            }
            let id = ObjectId(*whole.finalize().as_bytes());
            if self.store_objects && !self.known(&id) {
                let list = ChunkList {
                    version: crate::object::record::RECORD_VERSION,
                    chunks,
                }
                .encode()
                .map_err(std::io::Error::other)?;
                objects.push(PendingObject::whole(
                    id,
                    ObjectKind::ChunkedBlob,
                    total,
                    list,
                ));
            }
            id
        };
        let after = f.metadata()?;
        let mtime_ns = after.mtime() * 1_000_000_000 + after.mtime_nsec();
        let ctime_ns = after.ctime() * 1_000_000_000 + after.ctime_nsec();
        let stable = after.len() == before.size
            && mtime_ns == before.mtime_ns
            && ctime_ns == before.ctime_ns
            && after.ino() == before.ino;
        if !stable {
            return Ok(None);
        }
        // A rewrite within one tick of a coarse clock leaves mtime and ctime unchanged, so a
        // recently modified file is read a second time: a torn read would not hash the same.
        if mtime_ns >= now_ns() - RACY_MARGIN_NS {
            let mut again = blake3::Hasher::new();
            again.update_reader(open()?)?;
            if ObjectId(*again.finalize().as_bytes()) != id {
                return Ok(None);
            }
        }
        let stat = Stat {
            mode: after.mode(),
            size: after.len(),
            mtime_ns,
            ctime_ns,
            ino: after.ino(),
            linked: after.nlink() > 1,
        };
        Ok(Some((id, stat, objects)))
    }
}

/// A big file's previous chunks by start offset: the base for a new chunk is the old chunk
/// that covered the same offset (an edit changes the chunk around it and FastCDC realigns
/// right after, so that is the chunk it replaced).
struct OldChunks(Vec<(u64, ObjectId)>);

impl OldChunks {
    fn base_at(&self, offset: u64) -> Option<ObjectId> {
        let i = self.0.partition_point(|(start, _)| *start <= offset);
        i.checked_sub(1).map(|i| self.0[i].1)
    }
}

/// The snapshot kind of a file or symlink the stat cache recorded (`None` for others).
fn leaf_kind(kind: ScanKind, mode: u32) -> Option<EntryKind> {
    match kind {
        ScanKind::File if mode & 0o100 != 0 => Some(EntryKind::Executable),
        ScanKind::File => Some(EntryKind::File),
        ScanKind::Symlink => Some(EntryKind::Symlink),
        ScanKind::Dir | ScanKind::NestedRepo => None,
    }
}

fn kind_of(e: &ScanEntry) -> EntryKind {
    match e.kind {
        ScanKind::File if e.mode & 0o100 != 0 => EntryKind::Executable,
        ScanKind::File => EntryKind::File,
        ScanKind::Symlink => EntryKind::Symlink,
        ScanKind::Dir => EntryKind::Dir,
        ScanKind::NestedRepo => EntryKind::NestedRepo,
    }
}

/// Receives each tree built: its id and its encoding. Sibling directories are built in
/// parallel, so it is called from several threads at once.
pub(crate) type Emit<'a> = dyn Fn(ObjectId, Vec<u8>) + Sync + 'a;

/// The sorted paths a [`TreeBuilder`] builds trees over, read by index: a flat list, or a
/// capture's scanned entries with their ids beside them (so a capture holds no second list).
trait Rows: Sync {
    fn len(&self) -> usize;
    fn path(&self, i: usize) -> &[u8];
    fn kind(&self, i: usize) -> EntryKind;
    fn id(&self, i: usize) -> ObjectId;
    fn size(&self, i: usize) -> u64;
    /// Whether the directory at `i` is clean: its files are not rows, the stat cache's
    /// records stand for them ([`ScanEntry::clean`]).
    fn clean(&self, _i: usize) -> bool {
        false
    }

    /// The first index in `lo..hi` whose path is not below `pred` (paths are sorted, so
    /// `pred` holds for a prefix of the range).
    fn partition(&self, lo: usize, hi: usize, pred: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.path(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl Rows for [FlatEntry] {
    fn len(&self) -> usize {
        <[FlatEntry]>::len(self)
    }
    fn path(&self, i: usize) -> &[u8] {
        self[i].path.as_bytes()
    }
    fn kind(&self, i: usize) -> EntryKind {
        self[i].kind
    }
    fn id(&self, i: usize) -> ObjectId {
        self[i].id
    }
    fn size(&self, i: usize) -> u64 {
        self[i].size
    }
}

/// A capture's rows: scanned entries (their size the content's, a directory's its tree's)
/// and, index for index, their ids.
struct Scanned<'a> {
    entries: &'a [ScanEntry],
    ids: &'a [ObjectId],
}

impl Rows for Scanned<'_> {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn path(&self, i: usize) -> &[u8] {
        &self.entries[i].path
    }
    fn kind(&self, i: usize) -> EntryKind {
        kind_of(&self.entries[i])
    }
    fn id(&self, i: usize) -> ObjectId {
        self.ids[i]
    }
    fn size(&self, i: usize) -> u64 {
        self.entries[i].size
    }
    fn clean(&self, i: usize) -> bool {
        self.entries[i].clean
    }
}

/// Builds trees over sorted rows, reusing the stat cache's tree id for every directory it
/// proves unchanged: the directory itself was listed, every path below it hit, and the
/// cache lists no path below it that the disk lacks (equal counts of two contiguous ranges,
/// since paths sharing a prefix sort together). A no-change capture then builds no tree at
/// all, and a turn rebuilds only the directories on the paths it touched.
struct TreeBuilder<'a, R: Rows + ?Sized> {
    entries: &'a R,
    reuse: Reuse<'a>,
}

/// A directory a [`TreeBuilder`] built: its index, its tree id, its size.
type Built = (usize, ObjectId, u64);

/// A directory's tree as [`TreeBuilder::build`] made it.
struct Subtree {
    id: ObjectId,
    size: u64,
    /// Every directory below it that was rebuilt.
    built: Vec<Built>,
    /// A clean directory's records could not be read back (see [`CaptureError::StatCache`]).
    failed: bool,
}

/// A subdirectory to rebuild: its slot among its parent's entries, its row, its prefix
/// (ending in `/`), whether it is clean, and the range of its descendants.
struct Rebuild {
    slot: usize,
    row: usize,
    prefix: Vec<u8>,
    clean: bool,
    lo: usize,
    hi: usize,
}

/// Which directory ids a [`TreeBuilder`] may take as they are.
enum Reuse<'a> {
    /// A capture: those the stat cache proves unchanged.
    Cache {
        hits: &'a [bool],
        /// `misses[i]`: how many of `entries[..i]` missed.
        misses: Vec<usize>,
        cache: &'a StatCache,
        /// The records standing for the files of clean directories, ascending.
        omitted: &'a [usize],
    },
    /// A list whose directory ids are right except at these paths (and new directories,
    /// whose id is zero).
    Except(&'a HashSet<RelPath>),
}

impl<'a, R: Rows + ?Sized> TreeBuilder<'a, R> {
    fn new(
        entries: &'a R,
        hits: &'a [bool],
        cache: &'a StatCache,
        omitted: &'a [usize],
    ) -> TreeBuilder<'a, R> {
        let mut misses = Vec::with_capacity(hits.len() + 1);
        let mut n = 0;
        misses.push(n);
        for h in hits {
            n += usize::from(!h);
            misses.push(n);
        }
        TreeBuilder {
            entries,
            reuse: Reuse::Cache {
                hits,
                misses,
                cache,
                omitted,
            },
        }
    }

    /// Whether the directory `entries[i]` (descendants `lo..hi`, prefix `sub`) keeps its id.
    fn keeps(&self, i: usize, sub: &[u8], lo: usize, hi: usize) -> bool {
        match &self.reuse {
            Reuse::Cache {
                hits,
                misses,
                cache,
                omitted,
            } => {
                // Every path the cache holds below it is a row or a record standing for one.
                let (start, end) = cache.prefix_range(sub);
                let stood =
                    omitted.partition_point(|&o| o < end) - omitted.partition_point(|&o| o < start);
                hits[i] && misses[hi] == misses[lo] && end - start == hi - lo + stood
            }
            Reuse::Except(dirty) => {
                self.entries.id(i) != ObjectId::ZERO && !dirty.contains(self.entries.path(i))
            }
        }
    }

    /// The range of entries below `prefix` (which ends in `/`), searched in `lo..hi`.
    fn below(&self, prefix: &[u8], lo: usize, hi: usize) -> (usize, usize) {
        let start = self.entries.partition(lo, hi, |p| p < prefix);
        let end = self
            .entries
            .partition(start, hi, |p| p.starts_with(prefix) || p < prefix);
        (start, end)
    }

    /// The tree of the directory `prefix` (empty for the root, else ending in `/`) whose
    /// descendants are `entries[lo..hi]`; a clean directory's files come from the cache.
    /// The subdirectories to rebuild are built in parallel (rayon steals the deeper ones, so
    /// both cores work on one wide or one deep tree alike).
    fn build(&self, prefix: &[u8], clean: bool, lo: usize, hi: usize, emit: &Emit<'_>) -> Subtree {
        let mut tree = Tree::default();
        let mut failed = false;
        if clean && let Reuse::Cache { cache, .. } = &self.reuse {
            // Only a damaged map could fail here: the walk read the same records from it.
            let kids = cache.child_indices(prefix);
            failed |= kids.is_none();
            for k in kids.unwrap_or_default() {
                let Some(c) = cache.entry(k) else {
                    failed = true;
                    continue;
                };
                if let Some(kind) = leaf_kind(c.kind, c.stat.mode) {
                    tree.entries.push(TreeEntry {
                        name: c.path[prefix.len()..].to_vec(),
                        kind,
                        id: c.id,
                        size: c.stat.size,
                    });
                }
            }
        }
        let mut rebuild = Vec::new();
        for i in lo..hi {
            let path = self.entries.path(i);
            let name = &path[prefix.len()..];
            if name.contains(&b'/') {
                continue; // deeper: part of a subdirectory handled below
            }
            let kind = self.entries.kind(i);
            let (id, size) = if kind == EntryKind::Dir {
                let mut sub = path.to_vec();
                sub.push(b'/');
                let (slo, shi) = self.below(&sub, i + 1, hi);
                if self.keeps(i, &sub, slo, shi) {
                    (self.entries.id(i), self.entries.size(i))
                } else {
                    rebuild.push(Rebuild {
                        slot: tree.entries.len(),
                        row: i,
                        prefix: sub,
                        clean: self.entries.clean(i),
                        lo: slo,
                        hi: shi,
                    });
                    (ObjectId::ZERO, 0) // filled in below
                }
            } else {
                (self.entries.id(i), self.entries.size(i))
            };
            tree.entries.push(TreeEntry {
                name: name.to_vec(),
                kind,
                id,
                size,
            });
        }
        let subs: Vec<Subtree> = rebuild
            .par_iter()
            .map(|r| self.build(&r.prefix, r.clean, r.lo, r.hi, emit))
            .collect();
        let mut built = Vec::new();
        for (r, s) in rebuild.iter().zip(subs) {
            let entry = &mut tree.entries[r.slot];
            (entry.id, entry.size) = (s.id, s.size);
            built.push((r.row, s.id, s.size));
            built.extend(s.built);
            failed |= s.failed;
        }
        tree.entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let size = tree.entries.iter().map(|t| t.size).sum();
        let bytes = tree.encode();
        let id = ObjectId::of_tree(&bytes);
        emit(id, bytes);
        Subtree {
            id,
            size,
            built,
            failed,
        }
    }

    /// The root tree id, and every rebuilt directory's (index, id, size); `None` when a
    /// clean directory's records could not be read back.
    fn root(self, emit: &Emit<'_>) -> Option<(ObjectId, Vec<Built>)> {
        let n = self.entries.len();
        if let Reuse::Cache {
            misses,
            cache,
            omitted,
            ..
        } = &self.reuse
            && cache.root() != ObjectId::ZERO
            && misses[n] == 0
            && cache.len() == n + omitted.len()
        {
            return Some((cache.root(), Vec::new()));
        }
        let tree = self.build(&[], false, 0, n, emit);
        (!tree.failed).then_some((tree.id, tree.built))
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Captures the workspace.
pub(crate) fn capture(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
) -> Result<Capture, CaptureError> {
    std::fs::read_dir(ctx.root).map_err(|source| CaptureError::Root {
        path: ctx.root.into(),
        source,
    })?;
    let mut phases = crate::trace::Phases::new("capture");
    // Before the walk: every listing and read this capture records happens after it, which
    // is what the racy margin is measured from.
    let started_ns = now_ns();
    // Damage found by earlier reads is forgotten first, so no object known to be bad is
    // taken as "already stored" (see `store::heal`).
    ctx.store.forget_damaged()?;
    let reader = ctx.store.reader()?;
    let store_id = reader.cache_key()?;
    // The cache names the store (and store state: forgetting objects changes the key) it was
    // written for, after that store committed every id it holds, so its ids are usable
    // whether or not this capture stores anything.
    let head = StatCache::load_head(ctx.statcache, &store_id);
    let since = head
        .and_then(|h| h.token)
        .filter(|_| ctx.watch.is_some_and(|w| !w.rescan));
    let answer = match ctx.watch {
        Some(w) => crate::watch::ask(w.runtime_dir, ctx.root, since, w.timeout),
        None => crate::watch::Answer::Absent {
            reason: "no watcher".into(),
        },
    };
    phases.mark("watcher");
    let vouch = match &answer {
        crate::watch::Answer::Changes { changes, .. } if since.is_some() => Some(changes),
        _ => None,
    };
    if let (Some(changes), Some(head)) = (vouch, head)
        && let Some(done) = unchanged(ctx, opts, &reader, &store_id, &head, changes)?
    {
        phases.mark("unchanged");
        return Ok(done);
    }
    if let (Some(changes), Some(head), Some(token)) = (vouch, head, answer.token())
        && let Some(done) = changed::capture(
            ctx, opts, &reader, &store_id, &head, changes, token, started_ns,
        )?
    {
        phases.mark("changed directories");
        return Ok(done);
    }
    // Recorded with what this capture observes: the watcher's new token, else the old one
    // (older than anything observed now, so still a safe start for the next answer).
    let token = answer.token().or(head.and_then(|h| h.token));
    let cache = StatCache::load(ctx.statcache, &store_id);
    phases.mark("stat cache load");
    // The cache on disk must be the one the token was sent for (another capture may have
    // replaced it since the header was read), and not one a watched capture went past.
    let beside = head.is_some_and(|h| h.beside);
    let vouch = vouch.filter(|_| cache.head().token == since && !beside);
    let scan = scan::scan(
        ctx.root,
        ctx.store_dir,
        ctx.allow_secrets,
        ctx.nested_repos,
        Some(&cache),
        vouch,
        ctx.rules_settings,
    );
    phases.mark("scan");
    let (rules, listed, reused) = (scan.rules, scan.listed, scan.reused);
    // Whether every directory's record (its `lstat` data, its listing flag) is the one the
    // cache holds: with every path a hit, the cache on disk is then exact.
    let dirs_same = scan
        .entries
        .par_iter()
        .filter(|e| matches!(e.kind, ScanKind::Dir | ScanKind::NestedRepo))
        .all(|e| {
            cache.get(&e.path).is_some_and(|c| {
                c.kind == e.kind
                    && c.listing == e.listing
                    && c.stat.mode == e.mode
                    && c.stat.mtime_ns == e.mtime_ns
                    && c.stat.ctime_ns == e.ctime_ns
                    && c.stat.ino == e.ino
            })
        });
    let hasher = Hasher::new(ctx, &reader, opts.store_objects)?;
    let files = scan
        .entries
        .iter()
        .filter(|e| matches!(e.kind, ScanKind::File | ScanKind::Symlink))
        .count();
    opts.progress.start("capture", files as u64);
    // Both lists are sorted: each run of entries a job takes merges with the cache linearly.
    // Each scanned entry gets its id beside it and keeps what the next stat cache records
    // (a file read records its own `fstat`; a directory's size becomes its tree's), in one
    // indexed parallel pass that writes straight into the two lists: no second list of
    // entries while the cache is mapped, no serial pass, no copy while collecting.
    let left_out: Mutex<Vec<(Vec<u8>, Fate)>> = Mutex::new(Vec::new());
    let hashed_count = std::sync::atomic::AtomicU64::new(0);
    let mut scanned = scan.entries;
    let (mut ids, mut hits): (Vec<ObjectId>, Vec<bool>) = scanned
        .par_iter_mut()
        .enumerate()
        .with_min_len(LOOK_BLOCK)
        .map_init(
            || Merge {
                next: usize::MAX,
                pos: 0,
                files: 0,
                progress: opts.progress,
                parent: Parent::default(),
            },
            |m, (i, e)| {
                if i != m.next {
                    m.pos = cache.position(&e.path);
                }
                m.next = i + 1;
                if matches!(e.kind, ScanKind::File | ScanKind::Symlink) {
                    m.files += 1;
                    // Progress is reported per block: a bar's lock per file would cost more
                    // than a hit.
                    if m.files == LOOK_BLOCK as u64 {
                        m.flush();
                    }
                }
                let hit = cache.lookup_at(e, &mut m.pos);
                let previous = hit.is_none().then(|| cache.previous_at(e, m.pos)).flatten();
                match hasher.look(e, hit, previous, &mut m.parent) {
                    Looked::Done {
                        id,
                        size,
                        hit,
                        hashed,
                        fresh,
                    } => {
                        if hashed {
                            hashed_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        if let Some(f) = fresh {
                            (e.mode, e.mtime_ns, e.ctime_ns, e.ino, e.linked) =
                                (f.mode, f.mtime_ns, f.ctime_ns, f.ino, f.linked);
                        }
                        e.size = size;
                        (id, hit)
                    }
                    other => {
                        let fate = match other {
                            Looked::Secret => Fate::Secret,
                            Looked::Skip(reason) => Fate::Skip(reason),
                            _ => Fate::Gone,
                        };
                        left_out
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((e.path.clone(), fate));
                        // A placeholder, removed below (the size marks it).
                        e.size = u64::MAX;
                        (ObjectId::ZERO, false)
                    }
                }
            },
        )
        .unzip();
    opts.progress.finish();
    phases.mark("stat cache + read");
    if let Some(e) = hasher.error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e.into());
    }
    let (omitted, omitted_bytes) = (scan.omitted, scan.omitted_bytes);
    let mut skipped = scan.skipped;
    let mut secrets = scan.secrets;
    let captured_repos = scan.repos;
    let left_out = left_out
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !left_out.is_empty() {
        let gone: HashSet<&[u8]> = left_out.iter().map(|(p, _)| p.as_slice()).collect();
        let keep: Vec<bool> = scanned
            .iter()
            .map(|e| !(e.size == u64::MAX && gone.contains(e.path.as_slice())))
            .collect();
        let mut k = keep.iter();
        scanned.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        ids.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        hits.retain(|_| *k.next().unwrap_or(&true));
    }
    // The walk vouched for these directories' listings, but capture left a path of theirs
    // out: the next walk must list them again and look at that path afresh (a key file
    // rewritten, a file that was changing, one that becomes readable), since a reused
    // listing only looks at the paths the cache holds.
    let any_left_out = !left_out.is_empty();
    for (path, _) in &left_out {
        let parent = path.iter().rposition(|&b| b == b'/').map(|i| &path[..i]);
        if let Some(parent) = parent
            && let Ok(i) = scanned.binary_search_by(|e| e.path.as_slice().cmp(parent))
        {
            scanned[i].listing = false;
        }
    }
    for (path, fate) in left_out {
        match fate {
            Fate::Secret => secrets.push(crate::object::show_path(&path)),
            Fate::Skip(reason) => skipped.push(Skipped {
                path: crate::object::show_path(&path),
                reason,
            }),
            Fate::Gone => {}
        }
    }
    let nested_repos: Vec<String> = scanned
        .iter()
        .filter(|e| e.kind == ScanKind::NestedRepo)
        .map(|e| crate::object::show_path(&e.path))
        .collect();
    let hashed = hashed_count.into_inner();
    let stat_cache_lost = || CaptureError::StatCache {
        path: ctx.statcache.into(),
    };
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    secrets.sort();
    // Trees are stored whole, never as deltas: a damaged tree would make every tree whose
    // chain runs through it unreadable, and with it every file of those snapshots (a
    // hostile review lost 8 snapshots to one flipped byte). Damage to a tree costs one
    // snapshot, as before deltas.
    let rows = Scanned {
        entries: &scanned,
        ids: &ids,
    };
    let store_trees = opts.store_objects;
    // The trees this capture builds, by id, for the commit's records when no flat list is
    // made (`also` without `list`): what they compare with the snapshot is read from these
    // and from the store, where every tree the capture did not build already is (a turn's
    // capture builds only the directories on the paths it touched).
    let keep_trees = opts.also.is_some() && !opts.list;
    let kept_trees: Mutex<HashMap<ObjectId, Vec<u8>>> = Mutex::new(HashMap::new());
    let (root, built) = TreeBuilder::new(&rows, &hits, &cache, &omitted)
        .root(&|id, bytes| {
            if keep_trees {
                kept_trees
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, bytes.clone());
            }
            // Queued as built: a capture of 40k new directories never holds all their trees.
            if store_trees && !hasher.known(&id) {
                hasher.queue(vec![PendingObject::whole(
                    id,
                    ObjectKind::Tree,
                    bytes.len() as u64,
                    bytes,
                )]);
            }
        })
        .ok_or_else(stat_cache_lost)?;
    // A batch the trees filled can fail too (busy, disk full): its objects were never
    // written, so no snapshot may name them.
    if let Some(e) = hasher
        .error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        return Err(e.into());
    }
    for (i, id, size) in built {
        ids[i] = id;
        scanned[i].size = size;
    }
    phases.mark("trees");
    let cached_before = cache.len();
    let content = |e: &&ScanEntry| matches!(e.kind, ScanKind::File | ScanKind::Symlink);
    let files = (scanned.iter().filter(content).count() + omitted.len()) as u64;
    let bytes = scanned.iter().filter(content).map(|e| e.size).sum::<u64>() + omitted_bytes;
    let all_hit = hits.iter().all(|h| *h);
    drop(hits);
    let total = scanned.len() + omitted.len();
    // Rows and standing records interleave in path order: `true` a row, `false` a record.
    // A walk with a token the cache does not hold yet records it, so that the next capture
    // can ask the watcher.
    let new_token = vouch.is_none() && token != cache.head().token;
    let needs_rewrite = opts.store_objects
        && (new_token
            || beside
            || !(all_hit && total == cached_before && dirs_same && !any_left_out))
        && !(opts.cache == CacheRewrite::Deferred
            && !new_token
            && !beside
            && !any_left_out
            && hashed <= DEFER_CACHE_READS);
    let quiet = capture_quiet(&scanned, &skipped, &secrets, &captured_repos)
        && !omitted
            .iter()
            .any(|&i| cache.at(i).is_none_or(|c| c.stat.linked));
    let listed_wanted = opts.list;
    let order = if needs_rewrite || (listed_wanted && !omitted.is_empty()) {
        path_order(&scanned, &cache, &omitted)
    } else {
        Vec::new()
    };
    // The flat list callers get (and the final commit's records see, unless they see the
    // trees built above); the scanned entries
    // keep their `lstat` data for the stat cache, which is written after the commit.
    let entries: Vec<FlatEntry> = if !listed_wanted {
        Vec::new()
    } else if omitted.is_empty() {
        scanned
            .par_iter_mut()
            .zip(ids.par_iter())
            .map(|(e, id)| FlatEntry {
                kind: kind_of(e),
                path: RelPath::from(std::mem::take(&mut e.path)),
                id: *id,
                size: e.size,
            })
            .collect()
    } else {
        flat_list(&scanned, &ids, &cache, &omitted, &order).ok_or_else(stat_cache_lost)?
    };
    let mut capture = Capture {
        id: root,
        files,
        bytes,
        new_objects: 0,
        new_bytes: 0,
        hashed,
        skipped,
        nested_repos,
        captured_repos,
        secrets,
        listed,
        reused,
        walked_because: answer.fallback().map(str::to_string),
        focused: false,
        entries: Vec::new(),
    };
    if opts.store_objects {
        let kept_trees = kept_trees
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let seen = if keep_trees {
            Captured::Trees(&kept_trees)
        } else {
            Captured::Flat(&entries)
        };
        commit(ctx, opts, hasher, &seen, &mut capture)?;
        phases.mark("commit");
        // Nothing read and the same paths: the cache on disk is already exact (and has no
        // racy entries, which are never hits), so a no-change capture skips the rewrite.
        if needs_rewrite {
            let listed = !entries.is_empty();
            let (order, scanned, entries, ids, cache, omitted) =
                (&order, &scanned, &entries, &ids, &cache, &omitted);
            let records = || {
                let (mut k, mut r, mut o) = (0, 0, 0);
                std::iter::from_fn(move || {
                    let row = if order.is_empty() {
                        r < scanned.len()
                    } else {
                        *order.get(k)?
                    };
                    if order.is_empty() && !row {
                        return None;
                    }
                    k += 1;
                    if !row {
                        o += 1;
                        return cache.entry(omitted[o - 1]);
                    }
                    let e = &scanned[r];
                    r += 1;
                    Some(CacheEntry {
                        // Rows moved their paths into the flat list when there is one.
                        path: if listed {
                            &entries[k - 1].path
                        } else {
                            &e.path
                        },
                        // A directory's size is its tree's (set above), not its `lstat`.
                        stat: Stat::of(e),
                        id: ids[r - 1],
                        kind: e.kind,
                        listing: e.listing,
                    })
                })
            };
            let header = crate::statcache::Header {
                store_id: &store_id,
                root: &root,
                written_ns: started_ns,
                rules: &rules,
                token,
                files,
                bytes,
                quiet,
                nested: !capture.nested_repos.is_empty(),
            };
            // The cache is disposable: failing to write it only costs re-hashing next time
            // (a record that cannot be read back ends the list early: the count then fails).
            let _ = StatCache::write_sorted(ctx.statcache, &header, total, records);
            // The head a watched capture wrote beside the old cache names it: stale now.
            let _ = std::fs::remove_file(crate::statcache::watched_path(ctx.statcache));
        }
        phases.mark("stat cache write");
    }
    capture.entries = entries;
    Ok(capture)
}

/// Whether a capture that found this would find it again from the cache alone (see
/// [`crate::statcache::Header::quiet`]): nothing left out, every listing reusable, and no
/// file with several links (written through another path, it changes with no event the
/// watcher sees). Nested repositories left alone are quiet (their records say where they
/// are, and a `.git` created, removed or renamed is an event in the repository's own
/// directory); those captured as roots of their own are not: what is captured inside one
/// follows its `.git/info/exclude`, in no rules key, whose writes make no event (`.git` is
/// never watched), and their listings are never reused.
fn capture_quiet(
    scanned: &[ScanEntry],
    skipped: &[Skipped],
    secrets: &[String],
    captured: &[String],
) -> bool {
    skipped.is_empty()
        && secrets.is_empty()
        && captured.is_empty()
        && scanned.iter().all(|e| match e.kind {
            ScanKind::Dir => e.listing,
            _ => !e.linked,
        })
}

/// The capture when a watcher says nothing changed since the cache on disk was written:
/// its header's snapshot, recorded again, without reading a record but the kinds, when it
/// holds nested repositories, to name them (`None` when the header cannot stand for the
/// disk, or the caller wants the list of paths).
fn unchanged(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
    reader: &StoreReader,
    store_id: &[u8; 16],
    head: &crate::statcache::Head,
    changes: &crate::watch::Changes,
) -> Result<Option<Capture>, CaptureError> {
    if !changes.is_empty() || !head.quiet || opts.list {
        return Ok(None);
    }
    let rules = scan::rules(
        ctx.root,
        ctx.store_dir,
        ctx.nested_repos,
        ctx.rules_settings,
    );
    if rules != head.rules || !reader.contains(&head.root)? {
        return Ok(None);
    }
    let root = head.root;
    // The nested repositories are those the last capture found (the cache's records).
    let nested_repos = if head.nested {
        let Some(found) = changed::nested_repos(ctx, reader, store_id, head)? else {
            return Ok(None);
        };
        found
    } else {
        Vec::new()
    };
    let mut capture = Capture {
        id: root,
        files: head.files,
        bytes: head.bytes,
        new_objects: 0,
        new_bytes: 0,
        hashed: 0,
        skipped: Vec::new(),
        nested_repos,
        captured_repos: Vec::new(),
        secrets: Vec::new(),
        listed: 0,
        reused: 0,
        walked_because: None,
        focused: false,
        entries: Vec::new(),
    };
    // Nothing to record: the snapshot is stored already, and an empty commit would only sync.
    if opts.store_objects && (opts.record.is_some() || opts.also.is_some()) {
        let record = opts
            .record
            .as_ref()
            .map(|label| SnapshotRecord::now(root, label.clone(), head.files, head.bytes));
        let last_known = record.as_ref().map(|_| root);
        let none = std::collections::HashMap::new();
        let written =
            ctx.store
                .write_with(Vec::new(), record.as_ref(), last_known, |tx| {
                    match opts.also {
                        Some(also) => also(tx, root, &Captured::Trees(&none)),
                        None => Ok(()),
                    }
                })?;
        capture.new_objects = written.objects;
        capture.new_bytes = written.stored_bytes;
    }
    Ok(Some(capture))
}

/// Positions per block when the flat list is built from [`path_order`] in parallel.
const ORDER_BLOCK: usize = 4096;

/// The flat list of rows (`scanned` with `ids`) and the records standing for the files of
/// clean directories (`omitted`), interleaved as `order` says, built in parallel; `None`
/// when a record cannot be read back.
fn flat_list(
    scanned: &[ScanEntry],
    ids: &[ObjectId],
    cache: &StatCache,
    omitted: &[usize],
    order: &[bool],
) -> Option<Vec<FlatEntry>> {
    // Where each block of positions starts among the rows.
    let mut starts: Vec<usize> = order
        .par_chunks(ORDER_BLOCK)
        .map(|c| c.iter().filter(|r| **r).count())
        .collect();
    let mut before = 0;
    for s in &mut starts {
        (*s, before) = (before, before + *s);
    }
    let lost = std::sync::atomic::AtomicBool::new(false);
    let out: Vec<FlatEntry> = order
        .par_iter()
        .enumerate()
        .with_min_len(ORDER_BLOCK)
        .map_init(
            // A job's next position and where it stands among rows and records.
            || (usize::MAX, 0, 0),
            |(next, r, o), (k, &row)| {
                if k != *next {
                    let b = k / ORDER_BLOCK;
                    *r = starts[b] + order[b * ORDER_BLOCK..k].iter().filter(|x| **x).count();
                    *o = k - *r;
                }
                *next = k + 1;
                if row {
                    let e = &scanned[*r];
                    *r += 1;
                    return FlatEntry {
                        kind: kind_of(e),
                        path: RelPath::from(e.path.as_slice()),
                        id: ids[*r - 1],
                        size: e.size,
                    };
                }
                *o += 1;
                let c = cache.entry(omitted[*o - 1]);
                if let Some((kind, c)) = c.and_then(|c| Some((leaf_kind(c.kind, c.stat.mode)?, c)))
                {
                    return FlatEntry {
                        kind,
                        path: RelPath::from(c.path),
                        id: c.id,
                        size: c.stat.size,
                    };
                }
                lost.store(true, std::sync::atomic::Ordering::Relaxed);
                FlatEntry {
                    kind: EntryKind::File,
                    path: RelPath::default(),
                    id: ObjectId::ZERO,
                    size: 0,
                }
            },
        )
        .collect();
    (!lost.into_inner()).then_some(out)
}

/// How the rows (`scanned`, sorted) and the records standing for the files of clean
/// directories (`omitted`, ascending) interleave in path order: `true` for a row.
fn path_order(scanned: &[ScanEntry], cache: &StatCache, omitted: &[usize]) -> Vec<bool> {
    let mut order = Vec::with_capacity(scanned.len() + omitted.len());
    let (mut r, mut o) = (0, 0);
    while r < scanned.len() || o < omitted.len() {
        let row = match (scanned.get(r), omitted.get(o).and_then(|&i| cache.path(i))) {
            (Some(e), Some(p)) => e.path.as_slice() < p,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if row {
            r += 1;
        } else {
            o += 1;
        }
        order.push(row);
    }
    order
}

/// The root tree id of a full sorted flat list whose directory ids are right except at the
/// paths in `dirty` (and new directories, whose id is zero): those are rebuilt, with every
/// ancestor, and their ids and sizes filled in. `emit` receives each rebuilt tree. A restore
/// uses it to record the state it wrote without scanning the disk again.
pub(crate) fn tree_of_list(
    entries: &mut [FlatEntry],
    dirty: &HashSet<RelPath>,
    emit: &Emit<'_>,
) -> ObjectId {
    let (root, built) = TreeBuilder {
        entries: &*entries,
        reuse: Reuse::Except(dirty),
    }
    .root(emit)
    .unwrap_or_default(); // only clean directories of a capture can fail
    for (i, id, size) in built {
        entries[i].id = id;
        entries[i].size = size;
    }
    root
}

/// Joins a workspace-relative byte path onto the root.
#[must_use]
pub fn abs_path(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel))
}

#[cfg(test)]
mod tests;
