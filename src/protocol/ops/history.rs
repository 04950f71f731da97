//! Moves in the session's history: undo, redo, checkpoint, navigate, revert, and restoring
//! some paths of a snapshot.

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

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

/// Reverts one past turn of the session, keeping every later change (paths changed since
/// are merged when the changes touch other lines; otherwise the revert is refused as a
/// conflict). Undo undoes the revert, redo redoes it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevertRequest {
    /// The number of the turn to revert (`turn:N` in `log`).
    pub turn: u64,
    /// One step of it alone (`turn:N.K` in `log --steps`): what that tool call changed.
    #[serde(default)]
    pub step: Option<u64>,
    /// Take the turn's before-version where a path conflicts (a safety snapshot keeps the
    /// disk first).
    #[serde(default)]
    pub force: Option<bool>,
    /// Only say what would be written, merged and what conflicts (and why).
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// What `revert` answers: the outcome, or with `dry_run` the preview.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RevertResponse {
    /// The revert ran (or was refused): its outcome report.
    Done(OutcomeReport),
    /// What it would do.
    Preview(crate::history::RevertPreview),
}

impl Operation for RevertRequest {
    const METHOD: &'static str = "revert";
    type Response = RevertResponse;

    fn run(self, cx: &mut Context<'_>) -> Result<RevertResponse, OpError> {
        let opts = cx.options(self.force);
        let s = &cx.session;
        if self.dry_run.unwrap_or(false) {
            return Ok(RevertResponse::Preview(match self.step {
                Some(k) => s.revert_step_dry_run(self.turn, k, opts)?,
                None => s.revert_dry_run(self.turn, opts)?,
            }));
        }
        Ok(RevertResponse::Done(outcome(match self.step {
            Some(k) => s.revert_step(self.turn, k, opts),
            None => s.revert(self.turn, opts),
        })?))
    }
}

/// Restores only some files or directories of a snapshot; everything else on disk is
/// untouched, and the guard against overwriting unsnapshotted edits covers only those paths.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestorePathsRequest {
    /// The snapshot: turn:N, turn:N:before, checkpoint:N, a label, or a snapshot id.
    pub snapshot: String,
    /// The files or directories to restore (workspace-relative).
    pub paths: Vec<String>,
    /// Overwrite unsnapshotted edits of those paths (a safety snapshot keeps them first).
    #[serde(default)]
    pub force: Option<bool>,
    /// Only say what would be written and deleted, and whether it would be refused.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl Operation for RestorePathsRequest {
    const METHOD: &'static str = "restore_paths";
    type Response = crate::working_copy::DryRun;

    fn run(self, cx: &mut Context<'_>) -> Result<crate::working_copy::DryRun, OpError> {
        let ws = cx.session.workspace();
        let id = match cx.session.snapshot_at(&self.snapshot) {
            Ok(id) => id,
            Err(crate::Error::Anchor { .. }) => {
                crate::retention::resolve_snapshot(ws, &self.snapshot)?
            }
            Err(e) => return Err(e.into()),
        };
        let force = self.force.unwrap_or(false);
        if self.dry_run.unwrap_or(false) {
            return Ok(cx
                .session
                .restore_paths_dry_run(&id, &self.paths, force, cx.progress)?);
        }
        let opts = crate::working_copy::RestoreOptions {
            force,
            dry_run: false,
        };
        let outcome = cx
            .session
            .restore_paths(&id, &self.paths, opts, cx.progress)?;
        Ok(crate::working_copy::DryRun {
            outcome,
            refused: None,
        })
    }
}

/// Revert as the model asks for it during its own turn: the revert's changes become part of
/// the running turn (undoing that turn undoes them too); with no turn running, a revert of
/// its own. Never forced.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevertInRunningTurnRequest {
    /// The number of the turn to revert (`turn:N` in `log`).
    pub turn: u64,
    /// One step of it alone (`turn:N.K` in `log`): what that tool call changed.
    #[serde(default)]
    pub step: Option<u64>,
}

impl Operation for RevertInRunningTurnRequest {
    const METHOD: &'static str = "revert_in_running_turn";
    type Response = OutcomeReport;

    fn run(self, cx: &mut Context<'_>) -> Result<OutcomeReport, OpError> {
        let opts = cx.options(None);
        outcome(match self.step {
            Some(k) => cx.session.revert_step_in_running_turn(self.turn, k, opts),
            None => cx.session.revert_in_running_turn(self.turn, opts),
        })
    }
}
