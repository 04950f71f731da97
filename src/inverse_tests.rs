//! Unit tests of `inverse.rs`: a change across a switch of the `nested_repos` setting.

use super::*;

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

/// A turn that began with `app` skipped and ended with it captured shows `app`'s files as
/// added; its undo (the change back) must neither delete them nor call them conflicts, and
/// the rest of the turn is still undone.
#[test]
fn undoing_across_a_switch_to_capture_keeps_the_repositorys_files() {
    let (f, d, n) = (EntryKind::File, EntryKind::Dir, EntryKind::NestedRepo);
    let disk = vec![
        e("app", d, 9),
        e("app/a.rs", f, 1),
        e("app/src", d, 8),
        e("app/src/b.rs", f, 2),
        e("top.txt", f, 5),
    ];
    // after -> before: the turn's own edit of top.txt, and the switch.
    let back = vec![
        change("app", Some(e("app", d, 9)), Some(e("app", n, 0))),
        change("app/a.rs", Some(e("app/a.rs", f, 1)), None),
        change("app/src", Some(e("app/src", d, 8)), None),
        change("app/src/b.rs", Some(e("app/src/b.rs", f, 2)), None),
        change(
            "top.txt",
            Some(e("top.txt", f, 5)),
            Some(e("top.txt", f, 4)),
        ),
    ];
    assert!(conflicts(&disk, &back).is_empty());
    // Edited since: still no conflict there (nothing of it is touched).
    let mut edited = disk.clone();
    edited[1].id = ObjectId([7; 32]);
    assert!(conflicts(&edited, &back).is_empty());
    let t = target_of(&disk, &back);
    let mut want = disk.clone();
    want[4].id = ObjectId([4; 32]);
    assert_eq!(t, want);
}

/// The other way (captured, then skipped): the change back would write the repository's
/// old files over whatever it holds now; it writes nothing there.
#[test]
fn undoing_across_a_switch_to_skip_writes_nothing_into_the_repository() {
    let (f, d, n) = (EntryKind::File, EntryKind::Dir, EntryKind::NestedRepo);
    let disk = vec![e("app", n, 0), e("top.txt", f, 5)];
    let back = vec![
        change("app", Some(e("app", n, 0)), Some(e("app", d, 9))),
        change("app/a.rs", None, Some(e("app/a.rs", f, 1))),
        change("top.txt", Some(e("top.txt", f, 5)), None),
    ];
    assert!(conflicts(&disk, &back).is_empty());
    assert_eq!(target_of(&disk, &back), vec![e("app", n, 0)]);
}

/// A turn made while `app` was captured, undone once it is skipped: `app`'s paths are no
/// conflict (the plan leaves them alone and reports them), so the rest is undone.
#[test]
fn a_captured_turn_undone_in_skip_mode_is_not_blocked_by_the_repository() {
    let (f, n) = (EntryKind::File, EntryKind::NestedRepo);
    let disk = vec![e("app", n, 0), e("top.txt", f, 5)];
    let back = vec![
        change(
            "app/a.rs",
            Some(e("app/a.rs", f, 2)),
            Some(e("app/a.rs", f, 1)),
        ),
        change(
            "top.txt",
            Some(e("top.txt", f, 5)),
            Some(e("top.txt", f, 4)),
        ),
    ];
    assert!(conflicts(&disk, &back).is_empty());
}
