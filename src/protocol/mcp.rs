//! `retrace mcp`: model-facing tools over MCP (the official `rmcp` SDK, stdio transport).
//! The model can undo or redo the session's turns, take a checkpoint, and look at the log,
//! a diff, the status, a file's history and a file's lines by turn (blame); each tool
//! answers one line of text (the log, diff, file history and blame a few, cut at 64 KiB). A
//! refusal (conflict, busy, nothing to undo) or failure is a tool result with `isError`.
//!
//! The model calls tools during its own turn: `undo` then puts back the files the running
//! turn has changed so far, and the turn goes on ([`Session::undo_running_turn`]); with no
//! turn running it undoes the newest applied turn.
//!
//! Each tool runs one operation of [`super::ops`] (`undo` is
//! [`ops::UndoRunningTurnRequest`]) and formats its response as the tool's text; a tool
//! whose operation has parameters takes its request struct as `Parameters`, so their schema
//! (the doc comments of its fields) is the one the client sees. `redo`, `log` and `status`
//! take no parameters: they declare none and run with the request's defaults.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerInfo};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};

use super::ops::{self, Context, OpError, Operation, OutcomeReport};
use crate::history::Session;

/// The MCP server: one session of one workspace.
#[derive(Clone)]
pub struct McpServer {
    session: Session,
    tool_router: ToolRouter<Self>,
}

/// A failure as a tool result.
fn failed(e: &OpError) -> String {
    format!("retrace failed: {e}")
}

/// An outcome as a tool result: its message, an error result unless it did what was asked.
fn outcome(r: Result<OutcomeReport, OpError>) -> Result<String, String> {
    match r {
        Ok(OutcomeReport(o)) if o.is_success() => Ok(o.message()),
        Ok(OutcomeReport(o)) => Err(o.message()),
        Err(e) => Err(failed(&e)),
    }
}

#[tool_router]
impl McpServer {
    /// A server for `session`.
    #[must_use]
    pub fn new(session: Session) -> McpServer {
        McpServer {
            session,
            tool_router: Self::tool_router(),
        }
    }

    /// Runs `request` on the session (no turn held: the model's turn is the host's).
    fn run<O: Operation>(&self, request: O) -> Result<O::Response, OpError> {
        let mut turn = None;
        request.run(&mut Context::new(&self.session, &mut turn))
    }

