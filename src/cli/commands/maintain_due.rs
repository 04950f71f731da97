//! `retrace maintain-due` (hidden): the background maintenance pass other commands start.

use anyhow::Result;

use crate::Workspace;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;

/// Run a due maintenance pass at the lowest priority (internal)
///
/// What `snapshot`, `turn end`, `checkpoint` and the hooks start in the background (not
/// for people; `retrace gc` is).
#[derive(clap::Args)]
#[command(name = "maintain-due", hide = true)]
pub struct MaintainDueArgs;

/// Runs `retrace maintain-due`.
pub fn run(_: MaintainDueArgs, cx: &Ctx) -> Result<u8> {
    maintain_due(cx.dir())
}

/// `retrace maintain-due` (hidden): a due pass at the lowest priority, in the detached
/// process `crate::maintainer::maintain_later` starts. Its stdio is `/dev/null`: what the
/// pass warns about waits in the store for the next command. Opening never waits for another
/// process's restore, and the pass gives up when the workspace is busy.
pub fn maintain_due(dir: Option<&std::path::PathBuf>) -> Result<u8> {
    // First, before any thread starts: threads inherit the priority.
    crate::maintainer::lower_priority();
    let path = dir.cloned().unwrap_or_else(|| ".".into());
    let ws = Workspace::open(&path, &crate::Config::from_env().for_reading())?;
    let _ = ws.run_detached_pass();
    Ok(OK)
}
