//! `retrace sessions`: the workspace's sessions, most recently used first.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::open_reading;
use crate::cli::text::{format_time, shown_name};
use crate::history::inspect::first_line;

/// List the workspace's sessions (one per agent conversation)
///
/// Most recently used first: name, agent, turns, last activity, and whether a turn is
/// open.
#[derive(clap::Args)]
pub struct SessionsArgs {}

/// Runs `retrace sessions`.
pub fn run(_: SessionsArgs, cx: &Ctx) -> Result<u8> {
    sessions(open_reading(cx.dir())?.ok().as_ref(), cx.json)
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
        let mut active = format_time(s.touched_ms);
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
