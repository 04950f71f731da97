//! Reading and writing a session's records in the history's tables (`tables.rs`).

use std::path::Path;

use super::record::{
    CheckpointRecord, HISTORY_VERSION, Op, OpRecord, RevertRecord, SessionName, SessionRecord,
    StepRecord, TurnRecord, TurnState, decode, encode,
};
use super::state::SessionState;
use crate::error::StoreError;
use crate::lease::LeaseRecord;
use crate::object::ObjectId;
use crate::object::record::DecodeError;
use crate::store::now_ms;
use super::tables::{
    CHECKPOINTS, LEASES, OF_SESSION, OPLOG, REVERTS, SESSION_NAMES, SESSIONS, STEPS, TURNS,
};
use crate::store::{ReadTx, RowsTable, WriteTx};

/// A session's key in the store: `blake3::derive_key("retrace session v1", host id)`. The
/// host's id itself is never stored. Encoded as its 32 bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct SessionKey(pub [u8; 32]);

impl SessionKey {
    /// The key of a host's session id.
    #[must_use]
    pub fn of(id: &str) -> SessionKey {
        SessionKey(blake3::derive_key("retrace session v1", id.as_bytes()))
    }

    /// The first 16 hex digits: how messages, `retrace status` and `retrace-dump` name a
    /// session.
    #[must_use]
    pub fn short(&self) -> String {
        crate::object::ObjectId(self.0).to_hex()[..16].to_string()
    }
}

/// The key of a host's session id ([`SessionKey::of`]).
#[must_use]
pub fn session_key(id: &str) -> SessionKey {
    SessionKey::of(id)
}

/// A record's bytes, or [`StoreError::Encode`] naming the store.
fn encoded<T: serde::Serialize>(path: &Path, rec: &T) -> Result<Vec<u8>, StoreError> {
    encode(rec).map_err(|detail| StoreError::Encode {
        path: path.into(),
        detail,
    })
}

fn bad(path: &Path) -> impl Fn(DecodeError) -> StoreError + '_ {
    move |e| StoreError::History {
        path: path.into(),
        detail: e.to_string(),
    }
}

/// Everything of one session, read in one transaction.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Derived state.
    pub state: SessionState,
    /// Turns, by number.
    pub turns: Vec<TurnRecord>,
    /// Checkpoints, by number.
    pub checkpoints: Vec<CheckpointRecord>,
    /// Ops in the log.
    pub ops: u64,
    /// The host's name of the session, when kept.
    pub name: Option<String>,
    /// Its turns that revert an earlier turn, by number.
    pub reverts: Vec<RevertRecord>,
}

impl Loaded {
    /// The turn numbered `n`, if kept.
    #[must_use]
    pub fn turn(&self, n: u64) -> Option<&TurnRecord> {
        self.turns
            .binary_search_by_key(&n, |t| t.number)
            .ok()
            .map(|i| &self.turns[i])
    }

    /// The turn that turn `n` reverted, when `n` is a revert.
    #[must_use]
    pub fn reverts(&self, n: u64) -> Option<&RevertRecord> {
        self.reverts
            .binary_search_by_key(&n, |r| r.number)
            .ok()
            .map(|i| &self.reverts[i])
    }

    /// The turns applied at the cursor, newest first (the cursor's chain of parents).
    #[must_use]
    pub fn applied(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut cur = self.state.cursor;
        while let Some(n) = cur {
            if out.contains(&n) {
                break; // a loop can only come from a damaged store: stop, do not spin
            }
            out.push(n);
            cur = self.turn(n).and_then(|t| t.parent);
        }
        out
    }
}

/// Steps per turn are numbered below this mask: the step table's row is
/// `turn << 20 | step`.
pub const STEP_MASK: u64 = (1 << 20) - 1;

/// The step table's row number of step `step` of turn `turn`.
#[must_use]
pub fn step_row(turn: u64, step: u64) -> u64 {
    (turn << 20) | (step & STEP_MASK)
}

type EachRow<'a> = &'a mut dyn FnMut(u64, &[u8]) -> Result<(), StoreError>;

