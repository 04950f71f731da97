//! Embedding retrace: an agent written in Rust takes snapshots and undo from the library
//! alone (no CLI, no async runtime: `cargo run --no-default-features --example embed`).
//!
//! Opens a workspace, begins a turn, changes a file as an agent's tool would, ends the turn,
//! then undoes it: the file is back as it was before the turn.

use std::time::Duration;

use retrace::{Config, Mode, Outcome, Workspace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A throwaway workspace and retrace home; a real agent passes its working directory and
    // `Config::from_env()` (the home under ~/.local/state/retrace, or `RETRACE_HOME`).
    let base = std::env::temp_dir().join(format!("retrace-embed-{}", std::process::id()));
    let (dir, home) = (base.join("workspace"), base.join("home"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.rs"), "fn main() {}\n")?;

    let ws = Workspace::open(&dir, &Config::with_home(&home))?;
    let session = ws.session("embed-example").for_agent("embed");

    // A turn: the before-snapshot is captured in the background; wait for it before the
    // agent's first tool runs.
    let turn = session.begin_turn(None, Some("add a greeting".into()))?;
    turn.wait_before(Duration::from_secs(60))?;
    std::fs::write(dir.join("main.rs"), "fn main() { println!(\"hi\"); }\n")?;
    let summary = turn.end(None)?;
    let changed = summary.added + summary.modified + summary.deleted;
    println!("turn {}: {changed} file(s) changed", summary.turn);

    match session.undo(Mode::Files)? {
        Outcome::Restored { files_written, .. } => println!("undone: wrote {files_written:?}"),
        other => return Err(format!("undo did not restore: {other:?}").into()),
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("main.rs"))?,
        "fn main() {}\n"
    );
    println!("main.rs is back as it was before the turn");

    drop(ws);
    std::fs::remove_dir_all(&base)?;
    Ok(())
}
