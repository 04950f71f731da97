use super::*;

fn text(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            b'a' + u8::try_from((s >> 33) % 26).unwrap_or(0)
        })
        .collect()
}

fn store(dir: &std::path::Path) -> Store {
    Store::open(&dir.join("store"), dir).unwrap()
}

/// A version queued in the batch is the next one's base; another process stores the same
/// content meanwhile, as a delta of its own. The batch writes its copy whole again, so the
/// chain the sink counted stays readable.
#[test]
fn an_in_batch_base_another_writer_stored_meanwhile_keeps_the_chain_readable() {
    let d = tempfile::tempdir().unwrap();
    let store = store(d.path());
    let c = text(1, 20_000);
    let mut b = c.clone();
    b[100] = b'!';
    let mut v2 = b.clone();
    v2[5000] = b'?';
    let (cid, bid) = (ObjectId::of_blob(&c), ObjectId::of_blob(&b));
    let mut sink = ObjectSink::new(&store).unwrap();
    sink.blob(b.clone(), None).unwrap();
    let v2id = sink.blob(v2.clone(), Some(bid)).unwrap();
    let payload = crate::object::delta::encode(&c, &b).unwrap();
    let whole = |id, data: &Vec<u8>| PendingObject::whole(id, ObjectKind::Blob, data.len() as u64, data.clone());
    store
        .write(
            vec![
                NewFrame::raw(&[whole(cid, &c)]),
                NewFrame::raw(&[PendingObject {
                    id: bid,
                    kind: ObjectKind::Blob,
                    size: b.len() as u64,
                    payload,
                    delta: Some(DeltaBase { base: cid, depth: 1 }),
                }]),
            ],
            None,
            None,
        )
        .unwrap();
    sink.finish().unwrap();
    let r = store.reader().unwrap();
    assert_eq!(r.read_blob(&v2id).unwrap(), v2);
    assert_eq!(r.read_blob(&bid).unwrap(), b);
}

/// 120 versions of one file in one batch: chains end at the deepest a chain goes, and every
/// version reads back; the first, a base, has a frame of its own.
#[test]
fn versions_queued_together_are_deltas_that_read_back() {
    let d = tempfile::tempdir().unwrap();
    let store = store(d.path());
    let mut sink = ObjectSink::new(&store).unwrap();
    let mut v = text(2, 30_000);
    let mut prev = None;
    let mut ids = Vec::new();
    for i in 0..120 {
        v[(i * 97) % 30_000] = b'#';
        let id = sink.blob(v.clone(), prev).unwrap();
        ids.push((id, v.clone()));
        prev = Some(id);
    }
    // Small files beside them share a frame; the base does not.
    for i in 0..20 {
        sink.blob(text(100 + i, 500), None).unwrap();
    }
    sink.finish().unwrap();
    let r = store.reader().unwrap();
    let mut deepest = 0;
    for (id, want) in &ids {
        let rec = r.record(id).unwrap();
        deepest = deepest.max(rec.delta.map_or(0, |d| d.depth));
        assert_eq!(&r.read_blob(id).unwrap(), want);
    }
    assert_eq!(deepest, crate::object::delta::MAX_DEPTH);
    let first = r.record(&ids[0].0).unwrap();
    assert!(first.delta.is_none());
    assert_eq!(first.len, first.frame_len, "the base is alone in its frame");
}
