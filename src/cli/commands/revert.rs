//! `retrace revert`: take back one past turn or step, keeping later changes.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::Usage;
use crate::cli::open::session;
use crate::cli::outcome;
use crate::object::terminal_line;
use crate::protocol::ops::{self};
use crate::{Outcome, Pick, Session};

/// Take back one past turn or step, keeping later changes
///
/// Any turn of the session, not only the newest, or one step of it (`turn:N.K`): paths
/// changed since are merged when the changes touch other lines, else the revert is
/// refused as a conflict. Undo undoes the revert; redo redoes it.
#[derive(clap::Args)]
pub struct RevertArgs {
    /// The turn: `turn:N` (or N); one step of it: `turn:N.K` (`retrace log --steps`).
    turn: String,
    /// Take the turn's before-version where a path conflicts (a safety snapshot keeps
    /// the disk first).
    #[arg(long)]
    force: bool,
    /// Only list what would change, and what conflicts and why.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `retrace revert`.
pub fn run(args: RevertArgs, cx: &Ctx) -> Result<u8> {
    let turn = &args.turn;
    let named = turn.strip_prefix("turn:").unwrap_or(turn);
    let (n, step) = match named.split_once('.') {
        Some((n, k)) => (n.parse::<u64>().ok(), k.parse::<u64>().ok().map(Some)),
        None => (named.parse::<u64>().ok(), Some(None)),
    };
    let (Some(n), Some(step)) = (n, step) else {
        return Err(Usage(format!(
            "revert takes a turn as turn:N, or one step of it as turn:N.K (see `retrace \
             log --steps`), not {turn:?}"
        ))
        .into());
    };
    let s = session(cx.dir(), cx.sid(), Pick::History)?;
    revert(&s, (n, step), args.force, args.dry_run, cx.json)
}

/// `retrace revert turn:N` (or `turn:N.K`, one step), through [`ops::RevertRequest`].
fn revert(
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
    let request = ops::RevertRequest {
        turn,
        step,
        force: Some(force),
        dry_run: Some(dry_run),
    };
    let o = match outcome::run_op(s, request)? {
        ops::RevertResponse::Preview(p) => {
            return outcome::print_preview(&p, &format!("revert of {what}"), force, json);
        }
        ops::RevertResponse::Done(report) => report.0,
    };
    if !json && let Outcome::Restored { merged, .. } = &o {
        for p in merged {
            println!(
                "  merged {} (the changes made since the turn kept)",
                terminal_line(p)
            );
        }
    }
    let code = outcome::report_at(&o, Some(&format!("revert of {what}")), json)?;
    if !json && matches!(o, Outcome::Conflict { .. }) {
        println!(
            "(`retrace revert {name} --dry-run` says why each path conflicts; `retrace diff \
             {name} -p` shows what it changed)"
        );
    }
    Ok(code)
}
