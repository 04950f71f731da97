//! Turns: begin (before-snapshot in the background), wait for the baseline with a deadline,
//! intermediate rounds, end (after-snapshot).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::db::{self, Loaded, Writer};
use super::record::{
    Counts, HISTORY_VERSION, MAX_ANCHOR_BYTES, MAX_PROMPT_BYTES, Op, TurnRecord, truncate,
};
use super::{InFlight, Session, TurnState};
use crate::capture::Captured;
use crate::error::{CaptureError, Error, StoreError};
use crate::object::ObjectId;
use crate::progress::NoProgress;
use crate::scan::Skipped;
use crate::store::now_ms;
use crate::working_copy::Exclusive;

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
    /// Recorded in the capture's commit, which is being made: no longer abandonable.
    Committing(ObjectId),
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
    /// Files left out of the after-snapshot as credentials (`.env`, keys: docs/retention.md,
    /// `allow_secrets`): what the turn did to them cannot be undone.
    pub secrets: Vec<String>,
    /// Turns dropped because the session exceeded its cap.
    pub dropped: u64,
}

impl TurnSummary {
    /// The summary of turn record `rec` as ended with `counts`.
    fn of(
        rec: TurnRecord,
        counts: Counts,
        (skipped, secrets): (Vec<Skipped>, Vec<String>),
        dropped: u64,
    ) -> TurnSummary {
        TurnSummary {
            turn: rec.number,
            state: rec.state,
            reason: rec.reason,
            before: rec.before,
            after: rec.after,
            added: counts.added,
            modified: counts.modified,
            deleted: counts.deleted,
            skipped,
            secrets,
            dropped,
        }
    }
}

