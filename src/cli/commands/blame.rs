//! `retrace blame`: the turn that wrote each line of a file.

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{reading_history, session_of};
use crate::history::blame::Blame;
use crate::object::terminal_text;

/// Show the turn that wrote each line of a file
///
/// Every line of the file as it is on disk, with the agent turn that wrote it (every
/// session's turns, or the `--session`'s), `unsnapshotted` or `before retrace`.
#[derive(clap::Args)]
pub struct BlameArgs {
    /// The file, relative to the workspace root.
    path: String,
}

/// Runs `retrace blame`.
pub fn run(args: BlameArgs, cx: &Ctx) -> Result<u8> {
    let ws = reading_history(cx.dir())?;
    match cx.sid() {
        Some(_) => {
            let s = session_of(&ws, cx.sid(), Pick::History)?;
            let among = crate::history::inspect::Among::ThisSession;
            blame(&s.blame(&args.path, among)?, cx.json)
        }
        None => blame(&ws.blame(&args.path)?, cx.json),
    }
}

/// `retrace blame PATH`.
pub fn blame(b: &Blame, json: bool) -> Result<u8> {
    if json {
        json::answer("blame", b)?;
    } else {
        print!("{}", terminal_text(&b.text()));
    }
    Ok(OK)
}
