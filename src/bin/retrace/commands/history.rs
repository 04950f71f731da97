//! The session commands: `turn begin|end`, `undo`, `redo`, `checkpoint`, `navigate`, and the
//! session views of `log` and `status`.

use std::time::Duration;

use anyhow::Result;
use retrace::{BeforeStatus, Mode, OpOptions, Outcome, Report, Session, SessionLog};

use super::format_time;
use crate::progress::Bar;
use crate::{BUSY, OK, REFUSED};

/// Prints an outcome (JSON or one line plus details) and returns its exit code.
pub fn report(o: &Outcome, json: bool) -> Result<u8> {
    if json {
        println!("{}", serde_json::to_string(&Report::from(o))?);
    } else {
        println!("{}", o.message());
        match o {
            Outcome::Conflict { paths, .. } | Outcome::Dirty { paths, .. } => {
                for p in paths {
                    println!("  {p}");
                }
            }
            Outcome::Restored {
                files_written,
                files_deleted,
                skipped,
                safety_snapshot,
                ..
            } => {
                for p in files_written {
                    println!("  wrote {p}");
                }
                for p in files_deleted {
                    println!("  deleted {p}");
                }
                for s in skipped {
                    println!("  left alone {}: {}", s.path, s.reason);
                }
                if let Some(s) = safety_snapshot {
                    println!(
                        "  your overwritten edits are kept in snapshot {}",
                        s.short()
                    );
                }
            }
            _ => {}
        }
        if let Some(a) = o.anchor() {
            println!("conversation: move to {a}");
        }
        if let Outcome::Restored {
            prompt: Some(p), ..
        }
        | Outcome::ConversationOnly {
            prompt: Some(p), ..
        } = o
        {
            println!("prompt: {p}");
        }
    }
    Ok(match o {
        _ if o.is_success() => OK,
        Outcome::Busy { .. } | Outcome::CaptureInFlight => BUSY,
        _ => REFUSED,
    })
}

/// `retrace turn begin`.
pub fn begin(
    s: &Session,
    anchor: Option<String>,
    prompt: Option<String>,
    timeout_ms: Option<u64>,
    json: bool,
) -> Result<u8> {
    let turn = s.begin_turn(anchor, prompt)?;
    let wait = timeout_ms.map_or(Duration::from_secs(24 * 3600), Duration::from_millis);
    let before = turn.wait_before(wait)?;
    if json {
        let mut v = serde_json::to_value(&before)?;
        v["turn"] = turn.number().into();
        println!("{v}");
    } else {
        match &before {
            BeforeStatus::Ready { snapshot } => {
                println!(
                    "turn {} begun (before: {})",
                    turn.number(),
                    snapshot.short()
                );
            }
            BeforeStatus::ConversationOnly { reason } => {
                println!("turn {} begun, conversation only: {reason}", turn.number());
            }
            BeforeStatus::Subagent => println!("subagent session: nothing recorded"),
        }
    }
    Ok(OK)
}

/// `retrace turn round`.
pub fn round(s: &Session, anchor: String) -> Result<u8> {
    match s.pending_turn()? {
        Some(t) => {
            t.round(anchor)?;
            Ok(OK)
        }
        None => {
            println!("no turn is in progress; begin one with `retrace turn begin`");
            Ok(REFUSED)
        }
    }
}

/// `retrace turn end`.
pub fn end(s: &Session, anchor: Option<String>, json: bool) -> Result<u8> {
    let Some(sum) = s.end_turn(anchor)? else {
        if json {
            println!(
                "{}",
                serde_json::json!({"result": "no_pending_turn", "ok": false,
                    "message": "no turn is in progress; begin one with `retrace turn begin`"})
            );
        } else {
            println!("no turn is in progress; begin one with `retrace turn begin`");
        }
        return Ok(REFUSED);
    };
    if json {
        println!("{}", serde_json::to_string(&sum)?);
    } else {
        println!(
            "turn {} ended: +{} ~{} -{}{}",
            sum.turn,
            sum.added,
            sum.modified,
            sum.deleted,
            sum.reason
                .as_ref()
                .map_or(String::new(), |r| format!(" (conversation only: {r})"))
        );
        for k in &sum.skipped {
            println!("  skipped {}: {}", k.path, k.reason);
        }
    }
    Ok(OK)
}

