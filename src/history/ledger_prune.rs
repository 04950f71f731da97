//! The ledger ([`super::ledger`]) bounded by retention: the maintenance pass drops the
//! entries no kept turn can consult and trims old versions written by turns that are gone,
//! so that the ledger holds what the history still holds, not every path ever written.
//!
//! The rule (`docs/retention.md`, "The ledger"), with *kept* turns those of a session that
//! still exists whose record holds a snapshot (or that still runs): a turn dropped by the
//! turn cap, expired or evicted, or of a removed session, is gone.
//!
//! * An entry is dropped when the ledger learned of its newest write (`time_ms`) before the
//!   oldest kept turn of any session began and before every session's oldest checkpoint,
//!   when it names no kept turn among its writers, and when no claim or read of an edit step
//!   waits for the ledger's next update at its path. Every write an entry records is no
//!   newer than its `time_ms`, and a turn writes only after it began: such an entry says
//!   nothing of what any kept turn wrote or of what was written during one, so no undo,
//!   redo, revert, restore or navigation of a kept turn reads it (their changes only touch
//!   paths written since the oldest kept turn began). An entry that does not decode is
//!   dropped too (readers already take it as none).
//! * A kept entry whose `earlier` list is not full is cut at its old end after the version
//!   that the oldest writer still needed there replaced: a kept turn, an operation of a
//!   session that exists, the user, a session's writer of the version the path holds now.
//!   What is cut is only versions of turns that are gone (or of removed sessions), which no
//!   rule reads once nothing newer of theirs is kept; a full list (whose oldest versions may
//!   already be gone) is left whole, as the ownership rule reads a full list as "history
//!   cut short" and a shorter one as complete. When what is left is one session's writes
//!   alone, the cut keeps the next version of another writer, so that the rule never comes
//!   to read a path as written only by that session.

use std::collections::{HashMap, HashSet};

use super::ledger::{EARLIER, LedgerEntry, Writer};
use super::record::{CheckpointRecord, TurnRecord, TurnState, decode};
use crate::error::StoreError;
use super::tables::{CHECKPOINTS, LEDGER, LedgerMeta, SESSIONS, TURNS};
use crate::store::WriteTx;

/// What [`prune`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// Entries removed.
    pub dropped: u64,
    /// Earlier versions cut from the entries kept.
    pub trimmed: u64,
}

/// The history as the rule sees it.
struct Kept {
    /// Sessions that exist.
    sessions: HashSet<[u8; 32]>,
    /// Turns kept, by session.
    turns: HashMap<[u8; 32], HashSet<u64>>,
    /// When the oldest kept turn began, or the oldest checkpoint was taken (`u64::MAX`:
    /// none).
    since_ms: u64,
}

impl Kept {
    /// Reads it in `tx`; None when a turn or checkpoint record does not decode (then
    /// nothing is known to be gone).
    fn read(tx: &WriteTx<'_>) -> Result<Option<Kept>, StoreError> {
        let mut kept = Kept {
            sessions: HashSet::new(),
            turns: HashMap::new(),
            since_ms: u64::MAX,
        };
        let mut bad = false;
        for (key, _) in tx.keyed_entries(SESSIONS)? {
            kept.sessions.insert(key);
            let mut turns = HashSet::new();
            tx.each_row(TURNS, &key, |_, v| {
                match decode::<TurnRecord>(v) {
                    Ok(t)
                        if t.state == TurnState::Pending
                            || (t.state != TurnState::Expired
                                && (t.before.is_some() || t.after.is_some())) =>
                    {
                        turns.insert(t.number);
                        kept.since_ms = kept.since_ms.min(t.began_ms);
                    }
                    Ok(_) => {}
                    Err(_) => bad = true,
                }
                Ok(())
            })?;
            tx.each_row(CHECKPOINTS, &key, |_, v| {
                match decode::<CheckpointRecord>(v) {
                    Ok(c) => kept.since_ms = kept.since_ms.min(c.time_ms),
                    Err(_) => bad = true,
                }
                Ok(())
            })?;
            kept.turns.insert(key, turns);
        }
        Ok((!bad).then_some(kept))
    }

    /// Whether `w` is, or counts, a kept turn.
    fn names_turn(&self, w: &Writer) -> bool {
        match w {
            Writer::Turn { session, turn, .. } => {
                self.turns.get(session).is_some_and(|t| t.contains(turn))
            }
            Writer::Several(all) => all.iter().any(|w| self.names_turn(w)),
            Writer::User | Writer::Op { .. } => false,
        }
    }

