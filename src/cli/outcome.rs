//! How the operations that move files report: an undo's, redo's, revert's, navigation's or
//! checkpoint's [`Outcome`] (one line, the paths, the safety snapshot), a dry run's preview,
//! and the exit code each means. The operations themselves run through [`crate::protocol::ops`],
//! as `serve`, MCP and the hooks run them.

use anyhow::Result;

use crate::cli::exit::{BUSY, OK, REFUSED};
use crate::cli::json;
use crate::cli::progress::Bar;
use crate::cli::text::{print_listed, restore_lines};
use crate::history::RevertPreview;
use crate::object::{terminal_line, terminal_text};
use crate::protocol::ops::{Context, OpError, Operation};
use crate::{OpOptions, Outcome, Session};

/// Most paths of other writers a navigation's report lists one per line.
pub const REWOUND_LINES: usize = 20;

/// Prints an outcome (JSON or one line plus details) and returns its exit code. Paths,
/// prompts and labels are printed escaped for the terminal; JSON keeps them exact.
pub fn report(o: &Outcome, json: bool) -> Result<u8> {
    report_at(o, None, json)
}

/// [`report`] of a navigation to `target` (named in the first line instead of a turn).
pub fn report_at(o: &Outcome, target: Option<&str>, json: bool) -> Result<u8> {
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
            let lines = restore_lines(skipped, files_written, files_deleted, ("wrote", "deleted"));
            print_listed(&lines, "  ");
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
pub fn print_preview(p: &RevertPreview, what: &str, force: bool, json: bool) -> Result<u8> {
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
        print_listed(&lines, "");
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

/// Runs `request` on `s` through [`crate::protocol::ops`], as `serve`, MCP and the hooks run
/// it, with a progress bar on stderr while it runs; a library failure stays the library's
/// [`crate::Error`] (its exit code, [`crate::cli::exit::classify`]).
pub fn run_op<O: Operation>(s: &Session, request: O) -> Result<O::Response> {
    let bar = Bar::new();
    let mut turn = None;
    let answer = request.run(&mut Context::new(s, &mut turn).with_progress(&bar));
    drop(bar);
    answer.map_err(|e| match e {
        OpError::Failed(e) => e.into(),
        e => e.into(),
    })
}
