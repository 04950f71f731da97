//! Property test of the walk's reused listings: random trees are mutated (files and
//! directories created, deleted, renamed, replaced by the other kind; `.gitignore` files
//! created, edited and deleted; modes changed; symlinks swapped; nested repositories and
//! credentials appearing, by name and by content), and after each batch an incremental capture (the stat cache of
//! the previous one, listings reused) must give exactly what a capture from scratch gives:
//! the same root id, the same paths left out, the same credentials named.
//!
//! Time is injected as in `incremental.rs` (`common::age_statcache`): the cache is aged an hour after each capture, so
//! every listing it recorded is trusted. A capture then sleeps 30 ms before mutating, so no
//! mutation lands in the clock tick of the listing it invalidates (that case is the racy
//! rule's, which the aging sets aside on purpose). 250 cases by default (a few seconds of
//! CI); `LISTING_MODEL_CASES` sets another number (`=5000` for a longer hunt).

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

use crate::common::{self, Env};

pub const DIRS: &[&str] = &["a", "b", "a/c", "b/d", "a/c/e", "n"];
pub const FILES: &[&str] = &["x", "y.txt", "k.log", ".env", "z.rs"];
const PATTERNS: &[&str] = &[
    "*.log", "x", "d/", "!k.log", "/y.txt", "c", "e/", "*.rs", "!x",
];

#[derive(Clone, Debug)]
pub enum Op {
    /// Writes a file of `len` bytes of `fill` (creating its directory).
    Write {
        dir: usize,
        file: usize,
        fill: u8,
        len: usize,
    },
    Delete {
        dir: usize,
        file: usize,
    },
    Rename {
        from: (usize, usize),
        to: (usize, usize),
    },
    MkDir {
        dir: usize,
    },
    RemoveDir {
        dir: usize,
    },
    RenameDir {
        from: usize,
        to: usize,
    },
    /// The file's path becomes a directory holding a file, or the directory's a file.
    Replace {
        dir: usize,
        file: usize,
    },
    ReplaceDir {
        dir: usize,
    },
    Gitignore {
        dir: usize,
        patterns: Vec<usize>,
    },
    RemoveGitignore {
        dir: usize,
    },
    Chmod {
        dir: usize,
        file: usize,
        exec: bool,
    },
    Symlink {
        dir: usize,
        file: usize,
        target: usize,
    },
    /// A `.git` appears in the directory (a nested repository), or goes.
    NestedRepo {
        dir: usize,
        on: bool,
    },
    /// The file is rewritten with the same length (a new mtime, the same size).
    Touch {
        dir: usize,
        file: usize,
    },
    /// The file's content becomes a private key (left out by capture, not by the walk), or
    /// stops being one.
    Key {
        dir: usize,
        file: usize,
        on: bool,
    },
}

pub fn op() -> impl Strategy<Value = Op> {
    let d = 0..DIRS.len();
    let f = 0..FILES.len();
    prop_oneof![
        4 => (d.clone(), f.clone(), any::<u8>(), 0usize..40)
            .prop_map(|(dir, file, fill, len)| Op::Write { dir, file, fill, len }),
        2 => (d.clone(), f.clone()).prop_map(|(dir, file)| Op::Delete { dir, file }),
        2 => ((d.clone(), f.clone()), (d.clone(), f.clone()))
            .prop_map(|(from, to)| Op::Rename { from, to }),
        1 => d.clone().prop_map(|dir| Op::MkDir { dir }),
        1 => d.clone().prop_map(|dir| Op::RemoveDir { dir }),
        1 => (d.clone(), d.clone()).prop_map(|(from, to)| Op::RenameDir { from, to }),
        1 => (d.clone(), f.clone()).prop_map(|(dir, file)| Op::Replace { dir, file }),
        1 => d.clone().prop_map(|dir| Op::ReplaceDir { dir }),
        2 => (d.clone(), prop::collection::vec(0..PATTERNS.len(), 0..3))
            .prop_map(|(dir, patterns)| Op::Gitignore { dir, patterns }),
        1 => d.clone().prop_map(|dir| Op::RemoveGitignore { dir }),
        1 => (d.clone(), f.clone(), any::<bool>())
            .prop_map(|(dir, file, exec)| Op::Chmod { dir, file, exec }),
        1 => (d.clone(), f.clone(), 0..FILES.len())
            .prop_map(|(dir, file, target)| Op::Symlink { dir, file, target }),
        1 => (d.clone(), any::<bool>()).prop_map(|(dir, on)| Op::NestedRepo { dir, on }),
        1 => (d.clone(), f.clone()).prop_map(|(dir, file)| Op::Touch { dir, file }),
        1 => (d, f, any::<bool>()).prop_map(|(dir, file, on)| Op::Key { dir, file, on }),
    ]
}

pub fn remove(p: &Path) {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            let _ = fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = fs::remove_file(p);
        }
        Err(_) => {}
    }
}

