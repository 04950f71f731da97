//! `retrace restore`: make the files equal to a snapshot, or only some paths of it.

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, REFUSED};
use crate::cli::json;
use crate::cli::names::SnapshotNames;
use crate::cli::open::{open, session_of};
use crate::cli::progress::Bar;
use crate::cli::text::{print_listed, restore_lines, warn_lost_installs};
use crate::object::terminal_line;
use crate::{ObjectId, Pick, RestoreOptions, Session, Workspace};

/// Make the files equal to a snapshot, or only some paths of it
///
/// With paths, only those files and directories (everything else on disk is untouched).
///
/// Restore or navigate? `restore` writes files from any snapshot (any session's, or one
/// of your own) and moves no session: undo and redo go on as before. `navigate` moves a
/// session to one of its own turns or checkpoints: its files, and where its undo and
/// redo start next.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The snapshot: id or unique prefix (8+ hex digits), label, or `turn:N`,
    /// `turn:N:before`, `checkpoint:N` of the session.
    id: String,
    /// Restore even over changes not in any snapshot (they are snapshotted first).
    #[arg(long)]
    force: bool,
    /// Only list what would change.
    #[arg(long)]
    dry_run: bool,
    /// Only these files or directories (relative to the workspace root), after `--`.
    #[arg(last = true)]
    paths: Vec<String>,
}

/// Runs `retrace restore`.
pub fn run(args: RestoreArgs, cx: &Ctx) -> Result<u8> {
    let ws = open(cx.dir())?;
    let id = SnapshotNames::new(&ws, cx.sid()).resolve(&args.id)?;
    // With a session, the restore is that session's: what another session wrote
    // last is theirs (the ownership rule), as its running turns' work always is.
    let session = cx
        .sid()
        .map(|s| session_of(&ws, Some(s), Pick::History))
        .transpose()?;
    restore(
        &ws,
        session.as_ref(),
        &id,
        &args.paths,
        args.force,
        args.dry_run,
        cx.json,
    )
}

/// `retrace restore`.
pub fn restore(
    ws: &Workspace,
    session: Option<&Session>,
    id: &ObjectId,
    paths: &[String],
    force: bool,
    dry_run: bool,
    json: bool,
) -> Result<u8> {
    let bar = Bar::new();
    // A dry run shows the plan even when the restore would be refused, and says so.
    let (r, refused, v) = if dry_run {
        let d = match session {
            Some(s) => s.restore_dry_run(id, paths, force, &bar)?,
            None => ws.restore_paths_dry_run(id, paths, force, &bar)?,
        };
        let v = json::restore_preview(&d);
        (d.outcome, d.refused, v)
    } else {
        let opts = RestoreOptions {
            force,
            dry_run: false,
        };
        let r = match session {
            Some(s) => s.restore(id, paths, opts, &bar)?,
            None => ws.restore_paths(id, paths, opts, &bar)?,
        };
        let v = json::restored(&r);
        if paths.is_empty() {
            warn_lost_installs(ws.working_copy().home(), ws.root());
        }
        (r, None, v)
    };
    drop(bar);
    if json {
        json::print(v);
    } else {
        let (write, delete) = if dry_run {
            ("would write", "would delete")
        } else {
            ("wrote", "deleted")
        };
        let lines = restore_lines(&r.left_alone, &r.written, &r.deleted, (write, delete));
        print_listed(&lines, "");
        if let Some(s) = r.safety_snapshot {
            println!(
                "your unsnapshotted changes were saved first as snapshot {}",
                s.short()
            );
        }
        if !r.verified {
            println!(
                "warning: these paths changed during the restore: {}",
                terminal_line(&r.verify_diff.join(", "))
            );
        }
        let named = terminal_line(&r.paths.join(", ")).into_owned();
        let what = match (dry_run, r.paths.is_empty()) {
            (true, true) => "dry run of restore to".to_string(),
            (false, true) => "restored".to_string(),
            (true, false) => format!("dry run of restore of {named} from"),
            (false, false) => format!("restored {named} from"),
        };
        println!(
            "{what} {}: {} written, {} deleted",
            id.short(),
            r.written.len(),
            r.deleted.len()
        );
        if let Some(f) = &refused {
            // The paths once, one per line (the message names some inline).
            if f.result == "held" {
                println!(
                    "the restore would be refused: {} path(s) hold another writer's work; \
                     leave them out, wait until that turn ends, or pass --force:",
                    f.count
                );
            } else {
                println!(
                    "the restore would be refused: {}:",
                    crate::error::dirty_refusal(f.count)
                );
            }
            for p in &f.paths {
                println!("  {}", terminal_line(p));
            }
            if f.count > f.paths.len() {
                println!("  ... and {} more", f.count - f.paths.len());
            }
        }
    }
    // Nothing to write is an answer (the files already equal the snapshot), not a refusal;
    // a path left alone (someone's edit, a file in the way) is: the disk is not the target.
    Ok(if refused.is_some() || !r.left_alone.is_empty() {
        REFUSED
    } else {
        OK
    })
}