impl Session {
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
        // An owner that does not exist could never end the turn, nor be seen to die: every
        // later undo would be busy. (Checked only where /proc tells: it does for ourselves.)
        if crate::lease::start_time(std::process::id()).is_some()
            && crate::lease::start_time(self.owner).is_none()
        {
            return Err(Error::NoSuchOwner { pid: self.owner });
        }
        super::recover_journal_if_needed(&self.ws, self.ws.history_wait());
        // Shared lock from the record to the capture's end: a restore in another process
        // either finished before this turn began or starts after its baseline is taken.
        let lock = self.ws.lock_shared(crate::store::LOCK_WAIT)?.detach();
        let anchor = anchor.map(|a| truncate(a, MAX_ANCHOR_BYTES));
        let prompt = prompt.map(|p| truncate(p, MAX_PROMPT_BYTES));
        // No lease when this machine's identity cannot be read: the turn then simply stays
        // pending until it is ended or the next turn begins.
        let lease = crate::lease::new_lease(self.ws.home(), self.owner).ok();
        let superseded = self.superseded()?;
        let owner_died = superseded.as_ref().is_some_and(|s| !s.owner_alive);
        let (number, closed) = self.write(|w, s| {
            let mut closed = None;
            if let Some(p) = s.pending
                && let Some(mut old) = w.get_turn(p)?
            {
                closed = Some(p);
                w.drop_lease(p)?;
                // Conversation-only unless this turn's before-snapshot proves its end (see
                // `Superseded`): that is decided in the capture's commit.
                old.state = TurnState::ConversationOnly;
                old.reason = Some(match &superseded {
                    Some(sup) if !sup.owner_alive => format!(
                        "its owner died before it ended (a new turn began); what it changed \
                         cannot be told from edits made since, so its files are left as they \
                         are (`retrace navigate turn:{p}:before` restores its before-state)"
                    ),
                    _ => "the turn never ended (a new turn began)".into(),
                });
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
                counts: Counts::default(),
            })?;
            w.op(Op::TurnBegun { turn: number })?;
            if let Some(lease) = &lease {
                w.put_lease(number, lease)?;
            }
            Ok((number, closed))
        })?;
        if let Some(why) = &self.ws.conversation_only() {
            // Nothing is captured here: the turn is conversation-only from the start.
            drop(lock);
            let reason = format!("files are never snapshotted here ({why})");
            self.make_conversation_only(number, &reason)?;
            return Ok(Turn {
                session: self.clone(),
                number,
                before: Arc::new((Mutex::new(Slot::Abandoned(reason)), Condvar::new())),
            });
        }
        let before = Arc::new((Mutex::new(Slot::Running), Condvar::new()));
        let (session, slot) = (self.clone(), Arc::clone(&before));
        std::thread::Builder::new()
            .name(format!("retrace-before-{number}"))
            .spawn(move || {
                let (m, cv) = &*slot;
                let looked = super::ledger::looking(session.ws.store());
                // The baseline is recorded in the capture's own commit (one sync), unless the
                // host gave up waiting first: decided under the slot's lock.
                let also = |tx: &crate::store::WriteTx<'_>,
                            root: ObjectId,
                            seen: &Captured<'_>|
                 -> Result<(), StoreError> {
                    // What changed before the turn began is not the turn's.
                    // (and what changed since a turn it closed stopped is that turn's).
                    super::ledger::in_capture(
                        tx,
                        &session.ws.store().reader()?,
                        (seen, root),
                        super::ledger::Window {
                            began: Some((session.key, number)),
                            // A turn whose owner died: what changed since may be anyone's
                            // (its own writes before it died are in its steps' records).
                            ran: closed.filter(|_| !owner_died).map(|p| (session.key, p)),
                            stepping: None,
                        },
                        looked,
                    )?;
                    let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
                    if !matches!(*g, Slot::Running) {
                        return Ok(());
                    }
                    let w = Writer::new(tx, session.key)?;
                    if w.state()?.pending == Some(number) {
                        if let Some(mut t) = w.get_turn(number)? {
                            t.before = Some(root);
                            w.turn(&t)?;
                        }
                        w.op(Op::TurnBefore {
                            turn: number,
                            snapshot: root,
                        })?;
                        // The agent has not gone on yet: this is the disk where the turn
                        // left pending stopped, if anything can prove it.
                        if let Some(old) = &superseded {
                            old.end(&w, root, seen, &session.ws.store().reader()?)?;
                        }
                    }
                    *g = Slot::Committing(root);
                    Ok(())
                };
                let lock = lock.attach(&session.ws);
                let captured =
                    lock.record_with(Some(format!("before turn {number}")), &NoProgress, &also);
                drop(lock);
                let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
                match (&captured, &*g) {
                    (Ok(_), Slot::Committing(id)) => *g = Slot::Ready(*id),
                    (Err(e), Slot::Committing(_) | Slot::Running) => {
                        // Written under the slot's lock: nothing else waits for a write
                        // transaction while holding it.
                        let reason = format!("the before-snapshot failed: {e}");
                        let _ = session.make_conversation_only(number, &reason);
                        *g = Slot::Abandoned(reason);
                    }
                    _ => {} // abandoned by the host meanwhile
                }
                // Let go of the store before the host can see the result: a process that
                // exits right after `wait_before` must be the last holder of its database,
                // or redb would not record a clean shutdown.
                drop(session);
                drop(g);
                cv.notify_all();
            })
            .map_err(|source| {
                Error::from(CaptureError::Thread {
                    path: self.ws.root().to_path_buf(),
                    source,
                })
            })?;
        self.publish(None);
        Ok(Turn {
            session: self.clone(),
            number,
            before,
        })
    }

    /// The turn left pending that a turn beginning now closes, and what can prove its end.
    fn superseded(&self) -> Result<Option<Superseded>, Error> {
        let l = self.load()?;
        let Some(p) = l.state.pending else {
            return Ok(None);
        };
        let Some(before) = l
            .turn(p)
            .filter(|t| t.state == TurnState::Pending)
            .and_then(|t| t.before)
        else {
            return Ok(None);
        };
        let owner_alive = self.lease(p).and_then(Result::ok).is_some_and(|r| {
            crate::lease::liveness(&r, self.ws.home()) == crate::lease::Liveness::Alive
        });
        Ok(Some(Superseded {
            turn: p,
            before,
            owner_alive,
            nothing_since: self.ws.store().reader()?.last_known()? == Some(before),
        }))
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
}

/// A turn left pending when the next turn of its session begins (the agent took a new
/// prompt without a stop event: it was interrupted, or it died). It is closed
/// conversation-only at once; the next turn's before-snapshot then ends it complete when
/// that provably is where it stopped:
///
/// - its owner is alive (the same agent, which only takes a new prompt once the old one
///   stopped) and nothing was recorded in the workspace since its before-snapshot: it ends
///   at the new before-snapshot (edits made between the interrupt and the next prompt count
///   as the turn's, as edits between a turn's last tool call and its stop event do);
/// - its owner is gone: only if the disk still equals its before-snapshot (it changed
///   nothing), as for any dead owner's turn.
struct Superseded {
    turn: u64,
    before: ObjectId,
    owner_alive: bool,
    nothing_since: bool,
}

