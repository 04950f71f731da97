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

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;

use super::{ScanEntry, ScanKind, Skipped, exclude};
use crate::config::NestedRepos;
use crate::statcache::{Stat, StatCache};
use crate::vouch::Changes;

/// Ignore rules in force in one directory: its own `.gitignore`, then its parents' up to
/// the walk root, then the root's `.git/info/exclude` and the global excludes file.
struct Rules {
    /// The directory (absolute).
    dir: PathBuf,
    /// Whether it holds a `.gitignore` to read.
    has_file: bool,
    /// Its `.gitignore`, read on first use (a reused listing never needs it unless a
    /// directory below it is listed).
    gitignore: OnceLock<Gitignore>,
    parent: Option<Arc<Rules>>,
    /// At a walk root: `.git/info/exclude` and the global excludes file.
    root: Option<RootRules>,
}

struct RootRules {
    exclude: Gitignore,
    global: Gitignore,
}

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

impl Rules {
    fn gitignore(&self, found: &mut Found, walk: &Walk<'_>) -> &Gitignore {
        self.gitignore.get_or_init(|| {
            if !self.has_file {
                return Gitignore::empty();
            }
            let path = self.dir.join(".gitignore");
            let rel = rel_of(walk.root, &path);
            // Read beneath the root like every file; a FIFO or device named `.gitignore`
            // would block or never end: not read.
            let bytes = match walk.open_beneath(&rel, OFlags::RDONLY | OFlags::NONBLOCK) {
                Ok(fd) => small_fd(fd.into()),
                // Gone, or a symlink (captured as a symlink; git does not follow one either).
                Err(Errno::NOENT | Errno::LOOP) => None,
                // Unreadable: its rules are not applied, and that is said (the listing is
                // then not reused).
                Err(e) => {
                    found.skipped.push(Skipped {
                        path: crate::object::show_path(&rel),
                        reason: format!(
                            "cannot be read, its rules are not applied: {}",
                            std::io::Error::from(e)
                        ),
                    });
                    None
                }
            };
            let Some(bytes) = bytes else {
                return Gitignore::empty();
            };
            let (gi, err) = parse_gitignore(&self.dir, &path, &bytes);
            if let Some(err) = err {
                found.skipped.push(Skipped {
                    path: crate::object::show_path(&rel),
                    reason: err.to_string(),
                });
            }
            gi
        })
    }

    /// Whether `path` (absolute, inside this directory) is ignored: the nearest
    /// `.gitignore` with a matching pattern decides, then the root's exclude file, then the
    /// global one, as git and the `ignore` crate decide.
    fn ignored(&self, path: &Path, is_dir: bool, found: &mut Found, walk: &Walk<'_>) -> bool {
        let mut node = Some(self);
        while let Some(r) = node {
            match r.gitignore(found, walk).matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
            if let Some(rr) = &r.root {
                for g in [&rr.exclude, &rr.global] {
                    match g.matched(path, is_dir) {
                        Match::Ignore(_) => return true,
                        Match::Whitelist(_) => return false,
                        Match::None => {}
                    }
                }
                return false;
            }
            node = r.parent.as_deref();
        }
        false
    }
}

