//! Sessions and turns: agent undo, redo, checkpoints and tree navigation.
//!
//! A [`Session`] is one conversation of the host agent. Each prompt is a [`Turn`]: a
//! before-snapshot when it begins and an after-snapshot when the agent settles. Undo applies
//! the inverse of the newest applied turn's own change (only the paths it changed; a path
//! edited since is a conflict), redo re-applies it, and navigation restores the exact
//! snapshot recorded at any anchor. Every operation is appended to the session's op log in
//! the store, and the cursor and redo stack are derived from that log, so both survive a
//! restart.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let home = tempfile::tempdir().unwrap();
//! use retrace::{Config, Mode, Outcome, Workspace};
//! let ws = Workspace::open(dir.path(), &Config::with_home(home.path())).unwrap();
//! let session = ws.session("conversation-1");
//! let turn = session.begin_turn(Some("node-1".into()), Some("add a file".into())).unwrap();
//! turn.wait_before(std::time::Duration::from_secs(60)).unwrap();
//! std::fs::write(dir.path().join("new.txt"), "agent output").unwrap(); // the agent works
//! turn.end(Some("node-2".into())).unwrap();
//! let undone = session.undo(Mode::Both).unwrap();
//! assert!(matches!(undone, Outcome::Restored { .. }));
//! assert_eq!(undone.anchor(), Some("node-1"));
//! assert!(!dir.path().join("new.txt").exists());
//! session.redo().unwrap();
//! assert!(dir.path().join("new.txt").exists());
//! ```

pub mod db;
mod outcome;
pub mod record;
pub mod state;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::capture::FlatEntry;
use crate::diff::{Change, changes, flatten_changed};
use crate::error::{Error, StoreError};
use crate::lock::LockMode;
use crate::object::{EntryKind, ObjectId};
use crate::progress::{NoProgress, Progress};
use crate::scan::Skipped;
use crate::store::now_ms;
use crate::workspace::{MAX_LISTED, Workspace};
use db::{Loaded, SessionKey, Writer};
pub use outcome::{Outcome, Report};
use record::{
    CheckpointRecord, HISTORY_VERSION, MAX_ANCHOR_BYTES, MAX_PROMPT_BYTES, Op, TurnRecord, truncate,
};
pub use record::{Mode, TurnState};

/// In-process state of one session: captures running now (for `capture_in_flight`).
#[derive(Debug, Default)]
pub struct Runtime {
    capturing: AtomicU32,
}

/// Counts a capture as in flight while alive.
struct InFlight<'a>(&'a Runtime);

impl<'a> InFlight<'a> {
    fn new(rt: &'a Runtime) -> InFlight<'a> {
        rt.capturing.fetch_add(1, Ordering::SeqCst);
        InFlight(rt)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.capturing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Options of undo, redo and navigate.
#[derive(Clone, Copy)]
pub struct OpOptions<'a> {
    /// Overwrite conflicting or unsnapshotted edits (a safety snapshot keeps them first).
    pub force: bool,
    /// Progress sink for the scans and writes.
    pub progress: &'a dyn Progress,
}

impl Default for OpOptions<'_> {
    fn default() -> Self {
        OpOptions {
            force: false,
            progress: &NoProgress,
        }
    }
}

/// One conversation of the host agent. Cheap to create; clones share in-process state.
#[derive(Clone)]
pub struct Session {
    ws: Workspace,
    key: SessionKey,
    subagent: bool,
    rt: Arc<Runtime>,
}

/// Where a turn's before-snapshot stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "before", rename_all = "snake_case")]
pub enum BeforeStatus {
    /// Captured: undo of this turn will restore files.
    Ready {
        /// The snapshot.
        snapshot: ObjectId,
    },
    /// Not captured in time (or failed): the turn is conversation-only.
    ConversationOnly {
        /// Why.
        reason: String,
    },
    /// A subagent session: nothing is captured.
    Subagent,
}

#[derive(Debug)]
enum Slot {
    Running,
    Ready(ObjectId),
    Abandoned(String),
}

/// A turn in progress. Dropping it without [`Turn::end`] leaves the turn pending until the
/// next turn of the session begins (which closes it conversation-only).
pub struct Turn {
    session: Session,
    number: u64,
    before: Arc<(Mutex<Slot>, Condvar)>,
}

/// What [`Turn::end`] recorded.
#[derive(Clone, Debug, Serialize)]
pub struct TurnSummary {
    /// The turn number.
    pub turn: u64,
    /// Final state.
    pub state: TurnState,
    /// Why it is conversation-only, when it is.
    pub reason: Option<String>,
    /// Before-snapshot.
    pub before: Option<ObjectId>,
    /// After-snapshot.
    pub after: Option<ObjectId>,
    /// Paths added, modified, deleted by the turn.
    pub added: u32,
    /// See `added`.
    pub modified: u32,
    /// See `added`.
    pub deleted: u32,
    /// Paths left out of the after-snapshot (unreadable, unstable).
    pub skipped: Vec<Skipped>,
    /// Turns dropped because the session exceeded its cap.
    pub dropped: u64,
}

/// One line of a session's log.
#[derive(Clone, Debug, Serialize)]
pub struct LogEntry {
    /// `turn` or `checkpoint`.
    pub kind: &'static str,
    /// Number within its kind (anchors `turn:N`, `checkpoint:N`).
    pub number: u64,
    /// Unix milliseconds (begin of a turn).
    pub time_ms: u64,
    /// Turn state (None for checkpoints).
    pub state: Option<TurnState>,
    /// Prompt (turns) or label (checkpoints).
    pub text: Option<String>,
    /// Host anchor of the turn's start.
    pub anchor: Option<String>,
    /// Host anchor of the turn's end.
    pub leaf: Option<String>,
    /// Snapshot before (turns) or the checkpoint's snapshot.
    pub before: Option<ObjectId>,
    /// Snapshot after.
    pub after: Option<ObjectId>,
    /// Paths added, modified, deleted.
    pub counts: [u32; 3],
    /// On the cursor's chain: undo will step back over it.
    pub applied: bool,
    /// On the redo stack.
    pub undone: bool,
}

/// A session's state as a host shows it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionStatus {
    /// First 16 hex digits of the session key.
    pub session: String,
    /// Whether this is a subagent session (no history).
    pub subagent: bool,
    /// Turns kept.
    pub turns: usize,
    /// Checkpoints kept.
    pub checkpoints: usize,
    /// The applied turn.
    pub cursor: Option<u64>,
    /// Whether undo has a turn to step back over.
    pub can_undo: bool,
    /// Whether redo has a turn to re-apply.
    pub can_redo: bool,
    /// The turn redo would re-apply, with its mode.
    pub redo_turn: Option<(u64, Mode)>,
    /// A turn in progress.
    pub pending: Option<u64>,
    /// The last snapshot this session knows the disk to equal.
    pub last_known: Option<ObjectId>,
}

