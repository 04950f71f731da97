//! The working copy: one workspace folder and its store, opened, locked, captured and
//! restored. Everything that touches the managed files goes through a lock guard taken
//! here: [`Shared`] to capture and record, [`Exclusive`] to write files (journaled restores,
//! recovery, maintenance). Sessions and retention are built above it; [`crate::Workspace`]
//! is the facade over all of them.

mod capture;
mod guard;
pub(crate) mod journaled;
mod open;
pub(crate) mod partial;
mod paths;
mod restore;
mod status;

pub(crate) use guard::{Holders, unsaved};
pub use paths::normalize_paths;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::config::{DEFAULT_HISTORY_WAIT, DEFAULT_MAX_TURNS, Settings};
use crate::error::StoreError;
use crate::home;
use crate::lock::{LockMode, WorkspaceLock};
use crate::object::ObjectId;
use crate::restore::RestoreOutcome;
use crate::store::Store;

/// Most paths listed when a guard refuses.
pub const MAX_LISTED: usize = 20;

/// Options for opening a workspace.
#[derive(Clone, Debug)]
pub struct Config {
    home: PathBuf,
    max_turns: u64,
    history_wait: Duration,
    /// Read the config files and environment settings (see [`crate::config`]).
    read_settings: bool,
    /// Opening does not wait for another process's restore (see [`Config::for_reading`]).
    for_reading: bool,
    /// Settings used when the files are not read.
    settings: Settings,
    /// Measures free disk space (a seam: tests give a full disk).
    free_space: crate::store::FreeSpace,
}

impl Config {
    /// Reads `RETRACE_HOME` (else `$XDG_STATE_HOME/retrace`, else `~/.local/state/retrace`);
    /// workspaces opened with it also read the settings files and environment (see
    /// `crate::config`).
    #[must_use]
    pub fn from_env() -> Config {
        Config {
            read_settings: true,
            ..Config::with_home(home::default_home())
        }
    }

    /// Uses `home` as the retrace home directory.
    #[must_use]
    pub fn with_home(home: impl Into<PathBuf>) -> Config {
        Config {
            home: home.into(),
            max_turns: DEFAULT_MAX_TURNS,
            history_wait: DEFAULT_HISTORY_WAIT,
            read_settings: false,
            for_reading: false,
            settings: Settings::default(),
            free_space: crate::store::free_space,
        }
    }

    /// Measures free disk space with `f` instead of `statvfs` (tests simulate a full disk).
    #[doc(hidden)]
    #[must_use]
    pub fn free_space_probe(mut self, f: crate::store::FreeSpace) -> Config {
        self.free_space = f;
        self
    }

    /// For commands that only read (`status`, `log`, `diff`): opening never waits for
    /// another process's restore. A restore in progress is reported at once in
    /// `WorkingCopy::warnings` ("a restore (undo of turn 3) is in progress in process
    /// 1234"), and its recovery, if it was interrupted, is left to the next command that can
    /// take the lock.
    #[must_use]
    pub fn for_reading(mut self) -> Config {
        self.for_reading = true;
        self
    }

    /// Keeps at most `n` turns per session (at least 1).
    #[must_use]
    pub fn max_turns(mut self, n: u64) -> Config {
        self.max_turns = n.max(1);
        self
    }

    /// Waits at most `wait` for other processes before undo, redo or navigate answer busy.
    #[must_use]
    pub fn history_wait(mut self, wait: Duration) -> Config {
        self.history_wait = wait;
        self
    }

    /// Reads the settings files and environment for each workspace opened (as
    /// [`Config::from_env`] does), with this home.
    #[must_use]
    pub fn reading_settings(mut self) -> Config {
        self.read_settings = true;
        self
    }

    /// Changes settings directly (tests, embedding hosts), instead of reading files.
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut Settings)) -> Config {
        f(&mut self.settings);
        self
    }

    /// The retrace home directory.
    #[must_use]
    pub fn home(&self) -> &Path {
        &self.home
    }
}

/// Options for [`crate::Workspace::restore`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RestoreOptions {
    /// Restore even over changes not in any snapshot (they are snapshotted first).
    pub force: bool,
    /// Only report what would change.
    pub dry_run: bool,
}

/// What [`crate::Workspace::restore_dry_run`] found: what the restore would do, and whether it would
/// be refused.
#[derive(Clone, Debug, Serialize)]
pub struct DryRun {
    /// What the restore would write, delete and leave alone, computed against the disk as it
    /// is (what `--force` would do, after its safety snapshot).
    #[serde(flatten)]
    pub outcome: RestoreOutcome,
    /// Set when the restore itself would be refused: the disk holds changes no snapshot has
    /// and `force` is not set.
    pub refused: Option<DirtyRefusal>,
}

/// Why a restore would be refused: the workspace is dirty, or paths it would change hold
/// another writer's work.
#[derive(Clone, Debug, Serialize)]
pub struct DirtyRefusal {
    /// `"dirty"` (changes no snapshot holds) or `"held"` (another writer's work, see
    /// [`RestoreError::Held`](crate::error::RestoreError::Held)), as the `result` of a
    /// refused command.
    pub result: &'static str,
    /// The refusal's message (what to do).
    pub message: String,
    /// Changed paths, at most [`MAX_LISTED`].
    pub paths: Vec<String>,
    /// How many paths changed in all.
    pub count: usize,
}

