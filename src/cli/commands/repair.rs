//! `retrace repair`: check the store and repair what the files still hold.

use anyhow::Result;

use crate::Workspace;
use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, STILL_BROKEN};
use crate::cli::json;
use crate::cli::open::{open, print_warnings};
use crate::cli::progress::Bar;
use crate::object::terminal_line;

/// Check the store and repair what the files still hold
///
/// Verifies every stored object, forgets the damaged ones, stores them again from the
/// workspace's files where those still hold them, and lists the snapshots that stay
/// broken.
#[derive(clap::Args)]
pub struct RepairArgs {}

/// Runs `retrace repair`.
pub fn run(_: RepairArgs, cx: &Ctx) -> Result<u8> {
    repair(&open(cx.dir())?, cx.json)
}

/// `retrace repair`.
pub fn repair(ws: &Workspace, json: bool) -> Result<u8> {
    let r = ws.repair(&Bar::new())?;
    print_warnings(ws);
    if json {
        // Not ok when snapshots stay broken (exit 4), as every failing answer.
        let mut v = serde_json::to_value(&r)?;
        v["result"] = "repair".into();
        v["ok"] = r.broken.is_empty().into();
        json::print(v);
    } else {
        println!(
            "checked {} objects: {} damaged and forgotten; {} stored again from the workspace",
            r.objects,
            r.forgotten.len(),
            r.restored
        );
        if r.rebuilt_frames > 0 {
            println!(
                "wrote again {} frame(s) read back only through their parity (a damaged shard)",
                r.rebuilt_frames
            );
        }
        // Each names a path or a session: shown escaped.
        for f in r.faults.iter().take(20) {
            println!("  {}", terminal_line(f));
        }
        if r.broken.is_empty() {
            println!("every snapshot is whole");
        } else {
            println!(
                "{} snapshot(s) stay broken (their files are gone from the workspace):",
                r.broken.len()
            );
            for b in &r.broken {
                println!(
                    "  {}  {}",
                    b.id.short(),
                    terminal_line(&b.used_by.join(", "))
                );
            }
        }
    }
    Ok(if r.broken.is_empty() {
        OK
    } else {
        STILL_BROKEN
    })
}
