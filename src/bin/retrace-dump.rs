//! `retrace-dump`: inspect stores read-only — stats, trees, objects, integrity.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use retrace::history::db::{self, SessionKey};
use retrace::object::{EntryKind, ObjectKind};
use retrace::store::{ReadOnlyStore, Store, StoreReader};
use retrace::{Config, ObjectId, StoreError, Workspace};

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

fn main() -> ExitCode {
    retrace::error::install_panic_hook();
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(4),
        Err(e) => {
            // Library errors already carry their cause in one line; others get the chain.
            let ours = e.downcast_ref::<retrace::Error>().is_some()
                || e.downcast_ref::<retrace::StoreError>().is_some();
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

fn run(cli: Cli) -> Result<bool> {
    match &cli.command {
        Command::Stats { json } => {
            for path in stores(&cli, true)? {
                let store = open(&path)?;
                let r = store.reader()?;
                let s = r.stats()?;
                let ratio = s.disk_bytes as f64 / s.log_bytes.max(1) as f64;
                let maintained = r.maintained_ms()?;
                if *json {
                    let mut v = serde_json::to_value(&s)?;
                    v["maintained_ms"] = serde_json::json!(maintained);
                    v["store"] = serde_json::json!(path.display().to_string());
                    v["workspace"] =
                        serde_json::json!(r.workspace()?.map(|p| p.display().to_string()));
                    v["disk_to_log_ratio"] = serde_json::json!(ratio);
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
                    println!("logical    {} bytes (blob content)", s.logical_bytes);
                    println!(
                        "stored     {} bytes compressed in the pack log ({} bytes framed)",
                        s.log_bytes, s.payload_bytes
                    );
                    println!(
                        "file       {} bytes on disk ({ratio:.3}x the pack log; length {})",
                        s.disk_bytes, s.file_bytes
                    );
                    if maintained == 0 {
                        println!("maintained never");
                    } else {
                        let ago = retrace::store::now_ms().saturating_sub(maintained) / 1000;
                        println!("maintained {ago} s ago (retention, budget, compaction)");
                    }
                }
            }
            Ok(true)
        }
        Command::Tree { id, path } => {
            let store = open(&stores(&cli, false)?[0])?;
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
            let store = open(&stores(&cli, false)?[0])?;
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
            let store = open(&stores(&cli, false)?[0])?;
            let tx = store.begin_read()?;
            let mut rows = Vec::new();
            for (key, rec) in db::sessions(&tx)? {
                let l = db::load(&tx, &key)?;
                // A pending turn's owner: alive, dead, or why it cannot be known (kept).
                let lease = match l.state.pending {
                    Some(n) => match db::lease(&tx, &key, n)? {
                        Some(Ok(r)) => serde_json::json!({
                            "pid": r.pid, "hostname": r.hostname, "heartbeat_ms": r.heartbeat_ms,
                            "liveness": retrace::lease::liveness(&r, Config::from_env().home()),
                        }),
                        Some(Err(why)) => serde_json::json!({"unreadable": why}),
                        None => serde_json::json!(null),
                    },
                    None => serde_json::json!(null),
                };
                rows.push(serde_json::json!({
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
                for r in &rows {
                    println!(
                        "{}  turns {:>5}  checkpoints {:>4}  ops {:>6}  cursor {}  redo {}  pending {}",
                        r["session"].as_str().unwrap_or(""),
                        r["turns"],
                        r["checkpoints"],
                        r["ops"],
                        r["cursor"],
                        r["redo"],
                        r["pending"]
                    );
                    if !r["lease"].is_null() {
                        println!("    owner of the pending turn: {}", r["lease"]);
                    }
                }
            }
            Ok(true)
        }
        Command::Turns { session, json } => {
            let store = open(&stores(&cli, false)?[0])?;
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
                println!("session {}  {:?}", hex(&key), l.state);
                for t in &l.turns {
                    println!("{t:?}");
                }
                for c in &l.checkpoints {
                    println!("{c:?}");
                }
            }
            Ok(true)
        }
        Command::Verify => {
            let mut clean = true;
            for path in stores(&cli, true)? {
                // Only faults inside a store that opened are damage that `repair` can mend.
                let (faults, opened) = match open(&path) {
                    Ok(store) => {
                        let f = retrace::verify::verify(&store)?;
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
            e.size,
            retrace::object::show_path(&e.name)
        );
    }
    Ok(())
}

fn hex(key: &SessionKey) -> String {
    key.short()
}
