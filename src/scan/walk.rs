//! The walk itself: one job per directory on rayon's pool, `lstat`s relative to the
//! directory's own descriptor, git's ignore rules, and listings reused from the stat cache.
//!
//! A directory is listed (`getdents`, ignore matching, one `fstatat` per entry kept) unless
//! the previous capture's cache vouches for its listing: the directory's mode, mtime, ctime
//! and inode are what the cache recorded, settled (older than that capture's start by the
//! racy margin), the rules key is unchanged, and no ancestor's `.gitignore` changed. Then
//! the names are the ones the cache lists inside it, and only those are `lstat`ed (git's
//! untracked cache works the same way). A name that has gone, or changed kind, means the
//! listing is stale after all: the directory is listed.
//!
//! What a reused listing cannot know is kept out of reuse: a directory whose listing left
//! something out other than by an ignore rule (a credential by name, a FIFO, an unreadable
//! entry, a malformed `.gitignore`), whose `.gitignore` is not captured as a regular file,
//! or that lies inside a nested repository captured as a root of its own (whose
//! `.git/info/exclude` no key covers) is listed every time. A `.gitignore` that changed
//! makes its directory and everything below it be listed again.

mod list;
mod reuse;
mod rules;
mod vouched;

pub(crate) use reuse::trusts_directory_mtimes;
pub(super) use rules::rules_key;

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;

use super::{ScanEntry, ScanKind, Skipped};
use crate::config::NestedRepos;
use crate::statcache::{Stat, StatCache};
use crate::vouch::Changes;
use rules::Rules;

/// Where one directory's results go: found by a job, handed over once at its end.
#[derive(Default)]
struct Found {
    entries: Vec<ScanEntry>,
    skipped: Vec<Skipped>,
    secrets: Vec<String>,
    /// Stat-cache records standing for the files of clean directories, and their bytes.
    omitted: Vec<usize>,
    omitted_bytes: u64,
}

/// What the walk needs to know about a directory to process it.
struct Job {
    /// Path relative to the workspace root (empty for the root).
    rel: Vec<u8>,
    /// The rules that applied to its name (its parent's), to extend with its own; `None`
    /// for the root.
    rules: Option<Arc<Rules>>,
    /// An ancestor's rules changed since the cache was written: list everything below.
    fresh: bool,
    /// Inside a nested repository walked as a root of its own: never flag a listing as
    /// reusable (its `info/exclude` is in no key).
    untracked: bool,
    /// Its record in the cache, when the parent's reused listing already read it.
    cached: Option<(ScanKind, Stat, bool)>,
    /// Neither it nor an ancestor is new to the watcher (see [`Walk::vouch`]).
    watched: bool,
}

/// The shared state of one walk.
pub(super) struct Walk<'a> {
    pub root: &'a Path,
    pub store_dir: Option<&'a Path>,
    pub allow: Option<&'a globset::GlobSet>,
    pub nested: NestedRepos,
    /// The previous capture's cache, when its rules key matches this walk's.
    pub prior: Option<&'a StatCache>,
    /// What a watcher says changed since `prior` was written: every directory it does not
    /// name (and that lies in no subtree it names) is exactly as `prior` records it, so its
    /// records are taken without a system call.
    pub vouch: Option<&'a Changes>,
    /// The global excludes file (`core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`).
    global: Option<PathBuf>,
    /// The workspace root's device: only directories on it may reuse a listing.
    root_dev: Option<u64>,
    /// The root, open: every directory is opened beneath it, following no symlink.
    root_dir: Result<super::beneath::Root, Errno>,
    /// One bucket per worker thread (and one for any other thread), so handing a
    /// directory's results over never waits on another thread.
    found: Vec<Mutex<Found>>,
    repos: Mutex<Vec<Vec<u8>>>,
    listed: AtomicU64,
    reused: AtomicU64,
}

/// What a walk found, unsorted.
pub(super) struct Walked {
    pub entries: Vec<ScanEntry>,
    pub skipped: Vec<Skipped>,
    pub secrets: Vec<String>,
    /// See [`Found`].
    pub omitted: Vec<usize>,
    pub omitted_bytes: u64,
    pub repos: Vec<Vec<u8>>,
    /// Directories listed and directories whose listing was reused.
    pub listed: u64,
    pub reused: u64,
}

fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let ns = |s: i64, n: u64| {
        s.saturating_mul(1_000_000_000)
            .saturating_add(n.cast_signed())
    };
    Stat {
        mode: st.st_mode,
        size: st.st_size.cast_unsigned(),
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        ino: st.st_ino,
        linked: st.st_nlink > 1 && FileType::from_raw_mode(st.st_mode) != FileType::Directory,
    }
}

