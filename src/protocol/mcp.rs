//! `retrace mcp`: model-facing tools over MCP (the official `rmcp` SDK, stdio transport).
//! The model can undo or redo the session's turns, take a checkpoint, and look at the log,
//! a diff and the status; each tool answers one line of text (the log and diff a few).

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerInfo};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::history::{Mode, Session};

/// Arguments of `undo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct UndoArgs {
    /// `both` (default: files and conversation), `files`, or `conversation`.
    #[serde(default)]
    pub mode: Option<String>,
}

/// Arguments of `checkpoint`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CheckpointArgs {
    /// A label to find it by later.
    #[serde(default)]
    pub label: Option<String>,
}

/// Arguments of `diff`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DiffArgs {
    /// Snapshot id or prefix to compare from (default: the last known state).
    #[serde(default)]
    pub from: Option<String>,
    /// Snapshot id or prefix to compare to (default: the files on disk now).
    #[serde(default)]
    pub to: Option<String>,
}

/// The MCP server: one session of one workspace.
#[derive(Clone)]
pub struct McpServer {
    session: Session,
    tool_router: ToolRouter<Self>,
}

fn text<E: std::fmt::Display>(r: Result<String, E>) -> String {
    r.unwrap_or_else(|e| format!("retrace failed: {e}"))
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

    /// Undo the newest applied turn of this conversation: put back the files it changed.
    #[tool(
        description = "Undo the newest applied turn: put back every file it changed (edits made since are never overwritten; a conflict is reported instead). mode: both (default), files, or conversation."
    )]
    async fn undo(&self, Parameters(args): Parameters<UndoArgs>) -> String {
        let mode = match args.mode.as_deref().map(str::parse::<Mode>) {
            None => Mode::Both,
            Some(Ok(m)) => m,
            Some(Err(e)) => return e,
        };
        text(self.session.undo(mode).map(|o| o.message()))
    }

    /// Re-apply the most recently undone turn.
    #[tool(description = "Re-apply the most recently undone turn, in the mode its undo used.")]
    async fn redo(&self) -> String {
        text(self.session.redo().map(|o| o.message()))
    }

    /// Save the workspace's files now, outside any turn.
    #[tool(description = "Save the workspace's files now as a labelled checkpoint.")]
    async fn checkpoint(&self, Parameters(args): Parameters<CheckpointArgs>) -> String {
        text(self.session.checkpoint(args.label).map(|o| o.message()))
    }

    /// The session's turns, newest first.
    #[tool(
        description = "List this conversation's turns and checkpoints, newest first, with what each changed (+added ~modified -deleted)."
    )]
    async fn log(&self) -> String {
        text(self.session.log().map(|l| {
            let mut lines = vec![format!(
                "{} turn(s); can undo: {}; can redo: {}",
                l.status.turns, l.status.can_undo, l.status.can_redo
            )];
            for e in l.entries.iter().rev().take(20) {
                let t = e.text.as_deref().unwrap_or("").lines().next().unwrap_or("");
                lines.push(format!(
                    "{}:{} +{} ~{} -{} {t}",
                    e.kind, e.number, e.counts[0], e.counts[1], e.counts[2]
                ));
            }
            lines.join("\n")
        }))
    }

    /// Paths changed between two snapshots, or since the last known state.
    #[tool(
        description = "Paths added (A), modified (M) and deleted (D) since the last known state, or between two snapshots."
    )]
    async fn diff(&self, Parameters(args): Parameters<DiffArgs>) -> String {
        let ws = self.session.workspace();
        let run = || -> Result<String, crate::Error> {
            let from = match &args.from {
                Some(f) => ws.resolve(f)?,
                None => match self.session.status()?.last_known {
                    Some(k) => k,
                    None => return Ok("no snapshot yet".into()),
                },
            };
            let to = args.to.as_deref().map(|t| ws.resolve(t)).transpose()?;
            let d = ws.diff(&from, to.as_ref())?;
            let mut lines: Vec<String> = d.added.iter().map(|p| format!("A {p}")).collect();
            lines.extend(d.modified.iter().map(|p| format!("M {p}")));
            lines.extend(d.deleted.iter().map(|p| format!("D {p}")));
            Ok(if lines.is_empty() {
                "no changes".into()
            } else {
                lines.join("\n")
            })
        };
        text(run())
    }

    /// Whether undo and redo are possible.
    #[tool(description = "Whether undo and redo are possible, and which turn is applied.")]
    async fn status(&self) -> String {
        text(self.session.status().map(|s| {
            format!(
                "can undo: {}; can redo: {}; applied turn: {}; turns: {}{}",
                s.can_undo,
                s.can_redo,
                s.cursor.map_or_else(|| "none".into(), |c| c.to_string()),
                s.turns,
                s.pending
                    .map_or_else(String::new, |p| format!("; turn {p} in progress"))
            )
        }))
    }
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
    let _maintainer = session.workspace().maintainer(None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let service = McpServer::new(session)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| e.to_string())?;
        service.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    })
}
