use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::progress::NoProgress;
use crate::working_copy::{Config, WorkingCopy};

/// A journal's record that records nothing (the history is a layer above).
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct NoHistory;

impl crate::restore::journal::Then for NoHistory {
    fn record(
        self,
        _: &crate::store::WriteTx<'_>,
        _: ObjectId,
        _: &StoreReader,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Paths a state may hold: files, and files below names that are files in other states.
const PATHS: &[&str] = &[
    "a", "b", "a/x", "a/y", "a/z/q", "a/z/r", "b/c", "c/d/e", "c/d/f", "c/g",
];

/// Writes `files` (path → content) as the whole workspace: everything else goes.
fn write_state(root: &std::path::Path, files: &BTreeMap<String, String>) {
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// A state: a content per chosen path, with no file that another chosen path lies below.
fn state() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(proptest::sample::select(PATHS), "[xy]{0,2}", 0..PATHS.len())
        .prop_map(|m| {
            let keys: Vec<&str> = m.keys().copied().collect();
            m.into_iter()
                .filter(|(p, _)| !keys.iter().any(|k| k.starts_with(&format!("{p}/"))))
                .map(|(p, c)| (p.to_string(), c))
                .collect()
        })
}

fn snapshot(wc: &WorkingCopy) -> ObjectId {
    let lock = wc
        .lock_exclusive(std::time::Duration::from_secs(10))
        .unwrap();
    lock.record(None, &NoProgress).unwrap().id
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// From any state to any other, the entries at the changed paths patched into the first
    /// snapshot give the second snapshot's root, both ways.
    #[test]
    fn patching_the_changed_paths_gives_the_other_snapshot(one in state(), two in state()) {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let wc = WorkingCopy::open::<NoHistory>(dir.path(), &Config::with_home(home.path()))
            .unwrap();
        write_state(dir.path(), &one);
        let a = snapshot(&wc);
        write_state(dir.path(), &two);
        let b = snapshot(&wc);
        let reader = wc.store().reader().unwrap();
        for (from, to) in [(a, b), (b, a)] {
            let changed = crate::diff::changes(&reader, &from, &to).unwrap();
            let paths: Vec<RelPath> = changed.iter().map(|c| c.path.clone()).collect();
            let current = entries_at(&reader, &from, paths.iter()).unwrap();
            let target = entries_at(&reader, &to, paths.iter()).unwrap();
            let (root, _) = patched_root(&reader, &from, &current, &target).unwrap();
            prop_assert_eq!(root, to, "{:?} -> {:?}", one, two);
        }
    }
}

#[test]
fn entries_at_lists_the_paths_their_directories_and_what_lies_below_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let wc = WorkingCopy::open::<NoHistory>(dir.path(), &Config::with_home(home.path())).unwrap();
    let files: BTreeMap<String, String> = [
        ("a/z/q", "1"),
        ("a/z/r", "2"),
        ("a/x", "3"),
        ("c/d/e", "4"),
        ("b", "5"),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_string(), c.to_string()))
    .collect();
    write_state(dir.path(), &files);
    let root = snapshot(&wc);
    let reader = wc.store().reader().unwrap();
    let asked: Vec<RelPath> = ["a/z", "c/d/e", "c/none/deeper", "b/under-a-file"]
        .into_iter()
        .map(RelPath::from)
        .collect();
    let got: Vec<String> = entries_at(&reader, &root, asked.iter())
        .unwrap()
        .into_iter()
        .map(|e| e.path.show())
        .collect();
    assert_eq!(
        got,
        ["a", "a/z", "a/z/q", "a/z/r", "b", "c", "c/d", "c/d/e"]
    );
}

/// A capture that records history in its commit builds no list of every path: the commit's
/// records see the trees it built (`Captured::Trees`), and the changes they read from them
/// are the two snapshots' exactly (a file modified, one added in a new directory, a
/// directory deleted whole).
#[test]
fn a_recording_capture_shows_its_commit_the_trees_it_built_and_lists_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let wc = WorkingCopy::open::<NoHistory>(dir.path(), &Config::with_home(home.path())).unwrap();
    let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(p, c)| ((*p).to_string(), (*c).to_string()))
            .collect()
    };
    write_state(
        dir.path(),
        &files(&[("a/x", "1"), ("a/y", "2"), ("b/c/d", "3"), ("e", "4")]),
    );
    let before = snapshot(&wc);
    write_state(
        dir.path(),
        &files(&[
            ("a/x", "1, edited"),
            ("a/y", "2"),
            ("e", "4"),
            ("n/m/o", "5"),
        ]),
    );
    let seen = std::cell::RefCell::new(None);
    let also = |_: &crate::store::WriteTx<'_>,
                root: ObjectId,
                captured: &crate::capture::Captured<'_>|
     -> Result<(), StoreError> {
        let trees = matches!(captured, crate::capture::Captured::Trees(_));
        let reader = wc.store().reader()?;
        let changes = captured.changes_from(&reader, &before, &root)?;
        *seen.borrow_mut() = Some((trees, changes));
        Ok(())
    };
    let lock = wc.lock_shared(std::time::Duration::from_secs(10)).unwrap();
    let cap = lock.record_with(None, &NoProgress, &also).unwrap();
    drop(lock);
    assert!(cap.entries.is_empty(), "no list of every path");
    let (trees, changes) = seen.into_inner().unwrap();
    assert!(trees, "the commit saw the trees the capture built");
    let reader = wc.store().reader().unwrap();
    // Files and symlinks: what the records take in (directories are not theirs).
    let exact: Vec<crate::diff::Change> = crate::diff::changes(&reader, &before, &cap.id)
        .unwrap()
        .into_iter()
        .filter(|c| {
            [&c.old, &c.new]
                .iter()
                .any(|e| e.as_ref().is_some_and(|e| e.kind != EntryKind::Dir))
        })
        .collect();
    let paths =
        |c: &[crate::diff::Change]| -> Vec<String> { c.iter().map(|c| c.path.show()).collect() };
    assert_eq!(paths(&changes), ["a/x", "b/c/d", "n/m/o"]);
    assert_eq!(changes, exact);
}

/// The capture an undo takes of the disk leaves the stat cache as it is when it read only a
/// few files (their paths are about to be written again); a recording capture rewrites it.
#[test]
fn an_unlisted_capture_that_read_a_few_files_leaves_the_stat_cache_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let wc = WorkingCopy::open::<NoHistory>(dir.path(), &Config::with_home(home.path())).unwrap();
    let files: BTreeMap<String, String> = [("a/x", "1"), ("b", "2")]
        .into_iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    write_state(dir.path(), &files);
    let first = snapshot(&wc);
    let cache = wc.dir().join("statcache");
    let written = std::fs::read(&cache).unwrap();
    // Just written, the files are racy in that cache: every capture reads them again.
    let lock = wc
        .lock_exclusive(std::time::Duration::from_secs(10))
        .unwrap();
    let disk = lock.store_disk_unlisted(&NoProgress).unwrap();
    assert_eq!(disk.id, first);
    assert!(disk.hashed > 0, "the racy files were read");
    assert_eq!(
        std::fs::read(&cache).unwrap(),
        written,
        "the stat cache was left as it was"
    );
    assert_eq!(lock.record(None, &NoProgress).unwrap().id, first);
    assert_ne!(
        std::fs::read(&cache).unwrap(),
        written,
        "a snapshot rewrites it"
    );
}
