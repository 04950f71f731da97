//! `retrace turn begin|round|end`: what an adapter runs around each prompt.

use std::time::Duration;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, REFUSED};
use crate::cli::json;
use crate::cli::open::{maintain_later, session};
use crate::object::terminal_line;
use crate::{BeforeStatus, Pick, Session};

/// Begin or end a turn (what an adapter does around each prompt)
#[derive(clap::Subcommand)]
pub enum TurnCommand {
    /// Record the start of a turn and capture the before-snapshot.
    Begin {
        /// The conversation node to return to when this turn is undone.
        #[arg(long)]
        anchor: Option<String>,
        /// The prompt (put back into the editor on undo).
        #[arg(long)]
        prompt: Option<String>,
        /// Give up on the before-snapshot after this long (the turn becomes
        /// conversation-only).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// The process that owns the turn (default: the one that ran this command, i.e.
        /// the agent). If it dies before the turn ends, another retrace process may close
        /// the turn.
        #[arg(long, value_name = "PID")]
        owner_pid: Option<u32>,
    },
    /// Record the anchor of an intermediate round (tool round, retry) of the turn in
    /// progress.
    Round {
        /// The round's conversation node.
        anchor: String,
    },
    /// Capture the after-snapshot and close the turn in progress.
    End {
        /// The conversation leaf now (redo returns to it).
        #[arg(long)]
        anchor: Option<String>,
    },
}

/// Runs `retrace turn ...`.
pub fn run(command: TurnCommand, cx: &Ctx) -> Result<u8> {
    let (dir, sid) = (cx.dir(), cx.sid());
    match command {
        TurnCommand::Begin {
            anchor,
            prompt,
            timeout_ms,
            owner_pid,
        } => {
            let owner = owner_pid.unwrap_or_else(std::os::unix::process::parent_id);
            let s = session(dir, sid, Pick::Create)?.owned_by(owner);
            begin(&s, anchor, prompt, timeout_ms, cx.json)
        }
        TurnCommand::End { anchor } => {
            let s = session(dir, sid, Pick::Open)?;
            let code = end(&s, anchor, cx.json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        TurnCommand::Round { anchor } => round(&session(dir, sid, Pick::Open)?, anchor),
    }
}

/// `retrace turn begin`.
pub fn begin(
    s: &Session,
    anchor: Option<String>,
    prompt: Option<String>,
    timeout_ms: Option<u64>,
    json: bool,
) -> Result<u8> {
    // Beginning over an open turn closes it without its own end: say how it was closed.
    let open = s.status()?.pending;
    let turn = s.begin_turn(anchor, prompt)?;
    let wait = timeout_ms.map_or(Duration::from_hours(24), Duration::from_millis);
    let before = turn.wait_before(wait)?;
    if let Some(open) = open {
        let old = s
            .log()?
            .entries
            .into_iter()
            .find(|e| e.kind == "turn" && e.number == open);
        let how = match old {
            Some(e) if e.state == Some(crate::TurnState::Complete) => {
                "it now ends where this one began".to_string()
            }
            Some(e) => format!(
                "it is now conversation-only, so undo of it moves only the conversation: {}",
                e.reason.as_deref().unwrap_or("it never ended")
            ),
            None => "it is no longer kept".into(),
        };
        eprintln!(
            "retrace: warning: turn {open} was still open when turn {} began; {}. End each \
             turn with `retrace turn end`.",
            turn.number(),
            terminal_line(&how)
        );
    }
    if json {
        let mut v = serde_json::to_value(&before)?;
        v["turn"] = turn.number().into();
        json::answer("begun", v)?;
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
                println!(
                    "turn {} begun, conversation only: {}",
                    turn.number(),
                    terminal_line(reason)
                );
            }
            BeforeStatus::Subagent => println!("subagent session: nothing recorded"),
        }
    }
    Ok(OK)
}

/// `retrace turn round`.
pub fn round(s: &Session, anchor: String) -> Result<u8> {
    if let Some(t) = s.pending_turn()? {
        t.round(anchor)?;
        Ok(OK)
    } else {
        println!("no turn is in progress; begin one with `retrace turn begin`");
        Ok(REFUSED)
    }
}

/// `retrace turn end`.
pub fn end(s: &Session, anchor: Option<String>, json: bool) -> Result<u8> {
    let Some(sum) = s.end_turn(anchor)? else {
        if json {
            json::print(serde_json::json!({"result": "no_pending_turn", "ok": false,
                "message": "no turn is in progress; begin one with `retrace turn begin`"}));
        } else {
            println!("no turn is in progress; begin one with `retrace turn begin`");
        }
        return Ok(REFUSED);
    };
    if json {
        json::answer("ended", &sum)?;
    } else {
        println!(
            "turn {} ended: +{} ~{} -{}{}",
            sum.turn,
            sum.added,
            sum.modified,
            sum.deleted,
            sum.reason.as_ref().map_or(String::new(), |r| format!(
                " (conversation only: {})",
                terminal_line(r)
            ))
        );
        for k in &sum.skipped {
            println!(
                "  skipped {}: {}",
                terminal_line(&k.path),
                terminal_line(&k.reason)
            );
        }
        if !sum.secrets.is_empty() {
            let shown: Vec<_> = sum.secrets.iter().map(|p| terminal_line(p)).collect();
            println!(
                "  left out as credentials (what the turn did to them cannot be undone; the \
                 allow_secrets setting keeps chosen ones): {}",
                shown.join(", ")
            );
        }
    }
    Ok(OK)
}
