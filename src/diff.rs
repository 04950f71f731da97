//! Flattening snapshots into sorted path lists and comparing them.

use serde::Serialize;

use crate::object::FlatEntry;
use crate::error::StoreError;
use crate::object::{EntryKind, ObjectId, RelPath};
use crate::store::StoreReader;

/// Every path of the snapshot `root`, sorted by path bytes; trees are read and verified.
///
/// # Errors
/// [`StoreError::Missing`] / [`StoreError::Corrupt`] for a damaged or hostile tree.
pub fn flatten(reader: &StoreReader, root: &ObjectId) -> Result<Vec<FlatEntry>, StoreError> {
    flatten_changed(reader, root, &[]).map(|(entries, _)| entries)
}

/// The paths of snapshot `root` that may differ from `current` (a sorted flat list): the
/// walk does not descend into a directory whose tree id equals the one `current` has at the
/// same path, since nothing below it can differ. Returns the entries read, sorted, and the
/// directories skipped that way. A small turn's restore reads a few trees, not all.
///
/// # Errors
/// [`StoreError::Missing`] / [`StoreError::Corrupt`] for a damaged or hostile tree.
pub fn flatten_changed(
    reader: &StoreReader,
    root: &ObjectId,
    current: &[FlatEntry],
) -> Result<(Vec<FlatEntry>, Vec<RelPath>), StoreError> {
    let mut out = Vec::new();
    let mut same = Vec::new();
    let mut stack = vec![(RelPath::default(), *root)];
    while let Some((prefix, id)) = stack.pop() {
        let tree = reader.read_tree(&id)?;
        for e in tree.entries {
            let path = prefix.join(&e.name);
            if e.kind == EntryKind::Dir {
                let unchanged = current
                    .binary_search_by(|c| c.path.cmp(&path))
                    .is_ok_and(|i| current[i].kind == EntryKind::Dir && current[i].id == e.id);
                if unchanged {
                    same.push(path.clone());
                } else {
                    stack.push((path.clone(), e.id));
                }
            }
            out.push(FlatEntry {
                path,
                kind: e.kind,
                id: e.id,
                size: e.size,
            });
        }
    }
    out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    same.sort_unstable();
    Ok((out, same))
}

/// The paths of snapshots `a` and `b` below every directory whose trees differ, as two
/// sorted flat lists for [`diff`]: what [`flatten_changed`] and [`outside`] give for a flat
/// list of `b`, read from the trees alone. `read` gives a tree by id (the store, or trees a
/// capture built and has not committed yet); directories with the same id on both sides
/// are not entered.
///
/// # Errors
/// Whatever `read` returns for a tree it cannot give.
pub fn flatten_pair(
    read: &dyn Fn(&ObjectId) -> Result<crate::object::Tree, StoreError>,
    a: &ObjectId,
    b: &ObjectId,
) -> Result<(Vec<FlatEntry>, Vec<FlatEntry>), StoreError> {
    let (mut old, mut now) = (Vec::new(), Vec::new());
    let mut stack = vec![(RelPath::default(), Some(*a), Some(*b))];
    while let Some((prefix, x, y)) = stack.pop() {
        if x == y {
            continue;
        }
        let tx = x.map(|id| read(&id)).transpose()?.unwrap_or_default();
        let ty = y.map(|id| read(&id)).transpose()?.unwrap_or_default();
        let dir = |e: &crate::object::TreeEntry| (e.kind == EntryKind::Dir).then_some(e.id);
        let flat = |prefix: &RelPath, e: &crate::object::TreeEntry| FlatEntry {
            path: prefix.join(&e.name),
            kind: e.kind,
            id: e.id,
            size: e.size,
        };
        let (mut i, mut j) = (0, 0);
        while i < tx.entries.len() || j < ty.entries.len() {
            let (ea, eb) = match (tx.entries.get(i), ty.entries.get(j)) {
                (Some(ea), Some(eb)) if ea.name == eb.name => {
                    i += 1;
                    j += 1;
                    (Some(ea), Some(eb))
                }
                (Some(ea), eb) if eb.is_none_or(|eb| ea.name < eb.name) => {
                    i += 1;
                    (Some(ea), None)
                }
                (_, eb) => {
                    j += 1;
                    (None, eb)
                }
            };
            let (da, db) = (ea.and_then(dir), eb.and_then(dir));
            if da.is_some() || db.is_some() {
                let name = ea.or(eb).map(|e| e.name.as_slice()).unwrap_or_default();
                stack.push((prefix.join(name), da, db));
            }
            old.extend(ea.map(|e| flat(&prefix, e)));
            now.extend(eb.map(|e| flat(&prefix, e)));
        }
    }
    old.sort_unstable_by(|p, q| p.path.cmp(&q.path));
    now.sort_unstable_by(|p, q| p.path.cmp(&q.path));
    Ok((old, now))
}

