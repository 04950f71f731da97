//! `retrace gc`: apply retention, drop what nothing refers to, compact the store.

use anyhow::Result;

use crate::Workspace;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{open, print_warnings};
use crate::config::bytes_approx as bytes;
use crate::retention::{self, GcOptions};

/// Free space: drop what nothing refers to, compact the store
///
/// Applies retention, removes objects no snapshot, turn or checkpoint refers to, and
/// compacts the store.
#[derive(clap::Args)]
pub struct GcArgs {
    /// Only report what would be freed.
    #[arg(long)]
    dry_run: bool,
    /// Keep unreferenced objects younger than this (a capture elsewhere may be about to
    /// record them); default: the `gc_grace_secs` setting (3600).
    #[arg(long, value_name = "SECS")]
    grace: Option<u64>,
}

/// Runs `retrace gc`.
pub fn run(args: GcArgs, cx: &Ctx) -> Result<u8> {
    gc(&open(cx.dir())?, args.dry_run, args.grace, cx.json)
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
             from the log{}{}",
            n(m.expired_sessions.len() as u64, "session"),
            n(m.tombstones_pruned + m.sessions_dropped, "session record"),
            n(m.turns_evicted, "old turn"),
            n(m.snapshots_pruned, "snapshot row"),
            if m.bursts_thinned > 0 {
                format!(", {} thinned", n(m.bursts_thinned, "burst"))
            } else {
                String::new()
            },
            if m.ops_folded > 0 {
                format!(
                    ", {} folded into the turns they record",
                    n(m.ops_folded, "op-log record")
                )
            } else {
                String::new()
            }
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
    if let Some(t) = out
        .retention
        .as_ref()
        .map(|m| &m.dense.trees)
        .filter(|t| t.objects > 0)
    {
        println!(
            "packed {} of directories together, each version after the first stored as what \
             changed: {} -> {}",
            n(t.objects, "tree"),
            bytes(t.bytes_before),
            bytes(t.bytes_after)
        );
    }
    if let Some(t) = out
        .retention
        .as_ref()
        .map(|m| &m.dense.roots)
        .filter(|t| t.objects > 0)
    {
        println!(
            "packed {} that later versions are stored against into shared frames, similar \
             files compressed as one: {} -> {}",
            n(t.objects, "file version"),
            bytes(t.bytes_before),
            bytes(t.bytes_after)
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
