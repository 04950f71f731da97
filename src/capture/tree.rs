//! Building a snapshot's trees over sorted paths, reusing every directory's id the stat
//! cache (or the caller) proves unchanged and rebuilding the others in parallel.

use std::collections::HashSet;

use rayon::prelude::*;

use crate::object::{EntryKind, FlatEntry, ObjectId, RelPath, Tree, TreeEntry};
use crate::scan::{ScanEntry, ScanKind};
use crate::statcache::StatCache;

/// The snapshot kind of a file or symlink the stat cache recorded (`None` for others).
pub(super) fn leaf_kind(kind: ScanKind, mode: u32) -> Option<EntryKind> {
    match kind {
        ScanKind::File if mode & 0o100 != 0 => Some(EntryKind::Executable),
        ScanKind::File => Some(EntryKind::File),
        ScanKind::Symlink => Some(EntryKind::Symlink),
        ScanKind::Dir | ScanKind::NestedRepo => None,
    }
}

pub(super) fn kind_of(e: &ScanEntry) -> EntryKind {
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
pub(super) trait Rows: Sync {
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
pub(super) struct Scanned<'a> {
    pub(super) entries: &'a [ScanEntry],
    pub(super) ids: &'a [ObjectId],
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
pub(super) struct TreeBuilder<'a, R: Rows + ?Sized> {
    pub(super) entries: &'a R,
    pub(super) reuse: Reuse<'a>,
}

/// A directory a [`TreeBuilder`] built: its index, its tree id, its size.
type Built = (usize, ObjectId, u64);

/// A directory's tree as [`TreeBuilder::build`] made it.
struct Subtree {
    id: ObjectId,
    size: u64,
    /// Every directory below it that was rebuilt.
    built: Vec<Built>,
    /// A clean directory's records could not be read back (see
    /// [`CaptureError::StatCache`](crate::error::CaptureError::StatCache)).
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
pub(super) enum Reuse<'a> {
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
    pub(super) fn new(
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
    pub(super) fn root(self, emit: &Emit<'_>) -> Option<(ObjectId, Vec<Built>)> {
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
