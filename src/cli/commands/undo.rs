//! `retrace undo`: step back over the session's newest turn.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::open::session;
use crate::cli::outcome;
use crate::protocol::ops::{self};
use crate::{Mode, Pick};

/// Undo the session's newest turn
///
/// Steps back over the session's newest applied turn: the paths it changed go back to
/// what they were before it, and redo can bring them back.
#[derive(clap::Args)]
pub struct UndoArgs {
    /// What to restore.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Overwrite paths edited since the turn (a safety snapshot keeps them first).
    #[arg(long)]
    force: bool,
    /// Only list what the files would become (written, deleted, merged, left alone, in
    /// conflict), as `revert --dry-run` does; nothing is written.
    #[arg(long, conflicts_with = "mode")]
    dry_run: bool,
}

/// Runs `retrace undo`.
pub fn run(args: UndoArgs, cx: &Ctx) -> Result<u8> {
    let s = session(cx.dir(), cx.sid(), Pick::History)?;
    if args.dry_run {
        return outcome::preview(&s, "undo", args.force, cx.json);
    }
    let request = ops::UndoRequest {
        mode: Some(args.mode.into()),
        force: Some(args.force),
    };
    outcome::report(&outcome::run_op(&s, request)?.0, cx.json)
}

/// `--mode` of `undo` and `navigate`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum ModeArg {
    /// Files and conversation.
    Both,
    /// Only the files (the conversation stays).
    Files,
    /// Only the conversation (the files stay, and are checkpointed).
    Conversation,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Both => Mode::Both,
            ModeArg::Files => Mode::Files,
            ModeArg::Conversation => Mode::Conversation,
        }
    }
}

impl From<ModeArg> for ops::UndoMode {
    fn from(m: ModeArg) -> ops::UndoMode {
        match m {
            ModeArg::Both => ops::UndoMode::Both,
            ModeArg::Files => ops::UndoMode::Files,
            ModeArg::Conversation => ops::UndoMode::Conversation,
        }
    }
}
