//! Opening a working copy: its root resolved, its store found or created under the retrace
//! home (a damaged one set aside), its settings read; and what it answers about itself.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

use super::{Config, WorkingCopy};
use crate::config::Settings;
use crate::error::{OpenError, StoreError};
use crate::home;
use crate::object::ObjectId;
use crate::restore::journal::Then;
use crate::store::{Store, now_ms};

/// `workspace.json` in the store directory: informational (`retrace gc` reads it to find
/// vanished workspaces).
#[derive(Serialize)]
struct Info<'a> {
    path: &'a str,
    last_used_ms: u64,
}

/// Renames a damaged store aside as `store.redb.invalid-<unix seconds>` (with a counter if
/// that name is taken) and returns the new name.
fn quarantine(path: &Path) -> Result<PathBuf, OpenError> {
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
            Err(source) => Err(StoreError::CreateDir { path: kept, source }.into()),
        };
    }
    Err(OpenError::Workspace {
        path: path.into(),
        reason: "too many damaged stores kept beside it; remove old *.invalid-* files".into(),
    })
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
    /// [`OpenError::Workspace`] for a missing directory or a store inside the workspace;
    /// [`OpenError::Store`] when the store cannot be opened.
    pub(crate) fn open<T: Then>(path: &Path, config: &Config) -> Result<WorkingCopy, OpenError> {
        let home::Root {
            path: root,
            refused,
        } = home::resolve_root(path, config.home())?;
        home::create_private_dir(config.home())?;
        let home_dir = config
            .home()
            .canonicalize()
            .map_err(|source| StoreError::CreateDir {
                path: config.home().into(),
                source,
            })?;
        let dir = store_dir(&home_dir, &root);
        // (Where nothing is ever captured, a store inside changes nothing.)
        if dir.starts_with(&root) && refused.is_none() {
            return Err(OpenError::Workspace {
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
        // A new store is created with the layer above's tables (the history's).
        let tables = T::NEW_STORE_TABLES;
        let store = match Store::open_with(&store_path, &root, config.free_space, tables) {
            Ok(s) => s,
            Err(e) if e.is_damage() => {
                // Never overwrite it, never give up: keep the file for inspection, start over.
                let kept = quarantine(&store_path)?;
                warnings.push(format!(
                    "{e}; it was kept as {} and a fresh store was created (earlier snapshots \
                     are in the kept file only)",
                    kept.display()
                ));
                Store::open_with(&store_path, &root, config.free_space, tables)?
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
    /// [`OpenError::Workspace`] when `path` does not exist.
    pub fn locate_store(path: &Path, config: &Config) -> Result<PathBuf, OpenError> {
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
    pub(super) fn warn_watch_limit_once(&self, runtime_dir: &Path) {
        let marker =
            crate::watch::socket_path(runtime_dir, &self.root).with_extension("limit-said");
        if marker.exists() {
            return;
        }
        let _ = std::fs::write(&marker, b"");
        let need = self.watcher_status().map_or(0, |s| s.watches);
        let max = crate::platform::max_user_watches().unwrap_or_else(|| "unknown".into());
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
}
