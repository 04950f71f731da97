//! Unit tests of the parent module.

use std::fs;

use super::*;

fn version(kind: EntryKind, content: &[u8]) -> Expected {
    Expected {
        kind,
        id: ObjectId::of_blob(content),
    }
}

fn write_new(b: &Beneath, rel: &[u8], content: &[u8]) -> (Arc<OwnedFd>, Vec<u8>, u64) {
    let mut fill = |out: &mut dyn Write| -> Result<(), RestoreError> {
        out.write_all(content).map_err(|source| RestoreError::Io {
            path: PathBuf::new(),
            source,
        })
    };
    b.write_temp(rel, EntryKind::File, &mut fill, None).unwrap()
}

/// Writes `new` as the restore's version of `f` and puts it in place over `over`; returns
/// what taking the old version out found.
fn place_new(b: &Beneath, new: &[u8], over: Option<Expected>) -> Taken {
    let (dir, tmp, ino) = write_new(b, b"f", new);
    let ours = (ino, version(EntryKind::File, new));
    b.place(&dir, &tmp, ours, b"f", over, &StatCache::empty())
        .unwrap()
}

#[test]
fn a_symlinked_directory_and_names_that_are_not_plain_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
    let b = Beneath::open(d.path()).unwrap();
    for rel in [&b"link"[..], b"link/sub", b"..", b"a/../b", b"a/./b"] {
        assert!(
            matches!(b.dir(rel), Err(RestoreError::Unsafe { .. })),
            "{}",
            String::from_utf8_lossy(rel)
        );
    }
    assert!(b.dir(b"missing").unwrap().is_none());
    assert!(matches!(b.mkdir(b".."), Err(RestoreError::Unsafe { .. })));
}

#[test]
fn a_replaced_version_that_is_not_the_expected_one_is_put_back() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("f"), "someone's edit").unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let expected = version(EntryKind::File, b"what the plan saw");
    let t = place_new(&b, b"restored", Some(expected));
    assert_eq!(
        t,
        Taken::Kept {
            kept_at: "f".into()
        }
    );
    assert_eq!(
        fs::read_to_string(d.path().join("f")).unwrap(),
        "someone's edit"
    );
    // Nothing else is left behind.
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn a_replaced_version_that_is_the_expected_one_is_gone() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("f"), "old").unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let t = place_new(&b, b"new", Some(version(EntryKind::File, b"old")));
    assert_eq!(t, Taken::AsPlanned);
    assert_eq!(fs::read_to_string(d.path().join("f")).unwrap(), "new");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn a_path_that_must_be_free_but_was_taken_keeps_what_took_it() {
    let d = tempfile::tempdir().unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let (dir, tmp, ino) = write_new(&b, b"f", b"new");
    fs::write(d.path().join("f"), "created meanwhile").unwrap();
    let ours = (ino, version(EntryKind::File, b"new"));
    let t = b
        .place(&dir, &tmp, ours, b"f", None, &StatCache::empty())
        .unwrap();
    assert_eq!(
        t,
        Taken::Kept {
            kept_at: "f".into()
        }
    );
    assert_eq!(
        fs::read_to_string(d.path().join("f")).unwrap(),
        "created meanwhile"
    );
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn a_delete_of_an_edited_file_puts_it_back() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("f"), "edited").unwrap();
    fs::write(d.path().join("g"), "as planned").unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let cache = StatCache::empty();
    let t = b
        .delete(b"f", version(EntryKind::File, b"planned"), &cache)
        .unwrap();
    assert_eq!(
        t,
        Taken::Kept {
            kept_at: "f".into()
        }
    );
    assert_eq!(fs::read_to_string(d.path().join("f")).unwrap(), "edited");
    let t = b
        .delete(b"g", version(EntryKind::File, b"as planned"), &cache)
        .unwrap();
    assert_eq!(t, Taken::AsPlanned);
    assert!(!d.path().join("g").exists());
    assert_eq!(
        b.delete(b"g", version(EntryKind::File, b"x"), &cache)
            .unwrap(),
        Taken::Missing
    );
}

