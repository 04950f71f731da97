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
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let home = tempfile::tempdir()?;
//! use retrace::{Config, Mode, Outcome, Workspace};
//! let ws = Workspace::open(dir.path(), &Config::with_home(home.path()))?;
//! let session = ws.session("conversation-1");
//! let turn = session.begin_turn(Some("node-1".into()), Some("add a file".into()))?;
//! turn.wait_before(std::time::Duration::from_secs(60))?;
//! std::fs::write(dir.path().join("new.txt"), "agent output")?; // the agent works
//! turn.end(Some("node-2".into()))?;
//! let undone = session.undo(Mode::Both)?;
//! assert!(matches!(undone, Outcome::Restored { .. }));
//! assert_eq!(undone.anchor(), Some("node-1"));
//! assert!(!dir.path().join("new.txt").exists());
//! session.redo()?;
//! assert!(dir.path().join("new.txt").exists());
//! # Ok(())
//! # }
//! ```

pub mod blame;
pub mod bursts;
pub mod db;
pub mod inspect;
pub mod ledger;
pub(crate) mod ledger_prune;
pub mod list;
pub mod liveness;
pub(crate) mod log_thin;
mod navigate;
mod observed;
mod outcome;
mod ownership;
mod pipeline;
pub(crate) mod paths;
pub mod record;
mod revert;
pub mod runtime;
pub mod state;
mod step;
pub mod tables;
pub mod timeline;
mod turn;
mod undo;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError};

use serde::Serialize;

use crate::error::{Error, StoreError};
use crate::object::ObjectId;
use crate::progress::{NoProgress, Progress};
use crate::restore::journal::Then;
use crate::store::WriteTx;
use crate::store::now_ms;
use crate::working_copy::{Exclusive, WorkingCopy};
use db::{Loaded, SessionKey, Writer};
use tables::SetLedgerMeta;
pub(crate) use pipeline::{
    Begun, Stop, pending_journal, recover_journal, recover_journal_if_needed,
};
pub use list::{Lookup, SessionInfo};
pub use navigate::step_name;
pub use outcome::{Outcome, Report};
pub(crate) use ownership::Held;
use record::{CheckpointRecord, HISTORY_VERSION, MAX_ANCHOR_BYTES, Op, truncate};
pub use record::{Mode, StepRecord, TurnState};
pub use revert::RevertPreview;
pub use step::{StepInfo, StepLog};
pub use turn::{BeforeStatus, Turn, TurnSummary};

/// In-process state of one session: captures running now (for `capture_in_flight`).
#[derive(Debug, Default)]
pub struct Runtime {
    capturing: AtomicU32,
    /// Publications of the state file (its revision).
    revision: std::sync::atomic::AtomicU64,
    /// The state file published, removed when the runtime goes.
    published: std::sync::Mutex<Option<std::path::PathBuf>>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Ok(Some(file)) = self.published.get_mut().map(Option::take) {
            runtime::unpublish(&file);
        }
    }
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
    ws: WorkingCopy,
    key: SessionKey,
    subagent: bool,
    rt: Arc<Runtime>,
    /// The process that owns the turns this handle begins (see [`crate::lease`]).
    owner: u32,
    /// The host's id of the session, kept with it on its first write (None: opened by key,
    /// a session from before names were kept).
    name: Option<Arc<str>>,
    /// The agent that opened it, kept with the name.
    agent: Option<Arc<str>>,
}

/// One line of a session's log.
#[derive(Clone, Debug, Serialize)]
pub struct LogEntry {
    /// `turn`, `revert` (a turn that reverted an earlier one) or `checkpoint`.
    pub kind: &'static str,
    /// Number within its kind (anchors `turn:N`, `checkpoint:N`).
    pub number: u64,
    /// Unix milliseconds (begin of a turn).
    pub time_ms: u64,
    /// Turn state (None for checkpoints).
    pub state: Option<TurnState>,
    /// Why the turn is conversation-only, or how it ended when that was unusual (no stop
    /// event, a dead owner).
    pub reason: Option<String>,
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
    pub counts: record::Counts,
    /// On the cursor's chain: undo will step back over it.
    pub applied: bool,
    /// On the redo stack.
    pub undone: bool,
    /// The turn a revert reverted.
    pub reverts: Option<u64>,
    /// Paths a revert merged.
    pub merged: Vec<String>,
    /// Stored bytes of the objects it added to the store, computed by walking the log
    /// oldest first (see `inspect`: trees are not counted).
    pub bytes_added: u64,
    /// A turn's steps, oldest first, when asked for ([`Session::log_with_steps`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepLog>,
}

