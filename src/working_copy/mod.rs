//! The working copy: one workspace folder and its store, opened, locked, captured and
//! restored. Everything that touches the managed files goes through a lock guard taken
//! here: [`Shared`] to capture and record, [`Exclusive`] to write files (journaled restores,
//! recovery, maintenance). Sessions and retention are built above it; [`crate::Workspace`]
//! is the facade over all of them.

pub(crate) mod journaled;
pub(crate) mod partial;
mod paths;

pub use paths::normalize_paths;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

use crate::object::FlatEntry;
use crate::capture::{self, Capture, CaptureContext, CaptureOptions};
use crate::config::{DEFAULT_HISTORY_WAIT, DEFAULT_MAX_TURNS, Settings};
use crate::diff::{Diff, below_any, diff, flatten, flatten_changed};
use crate::error::{Error, RestoreError, StoreError};
use crate::home;
use crate::lock::{LockMode, WorkspaceLock};
use crate::object::ObjectId;
use crate::progress::{NoProgress, Progress};
use crate::restore::journal::Then;
use crate::restore::{RestoreOutcome, apply, plan};
use crate::scan::exclude::HARD_EXCLUSIONS;
use crate::store::{SnapshotRecord, Store, now_ms};

/// Restores touching fewer paths than this read back every file they wrote; bigger ones
/// check their `lstat` (see [`apply::Look`]).
const CONTENT_CHECK_BELOW: usize = 1000;

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
    /// [`RestoreError::Held`]), as the `result` of a refused command.
    pub result: &'static str,
    /// The refusal's message (what to do).
    pub message: String,
    /// Changed paths, at most [`MAX_LISTED`].
    pub paths: Vec<String>,
    /// How many paths changed in all.
    pub count: usize,
}

/// A restore planned and verified, not yet written.
pub(crate) struct Prepared {
    plan: crate::restore::plan::Plan,
    data: apply::Content,
    out: Applied,
    /// The directories the plan acts in, opened below the root (`None` for a dry run).
    beneath: Option<crate::restore::beneath::Beneath>,
}

/// What [`WorkingCopy::apply_target`] did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub written: Vec<String>,
    pub deleted: Vec<String>,
    pub left_alone: Vec<crate::scan::Skipped>,
    pub removed_dirs: Vec<String>,
    /// Paths not as planned after the restore (see [`apply::Look`]).
    pub verify_diff: Vec<String>,
    /// A restore that left something as someone else wrote it, or a directory it meant to
    /// remove: the caller stores the disk as it is.
    pub rescan: bool,
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

/// `workspace.json` in the store directory: informational (`retrace gc` reads it to find
/// vanished workspaces).
#[derive(Serialize)]
struct Info<'a> {
    path: &'a str,
    last_used_ms: u64,
}

/// Renames a damaged store aside as `store.redb.invalid-<unix seconds>` (with a counter if
/// that name is taken) and returns the new name.
fn quarantine(path: &Path) -> Result<PathBuf, Error> {
    let secs = now_ms() / 1000;
    let name = path
        .file_name()
        .map_or_else(Default::default, std::ffi::OsStr::to_os_string);
    for i in 0..1000 {
        let mut kept = name.clone();
        kept.push(if i == 0 {
            format!(".invalid-{secs}")
        } else {
            format!(".invalid-{secs}-{i}")
        });
        let kept = path.with_file_name(kept);
        if kept.symlink_metadata().is_ok() {
            continue;
        }
        return match std::fs::rename(path, &kept) {
            Ok(()) => Ok(kept),
            Err(source) => Err(Error::Store(StoreError::CreateDir { path: kept, source })),
        };
    }
    Err(Error::Workspace {
        path: path.into(),
        reason: "too many damaged stores kept beside it; remove old *.invalid-* files".into(),
    })
}

/// How many states `log` (oldest first) holds: a run of snapshots of one root is one.
fn states(log: &[crate::store::SnapshotRecord]) -> u64 {
    let runs = 1 + log.windows(2).filter(|w| w[0].root != w[1].root).count();
    if log.is_empty() { 0 } else { runs as u64 }
}

/// The directory of the store of workspace `root` under the (canonical) retrace home.
fn store_dir(home_dir: &Path, root: &Path) -> PathBuf {
    home_dir.join("workspaces").join(home::workspace_id(root))
}