impl Superseded {
    /// Ends the superseded turn at `root` (the next turn's before-snapshot, being recorded in
    /// `w`'s commit) when that is provable; else leaves it conversation-only.
    fn end(
        &self,
        w: &Writer<'_>,
        root: ObjectId,
        seen: &Captured<'_>,
        reader: &crate::store::StoreReader,
    ) -> Result<(), StoreError> {
        let Some(mut t) = w.get_turn(self.turn)? else {
            return Ok(());
        };
        if t.state != TurnState::ConversationOnly
            || t.before != Some(self.before)
            || !self.nothing_since
        {
            return Ok(());
        }
        let reason = if self.owner_alive {
            "no stop event arrived (the agent was interrupted); it ends where the next prompt \
             began"
        } else if root == self.before {
            "its owner died before it ended; it changed nothing"
        } else {
            return Ok(());
        };
        t.counts = counts_against(reader, &self.before, root, seen)?;
        t.after = Some(root);
        t.state = TurnState::Complete;
        t.reason = Some(reason.into());
        w.turn(&t)
    }
}

impl Session {
    /// Extends the session's last turn to the disk as it is now, for a second stop event of
    /// one turn: Claude Code (and the other agents) fire Stop again, with `stop_hook_active`,
    /// when another Stop hook made the agent go on; what the agent did in between is that
    /// turn's. Done only when the turn provably owns what changed since it ended: no turn is
    /// pending, the last turn is complete and the cursor, the session recorded nothing
    /// since it ended, and the workspace's last snapshot is still its after-snapshot.
    /// Otherwise nothing changes and the answer is None.
    ///
    /// # Errors
    /// [`Error`] for store or capture failures.
    pub fn extend_turn(&self, leaf: Option<String>) -> Result<Option<TurnSummary>, Error> {
        if self.subagent || self.ws.conversation_only().is_some() {
            return Ok(None);
        }
        let l = self.load()?;
        let Some(n) = l
            .state
            .cursor
            .filter(|n| l.state.pending.is_none() && n + 1 == l.state.next_turn)
        else {
            return Ok(None);
        };
        let Some(t) = l
            .turn(n)
            .filter(|t| t.state == TurnState::Complete)
            .cloned()
        else {
            return Ok(None);
        };
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Ok(None);
        };
        // Checked before capturing (no snapshot is recorded for nothing), and again in the
        // capture's commit.
        let ended_last = {
            let tx = self.ws.store().begin_read()?;
            let ops = db::ops(&tx, &self.key)?;
            matches!(ops.last().map(|r| &r.op), Some(Op::TurnEnded { turn, .. }) if *turn == n)
        };
        if !ended_last || self.ws.store().reader()?.last_known()? != Some(after) {
            return Ok(None);
        }
        super::recover_journal_if_needed(&self.ws, self.ws.history_wait());
        let lock = self.ws.lock_shared(crate::store::LOCK_WAIT)?;
        let leaf = leaf.map(|a| truncate(a, MAX_ANCHOR_BYTES));
        let recorded = std::cell::RefCell::new(None);
        let looked = super::ledger::looking(self.ws.store());
        let also = |tx: &crate::store::WriteTx<'_>,
                    root: ObjectId,
                    seen: &Captured<'_>|
         -> Result<(), StoreError> {
            // The turn it extends ran meanwhile.
            super::ledger::in_capture(
                tx,
                &self.ws.store().reader()?,
                (seen, root),
                super::ledger::Window {
                    began: None,
                    ran: Some((self.key, n)),
                    stepping: None,
                },
                looked,
            )?;
            let w = Writer::new(tx, self.key)?;
            let state = w.state()?;
            let ended_last = matches!(w.last_op()?, Some(Op::TurnEnded { turn, .. }) if turn == n);
            let nothing_since = self.ws.store().reader()?.last_known()? == Some(after);
            if state.pending.is_some() || state.cursor != Some(n) || !ended_last || !nothing_since {
                return Ok(());
            }
            let Some(mut t) = w.get_turn(n)? else {
                return Ok(());
            };
            let counts = counts_against(&self.ws.store().reader()?, &before, root, seen)?;
            t.after = Some(root);
            t.counts = counts;
            t.ended_ms = Some(now_ms());
            if leaf.is_some() {
                t.leaf.clone_from(&leaf);
            }
            w.turn(&t)?;
            w.op(Op::TurnEnded {
                turn: n,
                snapshot: Some(root),
            })?;
            *recorded.borrow_mut() = Some((t, counts));
            Ok(())
        };
        let cap = lock.record_with(
            Some(format!("after turn {n} (extended)")),
            &NoProgress,
            &also,
        )?;
        let Some((rec, counts)) = recorded.into_inner() else {
            return Ok(None);
        };
        self.publish(None);
        Ok(Some(TurnSummary::of(
            rec,
            counts,
            (cap.skipped, cap.secrets),
            0,
        )))
    }
}

