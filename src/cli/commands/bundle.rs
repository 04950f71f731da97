//! `retrace bundle`: one session and the files it needs, in one file.

use std::path::PathBuf;

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{reading_history, session_of};

/// Write a session and the file versions it needs to one file
///
/// For a bug report, or to move a session without a git remote: `retrace unbundle FILE`
/// brings it into another workspace. The file is checksummed (`docs/format.md`,
/// "Bundles"); it holds the files as they were, secrets included, except what retrace
/// keeps out of snapshots.
#[derive(clap::Args)]
pub struct BundleArgs {
    /// Only these turns: N, N..M, N.. or ..M.
    #[arg(value_name = "TURNS")]
    turns: Option<String>,
    /// The bundle file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
}

/// Runs `retrace bundle`.
pub fn run(args: BundleArgs, cx: &Ctx) -> Result<u8> {
    let turns = args
        .turns
        .as_deref()
        .map(super::export::parse_turns)
        .transpose()?;
    let ws = reading_history(cx.dir())?;
    let s = session_of(&ws, cx.sid(), Pick::History)?;
    let out = ws.bundle(&s, turns.as_ref(), &args.output)?;
    if cx.json {
        json::answer("bundled", &out)?;
    } else {
        println!(
            "bundled {} turn(s), {} checkpoint(s) and {} object(s) into {} ({})",
            out.turns,
            out.checkpoints,
            out.objects,
            args.output.display(),
            crate::config::bytes_approx(out.bytes)
        );
    }
    Ok(OK)
}
