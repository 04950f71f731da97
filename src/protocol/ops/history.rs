//! Moves in the session's history: undo, redo, checkpoint, navigate.

use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;

use super::{Context, OpError, Operation, OutcomeReport, UndoMode, mode, mode_schema, outcome};

/// Undoes the newest applied turn.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    /// `both` (default: files and conversation), `files`, or `conversation`.
    #[serde(default)]
    #[schemars(schema_with = "mode_schema")]
    pub mode: Option<UndoMode>,
    /// Overwrite conflicting or unsnapshotted edits (a safety snapshot keeps them first).
    #[serde(default)]
    pub force: Option<bool>,
}

impl Operation for UndoRequest {
    const METHOD: &'static str = "undo";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        let opts = cx.options(self.force);
        outcome(cx.session.undo_with(mode(self.mode), opts))
    }
}

/// Undo as the model asks for it during its own turn: the running turn's file changes so
/// far (the turn goes on), else the newest applied turn; never forced.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRunningTurnRequest {
    /// `both` (default: files and conversation), `files`, or `conversation`. During a
    /// running turn only files are put back.
    #[serde(default)]
    #[schemars(schema_with = "mode_schema")]
    pub mode: Option<UndoMode>,
}

impl Operation for UndoRunningTurnRequest {
    const METHOD: &'static str = "undo_running_turn";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        let opts = cx.options(None);
        outcome(cx.session.undo_running_turn(mode(self.mode), opts))
    }
}

/// Re-applies the most recently undone turn, in the mode its undo used.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedoRequest {
    /// Overwrite conflicting or unsnapshotted edits (a safety snapshot keeps them first).
    #[serde(default)]
    pub force: Option<bool>,
}

impl Operation for RedoRequest {
    const METHOD: &'static str = "redo";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        let opts = cx.options(self.force);
        outcome(cx.session.redo_with(opts))
    }
}

/// Saves the workspace's files now, outside any turn, as a checkpoint.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// A label to find it by later.
    #[serde(default)]
    pub label: Option<String>,
}

impl Operation for CheckpointRequest {
    const METHOD: &'static str = "checkpoint";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        outcome(cx.session.checkpoint_with(self.label, cx.progress))
    }
}

/// Restores the snapshot recorded at an anchor.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateRequest {
    /// A host anchor, turn:N, turn:N:before, checkpoint:N or a label.
    pub anchor: String,
    /// `both` (default: files and conversation), `files`, or `conversation`.
    #[serde(default)]
    #[schemars(schema_with = "mode_schema")]
    pub mode: Option<UndoMode>,
    /// Overwrite conflicting or unsnapshotted edits (a safety snapshot keeps them first).
    #[serde(default)]
    pub force: Option<bool>,
}

impl Operation for NavigateRequest {
    const METHOD: &'static str = "navigate";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        let opts = cx.options(self.force);
        outcome(
            cx.session
                .navigate_with(&self.anchor, mode(self.mode), opts),
        )
    }
}