/// Paths added, modified and deleted from snapshot `before` to the capture `root` (see
/// [`Captured::diff_from`]).
fn counts_against(
    reader: &crate::store::StoreReader,
    before: &ObjectId,
    root: ObjectId,
    seen: &Captured<'_>,
) -> Result<Counts, StoreError> {
    let d = seen.diff_from(reader, before, &root)?;
    let n = |v: &Vec<String>| u32::try_from(v.len()).unwrap_or(u32::MAX);
    Ok(Counts {
        added: n(&d.added),
        modified: n(&d.modified),
        deleted: n(&d.deleted),
    })
}

impl Session {
    /// Ends a turn whose owner is certainly gone (the caller checked its lease; `ex` is the
    /// exclusive lock), then returns the session re-read. It never absorbs edits made after
    /// its owner died: it ends complete only when it provably changed nothing (the disk
    /// still equals its before-snapshot, nothing recorded since), else conversation-only.
    pub(super) fn clean_dead_turn(
        &self,
        ex: &Exclusive<'_>,
        l: Loaded,
        progress: &dyn crate::progress::Progress,
    ) -> Result<Loaded, Error> {
        let Some(p) = l.state.pending else {
            return Ok(l);
        };
        let Some(t) = l.turn(p).cloned() else {
            return Ok(l);
        };
        let pid = self.lease(p).and_then(Result::ok).map_or(0, |r| r.pid);
        // What the dead turn did cannot be told from what anyone did after it died: the
        // only after-state it can prove is "nothing changed" (the disk still equals its
        // before-snapshot, and nothing else was recorded since). Otherwise it becomes
        // conversation-only and its files are left as they are, never absorbing later edits.
        let baseline = self.ws.store().reader()?.last_known()?;
        let truthful = t.state == TurnState::Pending && t.before.is_some() && baseline == t.before;
        let after = if truthful {
            let disk = ex.scan_disk(progress)?;
            (Some(disk.id) == t.before).then_some((disk.id, Counts::default()))
        } else {
            None
        };
        self.write(|w, s| {
            if s.pending != Some(p) {
                return Ok(()); // someone else cleaned it meanwhile
            }
            let mut t = t.clone();
            t.ended_ms = Some(now_ms());
            if let Some((id, counts)) = after {
                t.after = Some(id);
                t.counts = counts;
                t.state = TurnState::Complete;
                t.reason = Some(format!(
                    "its owner (process {pid}) died; ended when it was cleaned up"
                ));
            } else {
                t.state = TurnState::ConversationOnly;
                t.reason = Some(format!(
                    "its owner (process {pid}) died before it ended; what it changed cannot be \
                     told from edits made since, so its files are left as they are (`retrace \
                     navigate turn:{p}:before` restores its before-state)"
                ));
            }
            w.turn(&t)?;
            w.drop_lease(p)?;
            w.op(Op::TurnEnded {
                turn: p,
                snapshot: after.map(|a| a.0),
            })
        })?;
        self.load()
    }
}