impl WorkingCopy {
    /// Opens the workspace containing `path` (the git toplevel when inside a git worktree,
    /// else `path` itself), creating its store on first use.
    ///
    /// # Errors
    /// [`Error::Workspace`] for a missing directory or a store inside the workspace;
    /// [`Error::Store`] when the store cannot be opened.
    pub(crate) fn open<T: Then>(path: &Path, config: &Config) -> Result<WorkingCopy, Error> {
        let home::Root {
            path: root,
            refused,
        } = home::resolve_root(path, config.home())?;
        home::create_private_dir(config.home())?;
        let home_dir = config.home().canonicalize().map_err(|source| {
            Error::Store(StoreError::CreateDir {
                path: config.home().into(),
                source,
            })
        })?;
        let dir = store_dir(&home_dir, &root);
        // (Where nothing is ever captured, a store inside changes nothing.)
        if dir.starts_with(&root) && refused.is_none() {
            return Err(Error::Workspace {
                path: root,
                reason: format!(
                    "the store directory {} would lie inside the workspace; set RETRACE_HOME \
                     to a directory outside it",
                    dir.display()
                ),
            });
        }
        home::create_private_dir(&dir)?;
        let store_path = dir.join("store.redb");
        let (settings, mut warnings) = if config.read_settings {
            Settings::load(Some(&root))
        } else {
            (config.settings.clone(), Vec::new())
        };
        if let Some(why) = &refused {
            warnings.push(format!(
                "{why}: retrace keeps conversation history here but never snapshots files (it \
                 would copy credentials and other programs' data); use a project folder"
            ));
        }
        // A setting from a file or the environment wins over the built-in default only.
        let max_turns = match settings.max_turns.source {
            crate::config::Source::Default => config.max_turns,
            _ => settings.max_turns.value,
        };
        let history_wait = match settings.history_wait_ms.source {
            crate::config::Source::Default => config.history_wait,
            _ => Duration::from_millis(settings.history_wait_ms.value),
        };
        let store = match Store::open_with(&store_path, &root, config.free_space) {
            Ok(s) => s,
            Err(e) if e.is_damage() => {
                // Never overwrite it, never give up: keep the file for inspection, start over.
                let kept = quarantine(&store_path)?;
                warnings.push(format!(
                    "{e}; it was kept as {} and a fresh store was created (earlier snapshots \
                     are in the kept file only)",
                    kept.display()
                ));
                Store::open_with(&store_path, &root, config.free_space)?
            }
            Err(e) => return Err(e.into()),
        };
        let info = serde_json::to_string(&Info {
            path: &root.to_string_lossy(),
            last_used_ms: now_ms(),
        })
        .map(|j| j + "\n")
        .unwrap_or_default();
        // Informational only: failing to write it changes nothing.
        let _ = crate::home::write_private(&dir.join("workspace.json"), info.as_bytes());
        let ws = WorkingCopy {
            root,
            dir,
            store: Arc::new(store),
            max_turns,
            history_wait,
            allow_secrets: settings.allowed_secrets().map(Arc::new),
            refused,
            settings,
            home: home_dir.clone(),
            warnings: Arc::new(Mutex::new(warnings)),
        };
        // A reader does not wait at all for the lock recovery needs.
        ws.recover_if_needed::<T>(if config.for_reading {
            Duration::ZERO
        } else {
            history_wait
        });
        Ok(ws)
    }

    /// The store file a workspace containing `path` uses, without opening or creating it.
    ///
    /// # Errors
    /// [`Error::Workspace`] when `path` does not exist.
    pub fn locate_store(path: &Path, config: &Config) -> Result<PathBuf, Error> {
        let root = home::resolve_root(path, config.home())?.path;
        let home_dir = config
            .home()
            .canonicalize()
            .unwrap_or_else(|_| config.home().to_path_buf());
        Ok(store_dir(&home_dir, &root).join("store.redb"))
    }

    /// What opening the workspace had to do that the user should know (a damaged store set
    /// aside, an interrupted restore recovered). Each is one line.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds a line to [`WorkingCopy::warnings`].
    pub(crate) fn warn(&self, line: String) {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }

