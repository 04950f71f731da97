//! The requests `serve` runs on its own table of sessions: open, shutdown.

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use crate::history::SessionStatus;

/// `serve`'s `open`: opens a session of a workspace in the server (the same handle when it
/// is open already).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    /// A directory. The workspace that holds it is opened (`root` in the answer).
    pub workspace: String,
    /// The agent's session id. Sessions are isolated: own turns, cursor and redo stack.
    pub session: String,
    /// Whether it is a subagent's session (it captures nothing and keeps no history).
    #[serde(default)]
    pub subagent: Option<bool>,
    /// The agent (`pi`, `omp`, …), kept with the session's name for `retrace sessions`.
    #[serde(default)]
    pub agent: Option<String>,
}

impl OpenRequest {
    /// Its method name.
    pub const METHOD: &'static str = "open";
}

/// The session `open` opened.
#[derive(Debug, Serialize)]
pub struct Opened {
    /// The handle that names it in the other requests.
    pub session: String,
    /// The workspace root.
    pub root: String,
    /// Its status.
    pub status: SessionStatus,
    /// The workspace's warnings (see [`crate::Workspace::warnings`]).
    pub warnings: Vec<String>,
}

/// `serve`'s `shutdown`: answers, then the server finishes pending work and exits.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownRequest {}

impl ShutdownRequest {
    /// Its method name.
    pub const METHOD: &'static str = "shutdown";
}
