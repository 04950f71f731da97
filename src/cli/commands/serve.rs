//! `retrace serve` (for adapters): the library over JSON-RPC on stdio.

use anyhow::Result;

use crate::Config;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;

/// Serve the library over JSON-RPC on stdio (for adapters)
///
/// Newline-delimited JSON-RPC 2.0 on stdin/stdout, for agent adapters; see
/// docs/protocol.md.
#[derive(clap::Args)]
#[command(hide = true)]
pub struct ServeArgs;

/// Runs `retrace serve`.
pub fn run(_: ServeArgs, _: &Ctx) -> Result<u8> {
    Ok(serve())
}

/// `retrace serve`: JSON-RPC on stdin/stdout until stdin ends.
pub fn serve() -> u8 {
    let stdin = std::io::stdin();
    crate::protocol::serve::Server::new(Config::from_env(), Box::new(std::io::stdout()))
        .run(stdin.lock());
    OK
}
