//! One module per command: its arguments (`XxxArgs`, whose doc comment is its help) and its
//! `run`, which opens what the command works on (a workspace or a session), calls the
//! library (the operations that move files through [`crate::protocol::ops`], as `serve`,
//! MCP and the hooks do), prints, and returns the exit code. This file lists them and
//! dispatches; a new command is a new file here and one variant below.

// Every command's `run` has one shape: it owns the arguments clap parsed for it, and answers
// an exit code or an error, whether or not this one consumes them or can fail.
#![allow(clippy::needless_pass_by_value, clippy::unnecessary_wraps)]

use std::path::PathBuf;

use anyhow::Result;

mod blame;
mod bundle;
mod checkpoint;
mod completions;
mod config;
mod demo;
mod diff;
mod export;
mod gc;
mod hook;
mod import;
mod install;
mod log;
mod maintain_due;
mod man;
mod mcp;
mod navigate;
mod redo;
mod repair;
mod restore;
mod revert;
mod serve;
mod sessions;
mod show;
mod snapshot;
mod status;
mod step;
mod turn;
#[cfg(feature = "ui")]
mod ui;
mod unbundle;
mod undo;
mod watch;
mod wrap;

/// What every command gets from the global options.
pub struct Ctx {
    /// `-C DIR`: the workspace directory (default: the current one).
    pub dir: Option<PathBuf>,
    /// `--session`: the session to work on (an empty one is none).
    pub session: Option<String>,
    /// `--json`: one JSON object on stdout instead of text (`docs/json.md`).
    pub json: bool,
}

impl Ctx {
    /// `-C`, as the opening functions take it.
    pub fn dir(&self) -> Option<&PathBuf> {
        self.dir.as_ref()
    }

    /// `--session`, or none when unset or empty (`RETRACE_SESSION=`, as for any variable).
    pub fn sid(&self) -> Option<&str> {
        self.session.as_deref().filter(|s| !s.is_empty())
    }
}

/// The commands, in the order `--help` groups them ([`crate::cli::help`]).
#[derive(clap::Subcommand)]
pub enum Command {
    Snapshot(snapshot::SnapshotArgs),
    Watch(watch::WatchArgs),
    Wrap(wrap::WrapArgs),
    #[cfg(feature = "ui")]
    Ui(ui::UiArgs),
    Log(log::LogArgs),
    Show(show::ShowArgs),
    Blame(blame::BlameArgs),
    Diff(diff::DiffArgs),
    Restore(restore::RestoreArgs),
    Status(status::StatusArgs),
    Sessions(sessions::SessionsArgs),
    #[command(subcommand)]
    Turn(turn::TurnCommand),
    #[command(subcommand)]
    Step(step::StepCommand),
    Undo(undo::UndoArgs),
    Redo(redo::RedoArgs),
    Revert(revert::RevertArgs),
    Checkpoint(checkpoint::CheckpointArgs),
    Navigate(navigate::NavigateArgs),
    Export(export::ExportArgs),
    Import(import::ImportArgs),
    Bundle(bundle::BundleArgs),
    Unbundle(unbundle::UnbundleArgs),
    Gc(gc::GcArgs),
    Repair(repair::RepairArgs),
    Config(config::ConfigArgs),
    Serve(serve::ServeArgs),
    Mcp(mcp::McpArgs),
    Hook(hook::HookArgs),
    Install(install::InstallArgs),
    Uninstall(install::UninstallArgs),
    Demo(demo::DemoArgs),
    Completions(completions::CompletionsArgs),
    Man(man::ManArgs),
    MaintainDue(maintain_due::MaintainDueArgs),
}

impl Command {
    /// Whether its output goes through a pager (unless `--json`).
    pub fn paged(&self) -> bool {
        matches!(
            self,
            Command::Log(_) | Command::Show(_) | Command::Blame(_) | Command::Diff(_)
        )
    }

    /// Whether Ctrl-C is said in words (a long capture: see `say_when_interrupted`).
    pub fn captures(&self) -> bool {
        matches!(self, Command::Snapshot(_) | Command::Checkpoint(_))
    }

    /// Whether `-C` may name a directory that does not exist (a hook never fails its agent,
    /// and says so its own way).
    pub fn takes_any_dir(&self) -> bool {
        matches!(self, Command::Hook(_))
    }
}

/// Runs `command`.
pub fn run(command: Command, cx: &Ctx) -> Result<u8> {
    match command {
        Command::Snapshot(a) => snapshot::run(a, cx),
        Command::Watch(a) => watch::run(a, cx),
        Command::Wrap(a) => wrap::run(a, cx),
        #[cfg(feature = "ui")]
        Command::Ui(a) => ui::run(a, cx),
        Command::Log(a) => log::run(a, cx),
        Command::Show(a) => show::run(a, cx),
        Command::Blame(a) => blame::run(a, cx),
        Command::Diff(a) => diff::run(a, cx),
        Command::Restore(a) => restore::run(a, cx),
        Command::Status(a) => status::run(a, cx),
        Command::Sessions(a) => sessions::run(a, cx),
        Command::Turn(a) => turn::run(a, cx),
        Command::Step(a) => step::run(a, cx),
        Command::Undo(a) => undo::run(a, cx),
        Command::Redo(a) => redo::run(a, cx),
        Command::Revert(a) => revert::run(a, cx),
        Command::Checkpoint(a) => checkpoint::run(a, cx),
        Command::Navigate(a) => navigate::run(a, cx),
        Command::Export(a) => export::run(a, cx),
        Command::Import(a) => import::run(a, cx),
        Command::Bundle(a) => bundle::run(a, cx),
        Command::Unbundle(a) => unbundle::run(a, cx),
        Command::Gc(a) => gc::run(a, cx),
        Command::Repair(a) => repair::run(a, cx),
        Command::Config(a) => config::run(a, cx),
        Command::Serve(a) => serve::run(a, cx),
        Command::Mcp(a) => mcp::run(a, cx),
        Command::Hook(a) => hook::run(a, cx),
        Command::Install(a) => install::run(a, cx),
        Command::Uninstall(a) => install::run_uninstall(a, cx),
        Command::Demo(a) => demo::run(a, cx),
        Command::Completions(a) => completions::run(a, cx),
        Command::Man(a) => man::run(a, cx),
        Command::MaintainDue(a) => maintain_due::run(a, cx),
    }
}
