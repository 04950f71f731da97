use proptest::prelude::*;

use super::*;
use crate::history::record::{HISTORY_VERSION, Mode};
use crate::object::ObjectId;

fn rec(time_ms: u64, op: Op) -> OpRecord {
    OpRecord {
        version: HISTORY_VERSION,
        time_ms,
        op,
    }
}

fn id(n: u8) -> ObjectId {
    ObjectId([n; 32])
}

/// The log after applying `t`, with its row numbers.
fn applied(rows: &[(u64, OpRecord)], t: &Thinning) -> Vec<(u64, OpRecord)> {
    let mut out: Vec<(u64, OpRecord)> = rows
        .iter()
        .filter(|(n, _)| !t.removed.contains(n))
        .cloned()
        .collect();
    out.extend(t.put.iter().cloned());
    out.sort_by_key(|(n, _)| *n);
    out
}

/// An op drawn from every kind the log holds, about turns and snapshots of a small range.
fn any_op() -> impl Strategy<Value = Op> {
    let t = 1u64..6;
    let s = (0u8..4).prop_map(id);
    prop_oneof![
        t.clone().prop_map(|turn| Op::TurnBegun { turn }),
        (t.clone(), s.clone()).prop_map(|(turn, snapshot)| Op::TurnBefore { turn, snapshot }),
        (t.clone(), proptest::option::of(s.clone()))
            .prop_map(|(turn, snapshot)| Op::TurnEnded { turn, snapshot }),
        (t.clone(), proptest::option::of(t.clone())).prop_map(|(turn, to)| Op::Undo {
            turn,
            to,
            mode: Mode::Files,
            snapshot: None,
        }),
        t.clone().prop_map(|turn| Op::Redo {
            turn,
            mode: Mode::Both,
            snapshot: None,
        }),
        proptest::option::of(t.clone()).prop_map(|to| Op::Navigate { to, snapshot: None }),
        (t.clone(), s.clone()).prop_map(|(number, snapshot)| Op::Checkpoint { number, snapshot }),
        (proptest::option::of(t.clone()), proptest::option::of(s), t).prop_map(
            |(cursor, last_known, next_turn)| Op::Base {
                cursor,
                redo: Vec::new(),
                last_known,
                pending: None,
                next_turn,
                next_checkpoint: 1,
            }
        ),
    ]
}

proptest! {
    /// Against the log itself as the model: the thinned log replays to the same state just
    /// before and after every op it kept, ends in the same state, keeps the newest ops and
    /// every op that is not a turn's own, and never grows.
    #[test]
    fn thinning_keeps_every_state_an_op_is_read_at(
        ops in proptest::collection::vec(any_op(), 0..80),
        keep in 0usize..10,
    ) {
        let rows: Vec<(u64, OpRecord)> = ops
            .into_iter()
            .enumerate()
            .map(|(i, op)| (i as u64 * 2 + 1, rec(i as u64, op)))
            .collect();
        let t = thin(&rows, keep);
        let new = applied(&rows, &t);
        prop_assert!(new.len() <= rows.len());
        prop_assert_eq!((rows.len() - new.len()) as u64, t.saved());
        // The state before and after each op, by row number.
        let states = |log: &[(u64, OpRecord)]| {
            let mut s = SessionState::new();
            let mut at = std::collections::HashMap::new();
            for (n, r) in log {
                let before = s.clone();
                s.apply(&r.op);
                at.insert(*n, (before, s.clone()));
            }
            (at, s)
        };
        let (old_at, old_end) = states(&rows);
        let (new_at, new_end) = states(&new);
        prop_assert_eq!(old_end, new_end);
        for (n, r) in &rows {
            // What the timeline, checkpoints' baselines and undo's suspects read (named
            // here, not through the module's own rule).
            let read = matches!(
                r.op,
                Op::Undo { .. } | Op::Redo { .. } | Op::Navigate { .. } | Op::Checkpoint { .. }
            );
            if read {
                prop_assert!(!t.removed.contains(n), "row {} is read by the timeline", n);
                prop_assert_eq!(&old_at[n], &new_at[n]);
            }
        }
        prop_assert!(t.saved() == 0 || t.replays_as(&rows));
        let newest = rows.len().saturating_sub(keep);
        for (n, _) in &rows[newest..] {
            prop_assert!(!t.removed.contains(n), "row {} is among the newest", n);
        }
    }
}

#[test]
fn a_long_run_of_turns_becomes_one_base_and_the_tail_stays() {
    let mut rows = Vec::new();
    let mut n = 0;
    for turn in 1..=100 {
        for op in [
            Op::TurnBegun { turn },
            Op::TurnBefore {
                turn,
                snapshot: id(1),
            },
            Op::TurnEnded {
                turn,
                snapshot: Some(id(2)),
            },
        ] {
            n += 1;
            rows.push((n, rec(n, op)));
        }
    }
    let t = thin(&rows, KEEP_NEWEST);
    assert_eq!(t.removed.len(), 300 - KEEP_NEWEST);
    assert_eq!(t.put.len(), 1);
    let (at, base) = &t.put[0];
    assert_eq!(*at, (300 - KEEP_NEWEST) as u64);
    let Op::Base {
        cursor, next_turn, ..
    } = base.op
    else {
        panic!("not a base: {base:?}");
    };
    // Turn 79's ops are 235..=237; the run ends at 236, its TurnBefore.
    assert_eq!((cursor, next_turn), (Some(78), 80));
    assert_eq!(applied(&rows, &t).len(), KEEP_NEWEST + 1);
    // Thinning it again finds nothing more to fold.
    assert_eq!(thin(&applied(&rows, &t), KEEP_NEWEST).saved(), 0);
}

#[test]
fn a_thinning_that_would_change_the_state_is_caught_before_it_is_written() {
    let rows: Vec<(u64, OpRecord)> = (1..=4)
        .map(|turn| (turn, rec(turn, Op::TurnBegun { turn })))
        .collect();
    let mut t = thin(&rows, 0);
    assert!(t.replays_as(&rows));
    // A base standing for another state.
    t.put[0].1.op = SessionState::new().base();
    assert!(!t.replays_as(&rows));
}

#[test]
fn a_lone_turn_op_between_kept_ops_stays_as_it_is() {
    let undo = |turn| Op::Undo {
        turn,
        to: None,
        mode: Mode::Files,
        snapshot: None,
    };
    let rows = vec![
        (1, rec(1, undo(1))),
        (2, rec(2, Op::TurnBegun { turn: 2 })),
        (3, rec(3, undo(2))),
    ];
    assert_eq!(thin(&rows, 0), Thinning::default());
    assert_eq!(thin(&rows, 5), Thinning::default());
}
