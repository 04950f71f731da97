//! Reading and writing a session's records in the store's history tables.

use std::path::Path;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::record::{
    CheckpointRecord, HISTORY_VERSION, Op, OpRecord, SessionRecord, TurnRecord, TurnState, decode,
    encode,
};
use super::state::SessionState;
use crate::error::StoreError;
use crate::lease::LeaseRecord;
use crate::store::now_ms;
use crate::store::schema::{CHECKPOINTS, LEASES, OPLOG, SESSIONS, TURNS};

/// A session's key in the store: `blake3::derive_key("retrace session v1", host id)`. The
/// host's id itself is never stored.
pub type SessionKey = [u8; 32];

/// The key of a host's session id.
#[must_use]
pub fn session_key(id: &str) -> SessionKey {
    blake3::derive_key("retrace session v1", id.as_bytes())
}

fn db(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |source| StoreError::Db {
        path: path.into(),
        source,
    }
}

fn bad(path: &Path) -> impl Fn(String) -> StoreError + '_ {
    move |detail| StoreError::History {
        path: path.into(),
        detail,
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
    /// Whether the session has any record.
    pub exists: bool,
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

macro_rules! open_read {
    ($tx:expr, $def:expr, $path:expr) => {
        match $tx.open_table($def) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(db($path)(e.into())),
        }
    };
}

/// Reads a session: its ops replayed, its turns and checkpoints.
///
/// # Errors
/// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode.
pub fn load(tx: &ReadTransaction, path: &Path, key: &SessionKey) -> Result<Loaded, StoreError> {
    let e = db(path);
    let ops: Vec<OpRecord> = of_session(tx, path, OPLOG, key)?;
    let mut out = Loaded {
        state: SessionState::replay(ops.iter().map(|r| &r.op)),
        turns: of_session(tx, path, TURNS, key)?,
        checkpoints: of_session(tx, path, CHECKPOINTS, key)?,
        ops: ops.len() as u64,
        exists: false,
    };
    if let Some(t) = open_read!(tx, SESSIONS, path) {
        out.exists = t.get(key).map_err(|x| e(x.into()))?.is_some();
    }
    Ok(out)
}

/// Every record of one session in a table keyed by (session key, number), in order.
fn of_session<T: for<'a> serde::Deserialize<'a>>(
    tx: &ReadTransaction,
    path: &Path,
    def: redb::TableDefinition<(&'static [u8; 32], u64), &'static [u8]>,
    key: &SessionKey,
) -> Result<Vec<T>, StoreError> {
    let (e, b) = (db(path), bad(path));
    let mut out = Vec::new();
    if let Some(t) = open_read!(tx, def, path) {
        for item in t
            .range((key, 0)..=(key, u64::MAX))
            .map_err(|x| e(x.into()))?
        {
            let (_, v) = item.map_err(|x| e(x.into()))?;
            out.push(decode(v.value()).map_err(&b)?);
        }
    }
    Ok(out)
}

/// The turns of one session, by number.
///
/// # Errors
/// As [`load`].
pub fn turns(
    tx: &ReadTransaction,
    path: &Path,
    key: &SessionKey,
) -> Result<Vec<TurnRecord>, StoreError> {
    of_session(tx, path, TURNS, key)
}

/// The op log of one session, oldest first.
///
/// # Errors
/// As [`load`].
pub fn ops(
    tx: &ReadTransaction,
    path: &Path,
    key: &SessionKey,
) -> Result<Vec<OpRecord>, StoreError> {
    of_session(tx, path, OPLOG, key)
}

/// Every session key with its record (`retrace-dump sessions`).
///
/// # Errors
/// As [`load`].
pub fn sessions(
    tx: &ReadTransaction,
    path: &Path,
) -> Result<Vec<(SessionKey, SessionRecord)>, StoreError> {
    let (e, b) = (db(path), bad(path));
    let mut out = Vec::new();
    if let Some(t) = open_read!(tx, SESSIONS, path) {
        for item in t.iter().map_err(|x| e(x.into()))? {
            let (k, v) = item.map_err(|x| e(x.into()))?;
            out.push((*k.value(), decode(v.value()).map_err(&b)?));
        }
    }
    Ok(out)
}

/// The lease of a session's turn, if any: `Err` holds why a record could not be read (a
/// future version, damage), which callers treat as "uncertain".
///
/// # Errors
/// [`StoreError::Db`].
pub fn lease(
    tx: &ReadTransaction,
    path: &Path,
    key: &SessionKey,
    turn: u64,
) -> Result<Option<Result<LeaseRecord, String>>, StoreError> {
    let e = db(path);
    let Some(t) = open_read!(tx, LEASES, path) else {
        return Ok(None);
    };
    let v = t.get((key, turn)).map_err(|x| e(x.into()))?;
    Ok(v.map(|v| decode(v.value())))
}

/// Writes to one session inside a write transaction.
pub struct Writer<'a> {
    tx: &'a WriteTransaction,
    path: &'a Path,
    key: SessionKey,
}

