//! A store that fails to open (truncated, garbage, failed checksums, a future format) is set
//! aside as `store.redb.invalid-<time>` and a fresh one is created, with a warning naming the
//! kept file: never overwritten, never a panic.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{Env, RETRACE, RETRACE_DUMP, assert_verified, is_root, stderr, stdout};
use retrace::{Config, Workspace};

/// A workspace with one snapshot; returns its store path and a copy of the good store.
fn with_store(env: &Env) -> (PathBuf, Vec<u8>) {
    env.write("a.txt", "hello");
    let o = env.run(RETRACE, &["snapshot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    let good = fs::read(&store).unwrap();
    (store, good)
}

fn kept_files(store: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(store.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("store.redb.invalid-"))
        .collect();
    out.sort();
    out
}

/// Damages the store with `damage`, then checks the next command quarantines it. A file
/// redb can open (a future format) may have been touched by opening it; one it cannot open
/// is kept byte for byte.
fn check(damage: impl FnOnce(&Path, &[u8]), byte_for_byte: bool) {
    let env = Env::new();
    let (store, good) = with_store(&env);
    damage(&store, &good);
    let damaged = fs::read(&store).unwrap();
    let o = env.run(RETRACE, &["snapshot"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning") && err.contains("invalid-") && err.contains("fresh store"),
        "{err}"
    );
    assert!(
        !err.contains("panicked"),
        "a damaged store must not panic: {err}"
    );
    let kept = kept_files(&store);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let kept_bytes = fs::read(&kept[0]).unwrap();
    if byte_for_byte {
        assert!(kept_bytes == damaged, "the damaged file is kept as it was");
    } else {
        assert!(
            kept_bytes.len() >= damaged.len() / 2,
            "the damaged file is kept"
        );
    }
    assert!(err.contains(&kept[0].display().to_string()), "{err}");
    // The fresh store works and is clean; a second run keeps it (no new quarantine).
    let o = env.run(RETRACE, &["log"]);
    assert!(
        o.status.success() && stdout(&o).contains(" file"),
        "{}",
        stdout(&o)
    );
    assert_verified(&env);
    assert_eq!(kept_files(&store).len(), 1);
}

#[test]
fn a_truncated_store_is_set_aside() {
    check(|store, good| fs::write(store, &good[..5000]).unwrap(), true);
}

#[test]
fn a_garbage_file_is_set_aside() {
    check(
        |store, good| {
            let garbage: Vec<u8> = (0..good.len()).map(|i| (i * 7 + 13) as u8).collect();
            fs::write(store, garbage).unwrap();
        },
        true,
    );
}

#[test]
fn a_store_with_failed_checksums_is_set_aside_without_a_panic() {
    check(
        |store, good| {
            let mut b = good.to_vec();
            for i in (4096..b.len()).step_by(997) {
                b[i] ^= 0xff;
            }
            fs::write(store, b).unwrap();
        },
        true,
    );
}

#[test]
fn a_store_of_a_future_format_is_set_aside() {
    check(
        |store, _| {
            let mut builder = redb::Database::builder();
            builder.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
            let db = builder.create(store).unwrap();
            let tx = db.begin_write().unwrap();
            {
                let mut meta = tx
                    .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                    .unwrap();
                meta.insert("format", 99u32.to_le_bytes().as_slice())
                    .unwrap();
            }
            tx.commit().unwrap();
        },
        false,
    );
}

#[test]
fn a_busy_store_is_not_mistaken_for_a_damaged_one() {
    let env = Env::new();
    let (store, _) = with_store(&env);
    // Another handle in this process holds it open: the library waits, it does not
    // quarantine. (Across processes redb's multi-writer mode shares the file.)
    let ws = env.open();
    let again = env.open();
    drop((ws, again));
    assert!(kept_files(&store).is_empty());
}

/// A store the user may not read is a permission problem, said as such with the path and
/// what to do; it is never called damaged, and never set aside.
#[test]
fn an_unreadable_store_is_a_permission_problem_not_damage() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("a.txt", "hello");
    // As root every file is readable: run as an unprivileged user instead.
    let as_user = |bin: &str, args: &[&str]| env.run_as_user(bin, args);
    if is_root() {
        for p in [env.root(), env.home.path(), &env.path("a.txt")] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o777)).unwrap();
        }
    }
    let o = as_user(RETRACE, &["snapshot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::set_permissions(&store, fs::Permissions::from_mode(0o000)).unwrap();
    for (bin, args) in [(RETRACE, &["status"][..]), (RETRACE_DUMP, &["verify"][..])] {
        let o = as_user(bin, args);
        assert!(!o.status.success(), "{bin} {args:?}");
        let said = stdout(&o) + &stderr(&o);
        assert!(said.contains("permission denied"), "{said}");
        assert!(said.contains(&store.display().to_string()), "{said}");
        assert!(said.contains("chmod u+rw"), "{said}");
        assert!(!said.contains("damaged"), "{said}");
    }
    fs::set_permissions(&store, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(kept_files(&store).is_empty(), "never set aside");
}

/// `retrace-dump` on a store path that holds a directory says so, instead of "no store".
#[test]
fn retrace_dump_names_a_directory_where_the_store_should_be() {
    let env = Env::new();
    let store = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(&store).unwrap();
    let root = env.root().display().to_string();
    let o = env.run(RETRACE_DUMP, &["-C", &root, "verify"]);
    assert!(!o.status.success());
    let said = stdout(&o) + &stderr(&o);
    assert!(said.contains("is a directory, not a store file"), "{said}");
    assert!(said.contains(&store.display().to_string()), "{said}");
    assert!(!said.contains("no store"), "{said}");
    // Named also when every store of the home is verified, not passed over.
    let o = env.run(RETRACE_DUMP, &["verify"]);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("is a directory"), "{}", stdout(&o));
    let o = env.run(
        RETRACE_DUMP,
        &["--store", &store.display().to_string(), "stats"],
    );
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
}

/// A store whose creating process has not committed its first transaction yet (a redb
/// file with no format recorded) is "being created" to `retrace-dump`, not damage.
#[test]
fn a_store_being_created_is_not_a_fault() {
    let env = Env::new();
    let store = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    fs::create_dir_all(store.parent().unwrap()).unwrap();
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    drop(b.create(&store).unwrap());
    let store_arg = store.display().to_string();
    let o = env.run(RETRACE_DUMP, &["--store", &store_arg, "verify"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("being created"), "{}", stdout(&o));
    let o = env.run(RETRACE_DUMP, &["--store", &store_arg, "stats"]);
    let said = stdout(&o) + &stderr(&o);
    assert!(said.contains("being created"), "{said}");
    assert!(!said.contains("format 0"), "{said}");
    // The next retrace command initialises it.
    env.write("a.txt", "hello");
    let o = env.run(RETRACE, &["snapshot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_verified(&env);
}

/// A workspace that cannot be used (missing, or one its store would lie inside) is
/// `Workspace::open`'s own `OpenError::Workspace`, not the umbrella error; the CLI still says
/// it in one line and exits 3 with `"result": "error"`.
#[test]
fn an_unusable_workspace_is_an_open_error_and_exits_3() {
    use retrace::OpenError;
    let env = Env::new();
    let missing = env.root().join("no-such-dir");
    let config = Config::with_home(env.home.path());
    let Err(err) = Workspace::open(&missing, &config) else {
        panic!("opened a missing directory");
    };
    assert!(
        matches!(&err, OpenError::Workspace { path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(!err.is_busy() && !retrace::Error::from(err).is_busy());
    assert!(matches!(
        Workspace::locate_store(&missing, &config),
        Err(OpenError::Workspace { .. })
    ));
    // A retrace home inside the workspace: its store would be snapshotted with it.
    let inside = env.root().join("home");
    fs::create_dir(&inside).unwrap();
    let Err(err) = Workspace::open(env.root(), &Config::with_home(&inside)) else {
        panic!("opened with the store inside the workspace");
    };
    assert!(matches!(err, OpenError::Workspace { .. }), "{err:?}");
    let o = env
        .command(RETRACE, &["snapshot", "--json"])
        .env("RETRACE_HOME", &inside)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["result"], "error", "{v}");
    assert_eq!(v["message"], err.to_string(), "{v}");
}
