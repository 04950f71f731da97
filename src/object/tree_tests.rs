//! Unit tests of `tree.rs`.

#[test]
fn the_written_out_encoding_is_postcards() {
    let kinds = [
        EntryKind::File,
        EntryKind::Executable,
        EntryKind::Symlink,
        EntryKind::Dir,
        EntryKind::NestedRepo,
    ];
    for n in [0usize, 1, 5, 200] {
        let entries: Vec<TreeEntry> = (0..n)
            .map(|i| TreeEntry {
                name: format!("entry-{i:04}-{}", "x".repeat(i % 150)).into_bytes(),
                kind: kinds[i % kinds.len()],
                id: ObjectId([u8::try_from(i % 251).unwrap(); 32]),
                size: (i as u64) << (i % 60),
            })
            .collect();
        let t = Tree { entries };
        let postcard = postcard::to_allocvec(&TreeRecord {
            version: TREE_VERSION,
            entries: t.entries.clone(),
        })
        .unwrap();
        assert_eq!(t.encode(), postcard, "{n} entries");
    }
}

use super::*;

fn entry(name: &[u8]) -> TreeEntry {
    TreeEntry {
        name: name.to_vec(),
        kind: EntryKind::File,
        id: ObjectId::ZERO,
        size: 0,
    }
}

#[test]
fn round_trips() {
    let t = Tree {
        entries: vec![entry(b"a"), entry(b"b\xff")],
    };
    assert_eq!(Tree::decode(&t.encode()).unwrap(), t);
}

#[test]
fn rejects_names_that_escape() {
    for bad in [&b".."[..], b".", b"", b"a/b", b"a\0"] {
        let t = Tree {
            entries: vec![entry(bad)],
        };
        assert!(
            matches!(Tree::decode(&t.encode()), Err(TreeError::BadName(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn rejects_duplicates_and_disorder() {
    let t = Tree {
        entries: vec![entry(b"b"), entry(b"a")],
    };
    assert!(matches!(
        Tree::decode(&t.encode()),
        Err(TreeError::Unsorted(_))
    ));
    let t = Tree {
        entries: vec![entry(b"a"), entry(b"a")],
    };
    assert!(matches!(
        Tree::decode(&t.encode()),
        Err(TreeError::Unsorted(_))
    ));
}

#[test]
fn rejects_trailing_bytes() {
    let mut bytes = Tree {
        entries: vec![entry(b"a")],
    }
    .encode();
    bytes.push(0);
    assert!(matches!(Tree::decode(&bytes), Err(TreeError::Decode(_))));
}

#[test]
fn refuses_future_versions() {
    assert_eq!(Tree::decode(&[2, 0]), Err(TreeError::UnknownVersion(2)));
}
