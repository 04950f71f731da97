//! `retrace export`: a session's turns as git commits on a side ref.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, Usage};
use crate::cli::json;
use crate::cli::open::{reading_history, session_of};
use crate::{Exported, GitExport};

/// Write a session's turns as git commits on a side ref
///
/// Each turn becomes a commit whose tree is the workspace after it and whose parent is the
/// workspace before it, its message the prompt with `Retrace-*` trailers; checkpoints
/// likewise. `git log -p REF` then shows every turn's change. Only the ref is written:
/// never a branch, the index, HEAD or the work tree. By default into a bare repository
/// beside the store (`--push` sends the ref on); `--repo .` writes into the workspace's own
/// repository. The files go as they were: whatever they held, secrets included, except
/// what retrace keeps out of snapshots.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// Only these turns: N, N..M, N.. or ..M (checkpoints taken between them go too).
    #[arg(value_name = "TURNS")]
    turns: Option<String>,
    /// The ref to write (refs/retrace/NAME by convention).
    #[arg(long = "git-ref", value_name = "REF")]
    git_ref: String,
    /// A directory in the repository to write to (default: a bare repository beside the
    /// store).
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// Push the ref to this remote afterwards (a remote's name, a URL or a path).
    #[arg(long, value_name = "REMOTE")]
    push: Option<String>,
    /// Replace the ref even when it holds another history.
    #[arg(long)]
    force: bool,
}

/// `N`, `N..M`, `N..` or `..M` as a range of turn numbers.
pub fn parse_turns(s: &str) -> Result<RangeInclusive<u64>> {
    let num = |t: &str, default: u64| -> Result<u64> {
        let t = t.trim().trim_start_matches("turn:");
        if t.is_empty() {
            return Ok(default);
        }
        t.parse().map_err(|_| {
            Usage(format!(
                "{s:?} is not a turn range: give N, N..M, N.. or ..M"
            ))
            .into()
        })
    };
    let range = if let Some((a, b)) = s.split_once("..") {
        num(a, 1)?..=num(b, u64::MAX)?
    } else {
        let n = num(s, 0)?;
        n..=n
    };
    if range.is_empty() || *range.end() == 0 {
        return Err(Usage(format!("{s:?} names no turn: turns are numbered from 1")).into());
    }
    Ok(range)
}

/// Runs `retrace export`.
pub fn run(args: ExportArgs, cx: &Ctx) -> Result<u8> {
    let turns = args.turns.as_deref().map(parse_turns).transpose()?;
    let ws = reading_history(cx.dir())?;
    let s = session_of(&ws, cx.sid(), Pick::History)?;
    let opts = GitExport {
        reference: args.git_ref,
        repo: args.repo,
        turns,
        force: args.force,
        push: args.push.clone(),
    };
    let out = ws.export_git(&s, &opts)?;
    if cx.json {
        json::answer("exported", &out)?;
    } else {
        print_exported(&out, args.push.as_deref());
    }
    Ok(OK)
}

fn print_exported(out: &Exported, pushed: Option<&str>) {
    let what = format!("{} turn(s), {} checkpoint(s)", out.turns, out.checkpoints);
    if out.commits == 0 {
        println!(
            "{} in {} already holds {what}",
            out.reference,
            out.repo.display()
        );
    } else {
        println!(
            "exported {what} to {} in {} ({} new commit(s), tip {})",
            out.reference,
            out.repo.display(),
            out.commits,
            &out.tip[..out.tip.len().min(12)]
        );
    }
    match pushed {
        Some(remote) => println!("pushed {} to {remote}", out.reference),
        None => println!(
            "see it with: git --git-dir {} log -p {}",
            out.repo.display(),
            out.reference
        ),
    }
}