    /// Why files are never snapshotted in this workspace (the home directory or above, a
    /// filesystem root, the temp directory), or None for an ordinary workspace.
    #[must_use]
    pub fn conversation_only(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Where action state for external clients is published (`RETRACE_RUNTIME_DIR`, else
    /// `<retrace home>/runtime`).
    #[must_use]
    pub fn runtime_dir(&self) -> PathBuf {
        match self.settings.runtime_dir.value.as_str() {
            "" => self.home.join("runtime"),
            d => PathBuf::from(d),
        }
    }

    /// Says once (a marker beside the watcher's socket remembers it) that the watcher ran
    /// out of inotify watches, with the line that raises the limit.
    fn warn_watch_limit_once(&self, runtime_dir: &Path) {
        let marker =
            crate::watch::socket_path(runtime_dir, &self.root).with_extension("limit-said");
        if marker.exists() {
            return;
        }
        let _ = std::fs::write(&marker, b"");
        let need = self.watcher_status().map_or(0, |s| s.watches);
        let max = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .map_or_else(|_| "unknown".into(), |t| t.trim().to_string());
        let want = (2 * need).max(524_288);
        self.warn(format!(
            "the watcher of {} ran out of inotify watches (fs.inotify.max_user_watches is {max}, \
             shared by all of this user's programs; it had {need} directories when it stopped); \
             captures walk instead. To raise it: `sudo sysctl fs.inotify.max_user_watches={want}` \
             and, to keep it, `echo fs.inotify.max_user_watches={want} | sudo tee \
             /etc/sysctl.d/90-retrace-inotify.conf`",
            self.root.display()
        ));
    }

    /// What a watcher of this workspace needs (`retrace watch`, or one hosted by `serve`).
    #[must_use]
    pub fn watch_spec(&self) -> crate::watch::WatchSpec {
        let idle_secs = self.settings.watch_idle_minutes.value * 60.0;
        crate::watch::WatchSpec {
            root: self.root.clone(),
            store_dir: Some(self.dir.clone()),
            runtime_dir: self.runtime_dir(),
            idle: Duration::try_from_secs_f64(idle_secs).unwrap_or(Duration::from_hours(1)),
            sweep: crate::watch::SWEEP_EVERY,
        }
    }

    /// The status of the workspace's watcher, when one answers within a second.
    #[must_use]
    pub fn watcher_status(&self) -> Option<crate::watch::WatchStatus> {
        crate::watch::status(&self.runtime_dir(), &self.root, Duration::from_secs(1))
    }

    /// The effective settings and where each came from.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether the store holds object `id` and it verifies (reads it whole).
    #[must_use]
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests
    pub fn verify_object(&self, id: &ObjectId) -> bool {
        self.store.reader().is_ok_and(|r| r.read_blob(id).is_ok())
    }

    /// The workspace root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store file.
    #[must_use]
    pub fn store_path(&self) -> &Path {
        self.store.path()
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store's directory under the retrace home (lock, stat cache, markers).
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The retrace home (host id, leases, runtime state).
    #[must_use]
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Turns a session keeps at most.
    #[must_use]
    pub fn max_turns(&self) -> u64 {
        self.max_turns
    }

    /// How long undo, redo and navigate wait for other processes before answering busy.
    #[must_use]
    pub fn history_wait(&self) -> Duration {
        self.history_wait
    }

    /// Takes the workspace lock shared (captures that record history), waiting at most
    /// `wait` (see [`crate::lock`]).
    ///
    /// # Errors
    /// [`StoreError::Busy`] (wrapped) when a restore holds it longer.
    pub fn lock_shared(&self, wait: Duration) -> Result<Shared<'_>, Error> {
        Ok(Shared {
            wc: self,
            lock: crate::lock::lock(&self.dir.join("lock"), LockMode::Shared, wait)?,
        })
    }

    /// Takes the workspace lock exclusively (restores, recovery, maintenance), waiting at
    /// most `wait`.
    ///
    /// # Errors
    /// [`StoreError::Busy`] (wrapped) when another holder keeps it longer.
    pub fn lock_exclusive(&self, wait: Duration) -> Result<Exclusive<'_>, Error> {
        Ok(Exclusive(Shared {
            wc: self,
            lock: crate::lock::lock(&self.dir.join("lock"), LockMode::Exclusive, wait)?,
        }))
    }

    fn capture(&self, opts: &CaptureOptions<'_>) -> Result<Capture, Error> {
        if let Some(why) = &self.refused {
            return Err(Error::Workspace {
                path: self.root.clone(),
                reason: format!(
                    "{why}; retrace does not snapshot it (conversation history only). Run it in \
                     a project folder"
                ),
            });
        }
        let statcache = self.dir.join("statcache");
        let runtime_dir = self.runtime_dir();
        // What the settings add to the walk's rules key: the credentials allowed back.
        let rules_settings = self.settings.allow_secrets.value.join("\0");
        let ctx = CaptureContext {
            allow_secrets: self.allow_secrets.as_deref(),
            rules_settings: rules_settings.as_bytes(),
            root: &self.root,
            store: &self.store,
            statcache: &statcache,
            store_dir: Some(&self.dir),
            nested_repos: self.settings.nested_repos.value,
            watch: Some(crate::capture::WatchAsk {
                runtime_dir: &runtime_dir,
                timeout: Duration::from_millis(self.settings.watch_timeout_ms.value),
                rescan: opts.rescan,
            }),
        };
        let captured = capture::capture(&ctx, opts);
        if let Ok(c) = &captured
            && c.walked_because.as_deref() == Some("watch_limit")
        {
            self.warn_watch_limit_once(&runtime_dir);
        }
        if captured.is_err() {
            // A disk that filled during the write: give its pages back now (see store::space).
            self.store.give_back();
        }
        Ok(captured?)
    }

    /// [`crate::Workspace::snapshot_with`]: recovers an interrupted restore, whose journal
    /// records a `T`, first.
    pub(crate) fn snapshot_with<T: Then>(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
        list: bool,
        rescan: bool,
    ) -> Result<Capture, Error> {
        self.recover_if_needed::<T>(self.history_wait);
        let lock = self.lock_shared(crate::store::LOCK_WAIT)?;
        let c = lock.capture(&CaptureOptions {
            store_objects: true,
            record: Some(label),
            progress,
            also: None,
            list,
            rescan,
            cache: crate::capture::CacheRewrite::Always,
        })?;
        drop(lock);
        Ok(c)
    }

    /// Scans the disk and computes its snapshot id without storing anything.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn scan_disk(&self, progress: &dyn Progress) -> Result<Capture, Error> {
        self.capture(&CaptureOptions {
            store_objects: false,
            record: None,
            progress,
            also: None,
            list: true,
            rescan: false,
            cache: crate::capture::CacheRewrite::Always,
        })
    }

