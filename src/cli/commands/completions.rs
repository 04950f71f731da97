//! `retrace completions SHELL`: a shell completion script from the clap definitions.

use anyhow::Result;

use super::man::print_all;
use crate::cli::commands::Ctx;

/// Print a shell completion script
///
/// For example `retrace completions bash >
/// ~/.local/share/bash-completion/completions/retrace`.
#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Runs `retrace completions`.
pub fn run(args: CompletionsArgs, _: &Ctx) -> Result<u8> {
    completions(args.shell)
}

/// `retrace completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut crate::cli::help::command(), "retrace", &mut out);
    print_all(&out)
}
