//! The kernel side of the watcher: one inotify instance with a watch on every directory of
//! the workspace but the hard exclusions and the store, kept as a parent-pointer tree (about
//! 60 bytes a directory), and each event turned into the workspace path it concerns.
//!
//! A directory created or moved in is watched before it is read, so an entry made inside it
//! meanwhile is either listed or reported; it is named as a *subtree* (walked whole by the
//! next capture), so its files need no events of their own. A directory moved or deleted
//! away takes its watches with it at once: an event still queued for them is dropped, and
//! nothing is ever reported under a stale path.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::platform::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;

use crate::scan::beneath::Root;
use crate::scan::exclude;

/// What each directory is watched for: every change to its entries and to itself, never
/// reads (`OPEN`, `ACCESS`, `CLOSE_NOWRITE`: a capture's own reads stay silent). A symlink
/// swapped in for a directory is never followed.
const MASK: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::EXCL_UNLINK);

/// The name prefix of the watcher's cookie files in the workspace root (a retrace temp
/// name, so no walk ever captures one).
pub(super) const COOKIE_PREFIX: &[u8] = b".retrace-tmp-cookie-";

/// Why the watcher's view can no longer be trusted: it starts again from a new crawl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Break {
    /// The kernel's event queue overflowed: events were lost.
    Overflow,
    /// `fs.inotify.max_user_watches` (or the user namespace's limit) was reached.
    WatchLimit,
    /// A filesystem under a watched directory was unmounted.
    Unmount,
    /// An event for a watch the tree does not know, or two directories sharing one watch.
    Inconsistent,
    /// The workspace root itself was deleted or moved.
    RootGone,
}

impl Break {
    /// The reason as the protocol and `retrace status` name it.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Break::Overflow => "overflow",
            Break::WatchLimit => "watch_limit",
            Break::Unmount => "unmount",
            Break::Inconsistent => "inconsistent",
            Break::RootGone => "root_gone",
        }
    }
}

/// Where the tree reports what events mean.
pub(super) trait Sink {
    /// The entries of the directory at `path` (or the directory itself) changed.
    fn dirty(&mut self, path: Vec<u8>);
    /// The directory at `path` is new here: walk all of it.
    fn subtree(&mut self, path: Vec<u8>);
    /// The watcher's cookie number `n` was created.
    fn cookie(&mut self, n: u64);
}

#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    wd: i32,
    name_off: u32,
    name_len: u32,
}

type ByKey = HashMap<u64, u32, BuildHasherDefault<crate::object::Prehashed>>;