    /// Snapshots of this workspace, newest first.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn log(&self) -> Result<Vec<SnapshotRecord>, Error> {
        let mut all = self.store.reader()?.snapshots()?;
        all.reverse();
        Ok(all)
    }

    /// Paths that differ from snapshot `a` to snapshot `b`, or to the disk when `b` is None.
    ///
    /// # Errors
    /// [`Error::Store`] for missing or corrupt objects.
    pub fn diff(&self, a: &ObjectId, b: Option<&ObjectId>) -> Result<Diff, Error> {
        let reader = self.store.reader()?;
        let from = flatten(&reader, a)?;
        let to = match b {
            Some(b) => flatten(&reader, b)?,
            None => self.scan_disk(&NoProgress)?.entries,
        };
        Ok(diff(&from, &to))
    }

    /// The unified diffs ([`crate::patch`]) from snapshot `a` (or nothing) to snapshot `b`
    /// (or the disk) of the changed files that [`crate::diff::selected`] keeps of `only`,
    /// sorted by path.
    ///
    /// # Errors
    /// [`Error::Store`] for a damaged snapshot tree; a file whose content cannot be read is
    /// named in its patch instead.
    pub fn patches(
        &self,
        a: Option<&ObjectId>,
        b: Option<&ObjectId>,
        only: &[String],
    ) -> Result<Vec<crate::patch::FilePatch>, Error> {
        let reader = self.store.reader()?;
        let from = match a {
            Some(a) => flatten(&reader, a)?,
            None => Vec::new(),
        };
        let to = match b {
            Some(b) => flatten(&reader, b)?,
            None => self.scan_disk(&NoProgress)?.entries,
        };
        let sides = crate::patch::Sides {
            reader: &reader,
            disk: b.is_none().then_some(self.root()),
        };
        let mut out = Vec::new();
        for (old, new) in crate::diff::changed_pairs(&from, &to) {
            let path = old.or(new).map(|e| e.path.show()).unwrap_or_default();
            if crate::diff::selected(&path, only) {
                out.extend(crate::patch::patches(sides, old, new));
            }
        }
        Ok(out)
    }

    /// A restore, or with `dry_run` its plan plus the refusal a real restore would meet
    /// (journals record a `T`: `then`, recorded with its result, or the user's restore).
    pub(crate) fn restore_or_plan<T: Then>(
        &self,
        id: &ObjectId,
        opts: RestoreOptions,
        then: Option<T>,
        holders: &dyn Holders,
        progress: &dyn Progress,
    ) -> Result<(RestoreOutcome, Option<DirtyRefusal>), Error> {
        let mut phases = crate::trace::Phases::new("restore");
        let lock = if opts.dry_run {
            None
        } else {
            Some(self.lock_exclusive(crate::store::LOCK_WAIT)?)
        };
        if let Some(ex) = &lock
            && let Some(report) = ex.recover::<T>(progress)?
        {
            self.warn(report);
        }
        // Stored unless a dry run: the journal's source must be a complete snapshot. Stored
        // without a list of every path (a watcher then spares the walk): the trees say what
        // differs, and the disk is read from its snapshot where it does.
        let mut current = match &lock {
            None => self.scan_disk(progress)?,
            Some(ex) => ex.store_disk_unlisted(progress)?,
        };
        let reader = self.store.reader()?;
        phases.mark("scan disk");
        let mut outcome = RestoreOutcome {
            target: Some(*id),
            dry_run: opts.dry_run,
            ..RestoreOutcome::default()
        };
        let label = format!("safety: before forced restore to {}", id.short());
        let (refused, safety) = dirty_guard(
            &reader,
            (&mut current, id),
            &[],
            opts,
            lock.as_ref(),
            label,
            progress,
        )?;
        outcome.safety_snapshot = safety;
        // Only the subtrees whose ids differ from the disk's are read and compared (read by
        // a reader that sees the safety snapshot's trees, if one was stored).
        let reader = if safety.is_some() {
            self.store.reader()?
        } else {
            reader
        };
        let target = if lock.is_some() {
            let (disk, target) = partial::sides(crate::diff::changes(&reader, &current.id, id)?);
            current.entries = disk;
            target
        } else {
            let (target, same) = flatten_changed(&reader, id, &current.entries)?;
            current.entries.retain(|e| !below_any(&e.path, &same));
            target
        };
        // The disk's entries where the restore changes it: the paths the guard asks about.
        let held = holders.held(
            &reader,
            &current.entries,
            lock.is_some().then_some(current.id),
        )?;
        let changed = || diff(&current.entries, &target).paths().into_iter();
        let refused = match refused {
            Some(r) => Some(r),
            None if held.is_empty() => None,
            None => held_guard(&held, changed(), opts)?,
        };
        phases.mark("read changed trees");
        let Some(ex) = lock else {
            let applied = self
                .prepare_target(&reader, &current.entries, &target, true)?
                .out;
            outcome.written = applied.written;
            outcome.deleted = applied.deleted;
            outcome.left_alone = applied.left_alone;
            outcome.verified = true;
            return Ok((outcome, refused));
        };
        let fin = ex.journaled_apply::<T>(
            &reader,
            journaled::JournaledRestore {
                what: format!("restore to {}", id.short()),
                source: current.id,
                target: *id,
                frames: Vec::new(),
                then,
                record: None,
            },
            &current.entries,
            &target,
            progress,
        )?;
        phases.mark("plan and apply");
        fin.recorded?;
        outcome.written = fin.applied.written;
        outcome.deleted = fin.applied.deleted;
        outcome.left_alone = fin.applied.left_alone;
        outcome.removed_dirs = fin.applied.removed_dirs;
        outcome.verify_diff = fin.applied.verify_diff;
        if let Some(after) = fin.capture {
            // Not exactly as planned: the disk as stored says what differs from the target,
            // apart from what was left alone.
            let left: std::collections::HashSet<&str> =
                outcome.left_alone.iter().map(|s| s.path.as_str()).collect();
            outcome.verify_diff = diff(&flatten(&reader, id)?, &after.entries)
                .paths()
                .into_iter()
                .filter(|p| !left.contains(p.as_str()))
                .collect();
        }
        outcome.verified = outcome.verify_diff.is_empty();
        phases.mark("check and record");
        drop(reader);
        Ok((outcome, None))
    }

    /// The first half of [`Exclusive::apply_target`], which writes nothing: the plan, every
    /// object read and verified, and every directory it writes into checked writable. Its
    /// failures leave the workspace untouched.
    pub(crate) fn prepare_target(
        &self,
        reader: &crate::store::StoreReader,
        current: &[FlatEntry],
        target: &[FlatEntry],
        dry_run: bool,
    ) -> Result<Prepared, Error> {
        let mut phases = crate::trace::Phases::new("restore");
        let plan = plan::plan(&self.root, current, target)?;
        let mut left_alone = plan.left_alone.clone();
        plan::explain_left_alone(&self.root, current, &mut left_alone);
        phases.mark("plan");
        let out = Applied {
            written: plan.writes.iter().map(|w| w.entry.path.show()).collect(),
            deleted: plan.deletes.iter().map(|d| d.path.show()).collect(),
            left_alone,
            ..Applied::default()
        };
        let (data, beneath) = if dry_run {
            (apply::Content::default(), None)
        } else {
            let data = apply::verify(reader, &plan)?;
            self.check_workspace_space(&plan)?;
            let beneath = crate::restore::beneath::Beneath::open(&self.root)?;
            apply::preflight(&beneath, &plan)?;
            phases.mark("space and preflight");
            (data, Some(beneath))
        };
        Ok(Prepared {
            plan,
            data,
            out,
            beneath,
        })
    }

    /// Refuses, before anything is written or deleted, a restore whose writes cannot fit on
    /// the workspace's disk: their bytes, a block per file and 1 MiB (each version is written
    /// beside the one it replaces before that one is freed).
    fn check_workspace_space(&self, plan: &plan::Plan) -> Result<(), RestoreError> {
        if plan.writes.is_empty() {
            return Ok(());
        }
        let bytes: u64 = plan
            .writes
            .iter()
            .map(|w| w.entry.size.saturating_add(4096))
            .sum();
        let needed = bytes.saturating_add(1 << 20);
        let free = self.store.free_bytes_at(&self.root);
        if free < needed {
            return Err(RestoreError::NoSpace {
                path: self.root.clone(),
                needed,
                free,
            });
        }
        Ok(())
    }

    /// Root, store, counts, exclusions and whether the disk differs from the last known state.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub(crate) fn status<T: Then>(&self) -> Result<Status, Error> {
        let reader = self.store.reader()?;
        let last_known = reader.last_known()?;
        let mut current = if self.refused.is_some() {
            Capture::default()
        } else {
            self.scan_disk(&NoProgress)?
        };
        let changed = match last_known {
            Some(k) if k != current.id => {
                // Only the subtrees whose ids differ can hold changes.
                let (known, same) = flatten_changed(&reader, &k, &current.entries)?;
                current.entries.retain(|e| !below_any(&e.path, &same));
                diff(&known, &current.entries).paths()
            }
            _ => Vec::new(),
        };
        let mut exclusions: Vec<String> =
            HARD_EXCLUSIONS.iter().map(|s| (*s).to_string()).collect();
        exclusions.push(format!("{} (the store)", self.dir.display()));
        Ok(Status {
            root: self.root.clone(),
            store: self.store.path().to_path_buf(),
            store_bytes: crate::store::disk_bytes(self.store.path()),
            snapshots: states(&reader.snapshots()?),
            exclusions,
            last_known,
            changed_count: changed.len(),
            changed: changed.into_iter().take(MAX_LISTED).collect(),
            watcher: self.watcher_status(),
            walked_because: current.walked_because.clone(),
            nested_repos: current.nested_repos,
            nested_repos_mode: self.settings.nested_repos.value,
            captured_repos: current.captured_repos,
            pending_recovery: crate::restore::journal::get::<T>(&self.store.begin_read()?)?
                .map(|j| format!("{} (started by process {})", j.what, j.pid)),
            conversation_only: self.refused.clone(),
        })
    }
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