fn kind_of(mode: u32) -> Option<ScanKind> {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => Some(ScanKind::File),
        FileType::Symlink => Some(ScanKind::Symlink),
        FileType::Directory => Some(ScanKind::Dir),
        _ => None,
    }
}

fn entry(path: Vec<u8>, kind: ScanKind, st: &Stat, listing: bool) -> ScanEntry {
    let sized = matches!(kind, ScanKind::File | ScanKind::Symlink);
    ScanEntry {
        path,
        kind,
        size: if sized { st.size } else { 0 },
        mtime_ns: st.mtime_ns,
        ctime_ns: st.ctime_ns,
        ino: st.ino,
        mode: st.mode,
        listing,
        clean: false,
        linked: st.linked,
    }
}

/// The same `lstat` data for the purpose of trusting a listing or an ignore file.
fn same(a: &Stat, b: &Stat, with_size: bool) -> bool {
    a.mode == b.mode
        && a.mtime_ns == b.mtime_ns
        && a.ctime_ns == b.ctime_ns
        && a.ino == b.ino
        && (!with_size || a.size == b.size)
}

/// The directory holding `rel` (the root's is `None`; a name at the top is in the root,
/// `b""`).
fn parent_of(rel: &[u8]) -> Option<&[u8]> {
    if rel.is_empty() {
        return None;
    }
    Some(
        rel.iter()
            .rposition(|&b| b == b'/')
            .map_or(&rel[..0], |i| &rel[..i]),
    )
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        p.extend_from_slice(rel);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn statat(fd: impl AsFd, name: &[u8]) -> rustix::io::Result<Stat> {
    rustix::fs::statat(fd, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW).map(|s| stat_of(&s))
}

fn gone(e: Errno) -> bool {
    e == Errno::NOENT || e == Errno::NOTDIR || e == Errno::LOOP
}

/// Why a directory the walk listed is left out: it was swapped for a symlink meanwhile.
pub(crate) const SWAPPED: &str = "replaced by a symlink or a file while the capture ran (never \
                                  followed): left out, captured next time";

impl<'a> Walk<'a> {
    pub(super) fn new(
        root: &'a Path,
        store_dir: Option<&'a Path>,
        allow: Option<&'a globset::GlobSet>,
        nested: NestedRepos,
        prior: Option<&'a StatCache>,
        vouch: Option<&'a Changes>,
    ) -> Walk<'a> {
        Walk {
            root,
            store_dir,
            allow,
            nested,
            prior,
            vouch: vouch.filter(|_| prior.is_some()),
            global: ignore::gitignore::gitconfig_excludes_path(),
            root_dev: rustix::fs::stat(root).ok().map(|s| s.st_dev),
            root_dir: super::beneath::Root::open(root)
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO)),
            found: (0..=rayon::current_num_threads())
                .map(|_| Mutex::new(Found::default()))
                .collect(),
            repos: Mutex::new(Vec::new()),
            listed: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    /// Walks the whole workspace.
    pub(super) fn run(self) -> Walked {
        rayon::scope(|s| {
            self.dir(
                s,
                &Job {
                    rel: Vec::new(),
                    rules: None,
                    fresh: self.prior.is_none(),
                    untracked: false,
                    cached: None,
                    watched: self.vouch.is_some_and(|v| !v.subtree.contains(&[][..])),
                },
            );
        });
        self.collect()
    }

    /// Everything the jobs found, from every thread's bucket.
    fn collect(self) -> Walked {
        let mut buckets: Vec<Found> = self
            .found
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect();
        // The largest bucket takes the others: growing it in place (a large allocation is
        // remapped, not copied) holds one copy of the entries, not two.
        let largest = (0..buckets.len())
            .max_by_key(|&i| buckets[i].entries.len())
            .unwrap_or(0);
        let mut found = if buckets.is_empty() {
            Found::default()
        } else {
            buckets.swap_remove(largest)
        };
        found
            .entries
            .reserve_exact(buckets.iter().map(|b| b.entries.len()).sum());
        for mut b in buckets {
            found.entries.append(&mut b.entries);
            found.skipped.append(&mut b.skipped);
            found.secrets.append(&mut b.secrets);
            found.omitted.append(&mut b.omitted);
            found.omitted_bytes += b.omitted_bytes;
        }
        Walked {
            entries: found.entries,
            skipped: found.skipped,
            secrets: found.secrets,
            omitted: found.omitted,
            omitted_bytes: found.omitted_bytes,
            repos: self
                .repos
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
            listed: self.listed.into_inner(),
            reused: self.reused.into_inner(),
        }
    }

    fn hand_over(&self, mut mine: Found) {
        let last = self.found.len() - 1;
        let i = rayon::current_thread_index().map_or(last, |i| i.min(last));
        let mut all = self.found[i].lock().unwrap_or_else(PoisonError::into_inner);
        all.entries.append(&mut mine.entries);
        all.skipped.append(&mut mine.skipped);
        all.secrets.append(&mut mine.secrets);
        all.omitted.append(&mut mine.omitted);
        all.omitted_bytes += mine.omitted_bytes;
    }

    /// Opens `rel` beneath the root ([`super::beneath`]).
    fn open_beneath(&self, rel: &[u8], flags: OFlags) -> rustix::io::Result<rustix::fd::OwnedFd> {
        match &self.root_dir {
            Ok(root) => root.open_at(rel, flags),
            Err(e) => Err(*e),
        }
    }

    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(OsStr::from_bytes(rel))
        }
    }

    /// Processes one directory and spawns a job for each directory inside it.
    fn dir<'s>(&'s self, scope: &rayon::Scope<'s>, job: &Job) {
        let mut found = Found::default();
        let children = self.dir_into(job, &mut found);
        self.hand_over(found);
        for child in children {
            scope.spawn(move |s| self.dir(s, &child));
        }
    }

    /// The `lstat` of `name` in the directory `dfd`; `None` when it has gone, or (named as
    /// left out, and the listing not reusable) when it cannot be read.
    fn stat_child(
        dfd: rustix::fd::BorrowedFd<'_>,
        name: &[u8],
        rel: &[u8],
        found: &mut Found,
        listing_ok: &mut bool,
    ) -> Option<Stat> {
        match statat(dfd, name) {
            Ok(now) => Some(now),
            Err(e) if gone(e) => None,
            Err(e) => {
                Self::skip(found, rel, std::io::Error::from(e).to_string());
                *listing_ok = false;
                None
            }
        }
    }

    fn skip(found: &mut Found, rel: &[u8], reason: String) {
        found.skipped.push(Skipped {
            path: crate::object::show_path(rel),
            reason,
        });
    }

    /// The work of [`Walk::dir`]: entries into `found`, the directories inside returned.
    fn dir_into(&self, job: &Job, found: &mut Found) -> Vec<Job> {
        let is_root = job.rel.is_empty();
        if !is_root
            && job.watched
            && !job.fresh
            && let Some(v) = self.vouch
            && !v.dirty.contains(&job.rel)
            && let Some(children) = self.reuse_vouched(job, found)
        {
            self.reused.fetch_add(1, Ordering::Relaxed);
            return children;
        }
        let abs = self.abs(&job.rel);
        let fd = match self.open_beneath(&job.rel, OFlags::RDONLY | OFlags::DIRECTORY) {
            Ok(fd) => fd,
            // Listed, then deleted before it could be entered: it is simply not there.
            Err(Errno::NOENT) if !is_root => return Vec::new(),
            // Replaced by a symlink or a file (or a directory above it was) since it was
            // listed: never followed, left out and named.
            Err(e) if (gone(e) || super::beneath::swapped(e)) && !is_root => {
                Self::skip(found, &job.rel, SWAPPED.into());
                return Vec::new();
            }
            Err(e) => {
                if !is_root
                    && let Ok(st) = self
                        .open_beneath(&job.rel, crate::platform::PATH_ONLY)
                        .and_then(|fd| rustix::fs::fstat(fd).map(|s| stat_of(&s)))
                {
                    found
                        .entries
                        .push(entry(job.rel.clone(), ScanKind::Dir, &st, false));
                }
                let err = std::io::Error::from(e);
                Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                return Vec::new();
            }
        };
        let (st, dev) = match rustix::fs::fstat(&fd) {
            Ok(s) => (stat_of(&s), s.st_dev),
            Err(e) => {
                let err = std::io::Error::from(e);
                Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                return Vec::new();
            }
        };
        // A directory on another filesystem (a mount inside the workspace) may not keep its
        // mtime as the workspace's does: listed every time.
        let trusted = is_root || self.root_dev == Some(dev);
        if trusted && let Some(children) = self.reuse(job, &fd, &st, found) {
            self.reused.fetch_add(1, Ordering::Relaxed);
            return children;
        }
        self.listed.fetch_add(1, Ordering::Relaxed);
        let children = self.list(job, fd, &st, &abs, found, trusted);
        crate::fault::reached(crate::fault::Point::Listed);
        children
    }
}
