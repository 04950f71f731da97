//! Typed errors, split by operation, each naming the path concerned and what to do.

use std::io;
use std::path::PathBuf;

use crate::object::ObjectId;

/// What the embedded database reported, kept opaque so that its types stay inside
/// `store/`, which converts them.
#[derive(Debug)]
pub struct DbError(pub(crate) Box<dyn std::error::Error + Send + Sync + 'static>);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Opening, reading or writing a store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store directory could not be created.
    #[error("cannot create {path}: {source}; check its permissions or set RETRACE_HOME")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// redb could not open the database.
    #[error("cannot open store {path}: {source}; if it is damaged, move it aside and retry")]
    Open {
        /// The store file.
        path: PathBuf,
        /// The cause.
        source: DbError,
    },
    /// The store file (or its directory) is not readable or writable by this user: a
    /// permission problem, not damage.
    #[error(
        "cannot open store {path}: permission denied ({source}); retrace needs to {need} it as \
         the user running it: fix its owner or mode (e.g. `chmod u+rw {path}`, or run retrace \
         as the user who owns it), or set RETRACE_HOME to a directory of your own"
    )]
    Permission {
        /// The store file.
        path: PathBuf,
        /// "read and write", or "read" for read-only tools.
        need: &'static str,
        /// The cause.
        source: io::Error,
    },
    /// The store was not closed cleanly (a process was killed mid-write) and a read-only
    /// opener cannot repair it.
    #[error(
        "store {path} was not closed cleanly (a retrace process was interrupted); the next \
         `retrace` command on its workspace repairs it (read-only tools cannot)"
    )]
    NeedsRepair {
        /// The store file.
        path: PathBuf,
    },
    /// Another process kept the store for longer than the bounded wait.
    #[error("store {path} is busy: another retrace process held it for {secs} s; try again")]
    Busy {
        /// The store file.
        path: PathBuf,
        /// How long we waited.
        secs: u64,
    },
    /// The store file is damaged (truncated, not a redb file, a failed checksum).
    #[error("store {path} is damaged ({detail})")]
    Damaged {
        /// The store file.
        path: PathBuf,
        /// What redb reported.
        detail: String,
    },
    /// The store file exists but holds no format yet: another process is creating it.
    #[error("store {path} is being created (no format recorded yet); try again in a moment")]
    BeingCreated {
        /// The store file.
        path: PathBuf,
    },
    /// The store was written by a newer (or unknown) format.
    #[error(
        "store {path} is format {found}, this retrace reads format {expected}; upgrade retrace \
         or set RETRACE_HOME to another directory"
    )]
    UnknownFormat {
        /// The store file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// The workspace lock file could not be opened or locked.
    #[error("cannot lock {path}: {source}; check the permissions of the retrace home")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Any other database failure.
    #[error("store {path}: {source}")]
    Db {
        /// The store file.
        path: PathBuf,
        /// The cause.
        source: DbError,
    },
    /// An object referenced by a snapshot is not in the store.
    #[error(
        "object {id} is missing from store {path}; run `retrace-dump verify` to see the damage"
    )]
    Missing {
        /// The store file.
        path: PathBuf,
        /// The object.
        id: ObjectId,
    },
    /// An object failed verification or decoding. A read-write store forgets a damaged
    /// object, so the next snapshot stores it again if the workspace still holds it.
    #[error(
        "object {id} in store {path} is corrupt ({detail}); retrace forgets it, so the next \
         snapshot stores it again if a file still holds it; `retrace repair` checks the whole \
         store"
    )]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// The object.
        id: ObjectId,
        /// What is wrong.
        detail: String,
    },
    /// A record could not be encoded (postcard refused it: a bug in retrace, never the
    /// user's data). Nothing was written.
    #[error(
        "a record for store {path} could not be encoded ({detail}); nothing was written; please report this"
    )]
    Encode {
        /// The store file.
        path: PathBuf,
        /// postcard's error.
        detail: String,
    },
    /// A session, turn or op record does not decode (or has a future version).
    #[error("history in store {path} is unreadable ({detail}); run `retrace-dump verify`")]
    History {
        /// The store file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The disk holding the store has too little free space for a write.
    #[error(
        "not enough disk space for store {path}: {}{} free; free some space on that disk \
         (then `retrace gc` can shrink the store) or set RETRACE_HOME to another disk",
        needed.map_or_else(|| "the disk filled up during the write, ".to_string(),
            |n| format!("this write needs about {}, ", human_bytes(n))),
        human_bytes(*free)
    )]
    NoSpace {
        /// The store file.
        path: PathBuf,
        /// Bytes the write needed, when known before it started.
        needed: Option<u64>,
        /// Bytes free on the store's filesystem.
        free: u64,
    },
    /// The store was closed after a failed write and could not be reopened.
    #[error("store {path} could not be reopened after a failed write; run the command again")]
    Closed {
        /// The store file.
        path: PathBuf,
    },
    /// A snapshot id prefix matched nothing or several snapshots.
    #[error("{0}")]
    BadSnapshotId(String),
}

