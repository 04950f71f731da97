//! The turn: begin it, wait for its before-snapshot, mark a round, end it.

use std::time::Duration;

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use super::{Acknowledged, Context, OpError, Operation};
use crate::history::{BeforeStatus, TurnSummary};

/// Begins a turn: its before-snapshot is taken in the background.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BeginTurnRequest {
    /// The conversation node to return to on undo.
    #[serde(default)]
    pub anchor: Option<String>,
    /// The prompt, put back in the host's editor on undo.
    #[serde(default)]
    pub prompt: Option<String>,
}

/// The turn begun.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TurnBegun {
    /// Its number (`turn:N` as an anchor).
    pub turn: u64,
}

impl Operation for BeginTurnRequest {
    const METHOD: &'static str = "begin_turn";
    type Response = TurnBegun;

    fn run(self, cx: &mut Context<'_>) -> Result<TurnBegun, OpError> {
        let turn = cx.session.begin_turn(self.anchor, self.prompt)?;
        let begun = TurnBegun {
            turn: turn.number(),
        };
        *cx.turn = Some(turn);
        Ok(begun)
    }
}

/// Waits for the held turn's before-snapshot.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitBeforeRequest {
    /// How long to wait, in milliseconds (default 60000); too late, the turn will undo the
    /// conversation only.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl WaitBeforeRequest {
    /// A wait of at most `timeout` (to the millisecond).
    #[must_use]
    pub fn for_at_most(timeout: Duration) -> WaitBeforeRequest {
        WaitBeforeRequest {
            timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

impl Operation for WaitBeforeRequest {
    const METHOD: &'static str = "wait_before";
    type Response = BeforeStatus;

    fn run(self, cx: &mut Context<'_>) -> Result<BeforeStatus, OpError> {
        let timeout = Duration::from_millis(self.timeout_ms.unwrap_or(60_000));
        Ok(cx.held_turn()?.wait_before(timeout)?)
    }
}

/// Marks a conversation node inside the held turn (after a tool round, say).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoundRequest {
    /// A conversation node inside the turn. Navigating to it later says which turn it lies
    /// in.
    pub anchor: String,
}

impl Operation for RoundRequest {
    const METHOD: &'static str = "round";
    type Response = Acknowledged;

    fn run(self, cx: &mut Context<'_>) -> Result<Acknowledged, OpError> {
        cx.held_turn()?.round(self.anchor)?;
        Ok(Acknowledged::OK)
    }
}

/// Ends the turn in progress: the held one, else the session's in the store.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndTurnRequest {
    /// The conversation leaf now.
    #[serde(default)]
    pub anchor: Option<String>,
}

impl Operation for EndTurnRequest {
    const METHOD: &'static str = "end_turn";
    type Response = TurnSummary;

    fn run(self, cx: &mut Context<'_>) -> Result<TurnSummary, OpError> {
        match cx.turn.take() {
            Some(t) => Ok(t.end(self.anchor)?),
            None => cx.session.end_turn(self.anchor)?.ok_or(OpError::NoTurn),
        }
    }
}
