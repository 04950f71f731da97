//! A session's cursor, redo stack and last known snapshot, derived by replaying its op log.
//! Nothing here is stored on its own: a restart replays the log and gets the same state, the
//! redo stack included.

use serde::Serialize;

use super::record::{Mode, Op};
use crate::object::ObjectId;

/// The derived state of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SessionState {
    /// The applied turn: undo steps back over it. None: before every turn.
    pub cursor: Option<u64>,
    /// Undone turns with their undo's mode; redo takes the last.
    pub redo: Vec<(u64, Mode)>,
    /// The last snapshot this session knows the disk to equal.
    pub last_known: Option<ObjectId>,
    /// A begun turn that has not ended.
    pub pending: Option<u64>,
    /// Number the next turn gets.
    pub next_turn: u64,
    /// Number the next checkpoint gets.
    pub next_checkpoint: u64,
}

impl SessionState {
    /// The state of a session with no history.
    #[must_use]
    pub fn new() -> SessionState {
        SessionState {
            next_turn: 1,
            next_checkpoint: 1,
            ..SessionState::default()
        }
    }

    /// Applies one op.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Base {
                cursor,
                redo,
                last_known,
                pending,
                next_turn,
                next_checkpoint,
            } => {
                *self = SessionState {
                    cursor: *cursor,
                    redo: redo.clone(),
                    last_known: *last_known,
                    pending: *pending,
                    next_turn: *next_turn,
                    next_checkpoint: *next_checkpoint,
                };
            }
            Op::TurnBegun { turn } => {
                self.pending = Some(*turn);
                self.redo.clear();
                // Saturating: a damaged log may name turn u64::MAX.
                self.next_turn = self.next_turn.max(turn.saturating_add(1));
            }
            Op::TurnBefore { snapshot, .. } => self.last_known = Some(*snapshot),
            Op::TurnEnded { turn, snapshot } => {
                if self.pending == Some(*turn) {
                    self.pending = None;
                }
                self.cursor = Some(*turn);
                if snapshot.is_some() {
                    self.last_known = *snapshot;
                }
            }
            Op::Undo {
                turn,
                to,
                mode,
                snapshot,
            } => {
                self.cursor = *to;
                self.redo.push((*turn, *mode));
                if snapshot.is_some() {
                    self.last_known = *snapshot;
                }
            }
            Op::Redo { turn, snapshot, .. } => {
                self.cursor = Some(*turn);
                if self.redo.last().is_some_and(|(t, _)| t == turn) {
                    self.redo.pop();
                } else {
                    self.redo.clear();
                }
                if snapshot.is_some() {
                    self.last_known = *snapshot;
                }
            }
            Op::Navigate { to, snapshot } => {
                self.cursor = *to;
                self.redo.clear();
                if snapshot.is_some() {
                    self.last_known = *snapshot;
                }
            }
            Op::Revert {
                as_turn, snapshot, ..
            } => {
                self.cursor = Some(*as_turn);
                self.redo.clear();
                self.next_turn = self.next_turn.max(as_turn.saturating_add(1));
                if snapshot.is_some() {
                    self.last_known = *snapshot;
                }
            }
            Op::Checkpoint { number, snapshot } => {
                self.last_known = Some(*snapshot);
                self.next_checkpoint = self.next_checkpoint.max(number.saturating_add(1));
            }
            // Journal only; a log that holds one (a damaged one) learns nothing from it.
            Op::Restore { .. } | Op::RevertStep { .. } => {}
        }
    }

    /// The [`Op::Base`] that stands for this state.
    #[must_use]
    pub fn base(&self) -> Op {
        Op::Base {
            cursor: self.cursor,
            redo: self.redo.clone(),
            last_known: self.last_known,
            pending: self.pending,
            next_turn: self.next_turn,
            next_checkpoint: self.next_checkpoint,
        }
    }

    /// Replays a log from the start.
    pub fn replay<'a>(ops: impl IntoIterator<Item = &'a Op>) -> SessionState {
        let mut s = SessionState::new();
        for op in ops {
            s.apply(op);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_redo_and_new_turns() {
        let ops = [
            Op::TurnBegun { turn: 1 },
            Op::TurnEnded {
                turn: 1,
                snapshot: None,
            },
            Op::TurnBegun { turn: 2 },
            Op::TurnEnded {
                turn: 2,
                snapshot: None,
            },
            Op::Undo {
                turn: 2,
                to: Some(1),
                mode: Mode::Both,
                snapshot: None,
            },
            Op::Undo {
                turn: 1,
                to: None,
                mode: Mode::Files,
                snapshot: None,
            },
            Op::Redo {
                turn: 1,
                mode: Mode::Files,
                snapshot: None,
            },
        ];
        let s = SessionState::replay(&ops);
        assert_eq!(s.cursor, Some(1));
        assert_eq!(s.redo, vec![(2, Mode::Both)]);
        assert_eq!(s.next_turn, 3);
        let mut t = s.clone();
        t.apply(&Op::TurnBegun { turn: 3 });
        assert!(t.redo.is_empty());
        assert_eq!(t.pending, Some(3));
        // A base stands for everything before it.
        let mut u = SessionState::replay(&[Op::TurnBegun { turn: 9 }]);
        u.apply(&s.base());
        assert_eq!(u, s);
    }

    #[test]
    fn the_largest_numbers_in_a_damaged_log_do_not_overflow() {
        // `turn + 1` and `number + 1` overflowed on a log naming u64::MAX.
        let s = SessionState::replay(&[
            Op::TurnBegun { turn: u64::MAX },
            Op::Checkpoint {
                number: u64::MAX,
                snapshot: ObjectId::ZERO,
            },
        ]);
        assert_eq!((s.next_turn, s.next_checkpoint), (u64::MAX, u64::MAX));
    }
}