/// `1.5 MB`-style sizes for messages (decimal units, as `df -H` prints them).
#[allow(clippy::cast_precision_loss)] // a size in a message needs three digits
#[must_use]
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.1} GB", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} kB", n as f64 / 1e3),
        n => format!("{n} bytes"),
    }
}

impl StoreError {
    /// Whether another retrace process held the store or the workspace lock for longer
    /// than the bounded wait ([`StoreError::Busy`]).
    #[must_use]
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }

    /// Whether the store file itself is unusable (damaged, or of an unknown format), as
    /// opposed to busy or unreadable for lack of permission: such a store is set aside.
    #[must_use]
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            StoreError::Damaged { .. } | StoreError::UnknownFormat { .. }
        )
    }
}

/// Capturing a workspace failed as a whole (single unreadable files are reported, not fatal).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The workspace root cannot be read.
    #[error("cannot read workspace {path}: {source}")]
    Root {
        /// The root.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stat cache's records for files the walk took from it could not be read back.
    #[error(
        "the stat cache {path} could not be read back during the capture; delete it and run \
         the command again"
    )]
    StatCache {
        /// The stat cache file.
        path: PathBuf,
    },
    /// Files are never captured in this workspace (the home directory or above, a
    /// filesystem root, the temp directory): it keeps conversation history only.
    #[error(
        "workspace {path}: {why}; retrace does not snapshot it (conversation history only). \
         Run it in a project folder"
    )]
    Refused {
        /// The workspace root.
        path: PathBuf,
        /// Why (see [`crate::Workspace::conversation_only`]).
        why: String,
    },
    /// The thread that takes a turn's before-snapshot could not be started.
    #[error("workspace {path}: cannot start the capture thread: {source}")]
    Thread {
        /// The workspace root.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

impl CaptureError {
    /// Whether the store or the workspace lock stayed held by another retrace process for
    /// longer than the bounded wait: the same capture can simply be tried again.
    #[must_use]
    pub fn is_busy(&self) -> bool {
        matches!(self, CaptureError::Store(e) if e.is_busy())
    }
}

/// Opening a workspace failed: its directory is unusable, or its store cannot be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The workspace directory is unusable: missing, not a directory, or one whose store
    /// would lie inside it.
    #[error("workspace {path}: {reason}")]
    Workspace {
        /// The directory given (or the resolved root).
        path: PathBuf,
        /// Why it cannot be used, and what to do.
        reason: String,
    },
    /// The store cannot be opened or created: busy, damaged beyond setting aside, of a
    /// newer format, not readable by this user, or its directory cannot be made.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OpenError {
    /// Whether another retrace process held the store for longer than the bounded wait:
    /// opening again later can succeed.
    #[must_use]
    pub fn is_busy(&self) -> bool {
        matches!(self, OpenError::Store(e) if e.is_busy())
    }
}

/// A path another writer holds, as a refusal names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HeldPath {
    /// The path, relative to the workspace.
    pub path: String,
    /// Who holds it, and how ("being changed by turn 3 of session b, which is still
    /// running").
    pub writer: String,
}

/// The one wording of the refusal to write over work no snapshot holds, everywhere it is
/// said (the CLI, the hosts' messages, `retrace ui`): `count` changes.
#[must_use]
pub fn dirty_refusal(count: usize) -> String {
    format!(
        "the workspace has {count} change{} in no snapshot; nothing written; take a checkpoint \
         first or use --force (a safety snapshot keeps them first)",
        if count == 1 { "" } else { "s" }
    )
}

/// `paths` (some of `count`) in one line: the first three, then how many more.
pub(crate) fn listed(paths: &[String], count: usize) -> String {
    let shown: Vec<&str> = paths.iter().take(3).map(String::as_str).collect();
    let more = count.saturating_sub(shown.len());
    if more == 0 {
        shown.join(", ")
    } else {
        format!("{} and {more} more", shown.join(", "))
    }
}

