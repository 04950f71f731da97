//! Backward compatibility: a store written by retrace format 1 (the first release) stays
//! readable and restorable, and so does one of format 2 (delta objects); a format-1 store
//! takes deltas and becomes format 2, and maintenance makes any store format 3 (parity frames).
//! `tests/data/store-format-1.redb` was made by `retrace snapshot
//! --label golden` over the workspace that `golden_workspace` describes; never regenerate it
//! (a format change needs a new version and a new sample, and this test must keep passing).

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use crate::common::{Env, Node, tree_of};
use retrace::object::record::Codec;
use retrace::store::Store;
use retrace::{Config, ObjectId, RestoreOptions, Workspace};

const SNAPSHOT: &str = "c03a963bf47d87c58604ac60d05946c43348f0dd4143498554d7786fa17a5747";

fn golden_workspace(env: &Env) {
    env.write("src/main.rs", "fn main() {}\n");
    env.write("README.md", "# golden\n");
    env.write("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(env.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink("README.md", env.path("link")).unwrap();
    // Over 1 MiB: stored as a chunked blob.
    let big: String = (0..48_000)
        .map(|i| format!("line {} of a big text file\n", i % 5000))
        .collect();
    env.write("big.txt", big);
}

#[test]
fn a_format_1_store_is_read_and_restored_exactly() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-1.redb", &store_path).unwrap();

    let id = ObjectId::from_hex(SNAPSHOT).unwrap();
    {
        let store = Store::open_read_only(&store_path).unwrap();
        let reader = store.reader().unwrap();
        let log = reader.snapshots().unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].root, id);
        assert_eq!(log[0].label.as_deref(), Some("golden"));
        assert_eq!(log[0].files, 5);
    }

    // Restore it into an empty workspace and compare with the workspace it was made from.
    let ws = env.open();
    let out = ws
        .restore(
            &id,
            RestoreOptions {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
    assert!(out.verified, "{:?}", out.verify_diff);
    let restored = tree_of(env.root());
    let expected_env = Env::new();
    golden_workspace(&expected_env);
    assert_eq!(restored, tree_of(expected_env.root()));
    assert!(matches!(
        restored.get(std::path::Path::new("run.sh")),
        Some(Node::File { exec: true, .. })
    ));
    // And the same workspace captured today has the same id: the encodings did not drift.
    assert_eq!(expected_env.open().snapshot(None).unwrap().id, id);
}

/// `tests/data/store-format-1-history.redb` was made by this CLI sequence in a folder holding
/// `a.txt` ("alpha\n"), session `golden`: `turn begin --anchor u1 --prompt "add b"`, write
/// `b.txt` ("beta\n"), `turn end --anchor a1`, `turn begin --anchor a1 --prompt "drop a"`,
/// delete `a.txt`, `turn end --anchor a2`, `checkpoint "cp one"`, `undo`. Never regenerate it.
#[test]
fn format_1_history_records_are_read_and_replayed() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-1-history.redb", &store_path).unwrap();
    env.write("a.txt", "alpha\n");
    env.write("b.txt", "beta\n");
    let ws = env.open();
    let s = ws.session("golden");
    let st = s.status().unwrap();
    assert_eq!(st.session, "7a517a8a33a41eec");
    assert_eq!(
        (st.cursor, st.redo_turn),
        (Some(1), Some((2, retrace::Mode::Both)))
    );
    assert_eq!((st.turns, st.checkpoints), (2, 1));
    let log = s.log().unwrap();
    // Oldest first, as the sample was written (the log lists the newest first).
    let turns: Vec<_> = log
        .entries
        .iter()
        .rev()
        .filter(|e| e.kind == "turn")
        .collect();
    assert_eq!(turns[0].text.as_deref(), Some("add b"));
    assert_eq!(turns[0].anchor.as_deref(), Some("u1"));
    assert_eq!(turns[0].counts, [1, 0, 0]);
    assert_eq!(turns[1].leaf.as_deref(), Some("a2"));
    assert_eq!(turns[1].counts, [0, 0, 1]);
    // Redo the undone turn against the same disk: a.txt goes again.
    let o = s.redo().unwrap();
    assert_eq!(o.anchor(), Some("a2"), "{o:?}");
    assert!(!env.path("a.txt").exists());
    s.navigate("u1", retrace::Mode::Both).unwrap();
    assert_eq!(env.read("a.txt"), "alpha\n");
    assert!(!env.path("b.txt").exists());
    s.navigate("cp one", retrace::Mode::Both).unwrap();
    assert!(!env.path("a.txt").exists());
    assert_eq!(env.read("b.txt"), "beta\n");
}

