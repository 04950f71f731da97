//! The maintenance commands: `gc`, `repair`, and the hidden `maintain-due` that other
//! commands start in the background.

use crate::Workspace;
use crate::config::bytes_approx as bytes;
use crate::object::terminal_line;
use crate::retention::{self, GcOptions};
use anyhow::Result;

use crate::cli::json;
use crate::cli::progress::Bar;
use crate::cli::{OK, STILL_BROKEN, print_warnings};

/// `retrace maintain-due` (hidden): a due pass at the lowest priority, in the detached
/// process `crate::maintainer::maintain_later` starts. Its stdio is `/dev/null`: what the
/// pass warns about waits in the store for the next command. Opening never waits for another
/// process's restore, and the pass gives up when the workspace is busy.
pub fn maintain_due(dir: Option<&std::path::PathBuf>) -> Result<u8> {
    // First, before any thread starts: threads inherit the priority.
    crate::maintainer::lower_priority();
    let path = dir.cloned().unwrap_or_else(|| ".".into());
    let ws = Workspace::open(&path, &crate::Config::from_env().for_reading())?;
    let _ = ws.run_detached_pass();
    Ok(OK)
}

/// `retrace gc`: the policy (what a dry run skips, the grace default, the sweep of the home)
/// is [`retention::collect`]'s.
pub fn gc(ws: &Workspace, dry_run: bool, grace: Option<u64>, json: bool) -> Result<u8> {
    let opts = GcOptions {
        dry_run,
        grace_secs: grace,
    };
    let out = retention::collect(ws.working_copy(), &opts)?;
    print_warnings(ws);
    if json {
        json::answer("gc", &out)?;
        return Ok(OK);
    }
    let r = &out.gc;
    let n = |count: u64, noun: &str| format!("{count} {noun}{}", if count == 1 { "" } else { "s" });
    if let Some(m) = &out.retention {
        println!(
            "retention: {} expired, {} removed, {} dropped for the byte budget, {} pruned \
             from the log",
            n(m.expired_sessions.len() as u64, "session"),
            n(m.tombstones_pruned + m.sessions_dropped, "session record"),
            n(m.turns_evicted, "old turn"),
            n(m.snapshots_pruned, "snapshot row"),
        );
        println!(
            "the store holds {} of its {} budget{}",
            bytes(m.store_bytes),
            if m.max_store_bytes == 0 {
                "unlimited".to_string()
            } else {
                bytes(m.max_store_bytes)
            },
            if m.over_budget {
                " (over it: the rest is in use by kept history and never evicted)"
            } else {
                ""
            }
        );
    }
    let verb = if dry_run { "would free" } else { "freed" };
    println!(
        "{verb} {} ({} of {} stored objects nothing refers to); {} still in use",
        bytes(r.stored_bytes_freed),
        r.objects_freed,
        r.objects,
        r.reachable
    );
    if r.leftover_objects > 0 {
        println!(
            "including {} an interrupted snapshot stored and never recorded",
            n(r.leftover_objects, "object")
        );
    }
    if r.young_kept > 0 {
        println!(
            "kept {}: unreferenced but younger than the grace period (a capture running \
             now may be about to use them; `--grace 0` frees them too)",
            n(r.young_kept, "object")
        );
    }
    if !dry_run {
        let repacked = match r.frames_rewritten {
            0 => String::new(),
            f => format!(", {} repacked", n(f, "group")),
        };
        let whole_again = match r.materialised {
            0 => String::new(),
            m => format!(
                ", {} stored whole again (what they were stored against was freed)",
                n(m, "version")
            ),
        };
        println!(
            "store file {} -> {} on disk{repacked}{whole_again}{}",
            bytes(r.disk_bytes_before),
            bytes(r.disk_bytes_after),
            if r.compacted { " (compacted)" } else { "" }
        );
    }
    if let Some(d) = out
        .retention
        .as_ref()
        .map(|m| &m.dense)
        .filter(|d| d.frames > 0)
    {
        println!(
            "recompressed {} of older file versions more tightly: {} -> {}",
            n(d.frames, "group"),
            bytes(d.bytes_before),
            bytes(d.bytes_after)
        );
    }
    Ok(OK)
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
