//! Delta objects (issue 16): new versions of a file are stored as deltas against the version
//! they replace, and every version reads back byte for byte — through chains up to the cap,
//! after GC evicts half the snapshots, and with a damaged or missing base named in the error
//! and healed by the next capture that meets either version.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common::{self, Env, Node, assert_verified, tree_of};
use proptest::prelude::*;
use redb::ReadableDatabase;
use retrace::object::delta::MAX_DEPTH;
use retrace::object::{DeltaBase, ObjectRecord};
use retrace::store::schema::{META, OBJECTS, SNAPSHOTS};
use retrace::{ObjectId, RestoreOptions, Workspace};

const FORCE: RestoreOptions = RestoreOptions {
    force: true,
    dry_run: false,
};

/// Source-like text: `lines` lines from a seeded generator.
fn text(seed: u64, lines: usize) -> Vec<String> {
    let words = [
        "let", "value", "compute", "self", "return", "match", "Some", "None", "index", "store",
        "object", "tree", "delta", "base", "chain", "read", "write", "frame",
    ];
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize
    };
    (0..lines)
        .map(|i| {
            let n = 3 + next() % 8;
            let body: Vec<&str> = (0..n).map(|_| words[next() % words.len()]).collect();
            format!(
                "    {} = {}; // {i} {}\n",
                body.join("_"),
                next() % 100_000,
                next()
            )
        })
        .collect()
}

/// The record of the object at `path` in snapshot `root`.
fn record_at(ws: &Workspace, root: &ObjectId, path: &str) -> (ObjectId, ObjectRecord) {
    let reader = ws.working_copy().store().reader().unwrap();
    let mut tree = reader.read_tree(root).unwrap();
    let parts: Vec<&str> = path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let e = tree
            .entries
            .iter()
            .find(|e| e.name == part.as_bytes())
            .unwrap_or_else(|| panic!("{path}: no {part}"))
            .clone();
        if i + 1 == parts.len() {
            return (e.id, reader.record(&e.id).unwrap());
        }
        tree = reader.read_tree(&e.id).unwrap();
    }
    unreachable!()
}

fn depth(rec: &ObjectRecord) -> u8 {
    rec.delta.map_or(0, |d| d.depth)
}

fn store_format(ws: &Workspace) -> u32 {
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    let db = b.open_read_only(ws.store_path()).unwrap();
    let tx = db.begin_read().unwrap();
    let meta = tx.open_table(META).unwrap();
    let v = meta.get("format").unwrap().unwrap().value().to_vec();
    u32::from_le_bytes(v.try_into().unwrap())
}

#[test]
fn a_small_edit_is_stored_as_a_small_delta_and_reads_back() {
    let env = Env::new();
    let mut lines = text(1, 3000);
    env.write("src/lib.rs", lines.concat());
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    assert_eq!(
        store_format(&ws),
        1,
        "no delta yet: the store stays format 1"
    );
    lines[1500] = "    edited = 1;\n".into();
    env.write("src/lib.rs", lines.concat());
    let second = ws.snapshot(None).unwrap();
    let (old, _) = record_at(&ws, &first.id, "src/lib.rs");
    let (_, rec) = record_at(&ws, &second.id, "src/lib.rs");
    assert_eq!(
        rec.delta,
        Some(DeltaBase {
            base: old,
            depth: 1
        })
    );
    assert!(
        second.new_bytes < 1000,
        "a one-line edit of a {} byte file added {} bytes",
        second.bytes,
        second.new_bytes
    );
    assert_eq!(
        store_format(&ws),
        2,
        "the first delta makes the store format 2"
    );
    for (snap, want) in [(&first, text(1, 3000).concat()), (&second, lines.concat())] {
        ws.restore(&snap.id, FORCE).unwrap();
        assert_eq!(env.read("src/lib.rs"), want);
    }
    assert_verified(&env);
}

#[test]
fn a_rewritten_file_is_stored_whole_not_as_a_delta() {
    let env = Env::new();
    env.write("a.txt", text(1, 2000).concat());
    let ws = env.open();
    ws.snapshot(None).unwrap();
    env.write("a.txt", text(99, 2000).concat());
    let s = ws.snapshot(None).unwrap();
    let (_, rec) = record_at(&ws, &s.id, "a.txt");
    assert_eq!(rec.delta, None, "a delta of unrelated content does not pay");
}

