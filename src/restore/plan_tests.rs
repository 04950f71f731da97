//! Unit tests of `plan.rs`: nested repositories across a switch of `nested_repos`.

use super::*;
use crate::object::ObjectId;

fn e(path: &str, kind: EntryKind, id: u8) -> FlatEntry {
    FlatEntry {
        path: path.into(),
        kind,
        id: ObjectId([id; 32]),
        size: 1,
    }
}

/// A snapshot taken with nested repositories skipped names `app` without its files; the
/// disk, captured since, has them. Restoring that snapshot deletes none of them, and says so.
#[test]
fn a_skipped_repository_in_the_target_keeps_the_files_the_disk_has_there() {
    let dir = tempfile::tempdir().unwrap();
    let (f, d, n) = (EntryKind::File, EntryKind::Dir, EntryKind::NestedRepo);
    let current = vec![
        e("app", d, 9),
        e("app/a.rs", f, 1),
        e("app/src", d, 8),
        e("app/src/b.rs", f, 2),
        e("top.txt", f, 5),
    ];
    let target = vec![e("app", n, 0), e("top.txt", f, 4)];
    let plan = plan(dir.path(), &current, &target).unwrap();
    assert!(plan.deletes.is_empty(), "{:?}", plan.deletes);
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    let written: Vec<String> = plan.writes.iter().map(|w| w.entry.path.show()).collect();
    assert_eq!(written, vec!["top.txt"]);
    let left: Vec<&str> = plan.left_alone.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(left, vec!["app"]);
}

/// Both sides skip it (the usual case): nothing is touched or reported.
#[test]
fn a_repository_skipped_on_both_sides_is_not_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (f, n) = (EntryKind::File, EntryKind::NestedRepo);
    let current = vec![e("app", n, 0), e("top.txt", f, 5)];
    let target = vec![e("app", n, 0), e("top.txt", f, 4)];
    let plan = plan(dir.path(), &current, &target).unwrap();
    assert!(plan.left_alone.is_empty(), "{:?}", plan.left_alone);
    assert!(plan.deletes.is_empty());
}
