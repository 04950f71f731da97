//! Capture: scan + stat cache + hash + trees → a snapshot (root tree id) in the store.
//!
//! Files the stat cache vouches for are not read. Others are read once: hashed, and, when
//! the store lacks them, compressed and queued. Files over
//! [`CHUNK_THRESHOLD`](crate::object::CHUNK_THRESHOLD) are split by
//! FastCDC so an edit to a big file stores only the changed chunks. A file whose `fstat`
//! changes while it is read is re-read (up to 3 times) and then reported as unstable.
//! Queued objects are written in batches of 16 MiB, the last one together with the
//! snapshot record, so a capture costs one commit (fsync) plus one per batch of new data
//! (and none when it stores nothing and records nothing: an empty commit would only sync).
//! A big file's chunks are queued as they are read, so a capture's memory is bounded by the
//! batch, not by the size of any file.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::StoreError;
use crate::object::{FlatEntry, ObjectId};
use crate::progress::Progress;
use crate::scan::Skipped;
use crate::store::{Store, WriteTx};

mod changed;
mod flat;
mod hash;
mod tree;
mod walk;
mod write;

pub(crate) use tree::tree_of_list;
pub(crate) use walk::capture;

/// What a capture found and stored.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Capture {
    /// Root tree id: the snapshot id.
    pub id: ObjectId,
    /// Files and symlinks captured.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Objects added to the store.
    pub new_objects: u64,
    /// Stored (compressed) bytes added to the store.
    pub new_bytes: u64,
    /// Files that had to be read (stat cache misses).
    pub hashed: u64,
    /// Paths left out (unreadable, unstable), with the reason.
    pub skipped: Vec<Skipped>,
    /// Nested repositories recorded but not entered (the `nested_repos` setting is `skip`).
    pub nested_repos: Vec<String>,
    /// Nested repositories whose working files were captured (the setting is `capture`).
    pub captured_repos: Vec<String>,
    /// Credentials left out (by name or by a private-key header), sorted.
    pub secrets: Vec<String>,
    /// Directories the walk listed, and directories whose listing it took from the stat
    /// cache (not serialized).
    #[serde(skip)]
    pub listed: u64,
    /// See [`Capture::listed`].
    #[serde(skip)]
    pub reused: u64,
    /// `None` when a watcher vouched for what the capture did not look at; else why the
    /// capture walked the workspace (no watcher, it started after the last capture, its
    /// queue overflowed…).
    pub walked_because: Option<String>,
    /// The capture looked only at the directories the watcher named, and took every other
    /// one from the last snapshot's trees (not serialized).
    #[serde(skip)]
    pub focused: bool,
    /// Every path of the snapshot, sorted by path bytes (not serialized); empty when the
    /// capture was not asked for it ([`CaptureOptions::list`]).
    #[serde(skip)]
    pub(crate) entries: Vec<FlatEntry>,
}

impl Capture {
    internal! {
        /// Every path of the snapshot (see the field).
        #[must_use]
        fn entries(&self) -> &[FlatEntry] {
            &self.entries
        }
    }
}

/// Records written in a capture's final commit, given the root id and what the capture
/// saw of it (history records ride along, so a turn's capture and its record cost one sync).
pub type AlsoCommit<'a> =
    &'a dyn Fn(&WriteTx<'_>, ObjectId, &Captured<'_>) -> Result<(), StoreError>;

