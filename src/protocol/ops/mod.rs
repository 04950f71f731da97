//! The operations the process interfaces share: one typed request per operation, its
//! response, and the code that runs it against the library, used by `retrace serve`
//! ([`super::serve`]), the MCP tools ([`super::mcp`]) and the agent hooks ([`super::hooks`]).
//!
//! A request is a `serde`-derived struct (its fields are the operation's parameters, by
//! name; unknown names are refused) that also derives [`JsonSchema`]: its field doc
//! comments are the parameter descriptions MCP clients show, and `serve` names a missing
//! required parameter with the first sentence of its doc comment. Each implements
//! [`Operation`]: its method name, its response type (`Serialize`: what `serve` answers as
//! the JSON-RPC result) and [`Operation::run`], which runs it in a [`Context`] (the session,
//! the turn the front-end holds, a progress sink). A refusal (conflict, busy, nothing to
//! undo) is a response ([`OutcomeReport`]); a failure is an [`OpError`], which each
//! front-end reports its own way.
//!
//! | operation | request | response | serve | mcp | hooks |
//! |-----------|---------|----------|-------|-----|-------|
//! | begin a turn | [`BeginTurnRequest`] | `TurnBegun` | `begin_turn` | | prompt |
//! | wait for its before-snapshot | [`WaitBeforeRequest`] | [`BeforeStatus`] | `wait_before` | | prompt |
//! | mark a round | [`RoundRequest`] | [`Acknowledged`] | `round` | | |
//! | end the turn | [`EndTurnRequest`] | [`TurnSummary`] | `end_turn` | | stop |
//! | begin a step (a tool call) | [`BeginStepRequest`] | [`StepReport`] | `begin_step` | | tool start |
//! | end a step | [`EndStepRequest`] | [`StepReport`] | `end_step` | | tool end |
//! | undo | [`UndoRequest`] | [`OutcomeReport`] | `undo` | | `/undo` |
//! | undo, the running turn first | [`UndoRunningTurnRequest`] | [`OutcomeReport`] | | `undo` | |
//! | redo | [`RedoRequest`] | [`OutcomeReport`] | `redo` | `redo` | `/redo` |
//! | checkpoint | [`CheckpointRequest`] | [`OutcomeReport`] | `checkpoint` | `checkpoint` | `/checkpoint` |
//! | navigate | [`NavigateRequest`] | [`OutcomeReport`] | `navigate` | | |
//! | revert a past turn | [`RevertRequest`] | `RevertResponse` | `revert` | | `/revert N` |
//! | revert, within the running turn | [`RevertInRunningTurnRequest`] | [`OutcomeReport`] | | `revert` | |
//! | restore some paths | [`RestorePathsRequest`] | [`crate::working_copy::DryRun`] | `restore_paths` | | |
//! | status | [`StatusRequest`] | [`SessionStatus`] | `status` | `status` | |
//! | log | [`LogRequest`] | [`SessionLog`] | `log` | `log` | `/retrace-log` |
//! | diff | [`DiffRequest`] | [`Diff`] | `diff` | `diff` | |
//! | a file's history | [`FileHistoryRequest`] | `FileHistory` | `file_history` | `file_history` | |
//! | one entry in full | [`ShowRequest`] | [`EntryDetail`] | `show` | | |
//! | lines by turn | [`BlameRequest`] | [`Blame`] | `blame` | `blame` | |
//!
//! `serve` also takes [`OpenRequest`] (answered with [`Opened`]) and [`ShutdownRequest`]:
//! they act on the server's own table of sessions, not on a session, so `serve` runs them.
//!
//! # Adding an operation
//!
//! 1. Here: the request struct (`#[derive(Deserialize, JsonSchema)]`,
//!    `#[serde(deny_unknown_fields)]`, a doc comment on every field), its response type, and
//!    `impl Operation` with the method name and `run` (calls of public [`Session`] and
//!    [`crate::Workspace`] methods only). An optional parameter is an `Option` with
//!    `#[serde(default)]`; a required one is not, and the first sentence of its doc comment
//!    says what it is. The requests are grouped by what they touch, one file each: the
//!    turn (begin, wait, round, end), its steps (begin, end), history (undo, redo, checkpoint, navigate), reading
//!    (status, log, diff), inspecting (file history, show, blame), and the server's own
//!    (open, shutdown).
//! 2. `serve`: one line in its method table, `method::<ops::NewRequest>()`; it then reads
//!    and checks the parameters (every -32602 answer naming the parameter), finds the
//!    session, runs the operation and answers its response as JSON. Document the method in
//!    `docs/protocol.md`.
//! 3. `mcp`: a `#[tool]` method taking `Parameters<ops::NewRequest>` (or no parameters, when
//!    the request has none) that runs it and formats the response as the tool's text.
//! 4. A hook that needs it builds the request and runs it in a [`Context`]: `/undo` is
//!    [`UndoRequest`] in mode `files`, a prompt is [`BeginTurnRequest`] then
//!    [`WaitBeforeRequest`] with the hook's deadline.

mod history;
mod inspect;
mod read;
mod server;
mod step;
mod turn;

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

