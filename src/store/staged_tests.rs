//! Unit tests of the parent module.

use super::*;
use crate::object::{NewFrame, ObjectKind, PendingObject};
use crate::test_util::noise;

fn blob(bytes: &[u8]) -> PendingObject {
    PendingObject::whole(
        ObjectId::of_blob(bytes),
        ObjectKind::Blob,
        bytes.len() as u64,
        bytes.to_vec(),
    )
}

/// One pack's bytes.
const PACK: usize = 65408;

fn store(d: &tempfile::TempDir) -> Store {
    Store::open(&d.path().join("store"), d.path()).unwrap()
}

#[test]
fn staged_objects_are_found_once_the_final_commit_indexes_them() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let (a, b, c) = (noise(300_000, 1), noise(5000, 2), noise(7000, 3));
    let mut staged = Staged::default();
    let (row, w) = s
        .stage(vec![NewFrame::pack(&[blob(&a), blob(&b)])], &[], false)
        .unwrap();
    assert_eq!(w.objects, 2);
    staged.add(row.unwrap());
    let (row, _) = s
        .stage(vec![NewFrame::pack(&[blob(&c)])], &[], false)
        .unwrap();
    staged.add(row.unwrap());
    assert_eq!(staged.len(), 3);
    assert!(staged.contains(&ObjectId::of_blob(&c)));
    assert!(!staged.contains(&ObjectId::of_blob(b"other")));
    // In the pack log, in no index: no reader finds them.
    let r = s.reader().unwrap();
    assert!(!r.contains(&ObjectId::of_blob(&a)).unwrap());
    assert_eq!(r.staged_rows().unwrap(), 2);
    drop(r);
    let rows = staged.rows();
    s.write_with(Vec::new(), None, None, WriteStats::default(), |tx| tx.index_staged(&rows))
        .unwrap();
    let r = s.reader().unwrap();
    for bytes in [&a, &b, &c] {
        assert_eq!(&r.read_blob(&ObjectId::of_blob(bytes)).unwrap(), bytes);
    }
    assert_eq!(r.staged_rows().unwrap(), 0);
}

#[test]
fn a_batch_that_indexes_takes_the_staged_rows_with_it() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let (a, b) = (noise(9000, 4), noise(9000, 5));
    let mut staged = Staged::default();
    let (row, _) = s
        .stage(vec![NewFrame::pack(&[blob(&a)])], &[], false)
        .unwrap();
    staged.add(row.unwrap());
    let rows = staged.rows();
    let (row, w) = s
        .stage(vec![NewFrame::pack(&[blob(&b)])], &rows, true)
        .unwrap();
    assert!(row.is_none());
    assert_eq!(w.objects, 1);
    staged.indexed(&rows);
    assert!(staged.is_empty());
    let r = s.reader().unwrap();
    assert_eq!(r.read_blob(&ObjectId::of_blob(&a)).unwrap(), a);
    assert_eq!(r.read_blob(&ObjectId::of_blob(&b)).unwrap(), b);
    assert_eq!(r.staged_rows().unwrap(), 0);
}

#[test]
fn recompression_meanwhile_keeps_the_packs_of_staged_objects() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    // An indexed, compressible frame for the pass to rewrite, then a staged frame over
    // several packs, then one more so that the staged frame's packs are not the tail.
    let text = b"fn main() { println!(\"hello\"); }\n".repeat(3000);
    s.write(vec![NewFrame::pack(&[blob(&text)])], None, None)
        .unwrap();
    let big = noise(5 * PACK, 6);
    let (row, _) = s
        .stage(vec![NewFrame::pack(&[blob(&big)])], &[], false)
        .unwrap();
    let mut staged = Staged::default();
    staged.add(row.unwrap());
    let after = noise(3 * PACK, 7);
    s.write(vec![NewFrame::pack(&[blob(&after)])], None, None)
        .unwrap();
    let report = s.recompress(None).unwrap();
    assert!(report.frames >= 1, "the pass rewrote frames: {report:?}");
    let rows = staged.rows();
    s.write_with(Vec::new(), None, None, WriteStats::default(), |tx| tx.index_staged(&rows))
        .unwrap();
    let r = s.reader().unwrap();
    assert_eq!(r.read_blob(&ObjectId::of_blob(&big)).unwrap(), big);
    assert_eq!(r.read_blob(&ObjectId::of_blob(&text)).unwrap(), text);
}

#[test]
fn collection_drops_the_rows_a_dead_capture_left() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let big = noise(4 * PACK, 8);
    s.stage(vec![NewFrame::pack(&[blob(&big)])], &[], false)
        .unwrap();
    // The tail pack stays (the log goes on from there); the three before it go.
    let tail = noise(1000, 9);
    s.write(vec![NewFrame::pack(&[blob(&tail)])], None, None)
        .unwrap();
    let report = s.collect(&[ObjectId::of_blob(&tail)], 0, false).unwrap();
    assert!(report.packs_freed >= 3, "{report:?}");
    let r = s.reader().unwrap();
    assert_eq!(r.staged_rows().unwrap(), 0);
    assert_eq!(r.read_blob(&ObjectId::of_blob(&tail)).unwrap(), tail);
}

#[test]
fn a_malformed_row_is_refused_not_misread() {
    assert_eq!(PACK as u64, PACK_BYTES);
    assert!(next_record(&[0; 33]).is_none());
    let mut v = vec![7; 32];
    v.extend_from_slice(&3u16.to_le_bytes());
    v.extend_from_slice(&[1, 2]);
    assert!(next_record(&v).is_none());
    v.push(3);
    let (id, rec, rest) = next_record(&v).unwrap();
    assert_eq!(
        (id, rec, rest),
        (ObjectId([7; 32]), &[1u8, 2, 3][..], &[][..])
    );
}

#[test]
fn indexing_keeps_a_record_another_process_indexed_meanwhile() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let x = noise(9000, 10);
    let id = ObjectId::of_blob(&x);
    let (row, _) = s
        .stage(vec![NewFrame::pack(&[blob(&x)])], &[], false)
        .unwrap();
    let mut staged = Staged::default();
    staged.add(row.unwrap());
    // Another capture stores the same content and indexes it first.
    s.write(vec![NewFrame::pack(&[blob(&x)])], None, None)
        .unwrap();
    let theirs = s.reader().unwrap().record(&id).unwrap();
    let rows = staged.rows();
    s.write_with(Vec::new(), None, None, WriteStats::default(), |tx| tx.index_staged(&rows))
        .unwrap();
    let r = s.reader().unwrap();
    assert_eq!(r.record(&id).unwrap(), theirs, "their record stays");
    assert_eq!(r.read_blob(&id).unwrap(), x);
}

#[test]
fn a_staged_row_that_vanished_fails_the_commit() {
    let d = tempfile::tempdir().unwrap();
    let s = store(&d);
    let err = s
        .write_with(Vec::new(), None, None, WriteStats::default(), |tx| tx.index_staged(&[7]))
        .unwrap_err();
    assert!(err.to_string().contains("staged row 7"), "{err}");
}
