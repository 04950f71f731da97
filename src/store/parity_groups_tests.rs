//! Unit tests of `parity_groups.rs`.

use std::collections::HashSet;

use super::*;
use crate::object::{EntryKind, PendingObject, Tree, TreeEntry};
use crate::store::pack;
use crate::store::schema::{FORMAT_PARITY, META_FORMAT};

fn store(d: &tempfile::TempDir) -> Store {
    Store::open(&d.path().join("store"), d.path()).unwrap()
}

/// Version `v` of a 12-file directory: file `i` was last changed at version `v - v % (i + 1)`.
fn version(dir: &str, v: u64) -> Tree {
    Tree {
        entries: (0..12u64)
            .map(|i| {
                let at = v - v % (i + 1);
                TreeEntry {
                    name: format!("{dir}_{i:02}.rs").into_bytes(),
                    kind: EntryKind::File,
                    id: ObjectId::of_blob(format!("{dir} {i} {at}").as_bytes()),
                    size: 1000 + at,
                }
            })
            .collect(),
    }
}

/// Writes each tree in a frame of its own, as one capture at a time does.
fn write_one_by_one(s: &Store, trees: &[Tree]) -> Vec<ObjectId> {
    trees
        .iter()
        .map(|t| {
            let bytes = t.encode();
            let id = t.id();
            let pending = PendingObject::whole(id, ObjectKind::Tree, bytes.len() as u64, bytes);
            s.write(NewFrame::pack_trees(&[pending]), None, None).unwrap();
            id
        })
        .collect()
}

fn stored_bytes(s: &Store, ids: &[ObjectId]) -> u64 {
    let r = s.reader().unwrap();
    let mut frames: HashMap<u64, u64> = HashMap::new();
    for id in ids {
        let rec = r.record(id).unwrap();
        frames.insert(rec.offset, u64::from(rec.stored_len));
    }
    frames.values().sum()
}

#[test]
fn versions_of_directories_pack_into_parity_frames_that_read_back() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let trees: Vec<Tree> = (1..=60)
        .flat_map(|v| [version("a", v), version("b", v)])
        .collect();
    let ids = write_one_by_one(&s, &trees);
    let before = stored_bytes(&s, &ids);
    let report = s.group_trees(None).unwrap();
    assert_eq!(report.objects, 120);
    assert_eq!(report.bytes_before, before);
    let after = stored_bytes(&s, &ids);
    assert_eq!(report.bytes_after, after);
    assert!(after * 3 < before, "{before} -> {after}");
    let r = s.reader().unwrap();
    for (t, id) in trees.iter().zip(&ids) {
        assert_eq!(r.record(id).unwrap().codec, Codec::ZstdParity);
        assert_eq!(&r.read_tree(id).unwrap(), t);
    }
    assert_eq!(
        r.meta_value(META_FORMAT).unwrap().unwrap(),
        FORMAT_PARITY.to_le_bytes()
    );
    // The frames the trees left are freed, and a second pass has nothing to do.
    drop(r);
    assert_eq!(s.group_trees(None).unwrap().objects, 0);
}

#[test]
fn one_flipped_byte_anywhere_in_a_parity_frame_costs_no_tree() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let trees: Vec<Tree> = (1..=20).map(|v| version("a", v)).collect();
    let ids = write_one_by_one(&s, &trees);
    s.group_trees(None).unwrap();
    let rec = s.reader().unwrap().record(&ids[0]).unwrap();
    let original = {
        let r = s.reader().unwrap();
        pack::read(r.packs.as_ref().unwrap(), rec.offset, rec.stored_len)
            .unwrap()
            .unwrap()
    };
    // Every 7th byte of the stored frame in turn, each flip undone before the next.
    for at in (0..original.len()).step_by(7) {
        let mut bad = original.clone();
        bad[at] ^= 0x10;
        overwrite(&s, rec.offset, &bad);
        let r = s.reader().unwrap();
        for (t, id) in trees.iter().zip(&ids) {
            let got = r.read_tree(id);
            assert_eq!(got.as_ref().ok(), Some(t), "byte {at} flipped: {got:?}");
        }
    }
    overwrite(&s, rec.offset, &original);
}