/// The workspace of `tests/data/store-format-2.redb` at its snapshot `n` (1 to 3).
fn format_2_workspace(env: &Env, n: usize) {
    env.write("src/main.rs", "fn main() {}\n");
    env.write("README.md", "# golden\n");
    env.write("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(env.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let _ = fs::remove_file(env.path("link"));
    symlink("README.md", env.path("link")).unwrap();
    for name in ["alpha", "beta", "gamma", "delta"] {
        env.write(&format!("{name}.txt"), format!("{name}\n"));
    }
    let mut big: Vec<String> = (0..48_000)
        .map(|i| format!("line {} of a big text file", i % 5000))
        .collect();
    let mut lib: Vec<String> = (0..400)
        .map(|i| format!("pub fn item_{i}() -> u32 {{ {i} * 7 }}"))
        .collect();
    if n >= 2 {
        big[25_000] = "an edited line of the big file".into();
        lib[200] = "pub fn edited() -> u32 { 0 }".into();
        env.write("alpha.txt", "alpha two\n");
    }
    if n >= 3 {
        lib[300] = "pub fn edited_again() -> u32 { 1 }".into();
        env.write("beta.txt", "beta three\n");
    }
    env.write("big.txt", big.join("\n") + "\n");
    env.write("src/lib.rs", lib.join("\n") + "\n");
}

const FORMAT_2_SNAPSHOTS: [&str; 3] = [
    "80a724383ba8bd6c74a19b18f94b9fa48fb0691f025f3875baf8c9a0f2bd7f28",
    "d592e0f4e20fd586149198e510ea730436c2f19533a7ae30ac39dcd2f0c9775d",
    "1a452e51601e3fcd511990fb58cd0f4b9a773663ab4fd1aa133e1597b37231bd",
];

/// `tests/data/store-format-2.redb` was made by `retrace snapshot --label one`, `two` and
/// `three` over the states `format_2_workspace` describes (the first format-2 build,
/// 2026-12-01): `src/lib.rs` is a chain of two deltas, `big.txt`'s edited chunk and the root
/// trees are deltas. Never regenerate it.
#[test]
fn a_format_2_store_with_deltas_is_read_and_restored_exactly() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-2.redb", &store_path).unwrap();
    {
        let store = Store::open_read_only(&store_path).unwrap();
        let reader = store.reader().unwrap();
        let log = reader.snapshots().unwrap();
        let labels: Vec<_> = log.iter().map(|s| s.label.as_deref()).collect();
        assert_eq!(labels, [Some("one"), Some("two"), Some("three")]);
        let stats = reader.stats().unwrap();
        assert_eq!(stats.deltas, 5, "{stats:?}");
        assert_eq!(stats.depths.get(&2), Some(&2), "{stats:?}");
    }
    restores_every_format_2_state(&env);
    // The same states captured today have the same ids.
    for (n, hex) in FORMAT_2_SNAPSHOTS.iter().enumerate() {
        let expected = Env::new();
        format_2_workspace(&expected, n + 1);
        assert_eq!(expected.open().snapshot(None).unwrap().id.to_hex(), *hex);
    }
}

/// A format-1 store takes deltas: its first one makes it format 2, and both the old snapshot
/// and the new ones read back exactly.
#[test]
fn a_format_1_store_extended_with_deltas_reads_back_old_and_new() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-1.redb", &store_path).unwrap();
    golden_workspace(&env);
    let ws = env.open();
    assert_eq!(ws.snapshot(None).unwrap().id.to_hex(), SNAPSHOT);
    let big: String = (0..48_000)
        .map(|i| {
            if i == 20_000 {
                "an edited line\n".to_string()
            } else {
                format!("line {} of a big text file\n", i % 5000)
            }
        })
        .collect();
    env.write("big.txt", &big);
    let edited = ws.snapshot(Some("edited".into())).unwrap();
    assert!(edited.new_bytes < 4096, "{} bytes", edited.new_bytes);
    drop(ws);
    {
        let store = Store::open_read_only(&store_path).unwrap();
        let stats = store.reader().unwrap().stats().unwrap();
        assert!(stats.deltas >= 1, "{stats:?}");
    }
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    {
        use redb::ReadableDatabase;
        let db = b.open_read_only(&store_path).unwrap();
        let tx = db.begin_read().unwrap();
        let meta = tx.open_table(retrace::store::schema::META).unwrap();
        assert_eq!(
            meta.get("format").unwrap().unwrap().value(),
            2u32.to_le_bytes()
        );
    }
    let ws = env.open();
    let force = RestoreOptions {
        force: true,
        dry_run: false,
    };
    ws.restore(&ObjectId::from_hex(SNAPSHOT).unwrap(), force)
        .unwrap();
    let expected = Env::new();
    golden_workspace(&expected);
    assert!(tree_of(env.root()) == tree_of(expected.root()));
    ws.restore(&edited.id, force).unwrap();
    assert_eq!(env.read("big.txt"), big);
}