    /// Whether a version `w` wrote in an entry's `earlier` list may still be read: a kept
    /// turn; an operation of a session that exists, or of the user; the user. (Such a
    /// version carries no time of its own, so only a turn's or a removed session's can be
    /// known to be gone.)
    fn needed(&self, w: &Writer) -> bool {
        match w {
            Writer::User | Writer::Op { session: None, .. } => true,
            Writer::Op {
                session: Some(s), ..
            } => self.sessions.contains(s),
            Writer::Turn { .. } => self.names_turn(w),
            Writer::Several(all) => all.iter().any(|w| self.needed(w)),
        }
    }
}

/// The session `w` is a writer of by itself (a turn, a step, an operation done for it).
fn session_of(w: &Writer) -> Option<[u8; 32]> {
    match w {
        Writer::Turn { session, .. } => Some(*session),
        Writer::Op { session, .. } => *session,
        Writer::User | Writer::Several(_) => None,
    }
}

/// How many of `e.earlier` the rule keeps (see the module docs).
fn keep_earlier(e: &LedgerEntry, kept: &Kept) -> usize {
    let n = e.earlier.len();
    if n >= EARLIER {
        return n;
    }
    // The oldest version still needed, as an index of `earlier` (the entry's own version,
    // `left`, is always kept: `None` stands for it).
    let oldest = e
        .earlier
        .iter()
        .rposition(|(left, w)| kept.needed(w) || (*left == e.left && session_of(w).is_some()));
    // And the version it replaced.
    let mut keep = oldest.map_or(1, |i| i + 2).min(n);
    // One session's writes alone: keep up to the next version of another writer.
    let writers = std::iter::once(&e.writer).chain(e.earlier[..keep].iter().map(|(_, w)| w));
    let one = session_of(&e.writer).filter(|s| {
        writers
            .clone()
            .all(|w| session_of(w) == Some(*s) && !matches!(w, Writer::Several(_)))
    });
    if let Some(s) = one
        && let Some(other) = e.earlier[keep..]
            .iter()
            .position(|(_, w)| session_of(w) != Some(s))
    {
        keep += other + 1;
    }
    keep
}

/// Paths a claim or a read of an edit step names that wait for the ledger's next update
/// (as `ledger.rs` records them: postcard `(version, Vec<(path, Writer)>)` and `(version,
/// Vec<path>)`); unreadable ones name none.
fn waiting(tx: &WriteTx<'_>) -> HashSet<Vec<u8>> {
    let mut out = HashSet::new();
    if let Some((_, claims)) = tx
        .ledger_claims()
        .ok()
        .flatten()
        .and_then(|b| decode::<(u8, Vec<(Vec<u8>, Writer)>)>(&b).ok())
    {
        out.extend(claims.into_iter().map(|(p, _)| p));
    }
    if let Some((_, paths)) = tx
        .ledger_observed()
        .ok()
        .flatten()
        .and_then(|b| decode::<(u8, Vec<Vec<u8>>)>(&b).ok())
    {
        out.extend(paths);
    }
    out
}