/// Restoring a snapshot failed or was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The workspace differs from its last known state; restoring would lose those edits.
    #[error("{}: {}", dirty_refusal(*count), listed(paths, *count))]
    Dirty {
        /// Up to 20 changed paths.
        paths: Vec<String>,
        /// How many there are.
        count: usize,
    },
    /// Paths the restore would change hold another writer's work: a turn of another
    /// session still running, or (for a restore made for a session) another session's last
    /// write. Nothing was written.
    #[error(
        "refusing to restore: {} path(s) hold another writer's work (e.g. {}: {}); leave them \
         out (restore only other paths with `-- PATH`), wait until that turn ends, or pass \
         --force (the workspace as it is stays restorable from a snapshot)",
        held.len(),
        held.first().map_or("?", |h| h.path.as_str()),
        held.first().map_or("?", |h| h.writer.as_str())
    )]
    Held {
        /// Up to 20 such paths, each with its writer.
        held: Vec<HeldPath>,
    },
    /// A path of the snapshot would be written through a symlinked directory or outside the
    /// workspace.
    #[error("refusing to write {path}: {reason}")]
    Unsafe {
        /// The path, relative to the workspace.
        path: String,
        /// Why.
        reason: String,
    },
    /// A path given to restore names nothing restorable (outside the workspace, or in
    /// neither the snapshot nor the workspace).
    #[error("cannot restore {path:?}: {reason}")]
    Path {
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// The workspace's disk has too little free space for what the restore writes: refused
    /// before anything is written or deleted.
    #[error(
        "not enough disk space in the workspace {path}: this restore writes about {}, {} \
         free; nothing was changed. Free some space on that disk and run it again",
        human_bytes(*needed),
        human_bytes(*free)
    )]
    NoSpace {
        /// The workspace root.
        path: PathBuf,
        /// Bytes the restore writes, with a margin.
        needed: u64,
        /// Bytes free on the workspace's filesystem.
        free: u64,
    },
    /// Writing a file failed midway.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A restore failed midway (a write the disk refused) and put back every path it had
    /// changed: the workspace is as it was before it, and its history unchanged.
    #[error(
        "{cause}; the restore stopped and put back the {restored} path(s) it had changed: the \
         workspace is as it was{}",
        if kept.is_empty() { String::new() } else {
            format!(" (except {} path(s) edited meanwhile, left as they are: {})",
                kept.len(), kept.join(", "))
        }
    )]
    RolledBack {
        /// Why the restore failed.
        cause: Box<RestoreError>,
        /// Paths put back.
        restored: usize,
        /// Up to 5 paths someone else changed meanwhile, left as they are.
        kept: Vec<String>,
    },
    /// A restore failed midway and putting the workspace back failed too: its journal
    /// stays, and the next retrace command completes the restore.
    #[error(
        "{cause}; putting the workspace back failed too ({back}); the next retrace command \
         completes the restore once the cause is fixed"
    )]
    Stopped {
        /// Why the restore failed.
        cause: Box<RestoreError>,
        /// Why putting it back failed.
        back: String,
    },
    /// Scanning the current state failed.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// The store failed. A missing object is reported before any write, and so is a corrupt
    /// one in a restore that verifies up front (up to 64 MiB); a bigger restore verifies
    /// each object as it writes it and rolls back ([`RestoreError::RolledBack`]).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RestoreError {
    /// Whether the restore waited for another retrace process (the workspace lock or the
    /// store) longer than the bounded wait: nothing was written, and it can simply be tried
    /// again.
    #[must_use]
    pub fn is_busy(&self) -> bool {
        match self {
            RestoreError::Store(e) => e.is_busy(),
            RestoreError::Capture(e) => e.is_busy(),
            _ => false,
        }
    }
}

impl From<RestoreError> for Error {
    fn from(e: RestoreError) -> Error {
        Error::Restore(Box::new(e))
    }
}

/// A watcher that cannot start (`retrace watch`, or one hosted by `serve` and `mcp`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// Another watcher serves the workspace already.
    #[error(
        "a watcher already serves {root} (its socket is {socket}); `retrace watch --stop` stops it"
    )]
    Running {
        /// The workspace root.
        root: PathBuf,
        /// Its socket.
        socket: PathBuf,
    },
    /// The runtime directory, the lock or the socket cannot be made.
    #[error("cannot watch {root}: {path}: {source}")]
    Setup {
        /// The workspace root.
        root: PathBuf,
        /// The file or directory that failed.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The workspace is on a filesystem whose changes inotify does not see (NFS, SMB, FUSE,
    /// 9p…): captures must walk.
    #[error(
        "cannot watch {root}: it is on a network or userspace filesystem ({what}), where \
         inotify misses changes made elsewhere; captures walk it instead"
    )]
    Unwatchable {
        /// The workspace root.
        root: PathBuf,
        /// The filesystem.
        what: String,
    },
}

