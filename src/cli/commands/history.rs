//! The session commands: `turn begin|end`, `undo`, `redo`, `checkpoint`, `navigate`, and the
//! session views of `log` and `status`.

use std::time::Duration;

use crate::history::RevertPreview;
use crate::history::inspect::first_line;
use crate::object::{terminal_line, terminal_text};
use crate::protocol::ops::StepReport;
use crate::{BeforeStatus, Mode, OpOptions, Outcome, Session, SessionLog};
use anyhow::Result;

use crate::cli::json;
use crate::cli::progress::Bar;
use crate::cli::{BUSY, OK, REFUSED};

/// Most paths of other writers a navigation's report lists one per line.
const REWOUND_LINES: usize = 20;

/// Prints an outcome (JSON or one line plus details) and returns its exit code. Paths,
/// prompts and labels are printed escaped for the terminal; JSON keeps them exact.
pub fn report(o: &Outcome, json: bool) -> Result<u8> {
    report_at(o, None, json)
}

/// [`report`] of a navigation to `target` (named in the first line instead of a turn).
fn report_at(o: &Outcome, target: Option<&str>, json: bool) -> Result<u8> {
    if json {
        json::print(json::outcome(o, target)?);
    } else {
        match o {
            // The paths once, one per line (the one-line message lists them inline).
            Outcome::Conflict { paths, count } | Outcome::Dirty { paths, count } => {
                if matches!(o, Outcome::Conflict { .. }) {
                    println!(
                        "conflict: {count} path(s) changed since; nothing written; use --force \
                         to overwrite them (a safety snapshot keeps them first):"
                    );
                } else {
                    println!("{}:", crate::error::dirty_refusal(*count));
                }
                for p in paths {
                    println!("  {}", terminal_line(p));
                }
                if *count > paths.len() {
                    println!("  ... and {} more", count - paths.len());
                }
            }
            _ => println!("{}", terminal_line(&o.message_at(target))),
        }
        if let Outcome::Restored {
            files_written,
            files_deleted,
            skipped,
            safety_snapshot,
            rewound,
            ..
        } = o
        {
            // What was left alone first: it is what the user must look at.
            let lines: Vec<String> = skipped
                .iter()
                .map(|s| {
                    format!(
                        "left alone {}: {}",
                        terminal_line(&s.path),
                        terminal_line(&s.reason)
                    )
                })
                .chain(
                    files_written
                        .iter()
                        .map(|p| format!("wrote {}", terminal_line(p))),
                )
                .chain(
                    files_deleted
                        .iter()
                        .map(|p| format!("deleted {}", terminal_line(p))),
                )
                .collect();
            super::print_listed(&lines, "  ");
            for s in rewound.iter().take(REWOUND_LINES) {
                println!(
                    "  rewound {}: {}",
                    terminal_line(&s.path),
                    terminal_line(&s.reason)
                );
            }
            if rewound.len() > REWOUND_LINES {
                println!(
                    "  ... and {} more path(s) other writers wrote last",
                    rewound.len() - REWOUND_LINES
                );
            }
            if let Some(s) = safety_snapshot {
                println!(
                    "  the workspace as it was before, your edits included, is kept in snapshot \
                     {0} (`retrace diff {0}` shows what differs now; `retrace restore {0}` goes \
                     back to it)",
                    s.short()
                );
            }
        }
        if let Some(a) = o.anchor() {
            println!("conversation: move to {}", terminal_line(a));
        }
        if let Outcome::Restored {
            prompt: Some(p), ..
        }
        | Outcome::ConversationOnly {
            prompt: Some(p), ..
        } = o
        {
            println!("prompt: {}", terminal_text(p));
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

/// `retrace step begin`.
pub fn step_begin(
    s: &Session,
    call: &str,
    tool: &str,
    summary: &str,
    files: &[String],
    json: bool,
) -> Result<u8> {
    let step = s.begin_step(call, tool, summary, files)?;
    print_step(step.as_ref(), "began", json)
}

/// `retrace step end`.
pub fn step_end(s: &Session, call: &str, json: bool) -> Result<u8> {
    let step = s.end_step(call)?;
    print_step(step.as_ref(), "ended", json)
}

fn print_step(step: Option<&crate::StepInfo>, verb: &str, json: bool) -> Result<u8> {
    if json {
        // What `serve`'s `begin_step`/`end_step` answer, with the CLI's `result` and `ok`.
        let mut v = serde_json::to_value(StepReport::from(step.cloned()))?;
        let (result, ok) = if step.is_some() {
            ("step", true)
        } else {
            ("no_step", false)
        };
        v["result"] = result.into();
        v["ok"] = ok.into();
        if step.is_none() {
            v["message"] = NO_STEP.into();
        }
        json::print(v);
        return Ok(if step.is_some() { OK } else { REFUSED });
    }
    let Some(step) = step else {
        println!("{NO_STEP}");
        return Ok(REFUSED);
    };
    println!(
        "step turn:{}.{} {verb}{}",
        step.turn,
        step.step,
        step.snapshot
            .map_or(String::new(), |id| format!(" (snapshot {})", id.short()))
    );
    Ok(OK)
}

const NO_STEP: &str = "no turn of this session is running (or no such step): nothing recorded";

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

/// `retrace undo`.
pub fn undo(s: &Session, mode: Mode, force: bool, json: bool) -> Result<u8> {
    with_bar(force, json, |opts| s.undo_with(mode, opts))
}

/// `retrace redo`.
pub fn redo(s: &Session, force: bool, json: bool) -> Result<u8> {
    with_bar(force, json, |opts| s.redo_with(opts))
}

/// `retrace navigate`.
pub fn navigate(
    s: &Session,
    (anchor, mode): (&str, Mode),
    force: bool,
    dry_run: bool,
    json: bool,
) -> Result<u8> {
    let bar = Bar::new();
    let opts = OpOptions {
        force,
        progress: &bar,
    };
    if dry_run {
        let p = s.navigate_dry_run(anchor, mode, opts)?;
        drop(bar);
        return print_preview(&p, &format!("navigation to {anchor}"), force, json);
    }
    let o = s.navigate_with(anchor, mode, opts)?;
    if matches!(o, Outcome::Restored { .. }) {
        super::warn_lost_installs(s.workspace().home(), s.workspace().root());
    }
    drop(bar);
    report_at(&o, Some(anchor), json)
}

/// `retrace revert turn:N` (or `turn:N.K`, one step).
pub fn revert(
    s: &Session,
    (turn, step): (u64, Option<u64>),
    force: bool,
    dry_run: bool,
    json: bool,
) -> Result<u8> {
    let what = match step {
        Some(k) => format!("turn {turn} step {k}"),
        None => format!("turn {turn}"),
    };
    let name = match step {
        Some(k) => format!("turn:{turn}.{k}"),
        None => format!("turn:{turn}"),
    };
    let bar = Bar::new();
    let opts = OpOptions {
        force,
        progress: &bar,
    };
    if dry_run {
        let p = match step {
            Some(k) => s.revert_step_dry_run(turn, k, opts)?,
            None => s.revert_dry_run(turn, opts)?,
        };
        drop(bar);
        return print_preview(&p, &format!("revert of {what}"), force, json);
    }
    let o = match step {
        Some(k) => s.revert_step(turn, k, opts)?,
        None => s.revert(turn, opts)?,
    };
    drop(bar);
    if !json && let Outcome::Restored { merged, .. } = &o {
        for p in merged {
            println!(
                "  merged {} (the changes made since the turn kept)",
                terminal_line(p)
            );
        }
    }
    let code = report_at(&o, Some(&format!("revert of {what}")), json)?;
    if !json && matches!(o, Outcome::Conflict { .. }) {
        println!(
            "(`retrace revert {name} --dry-run` says why each path conflicts; `retrace diff \
             {name} -p` shows what it changed)"
        );
    }
    Ok(code)
}

/// `retrace undo --dry-run` and `retrace redo --dry-run` (`verb`).
pub fn preview(s: &Session, verb: &str, force: bool, json: bool) -> Result<u8> {
    let bar = Bar::new();
    let opts = OpOptions {
        force,
        progress: &bar,
    };
    let p = if verb == "undo" {
        s.undo_dry_run(opts)?
    } else {
        s.redo_dry_run(opts)?
    };
    drop(bar);
    let what = if p.turn == 0 {
        verb.to_string()
    } else {
        format!("{verb} of turn {}", p.turn)
    };
    print_preview(&p, &what, force, json)
}

/// A dry run's preview (of a revert, an undo or a redo: `what`), as text or JSON; its exit
/// code (0 when it would go through).
fn print_preview(p: &RevertPreview, what: &str, force: bool, json: bool) -> Result<u8> {
    if json {
        json::print(json::preview(p)?);
    } else {
        let then = if force {
            "would write over"
        } else {
            "conflict"
        };
        let lines: Vec<String> = p
            .conflicts
            .iter()
            .map(|c| {
                format!(
                    "{then} {}: {}",
                    terminal_line(&c.path),
                    terminal_line(&c.reason)
                )
            })
            .chain(p.skipped.iter().map(|c| {
                format!(
                    "would leave alone {}: {}",
                    terminal_line(&c.path),
                    terminal_line(&c.reason)
                )
            }))
            .chain(p.would_write.iter().map(|path| {
                let merged = if p.merged.contains(path) {
                    " (merged)"
                } else {
                    ""
                };
                format!("would write {}{merged}", terminal_line(path))
            }))
            .chain(
                p.would_delete
                    .iter()
                    .map(|path| format!("would delete {}", terminal_line(path))),
            )
            .collect();
        super::print_listed(&lines, "");
        match &p.refused {
            Some(o) => println!("dry run of {what}: {}", terminal_line(&o.message())),
            None => println!(
                "dry run of {what}: {} to write ({} merged), {} to delete",
                p.would_write.len(),
                p.merged.len(),
                p.would_delete.len()
            ),
        }
    }
    Ok(match &p.refused {
        None => OK,
        Some(Outcome::Busy { .. } | Outcome::CaptureInFlight) => BUSY,
        Some(_) => REFUSED,
    })
}

/// Runs an operation that writes files with a progress bar, then prints its outcome.
fn with_bar(
    force: bool,
    json: bool,
    op: impl FnOnce(OpOptions<'_>) -> Result<crate::Outcome, crate::Error>,
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

/// `retrace log --session`: newest first, at most `max` entries.
pub fn log(s: &Session, max: Option<usize>, steps: bool, json: bool) -> Result<u8> {
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
                super::format_time(e.time_ms),
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

/// `retrace status --session`: the session, then the workspace (`"workspace"` in JSON).
pub fn status(ws: &crate::Workspace, s: &Session, json: bool) -> Result<u8> {
    let st = s.status()?;
    if json {
        json::answer(
            "status",
            serde_json::json!({"session": st, "workspace": ws.status()?}),
        )?;
    } else {
        println!(
            "session    {}{}",
            st.name.as_ref().map_or(st.session.clone(), |n| format!(
                "{} ({})",
                terminal_line(n),
                st.session
            )),
            if st.subagent { " (subagent)" } else { "" }
        );
        println!(
            "turns      {} ({} checkpoint{})",
            st.turns,
            st.checkpoints,
            if st.checkpoints == 1 { "" } else { "s" }
        );
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
        println!();
        super::snapshot::status(Ok(ws), false)?;
    }
    Ok(OK)
}

/// A session's name as a table or a message shows it: on one line, what a terminal would act
/// on (a newline, an escape sequence) shown escaped, at most 40 characters.
pub fn shown_name(s: &crate::SessionInfo) -> String {
    first_line(&terminal_line(s.shown()), 40)
}

/// `retrace sessions`.
pub fn sessions(ws: Option<&crate::Workspace>, json: bool) -> Result<u8> {
    let all = match ws {
        Some(ws) => ws.sessions()?,
        None => Vec::new(),
    };
    if json {
        json::answer("sessions", serde_json::json!({ "sessions": all }))?;
        return Ok(OK);
    }
    if all.is_empty() {
        println!("no sessions yet: an agent's session appears once its hooks record a turn");
        return Ok(OK);
    }
    // The name last and whole (a Claude Code session's is a 36-character id; any unique
    // prefix of it names the session), the fixed columns first: 80 columns hold a name
    // of 20 characters. The key is in `--json` and `status`.
    let agents: Vec<String> = all
        .iter()
        .map(|s| s.agent.as_deref().map_or("-".into(), |a| first_line(a, 11)))
        .collect();
    let agent = agents.iter().map(|a| a.chars().count()).max();
    let agent = agent.unwrap_or(0).max(5);
    println!(
        "{:<16}  TURNS  CHECKPOINTS  {:<7}  {:<agent$}  NAME",
        "LAST ACTIVE", "OPEN", "AGENT"
    );
    for (s, agent_name) in all.iter().zip(&agents) {
        let mut active = super::format_time(s.touched_ms);
        active.truncate(16); // to the minute
        println!(
            "{active:<16}  {:>5}  {:>11}  {:<7}  {:<agent$}  {}",
            s.turns,
            s.checkpoints,
            s.pending.map_or("-".to_string(), |n| format!("turn:{n}")),
            agent_name,
            shown_name(s)
        );
    }
    Ok(OK)
}
