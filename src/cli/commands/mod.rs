//! One module per command group. Each command takes what `main` opened (a workspace or a
//! session), calls the library, prints, and returns its exit code.

pub mod agents;
pub mod config;
pub mod demo;
pub mod docs;
pub mod history;
pub mod inspect;
pub mod maintenance;
pub mod snapshot;
pub mod watch;

/// `YYYY-MM-DD HH:MM:SS` UTC from Unix milliseconds.
pub fn format_time(ms: u64) -> String {
    crate::history::inspect::time_text(ms, true)
}

/// How many paths an operation lists before it sums up the rest (`-v` lists them all).
const LISTED: usize = 10;

/// Set once by `main` from `-v`: list every path an operation wrote, not the first ones.
static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lists every path from now on (`-v`).
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Prints `lines` (one path each, already made safe for the terminal), the first
/// [`LISTED`] of them unless `-v` was given, then how many more there are and how to see
/// them; `indent` goes before each line.
pub fn print_listed(lines: &[String], indent: &str) {
    let all = VERBOSE.load(std::sync::atomic::Ordering::Relaxed) || lines.len() <= LISTED + 1;
    let shown = if all { lines.len() } else { LISTED };
    for l in &lines[..shown] {
        println!("{indent}{l}");
    }
    if shown < lines.len() {
        println!(
            "{indent}... and {} more (-v lists them all)",
            lines.len() - shown
        );
    }
}

/// Warns when a whole restore took back hooks `retrace install` wrote into the workspace
/// (the snapshot is older than the install): they no longer run, and how to put them back.
pub fn warn_lost_installs(home: &std::path::Path, root: &std::path::Path) {
    for settings in crate::protocol::install::lost_installs(home, root) {
        let shown = settings.strip_prefix(root).unwrap_or(&settings);
        eprintln!(
            "retrace: warning: this took back retrace's hooks in {} (the snapshot is older than \
             the install), so the agent no longer records turns; `retrace install` puts them \
             back",
            crate::object::terminal_line(&shown.to_string_lossy())
        );
    }
}
