//! `retrace`: the command-line interface. Thin: parse arguments, call the library, print.
//! This file holds the clap definitions, `main`, the exit codes and how errors map to them,
//! and opening the workspace or session a command works on; `commands/` holds one module
//! per command group, `progress` the bar on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use retrace::{Config, Error, Mode, RestoreError, Session, Workspace};

mod commands;
mod progress;

/// A workspace time machine for AI coding agents.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The agent's session id (turns, undo and redo are per session). `log` and `status`
    /// show the session's turns when it is given. Empty means not given.
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

/// Exit code of success.
const OK: u8 = 0;
/// Exit code of a refusal by a guard (conflict, dirty) or nothing to do (nothing to undo
/// or redo, no changes).
const REFUSED: u8 = 1;
/// Exit code of "busy: another retrace process holds the workspace; try again" (as usage
/// errors, which clap reports with 2 too).
const BUSY: u8 = 2;
/// Exit code of an error.
const FAILED: u8 = 3;
/// Exit code of a usage error (a bad snapshot id, say).
const USAGE: u8 = 2;
/// Exit code of a repair after which some snapshots stay broken.
const STILL_BROKEN: u8 = 4;

/// The `result` of `--json` and the exit code of a command that failed with `e`.
/// A mistake in how a command was called (an unknown name, a malformed argument): exit 2.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn classify(e: &anyhow::Error) -> (&'static str, u8) {
    if e.downcast_ref::<Usage>().is_some() {
        return ("usage", USAGE);
    }
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
    print_warnings(&ws);
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

/// Prints the workspace's warnings, each one line on stderr.
fn print_warnings(ws: &Workspace) {
    for w in ws.warnings() {
        eprintln!("retrace: warning: {w}");
    }
}

fn run(cli: Cli) -> Result<u8> {
    use commands::{agents, config, demo, docs, history, maintenance, snapshot};
    // An empty `RETRACE_SESSION=` (or `--session ''`) means unset, as for any variable.
    let (dir, sid) = (
        cli.dir.as_ref(),
        cli.session.as_ref().filter(|s| !s.is_empty()),
    );
    match cli.command {
        Command::Demo => demo::run(),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man => docs::man(),
        Command::Hook { agent } => Ok(agents::hook(&agent)),
        Command::Mcp => agents::mcp(session(dir, sid)?),
        Command::Install {
            agent,
            user,
            project: _,
        } => agents::install(&agent, dir, user, true),
        Command::Uninstall {
            agent,
            user,
            project: _,
        } => agents::install(&agent, dir, user, false),
        Command::Serve => Ok(agents::serve()),
        Command::Config { json } => config::config(dir, json),
        Command::Gc {
            dry_run,
            grace,
            json,
        } => maintenance::gc(&open(dir)?, dry_run, grace, json),
        Command::Repair { json } => maintenance::repair(&open(dir)?, json),
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
            history::begin(&s, anchor, prompt, timeout_ms, json)
        }
        Command::Turn {
            action: TurnAction::End { anchor, json },
        } => {
            let s = session(dir, sid)?;
            let code = history::end(&s, anchor, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Turn {
            action: TurnAction::Round { anchor },
        } => history::round(&session(dir, sid)?, anchor),
        Command::Undo { mode, force, json } => {
            history::undo(&session(dir, sid)?, mode, force, json)
        }
        Command::Redo { force, json } => history::redo(&session(dir, sid)?, force, json),
        Command::Checkpoint { label, json } => {
            let s = session(dir, sid)?;
            let code = history::checkpoint(&s, label, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Navigate {
            anchor,
            mode,
            force,
            json,
        } => history::navigate(&session(dir, sid)?, &anchor, mode, force, json),
        Command::Log { json } if sid.is_some() => history::log(&session_reading(dir, sid)?, json),
        Command::Status { json } if sid.is_some() => {
            history::status(&session_reading(dir, sid)?, json)
        }
        Command::Snapshot { label, json } => snapshot::snapshot(&open(dir)?, label, json),
        Command::Log { json } => snapshot::log(&open_reading(dir)?, json),
        Command::Diff { a, b, json } => snapshot::diff(&open_reading(dir)?, &a, b.as_deref(), json),
        Command::Restore {
            id,
            force,
            dry_run,
            json,
        } => snapshot::restore(&open(dir)?, &id, force, dry_run, json),
        Command::Status { json } => snapshot::status(&open_reading(dir)?, json),
    }
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
