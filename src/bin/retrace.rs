//! `retrace`: the command-line interface. Thin: parse arguments, call the library, print.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use retrace::{Config, Error, Mode, RestoreError, RestoreOptions, Session, Workspace};

#[path = "retrace/cli_progress.rs"]
mod cli_progress;
#[path = "retrace/demo.rs"]
mod demo;
#[path = "retrace/history_cli.rs"]
mod history_cli;

use cli_progress::Bar;

/// A workspace time machine for AI coding agents.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The agent's session id (turns, undo and redo are per session). `log` and `status`
    /// show the session's turns when it is given.
    #[arg(long, global = true, env = "RETRACE_SESSION", value_name = "ID")]
    session: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Capture the workspace now.
    Snapshot {
        /// A label shown by `retrace log`.
        #[arg(long)]
        label: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List snapshots, newest first.
    Log {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Paths added, modified and deleted between two snapshots (or a snapshot and the disk).
    Diff {
        /// From this snapshot (id or unique prefix of 8+ hex digits).
        a: String,
        /// To this snapshot (default: the disk).
        b: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make the workspace's files equal to a snapshot.
    Restore {
        /// Snapshot id or unique prefix.
        id: String,
        /// Restore even over changes not in any snapshot (they are snapshotted first).
        #[arg(long)]
        force: bool,
        /// Only list what would change.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Workspace root, store, snapshot count, exclusions and unsnapshotted changes.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Begin or end an agent turn (what an adapter calls around each prompt).
    Turn {
        #[command(subcommand)]
        action: TurnAction,
    },
    /// Step back over the session's newest applied turn.
    Undo {
        /// What to restore.
        #[arg(long, default_value = "both", value_parser = parse_mode)]
        mode: Mode,
        /// Overwrite paths edited since the turn (a safety snapshot keeps them first).
        #[arg(long)]
        force: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Re-apply the most recently undone turn, in the mode its undo used.
    Redo {
        /// Overwrite paths edited since the undo (a safety snapshot keeps them first).
        #[arg(long)]
        force: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Capture the workspace now as a labelled checkpoint of the session.
    Checkpoint {
        /// Label (usable as an anchor for `navigate`).
        label: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Restore the workspace to the snapshot at an anchor: a host anchor, `turn:N`,
    /// `turn:N:before`, `checkpoint:N` or a checkpoint label.
    Navigate {
        /// The anchor.
        anchor: String,
        /// What to restore.
        #[arg(long, default_value = "both", value_parser = parse_mode)]
        mode: Mode,
        /// Restore even over changes not in any snapshot (they are snapshotted first).
        #[arg(long)]
        force: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Remove objects no snapshot, turn or checkpoint refers to, and compact the store.
    Gc {
        /// Only report what would be freed.
        #[arg(long)]
        dry_run: bool,
        /// Keep unreferenced objects younger than this (a capture elsewhere may be about to
        /// record them); default: the `gc_grace_secs` setting (3600).
        #[arg(long, value_name = "SECS")]
        grace: Option<u64>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Verify every stored object, forget the damaged ones, store them again from the
    /// workspace's files where those still hold them, and list the snapshots that stay broken.
    Repair {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Every setting's effective value and where it came from.
    Config {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the library over newline-delimited JSON-RPC 2.0 on stdin/stdout (for agent
    /// adapters; see docs/protocol.md).
    Serve,
    /// Serve model-facing tools (undo, redo, checkpoint, log, diff, status) over MCP on
    /// stdio, for the session `--session` / `RETRACE_SESSION` names.
    Mcp,
    /// Handle one agent hook event (JSON on stdin). Never fails the agent: errors are one
    /// line on stderr and exit 0.
    Hook {
        /// The agent: `claude-code`, `codex` or `gemini`.
        agent: String,
    },
    /// Add retrace's hooks (and `/undo`-style command files) to an agent's settings:
    /// idempotent, keeps every other hook.
    Install {
        /// The agent: `claude-code`, `codex` or `gemini`.
        agent: String,
        /// The user's settings (`~/.claude`, `~/.codex`, `~/.gemini`) instead of the
        /// project's.
        #[arg(long, conflicts_with = "project")]
        user: bool,
        /// The project's settings (`.claude`, `.codex`, `.gemini`; the default).
        #[arg(long)]
        project: bool,
    },
    /// Remove exactly the hooks `install` added.
    Uninstall {
        /// The agent: `claude-code`, `codex` or `gemini`.
        agent: String,
        /// The user's settings instead of the project's.
        #[arg(long, conflicts_with = "project")]
        user: bool,
        /// The project's settings (the default).
        #[arg(long)]
        project: bool,
    },
    /// A self-contained walkthrough in a temporary directory.
    Demo,
    /// Print a shell completion script (e.g. `retrace completions bash >
    /// ~/.local/share/bash-completion/completions/retrace`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `retrace man | man -l -`.
    Man,
}

#[derive(Subcommand)]
enum TurnAction {
    /// Record the start of a turn and capture the before-snapshot.
    Begin {
        /// The conversation node to return to when this turn is undone.
        #[arg(long)]
        anchor: Option<String>,
        /// The prompt (put back into the editor on undo).
        #[arg(long)]
        prompt: Option<String>,
        /// Give up on the before-snapshot after this long (the turn becomes
        /// conversation-only).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// The process that owns the turn (default: the one that ran this command, i.e.
        /// the agent). If it dies before the turn ends, another retrace process may close
        /// the turn.
        #[arg(long, value_name = "PID")]
        owner_pid: Option<u32>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Record the anchor of an intermediate round (tool round, retry) of the turn in
    /// progress.
    Round {
        /// The round's conversation node.
        anchor: String,
    },
    /// Capture the after-snapshot and close the turn in progress.
    End {
        /// The conversation leaf now (redo returns to it).
        #[arg(long)]
        anchor: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

/// Session id used when `--session` and `RETRACE_SESSION` are both absent.
const DEFAULT_SESSION: &str = "default";

/// Exit code of a refusal by a guard or nothing to do.
const REFUSED: u8 = 1;
/// Exit code of "busy: another retrace process holds the workspace; try again" (as usage
/// errors, which clap reports with 2 too).
const BUSY: u8 = history_cli::BUSY;
/// Exit code of an error.
const FAILED: u8 = 3;
/// Exit code of a usage error (a bad snapshot id, say).
const USAGE: u8 = 2;
/// Exit code of a repair after which some snapshots stay broken.
const STILL_BROKEN: u8 = 4;

/// The `result` of `--json` and the exit code of a command that failed with `e`.
fn classify(e: &anyhow::Error) -> (&'static str, u8) {
    match e.downcast_ref::<Error>() {
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Dirty { .. }) => {
            ("refused", REFUSED)
        }
        Some(e) if e.is_busy() => ("busy", BUSY),
        Some(Error::Store(retrace::StoreError::BadSnapshotId(_)) | Error::NoSuchOwner { .. }) => {
            ("usage", USAGE)
        }
        _ => ("error", FAILED),
    }
}

fn main() -> ExitCode {
    retrace::error::install_panic_hook();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let (result, code) = classify(&e);
            // Library errors already carry their cause in one line; others get the chain.
            let message = if e.downcast_ref::<Error>().is_some() {
                format!("{e}")
            } else {
                format!("{e:#}")
            };
            eprintln!("retrace: {message}");
            // With --json a caller always gets one JSON object on stdout.
            if std::env::args().any(|a| a == "--json") {
                println!(
                    "{}",
                    serde_json::json!({"result": result, "ok": false, "message": message})
                );
            }
            ExitCode::from(code)
        }
    }
}

fn open(dir: Option<&PathBuf>) -> Result<Workspace> {
    open_with(dir, Config::from_env())
}

/// For the commands that only read (`status`, `log`, `diff`): they answer at once while
/// another process restores, saying so, instead of waiting for it.
fn open_reading(dir: Option<&PathBuf>) -> Result<Workspace> {
    open_with(dir, Config::from_env().for_reading())
}

fn open_with(dir: Option<&PathBuf>, config: Config) -> Result<Workspace> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let ws = Workspace::open(&dir, &config)?;
    for w in ws.warnings() {
        eprintln!("retrace: warning: {w}");
    }
    Ok(ws)
}

fn session(cli_dir: Option<&PathBuf>, id: Option<&String>) -> Result<Session> {
    session_of(open(cli_dir)?, id)
}

/// [`session`] for `status --session` and `log --session`, which only read.
fn session_reading(cli_dir: Option<&PathBuf>, id: Option<&String>) -> Result<Session> {
    session_of(open_reading(cli_dir)?, id)
}

fn session_of(ws: Workspace, id: Option<&String>) -> Result<Session> {
    let shown = ws.warnings().len();
    let s = ws.session(id.map_or(DEFAULT_SESSION, String::as_str));
    for w in ws.warnings().iter().skip(shown) {
        eprintln!("retrace: warning: {w}");
    }
    Ok(s)
}

/// Runs due maintenance once the command's work is recorded (never delays it: it skips when
/// the workspace is busy), and prints what it warned about (a byte budget it cannot meet).
fn maintain_later(ws: &retrace::WorkingCopy) {
    let shown = ws.warnings().len();
    let _ = retrace::retention::maintain_if_due(ws);
    for w in ws.warnings().iter().skip(shown) {
        eprintln!("retrace: warning: {w}");
    }
}

/// Writes generated text to stdout; a reader that stopped early (`| head`) is no error.
fn print_all(text: &[u8]) -> Result<u8> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}

fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

fn run(cli: Cli) -> Result<u8> {
    let (dir, sid) = (cli.dir.as_ref(), cli.session.as_ref());
    match cli.command {
        Command::Demo => demo::run(),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "retrace", &mut out);
            print_all(&out)
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out)?;
            print_all(&out)
        }
        Command::Hook { agent } => Ok(hook(&agent)),
        Command::Mcp => {
            retrace::protocol::mcp::run(session(dir, sid)?).map_err(anyhow::Error::msg)?;
            Ok(0)
        }
        Command::Install {
            agent,
            user,
            project: _,
        } => install(&agent, dir, user, true),
        Command::Uninstall {
            agent,
            user,
            project: _,
        } => install(&agent, dir, user, false),
        Command::Serve => {
            let stdin = std::io::stdin();
            retrace::protocol::serve::Server::new(Config::from_env(), Box::new(std::io::stdout()))
                .run(stdin.lock());
            Ok(0)
        }
        Command::Config { json } => {
            let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
            let root = dir
                .canonicalize()
                .map(|d| retrace::home::find_root(&d))
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
            let (s, warnings) = retrace::config::Settings::load(Some(&root));
            for w in &warnings {
                eprintln!("retrace: warning: {w}");
            }
            let home = Config::from_env().home().to_path_buf();
            if json {
                let mut v = serde_json::to_value(&s)?;
                v["home"] = serde_json::json!(home.display().to_string());
                v["user_file"] = serde_json::json!(
                    retrace::config::user_file().map(|p| p.display().to_string())
                );
                v["project_file"] =
                    serde_json::json!(root.join(".retrace.toml").display().to_string());
                print_json(&v);
            } else {
                println!("home              {} ", home.display());
                for (k, v, src) in s.rows() {
                    println!("{k:<17} {v:<14} ({src})");
                }
                if let Some(u) = retrace::config::user_file() {
                    println!("user file         {}", u.display());
                }
                println!("project file      {}", root.join(".retrace.toml").display());
            }
            Ok(0)
        }
        Command::Gc {
            dry_run,
            grace,
            json,
        } => {
            let ws = open(dir)?;
            let grace = grace.unwrap_or(ws.settings().gc_grace_secs.value);
            // A dry run collects nothing and applies no retention; a real run does both.
            let (m, r) = if dry_run {
                (None, ws.gc(grace, true)?)
            } else {
                let m = ws.maintain(retrace::store::now_ms(), grace)?;
                let gc = m.gc.clone();
                (Some(m), gc)
            };
            // Then every store under the home: vanished workspaces, too many workspaces.
            let home = if dry_run {
                None
            } else {
                Some(retrace::retention::sweep_home(
                    Config::from_env().home(),
                    retrace::retention::HomeLimits {
                        max_workspaces: ws.settings().max_workspaces.value,
                        max_total_bytes: ws.settings().max_total_bytes.value,
                    },
                    retrace::store::now_ms(),
                )?)
            };
            for w in ws.warnings() {
                eprintln!("retrace: warning: {w}");
            }
            if json {
                let mut v = serde_json::to_value(&r)?;
                if let Some(m) = &m {
                    v["retention"] = serde_json::to_value(m)?;
                }
                if let Some(h) = &home {
                    v["home"] = serde_json::to_value(h)?;
                }
                print_json(&v);
            } else {
                if let Some(m) = &m {
                    println!(
                        "retention: {} session(s) expired, {} removed, {} turn(s) evicted for \
                         the byte budget, {} log record(s) pruned; {} bytes packed (budget {}){}",
                        m.expired_sessions.len(),
                        m.tombstones_pruned + m.sessions_dropped,
                        m.turns_evicted,
                        m.snapshots_pruned,
                        m.store_bytes,
                        if m.max_store_bytes == 0 {
                            "none".to_string()
                        } else {
                            m.max_store_bytes.to_string()
                        },
                        if m.over_budget {
                            "; over budget: the rest is in use and never evicted"
                        } else {
                            ""
                        }
                    );
                }
                let verb = if dry_run { "would free" } else { "freed" };
                println!(
                    "{verb} {} of {} objects ({} stored bytes); {} reachable, {} young kept",
                    r.objects_freed, r.objects, r.stored_bytes_freed, r.reachable, r.young_kept
                );
                if !dry_run {
                    println!(
                        "rewrote {} frames, freed {} packs; store file {} -> {} bytes on disk{}",
                        r.frames_rewritten,
                        r.packs_freed,
                        r.disk_bytes_before,
                        r.disk_bytes_after,
                        if r.compacted { " (compacted)" } else { "" }
                    );
                }
                if let Some(d) = m.as_ref().map(|m| &m.dense).filter(|d| d.frames > 0) {
                    println!(
                        "recompressed {} frames at the dense level: {} -> {} stored bytes",
                        d.frames, d.bytes_before, d.bytes_after
                    );
                }
            }
            Ok(0)
        }
        Command::Repair { json } => {
            let ws = open(dir)?;
            let r = ws.repair(&Bar::new())?;
            for w in ws.warnings() {
                eprintln!("retrace: warning: {w}");
            }
            if json {
                print_json(&serde_json::to_value(&r)?);
            } else {
                println!(
                    "checked {} objects: {} damaged and forgotten; {} stored again from the \
                     workspace",
                    r.objects,
                    r.forgotten.len(),
                    r.restored
                );
                for f in r.faults.iter().take(20) {
                    println!("  {f}");
                }
                if r.broken.is_empty() {
                    println!("every snapshot is whole");
                } else {
                    println!(
                        "{} snapshot(s) stay broken (their files are gone from the workspace):",
                        r.broken.len()
                    );
                    for b in &r.broken {
                        println!("  {}  {}", b.id.short(), b.used_by.join(", "));
                    }
                }
            }
            Ok(if r.broken.is_empty() { 0 } else { STILL_BROKEN })
        }
        Command::Turn {
            action:
                TurnAction::Begin {
                    anchor,
                    prompt,
                    timeout_ms,
                    owner_pid,
                    json,
                },
        } => {
            let owner = owner_pid.unwrap_or_else(std::os::unix::process::parent_id);
            let s = session(dir, sid)?.owned_by(owner);
            history_cli::begin(&s, anchor, prompt, timeout_ms, json)
        }
        Command::Turn {
            action: TurnAction::End { anchor, json },
        } => {
            let s = session(dir, sid)?;
            let code = history_cli::end(&s, anchor, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Turn {
            action: TurnAction::Round { anchor },
        } => history_cli::round(&session(dir, sid)?, anchor),
        Command::Undo { mode, force, json } => {
            history_cli::undo(&session(dir, sid)?, mode, force, json)
        }
        Command::Redo { force, json } => history_cli::redo(&session(dir, sid)?, force, json),
        Command::Checkpoint { label, json } => {
            let s = session(dir, sid)?;
            let code = history_cli::checkpoint(&s, label, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Navigate {
            anchor,
            mode,
            force,
            json,
        } => history_cli::navigate(&session(dir, sid)?, &anchor, mode, force, json),
        Command::Log { json } if sid.is_some() => {
            history_cli::log(&session_reading(dir, sid)?, json)
        }
        Command::Status { json } if sid.is_some() => {
            history_cli::status(&session_reading(dir, sid)?, json)
        }
        Command::Snapshot { label, json } => {
            let ws = open(cli.dir.as_ref())?;
            let bar = Bar::new();
            let c = ws.snapshot_with(label, &bar)?;
            drop(bar);
            maintain_later(&ws);
            if json {
                print_json(&serde_json::json!({
                    "id": c.id.to_hex(), "files": c.files, "bytes": c.bytes,
                    "new_objects": c.new_objects, "new_bytes": c.new_bytes, "hashed": c.hashed,
                    "skipped": c.skipped, "nested_repos": c.nested_repos, "secrets": c.secrets,
                }));
            } else {
                println!("snapshot {}", c.id);
                println!(
                    "{} files, {} bytes, {} new bytes stored ({} files read)",
                    c.files, c.bytes, c.new_bytes, c.hashed
                );
                for n in &c.nested_repos {
                    println!("nested repository left alone: {n}");
                }
                for s in &c.skipped {
                    println!("skipped {}: {}", s.path, s.reason);
                }
                for s in &c.secrets {
                    println!("secret left out: {s} (allow it with the allow_secrets setting)");
                }
            }
            Ok(0)
        }
        Command::Log { json } => {
            let ws = open_reading(cli.dir.as_ref())?;
            let log = ws.log()?;
            if json {
                let rows: Vec<_> = log
                    .iter()
                    .map(|s| {
                        serde_json::json!({"id": s.root.to_hex(), "time_ms": s.time_ms,
                        "label": s.label, "files": s.files, "bytes": s.bytes})
                    })
                    .collect();
                print_json(&serde_json::Value::Array(rows));
            } else if log.is_empty() {
                println!("no snapshots yet; take one with `retrace snapshot`");
                return Ok(REFUSED);
            } else {
                for s in &log {
                    println!(
                        "{}  {}  {:>6} files  {}",
                        s.root.short(),
                        format_time(s.time_ms),
                        s.files,
                        s.label.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(0)
        }
        Command::Diff { a, b, json } => {
            let ws = open_reading(cli.dir.as_ref())?;
            let a = ws.resolve(&a)?;
            let b = b.map(|b| ws.resolve(&b)).transpose()?;
            let d = ws.diff(&a, b.as_ref())?;
            if json {
                print_json(&serde_json::to_value(&d)?);
            } else {
                for p in &d.added {
                    println!("A {p}");
                }
                for p in &d.modified {
                    println!("M {p}");
                }
                for p in &d.deleted {
                    println!("D {p}");
                }
            }
            Ok(if d.is_empty() { REFUSED } else { 0 })
        }
        Command::Restore {
            id,
            force,
            dry_run,
            json,
        } => {
            let ws = open(cli.dir.as_ref())?;
            let id = ws.resolve(&id)?;
            let bar = Bar::new();
            // A dry run shows the plan even when the restore would be refused, and says so.
            let (r, refused, v) = if dry_run {
                let d = ws.restore_dry_run(&id, force, &bar)?;
                let v = serde_json::to_value(&d)?;
                (d.outcome, d.refused, v)
            } else {
                let opts = RestoreOptions {
                    force,
                    dry_run: false,
                };
                let r = ws.restore_with(&id, opts, &bar)?;
                let v = serde_json::to_value(&r)?;
                (r, None, v)
            };
            drop(bar);
            if json {
                print_json(&v);
            } else {
                let verb = if dry_run { "would write" } else { "wrote" };
                for p in &r.written {
                    println!("{verb} {p}");
                }
                let verb = if dry_run { "would delete" } else { "deleted" };
                for p in &r.deleted {
                    println!("{verb} {p}");
                }
                for s in &r.left_alone {
                    println!("left alone {}: {}", s.path, s.reason);
                }
                if let Some(s) = r.safety_snapshot {
                    println!(
                        "your unsnapshotted changes were saved first as snapshot {}",
                        s.short()
                    );
                }
                if !r.verified {
                    println!(
                        "warning: these paths changed during the restore: {}",
                        r.verify_diff.join(", ")
                    );
                }
                println!(
                    "{} {}: {} written, {} deleted",
                    if dry_run {
                        "dry run of restore to"
                    } else {
                        "restored"
                    },
                    id.short(),
                    r.written.len(),
                    r.deleted.len()
                );
                if let Some(f) = &refused {
                    println!("the restore would be refused: {}", f.message);
                    for p in &f.paths {
                        println!("  {p}");
                    }
                    if f.count > f.paths.len() {
                        println!("  ... and {} more", f.count - f.paths.len());
                    }
                }
            }
            Ok(
                if refused.is_some() || (r.written.is_empty() && r.deleted.is_empty()) {
                    REFUSED
                } else {
                    0
                },
            )
        }
        Command::Status { json } => {
            let ws = open_reading(cli.dir.as_ref())?;
            let s = ws.status()?;
            if json {
                print_json(&serde_json::to_value(&s)?);
            } else {
                println!("workspace  {}", s.root.display());
                println!("store      {} ({} bytes)", s.store.display(), s.store_bytes);
                println!("snapshots  {}", s.snapshots);
                println!("excluded   {}", s.exclusions.join(", "));
                for n in &s.nested_repos {
                    println!("nested     {n} (left alone)");
                }
                if let Some(why) = &s.conversation_only {
                    println!(
                        "policy     {why}: conversation history only, files never snapshotted"
                    );
                }
                if let Some(p) = &s.pending_recovery {
                    println!("recovery   pending: {p}; the next retrace command completes it");
                }
                match s.last_known {
                    None => println!("state      no snapshot yet"),
                    Some(_) if s.changed_count == 0 => {
                        println!("state      clean (matches the last known state)")
                    }
                    Some(k) => {
                        println!(
                            "state      {} path(s) changed since {}:",
                            s.changed_count,
                            k.short()
                        );
                        for p in &s.changed {
                            println!("  {p}");
                        }
                    }
                }
            }
            Ok(0)
        }
    }
}

/// `retrace hook AGENT`: reads the event, prints the decision; any failure is one line on
/// stderr and exit 0, so a hook never blocks the user's prompt by accident.
fn hook(agent: &str) -> u8 {
    use retrace::protocol::hooks::{self, Agent};
    use std::io::Read;
    let Some(agent) = Agent::from_name(agent) else {
        eprintln!(
            "retrace: unknown agent {agent:?} for hooks; supported: {}",
            Agent::names()
        );
        return 0;
    };
    let mut input = String::new();
    let event = std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&input).map_err(|e| format!("bad hook input: {e}")));
    match event.and_then(|e| hooks::handle(agent, &e, &Config::from_env())) {
        Ok(out) => {
            if let Some(v) = out.stdout {
                println!("{v}");
            }
        }
        Err(e) => {
            eprintln!("retrace: {e}");
            if let Some(v) = agent.on_error().stdout {
                println!("{v}");
            }
        }
    }
    0
}

/// `retrace install|uninstall AGENT`.
fn install(agent: &str, dir: Option<&PathBuf>, user: bool, add: bool) -> Result<u8> {
    use retrace::protocol::hooks::Agent;
    use retrace::protocol::install::{self, Target};
    let agent = Agent::from_name(agent)
        .ok_or_else(|| anyhow::anyhow!("unknown agent {agent:?}; supported: {}", Agent::names()))?;
    let project = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let target = Target::new(agent, &project, user).remembering_in(&retrace::home::default_home());
    let changes = if add {
        let exe = std::env::current_exe()?;
        install::hook_command(&exe, agent).and_then(|c| install::install(&target, &c))
    } else {
        install::uninstall(&target)
    }
    .map_err(anyhow::Error::msg)?;
    if changes.lines.is_empty() {
        println!("{}: nothing to change", target.settings().display());
    }
    for line in changes.lines {
        println!("{line}");
    }
    if add && let Some(step) = target.next_step() {
        println!("{step}");
    }
    Ok(0)
}

/// `YYYY-MM-DD HH:MM:SS` UTC from Unix milliseconds.
pub(crate) fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm), valid for all dates after 1970.
    let z = days.cast_signed() + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README: exit codes 0 success, 1 refused, 2 usage or busy, 3 errors.
    #[test]
    fn busy_exits_2_refused_1_errors_3() {
        let busy = |path: &str| retrace::StoreError::Busy {
            path: path.into(),
            secs: 120,
        };
        let lock_busy = anyhow::Error::from(Error::Store(busy("/h/lock")));
        assert_eq!(classify(&lock_busy), ("busy", 2));
        let capture_busy = anyhow::Error::from(Error::Restore(Box::new(RestoreError::Capture(
            retrace::CaptureError::Store(busy("/h/store.redb")),
        ))));
        assert_eq!(classify(&capture_busy), ("busy", 2));
        let dirty = anyhow::Error::from(Error::from(RestoreError::Dirty {
            paths: vec!["a".into()],
        }));
        assert_eq!(classify(&dirty), ("refused", 1));
        let failed = anyhow::Error::from(Error::Workspace {
            path: "/w".into(),
            reason: "not a directory".into(),
        });
        assert_eq!(classify(&failed), ("error", 3));
        assert_eq!(classify(&anyhow::anyhow!("other")), ("error", 3));
    }
}
