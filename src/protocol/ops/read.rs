//! Reading the session: status, log, diff.

use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;

use super::{Context, OpError, Operation};
use crate::diff::Diff;
use crate::history::{SessionLog, SessionStatus};

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
pub struct LogRequest {}

impl Operation for LogRequest {
    const METHOD: &'static str = "log";
    type Response = SessionLog;

    fn run(self, cx: &mut Context<'_>) -> Result<SessionLog, OpError> {
        Ok(cx.session.log()?)
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
}

impl Operation for DiffRequest {
    const METHOD: &'static str = "diff";
    type Response = Diff;

    fn run(self, cx: &mut Context<'_>) -> Result<Diff, OpError> {
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
        Ok(ws.diff(&from, to.as_ref())?)
    }
}