/// One path that differs between two snapshots: what it is on each side (None: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The path, relative to the workspace root.
    pub path: RelPath,
    /// The entry in the first snapshot.
    pub old: Option<FlatEntry>,
    /// The entry in the second snapshot.
    pub new: Option<FlatEntry>,
}

impl Change {
    /// Whether a directory is all this change is about: neither side is a file, a link or a
    /// nested repository (a directory made or removed). The ledger keeps no entry for such a
    /// path: a directory follows what it holds.
    pub(crate) fn dirs_only(&self) -> bool {
        [&self.old, &self.new]
            .iter()
            .all(|e| e.as_ref().is_none_or(|e| e.kind == EntryKind::Dir))
    }
}

fn entry_at(prefix: &RelPath, e: &crate::object::TreeEntry) -> FlatEntry {
    FlatEntry {
        path: prefix.join(&e.name),
        kind: e.kind,
        id: e.id,
        size: e.size,
    }
}

/// Every path that differs from snapshot `a` to snapshot `b`, sorted, directories included.
/// Both trees are walked together and a subtree whose id is the same on both sides is never
/// read, so a turn that changed k files costs O(k × depth) tree reads.
///
/// # Errors
/// [`StoreError::Missing`] / [`StoreError::Corrupt`] for a damaged or hostile tree.
pub fn changes(
    reader: &StoreReader,
    a: &ObjectId,
    b: &ObjectId,
) -> Result<Vec<Change>, StoreError> {
    let mut out = Vec::new();
    if a == b {
        return Ok(out);
    }
    // (prefix, tree on side a, tree on side b); a side without a directory there is None.
    let mut stack = vec![(RelPath::default(), Some(*a), Some(*b))];
    while let Some((prefix, ta, tb)) = stack.pop() {
        let read = |t: Option<ObjectId>| -> Result<Vec<FlatEntry>, StoreError> {
            Ok(match t {
                Some(id) => reader
                    .read_tree(&id)?
                    .entries
                    .iter()
                    .map(|e| entry_at(&prefix, e))
                    .collect(),
                None => Vec::new(),
            })
        };
        let (ea, eb) = (read(ta)?, read(tb)?);
        for (x, y) in differing(&ea, &eb) {
            let dir = |e: Option<&FlatEntry>| e.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
            let (da, db) = (dir(x), dir(y));
            if da.is_some() || db.is_some() {
                let path = x.or(y).map(|e| e.path.clone()).unwrap_or_default();
                stack.push((path, da, db));
            }
            // Two directories differ only by content: their entries say what changed.
            if da.is_none() || db.is_none() {
                out.push(Change {
                    path: x.or(y).map(|e| e.path.clone()).unwrap_or_default(),
                    old: x.cloned(),
                    new: y.cloned(),
                });
            }
        }
    }
    out.sort_unstable_by(|p, q| p.path.cmp(&q.path));
    Ok(out)
}

