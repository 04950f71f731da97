//! Unit tests of the parent module.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use super::hash::Hasher;
use super::write::{BATCH_BYTES, Pending, prefix};
use crate::object::{ObjectId, ObjectKind, PendingObject};
use crate::scan;
use crate::store::{Store, StoreReader, WriteStats};
use crate::test_util::noise;

fn blob(bytes: Vec<u8>) -> PendingObject {
    PendingObject::whole(
        ObjectId::of_blob(&bytes),
        ObjectKind::Blob,
        bytes.len() as u64,
        bytes,
    )
}

fn hasher<'a>(store: &'a Store, reader: &'a StoreReader, root: &'a Path) -> Hasher<'a> {
    Hasher {
        revived: HashSet::new(),
        beneath: scan::beneath::Root::open(root).ok(),
        allow_secrets: None,
        reader,
        committed: RwLock::new(None),
        store_objects: true,
        pending: Mutex::new(Pending::default()),
        store,
        error: Mutex::new(None),
        flushed: Mutex::new(WriteStats::default()),
        writing: Mutex::new(()),
    }
}

#[test]
fn an_object_of_a_committed_batch_is_not_queued_again() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(&d.path().join("store"), d.path()).unwrap();
    let reader = store.reader().unwrap();
    let h = hasher(&store, &reader, d.path());
    // Small objects filling a shared frame (18 × 60 KiB, just over a MiB), then one over a
    // batch: the batch of 19 is written and committed at once, staged (under STAGE_MIN).
    let small: Vec<PendingObject> = (1..=18).map(|s| blob(noise(60 * 1024, s))).collect();
    let first = small[0].id;
    h.queue(small);
    let big = blob(noise(BATCH_BYTES + 1024, 99));
    let id = big.id;
    h.queue(vec![big]);
    assert!(h.error.lock().unwrap().is_none());
    assert_eq!(h.flushed.lock().unwrap().objects, 19);
    // Staged: in the pack log and no index yet; the queued set let go of them.
    assert!(!store.reader().unwrap().contains(&first).unwrap());
    {
        let p = h.pending.lock().unwrap();
        assert!(p.queued.is_empty());
        assert_eq!(p.staged.len(), 19);
        assert!(p.staged.contains(&first) && p.staged.contains(&id));
    }
    // The same content again (an identical file later in the walk) is not queued again,
    // though neither the reader from the start of the capture nor the index knows it.
    assert!(!h.known(&first));
    h.queue(vec![blob(noise(60 * 1024, 1))]);
    {
        let p = h.pending.lock().unwrap();
        assert!(p.frames.is_empty() && p.solid.is_empty() && p.queued.is_empty());
    }
    // The next batch brings the staged objects to STAGE_MIN: it indexes them all with it.
    let next = blob(noise(BATCH_BYTES + 1024, 98));
    let next_id = next.id;
    h.queue(vec![next]);
    assert!(h.error.lock().unwrap().is_none());
    let now = store.reader().unwrap();
    for id in [first, id, next_id] {
        assert!(now.contains(&id).unwrap());
    }
    assert_eq!(now.read_blob(&first).unwrap(), noise(60 * 1024, 1));
    {
        let p = h.pending.lock().unwrap();
        assert!(p.staged.is_empty() && p.queued.is_empty());
        assert_eq!(p.indexed, 20);
    }
    // Indexed, it is found through the reader of the last indexing batch.
    h.queue(vec![blob(noise(60 * 1024, 1))]);
    let p = h.pending.lock().unwrap();
    assert!(p.solid.is_empty() && p.queued.is_empty());
}

#[test]
fn an_id_sharing_only_the_prefix_of_a_committed_one_is_claimed() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(&d.path().join("store"), d.path()).unwrap();
    let reader = store.reader().unwrap();
    let h = hasher(&store, &reader, d.path());
    let big = blob(noise(BATCH_BYTES + 1024, 9));
    let id = big.id;
    h.queue(vec![big]);
    assert!(h.pending.lock().unwrap().staged.contains(&id));
    let mut twin = id;
    twin.0[31] ^= 1;
    let mut p = h.pending.lock().unwrap();
    assert!(
        h.claim(&mut p, &twin),
        "a prefix twin is a different object"
    );
    assert!(!h.claim(&mut p, &twin), "and once claimed it is queued");
    assert!(
        !h.claim(&mut p, &id),
        "the committed one is not claimed again"
    );
}

#[test]
fn prefixes_hash_to_themselves() {
    use std::hash::{BuildHasher, Hash, Hasher as _};
    let id = ObjectId::of_blob(b"x");
    let b = BuildHasherDefault::<crate::object::Prehashed>::default();
    assert_eq!(b.hash_one(prefix(&id)), prefix(&id));
    let mut h = crate::object::Prehashed::default();
    [1u8, 2].hash(&mut h);
    assert_ne!(h.finish(), 0);
}
