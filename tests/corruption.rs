//! A damaged or hostile store: detected, reported, and nothing written.

use std::fs;

use crate::common::{Env, RETRACE, RETRACE_DUMP, flip_byte, open_raw, stderr, stdout};
use redb::ReadableTable;
use retrace::object::{EntryKind, NewFrame, ObjectId, ObjectKind, PendingObject, Tree, TreeEntry};
use retrace::store::schema::{META, PACKS};
use retrace::store::{SnapshotRecord, Store};
use retrace::{RestoreError, RestoreOptions, StoreError};

#[test]
fn a_corrupt_object_is_detected_and_nothing_is_written() {
    let env = Env::new();
    // Over 64 KiB, so the blob has a frame of its own and the trees stay readable.
    let original_a = "the original content of a\n".repeat(4000);
    env.write("a.txt", &original_a);
    env.write("b.txt", "the original content of b");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    env.write("a.txt", "changed a");
    env.write("b.txt", "changed b");
    env.write("c.txt", "new c");
    ws.snapshot(None).unwrap();
    let a_id = ObjectId::of_blob(original_a.as_bytes());
    let rec = ws_record(&env, a_id);
    drop(ws);
    flip_byte(&env, rec);
    let ws = env.open();
    let err = ws
        .restore(&first.id, RestoreOptions::default())
        .unwrap_err();
    assert!(matches!(&err, RestoreError::Store(_)), "{err:?}");
    assert!(
        err.to_string().contains(&a_id.to_hex()),
        "names the object: {err}"
    );
    assert_eq!(env.read("a.txt"), "changed a");
    assert_eq!(
        env.read("b.txt"),
        "changed b",
        "nothing written, not even the intact file"
    );
    assert!(env.path("c.txt").exists(), "nothing deleted");
    let v = env.run(RETRACE_DUMP, &["verify"]);
    assert!(!v.status.success());
    assert!(stdout(&v).contains(&a_id.short()), "{}", stdout(&v));
}

fn ws_record(env: &Env, id: ObjectId) -> u64 {
    let store = Store::open_read_only(env.open().store_path()).unwrap();
    store.reader().unwrap().record(&id).unwrap().offset
}

#[test]
fn hostile_tree_entries_are_rejected_before_any_write() {
    for bad in [&b".."[..], b"a/b", b"x\0y", b"."] {
        let env = Env::new();
        env.write("keep.txt", "keep");
        let ws = env.open();
        ws.snapshot(None).unwrap();
        // Craft a tree naming `bad`, valid in every other way, and record it as a snapshot.
        let blob = b"pwned".to_vec();
        let blob_id = ObjectId::of_blob(&blob);
        let tree = Tree {
            entries: vec![TreeEntry {
                name: bad.to_vec(),
                kind: EntryKind::File,
                id: blob_id,
                size: 5,
            }],
        };
        let bytes = tree.encode();
        let tree_id = ObjectId::of_tree(&bytes);
        let store = Store::open(ws.store_path(), env.root()).unwrap();
        let tree_len = bytes.len() as u64;
        let frame = NewFrame::pack(&[
            PendingObject::whole(blob_id, ObjectKind::Blob, 5, blob),
            PendingObject::whole(tree_id, ObjectKind::Tree, tree_len, bytes),
        ]);
        let rec = SnapshotRecord {
            version: 1,
            root: tree_id,
            time_ms: 0,
            label: None,
            files: 1,
            bytes: 5,
        };
        store.write(vec![frame], Some(&rec), None).unwrap();
        let err = ws.restore(&tree_id, RestoreOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("unsafe entry name"),
            "{bad:?}: {err}"
        );
        assert_eq!(env.read("keep.txt"), "keep");
        assert_eq!(fs::read_dir(env.root()).unwrap().count(), 1);
    }
}

