//! The requests that read history by path and by entry, for serve and MCP: a file's
//! history, one entry in full, a file's lines by turn.

use rmcp::schemars::{self, JsonSchema};
use serde::{Deserialize, Serialize};

use super::{Context, OpError, Operation};
use crate::history::blame::Blame;
use crate::history::inspect::{Among, EntryDetail, FileLogEntry};

/// Whose turns to look at: `this_session_only`, else every session of the workspace.
fn among(this_session_only: Option<bool>) -> Among {
    if this_session_only.unwrap_or(false) {
        Among::ThisSession
    } else {
        Among::AllSessions
    }
}

/// The turns and checkpoints that changed a file (or any file below a directory), newest
/// first, each with its session, its prompt, its lines added and removed there and the bytes
/// it added to the store.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileHistoryRequest {
    /// A file or directory, relative to the workspace root.
    #[serde(default)]
    pub path: Option<String>,
    /// More files or directories (with `path`, all of them).
    #[serde(default)]
    pub paths: Vec<String>,
    /// At most this many entries, the newest.
    #[serde(default)]
    pub max: Option<usize>,
    /// Only this session's turns and checkpoints (default: every session's).
    #[serde(default)]
    pub this_session_only: Option<bool>,
}

/// What `file_history` answers.
#[derive(Debug, Serialize)]
pub struct FileHistory {
    /// The entries, newest first.
    pub entries: Vec<FileLogEntry>,
}

impl Operation for FileHistoryRequest {
    const METHOD: &'static str = "file_history";
    type Response = FileHistory;

    fn run(self, cx: &mut Context<'_>) -> Result<FileHistory, OpError> {
        let mut paths = self.paths;
        paths.extend(self.path);
        if paths.is_empty() {
            return Err(OpError::InvalidParams(
                "give \"path\" (or \"paths\"): the files whose history to list".into(),
            ));
        }
        let mut entries = cx.session.file_log(&paths, among(self.this_session_only))?;
        entries.truncate(self.max.unwrap_or(usize::MAX));
        Ok(FileHistory { entries })
    }
}

/// One turn or checkpoint in full: its prompt, times, state, the paths it changed with
/// their lines, the bytes it added.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    /// The entry: `turn:N`, `checkpoint:N`, a checkpoint label or a host anchor.
    #[serde(rename = "ref")]
    pub reference: String,
}

impl Operation for ShowRequest {
    const METHOD: &'static str = "show";
    type Response = EntryDetail;

    fn run(self, cx: &mut Context<'_>) -> Result<EntryDetail, OpError> {
        Ok(cx.session.show(&self.reference)?)
    }
}

/// Every line of a file as it is on disk, in ranges, with the turn that wrote it (or
/// `between_turns`, `unsnapshotted`, `before_retrace`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlameRequest {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Only this session's turns (default: every session's).
    #[serde(default)]
    pub this_session_only: Option<bool>,
}

impl Operation for BlameRequest {
    const METHOD: &'static str = "blame";
    type Response = Blame;

    fn run(self, cx: &mut Context<'_>) -> Result<Blame, OpError> {
        Ok(cx
            .session
            .blame(&self.path, among(self.this_session_only))?)
    }
}
