//! The typed result of undo, redo, navigate and checkpoint, each with a one-line message a
//! host can show as is.

use std::fmt::Write;

use serde::Serialize;

use super::record::Mode;
use crate::object::ObjectId;
use crate::scan::Skipped;

/// What an undo, redo, navigation or checkpoint did or why it did nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Files were restored (and, by mode, the host should move its conversation).
    Restored {
        /// The turn undone or redone (None for a navigation).
        turn: Option<u64>,
        /// The mode used.
        mode: Mode,
        /// Files and symlinks written.
        files_written: Vec<String>,
        /// Files and symlinks deleted.
        files_deleted: Vec<String>,
        /// Paths left alone (an unmanaged file in the way, a nested repository).
        skipped: Vec<Skipped>,
        /// The conversation node the host should move to (None in `files` mode).
        anchor: Option<String>,
        /// The prompt to put back into the host's editor (undo only).
        prompt: Option<String>,
        /// The snapshot the disk now equals.
        snapshot: Option<ObjectId>,
        /// A snapshot of edits overwritten by `force`.
        safety_snapshot: Option<ObjectId>,
        /// Paths of a revert written as a three-way merge: the turn's change taken out, the
        /// changes made since kept.
        merged: Vec<String>,
        /// Paths another writer wrote last that a navigation (whole workspace by design)
        /// rewound, each with that writer: their versions stay in the snapshot the
        /// navigation started from.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        rewound: Vec<Skipped>,
    },
    /// None of the turn's files could be restored: every path it changed belongs to
    /// another session (a turn of it still running, or one that ran at the same time).
    /// Nothing was written, and the cursor did not move: the turn is still the one to undo
    /// (or redo). Undo in mode conversation moves only the conversation.
    NothingRestored {
        /// The turn.
        turn: u64,
        /// The paths with why each was left (at most [`crate::MAX_LISTED`]).
        paths: Vec<Skipped>,
        /// How many paths in all.
        count: usize,
    },
    /// Only the conversation moves; files were left as they are.
    ConversationOnly {
        /// The turn concerned, if any.
        turn: Option<u64>,
        /// Why files were not restored.
        reason: String,
        /// The conversation node the host should move to.
        anchor: Option<String>,
        /// The prompt to put back into the host's editor (undo only).
        prompt: Option<String>,
        /// The checkpoint that now holds the files as they are, if one was taken.
        checkpoint: Option<ObjectId>,
    },
    /// A checkpoint was taken.
    Checkpointed {
        /// Its number (`checkpoint:N` as an anchor).
        number: u64,
        /// Its label.
        label: Option<String>,
        /// Its snapshot.
        snapshot: ObjectId,
        /// Files captured.
        files: u64,
        /// Paths left out (unreadable, unstable).
        skipped: Vec<Skipped>,
    },
    /// No applied turn to undo.
    NothingToUndo {
        /// Why, in a few words.
        detail: String,
    },
    /// No undone turn to redo.
    NothingToRedo,
    /// A turn is in progress (or another process holds the workspace); nothing changed.
    Busy {
        /// Why.
        detail: String,
    },
    /// A capture of this session is still running; try again shortly.
    CaptureInFlight,
    /// Paths the operation would overwrite were changed since; nothing was written.
    Conflict {
        /// The paths (at most [`crate::MAX_LISTED`]).
        paths: Vec<String>,
        /// How many in all.
        count: usize,
    },
    /// The disk has changes no snapshot holds; nothing was written.
    Dirty {
        /// The paths (at most [`crate::MAX_LISTED`]).
        paths: Vec<String>,
        /// How many in all.
        count: usize,
    },
    /// The turn's snapshots were removed by retention: only the conversation moves.
    Expired {
        /// The turn.
        turn: Option<u64>,
        /// The conversation node the host should move to.
        anchor: Option<String>,
        /// The prompt to put back.
        prompt: Option<String>,
    },
    /// Files were changed but the history could not be saved durably.
    PersistenceUncertain {
        /// The failure.
        detail: String,
    },
    /// Subagent sessions keep no history.
    Subagent,
}