/// Writes `bytes` over the pack log at `offset` (damage, for the tests).
fn overwrite(s: &Store, offset: u64, bytes: &[u8]) {
    use crate::store::schema::{PACK_BYTES, PACKS};
    use redb::ReadableTable;
    s.transact(|tx| {
        let mut packs = tx.tx.open_table(PACKS).unwrap();
        for (i, b) in bytes.iter().enumerate() {
            let at = offset + i as u64;
            let mut v = packs.get(at / PACK_BYTES).unwrap().unwrap().value().to_vec();
            v[usize::try_from(at % PACK_BYTES).unwrap()] = *b;
            packs.insert(at / PACK_BYTES, v.as_slice()).unwrap();
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_lone_frame_is_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let t = version("a", 1);
    let bytes = t.encode();
    let pending = PendingObject::whole(t.id(), ObjectKind::Tree, bytes.len() as u64, bytes);
    s.write(NewFrame::pack_trees(&[pending]), None, None).unwrap();
    assert_eq!(s.group_trees(None).unwrap().objects, 0);
    assert_eq!(s.reader().unwrap().record(&t.id()).unwrap().codec, Codec::Zstd);
}

#[test]
fn the_packs_regrouping_empties_are_freed_and_what_stayed_in_them_moves() {
    use crate::test_util::noise;
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    // Each capture: a directory's tree, then a file that does not compress (a raw frame),
    // as a turn writes its trees beside its deltas; 300 of them fill several packs.
    let mut files = Vec::new();
    let mut trees = Vec::new();
    for v in 1..=300 {
        let t = version("a", v);
        let bytes = t.encode();
        let pending = PendingObject::whole(t.id(), ObjectKind::Tree, bytes.len() as u64, bytes);
        s.write(NewFrame::pack_trees(&[pending]), None, None).unwrap();
        let f = noise(100, v);
        let id = ObjectId::of_blob(&f);
        let blob = PendingObject::whole(id, ObjectKind::Blob, 100, f.clone());
        s.write(vec![NewFrame::raw(&[blob])], None, None).unwrap();
        files.push((id, f));
        trees.push(t);
    }
    let packs_before = s.reader().unwrap().packed_bytes().unwrap();
    let report = s.recompress(None).unwrap();
    assert_eq!(report.trees.objects, 300);
    assert!(report.packs_freed > 0, "{report:?}");
    let r = s.reader().unwrap();
    assert!(r.packed_bytes().unwrap() < packs_before);
    for (id, f) in &files {
        assert_eq!(&r.read_blob(id).unwrap(), f);
    }
    for t in &trees {
        assert_eq!(&r.read_tree(&t.id()).unwrap(), t);
    }
}

#[test]
fn a_small_parity_frame_is_packed_again_with_newer_trees() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let older: Vec<Tree> = (1..=5).map(|v| version("a", v)).collect();
    let older_ids = write_one_by_one(&s, &older);
    assert_eq!(s.group_trees(None).unwrap().objects, 5);
    let newer: Vec<Tree> = (6..=10).map(|v| version("a", v)).collect();
    let newer_ids = write_one_by_one(&s, &newer);
    // The five in their small parity frame go with the five new ones.
    assert_eq!(s.group_trees(None).unwrap().objects, 10);
    let r = s.reader().unwrap();
    let offsets: HashSet<u64> = older_ids
        .iter()
        .chain(&newer_ids)
        .map(|id| r.record(id).unwrap().offset)
        .collect();
    assert_eq!(offsets.len(), 1, "one frame");
    for (t, id) in older.iter().chain(&newer).zip(older_ids.iter().chain(&newer_ids)) {
        assert_eq!(&r.read_tree(id).unwrap(), t);
    }
}

#[test]
fn a_record_changed_since_the_pass_read_it_is_not_moved() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let ids = write_one_by_one(&s, &[version("a", 1), version("a", 2)]);
    let before = s.reader().unwrap().record(&ids[0]).unwrap();
    let t = version("a", 1);
    let bytes = t.encode();
    let frame = NewFrame::pack(&[PendingObject::whole(
        ids[0],
        ObjectKind::Tree,
        bytes.len() as u64,
        bytes,
    )]);
    // The pass read the record at another offset: a capture replaced it since.
    let moved_from = HashMap::from([(ids[0], before.offset + 1)]);
    s.rewrite(&[], vec![frame], &HashMap::new(), false, Some(&moved_from))
        .unwrap();
    assert_eq!(s.reader().unwrap().record(&ids[0]).unwrap(), before);
}

/// File `i`'s version `v`: about 90 KB, most lines shared with the other files.
fn file(i: usize, v: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut t = String::new();
    for k in 0..2500 {
        let _ = writeln!(t, "let value_{k} = compute({k}, {});", k % 7);
        if k % 800 == i {
            let _ = writeln!(t, "// file {i}, version {v}");
        }
    }
    t.into_bytes()
}

/// Writes `bytes` whole in a frame of its own, and returns its id.
fn write_whole(s: &Store, bytes: &[u8]) -> ObjectId {
    let id = ObjectId::of_blob(bytes);
    let o = PendingObject::whole(id, ObjectKind::Blob, bytes.len() as u64, bytes.to_vec());
    s.write(vec![NewFrame::pack(&[o])], None, None).unwrap();
    id
}

/// Writes `bytes` as a delta against `base`, and returns its id.
fn write_delta(s: &Store, base: (ObjectId, &[u8]), bytes: &[u8]) -> ObjectId {
    let id = ObjectId::of_blob(bytes);
    let o = PendingObject {
        id,
        kind: ObjectKind::Blob,
        size: bytes.len() as u64,
        payload: crate::object::delta::encode(base.1, bytes).unwrap(),
        delta: Some(crate::object::DeltaBase {
            base: base.0,
            depth: 1,
        }),
    };
    s.write(vec![NewFrame::raw(&[o])], None, None).unwrap();
    id
}

#[test]
fn roots_pack_together_and_versions_nothing_is_stored_against_stay() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let mut roots = Vec::new();
    let mut later = Vec::new();
    for i in 0..4 {
        let first = file(i, 0);
        let root = write_whole(&s, &first);
        roots.push(root);
        later.push((write_delta(&s, (root, &first), &file(i, 1)), file(i, 1)));
    }
    // Stored whole, but no delta names it: not a root.
    let alone = write_whole(&s, &file(9, 0));
    // A root sharing its frame with a version that is not one: moving it out would leave
    // its bytes in the frame, live for as long as the other's.
    let (shared, other) = (file(7, 0), file(8, 0));
    let pending = |b: &[u8]| {
        PendingObject::whole(ObjectId::of_blob(b), ObjectKind::Blob, b.len() as u64, b.to_vec())
    };
    s.write(vec![NewFrame::pack(&[pending(&shared), pending(&other)])], None, None)
        .unwrap();
    let shared_root = ObjectId::of_blob(&shared);
    write_delta(&s, (shared_root, &shared), &file(7, 1));
    // A root of random bytes: nothing to gain from company.
    let mut random = vec![0; 80_000];
    blake3::Hasher::new()
        .update(b"random root")
        .finalize_xof()
        .fill(&mut random);
    let random_root = write_whole(&s, &random);
    let mut random_next = random.clone();
    random_next[100] ^= 1;
    write_delta(&s, (random_root, &random), &random_next);
    let before = stored_bytes(&s, &roots);
    let report = s.group_roots(None).unwrap();
    assert_eq!((report.objects, report.frames), (4, 1), "{report:?}");
    let r = s.reader().unwrap();
    for (i, id) in roots.iter().enumerate() {
        let rec = r.record(id).unwrap();
        assert_eq!(rec.codec, Codec::ZstdParity);
        assert_eq!(r.read_blob(id).unwrap(), file(i, 0));
    }
    for (id, bytes) in &later {
        assert_eq!(&r.read_blob(id).unwrap(), bytes);
    }
    for id in [alone, shared_root, random_root] {
        assert_ne!(r.record(&id).unwrap().codec, Codec::ZstdParity);
    }
    // Together they take less than a third of what they took apart.
    let after = stored_bytes(&s, &roots);
    assert!(after * 3 < before, "{before} -> {after}");
    // A root in the new frame is a delta base: the frame is shared and over 256 KiB, but a
    // frame of roots.
    assert!(r.record(&roots[2]).unwrap().frame_len > 256 * 1024);
    let (base, bytes) = r
        .delta_base(&roots[2], ObjectKind::Blob)
        .unwrap()
        .expect("a base");
    assert_eq!((base.base, bytes), (roots[2], file(2, 0)));
    drop(r);
    // Nothing left to pack.
    assert_eq!(s.group_roots(None).unwrap().objects, 0);
}