#[test]
fn chains_stop_at_the_cap_and_start_again_from_their_root() {
    let env = Env::new();
    let ws = env.open();
    let mut lines = text(2, 2000);
    let mut versions = Vec::new();
    for v in 0..usize::from(MAX_DEPTH) + 3 {
        lines[(v * 37) % 2000] = format!("    version = {v};\n");
        env.write("f.rs", lines.concat());
        let cap = ws.snapshot(None).unwrap();
        let (id, rec) = record_at(&ws, &cap.id, "f.rs");
        versions.push((cap.id, id, rec, lines.concat()));
    }
    let depths: Vec<u8> = versions.iter().map(|v| depth(&v.2)).collect();
    let mut want: Vec<u8> = (0..=MAX_DEPTH).collect();
    want.extend([1, 2]);
    assert_eq!(depths, want);
    // At the cap, the next version is a delta against the chain's root (stored whole).
    let root = versions[0].1;
    let cap = usize::from(MAX_DEPTH);
    assert_eq!(versions[cap].2.delta.unwrap().base, versions[cap - 1].1);
    assert_eq!(versions[cap + 1].2.delta.unwrap().base, root);
    assert_eq!(versions[cap + 2].2.delta.unwrap().base, versions[cap + 1].1);
    // Every version reads back, the deepest included, from a fresh reader (no cache).
    for (snap, _, _, content) in versions.iter().rev() {
        ws.restore(snap, FORCE).unwrap();
        assert_eq!(&env.read("f.rs"), content);
    }
    assert_verified(&env);

    // Keep only versions 1 and 51, both deltas against the root: GC stores one of them
    // whole and re-bases the other on it, instead of storing both whole.
    let keep = [versions[1].0, versions[cap + 1].0];
    ws.restore(&keep[1], FORCE).unwrap();
    // The stat cache's snapshot is a GC root too: make it version 51's.
    assert_eq!(ws.snapshot(None).unwrap().id, keep[1]);
    drop(ws);
    keep_snapshots(&env, &keep);
    let ws = env.open();
    let report = ws.gc(0, false).unwrap();
    assert_eq!(report.materialised, 2, "{report:?}");
    let recs: Vec<ObjectRecord> = keep.iter().map(|s| record_at(&ws, s, "f.rs").1).collect();
    let whole: Vec<bool> = recs.iter().map(|r| r.delta.is_none()).collect();
    assert!(whole.contains(&true) && whole.contains(&false), "{recs:?}");
    for (i, r) in recs.iter().enumerate() {
        if let Some(d) = r.delta {
            assert_eq!(
                (d.base, d.depth),
                (record_at(&ws, &keep[1 - i], "f.rs").0, 1)
            );
        }
    }
    for (snap, i) in keep.iter().zip([1, cap + 1]) {
        ws.restore(snap, FORCE).unwrap();
        assert_eq!(env.read("f.rs"), versions[i].3);
    }
    assert_verified(&env);
}

/// Keeps only the snapshot-log rows of `roots`, behind retrace's back.
fn keep_snapshots(env: &Env, roots: &[ObjectId]) {
    let db = common::open_raw(env);
    let tx = db.begin_write().unwrap();
    tx.open_table(SNAPSHOTS)
        .unwrap()
        .retain(|_, v| {
            postcard::from_bytes::<retrace::store::SnapshotRecord>(v)
                .is_ok_and(|r| roots.contains(&r.root))
        })
        .unwrap();
    tx.commit().unwrap();
}

#[test]
fn a_big_files_changed_chunk_is_a_delta_against_the_chunk_it_replaced() {
    let env = Env::new();
    let mut lines = text(3, 60_000);
    env.write("big.txt", lines.concat());
    let ws = env.open();
    let first = ws.snapshot(None).unwrap();
    lines[30_000] = "    edited in the middle = 1;\n".into();
    env.write("big.txt", lines.concat());
    let second = ws.snapshot(None).unwrap();
    assert!(first.bytes > 2 << 20, "{} bytes: chunked", first.bytes);
    assert!(
        second.new_bytes < 4096,
        "a one-line edit of a chunked file added {} bytes",
        second.new_bytes
    );
    let reader = ws.working_copy().store().reader().unwrap();
    let (id, _) = record_at(&ws, &second.id, "big.txt");
    let deltas = reader
        .chunk_list(&id)
        .unwrap()
        .chunks
        .iter()
        .filter(|(c, _)| reader.record(c).unwrap().delta.is_some())
        .count();
    assert!(deltas >= 1, "the changed chunk is a delta");
    drop(reader);
    ws.restore(&first.id, FORCE).unwrap();
    assert_eq!(env.read("big.txt"), text(3, 60_000).concat());
    ws.restore(&second.id, FORCE).unwrap();
    assert_eq!(env.read("big.txt"), lines.concat());
}

