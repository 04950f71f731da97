//! The disk at the paths an operation changes, and the snapshot it leaves, without a list of
//! every path: an undo of a 25-file turn reads the few trees on the way to those files and
//! writes new trees for their directories alone, whatever the size of the workspace.
//!
//! [`entries_at`] reads, from a stored snapshot of the disk, the entries at some paths with
//! every directory on the way to them (and, where a path is a directory, everything below
//! it): a sorted flat list restricted to those subtrees, which the restore's plan takes as
//! it takes a whole list. [`patched_root`] gives the snapshot that list becomes once changed:
//! the directories whose entries differ are rebuilt from their stored trees, every other tree
//! is kept by id.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::object::FlatEntry;
use crate::error::StoreError;
use crate::object::tree::TreeEntry;
use crate::object::{EntryKind, NewFrame, ObjectId, ObjectKind, PendingObject, RelPath, Tree};
use crate::store::StoreReader;

/// The parent directory of `path` and its last name (the root's children have the empty
/// parent).
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&path[..0], path),
    }
}

/// The trees of one stored snapshot by directory path, read once each.
struct Trees<'a> {
    reader: &'a StoreReader,
    root: ObjectId,
    read: HashMap<Vec<u8>, Option<Tree>>,
}

impl Trees<'_> {
    /// The tree of directory `dir` (None: no directory there).
    fn get(&mut self, dir: &[u8]) -> Result<Option<&Tree>, StoreError> {
        if !self.read.contains_key(dir) {
            let tree = if dir.is_empty() {
                Some(self.reader.read_tree(&self.root)?)
            } else {
                let (parent, name) = split(dir);
                let id = self
                    .get(parent)?
                    .and_then(|t| t.entry(name))
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id);
                match id {
                    Some(id) => Some(self.reader.read_tree(&id)?),
                    None => None,
                }
            };
            self.read.insert(dir.to_vec(), tree);
        }
        Ok(self.read.get(dir).and_then(Option::as_ref))
    }

    /// The entry at `path` (None: nothing there; the root is never an entry).
    fn entry(&mut self, path: &[u8]) -> Result<Option<FlatEntry>, StoreError> {
        let (parent, name) = split(path);
        Ok(self
            .get(parent)?
            .and_then(|t| t.entry(name))
            .map(|e| FlatEntry {
                path: RelPath::from_bytes(path),
                kind: e.kind,
                id: e.id,
                size: e.size,
            }))
    }
}

/// The entries of stored snapshot `root` at `paths`, with every directory on the way to
/// them and, where a path is a directory, every entry below it; sorted by path, each once.
///
/// # Errors
/// [`StoreError::Missing`] / [`StoreError::Corrupt`] for a damaged or hostile tree.
pub(crate) fn entries_at<'p>(
    reader: &StoreReader,
    root: &ObjectId,
    paths: impl Iterator<Item = &'p RelPath>,
) -> Result<Vec<FlatEntry>, StoreError> {
    let mut trees = Trees {
        reader,
        root: *root,
        read: HashMap::new(),
    };
    let mut out: BTreeMap<RelPath, FlatEntry> = BTreeMap::new();
    // The last directory taken whole: the paths below it (a change lists them after it) are
    // in `out` already.
    let mut whole: Option<RelPath> = None;
    for path in paths {
        let bytes = path.as_bytes();
        if let Some(w) = &whole
            && bytes.len() > w.len()
            && bytes.starts_with(w.as_bytes())
            && bytes[w.len()] == b'/'
        {
            continue;
        }
        for (i, _) in bytes.iter().enumerate().filter(|&(_, &b)| b == b'/') {
            let dir = &bytes[..i];
            if out.contains_key(dir) {
                continue;
            }
            match trees.entry(dir)? {
                Some(e) => {
                    out.insert(e.path.clone(), e);
                }
                // Nothing (or no directory) further down.
                None => break,
            }
        }
        if out.contains_key(bytes) {
            continue;
        }
        let Some(e) = trees.entry(bytes)? else {
            continue;
        };
        if e.kind == EntryKind::Dir {
            let mut below = crate::diff::flatten(reader, &e.id)?;
            for b in &mut below {
                b.path = path.join(b.path.as_bytes());
            }
            out.extend(below.into_iter().map(|b| (b.path.clone(), b)));
            whole = Some(path.clone());
        }
        out.insert(e.path.clone(), e);
    }
    Ok(out.into_values().collect())
}

/// The two sides of `changes` (from one snapshot to another) as sorted flat lists: what a
/// restore between them plans from. Entries the two snapshots share below a changed
/// directory are on neither side, where [`entries_at`] would list them on both: the plan
/// does nothing with an entry the same on both sides (a whole restore of 100k files reads
/// each tree once this way, not twice).
pub(crate) fn sides(changes: Vec<crate::diff::Change>) -> (Vec<FlatEntry>, Vec<FlatEntry>) {
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for c in changes {
        old.extend(c.old);
        new.extend(c.new);
    }
    old.sort_by(|a, b| a.path.cmp(&b.path));
    new.sort_by(|a, b| a.path.cmp(&b.path));
    (old, new)
}