fn rel_of(root: &Path, path: &Path) -> Vec<u8> {
    let (root, path) = (root.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    match path.strip_prefix(root) {
        Some(rest) => rest.strip_prefix(b"/").unwrap_or(rest).to_vec(),
        None => path.to_vec(),
    }
}

/// The directory holding `info/exclude` for a repository whose `.git` is in `dir`: the
/// `.git` directory, or for a worktree's `.git` file, its common directory.
fn git_common_dir(dir: &Path) -> PathBuf {
    let dot_git = dir.join(".git");
    let Some(text) = small_file(&dot_git).and_then(|b| String::from_utf8(b).ok()) else {
        return dot_git;
    };
    let Some(gitdir) = text.lines().next().and_then(|l| l.strip_prefix("gitdir: ")) else {
        return dot_git;
    };
    let real = dir.join(gitdir.trim());
    match small_file(&real.join("commondir")).and_then(|b| String::from_utf8(b).ok()) {
        Some(common) => real.join(common.lines().next().unwrap_or("").trim()),
        None => real,
    }
}

/// Why a directory the walk listed is left out: it was swapped for a symlink meanwhile.
pub(crate) const SWAPPED: &str = "replaced by a symlink or a file while the capture ran (never \
                                  followed): left out, captured next time";

/// Ignore files and `.git` files larger than this are not read (no real one comes close).
const RULES_FILE_MAX: u64 = 16 << 20;

/// Builds the rules of one `.gitignore` (`path`, in `dir`) from its bytes, as
/// `GitignoreBuilder::add` would from the file: lines split on `\n`, a leading BOM dropped,
/// lines that are not UTF-8 or not valid globs reported (and skipped).
fn parse_gitignore(dir: &Path, path: &Path, bytes: &[u8]) -> (Gitignore, Option<ignore::Error>) {
    let mut b = GitignoreBuilder::new(dir);
    let mut errs = Vec::new();
    let tag = |line: usize, err: ignore::Error| ignore::Error::WithPath {
        path: path.to_path_buf(),
        err: Box::new(ignore::Error::WithLineNumber {
            line: line as u64 + 1,
            err: Box::new(err),
        }),
    };
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, line) in body.split(|&c| c == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else {
            let invalid = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            );
            errs.push(tag(i, ignore::Error::Io(invalid)));
            continue;
        };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        if let Err(err) = b.add_line(Some(path.to_path_buf()), line) {
            errs.push(tag(i, err));
        }
    }
    let gi = b.build().unwrap_or_else(|_| Gitignore::empty());
    let err = match errs.len() {
        0 => None,
        1 => errs.pop(),
        _ => Some(ignore::Error::Partial(errs)),
    };
    (gi, err)
}

/// The bytes of an open file if it is a regular file of at most [`RULES_FILE_MAX`].
fn small_fd(f: std::fs::File) -> Option<Vec<u8>> {
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > RULES_FILE_MAX {
        return None;
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, RULES_FILE_MAX), &mut out).ok()?;
    Some(out)
}

/// The bytes of `path` if it is a regular file (after symlinks) of at most
/// [`RULES_FILE_MAX`]: never a FIFO that would block, nor `/dev/zero`.
fn small_file(path: &Path) -> Option<Vec<u8>> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_file() || m.len() > RULES_FILE_MAX {
        return None;
    }
    let f = std::fs::File::open(path).ok()?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, RULES_FILE_MAX), &mut out).ok()?;
    Some(out)
}

/// Reads the file at `path` for the rules key (empty when it is not a small regular file).
fn content(path: &Path) -> Vec<u8> {
    small_file(path).unwrap_or_default()
}

/// The rules of a walk root: its `info/exclude` and the global excludes file, both
/// relative to it.
fn root_rules(dir: &Path, global_path: Option<&Path>) -> RootRules {
    let build = |path: Option<PathBuf>| {
        let mut b = GitignoreBuilder::new(dir);
        if let Some(p) = path.filter(|p| small_file(p).is_some()) {
            let _ = b.add(p);
        }
        b.build().unwrap_or_else(|_| Gitignore::empty())
    };
    RootRules {
        exclude: build(Some(git_common_dir(dir).join("info/exclude"))),
        global: build(global_path.map(Path::to_path_buf)),
    }
}

/// Whether directory mtimes on the filesystem holding `root` change with every entry
/// created, removed or renamed, as seen by this host: local filesystems. Network and
/// userspace filesystems (NFS caches directory attributes for up to a minute, FUSE, 9p,
/// overlayfs over a changing lower layer) do not promise it, so there every directory is
/// listed, as git's untracked cache is off unless a filesystem passes its test.
pub(crate) fn trusts_directory_mtimes(root: &Path) -> bool {
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    const ZFS: i64 = 0x2FC1_2FC1;
    const F2FS: i64 = 0xF2F5_2010;
    const BCACHEFS: i64 = 0xCA45_1A4E;
    rustix::fs::statfs(root).is_ok_and(|s| {
        #[allow(
            clippy::useless_conversion,
            reason = "f_type's width differs by target"
        )]
        let t = i64::from(s.f_type);
        [EXT4, XFS, BTRFS, TMPFS, ZFS, F2FS, BCACHEFS].contains(&t)
    })
}