/// A session's turns and checkpoints (`retrace log --session`).
#[derive(Clone, Debug, Serialize)]
pub struct SessionLog {
    /// The status.
    pub status: SessionStatus,
    /// Turns and checkpoints, oldest first.
    pub entries: Vec<LogEntry>,
}

/// The snapshot and cursor an anchor names.
struct Target {
    snapshot: Option<ObjectId>,
    cursor: Option<u64>,
    reason: Option<String>,
    expired: bool,
}

fn lossy(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

fn find<'a>(list: &'a [FlatEntry], path: &[u8]) -> Option<&'a FlatEntry> {
    list.binary_search_by(|e| e.path.as_slice().cmp(path))
        .ok()
        .map(|i| &list[i])
}

/// Whether the disk entry `d` is what the turn left, `expected` (directories by kind only).
fn same(d: Option<&FlatEntry>, expected: Option<&FlatEntry>) -> bool {
    match (d, expected) {
        (None, None) => true,
        // An empty directory the user removed since: nothing of theirs to lose.
        (None, Some(e)) => e.kind == EntryKind::Dir,
        (Some(d), None) => d.kind == EntryKind::Dir,
        (Some(d), Some(e)) if e.kind == EntryKind::Dir || d.kind == EntryKind::Dir => {
            d.kind == e.kind
        }
        (Some(d), Some(e)) => d.kind == e.kind && d.id == e.id,
    }
}

fn is_nested(c: &Change) -> bool {
    [&c.old, &c.new]
        .iter()
        .any(|e| e.as_ref().is_some_and(|e| e.kind == EntryKind::NestedRepo))
}

/// Paths where the disk no longer holds what the change's `old` side says: the change cannot
/// be reversed there without losing an edit. A path the change turns into a file whose disk
/// directory holds paths the change does not know is a conflict too.
fn conflicts(disk: &[FlatEntry], changes: &[Change]) -> Vec<String> {
    let known: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_slice()).collect();
    let mut out = Vec::new();
    for c in changes.iter().filter(|c| !is_nested(c)) {
        if !same(find(disk, &c.path), c.old.as_ref()) {
            out.push(lossy(&c.path));
            continue;
        }
        let becomes_leaf = c.new.as_ref().is_some_and(|e| e.kind != EntryKind::Dir);
        if becomes_leaf && find(disk, &c.path).is_some_and(|d| d.kind == EntryKind::Dir) {
            let mut prefix = c.path.clone();
            prefix.push(b'/');
            let start = disk.partition_point(|e| e.path < prefix);
            if disk[start..]
                .iter()
                .take_while(|e| e.path.starts_with(&prefix))
                .any(|e| !known.contains(e.path.as_slice()))
            {
                out.push(lossy(&c.path));
            }
        }
    }
    out
}

