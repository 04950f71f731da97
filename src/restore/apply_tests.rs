//! Unit tests of the parent module.

use super::*;
use crate::object::ObjectId;

fn entry(path: &str, kind: EntryKind, content: &[u8]) -> FlatEntry {
    FlatEntry {
        path: path.into(),
        kind,
        id: ObjectId::of_blob(content),
        size: content.len() as u64,
    }
}

#[test]
fn a_directory_replaced_by_a_file_after_planning_is_not_written_through() {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir(d.path().join("dir")).unwrap();
    let b = Beneath::open(d.path()).unwrap();
    // Between plan and apply, someone replaces the directory by a file.
    fs::remove_dir(d.path().join("dir")).unwrap();
    fs::write(d.path().join("dir"), "a file now").unwrap();
    let err = b.dir(b"dir").unwrap_err();
    assert!(
        matches!(err, RestoreError::Unsafe { ref path, .. } if path == "dir"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(d.path().join("dir")).unwrap(),
        "a file now"
    );
}

#[test]
fn check_reports_paths_that_are_not_as_planned() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("good"), "good").unwrap();
    fs::write(d.path().join("edited"), "someone else's edit").unwrap();
    fs::write(d.path().join("should-run"), "#!/bin/sh").unwrap();
    fs::write(d.path().join("back-again"), "x").unwrap();
    fs::write(d.path().join("same-size"), "wxyz").unwrap();
    let write = |e: FlatEntry| Write {
        entry: e,
        over: None,
    };
    let delete = |p: &str| crate::restore::plan::Delete {
        path: p.into(),
        expected: crate::restore::beneath::Expected {
            kind: EntryKind::File,
            id: ObjectId::of_blob(b"x"),
        },
    };
    let plan = Plan {
        writes: vec![
            write(entry("good", EntryKind::File, b"good")),
            write(entry("edited", EntryKind::File, b"planned")),
            write(entry("should-run", EntryKind::Executable, b"#!/bin/sh")),
            write(entry("missing", EntryKind::File, b"m")),
            write(entry("same-size", EntryKind::File, b"abcd")),
        ],
        deletes: vec![delete("back-again"), delete("gone")],
        ..Plan::default()
    };
    assert_eq!(
        check(d.path(), &plan, Look::Content),
        vec!["back-again", "edited", "missing", "same-size", "should-run"]
    );
    // By `lstat`, an edit of the same size goes unseen (a big restore's content was
    // verified as it was written; the next capture hashes these racy files anyway).
    assert_eq!(
        check(d.path(), &plan, Look::Stat),
        vec!["back-again", "edited", "missing", "should-run"]
    );
}