/// `meta.format` of the store at `path`, read with redb alone.
fn store_format(path: &std::path::Path) -> u32 {
    use redb::ReadableDatabase;
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    let db = b.open_read_only(path).unwrap();
    let tx = db.begin_read().unwrap();
    let meta = tx.open_table(retrace::store::schema::META).unwrap();
    u32::from_le_bytes(
        meta.get("format")
            .unwrap()
            .unwrap()
            .value()
            .try_into()
            .unwrap(),
    )
}

/// How many indexed objects lie in frames of `codec`.
fn in_frames_of(path: &std::path::Path, codec: retrace::object::record::Codec) -> usize {
    let store = Store::open_read_only(path).unwrap();
    let listed = store.reader().unwrap().objects().unwrap();
    listed
        .into_iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(|r| r.codec == codec))
        .count()
}

/// Restores each of the three `format_2_workspace` snapshots from the store of `env`, newest
/// first, and compares it with the state it was made from.
fn restores_every_format_2_state(env: &Env) {
    let ws = env.open();
    for (n, hex) in FORMAT_2_SNAPSHOTS.iter().enumerate().rev() {
        let force = RestoreOptions {
            force: true,
            dry_run: false,
        };
        let out = ws
            .restore(&ObjectId::from_hex(hex).unwrap(), force)
            .unwrap();
        assert!(out.verified, "{:?}", out.verify_diff);
        let expected = Env::new();
        format_2_workspace(&expected, n + 1);
        assert!(
            tree_of(env.root()) == tree_of(expected.root()),
            "snapshot {} differs",
            n + 1
        );
    }
}

/// `tests/data/store-format-3.redb` was made by `write_format_3_sample` (2026-12-07, the
/// first format-3 build): the three states of `format_2_workspace`, then a maintenance pass
/// that packed their trees into parity frames (and recompressed the rest). Never regenerate
/// it.
#[test]
fn a_format_3_store_with_parity_frames_is_read_and_restored_exactly() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-3.redb", &store_path).unwrap();
    assert_eq!(store_format(&store_path), 3);
    assert!(in_frames_of(&store_path, Codec::ZstdParity) >= 4);
    assert!(in_frames_of(&store_path, Codec::ZstdDense) >= 1);
    {
        let store = Store::open_read_only(&store_path).unwrap();
        let reader = store.reader().unwrap();
        let labels: Vec<_> = reader
            .snapshots()
            .unwrap()
            .into_iter()
            .map(|s| s.label)
            .collect();
        assert_eq!(
            labels,
            [Some("one".into()), Some("two".into()), Some("three".into())]
        );
        assert!(reader.stats().unwrap().deltas >= 2);
    }
    restores_every_format_2_state(&env);
}

/// A format-2 store's first maintenance pass packs its trees into parity frames and makes
/// it format 3; every snapshot still restores exactly, and a delta written after leaves it
/// format 3.
#[test]
fn a_format_2_store_becomes_format_3_at_its_first_maintenance_pass() {
    let env = Env::new();
    let store_path =
        Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store_path.parent().unwrap()).unwrap();
    fs::copy("tests/data/store-format-2.redb", &store_path).unwrap();
    let ws = env.open();
    ws.maintain(now_ms(), 0).unwrap();
    drop(ws);
    assert_eq!(store_format(&store_path), 3);
    assert!(in_frames_of(&store_path, Codec::ZstdParity) > 0);
    restores_every_format_2_state(&env);
    // A delta after: still format 3.
    let ws = env.open();
    let mut lib = env.read("src/lib.rs");
    lib.push_str("pub fn appended() {}\n");
    env.write("src/lib.rs", &lib);
    ws.snapshot(None).unwrap();
    drop(ws);
    assert_eq!(store_format(&store_path), 3);
}

/// Writes `tests/data/store-format-3.redb` (run once, by hand: `cargo test --release --test
/// main -- --ignored compat::write_format_3_sample`).
#[test]
#[ignore = "writes the format-3 sample; never regenerate it once committed"]
fn write_format_3_sample() {
    let env = Env::new();
    let ws = env.open();
    for (n, label) in ["one", "two", "three"].iter().enumerate() {
        format_2_workspace(&env, n + 1);
        let id = ws.snapshot(Some((*label).into())).unwrap().id;
        assert_eq!(id.to_hex(), FORMAT_2_SNAPSHOTS[n]);
    }
    ws.maintain(now_ms(), 0).unwrap();
    let path = ws.store_path().to_path_buf();
    drop(ws);
    assert_eq!(store_format(&path), 3);
    fs::copy(&path, "tests/data/store-format-3.redb").unwrap();
}

fn now_ms() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(d.as_millis()).unwrap()
}
