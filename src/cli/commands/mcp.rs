//! `retrace mcp` (for MCP clients): the session's tools for a model, on stdio.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::open::session;
use crate::{Pick, Session};

/// Serve tools to a model over MCP on stdio
///
/// Model-facing tools (undo, redo, revert, checkpoint, log, diff, `file_history`, blame,
/// status)
/// for the session `--session` / `RETRACE_SESSION` names.
#[derive(clap::Args)]
#[command(hide = true)]
pub struct McpArgs;

/// Runs `retrace mcp`.
pub fn run(_: McpArgs, cx: &Ctx) -> Result<u8> {
    mcp(session(cx.dir(), cx.sid(), Pick::Create)?)
}

/// `retrace mcp`: the session's tools over MCP on stdio until the client goes.
pub fn mcp(session: Session) -> Result<u8> {
    crate::protocol::mcp::run(session).map_err(anyhow::Error::msg)?;
    Ok(OK)
}