#[test]
fn temp_and_kept_names_never_grow_past_a_file_name() {
    let long = vec![b'n'; 255];
    assert!(kept_name(&long).len() <= 255);
    assert!(kept_name(b"short").starts_with(b"short.retrace-kept-"));
    assert!(temp_name().len() < 64 && out_name().len() < 64);
    assert!(crate::scan::exclude::is_temp(&temp_name()));
    assert!(crate::scan::exclude::is_temp(&out_name()));
}

#[test]
fn a_sweep_removes_what_the_store_holds_and_keeps_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let pid = std::process::id();
    fs::write(d.path().join(format!(".retrace-tmp-{pid}-1")), "half writ").unwrap();
    fs::write(d.path().join(format!(".retrace-tmp-{pid}-x2")), "stored").unwrap();
    fs::write(d.path().join(format!(".retrace-tmp-{pid}-x3")), "an edit").unwrap();
    fs::write(d.path().join(".retrace-tmp-1-x4"), "another process's").unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let stored = ObjectId::of_blob(b"stored");
    let kept = b.sweep_temp_files([&b""[..]].into_iter(), pid, &|id| *id == stored);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        fs::read_to_string(d.path().join(&kept[0])).unwrap(),
        "an edit"
    );
    let mut left: Vec<String> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec![".retrace-tmp-1-x4".to_string(), kept[0].clone()]);
}

#[test]
fn a_new_file_gets_its_content_and_mode_and_leaves_no_temp_file() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let b = Beneath::open(d.path()).unwrap();
    for (name, kind, mode) in [
        (&b"plain"[..], EntryKind::File, 0o644),
        (b"tool", EntryKind::Executable, 0o755),
    ] {
        let mut fill = |out: &mut dyn Write| -> Result<(), RestoreError> {
            out.write_all(b"content")
                .map_err(|source| RestoreError::Io {
                    path: PathBuf::new(),
                    source,
                })
        };
        assert_eq!(
            b.write_new(name, kind, &mut fill, None).unwrap(),
            Taken::AsPlanned
        );
        let p = d.path().join(String::from_utf8_lossy(name).as_ref());
        assert_eq!(fs::read(&p).unwrap(), b"content");
        // Whatever the umask: the mode a restore gives is the snapshot's.
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            mode
        );
    }
    assert_eq!(
        b.write_new(b"link", EntryKind::Symlink, &mut |_| Ok(()), Some(b"plain"))
            .unwrap(),
        Taken::AsPlanned
    );
    assert_eq!(
        fs::read_link(d.path().join("link")).unwrap(),
        Path::new("plain")
    );
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 3);
}

#[test]
fn a_new_file_or_symlink_at_a_taken_path_keeps_what_is_there() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("f"), "created meanwhile").unwrap();
    fs::write(d.path().join("l"), "a file, not a link").unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let mut fill = |out: &mut dyn Write| -> Result<(), RestoreError> {
        out.write_all(b"ours").map_err(|source| RestoreError::Io {
            path: PathBuf::new(),
            source,
        })
    };
    let kept = |p: &str| Taken::Kept { kept_at: p.into() };
    assert_eq!(
        b.write_new(b"f", EntryKind::File, &mut fill, None).unwrap(),
        kept("f")
    );
    assert_eq!(
        b.write_new(b"l", EntryKind::Symlink, &mut fill, Some(b"f"))
            .unwrap(),
        kept("l")
    );
    assert_eq!(
        fs::read_to_string(d.path().join("f")).unwrap(),
        "created meanwhile"
    );
    assert_eq!(
        fs::read_to_string(d.path().join("l")).unwrap(),
        "a file, not a link"
    );
    // Our temp file is gone.
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 2);
}

#[test]
fn a_new_file_whose_content_fails_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let b = Beneath::open(d.path()).unwrap();
    let mut fill = |out: &mut dyn Write| -> Result<(), RestoreError> {
        out.write_all(b"half").map_err(|source| RestoreError::Io {
            path: PathBuf::new(),
            source,
        })?;
        Err(RestoreError::Io {
            path: PathBuf::new(),
            source: std::io::Error::from_raw_os_error(28),
        })
    };
    assert!(b.write_new(b"f", EntryKind::File, &mut fill, None).is_err());
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
}
