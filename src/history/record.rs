//! The history records a store keeps per session: the session itself, its turns, its
//! checkpoints and its op log. Each is postcard-encoded with a leading version byte; a
//! record of an unknown version is refused, never misread. `docs/format.md` lists the
//! fields.

use serde::{Deserialize, Serialize};

use crate::object::ObjectId;
use crate::object::record::DecodeError;

/// Version of every history record written today.
pub const HISTORY_VERSION: u8 = 1;

/// Longest prompt text kept with a turn; longer prompts are cut at a character boundary.
pub const MAX_PROMPT_BYTES: usize = 256 * 1024;
/// Longest anchor or label kept.
pub const MAX_ANCHOR_BYTES: usize = 4096;

/// Cuts `s` to at most `max` bytes at a character boundary.
#[must_use]
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// What undo and redo restore.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Files and conversation (the default).
    #[default]
    Both,
    /// Files only; the host leaves its conversation where it is.
    Files,
    /// Conversation only; files stay as they are (and are checkpointed).
    Conversation,
}

impl Mode {
    /// Whether files are restored.
    #[must_use]
    pub fn files(self) -> bool {
        self != Mode::Conversation
    }

    /// Whether the host moves its conversation.
    #[must_use]
    pub fn conversation(self) -> bool {
        self != Mode::Files
    }
}

/// A mode name that is none of `both`, `files`, `conversation`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}: use both, files or conversation")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s {
            "both" => Ok(Mode::Both),
            "files" => Ok(Mode::Files),
            "conversation" => Ok(Mode::Conversation),
            _ => Err(UnknownMode(s.to_string())),
        }
    }
}

/// Where a turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Begun, not ended.
    Pending,
    /// Both snapshots recorded: undo restores files.
    Complete,
    /// No trustworthy before (or after) snapshot: undo moves only the conversation.
    ConversationOnly,
    /// Its snapshots were removed by retention: undo moves only the conversation.
    Expired,
}

impl TurnState {
    /// Its name, as JSON spells it (`conversation_only`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TurnState::Pending => "pending",
            TurnState::Complete => "complete",
            TurnState::ConversationOnly => "conversation_only",
            TurnState::Expired => "expired",
        }
    }
}

/// Paths a turn added, modified and deleted. Encoded (in records and in JSON alike) as the
/// triple `[added, modified, deleted]`, as it always was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Paths added.
    pub added: u32,
    /// Paths modified.
    pub modified: u32,
    /// Paths deleted.
    pub deleted: u32,
}

/// A triple `[added, modified, deleted]`, as the counts are encoded.
impl Counts {
    /// The files (and symlinks) `changes` adds, modifies and deletes; directories made or
    /// removed count only through what they hold.
    #[must_use]
    pub(crate) fn of(changes: &[crate::diff::Change]) -> Counts {
        let mut c = Counts::default();
        for ch in changes {
            let leaf = |e: &Option<crate::object::FlatEntry>| {
                e.as_ref()
                    .is_some_and(|e| e.kind != crate::object::EntryKind::Dir)
            };
            match (leaf(&ch.old), leaf(&ch.new)) {
                (false, true) => c.added += 1,
                (true, false) => c.deleted += 1,
                (true, true) => c.modified += 1,
                (false, false) => {}
            }
        }
        c
    }
}

impl PartialEq<[u32; 3]> for Counts {
    fn eq(&self, other: &[u32; 3]) -> bool {
        [self.added, self.modified, self.deleted] == *other
    }
}

impl Serialize for Counts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.added, self.modified, self.deleted].serialize(s)
    }
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Counts, D::Error> {
        let [added, modified, deleted] = <[u32; 3]>::deserialize(d)?;
        Ok(Counts {
            added,
            modified,
            deleted,
        })
    }
}

/// One undo unit: from the user's prompt until the agent settles.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// Turn number within its session, from 1.
    pub number: u64,
    /// The turn applied when this one began (its parent in the session's tree).
    pub parent: Option<u64>,
    /// The host's conversation node to return to when this turn is undone.
    pub anchor: Option<String>,
    /// The host's conversation leaf when the turn ended.
    pub leaf: Option<String>,
    /// Anchors of intermediate rounds the host reported (they name this turn).
    pub rounds: Vec<String>,
    /// The prompt text, to put back into the host's editor on undo.
    pub prompt: Option<String>,
    /// Unix milliseconds at begin.
    pub began_ms: u64,
    /// Unix milliseconds at end.
    pub ended_ms: Option<u64>,
    /// Snapshot before the turn.
    pub before: Option<ObjectId>,
    /// Snapshot after the turn.
    pub after: Option<ObjectId>,
    /// State.
    pub state: TurnState,
    /// Why the turn is conversation-only, when it is.
    pub reason: Option<String>,
    /// Paths the turn added, modified and deleted (filled in at end).
    pub counts: Counts,
}