impl Shared<'_> {
    /// The lock without its borrow, to be attached to a clone of this working copy on
    /// another thread.
    pub(crate) fn detach(self) -> Detached {
        Detached {
            dir: self.wc.dir.clone(),
            lock: self.lock,
        }
    }

    /// Captures and records a snapshot.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn record(&self, label: Option<String>, progress: &dyn Progress) -> Result<Capture, Error> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: Some(label),
            progress,
            also: None,
            list: true,
            rescan: false,
            cache: crate::capture::CacheRewrite::Always,
        })
    }

    /// Captures the disk, storing new objects but recording no snapshot (so every entry of
    /// the result is in the store).
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub fn store_disk(&self, progress: &dyn Progress) -> Result<Capture, Error> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: None,
            progress,
            also: None,
            list: true,
            rescan: false,
            cache: crate::capture::CacheRewrite::Always,
        })
    }

    /// [`Exclusive::store_disk`] without the list of every path (its `entries` are empty):
    /// a watcher's answer can then spare the walk, and no list of the whole workspace is
    /// built. An operation that changes some paths reads the disk there from the stored
    /// snapshot ([`partial::entries_at`]). The stat cache is left as it is when only a few
    /// files were read ([`crate::capture::CacheRewrite::Deferred`]): the operation is about to write
    /// those paths, so the next capture would find their records stale anyway.
    ///
    /// # Errors
    /// As [`crate::Workspace::snapshot`].
    pub(crate) fn store_disk_unlisted(&self, progress: &dyn Progress) -> Result<Capture, Error> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: None,
            progress,
            also: None,
            list: false,
            rescan: false,
            cache: crate::capture::CacheRewrite::Deferred,
        })
    }

    /// The snapshot `entries` stands for (a full sorted list of what the disk will hold,
    /// directory ids right except at `dirty` paths, every file's blob already in the store):
    /// only the directories on dirty paths are rebuilt. Returns the root and the trees the
    /// store lacks, to be written before the snapshot is used.
    pub(crate) fn prepare_list(
        &self,
        entries: &mut [FlatEntry],
        dirty: &std::collections::HashSet<crate::object::RelPath>,
    ) -> Result<(ObjectId, Vec<crate::object::NewFrame>), Error> {
        let reader = self.store.reader()?;
        // Called from several threads (sibling directories are built in parallel).
        let found = Mutex::new((Vec::new(), None));
        let root = crate::capture::tree_of_list(entries, dirty, &|id, bytes| {
            let known = reader.contains(&id);
            let mut found = found.lock().unwrap_or_else(PoisonError::into_inner);
            match known {
                Ok(true) => {}
                Ok(false) => found.0.push(crate::object::PendingObject::whole(
                    id,
                    crate::object::ObjectKind::Tree,
                    bytes.len() as u64,
                    bytes,
                )),
                Err(e) => {
                    found.1.get_or_insert(e);
                }
            }
        });
        let (trees, fault) = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = fault {
            return Err(e.into());
        }
        Ok((root, crate::object::NewFrame::pack_trees(&trees)))
    }

    /// [`Shared::record`], writing `also`'s records in the capture's final commit.
    pub(crate) fn record_with(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
        also: crate::capture::AlsoCommit<'_>,
    ) -> Result<Capture, Error> {
        self.capture(&CaptureOptions {
            store_objects: true,
            record: Some(label),
            progress,
            also: Some(also),
            list: false,
            rescan: false,
            cache: crate::capture::CacheRewrite::Always,
        })
    }
}

