//! A change reversed or replayed over the disk (undo, redo, recovery): which paths conflict
//! with edits made since, and the file list the workspace must hold afterwards. Pure
//! functions over sorted flat lists.

use std::collections::HashSet;

use crate::object::FlatEntry;
use crate::diff::Change;
use crate::object::{EntryKind, ObjectId, RelPath};

pub(crate) fn find<'a>(list: &'a [FlatEntry], path: &[u8]) -> Option<&'a FlatEntry> {
    list.binary_search_by(|e| e.path.as_bytes().cmp(path))
        .ok()
        .map(|i| &list[i])
}

/// Whether the disk entry `d` is what the turn left, `expected` (directories by kind only).
pub(crate) fn same(d: Option<&FlatEntry>, expected: Option<&FlatEntry>) -> bool {
    match (d, expected) {
        (None, None) => true,
        // An empty directory the user removed since: nothing of theirs to lose.
        (None, Some(e)) => e.kind == EntryKind::Dir,
        (Some(d), None) => d.kind == EntryKind::Dir,
        (Some(d), Some(e)) if e.kind == EntryKind::Dir || d.kind == EntryKind::Dir => {
            d.kind == e.kind
        }
        (Some(d), Some(e)) => d.kind == e.kind && d.id == e.id,
    }
}

pub(crate) fn is_nested(c: &Change) -> bool {
    [&c.old, &c.new]
        .iter()
        .any(|e| e.as_ref().is_some_and(|e| e.kind == EntryKind::NestedRepo))
}

/// The changes that may be acted on: not a nested repository's own entry, nor a path below
/// one that is a nested repository on either side. Only the `nested_repos` setting changing
/// between two snapshots makes such paths: one side has the repository's files, the other
/// never captured them; reversing that would delete (or write over) a repository's working
/// files that no turn changed.
fn actionable(changes: &[Change]) -> impl Iterator<Item = &Change> {
    let nested: Vec<RelPath> = changes
        .iter()
        .filter(|c| is_nested(c))
        .map(|c| c.path.clone())
        .collect();
    changes
        .iter()
        .filter(move |c| !is_nested(c) && !crate::diff::below_any(&c.path, &nested))
}

/// Paths where the disk no longer holds what the change's `old` side says: the change cannot
/// be reversed there without losing an edit. A path the change turns into a file whose disk
/// directory holds paths the change does not know is a conflict too.
pub(crate) fn conflicts(disk: &[FlatEntry], changes: &[Change]) -> Vec<String> {
    let known: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_bytes()).collect();
    // A path inside what is a nested repository on disk now (captured when the turn ran,
    // skipped today) is not written and not compared: the restore leaves it alone and says
    // so, and the rest of the change goes ahead.
    let skipped: Vec<RelPath> = disk
        .iter()
        .filter(|e| e.kind == EntryKind::NestedRepo)
        .map(|e| e.path.clone())
        .collect();
    let mut out = Vec::new();
    for c in actionable(changes).filter(|c| !crate::diff::below_any(&c.path, &skipped)) {
        if !same(find(disk, &c.path), c.old.as_ref()) {
            out.push(c.path.show());
            continue;
        }
        let becomes_leaf = c.new.as_ref().is_some_and(|e| e.kind != EntryKind::Dir);
        if becomes_leaf && find(disk, &c.path).is_some_and(|d| d.kind == EntryKind::Dir) {
            let mut prefix = c.path.to_vec();
            prefix.push(b'/');
            let start = disk.partition_point(|e| e.path.as_bytes() < prefix.as_slice());
            if disk[start..]
                .iter()
                .take_while(|e| e.path.starts_with(&prefix))
                .any(|e| !known.contains(e.path.as_bytes()))
            {
                out.push(c.path.show());
            }
        }
    }
    out
}

/// The disk with the change applied: paths the change names take its `new` side, all others
/// stay as they are on disk. Directories needed by the result are listed.
pub(crate) fn target_of(disk: &[FlatEntry], changes: &[Change]) -> Vec<FlatEntry> {
    let changed: HashSet<&[u8]> = actionable(changes).map(|c| c.path.as_bytes()).collect();
    let mut out: Vec<FlatEntry> = disk
        .iter()
        .filter(|e| !changed.contains(e.path.as_bytes()))
        .cloned()
        .collect();
    out.extend(actionable(changes).filter_map(|c| c.new.clone()));
    let mut dirs: HashSet<RelPath> = HashSet::new();
    for e in &out {
        for (i, _) in e.path.iter().enumerate().filter(|&(_, &b)| b == b'/') {
            dirs.insert(RelPath::from_bytes(&e.path[..i]));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    for d in dirs {
        if find(&out, &d).is_none() {
            out.push(FlatEntry {
                path: d,
                kind: EntryKind::Dir,
                id: ObjectId::ZERO,
                size: 0,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::Change;

    fn e(path: &str, kind: EntryKind, id: u8) -> FlatEntry {
        FlatEntry {
            path: path.into(),
            kind,
            id: ObjectId([id; 32]),
            size: 1,
        }
    }

    fn change(path: &str, old: Option<FlatEntry>, new: Option<FlatEntry>) -> Change {
        Change {
            path: path.into(),
            old,
            new,
        }
    }

    #[test]
    fn conflicts_only_where_the_disk_left_the_turns_result() {
        let f = EntryKind::File;
        let disk = vec![e("a", f, 2), e("b", f, 9), e("c", f, 1)];
        let ch = vec![
            change("a", Some(e("a", f, 2)), Some(e("a", f, 1))),
            change("b", Some(e("b", f, 2)), Some(e("b", f, 1))),
            change("d", Some(e("d", f, 2)), None),
        ];
        // a is as the turn left it; b was edited since; d was deleted since.
        assert_eq!(conflicts(&disk, &ch), vec!["b", "d"]);
    }

    #[test]
    fn a_directory_becoming_a_file_conflicts_with_unknown_files_inside() {
        let (f, d) = (EntryKind::File, EntryKind::Dir);
        let disk = vec![e("x", d, 0), e("x/a", f, 1), e("x/user", f, 5)];
        let ch = vec![
            change("x", Some(e("x", d, 0)), Some(e("x", f, 3))),
            change("x/a", Some(e("x/a", f, 1)), None),
        ];
        assert_eq!(conflicts(&disk, &ch), vec!["x"]);
        assert!(conflicts(&disk[..2], &ch).is_empty());
    }

    #[test]
    fn target_keeps_unrelated_paths_and_adds_parents() {
        let f = EntryKind::File;
        let disk = vec![e("keep", f, 7), e("new", f, 1)];
        let ch = vec![
            change("new", Some(e("new", f, 1)), None),
            change("gone/x", None, Some(e("gone/x", f, 4))),
        ];
        let t = target_of(&disk, &ch);
        let paths: Vec<&[u8]> = t.iter().map(|e| e.path.as_bytes()).collect();
        assert_eq!(paths, vec![&b"gone"[..], b"gone/x", b"keep"]);
        assert_eq!(t[0].kind, EntryKind::Dir);
    }
}

#[cfg(test)]
#[path = "inverse_tests.rs"]
mod nested_tests;