impl Outcome {
    /// Whether the operation did what was asked (files and/or conversation moved).
    #[must_use]
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Outcome::Restored { .. }
                | Outcome::ConversationOnly { .. }
                | Outcome::Checkpointed { .. }
                | Outcome::Expired { .. }
        )
    }

    /// The conversation node the host should move to, if any.
    #[must_use]
    pub fn anchor(&self) -> Option<&str> {
        match self {
            Outcome::Restored { anchor, .. }
            | Outcome::ConversationOnly { anchor, .. }
            | Outcome::Expired { anchor, .. } => anchor.as_deref(),
            _ => None,
        }
    }

    /// One line for the user.
    #[must_use]
    pub fn message(&self) -> String {
        self.message_at(None)
    }

    /// [`Outcome::message`] of a navigation, naming where it went (`checkpoint:1`) instead
    /// of the turn its cursor is at.
    #[must_use]
    pub fn message_at(&self, target: Option<&str>) -> String {
        let turn = |t: &Option<u64>| match target {
            Some(name) => format!("{name}: "),
            None => t.map_or_else(String::new, |t| format!("turn {t}: ")),
        };
        match self {
            Outcome::Restored {
                turn: t,
                files_written,
                files_deleted,
                skipped,
                merged,
                rewound,
                ..
            } => {
                let merged = if merged.is_empty() {
                    String::new()
                } else {
                    format!(", {} merged", merged.len())
                };
                let mut m = format!(
                    "{}restored files ({} written, {} deleted{merged})",
                    turn(t),
                    files_written.len(),
                    files_deleted.len()
                );
                if !skipped.is_empty() {
                    let _ = write!(m, ", {} left alone", skipped.len());
                }
                if !rewound.is_empty() {
                    let _ = write!(
                        m,
                        "; rewound {} path(s) other writers wrote last ({}: {})",
                        rewound.len(),
                        rewound[0].path,
                        rewound[0].reason
                    );
                }
                m
            }
            Outcome::NothingRestored { turn, paths, count } => {
                let names: Vec<String> = paths.iter().map(|p| p.path.clone()).collect();
                let why = paths.first().map_or("", |p| p.reason.as_str());
                format!(
                    "turn {turn}: nothing restored: the {count} path(s) it changed ({}) are \
                     another session's ({why}); nothing written and the turn stays the one to \
                     undo or redo (undo in mode conversation to move only the conversation)",
                    crate::error::listed(&names, *count)
                )
            }
            Outcome::ConversationOnly {
                turn: t, reason, ..
            } => {
                format!("{}conversation only: {reason}", turn(t))
            }
            Outcome::Checkpointed {
                number,
                label,
                files,
                ..
            } => {
                // The snapshot holds every file; only what changed since was stored anew.
                let of = format!(
                    "a snapshot of {files} file{}",
                    if *files == 1 { "" } else { "s" }
                );
                match label {
                    Some(l) => format!("checkpoint {number} ({l}): {of}"),
                    None => format!("checkpoint {number}: {of}"),
                }
            }
            Outcome::NothingToUndo { detail } => format!("nothing to undo: {detail}"),
            Outcome::NothingToRedo => "nothing to redo".into(),
            Outcome::Busy { detail } => format!("busy: {detail}; nothing changed"),
            Outcome::CaptureInFlight => "a snapshot is still being taken; try again shortly".into(),
            Outcome::Conflict { paths, count } => format!(
                "conflict: {count} path(s) changed since ({}); nothing written; use --force to \
                 overwrite (a safety snapshot is taken first)",
                crate::error::listed(paths, *count)
            ),
            Outcome::Dirty { paths, count } => format!(
                "{}: {}",
                crate::error::dirty_refusal(*count),
                crate::error::listed(paths, *count)
            ),
            Outcome::Expired { turn: t, .. } => format!(
                "{}its file history expired; only the conversation moves",
                turn(t)
            ),
            Outcome::PersistenceUncertain { detail } => format!(
                "files were changed but saving the history could not be confirmed: {detail}"
            ),
            Outcome::Subagent => {
                "subagent sessions are not checkpointed; undo from the main session".into()
            }
        }
    }
}

/// An [`Outcome`] with its message, as printed with `--json` and sent to hosts.
#[derive(Clone, Debug, Serialize)]
pub struct Report<'a> {
    /// The outcome's fields, tagged by `result`.
    #[serde(flatten)]
    pub outcome: &'a Outcome,
    /// [`Outcome::message`].
    pub message: String,
    /// [`Outcome::is_success`].
    pub ok: bool,
}

impl<'a> From<&'a Outcome> for Report<'a> {
    fn from(outcome: &'a Outcome) -> Report<'a> {
        Report {
            outcome,
            message: outcome.message(),
            ok: outcome.is_success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    /// Refusals name the flag that overrides them as it is typed.
    #[test]
    fn refusals_name_the_force_flag() {
        let paths = vec!["a.txt".to_string()];
        for o in [
            Outcome::Conflict {
                paths: paths.clone(),
                count: 1,
            },
            Outcome::Dirty { paths, count: 1 },
        ] {
            let m = o.message();
            assert!(m.contains("--force"), "{m}");
            assert!(!m.contains("use force"), "{m}");
        }
    }
}
