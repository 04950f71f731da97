//! `retrace`: the command-line interface. Thin: parse arguments, call the library, print.
//! This file holds the global options and `main`; `commands/` one file per command (its
//! arguments and its run), `open` how a command opens its workspace or session, `names` how
//! snapshots are named, `outcome` how the operations that move files report, `exit` the exit
//! codes and how failures map to them, `text` the output shared by commands, `help` how the
//! commands are grouped in `--help`, `json` the `--json` answers, `pager` and `progress` the
//! terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

mod commands;
pub mod dump;
mod exit;
mod help;
mod json;
mod names;
mod open;
mod outcome;
mod pager;
mod progress;
mod text;

pub use open::NoStore;

/// A workspace time machine for AI coding agents
///
/// retrace snapshots the whole workspace before and after every turn of an agent's
/// conversation, whatever wrote the files (the agent's edit tool, its shell commands, you),
/// into a deduplicated store outside the workspace, and undoes, redoes, reverts and
/// restores them exactly: only the paths a turn changed, never over an edit made since,
/// never another session's work. Installed into an agent (`retrace install`), its `/undo`
/// runs `retrace undo`; every command also works by hand. Start with `retrace demo`.
#[derive(Parser)]
#[command(name = "retrace", version, about, long_about)]
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
    /// Print JSON instead of text
    ///
    /// One JSON object on stdout, in the shapes `docs/json.md` gives (errors too, with
    /// nothing on stderr).
    #[arg(long, global = true)]
    json: bool,
    /// List every path an operation writes, not the first ten
    #[arg(short = 'v', long, global = true)]
    verbose: bool,
    /// Print straight to the terminal, without a pager (`RETRACE_PAGER`, `PAGER`, `less`)
    #[arg(long, global = true)]
    no_pager: bool,
    #[command(subcommand)]
    command: commands::Command,
}

/// The `retrace` binary: parses the arguments, runs the command, maps its result to an exit code.
#[must_use]
pub fn main() -> ExitCode {
    cap_malloc_arenas();
    crate::error::install_panic_hook();
    let parsed = help::command().try_get_matches().and_then(|m| {
        let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&m)?;
        Ok((cli, json_given(&m), command_path(&m)))
    });
    let (cli, json, path) = match parsed {
        Ok(parsed) => parsed,
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => return ExitCode::from(exit::usage_error(&e)),
    };
    text::set_verbose(cli.verbose);
    let cx = commands::Ctx {
        dir: cli.dir,
        session: cli.session,
        json,
    };
    if json && help::JSONLESS.contains(&path.as_str()) {
        return ExitCode::from(exit::report(&exit::no_json(&path), true));
    }
    // A `-C` that names no directory is a mistake in the call, like an unknown option.
    if let Some(d) = &cx.dir
        && !d.is_dir()
        && !cli.command.takes_any_dir()
    {
        let e = exit::Usage(format!(
            "-C {}: {}; pass an existing workspace directory",
            d.display(),
            if d.exists() {
                "not a directory"
            } else {
                "no such directory"
            }
        ));
        return ExitCode::from(exit::report(&e.into(), json));
    }
    if cli.command.captures() {
        say_when_interrupted();
    }
    pager::note_terminal();
    let pager = if cli.command.paged() && !json {
        pager::Pager::start(cli.no_pager)
    } else {
        None
    };
    let outcome = commands::run(cli.command, &cx).map_err(exit::umbrella);
    drop(pager);
    crate::report_peak_memory();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => ExitCode::from(exit::report(&e, json)),
    }
}

/// The command as its words name it: `undo`, `turn round`.
fn command_path(m: &clap::ArgMatches) -> String {
    let mut words = Vec::new();
    let mut m = m;
    while let Some((name, sub)) = m.subcommand() {
        words.push(name);
        m = sub;
    }
    words.join(" ")
}

/// Whether `--json` was given: the global flag, or its hidden stand-in on a command that
/// has no JSON answer (see [`help::command`]), which that command then refuses.
fn json_given(m: &clap::ArgMatches) -> bool {
    let mut m = m;
    loop {
        if let Ok(Some(true)) = m.try_get_one::<bool>("json") {
            return true;
        }
        match m.subcommand() {
            Some((_, sub)) => m = sub,
            None => return false,
        }
    }
}

/// Caps glibc's malloc arenas at two. A capture's reader threads allocate and free file
/// buffers by the million, and with glibc's default (8 arenas per core) each arena kept
/// its own freed memory: the peak RSS of a 300k-file cold snapshot was 309 MB with the
/// default and 245 MB with two arenas, at the same speed (docs/benchmarks.md).
fn cap_malloc_arenas() {
    crate::platform::cap_malloc_arenas();
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