impl Turn {
    /// Ends a turn in a workspace where nothing is captured: conversation-only.
    fn end_without_files(&self, reason: String) -> Result<TurnSummary, Error> {
        let number = self.number;
        let rec = self.session.write(|w, state| {
            let mut t = w.get_turn(number)?.ok_or_else(|| StoreError::History {
                path: self.session.path().into(),
                detail: format!("turn {number} vanished before it ended"),
            })?;
            if state.pending == Some(number) {
                t.state = TurnState::ConversationOnly;
                t.reason.get_or_insert(reason);
                t.ended_ms = Some(now_ms());
                w.turn(&t)?;
                w.drop_lease(number)?;
                w.op(Op::TurnEnded {
                    turn: number,
                    snapshot: None,
                })?;
            }
            Ok(t)
        })?;
        Ok(TurnSummary {
            turn: number,
            state: rec.state,
            reason: rec.reason,
            before: None,
            after: None,
            added: 0,
            modified: 0,
            deleted: 0,
            skipped: Vec::new(),
            secrets: Vec::new(),
            dropped: 0,
        })
    }

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
                Slot::Running | Slot::Committing(_) => {}
            }
            let left = deadline.map_or(Duration::from_hours(1), |d| {
                d.saturating_duration_since(Instant::now())
            });
            // A baseline being committed is waited for: it is no longer late.
            if left.is_zero() && matches!(*g, Slot::Running) {
                let reason = format!(
                    "the before-snapshot took longer than {} ms",
                    timeout.as_millis()
                );
                // Decided under the slot's lock: the capture cannot record it now. The lock
                // is released before writing (the capture's commit takes it).
                *g = Slot::Abandoned(reason.clone());
                drop(g);
                self.session.make_conversation_only(self.number, &reason)?;
                return Ok(BeforeStatus::ConversationOnly { reason });
            }
            let left = if left.is_zero() {
                Duration::from_millis(10)
            } else {
                left
            };
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
                secrets: Vec::new(),
                dropped: 0,
            });
        }
        let _flight = InFlight::new(&s.rt);
        let before = {
            let (m, cv) = &*self.before;
            let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
            while matches!(*g, Slot::Running | Slot::Committing(_)) {
                g = cv.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            match &*g {
                Slot::Ready(id) => Ok(*id),
                Slot::Abandoned(r) => Err(r.clone()),
                Slot::Running | Slot::Committing(_) => Err(String::new()),
            }
        };
        if s.ws.conversation_only().is_some() {
            return self.end_without_files(before.err().unwrap_or_default());
        }
        super::recover_journal_if_needed(&s.ws, s.ws.history_wait());
        let lock = s.ws.lock_shared(crate::store::LOCK_WAIT)?;
        let max = s.ws.max_turns();
        let leaf = leaf.map(|a| truncate(a, MAX_ANCHOR_BYTES));
        let number = self.number;
        let path = s.ws.store().path();
        // The turn's record rides in the after-capture's own commit: one sync ends a turn.
        let recorded = std::cell::RefCell::new(None);
        let looked = super::ledger::looking(s.ws.store());
        let also = |tx: &crate::store::WriteTx<'_>,
                    root: ObjectId,
                    seen: &Captured<'_>|
         -> Result<(), StoreError> {
            // While the turn still runs: what changed meanwhile is its (or its steps').
            super::ledger::in_capture(
                tx,
                &s.ws.store().reader()?,
                (seen, root),
                super::ledger::Window::default(),
                looked,
            )?;
            let w = Writer::new(tx, s.key)?;
            w.close_steps(number, root)?;
            let state = w.state()?;
            let mut t = w.get_turn(number)?.ok_or_else(|| StoreError::History {
                path: path.into(),
                detail: format!("turn {number} vanished before it ended"),
            })?;
            if state.pending != Some(number) {
                // Closed already (a newer turn began): the newer turn owns the history now.
                *recorded.borrow_mut() = Some((t, 0, Counts::default()));
                return Ok(());
            }
            let counts = match &before {
                Ok(b) => counts_against(&s.ws.store().reader()?, b, root, seen)?,
                Err(_) => Counts::default(),
            };
            w.drop_lease(number)?;
            t.after = Some(root);
            t.leaf.clone_from(&leaf);
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
                snapshot: Some(root),
            })?;
            let state = w.state()?;
            let dropped = w.cap(max, &state)?;
            *recorded.borrow_mut() = Some((t, dropped, counts));
            Ok(())
        };
        let cap = lock.record_with(
            Some(format!("after turn {}", self.number)),
            &NoProgress,
            &also,
        )?;
        let (rec, dropped, counts) = recorded.into_inner().ok_or_else(|| StoreError::History {
            path: path.into(),
            detail: format!("turn {number} was not recorded"),
        })?;
        s.publish(None);
        Ok(TurnSummary::of(
            rec,
            counts,
            (cap.skipped, cap.secrets),
            dropped,
        ))
    }
}
