//! Text shared by the commands' output: times, counts, lists of paths cut at ten (`-v` for
//! all), session names, and the warning when a restore took back installed hooks.

use crate::history::inspect::first_line;
use crate::object::terminal_line;

/// `YYYY-MM-DD HH:MM:SS` UTC from Unix milliseconds.
pub fn format_time(ms: u64) -> String {
    crate::history::inspect::time_text(ms, true)
}

/// How many paths an operation lists before it sums up the rest (`-v` lists them all).
pub const LISTED: usize = 10;

/// Set once by `main` from `-v`: list every path an operation wrote, not the first ones.
pub static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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

/// `n` and `noun`, plural unless `n` is 1: "1 file", "3 files".
pub fn counted(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// A session's name as a table or a message shows it: on one line, what a terminal would act
/// on (a newline, an escape sequence) shown escaped, at most 40 characters.
pub fn shown_name(s: &crate::SessionInfo) -> String {
    first_line(&terminal_line(s.shown()), 40)
}

/// The lines of what a restore did or would do (`verbs`: "wrote", "deleted" or their dry-run
/// words): what it left alone first, which is what the user must look at, then the paths it
/// wrote and deleted; each made safe for the terminal.
pub fn restore_lines(
    left_alone: &[crate::Skipped],
    written: &[String],
    deleted: &[String],
    (write, delete): (&str, &str),
) -> Vec<String> {
    left_alone
        .iter()
        .map(|s| {
            format!(
                "left alone {}: {}",
                terminal_line(&s.path),
                terminal_line(&s.reason)
            )
        })
        .chain(
            written
                .iter()
                .map(|p| format!("{write} {}", terminal_line(p))),
        )
        .chain(
            deleted
                .iter()
                .map(|p| format!("{delete} {}", terminal_line(p))),
        )
        .collect()
}

/// What a burst of local history changed, in one line: `burst: 3 files (+1 ~2 -0):
/// src/app.ts, src/lib.ts, …`.
pub fn burst_text(b: &crate::BurstSummary) -> String {
    let c = b.counts;
    let n = b.files();
    if n == 0 {
        return "burst: directories only (made or removed, no file changed)".into();
    }
    let mut text = format!(
        "burst: {n} file{} (+{} ~{} -{})",
        if n == 1 { "" } else { "s" },
        c.added,
        c.modified,
        c.deleted
    );
    let listed = b.listed();
    if !listed.is_empty() {
        text.push_str(": ");
        text.push_str(&crate::object::terminal_line(&listed));
    }
    text
}