/// The disk with the change applied: paths the change names take its `new` side, all others
/// stay as they are on disk. Directories needed by the result are listed.
fn target_of(disk: &[FlatEntry], changes: &[Change]) -> Vec<FlatEntry> {
    let changed: HashSet<&[u8]> = changes
        .iter()
        .filter(|c| !is_nested(c))
        .map(|c| c.path.as_slice())
        .collect();
    let mut out: Vec<FlatEntry> = disk
        .iter()
        .filter(|e| !changed.contains(e.path.as_slice()))
        .cloned()
        .collect();
    out.extend(
        changes
            .iter()
            .filter(|c| !is_nested(c))
            .filter_map(|c| c.new.clone()),
    );
    let mut dirs: HashSet<Vec<u8>> = HashSet::new();
    for e in &out {
        for (i, _) in e.path.iter().enumerate().filter(|&(_, &b)| b == b'/') {
            dirs.insert(e.path[..i].to_vec());
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    for d in dirs {
        if find(&out, &d).is_none() {
            out.push(FlatEntry {
                path: d,
                kind: EntryKind::Dir,
                id: ObjectId::ZERO,
                size: 0,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

impl Workspace {
    /// The session keyed by the host's session id (stored hashed). Sessions are isolated:
    /// own turns, cursor and redo stack.
    #[must_use]
    pub fn session(&self, id: &str) -> Session {
        self.session_of(id, false)
    }

    /// A subagent's session: it captures nothing and writes no history (its edits land in
    /// the parent turn's after-snapshot); undo and redo answer [`Outcome::Subagent`].
    #[must_use]
    pub fn subagent_session(&self, id: &str) -> Session {
        self.session_of(id, true)
    }

    fn session_of(&self, id: &str, subagent: bool) -> Session {
        let key = db::session_key(id);
        let rt = self
            .runtimes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        Session {
            ws: self.clone(),
            key,
            subagent,
            rt,
        }
    }
}

impl Session {
    fn path(&self) -> &std::path::Path {
        self.ws.store.path()
    }

    fn load(&self) -> Result<Loaded, Error> {
        let tx = self.ws.store.begin_read()?;
        Ok(db::load(&tx, self.path(), &self.key)?)
    }

    /// Writes in one durable transaction; the closure gets the session writer and the state
    /// re-read inside the transaction.
    fn write<T>(
        &self,
        f: impl FnOnce(&Writer<'_>, &state::SessionState) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.ws.store.transact(|tx| {
            let w = Writer::new(tx, self.ws.store.path(), self.key)?;
            let s = w.state()?;
            f(&w, &s)
        })
    }

    /// Hex of the first 8 bytes of the session key.
    #[must_use]
    pub fn id(&self) -> String {
        blake3::Hash::from_bytes(self.key).to_hex()[..16].to_string()
    }

    /// Begins a turn: records it (closing a turn left pending, conversation-only) and
    /// captures the before-snapshot in the background. Call [`Turn::wait_before`] before the
    /// agent's first tool runs. `anchor` is the conversation node to return to on undo;
    /// `prompt` is put back into the editor on undo.
    ///
    /// # Errors
    /// [`Error::Store`] when the turn cannot be recorded.
    pub fn begin_turn(
        &self,
        anchor: Option<String>,
        prompt: Option<String>,
    ) -> Result<Turn, Error> {
        if self.subagent {
            return Ok(Turn {
                session: self.clone(),
                number: 0,
                before: Arc::new((Mutex::new(Slot::Abandoned(String::new())), Condvar::new())),
            });
        }
        // Shared lock from the record to the capture's end: a restore in another process
        // either finished before this turn began or starts after its baseline is taken.
        let lock = self.ws.lock(LockMode::Shared, crate::store::LOCK_WAIT)?;
        let anchor = anchor.map(|a| truncate(a, MAX_ANCHOR_BYTES));
        let prompt = prompt.map(|p| truncate(p, MAX_PROMPT_BYTES));
        let number = self.write(|w, s| {
            if let Some(p) = s.pending
                && let Some(mut old) = w.get_turn(p)?
            {
                old.state = TurnState::ConversationOnly;
                old.reason = Some("the turn never ended (a new turn began)".into());
                old.ended_ms = Some(now_ms());
                w.turn(&old)?;
                w.op(Op::TurnEnded {
                    turn: p,
                    snapshot: None,
                })?;
            }
            let s = w.state()?;
            let number = s.next_turn;
            w.turn(&TurnRecord {
                version: HISTORY_VERSION,
                number,
                parent: s.cursor,
                anchor,
                leaf: None,
                rounds: Vec::new(),
                prompt,
                began_ms: now_ms(),
                ended_ms: None,
                before: None,
                after: None,
                state: TurnState::Pending,
                reason: None,
                counts: [0; 3],
            })?;
            w.op(Op::TurnBegun { turn: number })?;
            Ok(number)
        })?;
        let before = Arc::new((Mutex::new(Slot::Running), Condvar::new()));
        let (session, slot) = (self.clone(), Arc::clone(&before));
        std::thread::Builder::new()
            .name(format!("retrace-before-{number}"))
            .spawn(move || {
                let captured = session
                    .ws
                    .record_locked(Some(format!("before turn {number}")), &NoProgress);
                drop(lock);
                let (m, cv) = &*slot;
                let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
                if matches!(*g, Slot::Running) {
                    *g = match captured.map_err(|e| e.to_string()).and_then(|c| {
                        session
                            .record_before(number, c.id)
                            .map(|()| c.id)
                            .map_err(|e| e.to_string())
                    }) {
                        Ok(id) => Slot::Ready(id),
                        Err(e) => {
                            let reason = format!("the before-snapshot failed: {e}");
                            let _ = session.make_conversation_only(number, &reason);
                            Slot::Abandoned(reason)
                        }
                    };
                }
                cv.notify_all();
            })
            .map_err(|e| Error::Workspace {
                path: self.ws.root.clone(),
                reason: format!("cannot start the capture thread: {e}"),
            })?;
        Ok(Turn {
            session: self.clone(),
            number,
            before,
        })
    }

    fn record_before(&self, turn: u64, snapshot: ObjectId) -> Result<(), StoreError> {
        self.write(|w, _| {
            if let Some(mut t) = w.get_turn(turn)? {
                t.before = Some(snapshot);
                w.turn(&t)?;
            }
            w.op(Op::TurnBefore { turn, snapshot })
        })
    }

    fn make_conversation_only(&self, turn: u64, reason: &str) -> Result<(), StoreError> {
        self.write(|w, _| {
            if let Some(mut t) = w.get_turn(turn)?
                && t.state == TurnState::Pending
            {
                t.state = TurnState::ConversationOnly;
                t.reason = Some(reason.into());
                w.turn(&t)?;
            }
            Ok(())
        })
    }

    /// The turn in progress, if any, e.g. to end it from another process. Its
    /// before-snapshot counts as taken only if it was recorded.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn pending_turn(&self) -> Result<Option<Turn>, Error> {
        if self.subagent {
            return Ok(None);
        }
        let l = self.load()?;
        let Some(n) = l.state.pending else {
            return Ok(None);
        };
        let slot = match l.turn(n) {
            Some(t) if t.state == TurnState::Pending && t.before.is_some() => {
                Slot::Ready(t.before.unwrap_or(ObjectId::ZERO))
            }
            Some(t) => Slot::Abandoned(
                t.reason
                    .clone()
                    .unwrap_or_else(|| "the before-snapshot was not recorded".into()),
            ),
            None => Slot::Abandoned("the turn record is missing".into()),
        };
        Ok(Some(Turn {
            session: self.clone(),
            number: n,
            before: Arc::new((Mutex::new(slot), Condvar::new())),
        }))
    }

    /// Ends the turn in progress (see [`Turn::end`]); a no-op summary when none is pending.
    ///
    /// # Errors
    /// As [`Turn::end`].
    pub fn end_turn(&self, leaf: Option<String>) -> Result<Option<TurnSummary>, Error> {
        match self.pending_turn()? {
            Some(t) => t.end(leaf).map(Some),
            None => Ok(None),
        }
    }

    /// Quick refusals that need no lock: subagent, capture in flight, turn in progress.
    fn refuse(&self) -> Result<Option<Outcome>, Error> {
        if self.subagent {
            return Ok(Some(Outcome::Subagent));
        }
        if self.rt.capturing.load(Ordering::SeqCst) > 0 {
            return Ok(Some(Outcome::CaptureInFlight));
        }
        Ok(Self::pending_refusal(&self.load()?))
    }

    fn pending_refusal(l: &Loaded) -> Option<Outcome> {
        l.state.pending.map(|n| Outcome::Busy {
            detail: format!("turn {n} is in progress; wait until the agent finishes"),
        })
    }

    /// Takes the exclusive lock, or says busy.
    fn lock_or_busy(&self) -> Result<Result<crate::lock::WorkspaceLock, Outcome>, Error> {
        match self.ws.lock(LockMode::Exclusive, self.ws.history_wait) {
            Ok(l) => Ok(Ok(l)),
            Err(Error::Store(StoreError::Busy { .. })) => Ok(Err(Outcome::Busy {
                detail: "another retrace process is restoring or capturing this workspace".into(),
            })),
            Err(e) => Err(e),
        }
    }

    /// Steps back over the newest applied turn (see the module docs). `Mode::Both` restores
    /// files and returns the anchor and prompt for the host; `Files` only files;
    /// `Conversation` leaves files as they are and checkpoints them.
    ///
    /// # Errors
    /// [`Error`] for store, capture or I/O failures; refusals are [`Outcome`]s.
    pub fn undo(&self, mode: Mode) -> Result<Outcome, Error> {
        self.undo_with(mode, OpOptions::default())
    }

    /// [`Session::undo`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn undo_with(&self, mode: Mode, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        if let Some(o) = self.refuse()? {
            return Ok(o);
        }
        let _lock = match self.lock_or_busy()? {
            Ok(l) => l,
            Err(o) => return Ok(o),
        };
        let l = self.load()?;
        if let Some(o) = Self::pending_refusal(&l) {
            return Ok(o);
        }
        let Some(n) = l.state.cursor else {
            return Ok(Outcome::NothingToUndo {
                detail: "no turn of this session is applied".into(),
            });
        };
        let Some(t) = l.turn(n).cloned() else {
            return Ok(Outcome::NothingToUndo {
                detail: format!(
                    "older turns were dropped (a session keeps {})",
                    self.ws.max_turns
                ),
            });
        };
        let files = mode.files() && t.state == TurnState::Complete;
        if !files {
            let reason = match t.state {
                TurnState::Complete | TurnState::Pending => {
                    "files left as they are (conversation-only undo)".to_string()
                }
                TurnState::Expired => "its file history expired".into(),
                TurnState::ConversationOnly => format!(
                    "files were not restored: {}",
                    t.reason
                        .as_deref()
                        .unwrap_or("the turn has no before-snapshot")
                ),
            };
            let cp = self.checkpoint_locked(
                Some(format!("kept at conversation undo of turn {n}")),
                opts.progress,
                Some(Op::Undo {
                    turn: n,
                    to: t.parent,
                    mode: Mode::Conversation,
                    snapshot: None,
                }),
            );
            // Files are untouched here: a failure is an error, not an uncertain result.
            let checkpoint = Some(cp?);
            return Ok(if t.state == TurnState::Expired {
                Outcome::Expired {
                    turn: Some(n),
                    anchor: t.anchor.clone(),
                    prompt: t.prompt.clone(),
                }
            } else {
                Outcome::ConversationOnly {
                    turn: Some(n),
                    reason,
                    anchor: t.anchor.clone(),
                    prompt: t.prompt.clone(),
                    checkpoint,
                }
            });
        }
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Ok(Outcome::NothingToUndo {
                detail: format!("turn {n} has no snapshots"),
            });
        };
        let applied = match self.reverse(&t, after, before, "undo", opts)? {
            Ok(a) => a,
            Err(o) => return Ok(o),
        };
        let op = Op::Undo {
            turn: n,
            to: t.parent,
            mode,
            snapshot: Some(applied.snapshot),
        };
        if let Err(e) = self.write(|w, _| w.op(op)) {
            return Ok(Outcome::PersistenceUncertain {
                detail: e.to_string(),
            });
        }
        Ok(Outcome::Restored {
            turn: Some(n),
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.skipped,
            anchor: if mode.conversation() { t.anchor } else { None },
            prompt: if mode.conversation() { t.prompt } else { None },
            snapshot: Some(applied.snapshot),
            safety_snapshot: applied.safety,
        })
    }

    /// Re-applies the most recently undone turn in the mode its undo used.
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn redo(&self) -> Result<Outcome, Error> {
        self.redo_with(OpOptions::default())
    }

    /// [`Session::redo`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn redo_with(&self, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        if let Some(o) = self.refuse()? {
            return Ok(o);
        }
        let _lock = match self.lock_or_busy()? {
            Ok(l) => l,
            Err(o) => return Ok(o),
        };
        let l = self.load()?;
        if let Some(o) = Self::pending_refusal(&l) {
            return Ok(o);
        }
        let Some(&(n, mode)) = l.state.redo.last() else {
            return Ok(Outcome::NothingToRedo);
        };
        let Some(t) = l.turn(n).cloned() else {
            return Ok(Outcome::NothingToRedo);
        };
        let files = mode.files() && t.state == TurnState::Complete;
        if !files {
            let snapshot = l.state.last_known;
            if let Err(e) = self.write(|w, _| {
                w.op(Op::Redo {
                    turn: n,
                    mode,
                    snapshot,
                })
            }) {
                return Ok(Outcome::PersistenceUncertain {
                    detail: e.to_string(),
                });
            }
            return Ok(Outcome::ConversationOnly {
                turn: Some(n),
                reason: "files left as they are (the undo was conversation-only)".into(),
                anchor: t.leaf.clone(),
                prompt: None,
                checkpoint: None,
            });
        }
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Ok(Outcome::NothingToRedo);
        };
        let applied = match self.reverse(&t, before, after, "redo", opts)? {
            Ok(a) => a,
            Err(o) => return Ok(o),
        };
        let op = Op::Redo {
            turn: n,
            mode,
            snapshot: Some(applied.snapshot),
        };
        if let Err(e) = self.write(|w, _| w.op(op)) {
            return Ok(Outcome::PersistenceUncertain {
                detail: e.to_string(),
            });
        }
        Ok(Outcome::Restored {
            turn: Some(n),
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.skipped,
            anchor: if mode.conversation() { t.leaf } else { None },
            prompt: None,
            snapshot: Some(applied.snapshot),
            safety_snapshot: applied.safety,
        })
    }

    /// Applies the change from snapshot `from` to snapshot `to` to the paths it names,
    /// refusing (as an outcome) when the disk no longer holds `from` there. The caller holds
    /// the exclusive lock. Ends with a recorded capture of the result.
    fn reverse(
        &self,
        t: &TurnRecord,
        from: ObjectId,
        to: ObjectId,
        verb: &str,
        opts: OpOptions<'_>,
    ) -> Result<Result<Reversed, Outcome>, Error> {
        let reader = self.ws.store.reader()?;
        let change = changes(&reader, &from, &to)?;
        let disk = self.ws.scan_disk(opts.progress)?;
        let clash = conflicts(&disk.entries, &change);
        let mut safety = None;
        if !clash.is_empty() {
            if !opts.force {
                return Ok(Err(Outcome::Conflict {
                    count: clash.len(),
                    paths: clash.into_iter().take(MAX_LISTED).collect(),
                }));
            }
            let label = format!("safety: before forced {verb} of turn {}", t.number);
            safety = Some(self.ws.record_locked(Some(label), opts.progress)?.id);
        }
        let target = target_of(&disk.entries, &change);
        let applied =
            self.ws
                .apply_target(&reader, &disk.entries, &target, false, opts.progress)?;
        drop(reader);
        let after = self
            .ws
            .record_locked(Some(format!("{verb} of turn {}", t.number)), opts.progress)?;
        let mut skipped = applied.left_alone;
        // Re-read what the change names: anything not as planned is reported, not hidden.
        for c in change.iter().filter(|c| !is_nested(c)) {
            let now = find(&after.entries, &c.path);
            let planned = find(&target, &c.path);
            if !same(now, planned) && !skipped.iter().any(|s| s.path.as_bytes() == c.path) {
                skipped.push(Skipped {
                    path: lossy(&c.path),
                    reason: "changed while it was being restored".into(),
                });
            }
        }
        Ok(Ok(Reversed {
            written: applied.written,
            deleted: applied.deleted,
            skipped,
            snapshot: after.id,
            safety,
        }))
    }

    /// Captures the workspace now, outside any turn, and records it as a checkpoint
    /// (`checkpoint:N`, or its label, as an anchor).
    ///
    /// # Errors
    /// [`Error`] for store or capture failures.
    pub fn checkpoint(&self, label: Option<String>) -> Result<Outcome, Error> {
        self.checkpoint_with(label, &NoProgress)
    }

    /// [`Session::checkpoint`] with progress.
    ///
    /// # Errors
    /// As [`Session::checkpoint`].
    pub fn checkpoint_with(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Outcome, Error> {
        if self.subagent {
            return Ok(Outcome::Subagent);
        }
        let _flight = InFlight::new(&self.rt);
        let _lock = self.ws.lock(LockMode::Shared, crate::store::LOCK_WAIT)?;
        let label = label.map(|l| truncate(l, MAX_ANCHOR_BYTES));
        let cap = self.ws.record_locked(label.clone(), progress)?;
        let number = self.write(|w, s| {
            let number = s.next_checkpoint;
            w.checkpoint(&CheckpointRecord {
                version: HISTORY_VERSION,
                number,
                label: label.clone(),
                snapshot: cap.id,
                cursor: s.cursor,
                time_ms: now_ms(),
            })?;
            w.op(Op::Checkpoint {
                number,
                snapshot: cap.id,
            })?;
            Ok(number)
        })?;
        Ok(Outcome::Checkpointed {
            number,
            label,
            snapshot: cap.id,
            files: cap.files,
            skipped: cap.skipped,
        })
    }

    /// Checkpoints under the exclusive lock the caller holds, appending `then` in the same
    /// transaction (its snapshot is set to the checkpoint's). Returns the snapshot.
    fn checkpoint_locked(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
        then: Option<Op>,
    ) -> Result<ObjectId, Error> {
        let cap = self.ws.record_locked(label.clone(), progress)?;
        let id = cap.id;
        self.write(|w, s| {
            let number = s.next_checkpoint;
            w.checkpoint(&CheckpointRecord {
                version: HISTORY_VERSION,
                number,
                label,
                snapshot: id,
                cursor: s.cursor,
                time_ms: now_ms(),
            })?;
            w.op(Op::Checkpoint {
                number,
                snapshot: id,
            })?;
            if let Some(op) = then {
                w.op(match op {
                    Op::Undo { turn, to, mode, .. } => Op::Undo {
                        turn,
                        to,
                        mode,
                        snapshot: Some(id),
                    },
                    Op::Navigate { to, .. } => Op::Navigate {
                        to,
                        snapshot: Some(id),
                    },
                    other => other,
                })?;
            }
            Ok(())
        })
        .map_err(Error::Store)?;
        Ok(id)
    }

    fn resolve(l: &Loaded, anchor: &str) -> Result<Target, Error> {
        let unknown = |reason: String| Error::Anchor {
            anchor: anchor.to_string(),
            reason,
        };
        let of_turn = |t: &TurnRecord, after: bool| {
            let snapshot = if after { t.after } else { t.before };
            let cursor = if after { Some(t.number) } else { t.parent };
            let usable = matches!(t.state, TurnState::Complete)
                || (t.state == TurnState::ConversationOnly && snapshot.is_some());
            Target {
                snapshot: snapshot.filter(|_| usable),
                cursor,
                reason: (!usable).then(|| {
                    t.reason
                        .clone()
                        .unwrap_or_else(|| format!("turn {} has no such snapshot", t.number))
                }),
                expired: t.state == TurnState::Expired,
            }
        };
        let of_checkpoint = |c: &CheckpointRecord| Target {
            snapshot: Some(c.snapshot),
            cursor: c.cursor,
            reason: None,
            expired: false,
        };
        if let Some(rest) = anchor.strip_prefix("turn:") {
            let (num, after) = match rest.strip_suffix(":before") {
                Some(n) => (n, false),
                None => (rest, true),
            };
            let n: u64 = num
                .parse()
                .map_err(|_| unknown("write turn:N or turn:N:before".into()))?;
            let t = l
                .turn(n)
                .ok_or_else(|| unknown(format!("turn {n} is not kept")))?;
            if t.state == TurnState::Pending {
                return Err(unknown(format!("turn {n} is still in progress")));
            }
            return Ok(of_turn(t, after));
        }
        if let Some(num) = anchor.strip_prefix("checkpoint:") {
            let n: u64 = num
                .parse()
                .map_err(|_| unknown("write checkpoint:N".into()))?;
            let c = l
                .checkpoints
                .iter()
                .find(|c| c.number == n)
                .ok_or_else(|| unknown(format!("checkpoint {n} is not kept")))?;
            return Ok(of_checkpoint(c));
        }
        // Host anchors: the newest record naming it wins (a turn's start anchor is usually
        // the previous turn's leaf, and the newer before-snapshot holds the edits made in
        // between).
        for t in l
            .turns
            .iter()
            .rev()
            .filter(|t| t.state != TurnState::Pending)
        {
            if t.anchor.as_deref() == Some(anchor) {
                return Ok(of_turn(t, false));
            }
            if t.leaf.as_deref() == Some(anchor) {
                return Ok(of_turn(t, true));
            }
        }
        if let Some(c) = l
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.label.as_deref() == Some(anchor))
        {
            return Ok(of_checkpoint(c));
        }
        if let Some(t) = l
            .turns
            .iter()
            .find(|t| t.rounds.iter().any(|r| r == anchor))
        {
            return Err(unknown(format!(
                "it lies inside turn {}, which has snapshots only at its start and end: \
                 navigate to turn:{}:before or turn:{}",
                t.number, t.number, t.number
            )));
        }
        Err(unknown(
            "no turn or checkpoint of this session names it (see `retrace log`)".into(),
        ))
    }

    /// Restores the workspace to the exact snapshot recorded at `anchor`: a host anchor of
    /// any turn's start or end, `turn:N` (after), `turn:N:before`, `checkpoint:N` or a
    /// checkpoint label. The disk must equal the last snapshot the session (or the
    /// workspace) knows of, else [`Outcome::Dirty`]. Clears redo unless nothing moves.
    ///
    /// # Errors
    /// [`Error::Anchor`] for an anchor naming no snapshot; store, capture or I/O failures.
    pub fn navigate(&self, anchor: &str, mode: Mode) -> Result<Outcome, Error> {
        self.navigate_with(anchor, mode, OpOptions::default())
    }

    /// [`Session::navigate`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::navigate`].
    pub fn navigate_with(
        &self,
        anchor: &str,
        mode: Mode,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Error> {
        if let Some(o) = self.refuse()? {
            return Ok(o);
        }
        let _lock = match self.lock_or_busy()? {
            Ok(l) => l,
            Err(o) => return Ok(o),
        };
        let l = self.load()?;
        if let Some(o) = Self::pending_refusal(&l) {
            return Ok(o);
        }
        let target = Self::resolve(&l, anchor)?;
        let host_anchor = Some(anchor.to_string()).filter(|_| mode.conversation());
        let (Some(snapshot), true) = (target.snapshot, mode.files()) else {
            if target.cursor == l.state.cursor && target.snapshot.is_none() {
                // Nothing moves: keep redo.
                return Ok(Outcome::ConversationOnly {
                    turn: target.cursor,
                    reason: "already there".into(),
                    anchor: host_anchor,
                    prompt: None,
                    checkpoint: None,
                });
            }
            let checkpoint = self.checkpoint_locked(
                Some(format!("kept at conversation navigation to {anchor}")),
                opts.progress,
                Some(Op::Navigate {
                    to: target.cursor,
                    snapshot: None,
                }),
            )?;
            if target.expired {
                return Ok(Outcome::Expired {
                    turn: target.cursor,
                    anchor: host_anchor,
                    prompt: None,
                });
            }
            return Ok(Outcome::ConversationOnly {
                turn: target.cursor,
                reason: target
                    .reason
                    .unwrap_or_else(|| "files left as they are (conversation-only)".into()),
                anchor: host_anchor,
                prompt: None,
                checkpoint: Some(checkpoint),
            });
        };
        let reader = self.ws.store.reader()?;
        let mut disk = self.ws.scan_disk(opts.progress)?;
        if disk.id == snapshot && target.cursor == l.state.cursor {
            return Ok(Outcome::Restored {
                turn: target.cursor,
                mode,
                files_written: Vec::new(),
                files_deleted: Vec::new(),
                skipped: Vec::new(),
                anchor: host_anchor,
                prompt: None,
                snapshot: Some(snapshot),
                safety_snapshot: None,
            });
        }
        let known = [l.state.last_known, reader.last_known()?];
        let mut safety = None;
        if !known.contains(&Some(disk.id)) {
            let base = l.state.last_known.or(known[1]);
            let changed = match base {
                Some(k) => {
                    let (old, same_dirs) = flatten_changed(&reader, &k, &disk.entries)?;
                    let mut now = disk.entries.clone();
                    now.retain(|e| !crate::diff::below_any(&e.path, &same_dirs));
                    crate::diff::diff(&old, &now).paths()
                }
                None => disk.entries.iter().map(|e| lossy(&e.path)).collect(),
            };
            if !changed.is_empty() {
                if !opts.force {
                    return Ok(Outcome::Dirty {
                        count: changed.len(),
                        paths: changed.into_iter().take(MAX_LISTED).collect(),
                    });
                }
                let label = format!("safety: before forced navigation to {anchor}");
                safety = Some(self.ws.record_locked(Some(label), opts.progress)?.id);
            }
        }
        let (target_entries, same_dirs) = flatten_changed(&reader, &snapshot, &disk.entries)?;
        disk.entries
            .retain(|e| !crate::diff::below_any(&e.path, &same_dirs));
        let applied = self.ws.apply_target(
            &reader,
            &disk.entries,
            &target_entries,
            false,
            opts.progress,
        )?;
        drop(reader);
        // The result is captured: whatever was left alone is part of the state recorded.
        let after = self
            .ws
            .record_locked(Some(format!("navigate to {anchor}")), opts.progress)?;
        let op = Op::Navigate {
            to: target.cursor,
            snapshot: Some(after.id),
        };
        if let Err(e) = self.write(|w, _| w.op(op)) {
            return Ok(Outcome::PersistenceUncertain {
                detail: e.to_string(),
            });
        }
        Ok(Outcome::Restored {
            turn: target.cursor,
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.left_alone,
            anchor: host_anchor,
            prompt: None,
            snapshot: Some(after.id),
            safety_snapshot: safety,
        })
    }

    fn status_of(&self, l: &Loaded) -> SessionStatus {
        let can_undo = l.state.pending.is_none()
            && l.state.cursor.is_some_and(|n| l.turn(n).is_some())
            && !self.subagent;
        SessionStatus {
            session: self.id(),
            subagent: self.subagent,
            turns: l.turns.len(),
            checkpoints: l.checkpoints.len(),
            cursor: l.state.cursor,
            can_undo,
            can_redo: l.state.pending.is_none() && !l.state.redo.is_empty() && !self.subagent,
            redo_turn: l.state.redo.last().copied(),
            pending: l.state.pending,
            last_known: l.state.last_known,
        }
    }

    /// Can undo, can redo, cursor and counts.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn status(&self) -> Result<SessionStatus, Error> {
        Ok(self.status_of(&self.load()?))
    }

    /// The session's turns and checkpoints, oldest first, with what each changed.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn log(&self) -> Result<SessionLog, Error> {
        let l = self.load()?;
        let applied: HashSet<u64> = l.applied().into_iter().collect();
        let undone: HashSet<u64> = l.state.redo.iter().map(|r| r.0).collect();
        let mut entries: Vec<LogEntry> = l
            .turns
            .iter()
            .map(|t| LogEntry {
                kind: "turn",
                number: t.number,
                time_ms: t.began_ms,
                state: Some(t.state),
                text: t.prompt.clone(),
                anchor: t.anchor.clone(),
                leaf: t.leaf.clone(),
                before: t.before,
                after: t.after,
                counts: t.counts,
                applied: applied.contains(&t.number),
                undone: undone.contains(&t.number),
            })
            .chain(l.checkpoints.iter().map(|c| LogEntry {
                kind: "checkpoint",
                number: c.number,
                time_ms: c.time_ms,
                state: None,
                text: c.label.clone(),
                anchor: None,
                leaf: None,
                before: Some(c.snapshot),
                after: None,
                counts: [0; 3],
                applied: false,
                undone: false,
            }))
            .collect();
        entries.sort_by_key(|e| e.time_ms);
        Ok(SessionLog {
            status: self.status_of(&l),
            entries,
        })
    }
}