/// `retrace undo`.
pub fn undo(s: &Session, mode: Mode, force: bool, json: bool) -> Result<u8> {
    with_bar(force, json, |opts| s.undo_with(mode, opts))
}

/// `retrace redo`.
pub fn redo(s: &Session, force: bool, json: bool) -> Result<u8> {
    with_bar(force, json, |opts| s.redo_with(opts))
}

/// `retrace navigate`.
pub fn navigate(s: &Session, anchor: &str, mode: Mode, force: bool, json: bool) -> Result<u8> {
    with_bar(force, json, |opts| s.navigate_with(anchor, mode, opts))
}

/// Runs an operation that writes files with a progress bar, then prints its outcome.
fn with_bar(
    force: bool,
    json: bool,
    op: impl FnOnce(OpOptions<'_>) -> Result<retrace::Outcome, retrace::Error>,
) -> Result<u8> {
    let bar = Bar::new();
    let o = op(OpOptions {
        force,
        progress: &bar,
    })?;
    drop(bar);
    report(&o, json)
}

/// `retrace checkpoint`.
pub fn checkpoint(s: &Session, label: Option<String>, json: bool) -> Result<u8> {
    let bar = Bar::new();
    let o = s.checkpoint_with(label, &bar)?;
    drop(bar);
    report(&o, json)
}

/// `retrace log --session`.
pub fn log(s: &Session, json: bool) -> Result<u8> {
    let log: SessionLog = s.log()?;
    if json {
        println!("{}", serde_json::to_string(&log)?);
        return Ok(OK);
    }
    if log.entries.is_empty() {
        println!("session {} has no turns yet", log.status.session);
        return Ok(REFUSED);
    }
    for e in &log.entries {
        let mark = if log.status.cursor == Some(e.number) && e.kind == "turn" {
            "@"
        } else if e.undone {
            "u"
        } else if e.applied {
            "*"
        } else {
            " "
        };
        let text = e
            .text
            .as_deref()
            .map(|t| {
                let line = t.lines().next().unwrap_or("");
                if line.chars().count() > 60 {
                    format!("{}…", line.chars().take(60).collect::<String>())
                } else {
                    line.to_string()
                }
            })
            .unwrap_or_default();
        if e.kind == "turn" {
            let state = match e.state {
                Some(retrace::TurnState::Complete) => String::new(),
                Some(st) => format!(" [{}]", serde_json::to_value(st)?.as_str().unwrap_or("")),
                None => String::new(),
            };
            println!(
                "{mark} turn:{:<4} {}  +{} ~{} -{}{state}  {text}",
                e.number,
                format_time(e.time_ms),
                e.counts.added,
                e.counts.modified,
                e.counts.deleted
            );
        } else {
            println!(
                "  checkpoint:{:<4} {}  {}  {text}",
                e.number,
                format_time(e.time_ms),
                e.before.map(|b| b.short()).unwrap_or_default()
            );
        }
    }
    println!("(@ cursor, * applied, u undone: redo re-applies the newest)");
    Ok(OK)
}

/// `retrace status --session`.
pub fn status(s: &Session, json: bool) -> Result<u8> {
    let st = s.status()?;
    if json {
        println!("{}", serde_json::to_string(&st)?);
    } else {
        println!(
            "session    {}{}",
            st.session,
            if st.subagent { " (subagent)" } else { "" }
        );
        println!("turns      {} ({} checkpoints)", st.turns, st.checkpoints);
        match st.cursor {
            Some(c) => println!("cursor     turn:{c}"),
            None => println!("cursor     before the first turn"),
        }
        if let Some(p) = st.pending {
            println!("pending    turn:{p} is in progress");
        }
        println!("can undo   {}", if st.can_undo { "yes" } else { "no" });
        match st.redo_turn {
            Some((t, m)) if st.can_redo => {
                println!(
                    "can redo   yes (turn:{t}, {})",
                    serde_json::to_value(m)?.as_str().unwrap_or("")
                );
            }
            _ => println!("can redo   no"),
        }
    }
    Ok(OK)
}