fn child_key(parent: u32, name: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    parent.hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

const ROOT: u32 = 0;

/// The watched directories.
pub(super) struct Tree {
    fd: OwnedFd,
    root: PathBuf,
    /// The root, open: directories are opened and watched beneath it, following no symlink.
    beneath: Option<Root>,
    store_dir: Option<PathBuf>,
    nodes: Vec<Option<Node>>,
    free: Vec<u32>,
    names: Vec<u8>,
    /// Bytes of `names` no live node uses (compacted when it is most of it).
    dead_names: usize,
    by_wd: HashMap<i32, u32>,
    children: ByKey,
    /// Watches removed by the tree itself, whose queued events (up to `IGNORED`) are dropped.
    removed: HashSet<i32>,
    /// Directories that could not be watched (unreadable, vanished) are simply left to the
    /// walk; this counts them for `status`.
    pub unwatchable: u64,
}

impl Tree {
    /// A new inotify instance watching nothing yet.
    pub(super) fn new(root: &Path, store_dir: Option<&Path>) -> rustix::io::Result<Tree> {
        Ok(Tree {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?,
            root: root.to_path_buf(),
            beneath: Root::open(root).ok(),
            store_dir: store_dir.map(Path::to_path_buf),
            nodes: Vec::new(),
            free: Vec::new(),
            names: Vec::new(),
            dead_names: 0,
            by_wd: HashMap::new(),
            children: ByKey::default(),
            removed: HashSet::new(),
            unwatchable: 0,
        })
    }

    /// The inotify descriptor, to poll and read.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Directories watched.
    pub(super) fn watches(&self) -> usize {
        self.by_wd.len()
    }

    /// Bytes the tree holds on the heap (for `status` and the memory target).
    pub(super) fn heap_bytes(&self) -> usize {
        let map = |n: usize, entry: usize| n.next_power_of_two() * (entry + 1) * 8 / 7;
        self.nodes.capacity() * std::mem::size_of::<Option<Node>>()
            + self.names.capacity()
            + map(self.by_wd.capacity(), 8)
            + map(self.children.capacity(), 12)
            + self.free.capacity() * 4
    }

    fn name(&self, n: &Node) -> &[u8] {
        &self.names[n.name_off as usize..(n.name_off + n.name_len) as usize]
    }

    /// The workspace path of node `i` (empty for the root).
    fn path(&self, mut i: u32) -> Vec<u8> {
        let mut parts: Vec<&[u8]> = Vec::new();
        while i != ROOT {
            let Some(Some(n)) = self.nodes.get(i as usize) else {
                break;
            };
            parts.push(self.name(n));
            i = n.parent;
        }
        let mut p = Vec::with_capacity(parts.iter().map(|s| s.len() + 1).sum());
        for (k, s) in parts.iter().rev().enumerate() {
            if k > 0 {
                p.push(b'/');
            }
            p.extend_from_slice(s);
        }
        p
    }

    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(OsStr::from_bytes(rel))
        }
    }

    fn child(&self, parent: u32, name: &[u8]) -> Option<u32> {
        let &i = self.children.get(&child_key(parent, name))?;
        let n = self.nodes.get(i as usize)?.as_ref()?;
        (n.parent == parent && self.name(n) == name).then_some(i)
    }

    /// Watches the root and every directory below it. Meant for a fresh tree.
    pub(super) fn crawl(&mut self) -> Result<(), Break> {
        let Some(root) = self.watch(None, b"")? else {
            return Err(Break::RootGone);
        };
        self.descend(root)
    }

    /// Watches the directory `name` in node `parent` and everything below it (a directory
    /// created or moved in).
    fn add_subtree(&mut self, parent: u32, name: &[u8]) -> Result<(), Break> {
        match self.watch(Some(parent), name)? {
            Some(i) => self.descend(i),
            None => Ok(()),
        }
    }

    /// Lists node `top`'s directory and watches each directory inside, depth first; each is
    /// watched before it is listed.
    fn descend(&mut self, top: u32) -> Result<(), Break> {
        let mut stack = vec![top];
        while let Some(i) = stack.pop() {
            let rel = self.path(i);
            let flags = OFlags::RDONLY | OFlags::DIRECTORY;
            let Some(Ok(fd)) = self.beneath.as_ref().map(|r| r.open_at(&rel, flags)) else {
                continue;
            };
            let Ok(mut dir) = rustix::fs::Dir::new(fd) else {
                continue;
            };
            let mut subdirs: Vec<Vec<u8>> = Vec::new();
            while let Some(Ok(e)) = dir.read() {
                let name = e.file_name().to_bytes();
                if name == b"." || name == b".." || exclude::is_hard_excluded(name) {
                    continue;
                }
                let is_dir = match e.file_type() {
                    FileType::Directory => true,
                    FileType::Unknown => dir.fd().is_ok_and(|dfd| {
                        rustix::fs::statat(
                            dfd,
                            OsStr::from_bytes(name),
                            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                        )
                        .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory)
                    }),
                    _ => false,
                };
                if is_dir {
                    subdirs.push(name.to_vec());
                }
            }
            for name in subdirs {
                if let Some(c) = self.watch(Some(i), &name)? {
                    stack.push(c);
                }
            }
        }
        Ok(())
    }

    /// Adds the watch for `name` in `parent` (the root for `None`) and its node; `None` when
    /// it is not a directory to watch (excluded, gone, unreadable).
    fn watch(&mut self, parent: Option<u32>, name: &[u8]) -> Result<Option<u32>, Break> {
        if parent.is_some() && exclude::is_hard_excluded(name) {
            return Ok(None);
        }
        let rel = match parent {
            Some(p) => {
                let mut r = self.path(p);
                if !r.is_empty() {
                    r.push(b'/');
                }
                r.extend_from_slice(name);
                r
            }
            None => Vec::new(),
        };
        let abs = self.abs(&rel);
        if self.store_dir.as_deref() == Some(abs.as_path()) {
            return Ok(None);
        }
        if let Some(p) = parent
            && let Some(old) = self.child(p, name)
        {
            // Replaced since it was watched (a rename over it): the old watches go first.
            self.remove_subtree(old);
        }
        // Watched through a descriptor opened beneath the root: a directory swapped for a
        // symlink is not followed out of the workspace.
        let Some(dir) = self.beneath.as_ref().and_then(|r| r.dir(&rel).ok()) else {
            self.unwatchable += 1;
            return Ok(None);
        };
        let via = crate::platform::fd_path(dir.as_fd());
        // The magic link names the directory opened: followed (it is no symlink of the tree).
        let wd = match inotify::add_watch(&self.fd, &via, MASK.difference(WatchFlags::DONT_FOLLOW))
        {
            Ok(wd) => wd,
            Err(Errno::NOSPC | Errno::NOMEM) => return Err(Break::WatchLimit),
            Err(_) => {
                self.unwatchable += 1;
                return Ok(None);
            }
        };
        if self.by_wd.contains_key(&wd) {
            // Two paths, one directory (a bind mount): events would name only one of them.
            return Err(Break::Inconsistent);
        }
        self.removed.remove(&wd);
        let name_off = u32::try_from(self.names.len()).map_err(|_| Break::Inconsistent)?;
        self.names.extend_from_slice(name);
        let node = Node {
            parent: parent.unwrap_or(ROOT),
            wd,
            name_off,
            name_len: u32::try_from(name.len()).map_err(|_| Break::Inconsistent)?,
        };
        let i = if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = Some(node);
            i
        } else {
            self.nodes.push(Some(node));
            u32::try_from(self.nodes.len() - 1).map_err(|_| Break::Inconsistent)?
        };
        self.by_wd.insert(wd, i);
        if let Some(p) = parent
            && self.children.insert(child_key(p, name), i).is_some()
        {
            // Two names in one directory with one 64-bit key: never expected; start over
            // rather than confuse them.
            return Err(Break::Inconsistent);
        }
        Ok(Some(i))
    }

    /// Forgets node `top` and every node below it, removing their watches.
    fn remove_subtree(&mut self, top: u32) {
        // 0 unknown, 1 inside, 2 outside.
        let mut state = vec![0u8; self.nodes.len()];
        state[top as usize] = 1;
        if top != ROOT {
            state[ROOT as usize] = 2;
        }
        let mut chain = Vec::new();
        for i in 0..self.nodes.len() {
            let mut j = i;
            chain.clear();
            let verdict = loop {
                match state[j] {
                    0 => {}
                    s => break s,
                }
                let Some(Some(n)) = self.nodes.get(j) else {
                    break 2;
                };
                chain.push(j);
                j = n.parent as usize;
            };
            for &c in &chain {
                state[c] = verdict;
            }
        }
        for (i, s) in state.iter().enumerate() {
            if *s == 1
                && let Some(n) = self.nodes[i].take()
            {
                // Its `IGNORED` is coming either way: from this removal, or from the kernel
                // when the directory is already gone (the removal then fails), with the
                // events queued before it.
                let _ = inotify::remove_watch(&self.fd, n.wd);
                self.removed.insert(n.wd);
                self.forget(i, n);
            }
        }
        self.compact_names();
    }

    fn forget(&mut self, i: usize, n: Node) {
        self.by_wd.remove(&n.wd);
        let key = child_key(n.parent, self.name(&n));
        let i32_ = u32::try_from(i).unwrap_or(u32::MAX);
        if self.children.get(&key) == Some(&i32_) {
            self.children.remove(&key);
        }
        self.dead_names += n.name_len as usize;
        self.nodes[i] = None;
        self.free.push(i32_);
    }

    fn compact_names(&mut self) {
        if self.dead_names < (1 << 20) || self.dead_names * 2 < self.names.len() {
            return;
        }
        let mut names = Vec::with_capacity(self.names.len() - self.dead_names);
        for n in self.nodes.iter_mut().flatten() {
            let off = n.name_off as usize;
            let start = names.len();
            names.extend_from_slice(&self.names[off..off + n.name_len as usize]);
            n.name_off = u32::try_from(start).unwrap_or(u32::MAX);
        }
        self.names = names;
        self.dead_names = 0;
    }

    /// Reads every queued event, reporting each to `sink`; `Ok(n)` with the number read
    /// when the queue is empty.
    pub(super) fn drain(
        &mut self,
        buf: &mut [std::mem::MaybeUninit<u8>],
        sink: &mut dyn Sink,
    ) -> Result<u64, Break> {
        let fd = self.fd.try_clone().map_err(|_| Break::Inconsistent)?;
        let mut reader = inotify::Reader::new(&fd, buf);
        let mut n = 0u64;
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::AGAIN | Errno::INTR) => return Ok(n),
                Err(_) => return Err(Break::Inconsistent),
            };
            n += 1;
            let name = ev.file_name().map(|c| c.to_bytes().to_vec());
            self.handle(ev.wd(), ev.events(), name.as_deref(), sink)?;
        }
    }

    /// What one event means.
    fn handle(
        &mut self,
        wd: i32,
        mask: ReadFlags,
        name: Option<&[u8]>,
        sink: &mut dyn Sink,
    ) -> Result<(), Break> {
        if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            return Err(Break::Overflow);
        }
        let Some(&i) = self.by_wd.get(&wd) else {
            if self.removed.contains(&wd) {
                if mask.contains(ReadFlags::IGNORED) {
                    self.removed.remove(&wd);
                }
                return Ok(());
            }
            return Err(Break::Inconsistent);
        };
        if mask.contains(ReadFlags::UNMOUNT) {
            return Err(Break::Unmount);
        }
        if mask.contains(ReadFlags::IGNORED) {
            // The kernel dropped the watch: the directory is gone.
            if i == ROOT {
                return Err(Break::RootGone);
            }
            if let Some(Some(n)) = self.nodes.get(i as usize).copied() {
                sink.dirty(self.path(n.parent));
                self.forget(i as usize, n);
            }
            return Ok(());
        }
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            // An event on the directory itself.
            if i == ROOT && mask.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                return Err(Break::RootGone);
            }
            sink.dirty(self.path(i));
            return Ok(());
        };
        if i == ROOT
            && let Some(rest) = name.strip_prefix(COOKIE_PREFIX)
        {
            if mask.contains(ReadFlags::CREATE)
                && let Some(n) = cookie_number(rest)
            {
                sink.cookie(n);
            }
            return Ok(());
        }
        let path = self.path(i);
        if mask.contains(ReadFlags::ISDIR) {
            if mask.intersects(ReadFlags::MOVED_FROM | ReadFlags::DELETE)
                && let Some(c) = self.child(i, name)
            {
                self.remove_subtree(c);
            }
            if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
                && !exclude::is_hard_excluded(name)
            {
                let mut sub = path.clone();
                if !sub.is_empty() {
                    sub.push(b'/');
                }
                sub.extend_from_slice(name);
                sink.subtree(sub);
                self.add_subtree(i, name)?;
            }
        }
        sink.dirty(path);
        Ok(())
    }
}

/// The `n` of a cookie named `<prefix><pid>-<n>` by this process.
fn cookie_number(rest: &[u8]) -> Option<u64> {
    let rest = std::str::from_utf8(rest).ok()?;
    let (pid, n) = rest.split_once('-')?;
    (pid.parse::<u32>().ok()? == std::process::id())
        .then(|| n.parse().ok())
        .flatten()
}
