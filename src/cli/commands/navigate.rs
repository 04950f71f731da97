//! `retrace navigate`: move the session and its files to a turn or checkpoint.

use anyhow::Result;

use super::undo::ModeArg;
use crate::cli::commands::Ctx;
use crate::cli::open::session;
use crate::cli::outcome;
use crate::cli::progress::Bar;
use crate::cli::text::warn_lost_installs;
use crate::protocol::ops::{self};
use crate::{OpOptions, Outcome, Pick};

/// Move the session and its files to a turn or checkpoint
///
/// Restores the workspace to the snapshot at an anchor: a host anchor, `turn:N`,
/// `turn:N:before`, `checkpoint:N` or a checkpoint label.
///
/// Navigate or restore? `navigate` moves the session there: its files, and where its
/// undo and redo start next (what it passes over can no longer be redone). `restore`
/// writes files from any snapshot, or only some paths of one, and moves no session.
#[derive(clap::Args)]
pub struct NavigateArgs {
    /// The anchor.
    anchor: String,
    /// What to restore.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Restore even over changes not in any snapshot (they are snapshotted first).
    #[arg(long)]
    force: bool,
    /// Only say what would be written and deleted; change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `retrace navigate`: through [`ops::NavigateRequest`]; a dry run asks the session.
pub fn run(args: NavigateArgs, cx: &Ctx) -> Result<u8> {
    let s = session(cx.dir(), cx.sid(), Pick::History)?;
    let anchor = &args.anchor;
    if args.dry_run {
        let bar = Bar::new();
        let opts = OpOptions {
            force: args.force,
            progress: &bar,
        };
        let p = s.navigate_dry_run(anchor, args.mode.into(), opts)?;
        drop(bar);
        let what = format!("navigation to {anchor}");
        return outcome::print_preview(&p, &what, args.force, cx.json);
    }
    let request = ops::NavigateRequest {
        anchor: anchor.clone(),
        mode: Some(args.mode.into()),
        force: Some(args.force),
    };
    let o = outcome::run_op(&s, request)?.0;
    if matches!(o, Outcome::Restored { .. }) {
        warn_lost_installs(s.workspace().home(), s.workspace().root());
    }
    outcome::report_at(&o, Some(anchor), cx.json)
}