impl Exclusive<'_> {
    /// Plans the change from `current` to `target` (both sorted flat lists), verifies every
    /// object it needs, then writes (unless `dry_run`).
    pub(crate) fn apply_target(
        &self,
        reader: &crate::store::StoreReader,
        current: &[FlatEntry],
        target: &[FlatEntry],
        dry_run: bool,
        progress: &dyn Progress,
    ) -> Result<Applied, Error> {
        let prepared = self.prepare_target(reader, current, target, dry_run)?;
        if dry_run {
            return Ok(prepared.out);
        }
        self.execute(reader, prepared, progress)
            .map_err(|f| (*f.error).into())
    }

    /// The second half of [`Exclusive::apply_target`]: writes, then checks. Paths someone
    /// changed while it ran are left (or kept) and listed in `left_alone`, not counted as
    /// written or deleted.
    pub(crate) fn execute(
        &self,
        reader: &crate::store::StoreReader,
        prepared: Prepared,
        progress: &dyn Progress,
    ) -> Result<Applied, apply::Failed> {
        let Prepared {
            plan,
            data,
            mut out,
            beneath,
        } = prepared;
        let failed = |e: RestoreError| apply::Failed {
            error: Box::new(e),
            touched: false,
        };
        let beneath = match beneath {
            Some(b) => b,
            None => crate::restore::beneath::Beneath::open(&self.root).map_err(failed)?,
        };
        // The stat cache spares reading a version before it is replaced or deleted, but
        // loading it reads every record of the workspace (its checksum): a restore of a few
        // files reads those files instead, and costs what it changes.
        let mut phases = crate::trace::Phases::new("restore");
        let path = self.dir.join("statcache");
        let cache_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let cache = if replaced_bytes(reader, &plan) < cache_bytes {
            crate::statcache::StatCache::empty()
        } else {
            reader.cache_key().map_or_else(
                |_| crate::statcache::StatCache::empty(),
                |id| crate::statcache::StatCache::load(&path, &id),
            )
        };
        phases.mark("stat cache");
        let applied = apply::apply(&beneath, reader, &plan, data, &cache, progress)?;
        phases.mark("apply");
        out.removed_dirs = applied.removed_dirs;
        if !applied.kept.is_empty() {
            let kept: std::collections::HashSet<&str> =
                applied.kept.iter().map(|k| k.path.as_str()).collect();
            out.written.retain(|p| !kept.contains(p.as_str()));
            out.deleted.retain(|p| !kept.contains(p.as_str()));
            out.left_alone.extend(applied.kept.iter().cloned());
            out.left_alone.sort_by(|a, b| a.path.cmp(&b.path));
            out.rescan = true;
        }
        // Re-read exactly what a small restore wrote; a big one was verified as it was
        // written, so its files are checked by their `lstat` (kind, mode, size). Either way
        // what it deleted must be gone. No full re-scan: files written just now are inside
        // the stat cache's racy window, so the next capture re-reads them whatever this one
        // would record (a re-scan was a third of a whole restore).
        let look = if plan.writes.len() + plan.deletes.len() < CONTENT_CHECK_BELOW {
            apply::Look::Content
        } else {
            apply::Look::Stat
        };
        out.verify_diff = apply::check(&self.root, &plan, look);
        phases.mark(&format!("check ({look:?})"));
        // A directory the plan meant to remove but that still holds ignored files stays on
        // disk: the disk is then not exactly the target list.
        if plan.prune.iter().any(|d| {
            crate::capture::abs_path(&self.root, d)
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir())
        }) {
            out.rescan = true;
        }
        Ok(out)
    }
}

