//! A step: one tool call of the session's running turn, begun before the tool runs and
//! ended after it (see [`crate::history`]'s steps).

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use super::{Context, OpError, Operation};
use crate::history::StepInfo;

/// Begins a step of the session's running turn: a tool call that can write in the
/// workspace, reported before the tool runs.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BeginStepRequest {
    /// The tool's name (`bash`, `edit`, `write`…), as the host calls it.
    pub tool: String,
    /// The host's id of the tool call, which its `end_step` names (default none: that end
    /// then ends the newest step still running).
    #[serde(default)]
    pub call: Option<String>,
    /// One line of the call's input: a shell tool's command, an edit tool's file (cut to
    /// 200 bytes).
    #[serde(default)]
    pub summary: Option<String>,
    /// The files an edit tool writes (absolute, or relative to the workspace root); left
    /// out or empty for a shell tool, which may write anything and is captured before and
    /// after it runs when the `step_captures` setting says so.
    #[serde(default)]
    pub files: Option<Vec<String>>,
}

/// Ends the step of a tool call once the tool has run.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndStepRequest {
    /// The id `begin_step` was given (default: the newest step still running).
    #[serde(default)]
    pub call: Option<String>,
}

/// What a step's begin or end recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Whether a step was recorded. False when no turn of the session runs (the call
    /// belongs to no turn), for a subagent's session (its tool calls are its parent's:
    /// report them on the parent's session), for an edit tool whose files all lie outside
    /// the workspace, and for an end that names no running step.
    pub recorded: bool,
    /// The step (`turn`, `step`: `turn:N.K`; `snapshot`: the one taken before it, for a
    /// begin, or after it, for an end, if one was), when one was recorded.
    #[serde(flatten)]
    pub step: Option<StepInfo>,
}

impl From<Option<StepInfo>> for StepReport {
    fn from(step: Option<StepInfo>) -> StepReport {
        StepReport {
            recorded: step.is_some(),
            step,
        }
    }
}

impl Operation for BeginStepRequest {
    const METHOD: &'static str = "begin_step";
    type Response = StepReport;

    fn run(self, cx: &mut Context<'_>) -> Result<StepReport, OpError> {
        let step = cx.session.begin_step(
            self.call.as_deref().unwrap_or_default(),
            &self.tool,
            self.summary.as_deref().unwrap_or_default(),
            &self.files.unwrap_or_default(),
        )?;
        Ok(step.into())
    }
}

impl Operation for EndStepRequest {
    const METHOD: &'static str = "end_step";
    type Response = StepReport;

    fn run(self, cx: &mut Context<'_>) -> Result<StepReport, OpError> {
        let step = cx
            .session
            .end_step(self.call.as_deref().unwrap_or_default())?;
        Ok(step.into())
    }
}
