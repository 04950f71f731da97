//! The facade: one handle over a workspace's files, its sessions and its store. Each method
//! is a short delegation to the module that does the work (see `docs/architecture.md`):
//! [`crate::working_copy`] captures and restores, [`crate::history`] keeps sessions,
//! [`crate::retention`] and [`crate::repair`] maintain the store.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::capture::Capture;
use crate::error::{CaptureError, Error, OpenError, RestoreError};
use crate::history::db::SessionKey;
use crate::history::list::{Choice, Pick, SessionRef};
use crate::history::{Lookup, Runtime, Session, SessionInfo, SessionOp};
use crate::local_history::BurstOutcome;
use crate::maintainer::Maintainer;
use crate::object::ObjectId;
use crate::progress::{NoProgress, Progress};
use crate::repair::RepairReport;
use crate::restore::RestoreOutcome;
use crate::share::git::{GitExport, GitImport};
use crate::share::{Bundled, Exported, Imported};
use crate::retention::MaintenanceReport;
use crate::store::{DenseReport, GcReport};
use crate::working_copy::{Config, DryRun, RestoreOptions, Status, WorkingCopy};
use crate::config::Settings;
use crate::diff::Diff;
use crate::patch::FilePatch;
use crate::store::SnapshotRecord;
use crate::watch::WatchStatus;

/// A workspace: its files, its store and its sessions. Opening one is cheap; clones share
/// the store and the sessions' in-process state.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let home = tempfile::tempdir()?;
/// use retrace::{Config, RestoreOptions, Workspace};
/// std::fs::write(dir.path().join("a.txt"), "one")?;
/// let ws = Workspace::open(dir.path(), &Config::with_home(home.path()))?;
/// let snap = ws.snapshot(Some("first".into()))?;
/// std::fs::write(dir.path().join("a.txt"), "two")?;
/// ws.snapshot(None)?;
/// ws.restore(&snap.id, RestoreOptions::default())?;
/// assert_eq!(std::fs::read_to_string(dir.path().join("a.txt"))?, "one");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Workspace {
    wc: WorkingCopy,
    /// In-process state of each session opened through this handle (or its clones).
    runtimes: Arc<Mutex<HashMap<SessionKey, Arc<Runtime>>>>,
}

impl Workspace {
    /// Opens the workspace containing `path` (the git toplevel when inside a git worktree,
    /// else `path` itself; see `crate::home::resolve_root`), creating its store on first
    /// use, and completes a restore a crash interrupted.
    ///
    /// # Errors
    /// [`OpenError::Workspace`] for a missing directory or a store inside the workspace;
    /// [`OpenError::Store`] when the store cannot be opened (busy: see
    /// [`OpenError::is_busy`]).
    pub fn open(path: &Path, config: &Config) -> Result<Workspace, OpenError> {
        Ok(Workspace {
            wc: WorkingCopy::open::<SessionOp>(path, config)?,
            runtimes: Arc::default(),
        })
    }

    /// The store file a workspace containing `path` uses, without opening or creating it.
    ///
    /// # Errors
    /// [`OpenError::Workspace`] when `path` does not exist.
    pub fn locate_store(path: &Path, config: &Config) -> Result<std::path::PathBuf, OpenError> {
        WorkingCopy::locate_store(path, config)
    }

    internal! {
        /// The working copy under this facade.
        #[must_use]
        fn working_copy(&self) -> &WorkingCopy {
            &self.wc
        }
    }