fn steps_in(
    path: &Path,
    turn: u64,
    each: impl FnOnce(u64, u64, EachRow<'_>) -> Result<(), StoreError>,
) -> Result<Vec<StepRecord>, StoreError> {
    let b = bad(path);
    let mut out = Vec::new();
    each(step_row(turn, 0), step_row(turn, STEP_MASK), &mut |_, v| {
        out.push(decode::<StepRecord>(v).map_err(&b)?);
        Ok(())
    })?;
    Ok(out)
}

/// The steps of turn `turn` of session `key`, in order.
///
/// # Errors
/// [`StoreError::Db`]; [`StoreError::History`].
pub fn steps(tx: &ReadTx, key: &SessionKey, turn: u64) -> Result<Vec<StepRecord>, StoreError> {
    steps_in(tx.path(), turn, |first, last, f| {
        tx.each_row_in(STEPS, &key.0, first, last, f)
    })
}

/// Reads a session: its ops replayed, its turns and checkpoints.
///
/// # Errors
/// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode.
pub fn load(tx: &ReadTx, key: &SessionKey) -> Result<Loaded, StoreError> {
    let ops: Vec<OpRecord> = of_session(tx, OPLOG, key)?;
    Ok(Loaded {
        state: SessionState::replay(ops.iter().map(|r| &r.op)),
        turns: of_session(tx, TURNS, key)?,
        checkpoints: of_session(tx, CHECKPOINTS, key)?,
        ops: ops.len() as u64,
        name: name(tx, key).ok().flatten().map(|n| n.name),
        reverts: of_session(tx, REVERTS, key)?,
    })
}

/// Every record of one session in a table keyed by (session key, number), in order.
fn of_session<T: for<'a> serde::Deserialize<'a>>(
    tx: &ReadTx,
    table: RowsTable,
    key: &SessionKey,
) -> Result<Vec<T>, StoreError> {
    let b = bad(tx.path());
    let mut out = Vec::new();
    tx.each_row(table, &key.0, |_, v| {
        out.push(decode(v).map_err(&b)?);
        Ok(())
    })?;
    Ok(out)
}

/// The turns of one session, by number.
///
/// # Errors
/// As [`load`].
pub fn turns(tx: &ReadTx, key: &SessionKey) -> Result<Vec<TurnRecord>, StoreError> {
    of_session(tx, TURNS, key)
}

/// The checkpoints of one session, by number.
///
/// # Errors
/// As [`load`].
pub fn checkpoints(tx: &ReadTx, key: &SessionKey) -> Result<Vec<CheckpointRecord>, StoreError> {
    of_session(tx, CHECKPOINTS, key)
}

/// Every session's newest turn, ended or not.
///
/// # Errors
/// As [`load`].
pub fn newest_turns(tx: &ReadTx) -> Result<Vec<(SessionKey, TurnRecord)>, StoreError> {
    let b = bad(tx.path());
    let mut out = Vec::new();
    for (key, _) in tx.keyed_entries(SESSIONS)? {
        if let Some((_, bytes)) = tx.last_row(TURNS, &key)? {
            out.push((SessionKey(key), decode(&bytes).map_err(&b)?));
        }
    }
    Ok(out)
}

/// The op log of one session, oldest first.
///
/// # Errors
/// As [`load`].
pub fn ops(tx: &ReadTx, key: &SessionKey) -> Result<Vec<OpRecord>, StoreError> {
    of_session(tx, OPLOG, key)
}

/// How many rows [`Writer::thin_log`] would take off session `key`'s op log now (a pass
/// opens a write transaction only for a session with some).
///
/// # Errors
/// As [`load`].
pub fn ops_to_fold(tx: &ReadTx, key: &SessionKey, keep: usize) -> Result<u64, StoreError> {
    let rows = op_rows(tx.path(), |f| tx.each_row(OPLOG, &key.0, f))?;
    Ok(super::log_thin::thin(&rows, keep).saved())
}

/// The op log's records with their row numbers, read by `each`.
fn op_rows(
    path: &Path,
    each: impl FnOnce(&mut dyn FnMut(u64, &[u8]) -> Result<(), StoreError>) -> Result<(), StoreError>,
) -> Result<Vec<(u64, OpRecord)>, StoreError> {
    let b = bad(path);
    let mut rows = Vec::new();
    each(&mut |n, v| {
        rows.push((n, decode::<OpRecord>(v).map_err(&b)?));
        Ok(())
    })?;
    Ok(rows)
}

/// Every session key with its record (`retrace-dump sessions`).
///
/// # Errors
/// As [`load`].
pub fn sessions(tx: &ReadTx) -> Result<Vec<(SessionKey, SessionRecord)>, StoreError> {
    let b = bad(tx.path());
    tx.keyed_entries(SESSIONS)?
        .into_iter()
        .map(|(k, v)| Ok((SessionKey(k), decode(&v).map_err(&b)?)))
        .collect()
}

/// The name record of a session, if it has one.
///
/// # Errors
/// As [`load`].
pub fn name(tx: &ReadTx, key: &SessionKey) -> Result<Option<SessionName>, StoreError> {
    let b = bad(tx.path());
    tx.row(SESSION_NAMES, &key.0, 0)?
        .map(|v| decode(&v).map_err(&b))
        .transpose()
}

/// The lease of a session's turn, if any: `Err` holds why a record could not be read (a
/// future version, damage), which callers treat as "uncertain".
///
/// # Errors
/// [`StoreError::Db`].
pub fn lease(
    tx: &ReadTx,
    key: &SessionKey,
    turn: u64,
) -> Result<Option<Result<LeaseRecord, DecodeError>>, StoreError> {
    Ok(tx.row(LEASES, &key.0, turn)?.map(|v| decode(&v)))
}

/// Writes to one session inside a write transaction.
pub struct Writer<'a> {
    tx: &'a WriteTx<'a>,
    key: SessionKey,
}