/// A session's state as a host shows it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionStatus {
    /// First 16 hex digits of the session key.
    pub session: String,
    /// The host's id of the session, when known.
    pub name: Option<String>,
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
    /// Turns and checkpoints, newest first (as every log of retrace, git and jj).
    pub entries: Vec<LogEntry>,
}

/// A session's op, recorded with a journaled restore's result: the journal's `then` (its
/// snapshot field is set to the result when it is recorded).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionOp(pub SessionKey, pub Op);

impl Then for SessionOp {
    const NEW_STORE_TABLES: &'static [crate::store::Table] = tables::NEW_STORE;

    fn record_unclaimed(
        tx: &WriteTx<'_>,
        what: &str,
        source: ObjectId,
        snapshot: ObjectId,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError> {
        SessionOp::user_restore(tx, what, source, snapshot, reader)
    }

    fn record(
        self,
        tx: &WriteTx<'_>,
        snapshot: ObjectId,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError> {
        #[cfg(test)]
        if fail_writes() {
            return Err(StoreError::History {
                path: tx.path().into(),
                detail: "injected write failure".into(),
            });
        }
        // The ledger: what the restore wrote is this session's, in the same commit as its
        // record. An operation made while the session's turn runs (the model's undo, revert
        // or restore) is part of that turn, and a revert is a turn of its own (the next
        // number): their writes are the turn's, as its steps' are; any other is the
        // session's operation.
        let w = Writer::new(tx, self.0)?;
        let s = w.state()?;
        let turn = |turn| ledger::Writer::Turn {
            session: self.0.0,
            turn,
            step: None,
        };
        let writer = match (&self.1, s.pending) {
            (_, Some(t)) => turn(t),
            (Op::Revert { .. } | Op::RevertStep { .. }, None) => turn(s.next_turn),
            (op, None) => ledger::Writer::Op {
                session: Some(self.0.0),
                what: match op {
                    Op::Undo { turn, .. } => format!("undo of turn {turn}"),
                    Op::Redo { turn, .. } => format!("redo of turn {turn}"),
                    Op::Navigate { .. } => "navigation".to_string(),
                    _ => "restore".to_string(),
                },
            },
        };
        ledger::claim_changes(tx, reader, &writer, snapshot)?;
        if matches!(self.1, Op::Restore { .. }) {
            return Ok(());
        }
        match self.1.with_snapshot(snapshot) {
            op @ (Op::Revert { .. } | Op::RevertStep { .. }) => revert::record(&w, op),
            op => w.op(op),
        }
    }
}

impl SessionOp {
    /// A restore made for session `key`: its journal's record, which makes the session's
    /// operation the ledger's writer of what it wrote.
    #[must_use]
    pub fn restore(key: SessionKey) -> SessionOp {
        SessionOp(key, Op::Restore { snapshot: None })
    }

    /// [`Then::record_unclaimed`]: the user's restore is the ledger's writer of what it wrote.
    fn user_restore(
        tx: &WriteTx<'_>,
        what: &str,
        source: ObjectId,
        snapshot: ObjectId,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError> {
        let mut phases = crate::trace::Phases::new("ledger");
        let writer = ledger::Writer::Op {
            session: None,
            what: what.to_string(),
        };
        // What changed before it found the disk was written by whoever ran then; what it
        // wrote is its own: in one pass over the ledger.
        match ledger::from(tx)? {
            Some(at) if at != source => {
                let then = crate::diff::changes(reader, &source, &snapshot);
                let before = match &then {
                    // Back to where the ledger stands: what changed before is what the
                    // restore takes back, the other way round.
                    Ok(then) if at == snapshot => Ok(then
                        .iter()
                        .map(|c| crate::diff::Change {
                            path: c.path.clone(),
                            old: c.new.clone(),
                            new: c.old.clone(),
                        })
                        .collect()),
                    _ => crate::diff::changes(reader, &at, &source),
                };
                match (before, then) {
                    (Ok(changes), Ok(then)) => {
                        phases.mark(&format!(
                            "changes ({} before, {} by the restore)",
                            changes.len(),
                            then.len()
                        ));
                        ledger::bring_up_to_date_and_claim(
                            tx,
                            (reader, at),
                            (&changes, source),
                            (&then, &writer),
                            snapshot,
                        )?;
                    }
                    (Ok(changes), Err(_)) => {
                        // Its own writes unreadable: as `claim_changes` leaves them.
                        let window = ledger::Window::default();
                        ledger::bring_up_to_date(tx, (reader, at), &changes, source, window)?;
                        return tx.set_ledger_at(snapshot);
                    }
                    (Err(_), _) => ledger::claim_changes(tx, reader, &writer, snapshot)?,
                }
            }
            Some(_) => ledger::claim_changes(tx, reader, &writer, snapshot)?,
            // No session has begun the ledger (docs/format.md, `ledger_at`): a restore of
            // the user's alone keeps none.
            None => {}
        }
        phases.mark("ledger up to date");
        Ok(())
    }
}

/// Writes checkpoint `snapshot` (the session's next number, at its cursor) and its op;
/// returns its number.
fn record_checkpoint(
    w: &Writer<'_>,
    s: &state::SessionState,
    label: Option<String>,
    snapshot: ObjectId,
) -> Result<u64, StoreError> {
    let number = s.next_checkpoint;
    w.checkpoint(&CheckpointRecord {
        version: HISTORY_VERSION,
        number,
        label,
        snapshot,
        cursor: s.cursor,
        time_ms: now_ms(),
    })?;
    w.op(Op::Checkpoint { number, snapshot })?;
    Ok(number)
}

/// In-process state of the sessions opened through one workspace handle, by key.
pub(crate) type Runtimes = std::sync::Mutex<std::collections::HashMap<SessionKey, Arc<Runtime>>>;

impl Session {
    /// The session keyed by the host's session id `id` in `wc`, sharing in-process state
    /// with the other handles opened through `runtimes` ([`crate::Workspace::session`]).
    pub(crate) fn open(wc: &WorkingCopy, runtimes: &Runtimes, id: &str, subagent: bool) -> Session {
        let mut s = Session::open_key(wc, runtimes, db::session_key(id), subagent);
        s.name = Some(id.into());
        s
    }

    /// The session with key `key` (one [`list`] found), whatever its name.
    pub(crate) fn open_key(
        wc: &WorkingCopy,
        runtimes: &Runtimes,
        key: SessionKey,
        subagent: bool,
    ) -> Session {
        let (rt, new) = {
            let mut map = runtimes.lock().unwrap_or_else(PoisonError::into_inner);
            let new = !map.contains_key(&key);
            (map.entry(key).or_default().clone(), new)
        };
        // A subagent keeps no history: nothing of its own to protect.
        if new && !subagent {
            liveness::open(wc.dir(), &key, &rt);
            // Resuming a session whose file history expired: say so once.
            let expired = wc.store().begin_read().ok().and_then(|tx| {
                db::turns(&tx, &key)
                    .ok()
                    .map(|t| t.iter().filter(|t| t.state == TurnState::Expired).count())
            });
            if let Some(n) = expired.filter(|n| *n > 0) {
                wc.warn(format!(
                    "this session has {n} turn(s) whose file history expired (retention): \
                     undo of those moves only the conversation; new turns work normally"
                ));
            }
        }
        Session {
            ws: wc.clone(),
            key,
            subagent,
            rt,
            owner: std::process::id(),
            name: None,
            agent: None,
        }
    }

    fn path(&self) -> &std::path::Path {
        self.ws.store().path()
    }

    fn load(&self) -> Result<Loaded, Error> {
        let tx = self.ws.store().begin_read()?;
        Ok(db::load(&tx, &self.key)?)
    }

    /// Writes in one durable transaction; the closure gets the session writer and the state
    /// re-read inside the transaction.
    fn write<T>(
        &self,
        f: impl FnOnce(&Writer<'_>, &state::SessionState) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        #[cfg(test)]
        if tests::FAIL_WRITES.with(std::cell::Cell::get) {
            return Err(StoreError::History {
                path: self.path().into(),
                detail: "injected write failure".into(),
            });
        }
        self.ws.store().transact(|tx| {
            let w = Writer::new(tx, self.key)?;
            if let Some(name) = &self.name {
                w.name(name, self.agent.as_deref())?;
            }
            let s = w.state()?;
            f(&w, &s)
        })
    }

    internal! {
        /// The working copy this session belongs to.
        #[must_use]
        fn workspace(&self) -> &WorkingCopy {
            &self.ws
        }
    }

    internal! {
        /// Its key in the store.
        #[must_use]
        fn key(&self) -> SessionKey {
            self.key
        }
    }

    /// Hex of the first 8 bytes of the session key.
    #[must_use]
    pub fn id(&self) -> String {
        self.key.short()
    }

    /// Quick refusals that need no lock: subagent, capture in flight, turn in progress.
    fn refuse(&self) -> Result<Option<Outcome>, Error> {
        if self.subagent {
            return Ok(Some(Outcome::Subagent));
        }
        if self.rt.capturing.load(Ordering::SeqCst) > 0 {
            return Ok(Some(Outcome::CaptureInFlight));
        }
        Ok(self.pending_refusal(&self.load()?))
    }

    /// The lease of this session's turn `n`, if one can be read (`Err`: a record that does
    /// not decode, which callers treat as "uncertain").
    fn lease(
        &self,
        n: u64,
    ) -> Option<Result<crate::lease::LeaseRecord, crate::object::record::DecodeError>> {
        let tx = self.ws.store().begin_read().ok()?;
        db::lease(&tx, &self.key, n).ok().flatten()
    }

    /// `busy` while a turn is pending and its owner may be alive; None when nothing is
    /// pending or its owner is certainly gone (the caller then cleans the turn up).
    fn pending_refusal(&self, l: &Loaded) -> Option<Outcome> {
        let n = l.state.pending?;
        let lease = self.lease(n);
        let detail =
            match lease.map(|r| r.map(|r| (crate::lease::liveness(&r, self.ws.home()), r.pid))) {
                Some(Ok((crate::lease::Liveness::Dead, _))) => return None,
                Some(Ok((crate::lease::Liveness::Alive, pid))) => format!(
                    "turn {n} is in progress (process {pid}); wait until the agent finishes (or \
                 end it with `retrace turn end`)"
                ),
                Some(Ok((crate::lease::Liveness::Uncertain(why), _))) => format!(
                    "turn {n} is in progress and its owner cannot be checked ({why}); end it with \
                 `retrace turn end`"
                ),
                Some(Err(why)) => format!(
                    "turn {n} is in progress and its lease is unreadable ({why}); end it with \
                 `retrace turn end`"
                ),
                None => format!(
                    "turn {n} is in progress and no owner is recorded for it (this machine's \
                     identity could not be read when it began); wait until the agent finishes, \
                     or end it with `retrace turn end`"
                ),
            };
        Some(Outcome::Busy { detail })
    }

    /// The same handle, recording `agent` (`claude-code`, `pi`, …) as the agent that opened
    /// the session (`retrace sessions` shows it).
    #[must_use]
    pub fn for_agent(mut self, agent: &str) -> Session {
        self.agent = Some(agent.into());
        self
    }

    /// The host's id of the session, when this handle was opened by it.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The same handle, with turns it begins owned by process `pid` (an agent that runs
    /// `retrace turn begin` as a child names itself, so the turn outlives the child).
    #[must_use]
    pub fn owned_by(mut self, pid: u32) -> Session {
        self.owner = pid;
        self
    }

    /// Captures the workspace now, outside any turn, and records it as a checkpoint
    /// (`checkpoint:N`, or its label, as an anchor).
    ///
    /// # Errors
    /// [`Error`] for store or capture failures.
    pub fn checkpoint(&self, label: Option<String>) -> Result<Outcome, Error> {
        self.checkpoint_with(label, &NoProgress)
    }

    /// [`Session::checkpoint`] with options; the result is also published for external clients
    /// (see `crate::history::runtime`).
    ///
    /// # Errors
    /// As [`Session::checkpoint`].
    pub fn checkpoint_with(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Outcome, Error> {
        let o = self.checkpoint_with_unpublished(label, progress)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// [`Session::checkpoint`] with progress.
    ///
    /// # Errors
    /// As [`Session::checkpoint`].
    fn checkpoint_with_unpublished(
        &self,
        label: Option<String>,
        progress: &dyn Progress,
    ) -> Result<Outcome, Error> {
        if self.subagent {
            return Ok(Outcome::Subagent);
        }
        let _flight = InFlight::new(&self.rt);
        recover_journal_if_needed(&self.ws, self.ws.history_wait());
        let lock = self.ws.lock_shared(crate::store::LOCK_WAIT)?;
        let label = label.map(|l| truncate(l, MAX_ANCHOR_BYTES));
        let cap = lock.record(label.clone(), progress)?;
        let number = self.write(|w, s| record_checkpoint(w, s, label.clone(), cap.id))?;
        Ok(Outcome::Checkpointed {
            number,
            label,
            snapshot: cap.id,
            files: cap.files,
            skipped: cap.skipped,
        })
    }

    /// Checkpoints under the exclusive lock `ex`, appending `then` in the same transaction
    /// (its snapshot is set to the checkpoint's). Returns the snapshot.
    fn checkpoint_under(
        &self,
        ex: &Exclusive<'_>,
        label: Option<String>,
        progress: &dyn Progress,
        then: Option<Op>,
    ) -> Result<Option<ObjectId>, Error> {
        if self.ws.conversation_only().is_some() {
            // Nothing is ever captured here: only the conversation moves.
            if let Some(op) = then {
                self.write(|w, _| w.op(op))?;
            }
            return Ok(None);
        }
        let cap = ex.record(label.clone(), progress)?;
        let id = cap.id;
        self.write(|w, s| {
            record_checkpoint(w, s, label, id)?;
            if let Some(op) = then {
                w.op(op.with_snapshot(id))?;
            }
            Ok(())
        })
        .map_err(Error::Store)?;
        Ok(Some(id))
    }

    fn status_of(&self, l: &Loaded) -> SessionStatus {
        let can_undo = l.state.pending.is_none()
            && l.state.cursor.is_some_and(|n| l.turn(n).is_some())
            && !self.subagent;
        SessionStatus {
            session: self.id(),
            name: self
                .name
                .as_deref()
                .map(str::to_string)
                .or_else(|| l.name.clone()),
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

    /// The session's turns and checkpoints, newest first, with what each changed and the
    /// bytes it added to the store (`inspect`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read.
    pub fn log(&self) -> Result<SessionLog, Error> {
        inspect::log_of(self)
    }

    /// [`Session::log`] with each turn's steps (`retrace log --steps`).
    ///
    /// # Errors
    /// As [`Session::log`].
    pub fn log_with_steps(&self) -> Result<SessionLog, Error> {
        let mut log = inspect::log_of(self)?;
        for e in log.entries.iter_mut().filter(|e| e.kind != "checkpoint") {
            e.steps = self.step_log(e.number)?;
        }
        Ok(log)
    }
}

/// Whether the unit tests made history writes fail on this thread.
#[cfg(test)]
pub(crate) fn fail_writes() -> bool {
    tests::FAIL_WRITES.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests;