impl<'a> Writer<'a> {
    /// A writer for session `key` in `tx`; touches the session record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn new(
        tx: &'a WriteTransaction,
        path: &'a Path,
        key: SessionKey,
    ) -> Result<Writer<'a>, StoreError> {
        let w = Writer { tx, path, key };
        let e = db(path);
        let mut t = tx.open_table(SESSIONS).map_err(|x| e(x.into()))?;
        let now = now_ms();
        let created = match t.get(&key).map_err(|x| e(x.into()))? {
            Some(v) => decode::<SessionRecord>(v.value()).map_or(now, |r| r.created_ms),
            None => now,
        };
        let rec = SessionRecord {
            version: HISTORY_VERSION,
            created_ms: created,
            touched_ms: now,
        };
        t.insert(&key, encode(&rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(w)
    }

    /// A writer that leaves the session record as it is (maintenance must not make a
    /// session look recently used).
    #[must_use]
    pub fn open(tx: &'a WriteTransaction, path: &'a Path, key: SessionKey) -> Writer<'a> {
        Writer { tx, path, key }
    }

    /// Re-reads the session inside this transaction (the truth for a check-then-write).
    ///
    /// # Errors
    /// As [`load`].
    pub fn state(&self) -> Result<SessionState, StoreError> {
        let (e, b) = (db(self.path), bad(self.path));
        let t = self.tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
        let mut s = SessionState::new();
        for item in t
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
        {
            let (_, v) = item.map_err(|x| e(x.into()))?;
            s.apply(&decode::<OpRecord>(v.value()).map_err(&b)?.op);
        }
        Ok(s)
    }

    /// The newest op of the session's log, if any.
    ///
    /// # Errors
    /// As [`load`].
    pub fn last_op(&self) -> Result<Option<Op>, StoreError> {
        let (e, b) = (db(self.path), bad(self.path));
        let t = self.tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
        let last = t
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
            .next_back()
            .transpose()
            .map_err(|x| e(x.into()))?;
        last.map(|(_, v)| decode::<OpRecord>(v.value()).map(|r| r.op).map_err(&b))
            .transpose()
    }

    /// Appends an op to the log.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn op(&self, op: Op) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut t = self.tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
        let next = t
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
            .next_back()
            .transpose()
            .map_err(|x| e(x.into()))?
            .map_or(1, |(k, _)| k.value().1 + 1);
        let rec = OpRecord {
            version: HISTORY_VERSION,
            time_ms: now_ms(),
            op,
        };
        t.insert((&self.key, next), encode(&rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Writes (or replaces) a turn record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn turn(&self, rec: &TurnRecord) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut t = self.tx.open_table(TURNS).map_err(|x| e(x.into()))?;
        t.insert((&self.key, rec.number), encode(rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Reads a turn record.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn get_turn(&self, n: u64) -> Result<Option<TurnRecord>, StoreError> {
        let (e, b) = (db(self.path), bad(self.path));
        let t = self.tx.open_table(TURNS).map_err(|x| e(x.into()))?;
        let v = t.get((&self.key, n)).map_err(|x| e(x.into()))?;
        v.map(|v| decode(v.value()).map_err(&b)).transpose()
    }

    /// Writes the lease of a turn.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_lease(&self, turn: u64, rec: &LeaseRecord) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut t = self.tx.open_table(LEASES).map_err(|x| e(x.into()))?;
        t.insert((&self.key, turn), encode(rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the lease of a turn (it ended or was closed).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn drop_lease(&self, turn: u64) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut t = self.tx.open_table(LEASES).map_err(|x| e(x.into()))?;
        t.remove((&self.key, turn)).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Writes a checkpoint record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn checkpoint(&self, rec: &CheckpointRecord) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut t = self.tx.open_table(CHECKPOINTS).map_err(|x| e(x.into()))?;
        t.insert((&self.key, rec.number), encode(rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Expires turns: their snapshots stop being kept (state [`TurnState::Expired`], ids
    /// dropped); the records stay so the conversation can still be navigated. `which`
    /// selects turns by number; None expires them all, and the session's checkpoints too,
    /// and replaces its log by a base that knows no snapshot.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn expire(&self, which: Option<&[u64]>) -> Result<u64, StoreError> {
        let (e, b) = (db(self.path), bad(self.path));
        let mut t = self.tx.open_table(TURNS).map_err(|x| e(x.into()))?;
        let mut changed = Vec::new();
        for item in t
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
        {
            let (_, v) = item.map_err(|x| e(x.into()))?;
            let mut rec: TurnRecord = decode(v.value()).map_err(&b)?;
            let chosen = which.is_none_or(|w| w.contains(&rec.number));
            if chosen && rec.state != TurnState::Pending && rec.state != TurnState::Expired {
                rec.state = TurnState::Expired;
                rec.before = None;
                rec.after = None;
                changed.push(rec);
            }
        }
        for rec in &changed {
            t.insert((&self.key, rec.number), encode(rec).as_slice())
                .map_err(|x| e(x.into()))?;
        }
        drop(t);
        if which.is_none() {
            let mut c = self.tx.open_table(CHECKPOINTS).map_err(|x| e(x.into()))?;
            c.retain_in((&self.key, 0)..=(&self.key, u64::MAX), |_, _| false)
                .map_err(|x| e(x.into()))?;
            drop(c);
            let mut state = self.state()?;
            state.last_known = None;
            self.replace_log(&state)?;
        }
        Ok(changed.len() as u64)
    }

    /// Removes every record of the session.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn delete_session(&self) -> Result<(), StoreError> {
        let e = db(self.path);
        for def in [TURNS, CHECKPOINTS, OPLOG, LEASES] {
            let mut t = self.tx.open_table(def).map_err(|x| e(x.into()))?;
            t.retain_in((&self.key, 0)..=(&self.key, u64::MAX), |_, _| false)
                .map_err(|x| e(x.into()))?;
        }
        let mut s = self.tx.open_table(SESSIONS).map_err(|x| e(x.into()))?;
        s.remove(&self.key).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Replaces the op log by one [`Op::Base`] holding `state`.
    fn replace_log(&self, state: &SessionState) -> Result<(), StoreError> {
        let e = db(self.path);
        let mut log = self.tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
        let last = log
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
            .next_back()
            .transpose()
            .map_err(|x| e(x.into()))?
            .map_or(0, |(k, _)| k.value().1);
        log.retain_in((&self.key, 0)..=(&self.key, last), |_, _| false)
            .map_err(|x| e(x.into()))?;
        let rec = OpRecord {
            version: HISTORY_VERSION,
            time_ms: now_ms(),
            op: state.base(),
        };
        log.insert((&self.key, last + 1), encode(&rec).as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Keeps at most `max` turns: drops the oldest, never `keep` (the cursor's turn) nor a
    /// pending one; then, if anything was dropped or the log is long, replaces the log with
    /// one [`Op::Base`] of the current state. Returns the turns dropped.
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`].
    pub fn cap(&self, max: u64, state: &SessionState) -> Result<u64, StoreError> {
        let (e, b) = (db(self.path), bad(self.path));
        let mut turns = self.tx.open_table(TURNS).map_err(|x| e(x.into()))?;
        let count = turns
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
            .count() as u64;
        let mut dropped = 0;
        if count > max {
            let mut victims = Vec::new();
            for item in turns
                .range((&self.key, 0)..=(&self.key, u64::MAX))
                .map_err(|x| e(x.into()))?
            {
                if count - victims.len() as u64 <= max {
                    break;
                }
                let (k, _) = item.map_err(|x| e(x.into()))?;
                let n = k.value().1;
                if Some(n) != state.cursor && Some(n) != state.pending {
                    victims.push(n);
                }
            }
            for n in &victims {
                turns.remove((&self.key, *n)).map_err(|x| e(x.into()))?;
            }
            dropped = victims.len() as u64;
        }
        // The replacement must stand for the log it replaces; checked before dropping it.
        let replayed = self.state()?;
        let mut log = self.tx.open_table(OPLOG).map_err(|x| e(x.into()))?;
        let ops = log
            .range((&self.key, 0)..=(&self.key, u64::MAX))
            .map_err(|x| e(x.into()))?
            .count() as u64;
        // The log is replayed on every operation: keep it proportional to the turns kept.
        if dropped > 0 || ops > 4 * max + 64 {
            let last = log
                .range((&self.key, 0)..=(&self.key, u64::MAX))
                .map_err(|x| e(x.into()))?
                .next_back()
                .transpose()
                .map_err(|x| e(x.into()))?
                .map_or(0, |(k, _)| k.value().1);
            if replayed != *state {
                return Err(b("the op log changed under a write transaction".into()));
            }
            log.retain_in((&self.key, 0)..=(&self.key, last), |_, _| false)
                .map_err(|x| e(x.into()))?;
            let rec = OpRecord {
                version: HISTORY_VERSION,
                time_ms: now_ms(),
                op: state.base(),
            };
            log.insert((&self.key, last + 1), encode(&rec).as_slice())
                .map_err(|x| e(x.into()))?;
        }
        Ok(dropped)
    }
}