/// A labelled capture outside any turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// Checkpoint number within its session, from 1.
    pub number: u64,
    /// Optional label (also usable as an anchor).
    pub label: Option<String>,
    /// The snapshot.
    pub snapshot: ObjectId,
    /// The session's applied turn when it was taken.
    pub cursor: Option<u64>,
    /// Unix milliseconds.
    pub time_ms: u64,
}

/// A session (keyed in the store by the hash of the host's session id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// Unix milliseconds when first seen.
    pub created_ms: u64,
    /// Unix milliseconds of the last operation.
    pub touched_ms: u64,
}

/// What the host calls a session, kept beside its key so that people can name it back
/// (`retrace sessions`, `--session NAME`). Sessions from before names were kept have none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionName {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// The host's session id (its key is the hash of exactly this).
    pub name: String,
    /// The agent that opened it (`claude-code`, `codex`, `gemini`, `qwen`, `copilot`, `droid`, `pi`), when it said.
    pub agent: Option<String>,
}

/// One entry of a session's op log. The cursor, the redo stack and the last known snapshot
/// are derived by replaying these (see [`super::state::SessionState`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// The state so far, written when older entries are dropped (turn cap) and when
    /// maintenance folds a run of turn ops (`super::log_thin`).
    Base {
        /// Applied turn.
        cursor: Option<u64>,
        /// Undone turns, most recent last, with the mode of their undo.
        redo: Vec<(u64, Mode)>,
        /// Last snapshot the session knows the disk to equal.
        last_known: Option<ObjectId>,
        /// A begun, unfinished turn.
        pending: Option<u64>,
        /// Next turn number.
        next_turn: u64,
        /// Next checkpoint number.
        next_checkpoint: u64,
    },
    /// A turn began (clears redo).
    TurnBegun {
        /// The turn.
        turn: u64,
    },
    /// Its before-snapshot was captured.
    TurnBefore {
        /// The turn.
        turn: u64,
        /// The snapshot.
        snapshot: ObjectId,
    },
    /// A turn ended (or was closed without an end); it becomes the applied turn.
    TurnEnded {
        /// The turn.
        turn: u64,
        /// Its after-snapshot, when captured.
        snapshot: Option<ObjectId>,
    },
    /// A turn was undone.
    Undo {
        /// The turn.
        turn: u64,
        /// The applied turn afterwards (the turn's parent).
        to: Option<u64>,
        /// Mode used (redo repeats it).
        mode: Mode,
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
    /// An undone turn was re-applied.
    Redo {
        /// The turn.
        turn: u64,
        /// Mode used.
        mode: Mode,
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
    /// The session moved to an anchor.
    Navigate {
        /// The applied turn afterwards.
        to: Option<u64>,
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
    /// A checkpoint was taken.
    Checkpoint {
        /// Its number.
        number: u64,
        /// Its snapshot.
        snapshot: ObjectId,
    },
    /// An earlier turn was reverted (`retrace revert`): the revert is a turn of its own,
    /// `as_turn`, applied on top of the cursor (undo undoes it, redo redoes it). Written
    /// when the revert's files are on disk; its turn record and [`RevertRecord`] are
    /// written with it, from these fields.
    Revert {
        /// The turn reverted.
        turn: u64,
        /// The revert's own turn number (the session's next one when it was recorded).
        as_turn: u64,
        /// The disk before the revert (the revert turn's before-snapshot).
        before: ObjectId,
        /// Unix milliseconds when it began.
        began_ms: u64,
        /// Paths it added, modified and deleted.
        counts: Counts,
        /// Paths it merged (their change since the turn kept).
        merged: Vec<String>,
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
    /// One step of an earlier turn was reverted (`retrace revert turn:N.K`): only ever in a
    /// revert's journal. Recorded as [`Op::Revert`] is, but as an ordinary turn (no
    /// [`RevertRecord`]: the turn itself is not reverted) whose prompt names the step.
    RevertStep {
        /// The turn whose step was reverted.
        turn: u64,
        /// The step.
        step: u64,
        /// The step's tool and summary, for the revert turn's prompt.
        what: String,
        /// The disk before the revert.
        before: ObjectId,
        /// Unix milliseconds when it began.
        began_ms: u64,
        /// Paths it added, modified and deleted.
        counts: Counts,
        /// Paths it merged.
        merged: Vec<String>,
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
    /// A restore made for the session (`retrace --session S restore`, `serve`'s and MCP's
    /// restores): only ever in a restore's journal, never in the op log. Its record makes the
    /// session's operation the ledger's writer of what the restore wrote.
    Restore {
        /// The disk afterwards.
        snapshot: Option<ObjectId>,
    },
}

impl Op {
    /// The op with its "disk afterwards" set to `id` (ops without one are unchanged).
    #[must_use]
    pub fn with_snapshot(self, id: ObjectId) -> Op {
        match self {
            Op::Undo { turn, to, mode, .. } => Op::Undo {
                turn,
                to,
                mode,
                snapshot: Some(id),
            },
            Op::Redo { turn, mode, .. } => Op::Redo {
                turn,
                mode,
                snapshot: Some(id),
            },
            Op::Navigate { to, .. } => Op::Navigate {
                to,
                snapshot: Some(id),
            },
            Op::Restore { .. } => Op::Restore { snapshot: Some(id) },
            mut op @ (Op::Revert { .. } | Op::RevertStep { .. }) => {
                if let Op::Revert { snapshot, .. } | Op::RevertStep { snapshot, .. } = &mut op {
                    *snapshot = Some(id);
                }
                op
            }
            other => other,
        }
    }
}

/// One tool call of an agent's turn (a step): what ran, what it named, and the snapshots
/// taken around it (a shell tool's; an edit tool names its files instead).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Record version (`HISTORY_VERSION`).
    pub version: u8,
    /// The turn it belongs to.
    pub turn: u64,
    /// Its number within the turn, from 1 (`turn:N.K`).
    pub number: u64,
    /// The host's id of the tool call, to match its end to its start (empty: none given).
    pub call: String,
    /// The tool's name (`Bash`, `Edit`, `write`, ...).
    pub tool: String,
    /// One line of its input (the command, the file), at most 200 bytes.
    pub summary: String,
    /// Files it names, workspace-relative path bytes: an edit tool writes only these. Empty
    /// for a shell tool, which may write anything.
    pub files: Vec<Vec<u8>>,
    /// Unix milliseconds.
    pub began_ms: u64,
    /// Unix milliseconds; None while it runs.
    pub ended_ms: Option<u64>,
    /// The disk when it began (shell tools).
    pub before: Option<ObjectId>,
    /// The disk when it ended (shell tools).
    pub after: Option<ObjectId>,
}

impl StepRecord {
    /// Whether it may write any path (a shell tool), not only the files it names.
    #[must_use]
    pub fn shell(&self) -> bool {
        self.files.is_empty()
    }
}

/// What a turn that reverted another turn reverted (kept beside its turn record, so that
/// it outlives the op log's compaction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevertRecord {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// The revert's own turn number.
    pub number: u64,
    /// The turn reverted.
    pub reverts: u64,
    /// Paths merged (their change since the turn kept).
    pub merged: Vec<String>,
}

/// An op with its time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRecord {
    /// Record version ([`HISTORY_VERSION`]).
    pub version: u8,
    /// Unix milliseconds.
    pub time_ms: u64,
    /// What happened.
    pub op: Op,
}

/// Encodes a history record.
///
/// # Errors
/// As [`crate::object::record::to_bytes`].
pub fn encode<T: Serialize>(rec: &T) -> Result<Vec<u8>, String> {
    crate::object::record::to_bytes(rec)
}

/// Decodes a history record, refusing unknown versions and trailing bytes (a record longer
/// than its fields is damaged, not something to read part of).
///
/// # Errors
/// [`DecodeError`] saying what is wrong.
pub fn decode<T: for<'a> Deserialize<'a>>(bytes: &[u8]) -> Result<T, DecodeError> {
    crate::object::record::decode_versioned(bytes, HISTORY_VERSION, "history record")
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
