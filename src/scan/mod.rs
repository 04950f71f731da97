//! Parallel, gitignore-aware walk of a workspace producing `lstat` results, sorted by path.
//!
//! Only git's rules apply (`.gitignore` at every level, `.git/info/exclude`, the global
//! excludes file), in git repositories and plain folders alike; hidden files are included;
//! symlinks are recorded, never followed. Hard exclusions ([`exclude::HARD_EXCLUSIONS`]) and
//! the store directory are skipped before any rule is consulted. A directory holding its own
//! `.git` is a nested repository: recorded, not entered ([`NestedRepos::Skip`]), or, with
//! [`NestedRepos::Capture`], an ordinary directory walked as a root of its own, so that only
//! its own `.gitignore` files, its `.git/info/exclude` and the global excludes file apply
//! inside it (as git sees it; the enclosing folder's rules decide only whether the directory
//! is there at all). Its `.git` is hard-excluded like every `.git`.

pub mod exclude;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use rayon::slice::ParallelSliceMut;

use crate::config::NestedRepos;

/// What the walk found at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A directory (entered).
    Dir,
    /// A directory with its own `.git`, not entered ([`NestedRepos::Skip`]; with
    /// [`NestedRepos::Capture`] it is a [`ScanKind::Dir`], listed in [`Scan::repos`]).
    NestedRepo,
}

