//! `retrace unbundle`: a bundle's session brought into this workspace.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::open::open;

/// Bring a bundle's session into this workspace
///
/// The whole file is checked first (checksum, every object, every snapshot); a damaged,
/// truncated or newer bundle is refused and nothing is written. Unbundling the same file
/// again adds nothing.
#[derive(clap::Args)]
pub struct UnbundleArgs {
    /// The bundle file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The session's name here (default: its name in the bundle).
    #[arg(long = "as", value_name = "NAME")]
    as_name: Option<String>,
}

/// Runs `retrace unbundle`.
pub fn run(args: UnbundleArgs, cx: &Ctx) -> Result<u8> {
    let ws = open(cx.dir())?;
    let out = ws.unbundle(&args.file, args.as_name.as_deref())?;
    super::import::print_imported(&out, cx.json)
}