/// Two versions of a file, the second a delta against the first; returns the snapshots and
/// the base's id.
fn two_versions(env: &Env) -> (ObjectId, ObjectId, ObjectId, String) {
    let mut lines = text(4, 3000);
    env.write("keep.txt", "unrelated\n");
    env.write("f.rs", lines.concat());
    let ws = env.open();
    let first = ws.snapshot(None).unwrap().id;
    lines[10] = "    changed = 2;\n".into();
    env.write("f.rs", lines.concat());
    let second = ws.snapshot(None).unwrap().id;
    let (base, _) = record_at(&ws, &first, "f.rs");
    let (_, rec) = record_at(&ws, &second, "f.rs");
    assert_eq!(rec.delta.map(|d| d.base), Some(base));
    (first, second, base, lines.concat())
}

#[test]
fn a_missing_base_is_named_and_the_next_capture_stores_the_file_again() {
    let env = Env::new();
    let (_, second, base, content) = two_versions(&env);
    {
        let db = common::open_raw(&env);
        let tx = db.begin_write().unwrap();
        tx.open_table(OBJECTS).unwrap().remove(&base.0).unwrap();
        tx.commit().unwrap();
    }
    let ws = env.open();
    env.write("f.rs", "something else\n");
    let err = ws.restore(&second, FORCE).unwrap_err().to_string();
    assert!(
        err.contains(&base.to_hex()) && err.contains("missing"),
        "the error names the missing base: {err}"
    );
    let o = env.run(common::RETRACE_DUMP, &["verify"]);
    assert!(
        !o.status.success() && common::stdout(&o).contains(&base.to_hex()[..12]),
        "verify reports the missing base: {}",
        common::stdout(&o)
    );
    // The file, back on disk, is stored again whole.
    heals_from_disk(&env, &ws, &second, &content);
}

/// With `content` back on disk, a capture stores it again and snapshot `second` restores.
fn heals_from_disk(env: &Env, ws: &Workspace, second: &ObjectId, content: &str) {
    env.write("f.rs", content);
    ws.snapshot(None).unwrap();
    env.write("f.rs", "something else\n");
    ws.restore(second, FORCE).unwrap();
    assert_eq!(env.read("f.rs"), content);
}

/// Flips a byte in the middle of object `id`'s frame, behind retrace's back.
fn damage(env: &Env, id: &ObjectId) {
    let offset = {
        let ws = env.open();
        let reader = ws.working_copy().store().reader().unwrap();
        let rec = reader.record(id).unwrap();
        rec.offset + u64::from(rec.stored_len) / 2
    };
    common::flip_byte(env, offset);
}

#[test]
fn a_damaged_base_is_named_and_forgotten_and_its_delta_heals_from_either_version() {
    for back_on_disk in ["the delta's version", "the base's version"] {
        let env = Env::new();
        let (first, second, base, content) = two_versions(&env);
        damage(&env, &base);
        let ws = env.open();
        env.write("f.rs", "something else\n");
        let err = ws.restore(&second, FORCE).unwrap_err().to_string();
        assert!(err.contains("damaged") || err.contains("corrupt"), "{err}");
        drop(ws);
        // Repair forgets the damaged base; the delta, sound itself, stays.
        let o = env.run(common::RETRACE, &["repair"]);
        let ws = env.open();
        let reader = ws.working_copy().store().reader().unwrap();
        let tree = reader.read_tree(&second).unwrap();
        let id = tree.entries.iter().find(|e| e.name == b"f.rs").unwrap().id;
        assert!(
            !reader.contains(&base).unwrap() && reader.contains(&id).unwrap(),
            "base forgotten, delta kept: {}{}",
            common::stdout(&o),
            common::stderr(&o)
        );
        drop(reader);
        if back_on_disk == "the delta's version" {
            // Its content is captured again, whole: the delta's record is replaced.
            heals_from_disk(&env, &ws, &second, &content);
        } else {
            // The base comes back from the disk: the delta reads again, although its own
            // version is on no disk.
            ws.restore(&first, FORCE).unwrap_err();
            env.write("f.rs", text(4, 3000).concat());
            ws.snapshot(None).unwrap();
            env.write("f.rs", "something else\n");
            ws.restore(&second, FORCE).unwrap();
            assert_eq!(env.read("f.rs"), content, "{back_on_disk}");
        }
    }
}

