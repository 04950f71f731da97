//! `retrace log`: the workspace's snapshots, a session's turns and checkpoints (with their
//! steps), or the entries that changed some paths.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{NoStore, open_reading, reading_history, session_of, session_reading};
use crate::cli::text::{burst_text, format_time};
use crate::config::bytes_approx;
use crate::history::inspect::first_line;
use crate::history::inspect::{FileLogEntry, file_log_text};
use crate::object::{terminal_line, terminal_text};
use crate::{Pick, Session, SessionLog, SessionStatus, Workspace};

/// List snapshots, or a session's turns and checkpoints
///
/// Without `--session` (or `RETRACE_SESSION`): the workspace's snapshots, newest first,
/// whichever session took them. With it: that session's turns and checkpoints.
#[derive(clap::Args)]
pub struct LogArgs {
    /// The workspace's snapshots (safety snapshots included) even when a session is set.
    #[arg(long)]
    snapshots: bool,
    /// Each turn's steps too (its agent's tool calls: tool, input, what changed).
    #[arg(long)]
    steps: bool,
    /// Show at most N entries (the newest).
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    max: Option<usize>,
    /// Only the entries that changed these files or directories (relative to the
    /// workspace root), after `--`; without `--session`, across every session.
    #[arg(last = true)]
    paths: Vec<String>,
}

/// Runs `retrace log`.
pub fn run(args: LogArgs, cx: &Ctx) -> Result<u8> {
    let LogArgs {
        snapshots,
        steps,
        max,
        paths,
    } = args;
    let (dir, json) = (cx.dir(), cx.json);
    match cx.sid() {
        Some(id) if !snapshots && !paths.is_empty() => {
            session_file_log(&session_reading(dir, id)?, &paths, max, json)
        }
        Some(id) if !snapshots => session_log(&session_reading(dir, id)?, max, steps, json),
        None if steps => {
            let ws = reading_history(dir)?;
            let s = session_of(&ws, None, Pick::History)?;
            session_log(&s, max, true, json)
        }
        None if !snapshots && !paths.is_empty() => {
            file_log(open_reading(dir)?.ok().as_ref(), &paths, max, json)
        }
        _ => snapshot_log(open_reading(dir)?.as_ref(), &paths, max, json),
    }
}

/// `retrace log` (`--snapshots`): with `paths`, only the snapshots that changed them.
pub fn snapshot_log(
    ws: Result<&Workspace, &NoStore>,
    paths: &[String],
    max: Option<usize>,
    json: bool,
) -> Result<u8> {
    let mut log = match ws {
        Ok(ws) => ws.snapshot_log(paths)?,
        Err(_) => Vec::new(),
    };
    let empty = log.is_empty();
    log.truncate(max.unwrap_or(usize::MAX));
    if json {
        let rows: Vec<_> = log
            .iter()
            .map(|e| {
                let s = &e.snapshot;
                let mut v = serde_json::json!({"kind": "snapshot", "id": s.root.to_hex(), "time_ms": s.time_ms,
                "label": s.label, "labels": e.labels, "files": s.files, "bytes": s.bytes,
                "bytes_added": e.bytes_added, "burst": e.burst.as_ref().map(|b| serde_json::json!({
                    "added": b.counts.added, "modified": b.counts.modified,
                    "deleted": b.counts.deleted, "paths": b.paths}))});
                if !paths.is_empty() {
                    v["paths"] = serde_json::to_value(&e.paths).unwrap_or_default();
                }
                v
            })
            .collect();
        json::answer("log", serde_json::json!({"session": null, "entries": rows}))?;
    } else if empty && !paths.is_empty() {
        println!("no snapshot changed {}", terminal_line(&paths.join(", ")));
    } else if empty {
        // An empty answer is a success (as `--json`'s empty `entries` is). Where files are
        // never snapshotted, no snapshot command is suggested.
        let refused = match ws {
            Ok(ws) => ws.conversation_only().map(str::to_string),
            Err(none) => none.refused.clone(),
        };
        match refused {
            Some(why) => println!(
                "no snapshots: {}, so files are never snapshotted here",
                terminal_line(&why)
            ),
            None => println!("no snapshots yet; take one with `retrace snapshot`"),
        }
    } else {
        let added: Vec<String> = log.iter().map(|e| bytes_approx(e.bytes_added)).collect();
        let width = added.iter().map(String::len).max().unwrap_or(0);
        for (e, bytes) in log.iter().zip(&added) {
            let s = &e.snapshot;
            let lines = if paths.is_empty() {
                String::new()
            } else {
                let (a, r) = e
                    .paths
                    .iter()
                    .fold((0, 0), |(a, r), p| (a + p.added, r + p.removed));
                format!("+{a} -{r}  ")
            };
            let files = format!(
                "{:>6} {}",
                s.files,
                if s.files == 1 { "file " } else { "files" }
            );
            let what = match &e.burst {
                Some(b) => burst_text(b),
                None => terminal_line(&e.labels.join(", ")).into_owned(),
            };
            println!(
                "{}  {}  {files}  {bytes:>width$} added  {lines}{what}",
                s.root.short(),
                format_time(s.time_ms),
            );
        }
    }
    Ok(OK)
}