/// What a capture's commit records ([`AlsoCommit`]) see of the snapshot: every path (when
/// the caller asked for the list anyway), or only the trees the capture built (when a
/// watcher told it where to look, or no list was asked for: a turn's capture at a million
/// files then holds a few dozen trees instead of a million paths).
pub enum Captured<'a> {
    /// Every path of the snapshot, sorted by path bytes.
    Flat(&'a [FlatEntry]),
    /// The trees the capture built, encoded, by id; every other tree of the snapshot is in
    /// the store already.
    Trees(&'a std::collections::HashMap<ObjectId, Vec<u8>>),
}

/// How to capture.
pub struct CaptureOptions<'a> {
    /// Write new objects to the store (false: only compute ids, e.g. to compare).
    pub store_objects: bool,
    /// Append a snapshot record (`retrace log`) and make it the last known state.
    #[allow(clippy::option_option)] // None: no record; Some(label): a record, labelled or not
    pub record: Option<Option<String>>,
    /// Progress sink.
    pub progress: &'a dyn Progress,
    /// More records for the final commit.
    pub also: Option<AlsoCommit<'a>>,
    /// Fill [`Capture::entries`]. Without it the list stays empty, which spares a capture
    /// a list of every path when its caller needs only the id and the counts (`also` sees
    /// the snapshot as [`Captured`] either way).
    pub list: bool,
    /// Walk the whole workspace whatever a watcher says (`retrace snapshot --rescan`).
    pub rescan: bool,
    /// When the stat cache is rewritten.
    pub cache: CacheRewrite,
}

impl<'a> CaptureOptions<'a> {
    /// A capture with nothing else in its commit, listing every entry, trusting a watcher
    /// and rewriting the cache whenever it changed: storing objects or only computing ids
    /// (`store_objects`), recording a snapshot or not (`record`).
    #[allow(clippy::option_option)] // as the field
    pub fn plain(
        store_objects: bool,
        record: Option<Option<String>>,
        progress: &'a dyn Progress,
    ) -> CaptureOptions<'a> {
        CaptureOptions {
            store_objects,
            record,
            progress,
            also: None,
            list: true,
            rescan: false,
            cache: CacheRewrite::Always,
        }
    }
}

/// When a capture rewrites the stat cache ([`CaptureOptions::cache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRewrite {
    /// Whenever it is not exactly the disk as found.
    Always,
    /// Not when rewriting it would only record a few files read again (at most
    /// [`DEFER_CACHE_READS`]) and directories relisted: for the capture an undo, a redo or a
    /// path restore takes of the disk right before it writes the paths that changed, which
    /// leaves those records stale anyway. The cache on disk stays valid (every record is
    /// checked against the disk before it is trusted); the next capture reads those files
    /// again and rewrites it. Never deferred when the rewrite records a watcher's token, goes
    /// past a watched capture's head, or marks a directory whose path was left out.
    Deferred,
}

/// How many files a capture with [`CacheRewrite::Deferred`] may have read and still leave
/// the stat cache as it was (reading them again costs the next capture less than a rewrite
/// of a million records costs this one).
pub const DEFER_CACHE_READS: u64 = 1000;

pub(crate) struct CaptureContext<'a> {
    pub root: &'a Path,
    pub store: &'a Store,
    pub statcache: &'a Path,
    pub store_dir: Option<&'a Path>,
    /// Paths allowed although they look like credentials (the `allow_secrets` setting).
    pub allow_secrets: Option<&'a globset::GlobSet>,
    /// The settings' part of the walk's rules key (see
    /// [`scan::Scan::rules`](crate::scan::Scan::rules)): the `allow_secrets` patterns.
    pub rules_settings: &'a [u8],
    /// Whether nested repositories are entered (the `nested_repos` setting). Needs no place
    /// in the stat cache's key: a nested repository is a `NestedRepo` entry in one mode and a
    /// `Dir` in the other, and an entry hits only with its kind, so a cache written in one
    /// mode never vouches for a directory in the other.
    pub nested_repos: crate::config::NestedRepos,
    /// The workspace's watcher, to ask what changed (None: always walk).
    pub watch: Option<WatchAsk<'a>>,
}

/// How a capture asks the workspace's watcher (see [`crate::watch`]).
#[derive(Clone, Copy)]
pub(crate) struct WatchAsk<'a> {
    /// Where its socket is.
    pub runtime_dir: &'a Path,
    /// How long to wait for its answer before walking.
    pub timeout: std::time::Duration,
    /// Walk whatever it says (`retrace snapshot --rescan`), taking only a fresh token.
    pub rescan: bool,
}

/// Joins a workspace-relative byte path onto the root.
#[must_use]
pub fn abs_path(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel))
}

#[cfg(test)]
mod tests;