#[test]
fn gc_stores_a_live_delta_whole_when_its_base_goes_and_frees_the_chain() {
    let env = Env::new();
    let ws = env.open();
    let mut lines = text(5, 3000);
    let mut snaps = Vec::new();
    for v in 0..6 {
        lines[v * 100] = format!("    v = {v};\n");
        env.write("f.rs", lines.concat());
        snaps.push((ws.snapshot(None).unwrap().id, lines.concat()));
    }
    let (newest, rec) = record_at(&ws, &snaps[5].0, "f.rs");
    assert_eq!(depth(&rec), 5);
    drop(ws);
    // Only the newest snapshot stays in the log: the older versions of f.rs are garbage, but
    // the newest is a delta against them.
    {
        let db = common::open_raw(&env);
        let tx = db.begin_write().unwrap();
        tx.open_table(SNAPSHOTS)
            .unwrap()
            .retain(|k, _| k == 6)
            .unwrap();
        tx.commit().unwrap();
    }
    let ws = env.open();
    let report = ws.gc(0, false).unwrap();
    // Five older versions of f.rs and their trees go; f.rs is whole again (the root tree, of
    // one entry, is too small for deltas).
    assert!(report.objects_freed >= 10, "{report:?}");
    assert_eq!(report.materialised, 1, "{report:?}");
    let (id, rec) = record_at(&ws, &snaps[5].0, "f.rs");
    assert_eq!((id, rec.delta), (newest, None));
    env.write("f.rs", "x\n");
    ws.restore(&snaps[5].0, FORCE).unwrap();
    assert_eq!(env.read("f.rs"), snaps[5].1);
    // Every tree left is whole: nothing kept only as a base.
    assert_verified(&env);
}

/// One file's edit: (file index, what, where as a fraction of the file, how much).
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, u16, u16),
    Insert(usize, u16, u16),
    Delete(usize, u16, u16),
    Rewrite(usize, u16),
    Truncate(usize),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let f = 0..4usize;
    prop_oneof![
        4 => (f.clone(), any::<u16>(), 1..20u16).prop_map(|(f, at, n)| Edit::Replace(f, at, n)),
        2 => (f.clone(), any::<u16>(), 1..40u16).prop_map(|(f, at, n)| Edit::Insert(f, at, n)),
        2 => (f.clone(), any::<u16>(), 1..40u16).prop_map(|(f, at, n)| Edit::Delete(f, at, n)),
        1 => (f.clone(), any::<u16>()).prop_map(|(f, seed)| Edit::Rewrite(f, seed)),
        1 => f.clone().prop_map(Edit::Truncate),
        1 => f.prop_map(Edit::Remove),
    ]
}

fn apply(files: &mut [Option<Vec<String>>], e: &Edit, step: usize) {
    let at = |lines: &Vec<String>, frac: u16| lines.len() * usize::from(frac) / 65_536;
    match *e {
        Edit::Replace(f, frac, n) => {
            let lines = files[f].get_or_insert_with(|| text(f as u64, 500));
            let i = at(lines, frac);
            for k in i..(i + usize::from(n)).min(lines.len()) {
                lines[k] = format!("    replaced_{step}_{k} = {k};\n");
            }
        }
        Edit::Insert(f, frac, n) => {
            let lines = files[f].get_or_insert_with(|| text(f as u64, 500));
            let i = at(lines, frac);
            let new = text((step * 31) as u64, usize::from(n));
            lines.splice(i..i, new);
        }
        Edit::Delete(f, frac, n) => {
            let lines = files[f].get_or_insert_with(|| text(f as u64, 500));
            let i = at(lines, frac);
            let end = (i + usize::from(n)).min(lines.len());
            lines.drain(i..end);
        }
        Edit::Rewrite(f, seed) => {
            files[f] = Some(text(u64::from(seed) + 1000, 400 + usize::from(seed % 4000)))
        }
        Edit::Truncate(f) => files[f] = Some(vec!["short\n".into()]),
        Edit::Remove(f) => files[f] = None,
    }
}