/// One path found by the walk with its `lstat` data.
#[derive(Clone, Debug)]
pub struct ScanEntry {
    /// Path relative to the workspace root, `/`-separated bytes.
    pub path: Vec<u8>,
    /// What it is.
    pub kind: ScanKind,
    /// `st_size`.
    pub size: u64,
    /// `st_mtime` in nanoseconds.
    pub mtime_ns: i64,
    /// `st_ctime` in nanoseconds.
    pub ctime_ns: i64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_mode`.
    pub mode: u32,
}

/// A path the walk could not read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// Path relative to the workspace root.
    pub path: String,
    /// Why it was left out.
    pub reason: String,
}

/// The result of a walk.
#[derive(Debug, Default)]
pub struct Scan {
    /// Entries sorted by path bytes (the root itself is not listed).
    pub entries: Vec<ScanEntry>,
    /// Paths left out because they could not be read.
    pub skipped: Vec<Skipped>,
    /// Credentials left out by name ([`exclude::SECRET_NAMES`]), sorted.
    pub secrets: Vec<String>,
    /// Nested repositories entered and captured as directories ([`NestedRepos::Capture`]),
    /// sorted; empty with [`NestedRepos::Skip`], whose repositories are
    /// [`ScanKind::NestedRepo`] entries.
    pub repos: Vec<String>,
}

fn rel_path(root: &Path, path: &Path) -> Vec<u8> {
    // The walker joins names onto the root as given, so the root is a byte prefix; slicing
    // is several times cheaper than `Path::strip_prefix`'s component walk.
    let (root, path) = (root.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    match path.strip_prefix(root) {
        Some(rest) => rest.strip_prefix(b"/").unwrap_or(rest).to_vec(),
        None => path.to_vec(),
    }
}

/// Walks `root` in parallel. `store_dir`, when inside the workspace, is skipped; files named
/// like credentials are left out and listed unless `allow` matches their path; `nested` says
/// whether nested repositories are entered.
#[must_use]
pub fn scan(
    root: &Path,
    store_dir: Option<&Path>,
    allow: Option<&globset::GlobSet>,
    nested: NestedRepos,
) -> Scan {
    let shared = Shared {
        entries: Mutex::new(Vec::new()),
        skipped: Mutex::new(Vec::new()),
        secrets: Mutex::new(Vec::new()),
        found: Mutex::new(Vec::new()),
    };
    let mut phases = crate::trace::Phases::new("scan");
    let mut repos: Vec<Vec<u8>> = Vec::new();
    // A nested repository is walked as a root of its own, so the enclosing directories'
    // ignore rules stop at it as they do for git; the repositories found in one round
    // (only in capture mode) are the roots of the next.
    let mut roots = vec![root.to_path_buf()];
    while !roots.is_empty() {
        walk(
            &roots,
            store_dir,
            &mut VisitorBuilder {
                root,
                shared: &shared,
                allow,
                nested,
            },
        );
        let mut found =
            std::mem::take(&mut *shared.found.lock().unwrap_or_else(PoisonError::into_inner));
        found.sort();
        roots = found
            .iter()
            .map(|rel| root.join(std::ffi::OsStr::from_bytes(rel)))
            .collect();
        repos.extend(found);
    }
    let mut entries = shared
        .entries
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    phases.mark("walk");
    entries.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
    phases.mark("sort");
    let mut skipped = shared
        .skipped
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let mut secrets = shared
        .secrets
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    secrets.sort();
    repos.sort();
    Scan {
        entries,
        skipped,
        secrets,
        repos: repos.iter().map(|r| crate::object::show_path(r)).collect(),
    }
}

/// One parallel walk of `roots` (the workspace root, or nested repositories), each with its
/// own ignore rules and none of its parents'.
fn walk(roots: &[PathBuf], store_dir: Option<&Path>, visitors: &mut VisitorBuilder<'_>) {
    let Some((first, rest)) = roots.split_first() else {
        return;
    };
    let store_dir: Option<PathBuf> = store_dir.map(Path::to_path_buf);
    let mut builder = WalkBuilder::new(first);
    for r in rest {
        builder.add(r);
    }
    builder
        .standard_filters(false)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            if exclude::is_hard_excluded(e.file_name().as_bytes()) {
                return false;
            }
            store_dir.as_deref().is_none_or(|s| e.path() != s)
        });
    builder.build_parallel().visit(visitors);
}

struct Shared {
    entries: Mutex<Vec<ScanEntry>>,
    skipped: Mutex<Vec<Skipped>>,
    secrets: Mutex<Vec<String>>,
    /// Nested repositories met in capture mode, to be walked next (relative paths).
    found: Mutex<Vec<Vec<u8>>>,
}

struct VisitorBuilder<'s> {
    root: &'s Path,
    shared: &'s Shared,
    allow: Option<&'s globset::GlobSet>,
    nested: NestedRepos,
}

impl<'s> ParallelVisitorBuilder<'s> for VisitorBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            root: self.root,
            shared: self.shared,
            allow: self.allow,
            nested: self.nested,
            entries: Vec::new(),
            skipped: Vec::new(),
            secrets: Vec::new(),
            found: Vec::new(),
        })
    }
}

/// One walker thread's visitor: collects locally and hands its results to the shared
/// vectors when the walk ends, so threads do not contend on a lock per entry.
struct Visitor<'s> {
    root: &'s Path,
    shared: &'s Shared,
    allow: Option<&'s globset::GlobSet>,
    nested: NestedRepos,
    entries: Vec<ScanEntry>,
    skipped: Vec<Skipped>,
    secrets: Vec<String>,
    found: Vec<Vec<u8>>,
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        if let Ok(mut v) = self.shared.entries.lock() {
            v.append(&mut self.entries);
        }
        if let Ok(mut v) = self.shared.skipped.lock() {
            v.append(&mut self.skipped);
        }
        if let Ok(mut v) = self.shared.secrets.lock() {
            v.append(&mut self.secrets);
        }
        if let Ok(mut v) = self.shared.found.lock() {
            v.append(&mut self.found);
        }
    }
}

impl Visitor<'_> {
    fn skip(&mut self, path: &Path, reason: String) {
        let path = crate::object::show_path(&rel_path(self.root, path));
        self.skipped.push(Skipped { path, reason });
    }
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, result: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        let entry = match result {
            Ok(e) => e,
            // Listed, then deleted before it could be looked at: it is simply not there.
            Err(err)
                if err.io_error().map(std::io::Error::kind)
                    == Some(std::io::ErrorKind::NotFound) =>
            {
                return WalkState::Continue;
            }
            Err(err) => {
                let path = error_path(&err).unwrap_or_default();
                self.skip(&path, err.to_string());
                return WalkState::Continue;
            }
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let path = entry.path();
        let meta = match path.symlink_metadata() {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return WalkState::Continue,
            Err(err) => {
                self.skip(path, err.to_string());
                return WalkState::Continue;
            }
        };
        let ft = meta.file_type();
        let mut state = WalkState::Continue;
        let kind = if ft.is_symlink() {
            ScanKind::Symlink
        } else if ft.is_dir() {
            if path.join(".git").symlink_metadata().is_ok() {
                // Not entered by this walk either way: captured, it is the root of a walk
                // of its own (see `scan`).
                state = WalkState::Skip;
                match self.nested {
                    NestedRepos::Skip => ScanKind::NestedRepo,
                    NestedRepos::Capture => {
                        self.found.push(rel_path(self.root, path));
                        ScanKind::Dir
                    }
                }
            } else {
                ScanKind::Dir
            }
        } else if ft.is_file() {
            ScanKind::File
        } else {
            // Sockets, FIFOs and devices are not content a snapshot can hold: left out, and
            // named like any other path left out.
            self.skip(path, format!("{}: left out", special_reason(ft)));
            return WalkState::Continue;
        };
        let sized = matches!(kind, ScanKind::File | ScanKind::Symlink);
        let rel = rel_path(self.root, path);
        if sized && exclude::is_secret_name(entry.file_name().as_bytes()) {
            let allowed = self
                .allow
                .is_some_and(|a| a.is_match(std::ffi::OsStr::from_bytes(&rel)));
            if !allowed {
                self.secrets.push(crate::object::show_path(&rel));
                return WalkState::Continue;
            }
        }
        self.entries.push(ScanEntry {
            path: rel,
            kind,
            size: if sized { meta.len() } else { 0 },
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            ino: meta.ino(),
            mode: meta.mode(),
        });
        state
    }
}

/// Why a path that is neither a regular file, a directory nor a symlink is left out.
pub(crate) fn special_reason(ft: std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else {
        "of an unknown type"
    };
    format!("{what}, not a regular file, directory or symlink")
}

fn error_path(err: &ignore::Error) -> Option<PathBuf> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        ignore::Error::Partial(errs) => errs.first().and_then(error_path),
        _ => None,
    }
}