    /// The workspace root.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.wc.root()
    }

    /// The store file (under the retrace home, outside the workspace).
    #[must_use]
    pub fn store_path(&self) -> &Path {
        self.wc.store_path()
    }

    /// The effective settings and where each came from.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        self.wc.settings()
    }

    /// What opening the workspace had to do that the user should know (a damaged store set
    /// aside, an interrupted restore recovered), and what maintenance deferred. Each is one
    /// line.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        self.wc.warnings()
    }

    /// Why files are never snapshotted in this workspace (the home directory or above, a
    /// filesystem root, the temp directory), or None for an ordinary workspace.
    #[must_use]
    pub fn conversation_only(&self) -> Option<&str> {
        self.wc.conversation_only()
    }

    /// The status of the workspace's watcher, when one answers within a second.
    #[must_use]
    pub fn watcher_status(&self) -> Option<WatchStatus> {
        self.wc.watcher_status()
    }

    /// Snapshots of this workspace, newest first.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn log(&self) -> Result<Vec<SnapshotRecord>, Error> {
        self.wc.log()
    }

    /// Paths that differ from snapshot `a` to snapshot `b`, or to the disk when `b` is None.
    ///
    /// # Errors
    /// [`Error::Store`] for missing or corrupt objects.
    pub fn diff(&self, a: &ObjectId, b: Option<&ObjectId>) -> Result<Diff, Error> {
        self.wc.diff(a, b)
    }

    /// The unified diffs from snapshot `a` (or nothing) to snapshot `b` (or the disk) of the
    /// changed files under the paths `only` names (all when empty), sorted by path.
    ///
    /// # Errors
    /// [`Error::Store`] for a damaged snapshot tree; a file whose content cannot be read is
    /// named in its patch instead.
    pub fn patches(
        &self,
        a: Option<&ObjectId>,
        b: Option<&ObjectId>,
        only: &[String],
    ) -> Result<Vec<FilePatch>, Error> {
        self.wc.patches(a, b, only)
    }

    /// Captures the workspace now and records it in the log.
    ///
    /// # Errors
    /// [`CaptureError::Refused`] in a workspace where files are never snapshotted (see
    /// [`Workspace::conversation_only`]); [`CaptureError::Root`] when the root cannot be
    /// read; [`CaptureError::Store`] when the store or the workspace lock cannot be used
    /// (busy: see [`CaptureError::is_busy`]). Unreadable files are skipped and listed, not
    /// fatal.
    pub fn snapshot(&self, label: Option<String>) -> Result<Capture, CaptureError> {
        self.snapshot_with(label, &NoProgress)
    }

    /// [`Workspace::snapshot`] with progress reporting.
    ///
    /// # Errors
    /// As [`Workspace::snapshot`].
    pub fn snapshot_with(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Capture, CaptureError> {
        let c = self
            .wc
            .snapshot_with::<SessionOp>(label, progress, true, false)?;
        self.kept_as_snapshot(c.id);
        Ok(c)
    }

    /// [`Workspace::snapshot_with`] for a caller that needs only the id and the counts:
    /// `Capture::entries` stays empty, which spares the capture a list of every path (on a
    /// large unchanged workspace, most of its memory).
    ///
    /// # Errors
    /// As [`Workspace::snapshot`].
    pub fn snapshot_summary(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Capture, CaptureError> {
        let c = self
            .wc
            .snapshot_with::<SessionOp>(label, progress, false, false)?;
        self.kept_as_snapshot(c.id);
        Ok(c)
    }

    /// A snapshot asked for of the state a burst captured is the caller's, never thinned
    /// (`local_history::keep_as_snapshot`); a failure here only leaves it a burst.
    fn kept_as_snapshot(&self, root: ObjectId) {
        if let Err(e) = crate::local_history::keep_as_snapshot(&self.wc, root) {
            self.wc.warn(format!("the snapshot may be thinned as a burst: {e}"));
        }
    }

    /// Captures the workspace as a burst of local history (what the watcher's recorder does
    /// after each burst of writes, with the `record = "bursts"` setting): a snapshot in the
    /// log marked as a burst with what it changed, thinned by maintenance as
    /// `docs/retention.md` ("Bursts") says. Nothing is captured while a session's turn runs.
    ///
    /// # Errors
    /// [`Error::Capture`] when the capture fails (busy included: see [`Error::is_busy`]);
    /// [`Error::Store`] when the store cannot be read or written.
    pub fn capture_burst(&self) -> Result<BurstOutcome, Error> {
        crate::local_history::capture_burst(&self.wc)
    }

    /// The workspace's local history: the bursts the watcher's recorder captured
    /// (`record = "bursts"`), newest first, each with its snapshot (for [`Workspace::restore`]
    /// and [`Workspace::restore_paths`]), what it changed, and its span for
    /// [`Workspace::span_changes`] (`crate::local_history::timeline`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or a snapshot record does not decode.
    pub fn local_history(&self) -> Result<Vec<crate::history::timeline::TimelineEntry>, Error> {
        Ok(crate::local_history::timeline(&self.wc)?)
    }

    /// Every path that changed between the two snapshots of `span` (a timeline entry's
    /// change, of any session or of the local history), sorted, with its lines counted.
    ///
    /// # Errors
    /// [`Error::Store`] when a snapshot tree is damaged or the store cannot be read.
    pub fn span_changes(
        &self,
        span: crate::history::inspect::Span,
    ) -> Result<Vec<crate::history::inspect::PathChange>, Error> {
        crate::history::inspect::span_changes(&self.wc, span)
    }

    internal! {
        /// Records bursts while `watcher` (of this workspace) runs and `stop` is unset: see
        /// `crate::local_history::record_bursts`.
        fn record_bursts(
            &self,
            watcher: &crate::watch::Watcher,
            stop: &std::sync::atomic::AtomicBool,
            report: &mut dyn FnMut(crate::local_history::RecorderEvent<'_>),
        ) {
            crate::local_history::record_bursts(&self.wc, watcher, stop, report);
        }
    }

    internal! {
        /// What a watcher of this workspace needs: start one with
        /// [`crate::watch::Watcher::start`].
        #[must_use]
        fn watch_spec(&self) -> crate::watch::WatchSpec {
            self.wc.watch_spec()
        }
    }

    /// [`Workspace::snapshot_summary`] that walks the whole workspace whatever a watcher
    /// says (`retrace snapshot --rescan`), as a check on the watcher or after a change it
    /// cannot see.
    ///
    /// # Errors
    /// As [`Workspace::snapshot`].
    pub fn snapshot_rescan(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Capture, CaptureError> {
        let c = self
            .wc
            .snapshot_with::<SessionOp>(label, progress, false, true)?;
        self.kept_as_snapshot(c.id);
        Ok(c)
    }

    /// Resolves a snapshot id or unique prefix (≥ 8 hex digits); see
    /// `crate::retention::resolve_snapshot`.
    ///
    /// # Errors
    /// [`crate::StoreError::BadSnapshotId`] when it matches nothing, several snapshots, or an
    /// object that is not a snapshot.
    pub fn resolve(&self, prefix: &str) -> Result<ObjectId, Error> {
        crate::retention::resolve_snapshot(&self.wc, prefix)
    }

    /// Who else holds paths when the user restores: every session's running turn.
    fn held_by_others(&self) -> crate::history::Held<'_> {
        crate::history::Held {
            store: self.wc.store(),
            mine: None,
        }
    }

    /// Makes the workspace's managed files equal to snapshot `id`.
    ///
    /// # Errors
    /// [`RestoreError::Dirty`] when the disk differs from the last known state and `force`
    /// is not set; [`RestoreError::Held`] when it would change what a session's running
    /// turn has changed so far and `force` is not set; [`RestoreError::Store`] for missing
    /// or corrupt objects (before anything is written) and a busy store or workspace lock
    /// (see [`RestoreError::is_busy`]); [`RestoreError::Capture`] when the disk cannot be
    /// scanned; I/O.
    pub fn restore(
        &self,
        id: &ObjectId,
        opts: RestoreOptions,
    ) -> Result<RestoreOutcome, RestoreError> {
        self.restore_with(id, opts, &NoProgress)
    }

    /// [`Workspace::restore`] with progress reporting.
    ///
    /// # Errors
    /// As [`Workspace::restore`].
    pub fn restore_with(
        &self,
        id: &ObjectId,
        opts: RestoreOptions,
        progress: &dyn Progress,
    ) -> Result<RestoreOutcome, RestoreError> {
        match self.wc.restore_or_plan::<SessionOp>(
            id,
            opts,
            None,
            &self.held_by_others(),
            progress,
        )? {
            (_, Some(r)) => Err(RestoreError::Dirty {
                paths: r.paths,
                count: r.count,
            }),
            (outcome, None) => Ok(outcome),
        }
    }

    /// What restoring snapshot `id` would write, delete and leave alone, and whether the
    /// restore would be refused (a dirty workspace without `force`): both, where
    /// [`Workspace::restore`] with `dry_run` only refuses. Writes nothing.
    ///
    /// # Errors
    /// Missing or corrupt objects; I/O.
    pub fn restore_dry_run(
        &self,
        id: &ObjectId,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<DryRun, RestoreError> {
        let opts = RestoreOptions {
            force,
            dry_run: true,
        };
        let (outcome, refused) = self.wc.restore_or_plan::<SessionOp>(
            id,
            opts,
            None,
            &self.held_by_others(),
            progress,
        )?;
        Ok(DryRun { outcome, refused })
    }

    /// Makes only the files and directories `paths` (relative to the workspace root; see
    /// `crate::working_copy::normalize_paths`) equal to what snapshot `id` holds there;
    /// everything else on disk is untouched. The dirty guard covers only those paths. With
    /// `dry_run`, as [`Workspace::restore_paths_dry_run`] without the plan: refused or not.
    /// An empty `paths` restores the whole workspace ([`Workspace::restore_with`]).
    ///
    /// # Errors
    /// As [`Workspace::restore`]; [`RestoreError::Path`] for a path that leaves the
    /// workspace or that neither the snapshot nor the disk has.
    pub fn restore_paths(
        &self,
        id: &ObjectId,
        paths: &[String],
        opts: RestoreOptions,
        progress: &dyn Progress,
    ) -> Result<RestoreOutcome, RestoreError> {
        if paths.is_empty() {
            return self.restore_with(id, opts, progress);
        }
        crate::history::paths::restore_paths(&self.wc, id, paths, opts, None, progress)
            .and_then(crate::history::paths::outcome_of)
    }

    /// What [`Workspace::restore_paths`] would write, delete and leave alone, and whether it
    /// would be refused. Writes nothing.
    ///
    /// # Errors
    /// As [`Workspace::restore_paths`], apart from the refusal.
    pub fn restore_paths_dry_run(
        &self,
        id: &ObjectId,
        paths: &[String],
        force: bool,
        progress: &dyn Progress,
    ) -> Result<DryRun, RestoreError> {
        if paths.is_empty() {
            return self.restore_dry_run(id, force, progress);
        }
        let opts = RestoreOptions {
            force,
            dry_run: true,
        };
        crate::history::paths::restore_paths(&self.wc, id, paths, opts, None, progress)
    }

    /// Root, store, counts, exclusions and whether the disk differs from the last known state.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn status(&self) -> Result<Status, Error> {
        self.wc.status::<SessionOp>()
    }

    /// The session keyed by the host's session id (stored hashed). Sessions are isolated:
    /// own turns, cursor and redo stack.
    #[must_use]
    pub fn session(&self, id: &str) -> Session {
        Session::open(&self.wc, &self.runtimes, id, false)
    }

    /// Every session of the workspace, most recently used first
    /// (`crate::history::list::list`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, Error> {
        crate::history::list::list(&self.wc)
    }

    /// The session a person named: its host id, or a unique prefix of its name or key
    /// (`crate::history::list::find`).
    ///
    /// # Errors
    /// As [`Workspace::sessions`].
    pub fn find_session(&self, query: &str) -> Result<Lookup, Error> {
        crate::history::list::find(&self.wc, query)
    }

    /// The session a front end means ([`Pick`]): `name` (a session's name, or a unique
    /// prefix of its name or key) or, without one, the one the history makes obvious; or
    /// why there is none.
    ///
    /// # Errors
    /// [`Error::Store`] when the sessions cannot be read.
    pub fn choose_session(&self, name: Option<&str>, pick: Pick) -> Result<Choice, Error> {
        crate::history::list::choose(&self.wc, name, pick)
    }

    /// The session [`Workspace::choose_session`] chose.
    #[must_use]
    pub fn open_session(&self, chosen: &SessionRef) -> Session {
        match chosen {
            SessionRef::Named(name) => self.session(name),
            SessionRef::Listed(info) => self.session_of(info),
        }
    }

    /// The session `info` describes (found by [`Workspace::sessions`] or
    /// [`Workspace::find_session`]).
    #[must_use]
    pub fn session_of(&self, info: &SessionInfo) -> Session {
        match &info.name {
            Some(name) => self.session(name),
            None => Session::open_key(&self.wc, &self.runtimes, info.key, false),
        }
    }

    /// A subagent's session: it captures nothing and writes no history (its edits land in
    /// the parent turn's after-snapshot); undo and redo answer
    /// [`crate::Outcome::Subagent`].
    #[must_use]
    pub fn subagent_session(&self, id: &str) -> Session {
        Session::open(&self.wc, &self.runtimes, id, true)
    }

    /// The turns and checkpoints of every session that changed a path below one of `paths`
    /// (workspace-relative), newest first, each naming its session
    /// (`crate::history::inspect::file_log`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or a snapshot tree is damaged.
    pub fn file_log(
        &self,
        paths: &[String],
    ) -> Result<Vec<crate::history::inspect::FileLogEntry>, Error> {
        crate::history::inspect::file_log(&self.wc, None, paths)
    }

    /// The workspace's snapshots, newest first, with the bytes each added; with `paths`,
    /// only those that changed one of them (`crate::history::inspect::snapshot_log`).
    ///
    /// # Errors
    /// As [`Workspace::file_log`].
    pub fn snapshot_log(
        &self,
        paths: &[String],
    ) -> Result<Vec<crate::history::inspect::SnapshotLogEntry>, Error> {
        crate::history::inspect::snapshot_log(&self.wc, paths)
    }

    /// Snapshot `id` in full: its labels, what it holds, and what changed from the snapshot
    /// before it (`crate::history::inspect::snapshot_detail`).
    ///
    /// # Errors
    /// As [`Workspace::file_log`].
    pub fn show_snapshot(
        &self,
        id: &ObjectId,
    ) -> Result<crate::history::inspect::SnapshotDetail, Error> {
        crate::history::inspect::snapshot_detail(&self.wc, id)
    }

    /// Every line of the file `path` on disk with the turn (of any session) that wrote it
    /// (`crate::history::blame::blame`).
    ///
    /// # Errors
    /// [`Error::Inspect`] for a path that is not a text file of the workspace;
    /// [`Error::Store`].
    pub fn blame(&self, path: &str) -> Result<crate::history::blame::Blame, Error> {
        crate::history::blame::blame(&self.wc, None, path)
    }

    /// Every object id GC must keep (see `crate::retention::gc_roots`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn gc_roots(&self) -> Result<Vec<ObjectId>, Error> {
        crate::retention::gc_roots(&self.wc)
    }

    /// The bare git repository beside the store that [`Workspace::export_git`] writes to
    /// and [`Workspace::import_git`] fetches into, unless told another.
    #[must_use]
    pub fn share_repo(&self) -> std::path::PathBuf {
        self.wc.dir().join("share.git")
    }

    /// Writes `session`'s ended turns and checkpoints (those of `turns`, when given) and
    /// every object their snapshots hold to the bundle file `path`
    /// (`crate::share::bundle`).
    ///
    /// # Errors
    /// [`crate::ShareError`] when the session has nothing to share or the file cannot be
    /// written; [`Error::Store`].
    pub fn bundle(
        &self,
        session: &Session,
        turns: Option<&std::ops::RangeInclusive<u64>>,
        path: &Path,
    ) -> Result<Bundled, Error> {
        let image = crate::share::image::read(&self.wc, &session.key(), turns)?;
        crate::share::bundle::write(&self.wc.store().reader()?, &image, path)
    }

    /// Checks the bundle at `path` whole, then records its session in this workspace
    /// (named `as_name` when given); a bundle imported twice adds nothing the second time.
    ///
    /// # Errors
    /// [`crate::ShareError::Bundle`] for a damaged, truncated or newer bundle (nothing
    /// written); [`crate::ShareError::Conflict`] when the session exists here with other
    /// turns.
    pub fn unbundle(&self, path: &Path, as_name: Option<&str>) -> Result<Imported, Error> {
        crate::share::bundle::unbundle(&self.wc, path, as_name)
    }

    /// Writes `session`'s turns as git commits on a ref, and pushes it when asked
    /// (`crate::share::git::export`).
    ///
    /// # Errors
    /// [`crate::ShareError`] (git missing or failing, a ref holding another history);
    /// [`Error::Store`].
    pub fn export_git(&self, session: &Session, opts: &GitExport) -> Result<Exported, Error> {
        use crate::share::git;
        git::check_ref(&opts.reference)?;
        let image = crate::share::image::read(&self.wc, &session.key(), opts.turns.as_ref())?;
        let repo = git::repo_for(opts.repo.as_deref(), &self.share_repo())?;
        let reader = self.wc.store().reader()?;
        let out = crate::share::on_big_stack(|| {
            git::export::export(&reader, &image, &repo, &opts.reference, opts.force)
        })?;
        if let Some(remote) = &opts.push {
            git::push(&repo, remote, &opts.reference, opts.force)?;
        }
        Ok(out)
    }

    /// Rebuilds the session a ref's commits hold (`crate::share::git::import`).
    ///
    /// # Errors
    /// [`crate::ShareError::NotRetrace`] for commits retrace did not write;
    /// [`crate::ShareError::Conflict`]; [`crate::ShareError::Git`]; [`Error::Store`].
    pub fn import_git(&self, opts: &GitImport) -> Result<Imported, Error> {
        use crate::share::git;
        git::check_ref(&opts.reference)?;
        let (repo, reference) =
            git::source_for(opts.source.as_deref(), &opts.reference, &self.share_repo())?;
        crate::share::on_big_stack(|| {
            git::import::import(&self.wc, &repo, &reference, opts.as_name.as_deref())
        })
    }

    /// Collects unreferenced objects older than `grace_secs` (see `crate::retention::gc`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or stays busy.
    pub fn gc(&self, grace_secs: u64, dry_run: bool) -> Result<GcReport, Error> {
        crate::retention::gc(&self.wc, grace_secs, dry_run)
    }

    /// The stored bytes a GC would free now, an estimate that holds nothing up (see
    /// `crate::retention::gc_estimate`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or stays busy.
    pub fn gc_estimate(&self, grace_secs: u64) -> Result<u64, Error> {
        crate::retention::gc_estimate(&self.wc, grace_secs)
    }

    /// A full maintenance pass (see `crate::retention::maintain`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or stays busy.
    pub fn maintain(&self, now_ms: u64, grace_secs: u64) -> Result<MaintenanceReport, Error> {
        crate::retention::maintain(&self.wc, now_ms, grace_secs)
    }

    /// [`Workspace::maintain`] with a deadline for its recompression (see
    /// `crate::retention::maintain_until`).
    ///
    /// # Errors
    /// As [`Workspace::maintain`].
    pub fn maintain_until(
        &self,
        now_ms: u64,
        grace_secs: u64,
        deadline: Option<std::time::Instant>,
    ) -> Result<MaintenanceReport, Error> {
        crate::retention::maintain_until(&self.wc, now_ms, grace_secs, deadline)
    }

    /// Evicts turns until the store holds at most `budget` bytes (see
    /// `crate::retention::enforce_budget`).
    ///
    /// # Errors
    /// As [`Workspace::maintain`].
    pub fn enforce_budget(
        &self,
        budget: u64,
        now_ms: u64,
        grace_secs: u64,
    ) -> Result<MaintenanceReport, Error> {
        crate::retention::enforce_budget(&self.wc, budget, now_ms, grace_secs)
    }

    /// Runs maintenance if it is due and nobody holds the workspace (see
    /// `crate::retention::maintain_if_due`).
    #[must_use = "the report says what maintenance did"]
    pub fn maintain_if_due(&self) -> Option<MaintenanceReport> {
        crate::retention::maintain_if_due(&self.wc)
    }

    /// After a command's work: starts a due maintenance pass in a detached background
    /// process, without waiting for it (see `crate::maintainer::maintain_later`).
    #[must_use = "Later says whether the pass ran here, and what it warned about"]
    pub fn maintain_later(&self) -> crate::maintainer::Later {
        crate::maintainer::maintain_later(&self.wc)
    }

    /// What the background process of [`Workspace::maintain_later`] runs (see
    /// `crate::maintainer::run_detached_pass`).
    #[must_use = "the report says what maintenance did"]
    pub fn run_detached_pass(&self) -> Option<MaintenanceReport> {
        crate::maintainer::run_detached_pass(&self.wc)
    }

    /// Takes the warnings background maintenance left for the next command (see
    /// `crate::store::Store::take_deferred_warnings`): each is returned once.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or written.
    pub fn take_deferred_warnings(&self) -> Result<Vec<String>, Error> {
        Ok(self.wc.store().take_deferred_warnings()?)
    }

    /// Recompresses for at most `budget` if the workspace is free (see
    /// `crate::retention::recompress_if_free`).
    #[must_use = "the report says whether frames remain"]
    pub fn recompress_if_free(&self, budget: Duration) -> Option<DenseReport> {
        crate::retention::recompress_if_free(&self.wc, budget)
    }

    /// Starts background maintenance (see `crate::maintainer::start`).
    #[must_use = "maintenance stops when the Maintainer is dropped"]
    pub fn maintainer(&self, interval: Option<Duration>) -> Maintainer {
        crate::maintainer::start(&self.wc, interval)
    }

    /// Verifies the store and forgets damaged objects (see `crate::repair::repair`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or written.
    pub fn repair(&self, progress: &dyn Progress) -> Result<RepairReport, Error> {
        crate::repair::repair(&self.wc, progress)
    }
}
