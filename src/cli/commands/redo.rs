//! `retrace redo`: re-apply the most recently undone turn.

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::open::session;
use crate::cli::outcome;
use crate::protocol::ops::{self};

/// Redo the most recently undone turn
///
/// Re-applies it in the mode its undo used.
#[derive(clap::Args)]
pub struct RedoArgs {
    /// Overwrite paths edited since the undo (a safety snapshot keeps them first).
    #[arg(long)]
    force: bool,
    /// Only list what the files would become, as `undo --dry-run`; nothing is written.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `retrace redo`.
pub fn run(args: RedoArgs, cx: &Ctx) -> Result<u8> {
    let s = session(cx.dir(), cx.sid(), Pick::History)?;
    if args.dry_run {
        return outcome::preview(&s, "redo", args.force, cx.json);
    }
    let request = ops::RedoRequest {
        force: Some(args.force),
    };
    outcome::report(&outcome::run_op(&s, request)?.0, cx.json)
}