fn write_all(env: &Env, files: &[Option<Vec<String>>]) {
    for (i, f) in files.iter().enumerate() {
        let path = format!("d{}/file{i}.rs", i % 2);
        match f {
            Some(lines) => env.write(&path, lines.concat()),
            None => {
                let _ = std::fs::remove_file(env.path(&path));
            }
        }
    }
}

fn restores_exactly(ws: &Workspace, env: &Env, snaps: &[(ObjectId, BTreeMap<PathBuf, Node>)]) {
    for (id, want) in snaps {
        ws.restore(id, FORCE).unwrap();
        assert!(tree_of(env.root()) == *want, "snapshot {id} differs");
    }
}

proptest! {
    // 12 cases in CI; PROPTEST_CASES=500 for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12),
        failure_persistence: common::regressions_beside_the_source(),
        ..ProptestConfig::default()
    })]

    /// Random edit sequences on four files, a capture after each; then every snapshot is
    /// restored byte for byte, again after GC evicts half of them (their objects freed but
    /// the bases of live deltas kept), and again after more edits on top.
    #[test]
    fn every_version_restores_exactly_before_and_after_gc(
        edits in prop::collection::vec(edit(), 1..24),
        more in prop::collection::vec(edit(), 1..6),
    ) {
        let env = Env::new();
        let mut files: Vec<Option<Vec<String>>> =
            (0..4).map(|i| Some(text(i, 300 + 900 * i as usize))).collect();
        write_all(&env, &files);
        let ws = env.open();
        let mut snaps = vec![(ws.snapshot(None).unwrap().id, tree_of(env.root()))];
        for (step, e) in edits.iter().enumerate() {
            apply(&mut files, e, step);
            write_all(&env, &files);
            snaps.push((ws.snapshot(None).unwrap().id, tree_of(env.root())));
        }
        restores_exactly(&ws, &env, &snaps);
        drop(ws);
        // Evict every other snapshot (oldest first) from the log, then collect.
        {
            let db = common::open_raw(&env);
            let tx = db.begin_write().unwrap();
            tx.open_table(SNAPSHOTS).unwrap().retain(|k, _| k % 2 == 0).unwrap();
            tx.commit().unwrap();
        }
        let ws = env.open();
        let kept: std::collections::HashSet<ObjectId> =
            ws.log().unwrap().iter().map(|s| s.root).collect();
        ws.gc(0, false).unwrap();
        let live: Vec<_> = snaps.iter().filter(|(id, _)| kept.contains(id)).cloned().collect();
        restores_exactly(&ws, &env, &live);
        assert_verified(&env);
        let mut snaps = live;
        for (step, e) in more.iter().enumerate() {
            apply(&mut files, e, 1000 + step);
            write_all(&env, &files);
            snaps.push((ws.snapshot(None).unwrap().id, tree_of(env.root())));
        }
        ws.gc(0, false).unwrap();
        restores_exactly(&ws, &env, &snaps);
        assert_verified(&env);
    }
}

/// Ten versions of `f.rs` (each one line more edited), a snapshot of each.
fn ten_versions(env: &Env, ws: &Workspace) -> Vec<(ObjectId, String)> {
    let mut lines = text(6, 3000);
    let mut snaps = Vec::new();
    for v in 0..10 {
        lines[v * 200] = format!("    version = {v};\n");
        env.write("f.rs", lines.concat());
        snaps.push((ws.snapshot(None).unwrap().id, lines.concat()));
    }
    snaps
}

