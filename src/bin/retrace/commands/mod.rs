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

/// Prints one JSON value on a line.
pub fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

/// `YYYY-MM-DD HH:MM:SS` UTC from Unix milliseconds.
pub fn format_time(ms: u64) -> String {
    retrace::history::inspect::time_text(ms, true)
}