/// The files and symlinks that differ between two flat lists (any order; directories are
/// not listed, a directory on one side counts as nothing there), as [`Change`]s sorted by
/// path: the pairs [`flatten_pair`] or [`flatten_changed`] give, typed.
#[must_use]
pub fn pair(old: &[FlatEntry], now: &[FlatEntry]) -> Vec<Change> {
    let leaves = |l: &[FlatEntry]| {
        let mut v: Vec<FlatEntry> = l
            .iter()
            .filter(|e| e.kind != EntryKind::Dir)
            .cloned()
            .collect();
        v.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        v
    };
    let (a, b) = (leaves(old), leaves(now));
    differing(&a, &b)
        .map(|(x, y)| Change {
            path: x.or(y).map(|e| e.path.clone()).unwrap_or_default(),
            old: x.cloned(),
            new: y.cloned(),
        })
        .collect()
}

/// The pairs of entries of two lists sorted by path that differ (kind or id), matched by
/// path; a side without the path is None.
fn differing<'a>(
    a: &'a [FlatEntry],
    b: &'a [FlatEntry],
) -> impl Iterator<Item = (Option<&'a FlatEntry>, Option<&'a FlatEntry>)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        loop {
            let (x, y) = match (a.get(i), b.get(j)) {
                (None, None) => return None,
                (Some(x), Some(y)) if x.path == y.path => {
                    i += 1;
                    j += 1;
                    (Some(x), Some(y))
                }
                (Some(x), y) if y.is_none_or(|y| x.path < y.path) => {
                    i += 1;
                    (Some(x), None)
                }
                (_, y) => {
                    j += 1;
                    (None, y)
                }
            };
            let same = matches!((x, y), (Some(x), Some(y)) if x.kind == y.kind && x.id == y.id);
            if !same {
                return Some((x, y));
            }
        }
    })
}

/// The entries of the sorted list `list` that lie strictly below none of the directories
/// `dirs` (any order): [`below_any`] for a whole list, one range search per directory
/// instead of one search per path and level.
#[must_use]
pub fn outside(list: &[FlatEntry], dirs: &[RelPath]) -> Vec<FlatEntry> {
    // A directory's entries are the contiguous run starting with its path and `/`; the runs
    // are taken in the order of those prefixes (not of the directories' own paths: `a.b/`
    // sorts before `a/`).
    let mut prefixes: Vec<Vec<u8>> = dirs
        .iter()
        .map(|d| {
            let mut p = d.as_bytes().to_vec();
            p.push(b'/');
            p
        })
        .collect();
    prefixes.sort_unstable();
    let mut out = Vec::new();
    let mut i = 0;
    for p in &prefixes {
        let start = i + list[i..].partition_point(|e| e.path.as_bytes() < p.as_slice());
        out.extend_from_slice(&list[i..start]);
        i = start + list[start..].partition_point(|e| e.path.starts_with(p));
    }
    out.extend_from_slice(&list[i..]);
    out
}

/// Whether `path` lies strictly below one of the sorted directories `dirs`.
#[must_use]
pub fn below_any(path: &[u8], dirs: &[RelPath]) -> bool {
    path.iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .any(|(i, _)| {
            dirs.binary_search_by(|d| d.as_bytes().cmp(&path[..i]))
                .is_ok()
        })
}

/// Paths that differ between two snapshots (directories are not listed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// In the second, not the first.
    pub added: Vec<String>,
    /// In both with different content, kind or executable bit.
    pub modified: Vec<String>,
    /// In the first, not the second.
    pub deleted: Vec<String>,
}

/// Whether `path` is one of `only` or below one of them (everything when `only` is empty).
/// Paths are workspace-relative, `/`-separated, as the lists of a [`Diff`] show them.
#[must_use]
pub fn selected(path: &str, only: &[String]) -> bool {
    only.is_empty()
        || only.iter().any(|p| {
            let p = p.trim_end_matches('/');
            p.is_empty() || path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'))
        })
}

