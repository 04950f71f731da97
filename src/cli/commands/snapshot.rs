//! `retrace snapshot`: capture the workspace now.

use anyhow::Result;

use crate::Workspace;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{label_of, maintain_later, open_to_snapshot};
use crate::cli::progress::Bar;
use crate::cli::text::counted;
use crate::config::bytes_approx;
use crate::object::terminal_line;

/// Capture the workspace now.
#[derive(clap::Args)]
pub struct SnapshotArgs {
    /// A label shown by `retrace log` (usable where a snapshot id is).
    #[arg(value_name = "LABEL")]
    label: Option<String>,
    /// The label, as an option (as `checkpoint --label`).
    #[arg(long = "label", value_name = "LABEL", conflicts_with = "label")]
    label_opt: Option<String>,
    /// Walk the whole workspace, whatever a watcher says (a check on the watcher).
    #[arg(long)]
    rescan: bool,
}

/// Runs `retrace snapshot`.
pub fn run(args: SnapshotArgs, cx: &Ctx) -> Result<u8> {
    let ws = open_to_snapshot(cx.dir())?;
    snapshot(
        &ws,
        label_of(args.label.or(args.label_opt))?,
        cx.json,
        args.rescan,
    )
}

/// `retrace snapshot`.
pub fn snapshot(ws: &Workspace, label: Option<String>, json: bool, rescan: bool) -> Result<u8> {
    let bar = Bar::new();
    let last = ws.log()?.into_iter().next().map(|s| s.root);
    let c = if rescan {
        ws.snapshot_rescan(label, &bar)?
    } else {
        ws.snapshot_summary(label, &bar)?
    };
    drop(bar);
    maintain_later(ws.working_copy());
    // The figure `log` shows for this snapshot: what its row recorded (none when it added
    // no row).
    let added = if last == Some(c.id) { 0 } else { c.new_bytes };
    if json {
        json::answer(
            "snapshot",
            serde_json::json!({
                "id": c.id.to_hex(), "files": c.files, "bytes": c.bytes, "bytes_added": added,
                "new_objects": c.new_objects, "new_bytes": c.new_bytes, "hashed": c.hashed,
                "skipped": c.skipped, "nested_repos": c.nested_repos, "secrets": c.secrets,
                "captured_repos": c.captured_repos, "walked_because": c.walked_because,
            }),
        )?;
    } else {
        println!("snapshot {}", c.id);
        if last == Some(c.id) {
            // The same files as the last snapshot: its row, with the label if one was given.
            println!(
                "no change since {} ({}, {})",
                c.id.short(),
                counted(c.files, "file"),
                bytes_approx(c.bytes)
            );
        } else {
            println!(
                "{}, {}; {} added to the store ({} read)",
                counted(c.files, "file"),
                bytes_approx(c.bytes),
                bytes_approx(added),
                counted(c.hashed, "file")
            );
        }
        for n in &c.nested_repos {
            println!("nested repository left alone: {}", terminal_line(n));
        }
        for n in &c.captured_repos {
            println!("nested repository captured: {}", terminal_line(n));
        }
        for s in &c.skipped {
            println!(
                "skipped {}: {}",
                terminal_line(&s.path),
                terminal_line(&s.reason)
            );
        }
        for s in &c.secrets {
            println!(
                "secret left out: {} (allow it with the allow_secrets setting)",
                terminal_line(s)
            );
        }
    }
    Ok(OK)
}