    /// Undo: during the running turn, its file changes so far; else the newest applied turn.
    #[tool(
        description = "Undo file changes. While your turn is running: put back every file this turn has changed so far (the turn goes on; the files as they were are kept in a safety snapshot). Otherwise: undo the newest finished turn. Edits made since are never overwritten; a conflict is reported instead. mode: both (default), files, or conversation (not during a running turn)."
    )]
    async fn undo(
        &self,
        Parameters(request): Parameters<ops::UndoRunningTurnRequest>,
    ) -> Result<String, String> {
        outcome(self.run(request))
    }

    /// Re-apply the most recently undone turn.
    #[tool(description = "Re-apply the most recently undone turn, in the mode its undo used.")]
    async fn redo(&self) -> Result<String, String> {
        outcome(self.run(ops::RedoRequest::default()))
    }

    /// Revert one past turn, keeping every later change.
    #[tool(
        description = "Revert one earlier turn (its number from `log`), or one tool call of it (`step`, K of `turn:N.K`), keeping every later change: files changed since are merged when the changes touch other lines, otherwise nothing is written and the conflicting files are named. Called while your turn runs, the revert becomes part of this turn. The user can undo it."
    )]
    async fn revert(
        &self,
        Parameters(request): Parameters<ops::RevertInRunningTurnRequest>,
    ) -> Result<String, String> {
        outcome(self.run(request))
    }

    /// Save the workspace's files now, outside any turn.
    #[tool(description = "Save the workspace's files now as a labelled checkpoint.")]
    async fn checkpoint(
        &self,
        Parameters(request): Parameters<ops::CheckpointRequest>,
    ) -> Result<String, String> {
        outcome(self.run(request))
    }

    /// The session's turns, newest first.
    #[tool(
        description = "List this conversation's turns and checkpoints, newest first, with what each changed (+added ~modified -deleted); `steps: true` adds each turn's tool calls (turn:N.K, which `revert` takes as `turn` N, `step` K)."
    )]
    async fn log(
        &self,
        Parameters(request): Parameters<ops::LogRequest>,
    ) -> Result<String, String> {
        let l = self.run(request).map_err(|e| failed(&e))?;
        let mut lines = vec![format!(
            "{} turn(s); can undo: {}; can redo: {}",
            l.status.turns, l.status.can_undo, l.status.can_redo
        )];
        for e in l.entries.iter().take(20) {
            let t = e.text.as_deref().unwrap_or("").lines().next().unwrap_or("");
            lines.push(format!(
                "{}:{} +{} ~{} -{} {t}",
                e.kind, e.number, e.counts.added, e.counts.modified, e.counts.deleted
            ));
            for st in &e.steps {
                let what = match st.counts {
                    Some(c) => format!("+{} ~{} -{}", c.added, c.modified, c.deleted),
                    None => format!("~ {}", st.files.join(", ")),
                };
                let summary = st.summary.lines().next().unwrap_or("");
                lines.push(format!(
                    "  turn:{}.{} {} {what} {summary}",
                    e.number, st.number, st.tool
                ));
            }
        }
        Ok(lines.join("\n"))
    }

    /// Paths changed between two snapshots, or since the last known state.
    #[tool(
        description = "Paths added (A), modified (M) and deleted (D) since the last known state, or between two snapshots; `paths` limits it to files or directories, `patch: true` adds unified diffs (cut at 64 KiB)."
    )]
    async fn diff(
        &self,
        Parameters(request): Parameters<ops::DiffRequest>,
    ) -> Result<String, String> {
        let d = match self.run(request) {
            Ok(d) => d,
            Err(OpError::NoSnapshot) => return Ok("no snapshot yet".into()),
            Err(e) => return Err(failed(&e)),
        };
        let mut lines: Vec<String> = d.diff.added.iter().map(|p| format!("A {p}")).collect();
        lines.extend(d.diff.modified.iter().map(|p| format!("M {p}")));
        lines.extend(d.diff.deleted.iter().map(|p| format!("D {p}")));
        if lines.is_empty() {
            return Ok("no changes".into());
        }
        let mut out = lines.join("\n");
        if let Some(patches) = d.patches {
            out.push('\n');
            let text: String = patches.iter().map(|p| p.text.as_str()).collect();
            out.push_str(&cap_patch(&text, PATCH_CAP));
        }
        Ok(out)
    }

    /// The turns and checkpoints that changed a file.
    #[tool(
        description = "The history of a file (or of the files below a directory): the turns and checkpoints that changed it, newest first, every session's unless `this_session_only`, each with its session, time, lines added and removed there, the bytes it added to the store and its prompt's first line."
    )]
    async fn file_history(
        &self,
        Parameters(request): Parameters<ops::FileHistoryRequest>,
    ) -> Result<String, String> {
        let h = self.run(request).map_err(|e| failed(&e))?;
        if h.entries.is_empty() {
            return Ok("no turn or checkpoint changed it".into());
        }
        let text = crate::history::inspect::file_log_text(&h.entries);
        Ok(cap_text(
            &text,
            TEXT_CAP,
            "history",
            "give `max` for fewer entries",
        ))
    }

    /// Every line of a file with the turn that wrote it.
    #[tool(
        description = "Blame a file by agent turn: every line of the file as it is on disk now, with the turn that wrote it (session, time, prompt), or `between turns` (edited outside a turn), `unsnapshotted` (in no snapshot yet) or `before retrace`."
    )]
    async fn blame(
        &self,
        Parameters(request): Parameters<ops::BlameRequest>,
    ) -> Result<String, String> {
        let b = self.run(request).map_err(|e| failed(&e))?;
        Ok(cap_text(
            &b.text(),
            TEXT_CAP,
            "blame",
            "the rest of the file is left out",
        ))
    }

    /// Whether undo and redo are possible.
    #[tool(description = "Whether undo and redo are possible, and which turn is applied.")]
    async fn status(&self) -> Result<String, String> {
        let s = self.run(ops::StatusRequest {}).map_err(|e| failed(&e))?;
        Ok(format!(
            "can undo: {}; can redo: {}; applied turn: {}; turns: {}{}",
            s.can_undo,
            s.can_redo,
            s.cursor.map_or_else(|| "none".into(), |c| c.to_string()),
            s.turns,
            s.pending
                .map_or_else(String::new, |p| format!("; turn {p} in progress"))
        ))
    }
}

