//! Unit tests of the parent module.

use proptest::prelude::*;

use super::*;

fn entry(path: &str) -> FlatEntry {
    FlatEntry {
        path: RelPath::from(path),
        kind: EntryKind::File,
        id: ObjectId::ZERO,
        size: 0,
    }
}

fn slow(list: &[FlatEntry], dirs: &[RelPath]) -> Vec<FlatEntry> {
    let mut sorted = dirs.to_vec();
    sorted.sort();
    list.iter()
        .filter(|e| !below_any(&e.path, &sorted))
        .cloned()
        .collect()
}

#[test]
fn outside_skips_runs_in_prefix_order_not_directory_order() {
    let list: Vec<FlatEntry> = ["a", "a.b", "a.b/x", "a/c", "a/c/d", "a/e", "a0", "b/f"]
        .iter()
        .map(|p| entry(p))
        .collect();
    let dirs = [RelPath::from("a"), RelPath::from("a.b")];
    let kept: Vec<String> = outside(&list, &dirs)
        .iter()
        .map(|e| e.path.show())
        .collect();
    assert_eq!(kept, ["a", "a.b", "a0", "b/f"]);
    assert_eq!(outside(&list, &dirs), slow(&list, &dirs));
    // Nested directories, and a directory with nothing below it.
    let dirs = [
        RelPath::from("a/c"),
        RelPath::from("a"),
        RelPath::from("zz"),
    ];
    assert_eq!(outside(&list, &dirs), slow(&list, &dirs));
}

proptest! {
    #[test]
    fn outside_equals_filtering_each_path(
        paths in proptest::collection::btree_set("[ab.]{1,2}(/[ab.]{1,2}){0,3}", 0..40),
        dirs in proptest::collection::vec("[ab.]{1,2}(/[ab.]{1,2}){0,2}", 0..6),
    ) {
        let list: Vec<FlatEntry> = paths.iter().map(|p| entry(p)).collect();
        let dirs: Vec<RelPath> = dirs.iter().map(|d| RelPath::from(d.as_str())).collect();
        prop_assert_eq!(outside(&list, &dirs), slow(&list, &dirs));
    }
}
