//! `retrace-dump`: inspect stores read-only — stats, trees, objects, integrity.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::history::db::{self, SessionKey};
use crate::object::{EntryKind, ObjectKind};
use crate::store::{ReadOnlyStore, Store, StoreReader};
use crate::{Config, ObjectId, StoreError, Workspace};
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// Inspect retrace stores (read-only; never changes them).
#[derive(Parser)]
#[command(name = "retrace-dump", version, about)]
struct Cli {
    /// A workspace directory whose store to read.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A store file to read.
    #[arg(long, global = true, value_name = "PATH")]
    store: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Object counts, logical vs stored vs file bytes (every store when none is given).
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a tree: a snapshot id (or prefix) and an optional path inside it.
    Tree {
        /// Snapshot or tree id.
        id: String,
        /// A directory inside it.
        path: Option<String>,
    },
    /// Print an object: a blob's bytes, or a tree's listing.
    Cat {
        /// Object id (64 hex digits) or snapshot prefix.
        id: String,
    },
    /// Re-hash every object and check every tree reference (every store when none is given).
    Verify,
    /// Sessions of a store: key, turns, cursor, redo, pending turn, last use.
    Sessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every turn and checkpoint record of one session, in full.
    Turns {
        /// The session: a key prefix (as `sessions` prints it) or the host's session id.
        session: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The `retrace-dump` binary: parses the arguments, runs the command, maps its result to an exit code.
#[must_use]
pub fn main() -> ExitCode {
    crate::error::install_panic_hook();
    match run(&Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(4),
        Err(e) => {
            // Library errors already carry their cause in one line; others get the chain.
            let ours = e.downcast_ref::<crate::Error>().is_some()
                || e.downcast_ref::<crate::StoreError>().is_some()
                || e.downcast_ref::<crate::OpenError>().is_some();
            if ours {
                eprintln!("retrace-dump: {e}");
            } else {
                eprintln!("retrace-dump: {e:#}");
            }
            ExitCode::from(3)
        }
    }
}

fn stores(cli: &Cli, all_if_none: bool) -> Result<Vec<PathBuf>> {
    if let Some(s) = &cli.store {
        return Ok(vec![s.clone()]);
    }
    let config = Config::from_env();
    if let Some(d) = &cli.dir {
        return Ok(vec![Workspace::locate_store(d, &config)?]);
    }
    if !all_if_none {
        return Ok(vec![Workspace::locate_store(Path::new("."), &config)?]);
    }
    let dir = config.home().join("workspaces");
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let p = e.path().join("store.redb");
            // Whatever stands there (a directory, a dangling link) is reported by `open`.
            if p.symlink_metadata().is_ok() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether opening failed only because another process is creating the store.
fn is_being_created(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<StoreError>(),
        Some(StoreError::BeingCreated { .. })
    )
}

fn open(path: &Path) -> Result<ReadOnlyStore> {
    use std::os::unix::fs::FileTypeExt;
    let move_aside = "move it aside (the next `retrace` command in the workspace creates a \
                      fresh store)";
    let ft = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read_link(path) {
            Ok(target) => bail!(
                "{} is a symlink to {}, which does not exist; {move_aside}",
                path.display(),
                target.display()
            ),
            Err(_) => bail!(
                "no store at {}; run `retrace snapshot` in the workspace first",
                path.display()
            ),
        },
        Err(e) => bail!("cannot look at {}: {e}", path.display()),
    };
    let what = if ft.is_file() {
        return Ok(Store::open_read_only(path)?);
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "a device file"
    };
    bail!(
        "{} is {what}, not a store file; {move_aside}",
        path.display()
    )
}

fn resolve(r: &StoreReader, id: &str) -> Result<ObjectId> {
    if let Some(full) = ObjectId::from_hex(id) {
        return Ok(full);
    }
    Ok(r.resolve(id)?)
}

/// The store file's bytes by part: each table's pages (entries, B-tree metadata, the free
/// room inside its pages) counted under what it holds, and the rest of the disk blocks.
#[derive(Debug, Default, serde::Serialize)]
struct FileParts {
    /// `packs`: the pack log.
    packs: u64,
    /// `objects` and `staged`: the object index.
    index: u64,
    /// The history and snapshot-log tables (every table of the layers above, `snapshots`,
    /// `snapshot_added`).
    history: u64,
    /// `meta`.
    other: u64,
    /// Disk blocks no table's pages account for: redb's headers, allocator state and free
    /// pages.
    free: u64,
}

fn file_parts(tables: &[crate::store::TableBytes], disk_bytes: u64) -> FileParts {
    let mut p = FileParts::default();
    for t in tables {
        let b = t.stored + t.metadata + t.fragmented;
        *match t.table.as_str() {
            "packs" => &mut p.packs,
            "objects" | "staged" => &mut p.index,
            "meta" => &mut p.other,
            _ => &mut p.history,
        } += b;
    }
    p.free = disk_bytes.saturating_sub(p.packs + p.index + p.history + p.other);
    p
}

fn run(cli: &Cli) -> Result<bool> {
    match &cli.command {
        Command::Stats { json } => {
            for path in stores(cli, true)? {
                let store = open(&path)?;
                let r = store.reader()?;
                let s = r.stats()?;
                #[allow(clippy::cast_precision_loss)] // a ratio to print
                let ratio = s.disk_bytes as f64 / s.log_bytes.max(1) as f64;
                let maintained = r.maintained_ms()?;
                if *json {
                    let mut v = serde_json::to_value(&s)?;
                    v["maintained_ms"] = serde_json::json!(maintained);
                    v["store"] = serde_json::json!(path.display().to_string());
                    v["workspace"] =
                        serde_json::json!(r.workspace()?.map(|p| p.display().to_string()));
                    v["disk_to_log_ratio"] = serde_json::json!(ratio);
                    let tables = r.table_bytes(crate::history::tables::ALL)?;
                    v["file_parts"] = serde_json::to_value(file_parts(&tables, s.disk_bytes))?;
                    v["tables"] = serde_json::to_value(tables)?;
                    println!("{v}");
                } else {
                    println!("store      {}", path.display());
                    if let Some(w) = r.workspace()? {
                        println!("workspace  {}", w.display());
                    }
                    println!("snapshots  {}", s.snapshots);
                    println!(
                        "objects    {} blobs, {} chunked blobs, {} trees",
                        s.blobs, s.chunked, s.trees
                    );
                    println!("logical    {} (blob content)", bytes(s.logical_bytes));
                    println!(
                        "stored     {} compressed in the frames objects use ({} of payloads \
                         before compression); the pack log holds {} in packs, {} appended \
                         since the store began",
                        bytes(s.frame_bytes),
                        bytes(s.payload_bytes),
                        bytes(s.packed_bytes),
                        bytes(s.log_bytes)
                    );
                    println!(
                        "deltas     {} of {} objects stored as deltas, saving {} before \
                         compression; by chain depth: {}",
                        s.deltas,
                        s.deltas + s.whole,
                        bytes(s.delta_saved_bytes),
                        depth_histogram(&s.depths)
                    );
                    println!(
                        "file       {} on disk ({ratio:.3}x the pack log; length {})",
                        bytes(s.disk_bytes),
                        bytes(s.file_bytes)
                    );
                    let tables = r.table_bytes(crate::history::tables::ALL)?;
                    let k = &s.stored_by_kind;
                    println!(
                        "where      in the packs: {} file contents, {} deltas, {} trees, {} \
                         chunk lists, {} no object uses (freed frames, room at the tail)",
                        bytes(k.contents),
                        bytes(k.deltas),
                        bytes(k.trees),
                        bytes(k.chunk_lists),
                        bytes(s.packed_bytes.saturating_sub(s.frame_bytes))
                    );
                    let parts = file_parts(&tables, s.disk_bytes);
                    println!(
                        "           in the file: {} pack log, {} object index, {} history \
                         (sessions, turns, steps, snapshot log, ledger), {} other tables, {} \
                         redb's own pages and free space",
                        bytes(parts.packs),
                        bytes(parts.index),
                        bytes(parts.history),
                        bytes(parts.other),
                        bytes(parts.free)
                    );
                    for t in tables {
                        println!(
                            "  table {:<14} {:>8} entries, {} stored, {} metadata, {} unused",
                            t.table,
                            t.entries,
                            bytes(t.stored),
                            bytes(t.metadata),
                            bytes(t.fragmented)
                        );
                    }
                    if maintained == 0 {
                        println!("maintained never");
                    } else {
                        let ago = crate::store::now_ms().saturating_sub(maintained) / 1000;
                        println!("maintained {ago} s ago (retention, budget, compaction)");
                    }
                }
            }
            Ok(true)
        }
        Command::Tree { id, path } => {
            let store = open(&stores(cli, false)?[0])?;
            let r = store.reader()?;
            let mut tree_id = resolve(&r, id)?;
            if let Some(p) = path {
                for part in p.split('/').filter(|s| !s.is_empty()) {
                    let tree = r.read_tree(&tree_id)?;
                    let e = tree
                        .entries
                        .iter()
                        .find(|e| e.name == part.as_bytes() && e.kind == EntryKind::Dir)
                        .with_context(|| format!("no directory {part} in {}", tree_id.short()))?;
                    tree_id = e.id;
                }
            }
            print_tree(&r, &tree_id)?;
            Ok(true)
        }
        Command::Cat { id } => {
            let store = open(&stores(cli, false)?[0])?;
            let r = store.reader()?;
            let id = resolve(&r, id)?;
            match r.record(&id)?.kind {
                ObjectKind::Tree => print_tree(&r, &id)?,
                _ => {
                    r.read_blob_into(&id, &mut std::io::stdout().lock())??;
                }
            }
            Ok(true)
        }
        Command::Sessions { json } => {
            let store = open(&stores(cli, false)?[0])?;
            let tx = store.begin_read()?;
            let (mut rows, mut owners) = (Vec::new(), Vec::new());
            for (key, rec) in db::sessions(&tx)? {
                let l = db::load(&tx, &key)?;
                // A pending turn's owner: alive, dead, or why it cannot be known (kept).
                let (lease, owner) = match l.state.pending {
                    Some(n) => match db::lease(&tx, &key, n)? {
                        Some(Ok(r)) => {
                            let alive = crate::lease::liveness(&r, Config::from_env().home());
                            let text = owner_text(&r, &alive);
                            let v = serde_json::json!({
                                "pid": r.pid, "hostname": r.hostname,
                                "heartbeat_ms": r.heartbeat_ms, "liveness": alive,
                            });
                            (v, Some(text))
                        }
                        Some(Err(why)) => {
                            let text = format!("unreadable lease: {why}");
                            (
                                serde_json::json!({"unreadable": why.to_string()}),
                                Some(text),
                            )
                        }
                        None => (serde_json::json!(null), None),
                    },
                    None => (serde_json::json!(null), None),
                };
                owners.push(owner);
                rows.push(serde_json::json!({
                    "name": l.name,
                    "lease": lease,
                    "session": hex(&key), "created_ms": rec.created_ms,
                    "touched_ms": rec.touched_ms, "turns": l.turns.len(),
                    "checkpoints": l.checkpoints.len(), "ops": l.ops,
                    "cursor": l.state.cursor, "redo": l.state.redo,
                    "pending": l.state.pending,
                }));
            }
            if *json {
                println!("{}", serde_json::Value::Array(rows));
            } else if rows.is_empty() {
                println!("no sessions");
            } else {
                for (r, owner) in rows.iter().zip(&owners) {
                    let redo: Vec<String> = r["redo"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|u| format!("turn:{}", u[0]))
                        .collect();
                    println!(
                        "{}  {}  turns {:>5}  checkpoints {:>4}  ops {:>6}  cursor {:<10} \
                         pending {:<10} redo {}",
                        r["session"].as_str().unwrap_or(""),
                        r["name"].as_str().unwrap_or("(unnamed)"),
                        r["turns"].as_u64().unwrap_or(0),
                        r["checkpoints"].as_u64().unwrap_or(0),
                        r["ops"].as_u64().unwrap_or(0),
                        turn_text(r["cursor"].as_u64()),
                        turn_text(r["pending"].as_u64()),
                        if redo.is_empty() {
                            "-".to_string()
                        } else {
                            redo.join(", ")
                        }
                    );
                    if let Some(o) = owner {
                        println!("    owner of the pending turn: {o}");
                    }
                }
            }
            Ok(true)
        }
        Command::Turns { session, json } => {
            let store = open(&stores(cli, false)?[0])?;
            let tx = store.begin_read()?;
            let keys: Vec<SessionKey> = db::sessions(&tx)?.into_iter().map(|(k, _)| k).collect();
            let key = match keys
                .iter()
                .filter(|k| hex(k).starts_with(session.as_str()))
                .count()
            {
                1 if session.len() >= 8 => *keys
                    .iter()
                    .find(|k| hex(k).starts_with(session.as_str()))
                    .unwrap_or(&keys[0]),
                _ => db::session_key(session),
            };
            if !keys.contains(&key) {
                bail!(
                    "no session {session} in {}; see `retrace-dump sessions`",
                    store.path().display()
                );
            }
            let l = db::load(&tx, &key)?;
            if *json {
                println!(
                    "{}",
                    serde_json::json!({"session": hex(&key), "state": l.state,
                        "turns": l.turns, "checkpoints": l.checkpoints})
                );
            } else {
                print_turns(&key, &l)?;
            }
            Ok(true)
        }
        Command::Verify => {
            let mut clean = true;
            for path in stores(cli, true)? {
                // Only faults inside a store that opened are damage that `repair` can mend.
                let (faults, opened) = match open(&path) {
                    Ok(store) => {
                        let f = crate::verify::verify(&store)?;
                        (f.iter().map(ToString::to_string).collect(), true)
                    }
                    Err(e) if is_being_created(&e) => {
                        // Another process is creating it: nothing to verify yet, no fault.
                        println!("new    {} (being created)", path.display());
                        continue;
                    }
                    Err(e) => (vec![format!("{e}")], false),
                };
                if faults.is_empty() {
                    println!("ok     {}", path.display());
                } else {
                    clean = false;
                    println!("FAULTS {} ({})", path.display(), faults.len());
                    for f in faults.iter().take(50) {
                        println!("  {f}");
                    }
                    if opened {
                        println!(
                            "  `retrace repair` in the workspace forgets damaged objects and \
                             stores them again from its files"
                        );
                    }
                }
            }
            Ok(clean)
        }
    }
}

fn print_tree(r: &StoreReader, id: &ObjectId) -> Result<()> {
    for e in r.read_tree(id)?.entries {
        let kind = match e.kind {
            EntryKind::File => "file",
            EntryKind::Executable => "exec",
            EntryKind::Symlink => "link",
            EntryKind::Dir => "dir ",
            EntryKind::NestedRepo => "repo",
        };
        println!(
            "{kind} {} {:>10} {}",
            e.id,
            bytes(e.size),
            crate::object::show_path(&e.name)
        );
    }
    Ok(())
}

/// `turns` as text: the session's state, then every field of every turn and checkpoint
/// record, one per line, named as in docs/format.md.
fn print_turns(key: &SessionKey, l: &db::Loaded) -> Result<()> {
    let st = &l.state;
    let redo: Vec<String> = st
        .redo
        .iter()
        .map(|(t, m)| Ok(format!("turn:{t} ({})", word(m)?)))
        .collect::<Result<_>>()?;
    println!("session {}", hex(key));
    field("cursor", &turn_text(st.cursor));
    field("pending", &turn_text(st.pending));
    field("redo", &list(&redo));
    field("last_known", &id_text(st.last_known.as_ref()));
    field("next_turn", &st.next_turn.to_string());
    field("next_checkpoint", &st.next_checkpoint.to_string());
    for t in &l.turns {
        let c = t.counts;
        println!(
            "\nturn {}  {}  +{} ~{} -{}",
            t.number,
            word(&t.state)?,
            c.added,
            c.modified,
            c.deleted
        );
        field("version", &t.version.to_string());
        field("parent", &turn_text(t.parent));
        field("anchor", &text(t.anchor.as_deref()));
        field("leaf", &text(t.leaf.as_deref()));
        field("rounds", &list(&t.rounds));
        field("prompt", &text(t.prompt.as_deref()));
        field("began_ms", &t.began_ms.to_string());
        field(
            "ended_ms",
            &t.ended_ms.map_or("-".into(), |m| m.to_string()),
        );
        field("before", &id_text(t.before.as_ref()));
        field("after", &id_text(t.after.as_ref()));
        field("reason", &text(t.reason.as_deref()));
    }
    for c in &l.checkpoints {
        println!("\ncheckpoint {}  {}", c.number, text(c.label.as_deref()));
        field("version", &c.version.to_string());
        field("snapshot", &c.snapshot.to_string());
        field("cursor", &turn_text(c.cursor));
        field("time_ms", &c.time_ms.to_string());
    }
    Ok(())
}

/// One `name  value` line of a record; a value of several lines continues aligned.
fn field(name: &str, value: &str) {
    let mut lines = value.lines();
    println!("  {name:<16}{}", lines.next().unwrap_or(""));
    for l in lines {
        println!("  {:<16}{l}", "");
    }
}

/// An enum's name as its JSON spells it (`complete`, `conversation_only`, `both`).
fn word<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_value(v)?
        .as_str()
        .unwrap_or_default()
        .to_string())
}

