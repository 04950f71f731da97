//! A full disk: a snapshot that cannot fit is refused before it writes, naming the store,
//! what it needs and what is free; a write that fills the disk anyway gives its pages back;
//! and `retrace gc` runs on a full disk.
//!
//! The logic is checked everywhere through an injected free-space figure
//! (`Config::free_space_probe`). The real thing needs a small filesystem: these tests mount
//! a 40 MB tmpfs, which needs root; where `mount` fails they say so and skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{self, Env, RETRACE, RETRACE_DUMP, stderr, stdout};
use retrace::store::disk_bytes;
use retrace::{CaptureError, Config, StoreError, Workspace};

fn random(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

/// A failed write left (almost) nothing in the store and gave its space back.
fn assert_given_back(fs: &Tmpfs, free_before: u64) {
    let store = disk_bytes(&fs.store());
    assert!(store < 1_000_000, "store still holds {store} bytes");
    assert!(
        fs.free() + 1_000_000 > free_before,
        "not given back: {} free, {free_before} before",
        fs.free()
    );
}

#[allow(clippy::unnecessary_wraps)] // the probe's signature
fn two_mb_free(_: &Path) -> std::io::Result<u64> {
    Ok(2_000_000)
}

#[test]
fn a_snapshot_that_cannot_fit_is_refused_before_anything_is_written() {
    let env = Env::new();
    env.write("big.bin", random(3_000_000, 1));
    env.write("small.txt", "small");
    let config = Config::with_home(env.home.path()).free_space_probe(two_mb_free);
    let ws = Workspace::open(env.root(), &config).unwrap();
    let err = ws.snapshot(None).unwrap_err();
    let CaptureError::Store(StoreError::NoSpace { path, needed, free }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(path, ws.store_path());
    assert!(needed.unwrap() > 3_000_000, "{needed:?}");
    assert_eq!(*free, 2_000_000);
    let message = err.to_string();
    assert!(
        message.contains("not enough disk space")
            && message.contains(&ws.store_path().display().to_string())
            && message.contains("2.0 MB free"),
        "{message}"
    );
    assert!(ws.log().unwrap().is_empty(), "no snapshot recorded");
    assert!(
        disk_bytes(ws.store_path()) < 1_000_000,
        "the store holds nothing of the file: {}",
        disk_bytes(ws.store_path())
    );
    drop(ws);
    // With room, the same workspace snapshots normally.
    let snap = env.open().snapshot(None).unwrap();
    assert_eq!(snap.files, 2);
    common::assert_verified(&env);
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mb: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs here ({}); the injected free-space test \
                     checks the logic",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount ({e})");
                None
            }
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn free(&self) -> u64 {
        retrace::store::free_space(self.dir.path()).unwrap()
    }

    /// Runs a binary with its workspace and home on this filesystem.
    fn run(&self, bin: &str, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .current_dir(self.path("ws"))
            .env("RETRACE_HOME", self.path("home"))
            .env("HOME", self.path("home"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .output()
            .unwrap()
    }

    /// A workspace of one 25 MB random file (and a small one) on this filesystem.
    fn workspace(&self) {
        std::fs::create_dir_all(self.path("ws")).unwrap();
        std::fs::create_dir_all(self.path("home")).unwrap();
        std::fs::write(self.path("ws/big.bin"), random(25_000_000, 2)).unwrap();
        std::fs::write(self.path("ws/small.txt"), "small").unwrap();
    }

    fn store(&self) -> PathBuf {
        Workspace::locate_store(&self.path("ws"), &Config::with_home(self.path("home"))).unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn on_a_full_tmpfs_a_snapshot_is_refused_cleanly_and_gc_and_verify_work() {
    let Some(fs) = Tmpfs::mount(40) else { return };
    fs.workspace();
    let free_before = fs.free();
    let out = fs.run(RETRACE, &["snapshot"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not enough disk space")
            && err.contains(&fs.store().display().to_string())
            && err.contains("free"),
        "{err}"
    );
    assert_given_back(&fs, free_before);
    let gc = fs.run(RETRACE, &["gc"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    let v = fs.run(RETRACE_DUMP, &["verify"]);
    assert!(v.status.success(), "{}", stdout(&v));
    // Once it fits, it is stored.
    std::fs::write(fs.path("ws/big.bin"), random(5_000_000, 3)).unwrap();
    let out = fs.run(RETRACE, &["snapshot"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[allow(clippy::unnecessary_wraps)] // the probe's signature
fn plenty_free(_: &Path) -> std::io::Result<u64> {
    Ok(u64::MAX)
}

#[test]
fn a_write_that_fills_the_disk_gives_its_pages_back() {
    let Some(fs) = Tmpfs::mount(40) else { return };
    fs.workspace();
    let free_before = fs.free();
    // The probe says there is room, so the write starts and the disk fills under it.
    let config = Config::with_home(fs.path("home")).free_space_probe(plenty_free);
    let ws = Workspace::open(&fs.path("ws"), &config).unwrap();
    let err = ws.snapshot(None).unwrap_err();
    assert!(
        matches!(
            &err,
            CaptureError::Store(StoreError::NoSpace { needed: None, .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("filled up"), "{err}");
    assert_given_back(&fs, free_before);
    // The same handle works on: the file was reopened.
    std::fs::write(fs.path("ws/big.bin"), random(5_000_000, 4)).unwrap();
    ws.snapshot(None).unwrap();
    drop(ws);
    let v = fs.run(RETRACE_DUMP, &["verify"]);
    assert!(v.status.success(), "{}", stdout(&v));
}

#[test]
fn gc_frees_what_a_failed_write_left_on_a_full_disk() {
    let Some(fs) = Tmpfs::mount(40) else { return };
    fs.workspace();
    std::fs::write(fs.path("ws/big.bin"), "now small").unwrap();
    assert!(fs.run(RETRACE, &["snapshot"]).status.success());
    // Another program's write fails on the full disk and leaves its pages in the file, as a
    // capture killed mid-write would.
    {
        let mut b = redb::Database::builder();
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        let db = b.open(fs.store()).unwrap();
        let junk = random(45_000_000, 5);
        let tx = db.begin_write().unwrap();
        let failed = {
            let def: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("junk");
            match tx.open_table(def) {
                Ok(mut t) => t.insert(1, junk.as_slice()).is_err(),
                Err(_) => true,
            }
        };
        assert!(failed || tx.commit().is_err(), "the disk was meant to fill");
    }
    assert!(fs.free() < 1_000_000, "full: {}", fs.free());
    let gc = fs.run(RETRACE, &["gc"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert!(fs.free() > 10_000_000, "gc gave space back: {}", fs.free());
    let v = fs.run(RETRACE_DUMP, &["verify"]);
    assert!(v.status.success(), "{}", stdout(&v));
    assert!(fs.run(RETRACE, &["snapshot"]).status.success());
}

#[test]
fn a_restore_that_cannot_fit_in_the_workspace_is_refused_before_anything_changes() {
    let env = Env::new();
    // Compressible: the store holds little, the restore writes 3 MB.
    env.write("big.txt", "a line of a big text file\n".repeat(120_000));
    env.write("small.txt", "v1");
    let config = Config::with_home(env.home.path()).free_space_probe(two_mb_free);
    let ws = Workspace::open(env.root(), &config).unwrap();
    let first = ws.snapshot(None).unwrap().id;
    std::fs::remove_file(env.path("big.txt")).unwrap();
    env.write("small.txt", "v2");
    env.write("other.txt", "only in the second");
    ws.snapshot(None).unwrap();
    let before = common::tree_of(env.root());
    let err = ws
        .restore(
            &first,
            retrace::RestoreOptions {
                force: true,
                dry_run: false,
            },
        )
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("not enough disk space in the workspace")
            && message.contains("nothing was changed"),
        "{message}"
    );
    assert_eq!(
        common::tree_of(env.root()),
        before,
        "nothing written or deleted"
    );
    drop(ws);
    // No interrupted restore is left behind: the next command reports none and works.
    let o = env.run(RETRACE, &["status"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stdout(&o).contains("interrupted") && !stderr(&o).contains("interrupted"),
        "{}",
        stdout(&o)
    );
}
