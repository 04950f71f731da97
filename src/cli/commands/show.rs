//! `retrace show`: one turn, step, checkpoint or snapshot in full.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::names::SnapshotNames;
use crate::cli::open::{reading_history, session_of};
use crate::history::inspect::EntryDetail;
use crate::object::terminal_text;
use crate::{Error, ObjectId, Pick, Session, Workspace};

/// Show one turn, checkpoint or snapshot in full
///
/// A turn or checkpoint: its prompt in full, times, state, the paths it changed with
/// their lines, the bytes it added. A snapshot: its labels, what it holds, what changed
/// from the snapshot before it.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// `turn:N`, `turn:N.K` (step K of turn N), `checkpoint:N`, a checkpoint label or a host
    /// anchor; or a snapshot id (8+ hex digits) or label.
    #[arg(value_name = "REF")]
    reference: String,
}

/// Runs `retrace show`.
pub fn run(args: ShowArgs, cx: &Ctx) -> Result<u8> {
    let (reference, json, sid) = (args.reference, cx.json, cx.sid());
    let ws = reading_history(cx.dir())?;
    let names = SnapshotNames::new(&ws, sid);
    let hex = reference.len() >= 8 && reference.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && let Ok(id) = ws.resolve(&reference) {
        return show_snapshot(&ws, &id, json);
    }
    let of_session = ["turn:", "checkpoint:", "revert:"]
        .iter()
        .any(|p| reference.starts_with(p));
    if of_session {
        return show(&session_of(&ws, sid, Pick::History)?, &reference, json);
    }
    // A label or a host anchor: the session's entry (a checkpoint label, an anchor)
    // first, else the workspace's snapshot of that label.
    if let Some(s) = names.session(false)? {
        match s.show(&reference) {
            Ok(detail) => return print_detail(&detail, json),
            Err(Error::Inspect { .. } | Error::Anchor { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let id = names.resolve(&reference)?;
    show_snapshot(&ws, &id, json)
}

/// `retrace show REF` of a turn or checkpoint.
pub fn show(s: &Session, reference: &str, json: bool) -> Result<u8> {
    print_detail(&s.show(reference)?, json)
}

/// Prints a turn's or checkpoint's detail.
pub fn print_detail(detail: &EntryDetail, json: bool) -> Result<u8> {
    if json {
        json::answer("show", detail)?;
    } else {
        print!("{}", terminal_text(&detail.text()));
    }
    Ok(OK)
}

/// `retrace show ID` of a snapshot.
pub fn show_snapshot(ws: &Workspace, id: &ObjectId, json: bool) -> Result<u8> {
    let detail = ws.show_snapshot(id)?;
    if json {
        json::answer("show", json::with_kind("snapshot", &detail)?)?;
    } else {
        print!("{}", terminal_text(&detail.text()));
    }
    Ok(OK)
}