fn turn_text(t: Option<u64>) -> String {
    t.map_or("-".into(), |t| format!("turn:{t}"))
}

fn id_text(id: Option<&ObjectId>) -> String {
    id.map_or("-".into(), ToString::to_string)
}

fn text(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

/// Who owns a pending turn, in words: `pid 42 on host, heartbeat 3 s ago, alive`.
fn owner_text(r: &crate::lease::LeaseRecord, alive: &crate::lease::Liveness) -> String {
    use crate::lease::Liveness;
    let ago = crate::store::now_ms().saturating_sub(r.heartbeat_ms) / 1000;
    let state = match alive {
        Liveness::Alive => "alive".to_string(),
        Liveness::Dead => "dead".to_string(),
        Liveness::Uncertain(why) => format!("unknown ({why})"),
    };
    format!(
        "pid {} on {}, heartbeat {ago} s ago, {state}",
        r.pid, r.hostname
    )
}

fn hex(key: &SessionKey) -> String {
    key.short()
}

/// A byte count as reports show it (`12.3 KiB`).
/// `1-10: 40, 11-20: 3, ...`: deltas per band of ten depths (`none` without deltas).
fn depth_histogram(depths: &std::collections::BTreeMap<u8, u64>) -> String {
    let mut bands = std::collections::BTreeMap::<u8, u64>::new();
    for (d, n) in depths {
        *bands.entry(d.saturating_sub(1) / 10).or_default() += n;
    }
    if bands.is_empty() {
        return "none".into();
    }
    bands
        .iter()
        .map(|(b, n)| format!("{}-{}: {n}", b * 10 + 1, b * 10 + 10))
        .collect::<Vec<_>>()
        .join(", ")
}

fn bytes(n: u64) -> String {
    crate::config::bytes_approx(n)
}
