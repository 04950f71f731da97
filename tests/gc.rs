//! Garbage collection: unreferenced objects older than the grace period go, live and young
//! ones stay, mostly dead frames are rewritten, freed space is returned to the file system,
//! and a collection running beside captures in other processes never frees what they use.

use crate::common::{self, Env, RETRACE, assert_verified, noise, stderr, stdout};
use retrace::object::{NewFrame, ObjectKind, PendingObject};
use retrace::store::Store;
use retrace::{ObjectId, RestoreOptions};
use serde_json::Value;

/// Writes blobs that no snapshot refers to (as a capture killed before recording leaves).
fn orphans(ws: &retrace::Workspace, seeds: std::ops::Range<u64>, len: usize) -> Vec<ObjectId> {
    let store = Store::open(ws.store_path(), ws.root()).unwrap();
    let mut ids = Vec::new();
    let mut frames = Vec::new();
    for s in seeds {
        let data = noise(s, len);
        let id = ObjectId::of_blob(&data);
        ids.push(id);
        frames.push(NewFrame::pack(&[PendingObject::whole(
            id,
            ObjectKind::Blob,
            data.len() as u64,
            data,
        )]));
    }
    store.write(frames, None, None).unwrap();
    ids
}

fn gc(env: &Env, grace: &str) -> Value {
    let o = env.run(RETRACE, &["gc", "--grace", grace, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

#[test]
fn unreferenced_old_objects_go_and_everything_referenced_stays() {
    let env = Env::new();
    env.write("src/a.rs", "fn a() {}");
    env.write("big.bin", noise(1, 3 << 20)); // chunked: its chunks must survive too
    let ws = env.open();
    let snap = ws.snapshot(Some("keep me".into())).unwrap();
    let s = ws.session("s");
    let t = s.begin_turn(None, None).unwrap();
    t.wait_before(std::time::Duration::from_secs(60)).unwrap();
    env.write("src/b.rs", "fn b() {}");
    t.end(None).unwrap();
    let dead = orphans(&ws, 100..140, 256 * 1024);
    drop((s, ws));

    // Young: kept however unreferenced.
    let dry = gc(&env, "3600");
    assert_eq!(dry["objects_freed"], 0, "{dry}");
    assert_eq!(dry["young_kept"], 40, "{dry}");

    // A dry run reports without changing anything.
    let o = env.run(RETRACE, &["gc", "--grace", "0", "--dry-run", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["objects_freed"], 40, "{v}");
    let ws = env.open();
    assert!(dead.iter().all(|id| ws.working_copy().verify_object(id)));

    // Old enough: freed, with their space.
    let r = gc(&env, "0");
    assert_eq!(r["objects_freed"], 40, "{r}");
    assert!(
        r["stored_bytes_freed"].as_u64().unwrap() >= 40 * 256 * 1024,
        "{r}"
    );
    assert!(r["packs_freed"].as_u64().unwrap() > 100, "{r}");
    assert!(
        r["disk_bytes_after"].as_u64().unwrap() < r["disk_bytes_before"].as_u64().unwrap(),
        "compaction gives the space back: {r}"
    );
    assert!(dead.iter().all(|id| !ws.working_copy().verify_object(id)));
    assert_verified(&env);
    // Everything referenced still restores exactly.
    std::fs::remove_file(env.path("big.bin")).unwrap();
    ws.restore(
        &snap.id,
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read(env.path("big.bin")).unwrap(),
        noise(1, 3 << 20)
    );
    assert!(!env.path("src/b.rs").exists());
    // The restore brought a deleted file back (no unsaved work: no safety snapshot), so
    // the disk it found, stored for its journal, is referenced by nothing after it: at
    // most that tree goes; then a collection finds nothing.
    assert!(gc(&env, "0")["objects_freed"].as_u64().unwrap() <= 1);
    assert_eq!(gc(&env, "0")["objects_freed"], 0);
}

#[test]
fn a_mostly_dead_frame_is_rewritten_and_its_live_object_kept() {
    let env = Env::new();
    let ws = env.open();
    // One frame holding a small object a snapshot will use, and much that nothing uses.
    let store = Store::open(ws.store_path(), ws.root()).unwrap();
    let live = b"shared small file\n".to_vec();
    let live_id = ObjectId::of_blob(&live);
    let mut members = vec![PendingObject::whole(
        live_id,
        ObjectKind::Blob,
        live.len() as u64,
        live.clone(),
    )];
    for s in 0..20 {
        let d = noise(s, 2000);
        members.push(PendingObject::whole(
            ObjectId::of_blob(&d),
            ObjectKind::Blob,
            d.len() as u64,
            d,
        ));
    }
    store
        .write(vec![NewFrame::pack(&members)], None, None)
        .unwrap();
    drop(store);
    env.write("small.txt", &live);
    let snap = ws.snapshot(None).unwrap(); // finds the blob present: stores nothing new
    drop(ws);
    let r = gc(&env, "0");
    assert_eq!(r["objects_freed"], 20, "{r}");
    assert_eq!(r["frames_rewritten"], 1, "{r}");
    assert_verified(&env);
    let ws = env.open();
    std::fs::remove_file(env.path("small.txt")).unwrap();
    ws.restore(
        &snap.id,
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(std::fs::read(env.path("small.txt")).unwrap(), live);
}

#[test]
fn gc_beside_captures_in_other_processes_never_frees_what_they_use() {
    let env = std::sync::Arc::new(Env::new());
    for i in 0..200 {
        env.write(&format!("f{i}.txt"), format!("{i}"));
    }
    let ws = env.open();
    let writer = {
        let env = std::sync::Arc::clone(&env);
        std::thread::spawn(move || {
            for round in 0..30u64 {
                // The hardest case: the content is already stored, unreferenced and old
                // enough to collect. The capture finds it and stores nothing; only the
                // workspace lock stops a collection from removing it before the capture
                // records the snapshot that names it.
                let data = noise(1000 + round, 4096);
                orphans(&ws, 1000 + round..1001 + round, 4096);
                env.write(&format!("f{}.txt", round % 200), &data);
                let o = env.run(RETRACE, &["snapshot"]);
                assert!(o.status.success(), "{}", stderr(&o));
            }
        })
    };
    let (mut collections, mut freed) = (0, 0);
    while !writer.is_finished() {
        // (An orphan written while the collection waits for the lock is younger than the
        // collection's clock and kept: the safe side.)
        freed += gc(&env, "0")["objects_freed"].as_u64().unwrap();
        collections += 1;
    }
    writer.join().unwrap();
    assert!(
        collections > 0 && freed > 0,
        "{collections} collections freed {freed}"
    );
    assert_verified(&env);
    // Every snapshot still restores.
    let ws = env.open();
    common::restore_every_snapshot(&ws);
}

/// Source-like text: shared lines in varying order, so zstd finds redundancy across files.
fn text(seed: u64, lines: usize) -> String {
    let words = [
        "let", "value", "match", "Some", "None", "return", "self", "config", "path",
    ];
    (0..lines)
        .map(|i| {
            let n = seed.wrapping_mul(31).wrapping_add(i as u64 * 7);
            format!(
                "    {} {}_{} = {}({});\n",
                words[(n % 9) as usize],
                words[(n / 9 % 9) as usize],
                n % 97,
                words[(n / 81 % 9) as usize],
                i
            )
        })
        .collect()
}

/// Maintenance recompresses written frames at the dense level: smaller, every object still
/// reads back verified, restores still work, a second pass has nothing left, and a pass
/// that runs out of time leaves the rest for the next.
#[test]
fn frames_are_recompressed_densely_and_stay_readable() {
    let env = Env::new();
    for i in 0..1500 {
        env.write(&format!("src/m{i}.rs"), text(i, 200));
    }
    let ws = env.open();
    let snap = ws.snapshot(None).unwrap();
    let store = Store::open(ws.store_path(), ws.root()).unwrap();
    let before = store.reader().unwrap().packed_bytes().unwrap();
    // Out of time before the first frame: nothing done, more to do.
    let r = store.recompress(Some(std::time::Instant::now())).unwrap();
    assert!(!r.finished && r.frames == 0, "{r:?}");
    let r = store.recompress(None).unwrap();
    assert!(r.finished && r.frames > 0, "{r:?}");
    assert!(r.bytes_after < r.bytes_before, "{r:?}");
    let after = store.reader().unwrap().packed_bytes().unwrap();
    assert!(after < before, "packed bytes {before} -> {after}");
    assert_eq!(store.recompress(None).unwrap().frames, 0, "all dense now");
    drop(store);
    assert_verified(&env);
    // The files come back byte for byte from the dense frames.
    env.write("src/m7.rs", "changed");
    std::fs::remove_file(env.path("src/m8.rs")).unwrap();
    ws.snapshot(None).unwrap();
    ws.restore(&snap.id, RestoreOptions::default()).unwrap();
    assert_eq!(env.read("src/m7.rs"), text(7, 200));
    assert_eq!(env.read("src/m8.rs"), text(8, 200));
    // `retrace gc` recompresses what later captures wrote.
    env.write("src/new.rs", text(999, 300));
    ws.snapshot(None).unwrap();
    let report = gc(&env, "3600");
    let dense = &report["retention"]["dense"];
    assert!(dense["frames"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(dense["finished"], true, "{report}");
}

/// Background recompression holds the workspace shared, so captures in other processes run
/// beside it: nothing they store or find is lost, and every snapshot still restores.
#[test]
fn recompression_beside_captures_in_other_processes_loses_nothing() {
    let env = std::sync::Arc::new(Env::new());
    for i in 0..400 {
        env.write(&format!("src/m{i}.rs"), text(i, 100));
    }
    let ws = env.open();
    ws.snapshot(None).unwrap();
    let writer = {
        let env = std::sync::Arc::clone(&env);
        std::thread::spawn(move || {
            for round in 0..20u64 {
                for j in 0..20 {
                    env.write(
                        &format!("src/m{}.rs", (round * 20 + j) % 400),
                        text(10_000 + round * 20 + j, 100),
                    );
                }
                let o = env.run(RETRACE, &["snapshot"]);
                assert!(o.status.success(), "{}", stderr(&o));
            }
        })
    };
    let mut frames = 0;
    while !writer.is_finished() {
        if let Some(r) = ws.recompress_if_free(std::time::Duration::from_millis(50)) {
            frames += r.frames;
        }
    }
    writer.join().unwrap();
    frames += ws
        .recompress_if_free(std::time::Duration::from_secs(60))
        .unwrap()
        .frames;
    assert!(frames > 0);
    assert_verified(&env);
    common::restore_every_snapshot(&ws);
}

/// `retrace gc`'s text gives byte counts in binary units (`2.5 MiB`), as `--json` gives
/// the numbers.
#[test]
fn gc_reports_byte_counts_in_binary_units() {
    let env = Env::new();
    env.write("a.txt", "a");
    let ws = env.open();
    ws.snapshot(None).unwrap();
    orphans(&ws, 0..10, 256 * 1024);
    drop(ws);
    let o = env.run(RETRACE, &["gc", "--grace", "0"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let freed = out.lines().find(|l| l.starts_with("freed ")).unwrap();
    assert!(freed.contains(" MiB (10 of "), "{out}");
    assert!(out.contains(" on disk"), "{out}");
    assert!(!out.contains(" bytes"), "{out}");
}

/// Entries of the `staged` table (`retrace-dump stats`).
fn staged_rows(env: &Env) -> u64 {
    let o = env.run(common::RETRACE_DUMP, &["stats", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "staged")
        .map_or(0, |t| t["entries"].as_u64().unwrap())
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_capture_killed_after_staging_loses_nothing_and_gc_frees_what_it_staged() {
    let env = Env::new();
    // 40 MiB that does not compress: the capture writes two 16 MiB batches before its
    // snapshot, staged (appended to the pack log, indexed only by the final commit).
    for i in 0..40 {
        env.write(&format!("data/{i:02}.bin"), noise(i, 1 << 20));
    }
    env.write("src/main.rs", "fn main() {}\n");
    let killed = env
        .command(RETRACE, &["snapshot"])
        .env("RETRACE_FAULT_KILL_STAGED", "1")
        .output()
        .unwrap();
    assert!(!killed.status.success(), "the capture was to be killed");

    // The next capture (which repairs the store the kill left unclosed) stores everything
    // again, the dead one's objects being in no index, and indexes its own staged batches
    // in its snapshot's commit: only the dead capture's row is left.
    let id = common::snapshot_id(&env);
    assert_eq!(staged_rows(&env), 1, "the dead capture's row stays");
    assert_verified(&env);

    // Collection (no capture runs) drops the leftover row, and its packs go.
    let r = gc(&env, "3600");
    assert_eq!(staged_rows(&env), 0, "{r}");
    assert!(r["packs_freed"].as_u64().unwrap() >= 200, "{r}");
    assert_verified(&env);

    // The snapshot is whole: every file comes back byte for byte.
    let before = common::tree_of(env.root());
    std::fs::remove_dir_all(env.path("data")).unwrap();
    env.write("src/main.rs", "broken");
    let ws = env.open();
    ws.restore(
        &ObjectId::from_hex(&id).unwrap(),
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(common::tree_of(env.root()), before);
}

#[test]
fn packs_left_mostly_dead_have_their_live_frames_moved_and_go() {
    const PACK: u64 = retrace::store::schema::PACK_BYTES;
    let env = Env::new();
    let ws = env.open();
    // 240 small frames of one incompressible object each (about 4 packs); a snapshot keeps
    // one in 20, spread over every pack, and nothing keeps the rest.
    let ids = orphans(&ws, 0..240, 1000);
    for (i, s) in (0..240).step_by(20).enumerate() {
        env.write(&format!("kept/{i}.bin"), noise(s, 1000));
    }
    let snap = ws.snapshot(None).unwrap();
    let packed = |ws: &retrace::Workspace| {
        ws.working_copy()
            .store()
            .reader()
            .unwrap()
            .stats()
            .unwrap()
            .packed_bytes
    };
    let before = packed(&ws);
    assert!(before >= 3 * PACK, "{before}");
    drop(ws);
    let r = gc(&env, "0");
    assert_eq!(r["objects_freed"], 228, "{r}");
    assert!(r["packs_freed"].as_u64().unwrap() >= 3, "{r}");
    let ws = env.open();
    let after = packed(&ws);
    // What stays: the twelve kept objects, the snapshot's trees and the log's tail.
    assert!(after <= 2 * PACK, "{before} -> {after}");
    assert_verified(&env);
    std::fs::remove_dir_all(env.path("kept")).unwrap();
    ws.restore(
        &snap.id,
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    for (i, s) in (0..240).step_by(20).enumerate() {
        assert_eq!(
            std::fs::read(env.path(&format!("kept/{i}.bin"))).unwrap(),
            noise(s, 1000),
            "{i}"
        );
    }
    assert_eq!(ids.len(), 240);
    // A second collection has nothing left to move.
    drop(ws);
    let r = gc(&env, "0");
    assert_eq!(r["frames_rewritten"], 0, "{r}");
}
