//! Reading history by path and by entry: `log -- PATH`, `show`, `blame`. The
//! library computes and formats ([`crate::history::inspect`], [`crate::history::blame`]);
//! these print: for a terminal, with what it would act on in prompts, names and paths shown
//! escaped ([`terminal_text`]); `--json` keeps the exact text.

use crate::history::blame::Blame;
use crate::history::inspect::{EntryDetail, FileLogEntry, file_log_text};
use crate::object::{terminal_line, terminal_text};
use crate::{ObjectId, Session, SessionStatus, Workspace};
use anyhow::Result;

use crate::cli::{OK, json};

/// Prints a file's history, at most `max` entries.
fn print_file_log(
    mut entries: Vec<FileLogEntry>,
    session: Option<&SessionStatus>,
    paths: &[String],
    max: Option<usize>,
    json: bool,
) -> Result<u8> {
    entries.truncate(max.unwrap_or(usize::MAX));
    if json {
        json::answer(
            "log",
            serde_json::json!({"session": session, "entries": entries}),
        )?;
    } else if entries.is_empty() {
        println!(
            "no turn or checkpoint changed {}",
            terminal_line(&paths.join(", "))
        );
    } else {
        print!("{}", terminal_text(&file_log_text(&entries)));
    }
    Ok(OK)
}

/// `retrace log -- PATH...` without a session: every session's entries that changed them.
pub fn file_log(
    ws: Option<&Workspace>,
    paths: &[String],
    max: Option<usize>,
    json: bool,
) -> Result<u8> {
    let entries = match ws {
        Some(ws) => ws.file_log(paths)?,
        None => Vec::new(),
    };
    print_file_log(entries, None, paths, max, json)
}

/// `retrace log --session S -- PATH...`.
pub fn session_file_log(
    s: &Session,
    paths: &[String],
    max: Option<usize>,
    json: bool,
) -> Result<u8> {
    let entries = s.file_log(paths, crate::history::inspect::Among::ThisSession)?;
    let status = if json { Some(s.status()?) } else { None };
    print_file_log(entries, status.as_ref(), paths, max, json)
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

/// `retrace blame PATH`.
pub fn blame(b: &Blame, json: bool) -> Result<u8> {
    if json {
        json::answer("blame", b)?;
    } else {
        print!("{}", terminal_text(&b.text()));
    }
    Ok(OK)
}
