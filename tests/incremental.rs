//! Captures that reuse the stat cache (unchanged files not read, unchanged directories not
//! rebuilt) must give exactly the snapshot a capture from scratch gives.
//!
//! Time is injected by editing the cache's `written_ns` header field (docs/format.md): moving
//! it an hour ahead makes every entry settled, as if the capture had happened long ago, with
//! no sleeping. Mutations always change a file's size, so they can never share an entry's
//! `lstat` data (that case is the racy-timestamp rule's, tested in `racy.rs`).

use std::fs;
use std::path::Path;

use crate::common::{self, Env};

#[test]
fn a_flipped_bit_in_the_stat_cache_is_caught_and_the_cache_rebuilt() {
    let env = Env::new();
    env.write("src/a.txt", "alpha\n");
    env.write("src/b.txt", "beta\n");
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    common::age_statcache(&env); // every entry is trusted from now on
    // One bit of a.txt's cached id flips behind retrace's back.
    let a_id = retrace::ObjectId::of_blob(b"alpha\n");
    let mut bytes = fs::read(common::statcache(&env)).unwrap();
    let at = bytes
        .windows(32)
        .position(|w| w == a_id.0)
        .expect("a.txt's id");
    bytes[at] ^= 1;
    fs::write(common::statcache(&env), &bytes).unwrap();
    assert!(ws.status().unwrap().changed.is_empty());
    // b.txt changes: its directory's tree is rebuilt, around a.txt's cached id.
    env.write("src/b.txt", "beta, longer\n");
    let second = ws.snapshot(None).unwrap();
    assert_eq!(second.hashed, 2, "the damaged cache was not trusted");
    let a = second
        .entries()
        .iter()
        .find(|e| e.path == b"src/a.txt")
        .unwrap();
    assert_eq!(a.id, a_id, "the snapshot names a.txt's real content");
    ws.restore(&first.id, retrace::RestoreOptions::default())
        .unwrap();
    ws.restore(&second.id, retrace::RestoreOptions::default())
        .unwrap();
    assert_eq!(env.read("src/a.txt"), "alpha\n");
    assert_eq!(env.read("src/b.txt"), "beta, longer\n");
    // The rebuilt cache is whole again: an unchanged workspace reads nothing.
    ws.snapshot(None).unwrap(); // restored files are new inodes
    common::age_statcache(&env);
    assert_eq!(ws.snapshot(None).unwrap().hashed, 0);
    common::assert_verified(&env);
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn rel(i: u64) -> String {
    format!("d{}/e{}/f{i}.txt", i % 5, i % 3)
}

fn mutate(root: &Path, rng: &mut Lcg, round: u64) {
    for _ in 0..1 + rng.next(6) {
        let i = rng.next(60);
        let p = root.join(rel(i));
        match rng.next(5) {
            0 => {
                let _ = fs::remove_file(&p);
            }
            1 => {
                let _ = fs::remove_dir_all(root.join(format!("d{}", i % 5)));
            }
            2 => {
                fs::create_dir_all(root.join(format!("empty{round}/x"))).unwrap();
            }
            _ => {
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                // Grows the file: its size, hence its lstat data, always changes.
                let mut data = fs::read(&p).unwrap_or_default();
                data.extend_from_slice(format!("round {round} file {i}\n").as_bytes());
                fs::write(&p, data).unwrap();
            }
        }
    }
}

#[test]
fn incremental_captures_equal_captures_from_scratch() {
    let env = Env::new();
    for i in 0..60 {
        env.write(&rel(i), format!("file {i}\n"));
    }
    std::os::unix::fs::symlink("d0", env.path("link")).unwrap();
    let ws = env.open();
    let mut rng = Lcg(7);
    let first = ws.snapshot(None).unwrap();
    common::age_statcache(&env);
    let again = ws.snapshot(None).unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(again.hashed, 0, "an unchanged workspace reads no file");
    let mut history = vec![(first.id, common::tree_of(env.root()))];
    for round in 0..40 {
        common::age_statcache(&env);
        mutate(env.root(), &mut rng, round);
        let incremental = ws.snapshot(None).unwrap();
        assert!(
            incremental.hashed <= 8,
            "round {round}: read {} files",
            incremental.hashed
        );
        fs::remove_file(common::statcache(&env)).unwrap();
        let scratch = ws.working_copy().scan_disk(&retrace::NoProgress).unwrap();
        assert_eq!(incremental.id, scratch.id, "round {round}");
        assert_eq!(incremental.entries(), scratch.entries(), "round {round}");
        // Rebuild the cache for the next round from this state.
        ws.snapshot(None).unwrap();
        history.push((incremental.id, common::tree_of(env.root())));
        // Now and then, go back to an earlier state with an aged cache: the restore compares
        // the disk's directory ids (taken from the cache) with the target's to skip
        // unchanged subtrees, so wrong ids would show up here as a wrong tree.
        if rng.next(3) == 0 {
            let (id, tree) = &history[usize::try_from(rng.next(history.len() as u64)).unwrap()];
            common::age_statcache(&env);
            let out = ws.restore(id, retrace::RestoreOptions::default()).unwrap();
            assert!(out.verified, "round {round}: {:?}", out.verify_diff);
            assert_eq!(&common::tree_of(env.root()), tree, "round {round}");
            // Restored files are new inodes: they can never match the aged entries.
            ws.snapshot(None).unwrap();
        }
    }
    common::assert_verified(&env);
}

/// A directory whose listing is reused and whose files all match their records is clean:
/// the walk leaves its files out and the stat cache's records stand for them. The summary
/// a `retrace snapshot` asks for, the full list, and the trees of a clean directory rebuilt
/// around a changed subdirectory must all be what a capture from scratch gives.
#[test]
fn clean_directories_give_the_snapshot_a_capture_from_scratch_gives() {
    let env = Env::new();
    for i in 0..5 {
        env.write(&format!("src/a/f{i}.txt"), format!("file {i}\n"));
    }
    env.write("src/a/deep/z.txt", "zed\n");
    env.write("src/b/x.txt", "ex\n");
    env.write("tools/run.sh", "#!/bin/sh\n");
    let mode: fs::Permissions = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    fs::set_permissions(env.root().join("tools/run.sh"), mode).unwrap();
    std::os::unix::fs::symlink("../src/b/x.txt", env.root().join("tools/link")).unwrap();
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    common::age_statcache(&env);
    let summary = ws.snapshot_summary(None, &retrace::NoProgress).unwrap();
    assert!(summary.entries().is_empty(), "a summary lists no paths");
    assert_eq!(
        (summary.id, summary.files, summary.bytes, summary.hashed),
        (first.id, first.files, first.bytes, 0)
    );
    assert!(summary.reused > 0, "the listings were reused");
    common::age_statcache(&env);
    let full = ws.snapshot(None).unwrap();
    assert_eq!(
        full.entries(),
        first.entries(),
        "the records stood for the files"
    );
    // A change below a clean directory: `src/a` keeps its five files clean while its tree is
    // rebuilt around `deep/`.
    common::age_statcache(&env);
    env.write("src/a/deep/z.txt", "zed, longer\n");
    let changed = ws.snapshot(None).unwrap();
    assert_eq!(changed.hashed, 1);
    fs::remove_file(common::statcache(&env)).unwrap();
    let scratch = ws.snapshot(None).unwrap();
    assert_eq!(changed.id, scratch.id);
    assert_eq!(changed.entries(), scratch.entries());
    assert_eq!(
        (changed.files, changed.bytes),
        (scratch.files, scratch.bytes)
    );
    common::assert_verified(&env);
}