#[test]
fn thinning_a_chain_re_bases_the_survivors_instead_of_storing_them_whole() {
    let env = Env::new();
    let ws = env.open();
    let snaps = ten_versions(&env, &ws);
    let packed = |ws: &Workspace| {
        ws.working_copy()
            .store()
            .reader()
            .unwrap()
            .stats()
            .unwrap()
            .payload_bytes
    };
    let before = packed(&ws);
    drop(ws);
    let keep: Vec<ObjectId> = snaps.iter().step_by(2).map(|s| s.0).collect();
    keep_snapshots(&env, &keep);
    let ws = env.open();
    let report = ws.gc(0, false).unwrap();
    // Versions 2, 4, 6 and 8 lost their base; each is re-based on the version before it.
    assert_eq!(report.materialised, 4, "{report:?}");
    for (i, s) in snaps.iter().enumerate().step_by(2).skip(1) {
        let (_, rec) = record_at(&ws, &s.0, "f.rs");
        let prev = record_at(&ws, &snaps[i - 2].0, "f.rs").0;
        assert_eq!(rec.delta.map(|d| d.base), Some(prev), "version {i}");
    }
    assert!(packed(&ws) <= before, "{} > {before}", packed(&ws));
    for (id, content) in snaps.iter().step_by(2) {
        ws.restore(id, FORCE).unwrap();
        assert_eq!(&env.read("f.rs"), content);
    }
    assert_verified(&env);
}

#[test]
fn a_delta_whose_base_is_young_is_left_alone() {
    let env = Env::new();
    let ws = env.open();
    let snaps = ten_versions(&env, &ws);
    drop(ws);
    keep_snapshots(&env, &[snaps[9].0]);
    let ws = env.open();
    // Everything was written just now: the old versions are young and stay, bases included.
    let report = ws.gc(3600, false).unwrap();
    assert_eq!(
        (report.materialised, report.objects_freed),
        (0, 0),
        "{report:?}"
    );
    let (_, rec) = record_at(&ws, &snaps[9].0, "f.rs");
    assert_eq!(rec.delta.map(|d| d.depth), Some(9));
}

#[test]
fn a_damaged_tree_costs_its_snapshot_only() {
    let env = Env::new();
    let ws = env.open();
    let snaps = ten_versions(&env, &ws);
    let tree = snaps[2].0;
    assert_eq!(
        ws.working_copy()
            .store()
            .reader()
            .unwrap()
            .record(&tree)
            .unwrap()
            .delta,
        None,
        "trees are stored whole"
    );
    drop(ws);
    damage(&env, &tree);
    env.run(common::RETRACE, &["repair"]);
    let ws = env.open();
    let restorable: Vec<bool> = snaps
        .iter()
        .map(|(id, content)| {
            env.write("f.rs", "x\n");
            ws.restore(id, FORCE).is_ok() && env.read("f.rs") == *content
        })
        .collect();
    let mut want = vec![true; 10];
    want[2] = false;
    assert_eq!(restorable, want);
}

#[test]
fn a_base_stored_again_after_repair_revives_every_version_that_depends_on_it() {
    // 30 versions of a 200 KB random file, each changing 16 bytes: a chain of deltas on the
    // first. Version 0 is damaged and forgotten by repair, then comes back from the disk.
    let env = Env::new();
    let mut data = common::noise(7, 200_000);
    let mut versions = Vec::new();
    let ws = env.open();
    for v in 0..30u64 {
        if v > 0 {
            let at = (v as usize * 6151) % (data.len() - 16);
            data[at..at + 16].copy_from_slice(&common::noise(100 + v, 16));
        }
        std::fs::write(env.path("r.bin"), &data).unwrap();
        versions.push((ws.snapshot(None).unwrap().id, data.clone()));
    }
    let (v0, _) = record_at(&ws, &versions[0].0, "r.bin");
    for (root, _) in &versions[1..] {
        assert!(record_at(&ws, root, "r.bin").1.delta.is_some(), "chained");
    }
    drop(ws);
    damage(&env, &v0);
    let o = env.run(common::RETRACE, &["repair"]);
    assert!(
        common::stdout(&o).contains("forgotten") || common::stderr(&o).contains("forgotten"),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    // Version 0's content back on disk, captured.
    std::fs::write(env.path("r.bin"), &versions[0].1).unwrap();
    let o = env.run(common::RETRACE, &["snapshot"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let o = env.run(common::RETRACE, &["repair"]);
    assert!(
        o.status.success(),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    // Every version reads again.
    let ws = env.open();
    for (i, (root, bytes)) in versions.iter().enumerate() {
        ws.restore(root, FORCE)
            .unwrap_or_else(|e| panic!("version {i}: {e}"));
        assert!(
            std::fs::read(env.path("r.bin")).unwrap() == *bytes,
            "version {i}"
        );
    }
    drop(ws);
    assert_verified(&env);
}
