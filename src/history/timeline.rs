//! A session's timeline (`retrace ui`): its turns, reverts and checkpoints together with the
//! undos, redos and navigations between them, as one list, newest first.
//!
//! The log ([`Session::log`]) says what each turn changed and whether it is applied now; the
//! op log says when the session stepped back and forth. A timeline puts both in the order
//! they happened, so a person sees "turn 3, undo of turn 3, turn 4" rather than a turn 3
//! marked undone with no trace of when.

use serde::Serialize;

use super::inspect::{Span, session_log};
use super::record::Op;
use super::{LogEntry, Session, SessionStatus, db};
use crate::error::Error;
use crate::object::ObjectId;

/// What a timeline entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// A turn of the agent.
    Turn,
    /// A turn that reverted an earlier one (`retrace revert`).
    Revert,
    /// A checkpoint.
    Checkpoint,
    /// A turn was undone.
    Undo,
    /// An undone turn was re-applied.
    Redo,
    /// The session moved to an anchor (`retrace navigate`): a restore of a recorded point.
    Navigate,
    /// A burst of writes the watcher's recorder captured (the workspace's local history,
    /// in no session: [`crate::Workspace::local_history`]).
    Burst,
}

impl Moment {
    /// The word a person reads: `turn`, `revert`, `checkpoint`, `undo`, `redo`, `restore`.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Moment::Turn => "turn",
            Moment::Revert => "revert",
            Moment::Checkpoint => "checkpoint",
            Moment::Undo => "undo",
            Moment::Redo => "redo",
            Moment::Navigate => "restore",
            Moment::Burst => "burst",
        }
    }
}

/// One entry of a session's timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineEntry {
    /// What it is.
    pub moment: Moment,
    /// Unix milliseconds when it happened (a turn: when it began).
    pub time_ms: u64,
    /// The log entry it is (turns, reverts, checkpoints), or the turn an undo or redo
    /// stepped over while that turn is still kept.
    pub entry: Option<LogEntry>,
    /// An undo or navigation: the turn applied afterwards (None: before the first turn).
    pub to: Option<u64>,
    /// An undo, redo or navigation: the snapshot the disk was left equal to; a burst: its
    /// snapshot.
    pub snapshot: Option<ObjectId>,
    /// A burst: what it changed, as its recorder saw it (from the snapshot before it then,
    /// which thinning may since have taken: [`TimelineEntry::span`] starts at the snapshot
    /// before it now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<super::bursts::BurstSummary>,
    /// The change of [`TimelineEntry::entry`]: the two snapshots it lies between, for
    /// [`Session::span_changes`] (None when it changed nothing that was captured).
    #[serde(skip)]
    pub span: Span,
}

impl TimelineEntry {
    /// The reference [`Session::show`] takes for the log entry it names (`turn:N`,
    /// `checkpoint:N`), when it names one.
    #[must_use]
    pub fn reference(&self) -> Option<String> {
        self.entry.as_ref().map(|e| match e.kind {
            "checkpoint" => format!("checkpoint:{}", e.number),
            _ => format!("turn:{}", e.number),
        })
    }
}

/// A session's state and its timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    /// The session's state: cursor, redo stack, a turn in progress.
    pub status: SessionStatus,
    /// Its entries, newest first.
    pub entries: Vec<TimelineEntry>,
}

impl Session {
    /// The session's turns, reverts and checkpoints with the undos, redos and navigations
    /// between them, newest first (`timeline`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or a record does not decode.
    pub fn timeline(&self) -> Result<Timeline, Error> {
        let (loaded, items) = session_log(&self.ws, self.key)?;
        let ops = {
            let tx = self.ws.store().begin_read()?;
            db::ops(&tx, &self.key)?
        };
        let turn = |n: u64| {
            items
                .iter()
                .find(|i| i.entry.kind != "checkpoint" && i.entry.number == n)
                .map(|i| (i.entry.clone(), i.span))
        };
        let mut entries = Vec::new();
        // Newest first, as the log is; at the same millisecond an op comes first (an undo
        // follows the turn it undoes).
        for rec in ops.into_iter().rev() {
            let (moment, found, to, snapshot) = match rec.op {
                Op::Undo {
                    turn: n,
                    to,
                    snapshot,
                    ..
                } => (Moment::Undo, turn(n), to, snapshot),
                Op::Redo {
                    turn: n, snapshot, ..
                } => (Moment::Redo, turn(n), Some(n), snapshot),
                Op::Navigate { to, snapshot } => (Moment::Navigate, None, to, snapshot),
                _ => continue,
            };
            let (entry, span) = found.map_or((None, None), |(e, s)| (Some(e), s));
            entries.push(TimelineEntry {
                moment,
                time_ms: rec.time_ms,
                entry,
                to,
                snapshot,
                burst: None,
                span,
            });
        }
        entries.extend(items.iter().map(|i| TimelineEntry {
            moment: match i.entry.kind {
                "checkpoint" => Moment::Checkpoint,
                "revert" => Moment::Revert,
                _ => Moment::Turn,
            },
            time_ms: i.entry.time_ms,
            entry: Some(i.entry.clone()),
            to: None,
            snapshot: None,
            burst: None,
            span: i.span,
        }));
        // A stable sort: ties keep the order above.
        entries.sort_by_key(|e| std::cmp::Reverse(e.time_ms));
        Ok(Timeline {
            status: self.status_of(&loaded),
            entries,
        })
    }
}