#[test]
fn a_store_of_a_future_format_is_set_aside_and_still_refused_when_read() {
    let env = Env::new();
    env.write("a", "a");
    env.open().snapshot(None).unwrap();
    {
        let db = open_raw(&env);
        let tx = db.begin_write().unwrap();
        tx.open_table(META)
            .unwrap()
            .insert("format", 99u32.to_le_bytes().as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    // Opening the workspace keeps the store aside and starts a fresh one, saying so.
    let ws =
        retrace::Workspace::open(env.root(), &retrace::Config::with_home(env.home.path())).unwrap();
    let warnings = ws.warnings();
    assert!(
        warnings.len() == 1
            && warnings[0].contains("format 99")
            && warnings[0].contains("invalid-"),
        "{warnings:?}"
    );
    drop(ws);
    // The kept file is never misread: opened directly, it is refused with a clear error.
    let dir =
        retrace::Workspace::locate_store(env.root(), &retrace::Config::with_home(env.home.path()))
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
    let kept = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".invalid-"))
        .expect("kept store");
    let err = retrace::store::Store::open_read_only(&kept)
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::UnknownFormat { found: 99, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade retrace"), "{err}");
}

#[test]
fn a_truncated_pack_log_is_reported_not_a_panic() {
    let env = Env::new();
    env.write("a.txt", "content");
    let ws = env.open();
    let snap = ws.snapshot(None).unwrap();
    drop(ws);
    {
        let db = open_raw(&env);
        let tx = db.begin_write().unwrap();
        {
            let mut packs = tx.open_table(PACKS).unwrap();
            let keys: Vec<u64> = packs
                .iter()
                .unwrap()
                .map(|r| r.unwrap().0.value())
                .collect();
            for k in keys {
                packs.insert(k, &b"short"[..]).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let ws = env.open();
    let err = ws.diff(&snap.id, None).unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
}

#[test]
fn a_corrupt_chunk_of_a_big_file_is_caught_before_any_write() {
    let env = Env::new();
    // 3 MiB, not compressible: several FastCDC chunks, each in a frame of its own.
    let mut big = vec![0u8; 3 << 20];
    let mut x = 1u32;
    for b in &mut big {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *b = (x >> 24) as u8;
    }
    env.write("big.bin", &big);
    env.write("small.txt", "original");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    env.write("big.bin", "replaced");
    env.write("small.txt", "changed");
    ws.snapshot(None).unwrap();
    let big_id = ObjectId::of_blob(&big);
    let chunk_offset = {
        let store = Store::open_read_only(ws.store_path()).unwrap();
        let reader = store.reader().unwrap();
        let chunks = reader.chunk_list(&big_id).unwrap().chunks;
        assert!(chunks.len() > 2, "the file is chunked");
        reader.record(&chunks[1].0).unwrap().offset
    };
    drop(ws);
    flip_byte(&env, chunk_offset);
    let ws = env.open();
    let err = ws
        .restore(&first.id, RestoreOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert_eq!(env.read("small.txt"), "changed", "nothing written");
    assert_eq!(env.read("big.bin"), "replaced");
    let leftovers: Vec<_> = fs::read_dir(env.root())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains("retrace-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn newest(env: &Env) -> ObjectId {
    env.open().log().unwrap()[0].root
}

#[test]
fn a_snapshot_that_reuses_a_damaged_copy_stores_the_good_bytes_and_restores() {
    let env = Env::new();
    // Over 64 KiB, so the blob has a frame of its own; keep.txt holds the same bytes.
    let original = "the original content of a\n".repeat(4000);
    env.write("a.txt", &original);
    env.write("keep.txt", &original);
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let first = newest(&env);
    let a_id = ObjectId::of_blob(original.as_bytes());
    flip_byte(&env, ws_record(&env, a_id));
    let statcache = env.open().store_path().with_file_name("statcache");
    fs::remove_file(&statcache).unwrap();
    // This capture reads every file and finds a's id stored: it checks the stored copy it
    // would reuse, finds it damaged, forgets it and stores the bytes it just read.
    let o = env.run(RETRACE, &["snapshot", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["new_objects"].as_u64().unwrap() >= 1, "{v}");
    let second = newest(&env);
    // The user changes the files: the snapshot that reported success restores, and so
    // does the first one (same content).
    env.write("a.txt", "changed a");
    env.write("keep.txt", "changed keep");
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    for id in [second, first] {
        let restored = env.run(RETRACE, &["restore", &id.to_hex(), "--force"]);
        assert!(restored.status.success(), "{}", stderr(&restored));
        assert_eq!(env.read("a.txt"), original);
        assert_eq!(env.read("keep.txt"), original);
    }
    let v = env.run(RETRACE_DUMP, &["verify"]);
    assert!(v.status.success(), "{}", stdout(&v));
}

#[test]
fn repair_forgets_every_damaged_object_and_lists_the_snapshots_that_stay_broken() {
    let env = Env::new();
    let kept = "still on disk\n".repeat(6000);
    let gone = "deleted from the disk\n".repeat(6000);
    env.write("a.txt", &kept);
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let whole = newest(&env);
    env.write("gone.txt", &gone);
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let broken = newest(&env);
    flip_byte(&env, ws_record(&env, ObjectId::of_blob(kept.as_bytes())));
    flip_byte(&env, ws_record(&env, ObjectId::of_blob(gone.as_bytes())));
    fs::remove_file(env.path("gone.txt")).unwrap();
    let out = env.run(RETRACE, &["repair", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(r["forgotten"].as_array().unwrap().len(), 2, "{r}");
    assert!(r["restored"].as_u64().unwrap() >= 1, "{r}");
    let listed: Vec<&str> = r["broken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [broken.to_hex()], "{r}");
    let text = env.run(RETRACE, &["repair"]);
    assert!(stdout(&text).contains(&broken.short()), "{}", stdout(&text));
    assert!(stdout(&text).contains("stay broken"), "{}", stdout(&text));
    // What the disk still held is whole again.
    env.write("a.txt", "edited");
    let restored = env.run(RETRACE, &["restore", "--force", &whole.to_hex()]);
    assert!(restored.status.success(), "{}", stderr(&restored));
    assert_eq!(env.read("a.txt"), kept);
}

/// The trees of every snapshot of a real session, packed by `retrace gc` into parity
/// frames: one flipped byte anywhere in any of those frames, in turn, loses no snapshot's
/// tree (each flip read the way retrace reads a frame); and a byte flipped in the store
/// itself is rebuilt on read, so the oldest snapshot restores and the store verifies.
#[test]
fn one_flipped_byte_in_any_tree_frame_loses_no_snapshot() {
    use retrace::object::record::{Codec, decompress};
    use std::collections::HashMap;
    let env = Env::new();
    let ws = env.open();
    let text = |i: usize, v: usize| format!("// file {i} version {v}\n").repeat(50 + i);
    for i in 0..12 {
        env.write(&format!("src/m{i:02}.rs"), text(i, 0));
        env.write(&format!("src/sub/s{i:02}.rs"), text(i + 12, 0));
    }
    let first = ws.snapshot(None).unwrap().id;
    for v in 1..=30 {
        env.write(&format!("src/m{:02}.rs", v % 12), text(v % 12, v));
        env.write(&format!("src/sub/s{:02}.rs", (v * 5) % 12), text(v, v));
        ws.snapshot(None).unwrap();
    }
    drop(ws);
    let o = env.run(RETRACE, &["gc", "--grace", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("packed "), "{}", stdout(&o));

    let store = Store::open_read_only(env.open().store_path()).unwrap();
    let reader = store.reader().unwrap();
    let roots: Vec<ObjectId> = reader.snapshots().unwrap().iter().map(|s| s.root).collect();
    assert!(roots.len() >= 31);
    // Every tree record, and the stored bytes of each parity frame.
    let mut records = HashMap::new();
    for (id, rec) in reader.objects().unwrap() {
        let rec = rec.unwrap();
        if rec.kind == ObjectKind::Tree {
            assert_eq!(rec.codec, Codec::ZstdParity, "every tree packed");
            records.insert(id, rec);
        }
    }
    drop(reader);
    drop(store);
    let frames = stored_frames(&env, records.values());
    // A snapshot's trees read as retrace reads them, with `damaged` standing in for the
    // frame at its offset; false when any tree is lost.
    let whole = |root: ObjectId, damaged: (u64, &[u8])| -> bool {
        let mut todo = vec![root];
        while let Some(id) = todo.pop() {
            let rec = &records[&id];
            let stored = if rec.offset == damaged.0 {
                damaged.1
            } else {
                &frames[&rec.offset]
            };
            let Ok(frame) = decompress(rec.codec, stored, rec.frame_len) else {
                return false;
            };
            let payload = &frame[rec.within as usize..(rec.within + rec.len) as usize];
            if ObjectId::of_tree(payload) != id {
                return false;
            }
            let tree = Tree::decode(payload).unwrap();
            todo.extend(
                tree.entries
                    .iter()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id),
            );
        }
        true
    };
    let mut flips = 0;
    for (offset, bytes) in &frames {
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x41;
            let lost = roots
                .iter()
                .filter(|r| !whole(**r, (*offset, &bad)))
                .count();
            assert_eq!(lost, 0, "byte {at} of the frame at {offset} flipped");
            flips += 1;
        }
    }
    assert!(flips > 1000, "{flips} bytes flipped");

    // In the store: the middle byte of the first tree frame.
    let (offset, bytes) = frames.iter().next().unwrap();
    flip_byte(&env, offset + bytes.len() as u64 / 2);
    let o = env.run(RETRACE, &["restore", &first.to_hex(), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(env.read("src/m05.rs"), text(5, 0));
    rebuilt_then_written_again(&env);
    let o = env.run(RETRACE, &["restore", &first.to_hex(), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The stored bytes of the frames `records` name, by offset, read from the pack log.
fn stored_frames<'a>(
    env: &Env,
    records: impl Iterator<Item = &'a retrace::object::ObjectRecord>,
) -> std::collections::BTreeMap<u64, Vec<u8>> {
    use redb::ReadableDatabase;
    use retrace::store::schema::PACK_BYTES;
    let db = open_raw(env);
    let tx = db.begin_read().unwrap();
    let packs = tx.open_table(PACKS).unwrap();
    // The pack log laid out at its offsets (freed packs as zeros).
    let mut log = Vec::new();
    for p in packs.iter().unwrap() {
        let (k, v) = p.unwrap();
        let at = usize::try_from(k.value() * PACK_BYTES).unwrap();
        log.resize(at, 0);
        log.extend_from_slice(v.value());
    }
    records
        .map(|r| {
            let at = usize::try_from(r.offset).unwrap();
            (r.offset, log[at..at + r.stored_len as usize].to_vec())
        })
        .collect()
}

/// Similar files edited again and again, each version after the first stored against the
/// first: `retrace gc` packs those first versions (roots) together into parity frames,
/// smaller than apart. One flipped byte anywhere in such a frame, in turn, loses no root
/// (so no version of any file); a byte flipped in the store itself is rebuilt on read, so
/// the oldest and newest snapshots restore, and `retrace repair` writes the frame again. A
/// version captured after the pass is stored against its root in the new frame.
#[test]
fn one_flipped_byte_in_a_frame_of_roots_loses_no_version() {
    use retrace::object::record::{Codec, decompress};
    let env = Env::new();
    let ws = env.open();
    // Six files just over 64 KiB (each in a frame of its own, as a capture writes big files;
    // together under the 512 KiB of a frame of roots)
    // sharing most of their lines.
    let text = |i: usize, v: usize| {
        let mut t = String::new();
        for k in 0..1800 {
            t.push_str(&format!("    let value_{k} = compute({k}, {});\n", k % 7));
            if k % 450 == i {
                t.push_str(&format!("    // file {i}, edited in version {v}\n"));
            }
        }
        t
    };
    for i in 0..6 {
        env.write(&format!("src/m{i}.rs"), text(i, 0));
    }
    let first = ws.snapshot(None).unwrap().id;
    for v in 1..=12 {
        env.write(&format!("src/m{}.rs", v % 6), text(v % 6, v));
        ws.snapshot(None).unwrap();
    }
    drop(ws);
    let o = env.run(RETRACE, &["gc", "--grace", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("packed 6 file versions"),
        "{}",
        stdout(&o)
    );

    let store = Store::open_read_only(env.open().store_path()).unwrap();
    let reader = store.reader().unwrap();
    let records: Vec<(ObjectId, retrace::object::ObjectRecord)> = reader
        .objects()
        .unwrap()
        .into_iter()
        .map(|(id, r)| (id, r.unwrap()))
        .filter(|(_, r)| r.kind == ObjectKind::Blob && r.codec == Codec::ZstdParity)
        .collect();
    drop(reader);
    drop(store);
    let ids: Vec<ObjectId> = (0..6)
        .map(|i| ObjectId::of_blob(text(i, 0).as_bytes()))
        .collect();
    assert_eq!(records.len(), 6, "every file's first version packed");
    assert!(records.iter().all(|(id, _)| ids.contains(id)));
    let frames = stored_frames(&env, records.iter().map(|(_, r)| r));
    assert_eq!(frames.len(), 1);
    let (offset, bytes) = frames.iter().next().unwrap();
    // Apart, the six frames held at least each file's own compressed size.
    assert!(bytes.len() < 2 * 6 * 1024, "{} bytes", bytes.len());
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x41;
        let frame = decompress(Codec::ZstdParity, &bad, records[0].1.frame_len)
            .unwrap_or_else(|e| panic!("byte {at} of the frame at {offset} flipped: {e}"));
        for (id, r) in &records {
            let payload = &frame[r.within as usize..(r.within + r.len) as usize];
            assert_eq!(ObjectId::of_blob(payload), *id, "byte {at} flipped");
        }
    }

    // A file edited back to its first version, then edited again: the new version is a
    // delta against its root in the parity frame (a shared frame of that size is no delta
    // base otherwise).
    let ws = env.open();
    env.write("src/m3.rs", text(3, 0));
    ws.snapshot(None).unwrap();
    env.write("src/m3.rs", text(3, 99));
    let last = ws.snapshot(None).unwrap().id;
    drop(ws);
    let store = Store::open_read_only(env.open().store_path()).unwrap();
    let rec = store
        .reader()
        .unwrap()
        .record(&ObjectId::of_blob(text(3, 99).as_bytes()))
        .unwrap();
    assert!(rec.delta.is_some_and(|d| d.base == ids[3]), "{rec:?}");
    drop(store);

    // In the store: the middle byte of the frame.
    flip_byte(&env, offset + bytes.len() as u64 / 2);
    for (snapshot, m3) in [(first, text(3, 0)), (last, text(3, 99))] {
        let o = env.run(RETRACE, &["restore", &snapshot.to_hex(), "--force"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(env.read("src/m3.rs"), m3);
    }
    rebuilt_then_written_again(&env);
}

/// After one byte of a parity frame was flipped in the store: `retrace-dump verify` reports
/// the frame rebuilt from its parity (the objects are whole, but a second damage would lose
/// them), `retrace repair` writes it again, and the store verifies clean.
fn rebuilt_then_written_again(env: &Env) {
    let o = env.run(RETRACE_DUMP, &["verify"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("rebuilt from its parity"),
        "{}",
        stdout(&o)
    );
    let o = env.run(RETRACE, &["repair"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("wrote again 1 frame(s)"),
        "{}",
        stdout(&o)
    );
    let o = env.run(RETRACE_DUMP, &["verify"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}
