//! `retrace checkpoint`: snapshot the workspace as a labelled checkpoint of the session.

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::open::{label_of, maintain_later, open_to_snapshot, session_of};
use crate::cli::outcome;
use crate::protocol::ops::{self};

/// Snapshot the workspace as a labelled checkpoint of the session
#[derive(clap::Args)]
pub struct CheckpointArgs {
    /// Label (usable as an anchor for `navigate`, and where a snapshot id is).
    #[arg(value_name = "LABEL")]
    label: Option<String>,
    /// The label, as an option (as `snapshot --label`).
    #[arg(long = "label", value_name = "LABEL", conflicts_with = "label")]
    label_opt: Option<String>,
}

/// Runs `retrace checkpoint`.
pub fn run(args: CheckpointArgs, cx: &Ctx) -> Result<u8> {
    let label = label_of(args.label.or(args.label_opt))?;
    let ws = open_to_snapshot(cx.dir())?;
    let s = session_of(&ws, cx.sid(), Pick::Create)?;
    let code = outcome::report(
        &outcome::run_op(&s, ops::CheckpointRequest { label })?.0,
        cx.json,
    )?;
    maintain_later(s.workspace());
    Ok(code)
}
