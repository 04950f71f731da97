//! Thinning a session's op log: the ops a turn record already holds are folded into one
//! [`Op::Base`] per run, so a long session's log costs what happened besides its turns.
//!
//! Every turn writes three ops (`TurnBegun`, `TurnBefore`, `TurnEnded`) whose only lasting
//! content, the turn's snapshots, its turn record keeps; the log needs them only to replay
//! the session's state. A maintenance pass replaces each run of two or more such ops (and
//! of earlier bases) by one base holding the state at the run's end, numbered as the run's
//! last op, and keeps every other op where it was: undos, redos and navigations (the
//! timeline shows them), checkpoints (their baseline is the state just before them),
//! reverts and restores. The state replayed just before and after every kept op is the
//! same as before the thinning, and the newest ops are never touched (a turn's end checks
//! that its own `TurnEnded` is the log's last op).

use super::record::{Op, OpRecord};
use super::state::SessionState;

/// The newest ops a thinning leaves as they are.
pub const KEEP_NEWEST: usize = 64;

/// What thinning a log changes: rows to remove, then rows to write (each a base, at the
/// number of the last op of the run it stands for).
#[derive(Debug, Default, PartialEq)]
pub struct Thinning {
    /// Row numbers removed.
    pub removed: Vec<u64>,
    /// Rows written, after the removal (their numbers are among `removed`).
    pub put: Vec<(u64, OpRecord)>,
}

impl Thinning {
    /// Rows the log loses.
    #[must_use]
    pub fn saved(&self) -> u64 {
        (self.removed.len() - self.put.len()) as u64
    }

    /// Whether `rows` thinned so replay to the state `rows` replay to: checked before
    /// anything is written.
    #[must_use]
    pub fn replays_as(&self, rows: &[(u64, OpRecord)]) -> bool {
        let removed: std::collections::HashSet<u64> = self.removed.iter().copied().collect();
        let mut after: Vec<(u64, &OpRecord)> = rows
            .iter()
            .filter(|(n, _)| !removed.contains(n))
            .map(|(n, r)| (*n, r))
            .chain(self.put.iter().map(|(n, r)| (*n, r)))
            .collect();
        after.sort_by_key(|(n, _)| *n);
        SessionState::replay(after.iter().map(|(_, r)| &r.op))
            == SessionState::replay(rows.iter().map(|(_, r)| &r.op))
    }
}

/// Whether the op holds nothing but what the turn records and the replayed state hold.
fn foldable(op: &Op) -> bool {
    matches!(
        op,
        Op::Base { .. } | Op::TurnBegun { .. } | Op::TurnBefore { .. } | Op::TurnEnded { .. }
    )
}

/// The thinning of `rows` (a session's op log, oldest first, with row numbers), leaving
/// the newest `keep` ops alone.
#[must_use]
pub fn thin(rows: &[(u64, OpRecord)], keep: usize) -> Thinning {
    let mut out = Thinning::default();
    let Some(older) = rows.len().checked_sub(keep) else {
        return out;
    };
    let mut state = SessionState::new();
    // The current run of foldable ops: its row numbers, and the last one's record.
    let mut run: Vec<u64> = Vec::new();
    let mut last: Option<&OpRecord> = None;
    let mut close = |run: &mut Vec<u64>, last: Option<&OpRecord>, state: &SessionState| {
        if let (true, Some(rec)) = (run.len() >= 2, last) {
            out.removed.extend(run.iter().copied());
            let n = run[run.len() - 1];
            out.put.push((
                n,
                OpRecord {
                    version: rec.version,
                    time_ms: rec.time_ms,
                    op: state.base(),
                },
            ));
        }
        run.clear();
    };
    for (n, rec) in &rows[..older] {
        if foldable(&rec.op) {
            run.push(*n);
            last = Some(rec);
        } else {
            close(&mut run, last, &state);
        }
        state.apply(&rec.op);
    }
    close(&mut run, last, &state);
    out
}

#[cfg(test)]
#[path = "log_thin_tests.rs"]
mod tests;