pub use history::{
    CheckpointRequest, NavigateRequest, RedoRequest, RestorePathsRequest, RevertResponse,
    RevertInRunningTurnRequest, RevertRequest, UndoRequest, UndoRunningTurnRequest,
};
pub use inspect::{BlameRequest, FileHistoryRequest, ShowRequest};
pub use read::{DiffRequest, LogRequest, StatusRequest};
pub use server::{OpenRequest, Opened, ShutdownRequest};
pub use step::{BeginStepRequest, EndStepRequest, StepReport};
pub use turn::{BeginTurnRequest, EndTurnRequest, RoundRequest, WaitBeforeRequest};

use crate::Error;
#[cfg(doc)]
use crate::diff::Diff;
#[cfg(doc)]
use crate::history::blame::Blame;
#[cfg(doc)]
use crate::history::inspect::EntryDetail;
#[cfg(doc)]
use crate::history::{BeforeStatus, SessionLog, SessionStatus, TurnSummary};
use crate::history::{Mode, OpOptions, Outcome, Report, Session, Turn};
use crate::progress::{NoProgress, Progress};

/// Where an operation runs: the session, the turn in progress the front-end holds, and
/// where long operations report progress.
pub struct Context<'a> {
    /// The session the operation acts on.
    pub session: &'a Session,
    /// The turn this front-end began and holds in memory (`serve` keeps it between
    /// requests; a hook for one event): a turn in progress of the session that is not held
    /// here is ended from the store.
    pub turn: &'a mut Option<Turn>,
    /// Receives the progress of scans and writes.
    pub progress: &'a dyn Progress,
}

impl<'a> Context<'a> {
    /// A context for `session` holding `turn`, reporting no progress.
    pub fn new(session: &'a Session, turn: &'a mut Option<Turn>) -> Context<'a> {
        Context {
            session,
            turn,
            progress: &NoProgress,
        }
    }

    /// This context reporting progress to `progress`.
    #[must_use]
    pub fn with_progress(self, progress: &'a dyn Progress) -> Context<'a> {
        Context { progress, ..self }
    }

    fn options(&self, force: Option<bool>) -> OpOptions<'a> {
        OpOptions {
            force: force.unwrap_or(false),
            progress: self.progress,
        }
    }

    fn held_turn(&self) -> Result<&Turn, OpError> {
        self.turn.as_ref().ok_or(OpError::NoTurn)
    }
}

/// Why an operation did not run to a response.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The library failed; its message says why and what to do.
    #[error(transparent)]
    Failed(#[from] Error),
    /// The session has no turn in progress to wait for, mark or end.
    #[error("no turn in progress")]
    NoTurn,
    /// A diff from the last known state, and the session knows none yet.
    #[error("no snapshot to compare with yet")]
    NoSnapshot,
    /// The parameters do not make a request (the message says which to give).
    #[error("invalid params: {0}")]
    InvalidParams(String),
}

impl From<crate::error::RestoreError> for OpError {
    fn from(e: crate::error::RestoreError) -> OpError {
        OpError::Failed(e.into())
    }
}

/// An operation: a request that runs against the library and answers `Response`.
pub trait Operation: serde::de::DeserializeOwned + JsonSchema {
    /// Its method name in `retrace serve` (`docs/protocol.md`).
    const METHOD: &'static str;
    /// What it answers (`serve`'s JSON-RPC result).
    type Response: Serialize;

    /// Runs it in `cx`.
    ///
    /// # Errors
    /// [`OpError`] when it does not run to a response.
    fn run(self, cx: &mut Context<'_>) -> Result<Self::Response, OpError>;
}

/// What an undo, redo or navigation restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UndoMode {
    /// Files and conversation (the host moves the conversation back).
    Both,
    /// Files only.
    Files,
    /// The conversation only; files stay as they are.
    Conversation,
}

impl UndoMode {
    /// The library's mode.
    pub(crate) fn mode(self) -> Mode {
        match self {
            UndoMode::Both => Mode::Both,
            UndoMode::Files => Mode::Files,
            UndoMode::Conversation => Mode::Conversation,
        }
    }
}

/// `mode`, [`Mode::Both`] when absent.
fn mode(m: Option<UndoMode>) -> Mode {
    m.map_or(Mode::Both, UndoMode::mode)
}

/// The schema of `mode`: a plain string enum, which every MCP client reads.
fn mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["both", "files", "conversation"],
        "description": "both (default: files and conversation), files, or conversation; \
                        during a running turn only files are put back"
    })
}

/// The answer of an operation that has nothing more to say: `{"ok": true}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Acknowledged {
    /// Always true.
    pub ok: bool,
}

impl Acknowledged {
    /// `{"ok": true}`.
    pub const OK: Acknowledged = Acknowledged { ok: true };
}

/// The answer of undo, redo, navigate and checkpoint: the [`Outcome`], serialized as its
/// [`Report`] (the outcome's fields tagged by `result`, its `message` and `ok`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeReport(pub Outcome);

impl Serialize for OutcomeReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Report::from(&self.0).serialize(s)
    }
}

fn outcome(r: Result<Outcome, Error>) -> Result<OutcomeReport, OpError> {
    Ok(OutcomeReport(r?))
}