/// The key of everything outside the tree that decides what a listing keeps: the
/// workspace's `.git/info/exclude`, the global excludes file (its path and content), and
/// the caller's settings (`settings`: nested-repository mode, allowed credentials).
pub(super) fn rules_key(root: &Path, settings: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    // The code's own rules too: a version that excludes other names must not reuse a
    // listing an older one recorded.
    h.update(b"retrace rules v1\0");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for name in exclude::HARD_EXCLUSIONS.iter().chain(exclude::SECRET_NAMES) {
        h.update(name.as_bytes());
        h.update(b"\0");
    }
    let mut part = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(settings);
    part(&content(&git_common_dir(root).join("info/exclude")));
    let global = ignore::gitignore::gitconfig_excludes_path();
    part(
        global
            .as_deref()
            .map_or(&[][..], |p| p.as_os_str().as_bytes()),
    );
    part(&global.as_deref().map(content).unwrap_or_default());
    *h.finalize().as_bytes()
}

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

    /// Lists the directories `dirs` alone, each with the rules of its ancestors, and walks
    /// the directories `whole` with everything below them; nothing is reused from a cache.
    /// For a capture a watcher told where to look. Besides what they hold, returns the
    /// directories found inside `dirs` (not entered, nor recorded as entries), and those of
    /// `dirs` and `whole` a walk from the root would never reach (inside an ignored or
    /// excluded directory): left alone.
    pub(super) fn run_some(
        self,
        dirs: &[Vec<u8>],
        whole: &[Vec<u8>],
    ) -> (Walked, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut known = std::collections::HashMap::new();
        let mut found = Found::default();
        let (mut reach, mut beyond) = (Vec::new(), Vec::new());
        for (d, w) in dirs
            .iter()
            .map(|d| (d, false))
            .chain(whole.iter().map(|d| (d, true)))
        {
            if self.out_of_reach(d, &mut known, &mut found) {
                beyond.push(d.clone());
            } else {
                reach.push((d, w));
            }
        }
        self.hand_over(found);
        let dirs: Vec<&Vec<u8>> = reach.iter().filter(|r| !r.1).map(|r| r.0).collect();
        let whole: Vec<&Vec<u8>> = reach.iter().filter(|r| r.1).map(|r| r.0).collect();
        let job = |rel: &Vec<u8>, known: &mut std::collections::HashMap<_, _>| Job {
            rules: parent_of(rel).map(|p| self.rules_of(p, known)),
            rel: rel.clone(),
            fresh: true,
            untracked: false,
            cached: None,
            watched: false,
        };
        let listed: Vec<Job> = dirs.iter().map(|d| job(d, &mut known)).collect();
        let walked: Vec<Job> = whole.iter().map(|d| job(d, &mut known)).collect();
        let inside = Mutex::new(Vec::new());
        let me = &self;
        rayon::scope(|s| {
            for j in &walked {
                s.spawn(move |s| me.dir(s, j));
            }
            for j in &listed {
                let inside = &inside;
                s.spawn(move |_| {
                    let mut found = Found::default();
                    let kids = me.dir_into(j, &mut found);
                    me.hand_over(found);
                    inside
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(kids.into_iter().map(|k| k.rel));
                });
            }
        });
        let inside = inside.into_inner().unwrap_or_else(PoisonError::into_inner);
        (self.collect(), inside, beyond)
    }

    /// Whether a walk from the root never reaches `rel`: it or a directory above it is
    /// hard-excluded, the store, or ignored by the rules in force where it is.
    fn out_of_reach(
        &self,
        rel: &[u8],
        known: &mut std::collections::HashMap<Vec<u8>, Arc<Rules>>,
        found: &mut Found,
    ) -> bool {
        let ends = rel
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| i)
            .chain((!rel.is_empty()).then_some(rel.len()));
        for end in ends {
            let here = &rel[..end];
            let (parent, name) = match here.iter().rposition(|&b| b == b'/') {
                Some(i) => (&here[..i], &here[i + 1..]),
                None => (&here[..0], here),
            };
            let abs = self.abs(here);
            if exclude::is_hard_excluded(name)
                || self.store_dir.is_some_and(|d| d == abs)
                || self
                    .rules_of(parent, known)
                    .ignored(&abs, true, found, self)
            {
                return true;
            }
        }
        false
    }

    /// The rules in force inside the directory `rel` as a walk from the root would build
    /// them (its `.gitignore` and every ancestor's; at the root, the exclude files too),
    /// each directory's built once in `known`.
    fn rules_of(
        &self,
        rel: &[u8],
        known: &mut std::collections::HashMap<Vec<u8>, Arc<Rules>>,
    ) -> Arc<Rules> {
        if let Some(r) = known.get(rel) {
            return Arc::clone(r);
        }
        let dir = self.abs(rel);
        let rules = Arc::new(Rules {
            has_file: self
                .open_beneath(&join(rel, b".gitignore"), OFlags::PATH)
                .is_ok(),
            gitignore: OnceLock::new(),
            parent: parent_of(rel).map(|p| self.rules_of(p, known)),
            root: rel
                .is_empty()
                .then(|| root_rules(&dir, self.global.as_deref())),
            dir,
        });
        known.insert(rel.to_vec(), Arc::clone(&rules));
        rules
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

    /// Whether the watcher vouches for the child `rel` of a directory it vouched for or saw.
    fn watched(&self, parent: &Job, rel: &[u8]) -> bool {
        parent.watched && self.vouch.is_some_and(|v| !v.subtree.contains(rel))
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
                        .open_beneath(&job.rel, OFlags::PATH)
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

    /// The directory's entries from the cache, when it vouches for its listing; `None`
    /// (and nothing added to `found`) when the directory must be listed.
    fn reuse(
        &self,
        job: &Job,
        fd: &rustix::fd::OwnedFd,
        st: &Stat,
        found: &mut Found,
    ) -> Option<Vec<Job>> {
        let prior = self.prior?;
        if job.fresh || job.rel.is_empty() {
            return None;
        }
        let (kind, stat, listing) = match job.cached {
            Some(c) => c,
            None => prior.get(&job.rel).map(|c| (c.kind, c.stat, c.listing))?,
        };
        if !(listing && same(&stat, st, false) && prior.settled(st)) {
            return None;
        }
        match (kind, self.nested) {
            (ScanKind::NestedRepo, NestedRepos::Skip) => {
                found
                    .entries
                    .push(entry(job.rel.clone(), ScanKind::NestedRepo, st, true));
                return Some(Vec::new());
            }
            (ScanKind::Dir, _) => {}
            _ => return None,
        }
        let mut prefix = job.rel.clone();
        prefix.push(b'/');
        let kids = prior.child_indices(&prefix)?;
        // Files and symlinks as (record index, record, `lstat` now); whether each matches
        // its record.
        let mut leaves = Vec::with_capacity(kids.len());
        let mut exact = true;
        let mut dirs = Vec::new();
        let mut has_gitignore = false;
        for &i in &kids {
            let k = prior.at(i)?;
            let name = &k.path[prefix.len()..];
            let now = statat(fd, name).ok()?;
            let kind = kind_of(now.mode)?;
            let same_kind =
                kind == k.kind || (kind == ScanKind::Dir && k.kind == ScanKind::NestedRepo);
            if !same_kind {
                return None;
            }
            // What a capture's cache lookup would hit on: the same `lstat` data, settled.
            let hit = same(&k.stat, &now, true) && prior.settled(&now);
            if name == b".gitignore" {
                // Its rules decide this listing: it must be exactly what was read then.
                if !(k.kind == ScanKind::File && hit) {
                    return None;
                }
                has_gitignore = true;
            }
            if kind == ScanKind::Dir {
                dirs.push((k.path.to_vec(), (k.kind, k.stat, k.listing)));
            } else {
                exact &= hit;
                leaves.push((i, k, now));
            }
        }
        // Every file the same as its record: the cache's records stand for them, and the
        // scan holds only the directory (a million unchanged files cost no entry each).
        // Otherwise every file is an entry, for capture to look at.
        if exact {
            found.omitted.extend(leaves.iter().map(|(i, _, _)| *i));
            found.omitted_bytes += leaves.iter().map(|(_, k, _)| k.stat.size).sum::<u64>();
        } else {
            found.entries.extend(
                leaves
                    .iter()
                    .map(|(_, k, now)| entry(k.path.to_vec(), k.kind, now, false)),
            );
        }
        let mut me = entry(job.rel.clone(), ScanKind::Dir, st, true);
        me.clean = exact;
        found.entries.push(me);
        let rules = Arc::new(Rules {
            dir: self.abs(&job.rel),
            has_file: has_gitignore,
            gitignore: OnceLock::new(),
            parent: job.rules.clone(),
            root: None,
        });
        Some(
            dirs.into_iter()
                .map(|(rel, cached)| Job {
                    watched: self.watched(job, &rel),
                    rel,
                    rules: Some(Arc::clone(&rules)),
                    fresh: false,
                    untracked: job.untracked,
                    cached: Some(cached),
                })
                .collect(),
        )
    }

    /// The directory's records from the cache, taken as they are: the watcher saw no event in
    /// it since the cache was written. `None` (and nothing added to `found`) when its record
    /// cannot stand alone (not a reusable listing, a file with several links) and the
    /// directory is processed as without a watcher.
    fn reuse_vouched(&self, job: &Job, found: &mut Found) -> Option<Vec<Job>> {
        let prior = self.prior?;
        let (kind, st, listing) = match job.cached {
            Some(c) => c,
            None => prior.get(&job.rel).map(|c| (c.kind, c.stat, c.listing))?,
        };
        if !listing {
            return None;
        }
        match (kind, self.nested) {
            (ScanKind::NestedRepo, NestedRepos::Skip) => {
                found
                    .entries
                    .push(entry(job.rel.clone(), ScanKind::NestedRepo, &st, true));
                return Some(Vec::new());
            }
            (ScanKind::Dir, _) => {}
            _ => return None,
        }
        let mut prefix = job.rel.clone();
        prefix.push(b'/');
        let kids = prior.child_indices(&prefix)?;
        let mut leaves = Vec::with_capacity(kids.len());
        let mut dirs = Vec::new();
        let mut has_gitignore = false;
        for &i in &kids {
            let k = prior.at(i)?;
            if k.stat.linked {
                return None;
            }
            let name = &k.path[prefix.len()..];
            has_gitignore |= name == b".gitignore" && k.kind == ScanKind::File;
            match k.kind {
                ScanKind::Dir | ScanKind::NestedRepo => {
                    dirs.push((k.path.to_vec(), (k.kind, k.stat, k.listing)));
                }
                _ => leaves.push((i, k.stat.size)),
            }
        }
        found.omitted.extend(leaves.iter().map(|(i, _)| *i));
        found.omitted_bytes += leaves.iter().map(|(_, size)| size).sum::<u64>();
        let mut me = entry(job.rel.clone(), ScanKind::Dir, &st, true);
        me.clean = true;
        found.entries.push(me);
        let rules = Arc::new(Rules {
            dir: self.abs(&job.rel),
            has_file: has_gitignore,
            gitignore: OnceLock::new(),
            parent: job.rules.clone(),
            root: None,
        });
        Some(
            dirs.into_iter()
                .map(|(rel, cached)| Job {
                    watched: self.watched(job, &rel),
                    rel,
                    rules: Some(Arc::clone(&rules)),
                    fresh: false,
                    untracked: job.untracked,
                    cached: Some(cached),
                })
                .collect(),
        )
    }

    /// Lists the directory: every name, the rules, one `lstat` per name kept.
    fn list(
        &self,
        job: &Job,
        fd: rustix::fd::OwnedFd,
        st: &Stat,
        abs: &Path,
        found: &mut Found,
        trusted: bool,
    ) -> Vec<Job> {
        let is_root = job.rel.is_empty();
        let mut dir = match rustix::fs::Dir::new(fd) {
            Ok(d) => d,
            Err(e) => {
                let err = std::io::Error::from(e);
                Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                return Vec::new();
            }
        };
        // Names in one buffer: (start, end, d_type).
        let mut names: Vec<u8> = Vec::new();
        let mut spans: Vec<(usize, usize, FileType)> = Vec::new();
        let mut listing_ok = true;
        while let Some(item) = dir.read() {
            match item {
                Ok(e) => {
                    let name = e.file_name().to_bytes();
                    if name == b"." || name == b".." {
                        continue;
                    }
                    let start = names.len();
                    names.extend_from_slice(name);
                    spans.push((start, names.len(), e.file_type()));
                }
                Err(e) => {
                    let err = std::io::Error::from(e);
                    Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                    listing_ok = false;
                    break;
                }
            }
        }
        let name_of = |s: &(usize, usize, FileType)| &names[s.0..s.1];
        let has = |n: &[u8]| spans.iter().any(|s| name_of(s) == n);
        let mut untracked = job.untracked;
        let mut rules_root = None;
        if has(b".git") {
            if is_root {
                // The workspace's own repository: its exclude file is in the root rules.
            } else {
                match self.nested {
                    NestedRepos::Skip => {
                        found
                            .entries
                            .push(entry(job.rel.clone(), ScanKind::NestedRepo, st, true));
                        return Vec::new();
                    }
                    NestedRepos::Capture => {
                        // A root of its own: only its own rules apply inside it.
                        self.repos
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(job.rel.clone());
                        rules_root = Some(root_rules(abs, self.global.as_deref()));
                        untracked = true;
                    }
                }
            }
        }
        if is_root {
            rules_root = Some(root_rules(abs, self.global.as_deref()));
        }
        let rules_here = Arc::new(Rules {
            dir: abs.to_path_buf(),
            has_file: has(b".gitignore"),
            gitignore: OnceLock::new(),
            // A walk root's rules stop there: the enclosing folder's do not apply inside.
            parent: if rules_root.is_some() {
                None
            } else {
                job.rules.clone()
            },
            root: rules_root,
        });
        let skipped_before = found.skipped.len();
        rules_here.gitignore(found, self);
        if found.skipped.len() > skipped_before {
            listing_ok = false;
        }
        // Whether this directory's own rules changed since the cache was written: then
        // nothing below it may reuse a listing.
        let mut fresh = job.fresh || untracked;
        let gi_rel = join(&job.rel, b".gitignore");
        let gi_now = has(b".gitignore")
            .then(|| statat(dir.fd().ok()?, b".gitignore").ok())
            .flatten();
        if let Some(prior) = self.prior.filter(|_| !fresh) {
            let was = prior.get(&gi_rel);
            fresh = match (was, &gi_now) {
                (None, None) => false,
                (Some(c), Some(now)) => {
                    !(c.kind == ScanKind::File && same(&c.stat, now, true) && prior.settled(now))
                }
                _ => true,
            };
        }
        let Ok(dfd) = dir.fd() else {
            return Vec::new();
        };
        let mut children = Vec::new();
        let mut gitignore_captured = false;
        for s in &spans {
            let name = name_of(s);
            if exclude::is_hard_excluded(name) {
                continue;
            }
            let child_abs = abs.join(OsStr::from_bytes(name));
            if self.store_dir.is_some_and(|d| d == child_abs) {
                continue;
            }
            let rel = join(&job.rel, name);
            let hinted_dir = match s.2 {
                FileType::Directory => Some(true),
                FileType::Unknown => None,
                _ => Some(false),
            };
            let mut stat = None;
            let is_dir = if let Some(d) = hinted_dir {
                d
            } else {
                let Some(now) = Self::stat_child(dfd, name, &rel, found, &mut listing_ok) else {
                    continue;
                };
                stat = Some(now);
                kind_of(now.mode) == Some(ScanKind::Dir)
            };
            if rules_here.ignored(&child_abs, is_dir, found, self) {
                continue;
            }
            let Some(now) =
                stat.or_else(|| Self::stat_child(dfd, name, &rel, found, &mut listing_ok))
            else {
                continue;
            };
            let Some(kind) = kind_of(now.mode) else {
                // Sockets, FIFOs and devices are not content a snapshot can hold: left out,
                // and named like any other path left out.
                let what = super::special_kind(FileType::from_raw_mode(now.mode));
                Self::skip(found, &rel, format!("{what}: left out"));
                listing_ok = false;
                continue;
            };
            // The kind changed between the listing and the `lstat`: match again with it.
            if (kind == ScanKind::Dir) != is_dir
                && rules_here.ignored(&child_abs, kind == ScanKind::Dir, found, self)
            {
                continue;
            }
            if kind == ScanKind::Dir {
                children.push(Job {
                    watched: self.watched(job, &rel),
                    rel,
                    rules: Some(Arc::clone(&rules_here)),
                    fresh,
                    untracked,
                    cached: None,
                });
                continue;
            }
            if exclude::is_secret_name(name)
                && !self
                    .allow
                    .is_some_and(|a| a.is_match(OsStr::from_bytes(&rel)))
            {
                found.secrets.push(crate::object::show_path(&rel));
                listing_ok = false;
                continue;
            }
            if name == b".gitignore" && kind == ScanKind::File {
                gitignore_captured = true;
            }
            found.entries.push(entry(rel, kind, &now, false));
        }
        // An ignore file the next walk could not check against the cache: list this
        // directory every time.
        if gi_now.is_some() && !gitignore_captured {
            listing_ok = false;
        }
        if !is_root {
            let listing = listing_ok && !untracked && trusted;
            found
                .entries
                .push(entry(job.rel.clone(), ScanKind::Dir, st, listing));
        }
        children
    }
}
