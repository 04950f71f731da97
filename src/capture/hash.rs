//! Reading and hashing what a capture looks at: files and symlinks opened beneath the root,
//! read once (re-read when they change meanwhile), hashed, and turned into the objects the
//! store lacks (whole, chunked, or as deltas against the version they replace).

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::CaptureContext;
use super::write::Pending;
use crate::error::StoreError;
use crate::object::{
    CHUNK_AVG, CHUNK_MAX, CHUNK_MIN, CHUNK_THRESHOLD, ChunkList, DeltaBase, ObjectId, ObjectKind,
    PendingObject,
};
use crate::scan::{self, ScanEntry, ScanKind};
use crate::statcache::{RACY_MARGIN_NS, Stat};
use crate::store::{Store, StoreReader, WriteStats};

/// Objects smaller than this are stored whole: in a shared frame they compress to about what
/// a delta's extra 33 record bytes and its frame header cost.
const DELTA_MIN_BYTES: usize = 256;

/// A file's content is a private key (see [`scan::exclude::looks_like_private_key`]).
#[derive(Debug)]
struct SecretFound;

impl std::fmt::Display for SecretFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("holds a private key")
    }
}

impl std::error::Error for SecretFound {}

pub(super) struct Hasher<'a> {
    /// Objects the store forgot as damaged: met again, stored whole (see
    /// [`crate::store::schema::META_FORGOTTEN_IDS`]).
    pub(super) revived: HashSet<ObjectId>,
    /// The root, open: every file and symlink is read beneath it, following no symlink
    /// (`None` when it could not be opened: every read then fails, named).
    pub(super) beneath: Option<scan::beneath::Root>,
    pub(super) allow_secrets: Option<&'a globset::GlobSet>,
    /// The store as the capture began: what it knows is what the capture need not write.
    pub(super) reader: &'a StoreReader,
    /// The store as of the last batch this capture committed ([`Hasher::push_frame`]),
    /// asked only about ids the capture may have written itself ([`Pending::seen`]). The
    /// reader from the start answers all the other lookups: its tree stays as small as
    /// the store was, which at a million new files makes the read phase 25% faster.
    pub(super) committed: RwLock<Option<StoreReader>>,
    pub(super) store_objects: bool,
    pub(super) pending: Mutex<Pending>,
    pub(super) store: &'a Store,
    pub(super) error: Mutex<Option<StoreError>>,
    pub(super) flushed: Mutex<WriteStats>,
    /// Held while a full batch is written (see [`Hasher::push_frame`]).
    pub(super) writing: Mutex<()>,
}

/// The directory of the file a job read last, open (`O_PATH`): files are opened relative to
/// it, so the kernel resolves one name per file instead of every component of its path
/// (a sixth of a cold capture's CPU went to path lookups at a million files). It is opened
/// beneath the root ([`scan::beneath`]): a directory swapped for a symlink since the walk
/// is never followed.
#[derive(Default)]
pub(super) struct Parent {
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

/// The result of looking at one scanned path.
pub(super) enum Looked {
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

impl<'a> Hasher<'a> {
    pub(super) fn new(
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
}

impl Hasher<'_> {
    /// Whether the store holds `id` readably: a delta whose base was forgotten is not
    /// known, so the capture stores it again (whole, or against a sound base).
    pub(super) fn known(&self, id: &ObjectId) -> bool {
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
    pub(super) fn look(
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

pub(super) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