/// The bytes of the versions `plan` replaces or deletes (what reading them to check them
/// costs); a version whose size the store cannot say counts as unbounded.
fn replaced_bytes(reader: &crate::store::StoreReader, plan: &plan::Plan) -> u64 {
    plan.writes
        .iter()
        .filter_map(|w| w.over)
        .chain(plan.deletes.iter().map(|d| d.expected))
        .map(|e| {
            if e.kind == crate::object::EntryKind::Symlink {
                return 0;
            }
            reader.record(&e.id).map_or(u64::MAX, |r| r.size)
        })
        .fold(0, u64::saturating_add)
}

/// Who else holds paths of the workspace right now, asked by a restore before it writes: a
/// restore that would change a held path is refused unless forced. The history layer
/// answers with its ownership rule (`crate::history`'s `Held`).
pub(crate) trait Holders {
    /// The paths another writer holds, each with who: `disk` is the workspace as the
    /// restore found it (`stored`: its id, when it was stored).
    ///
    /// # Errors
    /// [`Error::Store`].
    fn held(
        &self,
        reader: &crate::store::StoreReader,
        disk: &[FlatEntry],
        stored: Option<ObjectId>,
    ) -> Result<std::collections::BTreeMap<String, String>, Error>;
}

/// The guard of a restore against other writers: of `changed` (the paths it would
/// change), those `held` names. Unless `force`, that is [`RestoreError::Held`], or for a
/// dry run the refusal returned. Forced, the restore goes on: the disk it found is stored
/// (the last known snapshot, or the dirty guard's safety snapshot).
pub(crate) fn held_guard(
    held: &std::collections::BTreeMap<String, String>,
    changed: impl Iterator<Item = String>,
    opts: RestoreOptions,
) -> Result<Option<DirtyRefusal>, Error> {
    if held.is_empty() || opts.force {
        return Ok(None);
    }
    let clash: Vec<crate::error::HeldPath> = changed
        .filter_map(|p| {
            held.get(&p).map(|w| crate::error::HeldPath {
                path: p,
                writer: w.clone(),
            })
        })
        .collect();
    if clash.is_empty() {
        return Ok(None);
    }
    let count = clash.len();
    let listed: Vec<_> = clash.into_iter().take(MAX_LISTED).collect();
    let paths = listed.iter().map(|h| h.path.clone()).collect();
    let e = RestoreError::Held { held: listed };
    if !opts.dry_run {
        return Err(e.into());
    }
    Ok(Some(DirtyRefusal {
        result: "held",
        message: e.to_string(),
        paths,
        count,
    }))
}

