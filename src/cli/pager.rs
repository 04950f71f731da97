//! Long output (`log`, `diff`, `show`, `blame`) through a pager on a terminal, as git does:
//! `RETRACE_PAGER`, else `PAGER`, else `less` (with `LESS=FRX` unless `LESS` is set: it
//! quits at once when the output fits one screen, keeps colours, leaves the screen as it
//! was). Not when stdout is not a terminal, with `--no-pager`, or when the pager is empty
//! or `cat`.

use std::io::{IsTerminal, Write};
use std::process::{Child, Command, Stdio};

/// Whether stdout was a terminal when the command started (before a pager took it).
static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Notes whether stdout is a terminal, before [`Pager::start`] may replace it.
pub fn note_terminal() {
    TERMINAL.get_or_init(|| std::io::stdout().is_terminal());
}

/// Whether stdout is the user's terminal, through a pager or not (for `--color=auto`).
pub fn stdout_is_terminal() -> bool {
    *TERMINAL.get_or_init(|| std::io::stdout().is_terminal())
}

/// A running pager fed by this process's stdout; dropping it ends the output and waits for
/// the pager to quit.
pub struct Pager {
    child: Child,
}

impl Pager {
    /// Starts the pager and points stdout at it, when one applies (see the module docs).
    pub fn start(no_pager: bool) -> Option<Pager> {
        if no_pager || !std::io::stdout().is_terminal() {
            return None;
        }
        let command = match std::env::var("RETRACE_PAGER").or_else(|_| std::env::var("PAGER")) {
            Ok(c) => c,
            // The default only where it is installed: else the output would go nowhere.
            Err(_) if on_path("less") => "less".into(),
            Err(_) => return None,
        };
        let command = command.trim();
        if command.is_empty() || command == "cat" {
            return None;
        }
        let mut child = Command::new("sh");
        child.arg("-c").arg(command).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            child.env("LESS", "FRX");
        }
        // A pager that cannot start: the output goes to the terminal as it is.
        let mut child = child.spawn().ok()?;
        let stdin = child.stdin.take()?;
        if rustix::stdio::dup2_stdout(&stdin).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        drop(stdin);
        Some(Pager { child })
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // Stdout is the pipe's last write end: point it at /dev/null so the pager sees the
        // end of its input, then wait until the reader quits it.
        if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
            let _ = rustix::stdio::dup2_stdout(&null);
        }
        let _ = self.child.wait();
    }
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