/// Each leaf path whose entry differs between two sorted flat lists: its entry on each side.
pub(crate) fn changed_pairs<'a>(
    from: &'a [FlatEntry],
    to: &'a [FlatEntry],
) -> Vec<(Option<&'a FlatEntry>, Option<&'a FlatEntry>)> {
    let leaf = |e: &&FlatEntry| e.kind != EntryKind::Dir;
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < from.len() || j < to.len() {
        match (from.get(i), to.get(j)) {
            (Some(a), Some(b)) if a.path == b.path => {
                if a.kind != b.kind || a.id != b.id {
                    out.push((Some(a).filter(leaf), Some(b).filter(leaf)));
                }
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a.path < b.path => {
                out.push((Some(a).filter(leaf), None));
                i += 1;
            }
            (Some(a), None) => {
                out.push((Some(a).filter(leaf), None));
                i += 1;
            }
            (_, Some(b)) => {
                out.push((None, Some(b).filter(leaf)));
                j += 1;
            }
            (None, None) => break,
        }
    }
    out.retain(|(a, b)| a.is_some() || b.is_some());
    out
}

impl Diff {
    /// The paths of this diff that `selected` keeps.
    #[must_use]
    pub fn restricted_to(mut self, only: &[String]) -> Diff {
        for list in [&mut self.added, &mut self.modified, &mut self.deleted] {
            list.retain(|p| selected(p, only));
        }
        self
    }

    /// Whether nothing differs.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }

    /// Every changed path, sorted.
    #[must_use]
    pub fn paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .added
            .iter()
            .chain(&self.modified)
            .chain(&self.deleted)
            .cloned()
            .collect();
        all.sort();
        all
    }
}

/// Compares two sorted flat lists.
#[must_use]
pub fn diff(from: &[FlatEntry], to: &[FlatEntry]) -> Diff {
    let name = |e: &FlatEntry| e.path.show();
    let leaf = |e: &FlatEntry| e.kind != EntryKind::Dir;
    let mut d = Diff::default();
    let (mut i, mut j) = (0, 0);
    while i < from.len() || j < to.len() {
        match (from.get(i), to.get(j)) {
            (Some(a), Some(b)) if a.path == b.path => {
                if (leaf(a) || leaf(b)) && (a.kind != b.kind || a.id != b.id) {
                    if leaf(a) && leaf(b) {
                        d.modified.push(name(a));
                    } else if leaf(a) {
                        d.deleted.push(name(a));
                    } else {
                        d.added.push(name(b));
                    }
                }
                i += 1;
                j += 1;
            }
            (Some(a), b) if b.is_none_or(|b| a.path < b.path) => {
                if leaf(a) {
                    d.deleted.push(name(a));
                }
                i += 1;
            }
            (_, Some(b)) => {
                if leaf(b) {
                    d.added.push(name(b));
                }
                j += 1;
            }
            (_, None) => break,
        }
    }
    d
}

/// The changes from flat list `from` to flat list `to` (both sorted by path): each path
/// whose entry differs in kind or id, or that one side lacks, with both sides' entries (as
/// [`changes`] gives them from two trees).
#[must_use]
pub fn changes_of(from: &[FlatEntry], to: &[FlatEntry]) -> Vec<Change> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    loop {
        let (old, new) = match (from.get(i), to.get(j)) {
            (None, None) => break,
            (Some(a), Some(b)) if a.path == b.path => {
                i += 1;
                j += 1;
                if a.kind == b.kind && a.id == b.id {
                    continue;
                }
                (Some(a), Some(b))
            }
            (Some(a), b) if b.is_none_or(|b| a.path < b.path) => {
                i += 1;
                (Some(a), None)
            }
            (_, b) => {
                j += 1;
                (None, b)
            }
        };
        out.push(Change {
            path: old.or(new).map(|e| e.path.clone()).unwrap_or_default(),
            old: old.cloned(),
            new: new.cloned(),
        });
    }
    out
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