/// Of `changes` from the last known state to the disk, the paths that hold work no
/// snapshot has and that a restore to `target` would lose: every changed file, link or
/// nested repository, but a file the disk lacks that `target` holds exactly as the known
/// state did (deleted since: the restore brings it back, and nothing is lost).
///
/// # Errors
/// [`StoreError`] when a tree of `target` cannot be read.
pub(crate) fn unsaved(
    reader: &crate::store::StoreReader,
    changes: Vec<crate::diff::Change>,
    target: &ObjectId,
) -> Result<Vec<String>, StoreError> {
    let leaf = |e: &Option<FlatEntry>| {
        e.as_ref()
            .is_some_and(|e| e.kind != crate::object::EntryKind::Dir)
    };
    let changes: Vec<_> = changes
        .into_iter()
        .filter(|c| leaf(&c.old) || leaf(&c.new))
        .collect();
    let deleted: Vec<&crate::diff::Change> = changes
        .iter()
        .filter(|c| c.new.is_none() && leaf(&c.old))
        .collect();
    let there = partial::entries_at(reader, target, deleted.iter().map(|c| &c.path))?;
    let brought_back: std::collections::HashSet<&crate::object::RelPath> = deleted
        .iter()
        .filter(|c| {
            let was = c.old.as_ref().map(|e| (e.kind, e.id));
            there
                .binary_search_by(|e| e.path.cmp(&c.path))
                .is_ok_and(|i| Some((there[i].kind, there[i].id)) == was)
        })
        .map(|c| &c.path)
        .collect();
    Ok(changes
        .iter()
        .filter(|c| !brought_back.contains(&c.path))
        .map(|c| c.path.show())
        .collect())
}

/// The guard of a restore to `target` over the paths `only` (all when empty): where the
/// disk `current` differs from the last known state, a restore would lose edits no
/// snapshot has, but for files deleted since that `target` brings back exactly as they
/// were ([`unsaved`]). Without `force` that is [`RestoreError::Dirty`], or for a dry run
/// the refusal returned; with it and the lock, the disk is recorded first as a safety
/// snapshot (`current` becomes it; its id is returned second).
#[allow(clippy::too_many_arguments)] // the lock is a proof, not data
pub(crate) fn dirty_guard(
    reader: &crate::store::StoreReader,
    (current, target): (&mut Capture, &ObjectId),
    only: &[String],
    opts: RestoreOptions,
    lock: Option<&Exclusive<'_>>,
    label: String,
    progress: &dyn Progress,
) -> Result<(Option<DirtyRefusal>, Option<ObjectId>), Error> {
    let last_known = reader.last_known()?;
    if last_known == Some(current.id) {
        return Ok((None, None));
    }
    let changed: Vec<String> = match last_known {
        // Stored (under the lock): the trees say what differs, read where they differ (by a
        // reader that sees the disk's trees, stored after `reader` was opened).
        Some(k) if let Some(ex) = lock => {
            let fresh = ex.store.reader()?;
            unsaved(
                &fresh,
                crate::diff::changes(&fresh, &k, &current.id)?,
                target,
            )?
        }
        Some(k) => {
            let changes = crate::diff::changes_of(&flatten(reader, &k)?, &current.entries);
            unsaved(reader, changes, target)?
        }
        // No known state: every path is unsaved work (stored without a list: read back).
        None if let Some(ex) = lock => flatten(&ex.store.reader()?, &current.id)?
            .iter()
            .map(|e| e.path.show())
            .collect(),
        None => current.entries.iter().map(|e| e.path.show()).collect(),
    }
    .into_iter()
    .filter(|p| crate::diff::selected(p, only))
    .collect();
    if changed.is_empty() {
        return Ok((None, None));
    }
    let mut refused = None;
    if !opts.force {
        let paths: Vec<String> = changed.iter().take(MAX_LISTED).cloned().collect();
        let count = changed.len();
        if !opts.dry_run {
            return Err(RestoreError::Dirty { paths, count }.into());
        }
        // A dry run goes on to show what would happen, and that it would be refused.
        refused = Some(DirtyRefusal {
            result: "dirty",
            message: RestoreError::Dirty {
                paths: paths.clone(),
                count,
            }
            .to_string(),
            paths,
            count,
        });
    }
    let mut safety = None;
    if let Some(ex) = lock {
        *current = ex.record(Some(label), progress)?;
        safety = Some(current.id);
    }
    Ok((refused, safety))
}