impl<'a> Writer<'a> {
    /// A writer for session `key` in `tx`; touches the session record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn new(tx: &'a WriteTx<'a>, key: SessionKey) -> Result<Writer<'a>, StoreError> {
        let now = now_ms();
        let created = match tx.keyed(SESSIONS, &key.0)? {
            Some(v) => decode::<SessionRecord>(&v).map_or(now, |r| r.created_ms),
            None => now,
        };
        let rec = SessionRecord {
            version: HISTORY_VERSION,
            created_ms: created,
            touched_ms: now,
        };
        tx.put_keyed(SESSIONS, &key.0, &encoded(tx.path(), &rec)?)?;
        Ok(Writer { tx, key })
    }

    /// A writer that leaves the session record as it is (maintenance must not make a
    /// session look recently used).
    #[must_use]
    pub fn open(tx: &'a WriteTx<'a>, key: SessionKey) -> Writer<'a> {
        Writer { tx, key }
    }

    fn bad(&self) -> impl Fn(DecodeError) -> StoreError + '_ {
        bad(self.tx.path())
    }

    /// Keeps `name` (and `agent`, when given) as the session's name record, unless it holds
    /// them already.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn name(&self, name: &str, agent: Option<&str>) -> Result<(), StoreError> {
        let old = self.tx.row(SESSION_NAMES, &self.key.0, 0)?;
        let old: Option<SessionName> = old.and_then(|v| decode(&v).ok());
        let agent = agent.map(str::to_string);
        if old
            .as_ref()
            .is_some_and(|o| o.name == name && (agent.is_none() || o.agent == agent))
        {
            return Ok(());
        }
        let rec = SessionName {
            version: HISTORY_VERSION,
            name: name.to_string(),
            agent: agent.or_else(|| old.and_then(|o| o.agent)),
        };
        self.tx
            .put_row(SESSION_NAMES, &self.key.0, 0, &encoded(self.tx.path(), &rec)?)
    }

    /// Re-reads the session inside this transaction (the truth for a check-then-write).
    ///
    /// # Errors
    /// As [`load`].
    pub fn state(&self) -> Result<SessionState, StoreError> {
        let b = self.bad();
        let mut s = SessionState::new();
        self.tx.each_row(OPLOG, &self.key.0, |_, v| {
            s.apply(&decode::<OpRecord>(v).map_err(&b)?.op);
            Ok(())
        })?;
        Ok(s)
    }

    /// The newest op of the session's log, if any.
    ///
    /// # Errors
    /// As [`load`].
    pub fn last_op(&self) -> Result<Option<Op>, StoreError> {
        let b = self.bad();
        self.tx
            .last_row(OPLOG, &self.key.0)?
            .map(|(_, v)| decode::<OpRecord>(&v).map(|r| r.op).map_err(&b))
            .transpose()
    }

    /// Appends an op to the log; after a turn's end, folds the log once it is long
    /// ([`Writer::thin_log_when_long`]), whichever way the turn ended.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`] for a record of the log that does not
    /// decode.
    pub fn op(&self, op: Op) -> Result<(), StoreError> {
        let ended = matches!(op, Op::TurnEnded { .. });
        let next = self
            .tx
            .last_row(OPLOG, &self.key.0)?
            .map_or(1, |(n, _)| n + 1);
        let rec = OpRecord {
            version: HISTORY_VERSION,
            time_ms: now_ms(),
            op,
        };
        self.tx.put_row(
            OPLOG,
            &self.key.0,
            next,
            &encoded(self.tx.path(), &rec)?,
        )?;
        if ended {
            self.thin_log_when_long()?;
        }
        Ok(())
    }

    /// Records that turn `rec.number` is a revert.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn revert(&self, rec: &RevertRecord) -> Result<(), StoreError> {
        self.tx.put_row(
            REVERTS,
            &self.key.0,
            rec.number,
            &encoded(self.tx.path(), rec)?,
        )
    }

    /// Writes (or replaces) a turn record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn turn(&self, rec: &TurnRecord) -> Result<(), StoreError> {
        self.tx.put_row(
            TURNS,
            &self.key.0,
            rec.number,
            &encoded(self.tx.path(), rec)?,
        )
    }

    /// Reads a turn record.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn get_turn(&self, n: u64) -> Result<Option<TurnRecord>, StoreError> {
        let b = self.bad();
        self.tx
            .row(TURNS, &self.key.0, n)?
            .map(|v| decode(&v).map_err(&b))
            .transpose()
    }

    /// Writes the lease of a turn.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_lease(&self, turn: u64, rec: &LeaseRecord) -> Result<(), StoreError> {
        self.tx.put_row(
            LEASES,
            &self.key.0,
            turn,
            &encoded(self.tx.path(), rec)?,
        )
    }

    /// Removes the lease of a turn (it ended or was closed).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn drop_lease(&self, turn: u64) -> Result<(), StoreError> {
        self.tx.remove_row(LEASES, &self.key.0, turn)
    }

    /// Writes a checkpoint record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn checkpoint(&self, rec: &CheckpointRecord) -> Result<(), StoreError> {
        self.tx.put_row(
            CHECKPOINTS,
            &self.key.0,
            rec.number,
            &encoded(self.tx.path(), rec)?,
        )
    }

    /// Expires turns: their snapshots stop being kept (state [`TurnState::Expired`], ids
    /// dropped); the records stay so the conversation can still be navigated. `which`
    /// selects turns by number; None expires them all, and the session's checkpoints too,
    /// and replaces its log by a base that knows no snapshot.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn expire(&self, which: Option<&[u64]>) -> Result<u64, StoreError> {
        let b = self.bad();
        let mut changed = Vec::new();
        self.tx.each_row(TURNS, &self.key.0, |_, v| {
            let mut rec: TurnRecord = decode(v).map_err(&b)?;
            let chosen = which.is_none_or(|w| w.contains(&rec.number));
            if chosen && rec.state != TurnState::Pending && rec.state != TurnState::Expired {
                rec.state = TurnState::Expired;
                rec.before = None;
                rec.after = None;
                changed.push(rec);
            }
            Ok(())
        })?;
        for rec in &changed {
            self.turn(rec)?;
        }
        if which.is_none() {
            self.tx
                .remove_rows_through(CHECKPOINTS, &self.key.0, u64::MAX)?;
            let mut state = self.state()?;
            state.last_known = None;
            self.replace_log(&state)?;
        }
        Ok(changed.len() as u64)
    }

    /// The steps of turn `turn`, in order.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn steps_of(&self, turn: u64) -> Result<Vec<StepRecord>, StoreError> {
        steps_in(self.tx.path(), turn, |first, last, f| {
            self.tx
                .each_row_in(STEPS, &self.key.0, first, last, f)
        })
    }

    /// Writes (or replaces) a step record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn step(&self, rec: &StepRecord) -> Result<(), StoreError> {
        self.tx.put_row(
            STEPS,
            &self.key.0,
            step_row(rec.turn, rec.number),
            &encoded(self.tx.path(), rec)?,
        )
    }

    /// Ends every step of turn `turn` still running, at snapshot `root` (the turn ended).
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn close_steps(&self, turn: u64, root: ObjectId) -> Result<(), StoreError> {
        for mut s in self.steps_of(turn)? {
            if s.ended_ms.is_none() {
                s.ended_ms = Some(now_ms());
                if s.shell() {
                    s.after = Some(root);
                }
                self.step(&s)?;
            }
        }
        Ok(())
    }

    /// Removes every record of the session.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn delete_session(&self) -> Result<(), StoreError> {
        for table in OF_SESSION {
            self.tx.remove_rows_through(table, &self.key.0, u64::MAX)?;
        }
        self.tx.remove_keyed(SESSIONS, &self.key.0)
    }

    /// Replaces the op log (rows `..=last`) by one [`Op::Base`] holding `state`.
    fn replace_log_through(&self, last: u64, state: &SessionState) -> Result<(), StoreError> {
        self.tx
            .remove_rows_through(OPLOG, &self.key.0, last)?;
        let rec = OpRecord {
            version: HISTORY_VERSION,
            time_ms: now_ms(),
            op: state.base(),
        };
        self.tx.put_row(
            OPLOG,
            &self.key.0,
            last + 1,
            &encoded(self.tx.path(), &rec)?,
        )
    }

    /// Folds the ops the turn records already hold into bases ([`super::log_thin`]),
    /// leaving the newest `keep`; returns the rows the log lost.
    ///
    /// A thinning whose log would not replay to the same state is not written (0).
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode.
    pub fn thin_log(&self, keep: usize) -> Result<u64, StoreError> {
        let rows = op_rows(self.tx.path(), |f| self.tx.each_row(OPLOG, &self.key.0, f))?;
        let thinning = super::log_thin::thin(&rows, keep);
        if thinning.saved() == 0 || !thinning.replays_as(&rows) {
            return Ok(0);
        }
        for n in &thinning.removed {
            self.tx.remove_row(OPLOG, &self.key.0, *n)?;
        }
        for (n, rec) in &thinning.put {
            self.tx
                .put_row(OPLOG, &self.key.0, *n, &encoded(self.tx.path(), rec)?)?;
        }
        Ok(thinning.saved())
    }

    /// [`Writer::thin_log`] once the log holds twice the ops thinning leaves alone: a turn's
    /// end calls it, so a session's log stays short as it goes (a batch every 21 turns or
    /// so) and every replay of it stays cheap, before any maintenance pass.
    ///
    /// # Errors
    /// As [`Writer::thin_log`].
    pub fn thin_log_when_long(&self) -> Result<u64, StoreError> {
        let keep = super::log_thin::KEEP_NEWEST;
        if self.tx.count_rows(OPLOG, &self.key.0)? < 2 * keep as u64 {
            return Ok(0);
        }
        self.thin_log(keep)
    }

    /// Replaces the op log by one [`Op::Base`] holding `state`.
    fn replace_log(&self, state: &SessionState) -> Result<(), StoreError> {
        let last = self.last_op_number()?;
        self.replace_log_through(last, state)
    }

    fn last_op_number(&self) -> Result<u64, StoreError> {
        Ok(self
            .tx
            .last_row(OPLOG, &self.key.0)?
            .map_or(0, |(n, _)| n))
    }

    /// Keeps at most `max` turns: drops the oldest, never `keep` (the cursor's turn) nor a
    /// pending one; then, if anything was dropped or the log is long, replaces the log with
    /// one [`Op::Base`] of the current state. Returns the turns dropped.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn cap(&self, max: u64, state: &SessionState) -> Result<u64, StoreError> {
        let count = self.tx.count_rows(TURNS, &self.key.0)?;
        let mut dropped = 0;
        if count > max {
            let mut victims = Vec::new();
            self.tx.each_row(TURNS, &self.key.0, |n, _| {
                if count - victims.len() as u64 > max
                    && Some(n) != state.cursor
                    && Some(n) != state.pending
                {
                    victims.push(n);
                }
                Ok(())
            })?;
            for n in &victims {
                self.tx.remove_row(TURNS, &self.key.0, *n)?;
                self.tx.remove_row(REVERTS, &self.key.0, *n)?;
                self.tx.remove_rows_between(
                    STEPS,
                    &self.key.0,
                    step_row(*n, 0),
                    step_row(*n, STEP_MASK),
                )?;
            }
            dropped = victims.len() as u64;
        }
        // The replacement must stand for the log it replaces; checked before dropping it.
        let replayed = self.state()?;
        let ops = self.tx.count_rows(OPLOG, &self.key.0)?;
        // The log is replayed on every operation: keep it proportional to the turns kept.
        if dropped > 0 || ops > 4 * max + 64 {
            if replayed != *state {
                return Err(StoreError::History {
                    path: self.tx.path().into(),
                    detail: "the op log changed under a write transaction".into(),
                });
            }
            let last = self.last_op_number()?;
            self.replace_log_through(last, state)?;
        }
        Ok(dropped)
    }
}