/// Bounds the ledger by what the history keeps, in `tx` (see the module docs): drops the
/// entries no kept turn can consult and trims the versions of turns that are gone. Changes
/// nothing when a turn or checkpoint record does not decode.
///
/// # Errors
/// [`StoreError`] from the tables.
pub(crate) fn prune(tx: &WriteTx<'_>) -> Result<Pruned, StoreError> {
    let mut out = Pruned::default();
    let Some(kept) = Kept::read(tx)? else {
        return Ok(out);
    };
    let waiting = waiting(tx);
    let mut drop = HashSet::new();
    for (path, bytes) in tx.bytes_entries(LEDGER)? {
        let Ok(mut e) = LedgerEntry::decode(&bytes) else {
            drop.insert(path);
            continue;
        };
        let names_kept =
            kept.names_turn(&e.writer) || e.earlier.iter().any(|(_, w)| kept.names_turn(w));
        if e.time_ms < kept.since_ms && !names_kept && !waiting.contains(&path) {
            drop.insert(path);
            continue;
        }
        let keep = keep_earlier(&e, &kept);
        if keep < e.earlier.len() {
            out.trimmed += (e.earlier.len() - keep) as u64;
            e.earlier.truncate(keep);
            let bytes = e.encode().map_err(|detail| StoreError::Encode {
                path: tx.path().into(),
                detail,
            })?;
            tx.put_bytes_entry(LEDGER, &path, &bytes)?;
        }
    }
    if !drop.is_empty() {
        out.dropped = drop.len() as u64;
        tx.retain_bytes_entries(LEDGER, |path, _| drop.contains(path))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{EntryKind, ObjectId};

    const A: [u8; 32] = [1; 32];
    const B: [u8; 32] = [2; 32];

    fn turn(session: [u8; 32], turn: u64) -> Writer {
        Writer::Turn {
            session,
            turn,
            step: None,
        }
    }

    fn v(n: u8) -> (EntryKind, ObjectId) {
        (EntryKind::File, ObjectId([n; 32]))
    }

    fn entry(writer: Writer, earlier: Vec<(u8, Writer)>) -> LedgerEntry {
        LedgerEntry {
            version: 1,
            left: Some(v(0)),
            writer,
            time_ms: 0,
            earlier: earlier.into_iter().map(|(n, w)| (Some(v(n)), w)).collect(),
        }
    }

    /// Session A keeps turns 5 and 6, session B turn 9; both exist.
    fn kept() -> Kept {
        Kept {
            sessions: [A, B].into_iter().collect(),
            turns: [(A, [5, 6].into()), (B, [9].into())].into_iter().collect(),
            since_ms: 100,
        }
    }

    #[test]
    fn the_version_a_kept_turns_run_replaced_stays() {
        // A's turn 6 wrote (newest), B's gone turn 2 before it, A's gone turns 1..3 older.
        let e = entry(
            turn(A, 6),
            vec![
                (1, turn(B, 2)),
                (2, turn(A, 3)),
                (3, turn(A, 1)),
                (4, turn(B, 1)),
            ],
        );
        // The oldest needed is the entry's own version: the one it replaced stays.
        assert_eq!(keep_earlier(&e, &kept()), 1);
        let e = entry(
            turn(B, 1),
            vec![
                (1, turn(A, 5)),
                (2, turn(A, 3)),
                (3, turn(A, 4)),
                (4, turn(A, 1)),
            ],
        );
        assert_eq!(
            keep_earlier(&e, &kept()),
            2,
            "A's turn 5 and what it replaced"
        );
    }

    #[test]
    fn users_operations_and_a_sessions_writer_of_the_version_held_now_stay() {
        let e = entry(
            turn(B, 1),
            vec![(1, Writer::User), (2, turn(B, 2)), (3, turn(B, 3))],
        );
        assert_eq!(keep_earlier(&e, &kept()), 2);
        let undo = Writer::Op {
            session: Some(A),
            what: "undo of turn 5".into(),
        };
        let e = entry(
            turn(B, 1),
            vec![(1, undo), (2, turn(B, 2)), (3, turn(B, 3))],
        );
        assert_eq!(keep_earlier(&e, &kept()), 2);
        let gone = Writer::Op {
            session: Some([7; 32]),
            what: "restore".into(),
        };
        let e = entry(
            turn(B, 1),
            vec![(1, gone), (2, turn(B, 2)), (3, turn(B, 3))],
        );
        assert_eq!(
            keep_earlier(&e, &kept()),
            1,
            "a removed session's operation"
        );
        // A gone turn of A left the version the path holds now: A still left it.
        let e = entry(
            turn(B, 1),
            vec![(1, turn(B, 2)), (0, turn(A, 1)), (3, turn(B, 3))],
        );
        assert_eq!(keep_earlier(&e, &kept()), 3);
    }

    #[test]
    fn a_full_list_is_never_cut() {
        let earlier = (0..EARLIER).map(|i| (1, turn(B, i as u64 + 100))).collect();
        let e = entry(turn(B, 1), earlier);
        assert_eq!(keep_earlier(&e, &kept()), EARLIER);
    }

    #[test]
    fn one_sessions_writes_alone_keep_the_next_other_writer() {
        // A's turn 6, then A's gone turns, then B's gone turn: cut after A's turn 1 alone,
        // the path would read as A's only.
        let e = entry(
            turn(A, 6),
            vec![
                (1, turn(A, 2)),
                (2, turn(A, 1)),
                (3, turn(B, 1)),
                (4, turn(B, 0)),
            ],
        );
        assert_eq!(keep_earlier(&e, &kept()), 3);
        let e = entry(turn(A, 6), vec![(1, turn(A, 2)), (2, turn(A, 1))]);
        assert_eq!(keep_earlier(&e, &kept()), 1, "only A's: nothing to keep");
    }

    #[test]
    fn several_counts_when_any_of_its_writers_is_kept() {
        let k = kept();
        assert!(k.names_turn(&Writer::Several(vec![turn(B, 1), turn(A, 5)])));
        assert!(!k.names_turn(&Writer::Several(vec![turn(B, 1), turn(A, 4)])));
        assert!(!k.names_turn(&turn([7; 32], 5)), "a removed session's");
    }
}
