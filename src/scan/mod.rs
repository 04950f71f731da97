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
//!
//! A directory the previous capture's stat cache vouches for is not listed again: see
//! `docs/architecture.md` ("Reused listings") for when a listing is reused.

pub mod beneath;
pub mod exclude;
mod walk;

pub(crate) use walk::trusts_directory_mtimes;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rayon::slice::ParallelSliceMut;

use crate::config::NestedRepos;
pub use crate::dirent::{ScanEntry, ScanKind};
use crate::statcache::StatCache;
use crate::vouch::Changes;

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
    /// The rules key: a digest of everything outside the tree that decides what a listing
    /// keeps (the workspace's `.git/info/exclude`, the global excludes file, the settings).
    /// A cache written under another key lends no listing.
    pub rules: [u8; 32],
    /// Directories listed.
    pub listed: u64,
    /// Directories whose listing was taken from the stat cache.
    pub reused: u64,
    /// The stat-cache records standing for the files of clean directories
    /// ([`ScanEntry::clean`]), as record indices, ascending (which is path order).
    pub omitted: Vec<usize>,
    /// The sizes of those files, summed.
    pub omitted_bytes: u64,
}

/// Walks `root` in parallel. `store_dir`, when inside the workspace, is skipped; files named
/// like credentials are left out and listed unless `allow` matches their path; `nested` says
/// whether nested repositories are entered. `prior`, the previous capture's stat cache,
/// lets directories whose `lstat` data it vouches for skip their listing (see
/// `docs/architecture.md`, "Reused listings"); `settings` is the caller's part of the rules key ([`Scan::rules`]): whatever
/// besides the tree decides what a listing keeps.
#[must_use]
pub fn scan(
    root: &Path,
    store_dir: Option<&Path>,
    allow: Option<&globset::GlobSet>,
    nested: NestedRepos,
    prior: Option<&StatCache>,
    vouch: Option<&Changes>,
    settings: &[u8],
) -> Scan {
    let mut phases = crate::trace::Phases::new("scan");
    let rules = rules(root, store_dir, nested, settings);
    let prior = prior
        .filter(|c| c.rules() == rules && !c.is_empty())
        .filter(|_| walk::trusts_directory_mtimes(root));
    let walked = walk::Walk::new(root, store_dir, allow, nested, prior, vouch).run();
    phases.mark(&format!(
        "walk ({} directories listed, {} reused)",
        walked.listed, walked.reused
    ));
    sorted(walked, rules, &mut phases)
}

/// Lists the directories `dirs` alone (each with the ignore rules a walk from the root
/// would apply in it) and walks the directories `whole` with everything below them, for a
/// capture a watcher told where to look. The entries are theirs (a listed directory's own
/// entry, not the directories inside it); the second list names the directories found
/// inside `dirs`, sorted; the third those of `dirs` and `whole` that a walk from the root
/// would never reach (ignored or excluded, or below such a directory), left alone.
/// `rules` is the walk's rules key ([`rules`]).
#[must_use]
pub fn scan_some(
    root: &Path,
    store_dir: Option<&Path>,
    allow: Option<&globset::GlobSet>,
    nested: NestedRepos,
    dirs: &[Vec<u8>],
    whole: &[Vec<u8>],
    rules: [u8; 32],
) -> (Scan, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut phases = crate::trace::Phases::new("scan");
    let (walked, mut inside, beyond) =
        walk::Walk::new(root, store_dir, allow, nested, None, None).run_some(dirs, whole);
    inside.sort_unstable();
    phases.mark("walk");
    (sorted(walked, rules, &mut phases), inside, beyond)
}

/// A walk's findings, each list sorted.
fn sorted(walked: walk::Walked, rules: [u8; 32], phases: &mut crate::trace::Phases) -> Scan {
    let mut entries = walked.entries;
    entries.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
    phases.mark("sort");
    let mut skipped = walked.skipped;
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let mut secrets = walked.secrets;
    secrets.sort();
    let mut repos = walked.repos;
    repos.sort();
    let mut omitted = walked.omitted;
    omitted.par_sort_unstable();
    Scan {
        entries,
        skipped,
        secrets,
        omitted,
        omitted_bytes: walked.omitted_bytes,
        repos: repos.iter().map(|r| crate::object::show_path(r)).collect(),
        rules,
        listed: walked.listed,
        reused: walked.reused,
    }
}

/// The rules key a walk of `root` with these settings runs with ([`Scan::rules`]).
#[must_use]
pub fn rules(
    root: &Path,
    store_dir: Option<&Path>,
    nested: NestedRepos,
    settings: &[u8],
) -> [u8; 32] {
    let mut key_input = settings.to_vec();
    key_input.push(match nested {
        NestedRepos::Skip => 0,
        NestedRepos::Capture => 1,
    });
    key_input.extend_from_slice(store_dir.map_or(&[][..], |d| d.as_os_str().as_bytes()));
    walk::rules_key(root, &key_input)
}

/// Why a path that is neither a regular file, a directory nor a symlink is left out.
pub(crate) fn special_reason(ft: std::fs::FileType) -> String {
    use rustix::fs::FileType as F;
    use std::os::unix::fs::FileTypeExt;
    special_kind(if ft.is_fifo() {
        F::Fifo
    } else if ft.is_socket() {
        F::Socket
    } else if ft.is_block_device() {
        F::BlockDevice
    } else if ft.is_char_device() {
        F::CharacterDevice
    } else {
        F::Unknown
    })
}

/// [`special_reason`] for a raw file type.
pub(crate) fn special_kind(ft: rustix::fs::FileType) -> String {
    use rustix::fs::FileType as F;
    let what = match ft {
        F::Fifo => "a FIFO (named pipe)",
        F::Socket => "a socket",
        F::BlockDevice => "a block device",
        F::CharacterDevice => "a character device",
        _ => "of an unknown type",
    };
    format!("{what}, not a regular file, directory or symlink")
}
