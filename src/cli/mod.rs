//! `retrace`: the command-line interface. Thin: parse arguments, call the library, print.
//! This file holds the clap definitions, `main`, the exit codes and how errors map to them,
//! and opening the workspace or session a command works on; `commands/` holds one module
//! per command group, `help` how the commands are grouped in `--help`, `progress` the bar
//! on stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::history::list::{Implied, implied};
use crate::object::{terminal_line, terminal_text};
use crate::{Choice, Config, Error, Mode, Pick, RestoreError, Session, SessionRef, Workspace};
use anyhow::Result;
use clap::{Parser, Subcommand};

mod commands;
pub mod dump;
mod help;
mod json;
mod pager;
mod progress;

/// A workspace time machine for AI coding agents
///
/// retrace snapshots the whole workspace before and after every turn of an agent's
/// conversation, whatever wrote the files (the agent's edit tool, its shell commands, you),
/// into a deduplicated store outside the workspace, and undoes, redoes, reverts and
/// restores them exactly: only the paths a turn changed, never over an edit made since,
/// never another session's work. Installed into an agent (`retrace install`), its `/undo`
/// runs `retrace undo`; every command also works by hand. Start with `retrace demo`.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The session (agent conversation) to work on: a name or unique prefix
    ///
    /// Its name, or a unique prefix (4 characters or more) of its name or key, as `retrace
    /// sessions` lists them. Only `turn begin`, `checkpoint` and `mcp` start a new session;
    /// elsewhere a name no session has is an error (exit 2). Without it, a command that
    /// works on a session (undo, redo, revert, navigate, checkpoint, show, and names such as
    /// turn:N) uses the only session with history here, or the one with a turn open, else
    /// the one last used at least an hour after every other (saying so on stderr); when
    /// several are candidates it refuses and lists them (exit 2). `status`, `log` and
    /// `blame` show the whole workspace, every session's work, unless it is given.
    #[arg(long, global = true, env = "RETRACE_SESSION", value_name = "NAME")]
    session: Option<String>,
    /// List every path an operation writes, not the first ten
    #[arg(short = 'v', long, global = true)]
    verbose: bool,
    /// Print straight to the terminal, without a pager (`RETRACE_PAGER`, `PAGER`, `less`)
    #[arg(long, global = true)]
    no_pager: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Capture the workspace now.
    Snapshot {
        /// A label shown by `retrace log` (usable where a snapshot id is).
        #[arg(value_name = "LABEL")]
        label: Option<String>,
        /// The label, as an option (as `checkpoint --label`).
        #[arg(long = "label", value_name = "LABEL", conflicts_with = "label")]
        label_opt: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Walk the whole workspace, whatever a watcher says (a check on the watcher).
        #[arg(long)]
        rescan: bool,
    },
    /// Watch the files so that captures look only at what changed
    ///
    /// Watches with inotify; captures walk as before whenever the watcher cannot vouch.
    /// Exits after `watch_idle_minutes` without a capture.
    Watch {
        /// Run in the background (its output goes to a log beside its socket).
        #[arg(long, conflicts_with = "stop")]
        detach: bool,
        /// Stop the workspace's watcher.
        #[arg(long)]
        stop: bool,
    },
    /// Browse the history in the terminal, and act on it
    ///
    /// Sessions, each one's timeline of turns, undos and restores, what each changed with
    /// its diff; undo, redo, revert and restore from there (each asks first). `--session`
    /// picks the session shown first.
    #[cfg(feature = "ui")]
    Ui,
    /// List snapshots, or a session's turns and checkpoints
    ///
    /// Without `--session` (or `RETRACE_SESSION`): the workspace's snapshots, newest first,
    /// whichever session took them. With it: that session's turns and checkpoints.
    Log {
        /// The workspace's snapshots (safety snapshots included) even when a session is set.
        #[arg(long)]
        snapshots: bool,
        /// Each turn's steps too (its agent's tool calls: tool, input, what changed).
        #[arg(long)]
        steps: bool,
        /// Show at most N entries (the newest).
        #[arg(short = 'n', long = "max-count", value_name = "N")]
        max: Option<usize>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only the entries that changed these files or directories (relative to the
        /// workspace root), after `--`; without `--session`, across every session.
        #[arg(last = true)]
        paths: Vec<String>,
    },
    /// Show one turn, checkpoint or snapshot in full
    ///
    /// A turn or checkpoint: its prompt in full, times, state, the paths it changed with
    /// their lines, the bytes it added. A snapshot: its labels, what it holds, what changed
    /// from the snapshot before it.
    Show {
        /// `turn:N`, `turn:N.K` (step K of turn N), `checkpoint:N`, a checkpoint label or a host
        /// anchor; or a snapshot id (8+ hex digits) or label.
        #[arg(value_name = "REF")]
        reference: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the turn that wrote each line of a file
    ///
    /// Every line of the file as it is on disk, with the agent turn that wrote it (every
    /// session's turns, or the `--session`'s), `unsnapshotted` or `before retrace`.
    Blame {
        /// The file, relative to the workspace root.
        path: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show what changed between two snapshots, or since the last one
    ///
    /// Paths added, modified and deleted between two snapshots, or between a snapshot and
    /// the disk (alone: the last snapshot and the disk, what `status` counts).
    Diff {
        /// From this snapshot: id or unique prefix (8+ hex digits), label, or `turn:N`,
        /// `turn:N:before`, `checkpoint:N` of the session (default: the last snapshot, so
        /// the changes `status` counts).
        a: Option<String>,
        /// To this snapshot, named the same ways (default: the disk).
        b: Option<String>,
        /// Print unified diffs of the changed files (3 lines of context), as `git diff`.
        #[arg(short = 'p', long)]
        patch: bool,
        /// Print lines added and removed per file, as `git diff --stat`.
        #[arg(long, conflicts_with = "patch")]
        stat: bool,
        /// Print each changed path with A, M or D, sorted by path, as `git diff
        /// --name-status` (the default lists them grouped by kind).
        #[arg(long, conflicts_with_all = ["patch", "stat"])]
        name_status: bool,
        /// Colour the output: on a terminal (auto, unless `NO_COLOR` is set), always or never.
        #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
        color: ColorArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only these files or directories (relative to the workspace root), after `--`.
        #[arg(last = true)]
        paths: Vec<String>,
    },
    /// Make the files equal to a snapshot, or only some paths of it
    ///
    /// With paths, only those files and directories (everything else on disk is untouched).
    ///
    /// Restore or navigate? `restore` writes files from any snapshot (any session's, or one
    /// of your own) and moves no session: undo and redo go on as before. `navigate` moves a
    /// session to one of its own turns or checkpoints: its files, and where its undo and
    /// redo start next.
    Restore {
        /// The snapshot: id or unique prefix (8+ hex digits), label, or `turn:N`,
        /// `turn:N:before`, `checkpoint:N` of the session.
        id: String,
        /// Restore even over changes not in any snapshot (they are snapshotted first).
        #[arg(long)]
        force: bool,
        /// Only list what would change.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only these files or directories (relative to the workspace root), after `--`.
        #[arg(last = true)]
        paths: Vec<String>,
    },
    /// Show the workspace, its store and what no snapshot holds yet
    ///
    /// Workspace root, store, snapshot count, exclusions and unsnapshotted changes; with
    /// `--session`, that session's cursor, undo and redo first.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the workspace's sessions (one per agent conversation)
    ///
    /// Most recently used first: name, agent, turns, last activity, and whether a turn is
    /// open.
    Sessions {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Begin or end a turn (what an adapter does around each prompt)
    Turn {
        #[command(subcommand)]
        action: TurnAction,
    },
    /// Begin or end a step: one tool call of a turn (for adapters)
    ///
    /// What an adapter calls around each tool that can write.
    #[command(hide = true)]
    Step {
        #[command(subcommand)]
        action: StepAction,
    },
    /// Undo the session's newest turn
    ///
    /// Steps back over the session's newest applied turn: the paths it changed go back to
    /// what they were before it, and redo can bring them back.
    Undo {
        /// What to restore.
        #[arg(long, value_enum, default_value_t = ModeArg::Both)]
        mode: ModeArg,
        /// Overwrite paths edited since the turn (a safety snapshot keeps them first).
        #[arg(long)]
        force: bool,
        /// Only list what the files would become (written, deleted, merged, left alone, in
        /// conflict), as `revert --dry-run` does; nothing is written.
        #[arg(long, conflicts_with = "mode")]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Redo the most recently undone turn
    ///
    /// Re-applies it in the mode its undo used.
    Redo {
        /// Overwrite paths edited since the undo (a safety snapshot keeps them first).
        #[arg(long)]
        force: bool,
        /// Only list what the files would become, as `undo --dry-run`; nothing is written.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take back one past turn or step, keeping later changes
    ///
    /// Any turn of the session, not only the newest, or one step of it (`turn:N.K`): paths
    /// changed since are merged when the changes touch other lines, else the revert is
    /// refused as a conflict. Undo undoes the revert; redo redoes it.
    Revert {
        /// The turn: `turn:N` (or N); one step of it: `turn:N.K` (`retrace log --steps`).
        turn: String,
        /// Take the turn's before-version where a path conflicts (a safety snapshot keeps
        /// the disk first).
        #[arg(long)]
        force: bool,
        /// Only list what would change, and what conflicts and why.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Snapshot the workspace as a labelled checkpoint of the session
    Checkpoint {
        /// Label (usable as an anchor for `navigate`, and where a snapshot id is).
        #[arg(value_name = "LABEL")]
        label: Option<String>,
        /// The label, as an option (as `snapshot --label`).
        #[arg(long = "label", value_name = "LABEL", conflicts_with = "label")]
        label_opt: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Move the session and its files to a turn or checkpoint
    ///
    /// Restores the workspace to the snapshot at an anchor: a host anchor, `turn:N`,
    /// `turn:N:before`, `checkpoint:N` or a checkpoint label.
    ///
    /// Navigate or restore? `navigate` moves the session there: its files, and where its
    /// undo and redo start next (what it passes over can no longer be redone). `restore`
    /// writes files from any snapshot, or only some paths of one, and moves no session.
    Navigate {
        /// The anchor.
        anchor: String,
        /// What to restore.
        #[arg(long, value_enum, default_value_t = ModeArg::Both)]
        mode: ModeArg,
        /// Restore even over changes not in any snapshot (they are snapshotted first).
        #[arg(long)]
        force: bool,
        /// Only say what would be written and deleted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Free space: drop what nothing refers to, compact the store
    ///
    /// Applies retention, removes objects no snapshot, turn or checkpoint refers to, and
    /// compacts the store.
    Gc {
        /// Only report what would be freed.
        #[arg(long)]
        dry_run: bool,
        /// Keep unreferenced objects younger than this (a capture elsewhere may be about to
        /// record them); default: the `gc_grace_secs` setting (3600).
        #[arg(long, value_name = "SECS")]
        grace: Option<u64>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the store and repair what the files still hold
    ///
    /// Verifies every stored object, forgets the damaged ones, stores them again from the
    /// workspace's files where those still hold them, and lists the snapshots that stay
    /// broken.
    Repair {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show every setting, its value and where it came from
    Config {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve the library over JSON-RPC on stdio (for adapters)
    ///
    /// Newline-delimited JSON-RPC 2.0 on stdin/stdout, for agent adapters; see
    /// docs/protocol.md.
    #[command(hide = true)]
    Serve,
    /// Serve tools to a model over MCP on stdio
    ///
    /// Model-facing tools (undo, redo, revert, checkpoint, log, diff, `file_history`, blame,
    /// status)
    /// for the session `--session` / `RETRACE_SESSION` names.
    #[command(hide = true)]
    Mcp,
    /// Handle one agent hook event (JSON on stdin; for adapters)
    ///
    /// Never fails the agent: errors are one line on stderr and exit 0.
    #[command(hide = true)]
    Hook {
        /// The agent: `claude-code`, `codex` or `gemini`.
        agent: String,
        /// Start the workspace's watcher (`retrace watch`) when none runs.
        #[arg(long)]
        watch: bool,
    },
    /// Add retrace to an agent: its hooks and `/undo` commands
    ///
    /// Adds retrace's hooks (and `/undo`-style command files) to the agent's settings:
    /// idempotent, keeps every other hook.
    Install {
        /// The agent: `claude-code`, `codex`, `gemini` or `opencode` (its plugin, and
        /// `"snapshot": false` in `opencode.json`).
        agent: String,
        /// The user's settings (`~/.claude`, `~/.codex`, `~/.gemini`,
        /// `~/.config/opencode`) instead of the project's.
        #[arg(long, conflicts_with_all = ["project", "local"])]
        user: bool,
        /// The project's settings (`.claude/settings.json`, `.codex/hooks.json`,
        /// `.gemini/settings.json`; the default), usually committed: everyone who clones
        /// the project gets the hooks.
        #[arg(long, conflicts_with = "local")]
        project: bool,
        /// Claude Code only: your personal settings of the project
        /// (`.claude/settings.local.json`, kept out of git), not the shared ones.
        #[arg(long)]
        local: bool,
        /// The hooks also start the workspace's watcher (`retrace watch`) when none runs,
        /// so that captures look only at what changed (claude-code, codex, gemini).
        #[arg(long)]
        watch: bool,
    },
    /// Remove exactly what `install` added
    Uninstall {
        /// The agent: `claude-code`, `codex`, `gemini` or `opencode`.
        agent: String,
        /// The user's settings instead of the project's.
        #[arg(long, conflicts_with_all = ["project", "local"])]
        user: bool,
        /// The project's settings (the default).
        #[arg(long, conflicts_with = "local")]
        project: bool,
        /// Claude Code's personal settings of the project (`.claude/settings.local.json`).
        #[arg(long)]
        local: bool,
    },
    /// Walk through retrace in a temporary directory
    Demo,
    /// Print a shell completion script
    ///
    /// For example `retrace completions bash >
    /// ~/.local/share/bash-completion/completions/retrace`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page of retrace or of one command
    ///
    /// In roff: `retrace man | man -l -`, `retrace man undo | man -l -`; with `--dir`, every
    /// page written there as retrace.1, retrace-undo.1, … (for packagers: `man -M`).
    Man {
        /// The command whose page to print (default: retrace's own).
        command: Option<String>,
        /// Write every page into this directory instead.
        #[arg(long = "dir", value_name = "DIR", conflicts_with = "command")]
        out_dir: Option<PathBuf>,
    },
    /// Run a due maintenance pass at the lowest priority (internal)
    ///
    /// What `snapshot`, `turn end`, `checkpoint` and the hooks start in the background (not
    /// for people; `retrace gc` is).
    #[command(name = "maintain-due", hide = true)]
    MaintainDue,
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
        /// Print JSON instead of text.
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
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum StepAction {
    /// Record the start of a tool call; a shell tool's is captured first (the
    /// `step_captures` setting says when), so that what it destroys can be brought back.
    Begin {
        /// The tool's name (`Bash`, `Edit`, ...).
        #[arg(long)]
        tool: String,
        /// One line of its input: the command, the file.
        #[arg(long, default_value = "")]
        summary: String,
        /// The host's id of the tool call (matches its end).
        #[arg(long, default_value = "")]
        call: String,
        /// A file an edit tool writes (repeatable); none: a shell tool, which may write
        /// anything.
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Record the end of a tool call (a shell tool's is captured after it).
    End {
        /// The host's id of the tool call; empty: the newest step still running.
        #[arg(long, default_value = "")]
        call: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `--mode` of `undo` and `navigate`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    /// Files and conversation.
    Both,
    /// Only the files (the conversation stays).
    Files,
    /// Only the conversation (the files stay, and are checkpointed).
    Conversation,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Both => Mode::Both,
            ModeArg::Files => Mode::Files,
            ModeArg::Conversation => Mode::Conversation,
        }
    }
}

/// `--color` of `diff`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ColorArg {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorArg {
    fn colour(self) -> bool {
        match self {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => commands::snapshot::use_colour(
                pager::stdout_is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            ),
        }
    }
}

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

/// A mistake in how a command was called (an unknown name, a malformed argument): exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

/// A refusal that is not a library outcome (nothing to act on): exit 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

/// `e` as the umbrella [`Error`] that [`classify`] and the messages read, when it is a
/// library operation's own error (`Workspace::open`'s [`crate::OpenError`],
/// `Workspace::snapshot`'s [`crate::CaptureError`], `Workspace::restore`'s
/// [`RestoreError`]) as `?` carried it; anything else, and one wrapped in context, stays as
/// it is.
fn umbrella(e: anyhow::Error) -> anyhow::Error {
    fn lift<E: std::error::Error + Send + Sync + 'static>(e: anyhow::Error) -> anyhow::Error
    where
        Error: From<E>,
    {
        // `is` on the error itself, not through a context (as `downcast` would look).
        if !(*e).is::<E>() {
            return e;
        }
        match e.downcast::<E>() {
            Ok(typed) => Error::from(typed).into(),
            Err(e) => e,
        }
    }
    lift::<RestoreError>(lift::<crate::CaptureError>(lift::<crate::OpenError>(e)))
}

/// The `result` of `--json` and the exit code of a command that failed with `e`.
fn classify(e: &anyhow::Error) -> (&'static str, u8) {
    if e.downcast_ref::<Usage>().is_some() {
        return ("usage", USAGE);
    }
    if e.downcast_ref::<Refused>().is_some() {
        return ("refused", REFUSED);
    }
    match e.downcast_ref::<Error>() {
        // Named as the session commands name the same refusals.
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Dirty { .. }) => ("dirty", REFUSED),
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Held { .. }) => ("held", REFUSED),
        Some(e) if e.is_busy() => ("busy", BUSY),
        Some(
            Error::Store(crate::StoreError::BadSnapshotId(_))
            | Error::NoSuchOwner { .. }
            | Error::Anchor { .. }
            | Error::Inspect { .. },
        ) => ("usage", USAGE),
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Path { .. }) => ("usage", USAGE),
        _ => ("error", FAILED),
    }
}

/// Caps glibc's malloc arenas at two. A capture's reader threads allocate and free file
/// buffers by the million, and with glibc's default (8 arenas per core) each arena kept
/// its own freed memory: the peak RSS of a 300k-file cold snapshot was 309 MB with the
/// default and 245 MB with two arenas, at the same speed (docs/benchmarks.md).
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets an allocator parameter, under glibc's own lock; it is
    // called before any other thread exists, and a refusal (return 0) changes nothing.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// The `retrace` binary: parses the arguments, runs the command, maps its result to an exit code.
pub fn main() -> ExitCode {
    cap_malloc_arenas();
    crate::error::install_panic_hook();
    let parsed = help::command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            // One error style: `retrace: ` and the message, as every other error, then
            // clap's tip and usage lines.
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            // With --json a caller gets one JSON object for a usage error too (and nothing
            // on stderr), with clap's detail (what was wrong and the tip), not its usage
            // lines.
            if std::env::args().any(|a| a == "--json") {
                let message: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .take_while(|l| !l.starts_with("Usage:"))
                    .filter(|l| !l.is_empty())
                    .collect();
                json::print(
                    serde_json::json!({"result": "usage", "ok": false, "message": message.join("; ")}),
                );
            } else {
                eprint!("retrace: {text}");
            }
            return ExitCode::from(USAGE);
        }
    };
    commands::set_verbose(cli.verbose);
    if matches!(
        cli.command,
        Command::Snapshot { .. } | Command::Checkpoint { .. }
    ) {
        say_when_interrupted();
    }
    let paged = match &cli.command {
        Command::Log { json, .. }
        | Command::Show { json, .. }
        | Command::Blame { json, .. }
        | Command::Diff { json, .. } => !json,
        _ => false,
    };
    pager::note_terminal();
    let pager = if paged {
        pager::Pager::start(cli.no_pager)
    } else {
        None
    };
    let outcome = run(cli).map_err(umbrella);
    drop(pager);
    crate::report_peak_memory();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let (result, code) = classify(&e);
            // Library errors already carry their cause in one line; others get the chain.
            let message = if e.downcast_ref::<Error>().is_some() {
                format!("{e}")
            } else {
                format!("{e:#}")
            };
            // With --json a caller gets one JSON object on stdout, and nothing on stderr;
            // a refusal of paths lists them as the session commands' refusals do.
            if std::env::args().any(|a| a == "--json") {
                let mut v = serde_json::json!({"result": result, "ok": false, "message": message});
                if let Some(Error::Restore(r)) = e.downcast_ref::<Error>() {
                    match &**r {
                        RestoreError::Dirty { paths, count } => {
                            v["paths"] = serde_json::json!(paths);
                            v["count"] = serde_json::json!(count);
                        }
                        RestoreError::Held { held } => {
                            let paths: Vec<&str> = held.iter().map(|h| h.path.as_str()).collect();
                            v["paths"] = serde_json::json!(paths);
                            v["count"] = serde_json::json!(held.len());
                        }
                        _ => {}
                    }
                }
                json::print(v);
            } else {
                // Paths and names from outside are in it: shown escaped, exact in JSON.
                eprintln!("retrace: {}", terminal_text(&message));
            }
            ExitCode::from(code)
        }
    }
}

fn open(dir: Option<&PathBuf>) -> Result<Workspace> {
    open_with(dir, &Config::from_env(), false)
}

/// For the commands that only read (`status`, `log`, `diff`, `sessions`): they answer at
/// once while another process restores, saying so, instead of waiting for it; and asking
/// never creates a store: `Err(NoStore)` when the workspace has none yet.
fn open_reading(dir: Option<&PathBuf>) -> Result<Result<Workspace, NoStore>> {
    let config = Config::from_env().for_reading();
    let path = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let store = Workspace::locate_store(&path, &config)?;
    if !store.exists() {
        let root = crate::home::resolve_root(&path, config.home())?;
        return Ok(Err(NoStore {
            root: root.path,
            store,
            refused: root.refused,
        }));
    }
    open_with(dir, &config, true).map(Ok)
}

/// [`open_reading`] for `show` and `blame`, which need a history: none yet is a usage error.
fn reading_history(dir: Option<&PathBuf>) -> Result<Workspace> {
    match open_reading(dir)? {
        Ok(ws) => Ok(ws),
        Err(none) => Err(Usage(format!(
            "{} has no history yet: turns appear once an agent's hooks run (see `retrace \
             install`), snapshots with `retrace snapshot`",
            none.root.display()
        ))
        .into()),
    }
}

/// A workspace with no store yet: what a read-only command answers from.
pub struct NoStore {
    /// The workspace root.
    pub root: PathBuf,
    /// Where its store will be.
    pub store: PathBuf,
    /// Why files are never snapshotted there, if they are not.
    pub refused: Option<String>,
}

/// Opens the workspace and prints its warnings; with `says_refusal`, not the one that files
/// are never snapshotted here, which the command's own answer says (status, log, a refused
/// snapshot): once is enough.
fn open_with(dir: Option<&PathBuf>, config: &Config, says_refusal: bool) -> Result<Workspace> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let ws = Workspace::open(&dir, config)?;
    let refused = ws.conversation_only().map(|why| format!("{why}:"));
    for w in ws.warnings() {
        if !says_refusal || refused.as_ref().is_none_or(|r| !w.starts_with(r.as_str())) {
            eprintln!("retrace: warning: {}", terminal_text(&w));
        }
    }
    // What a background maintenance pass warned about since the last command: said once.
    for w in ws.take_deferred_warnings().unwrap_or_default() {
        eprintln!("retrace: warning: {}", terminal_text(&w));
    }
    Ok(ws)
}

fn session(dir: Option<&PathBuf>, id: Option<&str>, pick: Pick) -> Result<Session> {
    if pick != Pick::Create
        && let Err(none) = open_reading(dir)?
    {
        // No store, so no session with history: said without making one.
        return Err(match id {
            Some(id) => no_session_yet(id, &none.root),
            None => Refused(format!(
                "no session in {} has turns or checkpoints yet: nothing to do (an agent's \
                 turns appear here once its hooks run; see `retrace install`)",
                none.root.display()
            ))
            .into(),
        });
    }
    session_of(&open(dir)?, id, pick)
}

/// [`session`] for `log --session`, which only reads: a workspace with no store yet has
/// no session (and asking creates none).
fn session_reading(dir: Option<&PathBuf>, id: &str) -> Result<Session> {
    match open_reading(dir)? {
        Ok(ws) => session_of(&ws, Some(id), Pick::History),
        Err(none) => Err(no_session_yet(id, &none.root)),
    }
}

/// The usage error for `--session ID` where no session began yet.
fn no_session_yet(id: &str, root: &Path) -> anyhow::Error {
    Usage(format!(
        "there is no session {id:?} in {}, nor any other yet (a session begins with its first \
         turn: an agent's hooks, or `retrace --session NAME turn begin`)",
        root.display()
    ))
    .into()
}

/// One line per session, for messages that list them.
fn session_lines(list: &[crate::SessionInfo]) -> String {
    use std::fmt::Write as _;
    list.iter().fold(String::new(), |mut out, s| {
        let _ = write!(
            out,
            "\n  {}  (key {}; {} turn{}, {} checkpoint{}, last active {}{})",
            commands::history::shown_name(s),
            s.id,
            s.turns,
            if s.turns == 1 { "" } else { "s" },
            s.checkpoints,
            if s.checkpoints == 1 { "" } else { "s" },
            commands::format_time(s.touched_ms),
            s.pending
                .map_or(String::new(), |n| format!(", turn {n} open"))
        );
        out
    })
}

/// The session `id` names (its host id or a unique key prefix) or, without one, the session
/// this workspace's history makes obvious, saying on stderr which it took.
fn session_of(ws: &Workspace, id: Option<&str>, pick: Pick) -> Result<Session> {
    let shown = ws.warnings().len();
    let s = choose(ws, id, pick)?;
    print_warnings_from(ws, shown);
    Ok(s)
}

fn choose(ws: &Workspace, id: Option<&str>, pick: Pick) -> Result<Session> {
    match ws.choose_session(id, pick)? {
        Choice::Session { id: chosen, guess } => {
            // Said only when it is a guess (the most recent of several): the only session
            // with history, or the one with a turn open, goes without saying.
            if let (Some(why), SessionRef::Listed(info)) = (guess, &chosen) {
                eprintln!("retrace: session {} ({why})", terminal_line(info.shown()));
            }
            Ok(ws.open_session(&chosen))
        }
        // Only `turn begin`, `checkpoint` and `mcp` start a session (Pick::Create): anywhere
        // else a name no session has is a mistake, told which ones exist.
        Choice::Unknown(all) => {
            let id = id.unwrap_or_default();
            if all.is_empty() {
                return Err(no_session_yet(id, ws.root()));
            }
            Err(Usage(format!(
                "there is no session {id:?} in {}; the sessions here (name one with \
                 --session: its name, or a unique prefix of its name or key):{}",
                ws.root().display(),
                session_lines(&all)
            ))
            .into())
        }
        Choice::Ambiguous(hits) => Err(Usage(format!(
            "{:?} is the start of several sessions' names or keys; give more of it:{}",
            id.unwrap_or_default(),
            session_lines(&hits)
        ))
        .into()),
        Choice::NoHistory => Err(Refused(format!(
            "no session in {} has turns or checkpoints yet: nothing to do (an agent's turns \
             appear here once its hooks run; see `retrace install`)",
            ws.root().display()
        ))
        .into()),
        Choice::Several(with) => Err(Usage(format!(
            "{} sessions have history in {}; choose one with --session NAME (or a unique \
             prefix of its key):{}",
            with.len(),
            ws.root().display(),
            session_lines(&with)
        ))
        .into()),
    }
}

/// Snapshots as every command that takes one names them: an id or a unique prefix (8+ hex
/// digits), a snapshot's label, or, in the session (`--session`, or the one [`choose`]
/// implies, chosen once per command), `turn:N`, `turn:N:before`, `checkpoint:N`, a
/// checkpoint label or a host anchor.
struct SnapshotNames<'a> {
    ws: &'a Workspace,
    sid: Option<&'a str>,
    session: std::cell::OnceCell<Session>,
}

impl<'a> SnapshotNames<'a> {
    fn new(ws: &'a Workspace, sid: Option<&'a str>) -> SnapshotNames<'a> {
        SnapshotNames {
            ws,
            sid,
            session: std::cell::OnceCell::new(),
        }
    }

    /// The session names are looked up in: the one `--session` names, or the one history
    /// implies (None when no single one is implied; then `Err` of `needed` says why).
    fn session(&self, needed: bool) -> Result<Option<&Session>> {
        if let Some(s) = self.session.get() {
            return Ok(Some(s));
        }
        let s = if self.sid.is_some() || needed {
            match choose(self.ws, self.sid, Pick::History) {
                Ok(s) => s,
                // Nothing to name a turn in: the name is the mistake (exit 2).
                Err(e) if e.downcast_ref::<Refused>().is_some() => {
                    return Err(Usage(e.to_string()).into());
                }
                Err(e) => return Err(e),
            }
        } else {
            let all = self.ws.sessions()?;
            match implied(&all, Pick::History) {
                Implied::One(info, _) => self.ws.session_of(info),
                _ => return Ok(None),
            }
        };
        Ok(Some(self.session.get_or_init(|| s)))
    }

    fn resolve(&self, name: &str) -> Result<crate::ObjectId> {
        let ws = self.ws;
        let hint = "a snapshot is named by its id (8 or more hex digits, see `retrace log \
                    --snapshots`), a label, or turn:N, turn:N:before, turn:N.K (a step), checkpoint:N of a session";
        let hex = name.len() >= 8 && name.bytes().all(|b| b.is_ascii_hexdigit());
        let by_id = if hex { Some(ws.resolve(name)) } else { None };
        if let Some(Ok(id)) = by_id {
            return Ok(id);
        }
        let of_session = ["turn:", "checkpoint:", "revert:"]
            .iter()
            .any(|p| name.starts_with(p));
        // The session's own names first (its turns, checkpoint labels, host anchors): the
        // hooks label every session's snapshots alike ("before turn 1").
        if !hex && let Some(session) = self.session(of_session)? {
            match session.snapshot_at(name) {
                Ok(id) => return Ok(id),
                Err(Error::Anchor { reason, .. }) if of_session => {
                    return Err(Usage(format!("no snapshot {name:?}: {reason}; {hint}")).into());
                }
                Err(Error::Anchor { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Then the workspace's snapshot labels: one snapshot, or the choice is refused.
        let mut roots: Vec<crate::ObjectId> = Vec::new();
        for s in ws.log()? {
            if s.label.as_deref() == Some(name) && !roots.contains(&s.root) {
                roots.push(s.root);
            }
        }
        match roots[..] {
            [one] => Ok(one),
            [] => match by_id {
                Some(Err(e)) => Err(e.into()),
                _ => Err(Usage(format!("no snapshot {name:?}: {hint}")).into()),
            },
            _ => Err(Usage(format!(
                "the label {name:?} names {} snapshots (newest first: {}); give the id, or \
                 --session to look in one session",
                roots.len(),
                roots
                    .iter()
                    .map(crate::ObjectId::short)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into()),
        }
    }
}

/// A label as `snapshot` and `checkpoint` take it: empty means none; one that reads as a
/// session's snapshot name (`turn:3`) could never be named back, so it is refused.
fn label_of(label: Option<String>) -> Result<Option<String>> {
    match label {
        Some(l) if l.is_empty() => Ok(None),
        Some(l) if l.starts_with("turn:") || l.starts_with("checkpoint:") => Err(Usage(format!(
            "the label {l:?} reads as a session's snapshot name (turn:N, checkpoint:N); choose \
             another"
        ))
        .into()),
        l => Ok(l),
    }
}

/// Where files are never snapshotted (home, `/`, the temp directory), a snapshot or a
/// checkpoint is refused (exit 1), said once.
fn refuse_in_refused_place(ws: &Workspace) -> Result<()> {
    refused_place(ws.conversation_only())
}

/// The refusal of a command that snapshots files where files are never snapshotted (the
/// home directory or above, the temp directory): `why` says which.
fn refused_place(why: Option<&str>) -> Result<()> {
    match why {
        Some(why) => Err(Refused(format!(
            "{why}: retrace keeps conversation history here but never snapshots files; run it \
             in a project folder"
        ))
        .into()),
        None => Ok(()),
    }
}

/// [`open_with`] for a command that snapshots files: refused, before any store is made,
/// where files are never snapshotted.
fn open_to_snapshot(dir: Option<&PathBuf>) -> Result<Workspace> {
    let path = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    refused_place(
        crate::home::resolve_root(&path, &crate::home::default_home())?
            .refused
            .as_deref(),
    )?;
    let ws = open_with(dir, &Config::from_env(), true)?;
    refuse_in_refused_place(&ws)?;
    Ok(ws)
}

/// Once the command's work is recorded: starts due maintenance in a detached background
/// process and returns at once (see `crate::maintainer::maintain_later`); what that pass
/// warns about, the next command prints ([`open_with`]). With `RETRACE_MAINTAIN=inline` the
/// pass runs here, and its warnings are printed now.
fn maintain_later(ws: &crate::working_copy::WorkingCopy) {
    if let crate::maintainer::Later::Ran { warnings, .. } = crate::maintainer::maintain_later(ws) {
        for w in warnings {
            eprintln!("retrace: warning: {}", terminal_text(&w));
        }
    }
}

/// Prints the workspace's warnings, each one line on stderr.
fn print_warnings(ws: &Workspace) {
    print_warnings_from(ws, 0);
}

/// Prints the workspace's warnings from the `skip`th on, each one line on stderr.
fn print_warnings_from(ws: &Workspace, skip: usize) {
    for w in ws.warnings().iter().skip(skip) {
        eprintln!("retrace: warning: {}", terminal_text(w));
    }
}

/// Ctrl-C during a snapshot (a cold one of a big workspace takes minutes): instead of dying
/// silently, say that nothing was recorded and where its bytes go, and exit 130 as a shell
/// expects. The capture is crash-safe: what it stored is in no index, and `retrace gc`
/// frees it (its dry run counts it).
fn say_when_interrupted() {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]) else {
        return;
    };
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            eprintln!(
                "retrace: interrupted: nothing recorded (what the snapshot had stored so far is \
                 freed by the next `retrace gc`)"
            );
            std::process::exit(130);
        }
    });
}

fn run(cli: Cli) -> Result<u8> {
    use commands::{agents, config, demo, docs, history, inspect, maintenance, snapshot, watch};
    // An empty `RETRACE_SESSION=` (or `--session ''`) means unset, as for any variable.
    let (dir, sid) = (
        cli.dir.as_ref(),
        cli.session.as_deref().filter(|s| !s.is_empty()),
    );
    // A `-C` that names no directory is a mistake in the call, like an unknown option.
    if let Some(d) = dir
        && !d.is_dir()
        && !matches!(cli.command, Command::Hook { .. })
    {
        return Err(Usage(format!(
            "-C {}: {}; pass an existing workspace directory",
            d.display(),
            if d.exists() {
                "not a directory"
            } else {
                "no such directory"
            }
        ))
        .into());
    }
    match cli.command {
        Command::Demo => demo::run(dir),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man { command, out_dir } => docs::man(command.as_deref(), out_dir.as_deref()),
        Command::MaintainDue => maintenance::maintain_due(dir),
        Command::Hook { agent, watch } => Ok(agents::hook(&agent, watch)),
        Command::Mcp => agents::mcp(session(dir, sid, Pick::Create)?),
        Command::Install {
            agent,
            user,
            project: _,
            local,
            watch,
        } => agents::install(&agent, dir, agents::Scope::of(user, local), true, watch),
        Command::Uninstall {
            agent,
            user,
            project: _,
            local,
        } => agents::install(&agent, dir, agents::Scope::of(user, local), false, false),
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
            let s = session(dir, sid, Pick::Create)?.owned_by(owner);
            history::begin(&s, anchor, prompt, timeout_ms, json)
        }
        Command::Turn {
            action: TurnAction::End { anchor, json },
        } => {
            let s = session(dir, sid, Pick::Open)?;
            let code = history::end(&s, anchor, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Turn {
            action: TurnAction::Round { anchor },
        } => history::round(&session(dir, sid, Pick::Open)?, anchor),
        Command::Step {
            action:
                StepAction::Begin {
                    tool,
                    summary,
                    call,
                    files,
                    json,
                },
        } => history::step_begin(
            &session(dir, sid, Pick::Open)?,
            &call,
            &tool,
            &summary,
            &files,
            json,
        ),
        Command::Step {
            action: StepAction::End { call, json },
        } => history::step_end(&session(dir, sid, Pick::Open)?, &call, json),
        Command::Undo {
            force,
            dry_run: true,
            json,
            ..
        } => history::preview(&session(dir, sid, Pick::History)?, "undo", force, json),
        Command::Undo {
            mode, force, json, ..
        } => history::undo(&session(dir, sid, Pick::History)?, mode.into(), force, json),
        Command::Revert {
            turn,
            force,
            dry_run,
            json,
        } => {
            let named = turn.strip_prefix("turn:").unwrap_or(&turn);
            let (n, step) = match named.split_once('.') {
                Some((n, k)) => (n.parse::<u64>().ok(), k.parse::<u64>().ok().map(Some)),
                None => (named.parse::<u64>().ok(), Some(None)),
            };
            let (Some(n), Some(step)) = (n, step) else {
                return Err(Usage(format!(
                    "revert takes a turn as turn:N, or one step of it as turn:N.K (see `retrace \
                     log --steps`), not {turn:?}"
                ))
                .into());
            };
            let s = session(dir, sid, Pick::History)?;
            history::revert(&s, (n, step), force, dry_run, json)
        }
        Command::Redo {
            force,
            dry_run: true,
            json,
        } => history::preview(&session(dir, sid, Pick::History)?, "redo", force, json),
        Command::Redo { force, json, .. } => {
            history::redo(&session(dir, sid, Pick::History)?, force, json)
        }
        Command::Checkpoint {
            label,
            label_opt,
            json,
        } => {
            let label = label_of(label.or(label_opt))?;
            let ws = open_to_snapshot(dir)?;
            let s = session_of(&ws, sid, Pick::Create)?;
            let code = history::checkpoint(&s, label, json)?;
            maintain_later(s.workspace());
            Ok(code)
        }
        Command::Navigate {
            anchor,
            mode,
            force,
            dry_run,
            json,
        } => history::navigate(
            &session(dir, sid, Pick::History)?,
            (&anchor, mode.into()),
            force,
            dry_run,
            json,
        ),
        #[cfg(feature = "ui")]
        Command::Ui => {
            let ws = reading_history(dir)?;
            let app = crate::ui::App::new(ws, sid)?;
            match crate::ui::run(app) {
                Ok(()) => Ok(OK),
                // Run where it cannot be: a mistake in the call, as a missing `-C` is.
                Err(e @ crate::ui::UiError::NotATerminal) => Err(Usage(e.to_string()).into()),
                Err(e) => Err(e.into()),
            }
        }
        Command::Sessions { json } => history::sessions(open_reading(dir)?.ok().as_ref(), json),
        Command::Snapshot {
            label,
            label_opt,
            json,
            rescan,
        } => {
            let ws = open_to_snapshot(dir)?;
            snapshot::snapshot(&ws, label_of(label.or(label_opt))?, json, rescan)
        }
        Command::Watch { detach, stop } => {
            let ws = open_to_snapshot(dir)?;
            watch::watch(&ws, detach, stop)
        }
        Command::Log {
            snapshots,
            steps,
            max,
            json,
            paths,
        } => match sid {
            Some(id) if !snapshots && !paths.is_empty() => {
                inspect::session_file_log(&session_reading(dir, id)?, &paths, max, json)
            }
            Some(id) if !snapshots => history::log(&session_reading(dir, id)?, max, steps, json),
            None if steps => {
                let ws = reading_history(dir)?;
                let s = session_of(&ws, None, Pick::History)?;
                history::log(&s, max, true, json)
            }
            None if !snapshots && !paths.is_empty() => {
                inspect::file_log(open_reading(dir)?.ok().as_ref(), &paths, max, json)
            }
            _ => snapshot::log(open_reading(dir)?.as_ref(), &paths, max, json),
        },
        Command::Show { reference, json } => {
            let ws = reading_history(dir)?;
            let names = SnapshotNames::new(&ws, sid);
            let hex = reference.len() >= 8 && reference.bytes().all(|b| b.is_ascii_hexdigit());
            if hex && let Ok(id) = ws.resolve(&reference) {
                return inspect::show_snapshot(&ws, &id, json);
            }
            let of_session = ["turn:", "checkpoint:", "revert:"]
                .iter()
                .any(|p| reference.starts_with(p));
            if of_session {
                return inspect::show(&session_of(&ws, sid, Pick::History)?, &reference, json);
            }
            // A label or a host anchor: the session's entry (a checkpoint label, an anchor)
            // first, else the workspace's snapshot of that label.
            if let Some(s) = names.session(false)? {
                match s.show(&reference) {
                    Ok(detail) => return inspect::print_detail(&detail, json),
                    Err(Error::Inspect { .. } | Error::Anchor { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let id = names.resolve(&reference)?;
            inspect::show_snapshot(&ws, &id, json)
        }
        Command::Blame { path, json } => {
            let ws = reading_history(dir)?;
            match sid {
                Some(_) => {
                    let s = session_of(&ws, sid, Pick::History)?;
                    let among = crate::history::inspect::Among::ThisSession;
                    inspect::blame(&s.blame(&path, among)?, json)
                }
                None => inspect::blame(&ws.blame(&path)?, json),
            }
        }
        Command::Diff {
            a,
            b,
            patch,
            stat,
            name_status,
            color,
            json,
            paths,
        } => {
            let none_yet = |root: &Path| -> anyhow::Error {
                let what = a
                    .as_ref()
                    .map_or("to compare with".into(), |a| format!("{a:?}"));
                Usage(format!(
                    "no snapshot {what}: {} has no snapshots yet (`retrace snapshot` takes one)",
                    root.display()
                ))
                .into()
            };
            let ws = match open_reading(dir)? {
                Ok(ws) => ws,
                Err(none) => return Err(none_yet(&none.root)),
            };
            // Without a snapshot named: the last one, against the disk.
            let a = match a {
                Some(a) => a,
                None => match ws.working_copy().store().reader()?.last_known()? {
                    Some(id) => id.to_hex(),
                    None => return Err(none_yet(ws.root())),
                },
            };
            let names = SnapshotNames::new(&ws, sid);
            // A step alone names a change: from the workspace when it began to when it ended.
            let (a, b) = match (crate::history::step_name(&a), b) {
                (Some((n, k, false)), None) => (format!("turn:{n}.{k}:before"), Some(a)),
                (_, b) => (a, b),
            };
            let a = names.resolve(&a)?;
            let b = b.map(|b| names.resolve(&b)).transpose()?;
            let show = snapshot::DiffShow {
                patch,
                stat,
                name_status,
                colour: color.colour(),
                json,
            };
            snapshot::diff(&ws, &a, b.as_ref(), &paths, show)
        }
        Command::Restore {
            id,
            force,
            dry_run,
            json,
            paths,
        } => {
            let ws = open(dir)?;
            let id = SnapshotNames::new(&ws, sid).resolve(&id)?;
            // With a session, the restore is that session's: what another session wrote
            // last is theirs (the ownership rule), as its running turns' work always is.
            let session = sid
                .map(|s| session_of(&ws, Some(s), Pick::History))
                .transpose()?;
            snapshot::restore(&ws, session.as_ref(), &id, &paths, force, dry_run, json)
        }
        Command::Status { json } => match (open_reading(dir)?, sid) {
            (Ok(ws), Some(id)) => {
                history::status(&ws, &session_of(&ws, Some(id), Pick::History)?, json)
            }
            // No store, so no session: said as for any unknown one.
            (Err(none), Some(id)) => Err(no_session_yet(id, &none.root)),
            (ws, None) => snapshot::status(ws.as_ref(), json),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, turns: usize, touched_ms: u64, pending: Option<u64>) -> crate::SessionInfo {
        let key = crate::history::db::SessionKey::of(name);
        crate::SessionInfo {
            key,
            id: key.short(),
            name: Some(name.into()),
            agent: None,
            turns,
            checkpoints: 0,
            pending,
            created_ms: 0,
            touched_ms,
        }
    }

    fn picked(all: &[crate::SessionInfo], pick: Pick) -> String {
        match implied(all, pick) {
            Implied::Default => "default".into(),
            Implied::One(s, _) => s.shown().into(),
            Implied::None => "none".into(),
            Implied::Several(v) => format!("several {}", v.len()),
        }
    }

    #[test]
    fn without_a_session_the_obvious_one_is_used_or_the_choice_refused() {
        let hour = crate::history::list::CLEARLY_NEWER_MS;
        let empty = info("empty", 0, 9 * hour, None);
        assert_eq!(picked(&[], Pick::History), "none");
        assert_eq!(picked(std::slice::from_ref(&empty), Pick::History), "none");
        assert_eq!(
            picked(std::slice::from_ref(&empty), Pick::Create),
            "default"
        );
        let a = info("a", 2, 5 * hour, None);
        assert_eq!(picked(&[empty.clone(), a.clone()], Pick::History), "a");
        // Two with history: the newest only when clearly newer.
        let b_close = info("b", 1, 5 * hour - 1, None);
        assert_eq!(
            picked(&[a.clone(), b_close.clone()], Pick::History),
            "several 2"
        );
        assert_eq!(
            picked(&[a.clone(), b_close.clone()], Pick::Create),
            "several 2"
        );
        let b_old = info("b", 1, 4 * hour, None);
        assert_eq!(picked(&[a.clone(), b_old], Pick::History), "a");
        // `turn end` takes the one with a turn open.
        let c_open = info("c", 1, 5 * hour - 2, Some(2));
        let all = [a, b_close, c_open];
        assert_eq!(picked(&all, Pick::Open), "c");
        assert_eq!(picked(&all, Pick::History), "several 3");
    }

    /// README: exit codes 0 success, 1 refused, 2 usage or busy, 3 errors.
    #[test]
    fn busy_exits_2_refused_1_errors_3() {
        let busy = |path: &str| crate::StoreError::Busy {
            path: path.into(),
            secs: 120,
        };
        let lock_busy = anyhow::Error::from(Error::Store(busy("/h/lock")));
        assert_eq!(classify(&lock_busy), ("busy", 2));
        let capture_busy = anyhow::Error::from(Error::Restore(Box::new(RestoreError::Capture(
            crate::CaptureError::Store(busy("/h/store.redb")),
        ))));
        assert_eq!(classify(&capture_busy), ("busy", 2));
        let dirty = anyhow::Error::from(Error::from(RestoreError::Dirty {
            paths: vec!["a".into()],
            count: 1,
        }));
        assert_eq!(classify(&dirty), ("dirty", 1));
        let failed = anyhow::Error::from(Error::from(crate::OpenError::Workspace {
            path: "/w".into(),
            reason: "not a directory".into(),
        }));
        assert_eq!(classify(&failed), ("error", 3));
        assert_eq!(classify(&anyhow::anyhow!("other")), ("error", 3));
    }

    /// `Workspace::open`, `snapshot` and `restore` answer their own error types: `?` into
    /// anyhow carries those, and `umbrella` makes them the `Error` `classify` reads.
    #[test]
    fn per_operation_errors_classify_as_the_umbrella_error() {
        let busy = || crate::StoreError::Busy {
            path: "/h/store.redb".into(),
            secs: 120,
        };
        let open_busy = umbrella(crate::OpenError::Store(busy()).into());
        assert_eq!(classify(&open_busy), ("busy", 2));
        assert!(open_busy.downcast_ref::<Error>().is_some());
        let snapshot_busy = umbrella(crate::CaptureError::Store(busy()).into());
        assert_eq!(classify(&snapshot_busy), ("busy", 2));
        let dirty = umbrella(
            RestoreError::Dirty {
                paths: vec!["a".into()],
                count: 1,
            }
            .into(),
        );
        assert_eq!(classify(&dirty), ("dirty", 1));
        let held = umbrella(RestoreError::Held { held: Vec::new() }.into());
        assert_eq!(classify(&held), ("held", 1));
        let path = umbrella(
            RestoreError::Path {
                path: "..".into(),
                reason: "outside".into(),
            }
            .into(),
        );
        assert_eq!(classify(&path), ("usage", 2));
        // Context stays: the message a caller added is kept.
        let wrapped = umbrella(anyhow::Error::from(crate::OpenError::Store(busy())).context("x"));
        assert_eq!(wrapped.to_string(), "x");
    }
}