/// Sharing a session failed: exporting it to git, importing it from git, bundling or
/// unbundling it (`docs/sharing.md`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    /// The session has no ended turn or checkpoint (in the turns asked for).
    #[error("session {session} has no ended turn or checkpoint to share")]
    Nothing {
        /// The session.
        session: String,
    },
    /// The git binary could not be run.
    #[error("cannot run git ({source}); install git: export and import use it")]
    NoGit {
        /// Why.
        source: io::Error,
    },
    /// A git command failed.
    #[error("git {action} in {repo} failed: {detail}")]
    Git {
        /// What was asked of git.
        action: String,
        /// The repository (its git directory).
        repo: PathBuf,
        /// What git said.
        detail: String,
    },
    /// The ref holds commits retrace did not write, or rewritten ones.
    #[error("{reference} in {repo}: {detail}; refusing to import it")]
    NotRetrace {
        /// The ref.
        reference: String,
        /// The repository.
        repo: PathBuf,
        /// What is wrong, naming the commit.
        detail: String,
    },
    /// The ref already holds another history than the one being exported.
    #[error(
        "{reference} in {repo} holds another history ({detail}); export to another ref, or \
         pass --force to replace it"
    )]
    Diverged {
        /// The ref.
        reference: String,
        /// The repository.
        repo: PathBuf,
        /// How it differs.
        detail: String,
    },
    /// A ref name that is not a git ref retrace writes.
    #[error("{0:?} is not a ref retrace can use: give a full ref name such as refs/retrace/NAME")]
    BadRef(String),
    /// The session exists in this workspace with a different history.
    #[error(
        "session {session} exists here with another history ({detail}); import it under \
         another name with --as NAME"
    )]
    Conflict {
        /// The session.
        session: String,
        /// How it differs.
        detail: String,
    },
    /// What arrived is not a session retrace can record: numbers out of range or repeated,
    /// records filed under another turn, a turn still running, a name with control
    /// characters.
    #[error("{what} cannot be imported: {detail}; nothing of it was recorded")]
    Refused {
        /// What was imported.
        what: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Something the session names did not arrive with it.
    #[error("the import lacks {what}; nothing of the session was recorded")]
    Missing {
        /// What.
        what: String,
    },
    /// A bundle that cannot be read: truncated, damaged, of a newer format.
    #[error("bundle {path}: {detail}; nothing was written")]
    Bundle {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Any retrace failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// See [`StoreError`].
    #[error(transparent)]
    Store(#[from] StoreError),
    /// See [`CaptureError`].
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// See [`WatchError`].
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// See [`RestoreError`].
    #[error(transparent)]
    Restore(Box<RestoreError>),
    /// See [`OpenError`].
    #[error(transparent)]
    Open(#[from] OpenError),
    /// See [`ShareError`].
    #[error(transparent)]
    Share(#[from] ShareError),
    /// An anchor given to navigate names no snapshot of the session.
    #[error("cannot navigate to {anchor:?}: {reason}")]
    Anchor {
        /// The anchor.
        anchor: String,
        /// Why.
        reason: String,
    },
    /// A turn's owner named a process that does not exist.
    #[error(
        "process {pid} does not exist: a turn's owner must be a running process (the agent); \
         give the agent's pid with --owner-pid, or leave it out to make the caller the owner"
    )]
    NoSuchOwner {
        /// The pid given.
        pid: u32,
    },
    /// A path or an entry given to a command that reads history (`show`, `blame`) names
    /// nothing it can read: no such entry, no such file, a binary file.
    #[error("{name}: {reason}")]
    Inspect {
        /// The path or reference given.
        name: String,
        /// Why, and what to give instead.
        reason: String,
    },
}

impl Error {
    /// Whether it is a bounded wait for another retrace process that ran out (the workspace
    /// lock or the store held elsewhere): the same command can simply be tried again.
    #[must_use]
    pub fn is_busy(&self) -> bool {
        match self {
            Error::Store(e) => e.is_busy(),
            Error::Capture(e) => e.is_busy(),
            Error::Restore(r) => r.is_busy(),
            Error::Open(e) => e.is_busy(),
            _ => false,
        }
    }
}

/// Installs a panic hook for the binaries: a panic inside redb (which 4.6 raises on some
/// corrupted pages; retrace catches those it can and sets the store aside) is reported in one
/// line instead of a backtrace; output to a closed pipe ends the process quietly (exit 141,
/// as SIGPIPE would); any other panic keeps the default report.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // `retrace log | head`: stdout closed early is not an error worth a backtrace; exit
        // as a process killed by SIGPIPE would.
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        let in_redb = info.location().is_some_and(|l| l.file().contains("/redb-"));
        if in_redb {
            let what = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            eprintln!("retrace: the store database reported damage ({what})");
        } else {
            default(info);
        }
    }));
}