struct Reversed {
    written: Vec<String>,
    deleted: Vec<String>,
    skipped: Vec<Skipped>,
    snapshot: ObjectId,
    safety: Option<ObjectId>,
}

impl Turn {
    /// The turn's number (`turn:N`). Zero for a subagent's turn, which records nothing.
    #[must_use]
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Waits for the before-snapshot at most `timeout`. Past it, the turn becomes
    /// conversation-only (undo will move the conversation and say files were not restored)
    /// rather than keep a baseline taken while the agent was already editing.
    ///
    /// # Errors
    /// [`Error::Store`] when marking the turn conversation-only fails.
    pub fn wait_before(&self, timeout: Duration) -> Result<BeforeStatus, Error> {
        if self.session.subagent {
            return Ok(BeforeStatus::Subagent);
        }
        let deadline = Instant::now().checked_add(timeout);
        let (m, cv) = &*self.before;
        let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &*g {
                Slot::Ready(id) => return Ok(BeforeStatus::Ready { snapshot: *id }),
                Slot::Abandoned(r) => {
                    return Ok(BeforeStatus::ConversationOnly { reason: r.clone() });
                }
                Slot::Running => {}
            }
            let left = deadline.map_or(Duration::from_hours(1), |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                let reason = format!(
                    "the before-snapshot took longer than {} ms",
                    timeout.as_millis()
                );
                // Decided under the slot's lock: the capture thread cannot record it now.
                *g = Slot::Abandoned(reason.clone());
                self.session.make_conversation_only(self.number, &reason)?;
                return Ok(BeforeStatus::ConversationOnly { reason });
            }
            g = cv
                .wait_timeout(g, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Records the anchor of an intermediate round (tool round, retry) of this turn, so the
    /// host can tell which turn a conversation node belongs to.
    ///
    /// # Errors
    /// [`Error::Store`] when it cannot be recorded.
    pub fn round(&self, anchor: String) -> Result<(), Error> {
        if self.session.subagent {
            return Ok(());
        }
        let anchor = truncate(anchor, MAX_ANCHOR_BYTES);
        self.session.write(|w, _| {
            if let Some(mut t) = w.get_turn(self.number)? {
                t.rounds.push(anchor);
                w.turn(&t)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Ends the turn: waits for its before-snapshot, captures the after-snapshot and
    /// records both. `leaf` is the host's conversation leaf now (redo returns to it).
    ///
    /// # Errors
    /// [`Error`] when the capture or the record fails.
    pub fn end(self, leaf: Option<String>) -> Result<TurnSummary, Error> {
        let s = &self.session;
        if s.subagent {
            return Ok(TurnSummary {
                turn: 0,
                state: TurnState::ConversationOnly,
                reason: Some("subagent sessions are not checkpointed".into()),
                before: None,
                after: None,
                added: 0,
                modified: 0,
                deleted: 0,
                skipped: Vec::new(),
                dropped: 0,
            });
        }
        let _flight = InFlight::new(&s.rt);
        let before = {
            let (m, cv) = &*self.before;
            let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
            while matches!(*g, Slot::Running) {
                g = cv.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            match &*g {
                Slot::Ready(id) => Ok(*id),
                Slot::Abandoned(r) => Err(r.clone()),
                Slot::Running => Err(String::new()),
            }
        };
        let _lock = s.ws.lock(LockMode::Shared, crate::store::LOCK_WAIT)?;
        let cap =
            s.ws.record_locked(Some(format!("after turn {}", self.number)), &NoProgress)?;
        let counts = match before {
            Ok(b) => {
                let reader = s.ws.store.reader()?;
                let mut c = [0u32; 3];
                for ch in changes(&reader, &b, &cap.id)? {
                    let leaf = |e: &Option<FlatEntry>| {
                        e.as_ref().is_some_and(|e| e.kind != EntryKind::Dir)
                    };
                    let i = match (leaf(&ch.old), leaf(&ch.new)) {
                        (false, true) => 0,
                        (true, true) => 1,
                        (true, false) => 2,
                        (false, false) => continue,
                    };
                    c[i] = c[i].saturating_add(1);
                }
                c
            }
            Err(_) => [0; 3],
        };
        let max = s.ws.max_turns;
        let leaf = leaf.map(|a| truncate(a, MAX_ANCHOR_BYTES));
        let number = self.number;
        let (rec, dropped) = s.write(|w, _| {
            let mut t = w.get_turn(number)?.ok_or_else(|| StoreError::History {
                path: s.path().into(),
                detail: format!("turn {number} vanished before it ended"),
            })?;
            t.after = Some(cap.id);
            t.leaf = leaf;
            t.ended_ms = Some(now_ms());
            t.counts = counts;
            match (&before, t.state) {
                (Ok(b), TurnState::Pending) => {
                    t.before = Some(*b);
                    t.state = TurnState::Complete;
                }
                (Err(r), TurnState::Pending) => {
                    t.state = TurnState::ConversationOnly;
                    t.reason = Some(r.clone());
                }
                _ => {}
            }
            w.turn(&t)?;
            w.op(Op::TurnEnded {
                turn: number,
                snapshot: Some(cap.id),
            })?;
            let state = w.state()?;
            let dropped = w.cap(max, &state)?;
            Ok((t, dropped))
        })?;
        Ok(TurnSummary {
            turn: number,
            state: rec.state,
            reason: rec.reason,
            before: rec.before,
            after: rec.after,
            added: counts[0],
            modified: counts[1],
            deleted: counts[2],
            skipped: cap.skipped,
            dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, kind: EntryKind, id: u8) -> FlatEntry {
        FlatEntry {
            path: path.as_bytes().to_vec(),
            kind,
            id: ObjectId([id; 32]),
            size: 1,
        }
    }

    fn change(path: &str, old: Option<FlatEntry>, new: Option<FlatEntry>) -> Change {
        Change {
            path: path.as_bytes().to_vec(),
            old,
            new,
        }
    }

    #[test]
    fn conflicts_only_where_the_disk_left_the_turns_result() {
        let f = EntryKind::File;
        let disk = vec![e("a", f, 2), e("b", f, 9), e("c", f, 1)];
        let ch = vec![
            change("a", Some(e("a", f, 2)), Some(e("a", f, 1))),
            change("b", Some(e("b", f, 2)), Some(e("b", f, 1))),
            change("d", Some(e("d", f, 2)), None),
        ];
        // a is as the turn left it; b was edited since; d was deleted since.
        assert_eq!(conflicts(&disk, &ch), vec!["b", "d"]);
    }

    #[test]
    fn a_directory_becoming_a_file_conflicts_with_unknown_files_inside() {
        let (f, d) = (EntryKind::File, EntryKind::Dir);
        let disk = vec![e("x", d, 0), e("x/a", f, 1), e("x/user", f, 5)];
        let ch = vec![
            change("x", Some(e("x", d, 0)), Some(e("x", f, 3))),
            change("x/a", Some(e("x/a", f, 1)), None),
        ];
        assert_eq!(conflicts(&disk, &ch), vec!["x"]);
        assert!(conflicts(&disk[..2], &ch).is_empty());
    }

    #[test]
    fn target_keeps_unrelated_paths_and_adds_parents() {
        let f = EntryKind::File;
        let disk = vec![e("keep", f, 7), e("new", f, 1)];
        let ch = vec![
            change("new", Some(e("new", f, 1)), None),
            change("gone/x", None, Some(e("gone/x", f, 4))),
        ];
        let t = target_of(&disk, &ch);
        let paths: Vec<&[u8]> = t.iter().map(|e| e.path.as_slice()).collect();
        assert_eq!(paths, vec![&b"gone"[..], b"gone/x", b"keep"]);
        assert_eq!(t[0].kind, EntryKind::Dir);
    }
}