pub fn apply(root: &Path, op: &Op) {
    let file = |d: usize, f: usize| root.join(DIRS[d]).join(FILES[f]);
    match op {
        Op::Write {
            dir,
            file: f,
            fill,
            len,
        } => {
            let p = file(*dir, *f);
            let _ = fs::create_dir_all(p.parent().unwrap());
            if !p.is_dir() {
                remove(&p);
                let _ = fs::write(&p, vec![*fill; *len]);
            }
        }
        Op::Delete { dir, file: f } => remove(&file(*dir, *f)),
        Op::Rename { from, to } => {
            let _ = fs::rename(file(from.0, from.1), file(to.0, to.1));
        }
        Op::MkDir { dir } => {
            let _ = fs::create_dir_all(root.join(DIRS[*dir]));
        }
        Op::RemoveDir { dir } => remove(&root.join(DIRS[*dir])),
        Op::RenameDir { from, to } => {
            let _ = fs::rename(root.join(DIRS[*from]), root.join(DIRS[*to]));
        }
        Op::Replace { dir, file: f } => {
            let p = file(*dir, *f);
            if p.is_dir() {
                remove(&p);
                let _ = fs::write(&p, b"was a directory");
            } else if p.exists() {
                remove(&p);
                let _ = fs::create_dir_all(&p);
                let _ = fs::write(p.join("inner"), b"inside");
            }
        }
        Op::ReplaceDir { dir } => {
            let p = root.join(DIRS[*dir]);
            if p.is_dir() {
                remove(&p);
                let _ = fs::write(&p, b"was a directory");
            }
        }
        Op::Gitignore { dir, patterns } => {
            let p = root.join(DIRS[*dir]);
            if p.is_dir() {
                let text: String = patterns
                    .iter()
                    .map(|i| format!("{}\n", PATTERNS[*i]))
                    .collect();
                let _ = fs::write(p.join(".gitignore"), text);
            }
        }
        Op::RemoveGitignore { dir } => remove(&root.join(DIRS[*dir]).join(".gitignore")),
        Op::Chmod { dir, file: f, exec } => {
            let p = file(*dir, *f);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                let mode = if *exec { 0o755 } else { 0o644 };
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(mode));
            }
        }
        Op::Symlink {
            dir,
            file: f,
            target,
        } => {
            let p = file(*dir, *f);
            if fs::symlink_metadata(p.parent().unwrap()).is_ok_and(|m| m.is_dir()) && !p.is_dir() {
                remove(&p);
                let _ = symlink(FILES[*target], &p);
            }
        }
        Op::NestedRepo { dir, on } => {
            let p = root.join(DIRS[*dir]);
            if *on && p.is_dir() {
                let _ = fs::create_dir_all(p.join(".git"));
            } else {
                remove(&p.join(".git"));
            }
        }
        Op::Key { dir, file: f, on } => {
            let p = file(*dir, *f);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                let text: &[u8] = if *on {
                    b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"
                } else {
                    b"no key here\n"
                };
                let _ = fs::write(&p, text);
            }
        }
        Op::Touch { dir, file: f } => {
            let p = file(*dir, *f);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                let mut bytes = fs::read(&p).unwrap_or_default();
                for b in &mut bytes {
                    *b = b.wrapping_add(1);
                }
                let _ = fs::write(&p, bytes);
            }
        }
    }
}

/// What two captures must agree on.
pub fn seen(c: &retrace::Capture) -> (retrace::ObjectId, Vec<String>, Vec<String>, Vec<String>) {
    (
        c.id,
        c.skipped.iter().map(|s| s.path.clone()).collect(),
        c.secrets.clone(),
        c.nested_repos.clone(),
    )
}

static REUSED: AtomicU64 = AtomicU64::new(0);

fn case(start: &[Op], rounds: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let env = Env::new();
    let root = env.root().to_path_buf();
    for o in start {
        apply(&root, o);
    }
    let ws = env.open();
    ws.snapshot(None).unwrap();
    for (n, batch) in rounds.iter().enumerate() {
        common::age_statcache(&env);
        std::thread::sleep(std::time::Duration::from_millis(30));
        for o in batch {
            apply(&root, o);
        }
        let incremental = ws.snapshot(None).unwrap();
        REUSED.fetch_add(incremental.reused, Ordering::Relaxed);
        // From scratch: without a cache; then the incremental one is put back, so the next
        // round builds on what the incremental capture recorded.
        let kept = fs::read(common::statcache(&env)).ok();
        let _ = fs::remove_file(common::statcache(&env));
        let scratch = ws.snapshot(None).unwrap();
        assert_eq!(scratch.reused, 0);
        if let Some(k) = kept {
            fs::write(common::statcache(&env), k).unwrap();
        }
        prop_assert_eq!(
            seen(&incremental),
            seen(&scratch),
            "round {}: {:?} after {:?}",
            n,
            batch,
            start
        );
    }
    Ok(())
}

#[test]
fn incremental_walks_equal_walks_from_scratch() {
    let cases = std::env::var("LISTING_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let strategy = (
        prop::collection::vec(op(), 5..25),
        prop::collection::vec(prop::collection::vec(op(), 1..5), 1..4),
    );
    runner
        .run(&strategy, |(start, rounds)| case(&start, &rounds))
        .unwrap();
    // The property is only worth something if listings were actually reused.
    let reused = REUSED.load(Ordering::Relaxed);
    assert!(
        reused > u64::from(cases),
        "only {reused} listings reused in {cases} cases"
    );
}
