//! `retrace completions SHELL` and `retrace man`, generated from the clap definitions.

use anyhow::Result;
use clap::CommandFactory;

use crate::{Cli, OK};

/// `retrace completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "retrace", &mut out);
    print_all(&out)
}

/// `retrace man`: the man page in roff.
pub fn man() -> Result<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    print_all(&out)
}

/// Writes generated text to stdout; a reader that stopped early (`| head`) is no error.
fn print_all(text: &[u8]) -> Result<u8> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(OK),
    }
}
