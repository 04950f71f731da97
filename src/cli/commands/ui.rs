//! `retrace ui`: the terminal browser of the history (`crate::ui`).

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, Usage};
use crate::cli::open::reading_history;

/// Browse the history in the terminal, and act on it
///
/// Sessions, each one's timeline of turns, undos and restores, what each changed with
/// its diff; undo, redo, revert and restore from there (each asks first). `--session`
/// picks the session shown first.
#[derive(clap::Args)]
pub struct UiArgs;

/// Runs `retrace ui`.
pub fn run(_: UiArgs, cx: &Ctx) -> Result<u8> {
    let ws = reading_history(cx.dir())?;
    let app = crate::ui::App::new(ws, cx.sid())?;
    match crate::ui::run(app) {
        Ok(()) => Ok(OK),
        // Run where it cannot be: a mistake in the call, as a missing `-C` is.
        Err(e @ crate::ui::UiError::NotATerminal) => Err(Usage(e.to_string()).into()),
        Err(e) => Err(e.into()),
    }
}