/// The most patch text a `diff` tool answer carries.
const PATCH_CAP: usize = 64 * 1024;

/// The most text a `file_history` or `blame` tool answer carries.
const TEXT_CAP: usize = 64 * 1024;

/// `text` cut at a line boundary under `cap` bytes, saying how much was left out.
fn cap_patch(text: &str, cap: usize) -> String {
    cap_text(text, cap, "patch", "give `paths` to see the rest")
}

/// `text` cut at a line boundary under `cap` bytes, saying that the `what` was cut, how much
/// was left out, and `hint`.
fn cap_text(text: &str, cap: usize, what: &str, hint: &str) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let cut = text[..text.floor_char_boundary(cap)]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    format!(
        "{}[{what} cut at {} KiB: {} more bytes; {hint}]",
        &text[..cut],
        cap / 1024,
        text.len() - cut
    )
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("retrace", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "retrace: undo, redo and checkpoint this workspace's files by agent turn",
            )
    }
}

/// Serves `session` over MCP on stdin/stdout until the client disconnects.
///
/// # Errors
/// A message when the transport fails.
pub fn run(session: Session) -> Result<(), String> {
    // Maintenance on a timer while the server runs; stopped before the store is closed.
    let _maintainer = crate::maintainer::start(session.workspace(), None);
    // Captures look only at what changed while the server runs (see `crate::watch`).
    let _watcher = crate::watch::host(session.workspace().watch_spec());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let (input, output, screen) = screened_stdio();
        let service = McpServer::new(session)
            .serve((input, output))
            .await
            .map_err(|e| e.to_string())?;
        let waited = service.waiting().await.map_err(|e| e.to_string());
        // Every answer the SDK wrote reaches stdout before the process exits.
        screen.input.abort();
        let _ = screen.output.await;
        waited.map(|_| ())
    })
}

/// The invalid-params answer to a `tools/call` line whose `arguments` is neither an object
/// nor null (`"arguments": []`), which the SDK cannot parse as a call at all and would
/// answer "method not found"; None for every other line.
fn invalid_arguments(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("method")? != "tools/call" {
        return None;
    }
    let args = v.get("params")?.get("arguments")?;
    if args.is_object() || args.is_null() {
        return None;
    }
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": v.get("id")?, "error": {
        "code": -32602,
        "message": format!("invalid params: \"arguments\" must be an object (got {args})")}});
    Some(answer.to_string())
}

/// The tasks between the process's stdio and the SDK's.
struct Screen {
    /// Reads stdin.
    input: tokio::task::JoinHandle<()>,
    /// Writes stdout; ends once the SDK's output and the input task are done.
    output: tokio::task::JoinHandle<()>,
}

/// Stdin and stdout for the SDK, with lines [`invalid_arguments`] answers screened out of
/// the input and answered on the output (between the SDK's own lines, never inside one).
fn screened_stdio() -> (tokio::io::DuplexStream, tokio::io::DuplexStream, Screen) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (sdk_in, mut feed) = tokio::io::duplex(1 << 16);
    let (sdk_out, from_sdk) = tokio::io::duplex(1 << 16);
    let (lines, mut to_stdout) = tokio::sync::mpsc::unbounded_channel::<String>();
    let answers = lines.clone();
    let input = tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = stdin.next_line().await {
            if let Some(answer) = invalid_arguments(&line) {
                let _ = answers.send(answer);
            } else {
                let line = line + "\n";
                if feed.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        }
        // End of input reaches the SDK: it shuts down as with plain stdio.
        let _ = feed.shutdown().await;
    });
    tokio::spawn(async move {
        let mut out = BufReader::new(from_sdk).lines();
        while let Ok(Some(line)) = out.next_line().await {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let output = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = to_stdout.recv().await {
            let line = line + "\n";
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    (sdk_in, sdk_out, Screen { input, output })
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
