//! `retrace import`: a session rebuilt from the commits `retrace export` wrote.

use anyhow::Result;

use crate::GitImport;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::open;

/// Rebuild a session from the commits `retrace export` wrote
///
/// Reads the ref's commits, stores their files in this workspace's store, checks that
/// every snapshot rebuilds exactly, and records the session's turns, prompts and
/// checkpoints: `log`, `show`, `blame`, `diff`, `revert` and `ui` then work on it.
/// Importing the same ref again adds only what is new. A ref retrace did not write is
/// refused.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// The ref to read.
    #[arg(long = "git-ref", value_name = "REF")]
    git_ref: String,
    /// A directory in the repository holding the ref, or a URL to fetch it from (default:
    /// the bare repository beside the store that `export` writes to).
    #[arg(long, value_name = "DIR|URL")]
    repo: Option<String>,
    /// The session's name here (default: its name where it was exported).
    #[arg(long = "as", value_name = "NAME")]
    as_name: Option<String>,
}

/// Runs `retrace import`.
pub fn run(args: ImportArgs, cx: &Ctx) -> Result<u8> {
    let ws = open(cx.dir())?;
    let out = ws.import_git(&GitImport {
        reference: args.git_ref,
        source: args.repo,
        as_name: args.as_name,
    })?;
    print_imported(&out, cx.json)
}

/// `import`'s and `unbundle`'s answer.
pub fn print_imported(out: &crate::Imported, json: bool) -> Result<u8> {
    if json {
        json::answer("imported", out)?;
    } else if out.turns + out.checkpoints == 0 {
        println!(
            "session {} already holds these {} turn(s): nothing to import",
            out.session, out.already
        );
    } else {
        println!(
            "imported session {}: {} turn(s), {} checkpoint(s) added{}",
            out.session,
            out.turns,
            out.checkpoints,
            if out.already > 0 {
                format!(" ({} already here)", out.already)
            } else {
                String::new()
            }
        );
        println!("see it with: retrace --session {} log", out.session);
    }
    Ok(OK)
}