/// `retrace status`.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// Workspace root.
    pub root: PathBuf,
    /// Store file.
    pub store: PathBuf,
    /// Disk space the store file occupies.
    pub store_bytes: u64,
    /// States recorded: snapshots, a snapshot taken right after another that found the same
    /// files counted once (as `retrace log --snapshots` lists them).
    pub snapshots: u64,
    /// Names excluded whatever the ignore rules say, plus the store directory.
    pub exclusions: Vec<String>,
    /// Root id of the last known state.
    pub last_known: Option<ObjectId>,
    /// Paths that differ from the last known state (at most [`MAX_LISTED`]).
    pub changed: Vec<String>,
    /// How many paths differ in all.
    pub changed_count: usize,
    /// Nested repositories left alone.
    pub nested_repos: Vec<String>,
    /// The `nested_repos` setting: whether nested repositories' files are captured.
    pub nested_repos_mode: crate::config::NestedRepos,
    /// Nested repositories whose working files are captured (mode `capture`).
    pub captured_repos: Vec<String>,
    /// A restore that began and has not finished (in progress elsewhere, or interrupted and
    /// not yet recovered): what it is and the process that started it.
    pub pending_recovery: Option<String>,
    /// Why files are never snapshotted here (home directory, filesystem root, temp dir).
    pub conversation_only: Option<String>,
    /// The watcher serving the workspace (`retrace watch`), when one answers.
    pub watcher: Option<crate::watch::WatchStatus>,
    /// Why the status's own capture walked the workspace (None when a watcher vouched).
    pub walked_because: Option<String>,
}

/// A workspace folder and its store. Opening one is cheap; clones share the store. Reads
/// need no lock; captures take [`WorkingCopy::lock_shared`], file writes
/// [`WorkingCopy::lock_exclusive`], and the functions that need a lock take its guard.
#[derive(Clone)]
pub struct WorkingCopy {
    root: PathBuf,
    dir: PathBuf,
    store: Arc<Store>,
    max_turns: u64,
    history_wait: Duration,
    /// The retrace home (host id, leases).
    home: PathBuf,
    settings: Settings,
    allow_secrets: Option<Arc<globset::GlobSet>>,
    /// Why files are never snapshotted here (home, filesystem root, temp directory).
    refused: Option<String>,
    warnings: Arc<Mutex<Vec<String>>>,
}

/// The workspace lock held shared: captures that record history may run; no restore writes
/// files meanwhile. Derefs to the [`WorkingCopy`]; released on drop.
pub struct Shared<'w> {
    wc: &'w WorkingCopy,
    lock: WorkspaceLock,
}

impl std::ops::Deref for Shared<'_> {
    type Target = WorkingCopy;
    fn deref(&self) -> &WorkingCopy {
        self.wc
    }
}

/// The workspace lock held exclusively: nothing else reads or writes the managed files.
/// Derefs to [`Shared`] (whatever a shared holder may do, this one may too); adds the file
/// writes. Released on drop.
pub struct Exclusive<'w>(Shared<'w>);

impl<'w> std::ops::Deref for Exclusive<'w> {
    type Target = Shared<'w>;
    fn deref(&self) -> &Shared<'w> {
        &self.0
    }
}

/// A shared lock carried to another thread without its borrow, together with a clone of
/// the working copy it locks (a turn's before-capture runs in the background).
pub(crate) struct Detached {
    dir: PathBuf,
    lock: WorkspaceLock,
}

impl Detached {
    /// The lock again as a guard over `wc`, which must be a clone of the working copy it was
    /// taken on (the same store directory).
    pub(crate) fn attach(self, wc: &WorkingCopy) -> Shared<'_> {
        debug_assert_eq!(self.dir, wc.dir, "a lock attached to another workspace");
        Shared {
            wc,
            lock: self.lock,
        }
    }
}

impl WorkingCopy {
    /// Takes the workspace lock shared (captures that record history), waiting at most
    /// `wait` (see [`crate::lock`]).
    ///
    /// # Errors
    /// [`StoreError::Busy`] when a restore holds it longer.
    pub fn lock_shared(&self, wait: Duration) -> Result<Shared<'_>, StoreError> {
        Ok(Shared {
            wc: self,
            lock: crate::lock::lock(&self.dir.join("lock"), LockMode::Shared, wait)?,
        })
    }

    /// Takes the workspace lock exclusively (restores, recovery, maintenance), waiting at
    /// most `wait`.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when another holder keeps it longer.
    pub fn lock_exclusive(&self, wait: Duration) -> Result<Exclusive<'_>, StoreError> {
        Ok(Exclusive(Shared {
            wc: self,
            lock: crate::lock::lock(&self.dir.join("lock"), LockMode::Exclusive, wait)?,
        }))
    }
}

impl Shared<'_> {
    /// The lock without its borrow, to be attached to a clone of this working copy on
    /// another thread.
    pub(crate) fn detach(self) -> Detached {
        Detached {
            dir: self.wc.dir.clone(),
            lock: self.lock,
        }
    }
}