/// `retrace log --session`: newest first, at most `max` entries.
pub fn session_log(s: &Session, max: Option<usize>, steps: bool, json: bool) -> Result<u8> {
    let mut log: SessionLog = if steps { s.log_with_steps()? } else { s.log()? };
    let empty = log.entries.is_empty();
    log.entries.truncate(max.unwrap_or(usize::MAX));
    if json {
        json::answer(
            "log",
            serde_json::json!({"session": log.status, "entries": log.entries}),
        )?;
        return Ok(OK);
    }
    let name = terminal_line(log.status.name.as_deref().unwrap_or(&log.status.session));
    if empty {
        println!("session {name} has no turns yet");
        return Ok(OK);
    }
    let rows: Vec<([String; 6], &[crate::StepLog])> = log
        .entries
        .iter()
        .map(|e| {
            let mark = if log.status.cursor == Some(e.number) && e.kind != "checkpoint" {
                "@"
            } else if e.undone {
                "u"
            } else if e.applied {
                "*"
            } else {
                " "
            };
            let what = if e.kind == "checkpoint" {
                e.before.map(|b| b.short()).unwrap_or_default()
            } else {
                let state = match e.state {
                    Some(crate::TurnState::Complete) | None => String::new(),
                    Some(st) => format!(" [{}]", st.name().replace('_', " ")),
                };
                format!(
                    "+{} ~{} -{}{state}",
                    e.counts.added, e.counts.modified, e.counts.deleted
                )
            };
            let row = [
                mark.to_string(),
                format!("{}:{}", e.kind, e.number),
                format_time(e.time_ms),
                what,
                crate::config::bytes_approx(e.bytes_added),
                first_line(e.text.as_deref().unwrap_or(""), 61),
            ];
            (row, e.steps.as_slice())
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r.0[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w1, w3, w4) = (width(1), width(3), width(4));
    for ([mark, id, time, what, bytes, text], steps) in &rows {
        println!("{mark} {id:<w1$}  {time}  {what:<w3$}  {bytes:>w4$}  {text}");
        for st in *steps {
            println!("{}", step_line(id, st));
        }
    }
    println!("(@ cursor, * applied, u undone: redo re-applies the most recently undone)");
    println!("(the workspace's snapshots, safety snapshots too: `retrace log --snapshots`)");
    Ok(OK)
}

/// One step under its turn's row: `turn:3.2  Bash  +0 ~1 -0  sed -i … [before 3f2a9c1e]`.
fn step_line(turn: &str, st: &crate::StepLog) -> String {
    let what = match st.counts {
        Some(c) => format!("+{} ~{} -{}", c.added, c.modified, c.deleted),
        None if !st.files.is_empty() => format!("~ {}", st.files.join(", ")),
        None => "(not captured)".to_string(),
    };
    let running = if st.ended_ms.is_none() {
        " [running]"
    } else {
        ""
    };
    let before = st
        .before
        .map(|b| format!("  [before: {}]", b.short()))
        .unwrap_or_default();
    format!(
        "    {turn}.{}  {}  {}  {}{running}{before}",
        st.number,
        terminal_line(&st.tool),
        terminal_line(&what),
        first_line(&st.summary, 61),
    )
}

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
