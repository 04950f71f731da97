//! `retrace step begin|end`: what an adapter runs around each tool call that can write.

use anyhow::Result;

use crate::Pick;
use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, REFUSED};
use crate::cli::json;
use crate::cli::open::session;
use crate::protocol::ops::StepReport;

/// Begin or end a step: one tool call of a turn (for adapters)
///
/// What an adapter calls around each tool that can write.
#[derive(clap::Subcommand)]
#[command(hide = true)]
pub enum StepCommand {
    /// Record the start of a tool call; a shell tool's is captured first (the
    /// `step_captures` setting says when), so that what it destroys can be brought back.
    Begin {
        /// The tool's name (`Bash`, `Edit`, ...).
        #[arg(long)]
        tool: String,
        /// One line of its input: the command, the file.
        #[arg(long, default_value = "")]
        summary: String,
        /// The host's id of the tool call (matches its end).
        #[arg(long, default_value = "")]
        call: String,
        /// A file an edit tool writes (repeatable); none: a shell tool, which may write
        /// anything.
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<String>,
    },
    /// Record the end of a tool call (a shell tool's is captured after it).
    End {
        /// The host's id of the tool call; empty: the newest step still running.
        #[arg(long, default_value = "")]
        call: String,
    },
}

/// Runs `retrace step ...`.
pub fn run(command: StepCommand, cx: &Ctx) -> Result<u8> {
    let s = session(cx.dir(), cx.sid(), Pick::Open)?;
    match command {
        StepCommand::Begin {
            tool,
            summary,
            call,
            files,
        } => {
            let step = s.begin_step(&call, &tool, &summary, &files)?;
            print_step(step.as_ref(), "began", cx.json)
        }
        StepCommand::End { call } => {
            let step = s.end_step(&call)?;
            print_step(step.as_ref(), "ended", cx.json)
        }
    }
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