/// The root of stored snapshot `root` once the entries `current` (as [`entries_at`] gives
/// them) become `target` (a sorted list over the same subtrees: every path of either is
/// as `target` says, present or not), and the trees the store lacks. Directories whose
/// entries differ are rebuilt, with every ancestor, their sizes the sums of their entries';
/// every other directory keeps its stored id.
///
/// # Errors
/// [`StoreError::Missing`] / [`StoreError::Corrupt`] for a damaged or hostile tree.
pub(crate) fn patched_root(
    reader: &StoreReader,
    root: &ObjectId,
    current: &[FlatEntry],
    target: &[FlatEntry],
) -> Result<(ObjectId, Vec<NewFrame>), StoreError> {
    let find = |list: &[FlatEntry], p: &[u8]| -> Option<FlatEntry> {
        list.binary_search_by(|e| e.path.as_bytes().cmp(p))
            .ok()
            .map(|i| list[i].clone())
    };
    // Per path that differs: what it becomes (None: gone). A directory on both sides with
    // other contents differs only below itself: it is rebuilt, not replaced.
    let mut becomes: BTreeMap<Vec<u8>, Option<FlatEntry>> = BTreeMap::new();
    let all: BTreeSet<&[u8]> = current
        .iter()
        .chain(target)
        .map(|e| e.path.as_bytes())
        .collect();
    for p in all {
        let (now, then) = (find(current, p), find(target, p));
        let same = match (&now, &then) {
            (Some(a), Some(b)) if a.kind == EntryKind::Dir && b.kind == EntryKind::Dir => true,
            (Some(a), Some(b)) => a.kind == b.kind && a.id == b.id,
            (None, None) => true,
            _ => false,
        };
        if !same {
            becomes.insert(p.to_vec(), then);
        }
    }
    // Directories to rebuild: those above each changed path, and each directory the change
    // creates (its contents are among the changed paths).
    let mut dirty: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (p, then) in &becomes {
        let (mut parent, _) = split(p);
        loop {
            if !dirty.insert(parent.to_vec()) {
                break;
            }
            if parent.is_empty() {
                break;
            }
            parent = split(parent).0;
        }
        if then.as_ref().is_some_and(|e| e.kind == EntryKind::Dir) {
            dirty.insert(p.clone());
        }
    }
    let mut trees = Trees {
        reader,
        root: *root,
        read: HashMap::new(),
    };
    // Deepest first, so that a directory's rebuilt children are known when it is built.
    let mut order: Vec<Vec<u8>> = dirty.into_iter().collect();
    let depth = |d: &[u8]| d.iter().filter(|&&b| b == b'/').count() + usize::from(!d.is_empty());
    order.sort_by_key(|d| std::cmp::Reverse(depth(d)));
    let mut built: HashMap<Vec<u8>, (ObjectId, u64)> = HashMap::new();
    let mut frames = Vec::new();
    for dir in order {
        // A directory the change removes or replaces by a file is not built (its parent
        // drops or replaces it).
        let replaced = becomes
            .get(&dir)
            .is_some_and(|then| then.as_ref().is_none_or(|e| e.kind != EntryKind::Dir));
        if !dir.is_empty() && replaced {
            continue;
        }
        let mut entries: BTreeMap<Vec<u8>, TreeEntry> = trees
            .get(&dir)?
            .map(|t| {
                t.entries
                    .iter()
                    .map(|e| (e.name.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let prefix_len = if dir.is_empty() { 0 } else { dir.len() + 1 };
        let below = |p: &[u8]| {
            p.len() > prefix_len
                && (dir.is_empty() || (p.starts_with(&dir) && p[dir.len()] == b'/'))
                && !p[prefix_len..].contains(&b'/')
        };
        for (p, then) in becomes.range(dir.clone()..).filter(|(p, _)| below(p)) {
            let name = p[prefix_len..].to_vec();
            match then {
                None => {
                    entries.remove(&name);
                }
                Some(e) => {
                    entries.insert(
                        name.clone(),
                        TreeEntry {
                            name,
                            kind: e.kind,
                            id: e.id,
                            size: e.size,
                        },
                    );
                }
            }
        }
        for e in entries.values_mut().filter(|e| e.kind == EntryKind::Dir) {
            let mut child = dir.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(&e.name);
            if let Some(&(id, size)) = built.get(&child) {
                e.id = id;
                e.size = size;
            }
        }
        let tree = Tree {
            entries: entries.into_values().collect(),
        };
        let size = tree.entries.iter().map(|e| e.size).sum();
        let bytes = tree.encode();
        let id = ObjectId::of_tree(&bytes);
        if !reader.contains(&id)? {
            frames.push(PendingObject::whole(
                id,
                ObjectKind::Tree,
                bytes.len() as u64,
                bytes,
            ));
        }
        built.insert(dir, (id, size));
    }
    let root = built.get(&Vec::new()).map_or(*root, |&(id, _)| id);
    Ok((root, NewFrame::pack_trees(&frames)))
}

#[cfg(test)]
#[path = "partial_tests.rs"]
mod tests;
