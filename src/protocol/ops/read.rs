//! Reading the session: status, log, diff.

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use super::{Context, OpError, Operation};
use crate::diff::Diff;
use crate::history::{SessionLog, SessionStatus};
use crate::patch::FilePatch;

/// The session's state: whether undo and redo are possible, which turn is applied.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {}

impl Operation for StatusRequest {
    const METHOD: &'static str = "status";
    type Response = SessionStatus;

    fn run(self, cx: &mut Context<'_>) -> Result<SessionStatus, OpError> {
        Ok(cx.session.status()?)
    }
}

/// The session's turns and checkpoints, newest first, with its status.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRequest {
    /// Also each turn's steps, its tool calls (`turn:N.K`), as `retrace log --steps` lists
    /// them.
    #[serde(default)]
    pub steps: Option<bool>,
}

impl Operation for LogRequest {
    const METHOD: &'static str = "log";
    type Response = SessionLog;

    fn run(self, cx: &mut Context<'_>) -> Result<SessionLog, OpError> {
        Ok(if self.steps.unwrap_or(false) {
            cx.session.log_with_steps()?
        } else {
            cx.session.log()?
        })
    }
}

/// The paths changed between two snapshots, or since the session's last known state.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// Snapshot id or prefix to compare from (default: the last known state).
    #[serde(default)]
    pub from: Option<String>,
    /// Snapshot id or prefix to compare to (default: the files on disk now).
    #[serde(default)]
    pub to: Option<String>,
    /// Only these files or directories (workspace-relative); all when empty.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Also the unified diff of each changed file (`patches`).
    #[serde(default)]
    pub patch: bool,
}

/// What `diff` answers: the changed paths, and with `patch` each file's unified diff.
#[derive(Debug, Serialize)]
pub struct DiffResponse {
    /// Added, modified and deleted paths.
    #[serde(flatten)]
    pub diff: Diff,
    /// The unified diffs, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<FilePatch>>,
}

impl Operation for DiffRequest {
    const METHOD: &'static str = "diff";
    type Response = DiffResponse;

    fn run(self, cx: &mut Context<'_>) -> Result<DiffResponse, OpError> {
        let ws = cx.session.workspace();
        let from = match &self.from {
            Some(f) => crate::retention::resolve_snapshot(ws, f)?,
            None => cx.session.status()?.last_known.ok_or(OpError::NoSnapshot)?,
        };
        let to = self
            .to
            .as_deref()
            .map(|t| crate::retention::resolve_snapshot(ws, t))
            .transpose()?;
        let diff = ws.diff(&from, to.as_ref())?.restricted_to(&self.paths);
        let patches = if self.patch {
            Some(ws.patches(Some(&from), to.as_ref(), &self.paths)?)
        } else {
            None
        };
        Ok(DiffResponse { diff, patches })
    }
}
