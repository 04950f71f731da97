//! One path as the walk's `lstat` saw it ([`ScanEntry`], [`ScanKind`]): what the walk
//! (`crate::scan`) produces and the stat cache (`crate::statcache`) records and compares,
//! so it lives below both.

/// What the walk found at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A directory (entered).
    Dir,
    /// A directory with its own `.git`, not entered (`NestedRepos::Skip`; with
    /// `NestedRepos::Capture` it is a [`ScanKind::Dir`], listed in the scan's `repos`).
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
    /// For a directory: its listing left nothing out but by ignore rules, so the next walk
    /// may reuse it while the directory's `lstat` data hold (recorded in the stat cache).
    pub listing: bool,
    /// For a directory: its listing was reused and every file and symlink in it matched
    /// its stat-cache record exactly (and is settled), so the walk left them out of the
    /// scan: the cache's records stand for them (see `crate::statcache`).
    pub clean: bool,
    /// A file with more than one hard link (see the stat cache's `Stat::linked`).
    pub linked: bool,
}
