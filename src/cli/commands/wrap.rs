//! `retrace wrap -- CMD [ARGS…]`: an agent without hooks run inside a session of its own
//! (`crate::protocol::wrap`), with its terminal, signals and exit status passed through.

use std::ffi::OsString;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

use crate::cli::commands::Ctx;
use crate::cli::open::open_to_snapshot;
use crate::protocol::wrap::{self, WatcherUse};

/// Run an agent that has no hooks inside a session of its own
///
/// The command runs on this terminal as if unwrapped (a full-screen agent works; Ctrl-C,
/// Ctrl-Z and its exit status are its own), while retrace records it: a watcher (started for
/// the run if none serves the workspace, and stopped after), a turn while it runs, and a step
/// for each burst of writes. Where the agent records its prompts (Aider's
/// `.aider.chat.history.md`), each prompt begins a turn named by it. From another terminal,
/// `retrace undo`, `revert`, `log` and `retrace ui` work on the session (named after the
/// command and the time, or `--session`).
#[derive(clap::Args)]
pub struct WrapArgs {
    /// The command to run, and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// Runs `retrace wrap`.
pub fn run(args: WrapArgs, cx: &Ctx) -> Result<u8> {
    let program = std::path::Path::new(&args.command[0])
        .file_name()
        .map_or_else(|| "agent".into(), |n| n.to_string_lossy().into_owned());
    let cwd = std::env::current_dir().context("the current directory")?;
    let ws = open_to_snapshot(cx.dir())?;
    let name = if let Some(s) = cx.sid() {
        s.to_string()
    } else {
        // Two runs begun in the same second get sessions of their own.
        let stem = format!("{program}-{}", chrono_like_now());
        let existing: Vec<String> = ws
            .sessions()
            .map(|v| v.into_iter().map(|s| s.id).collect())
            .unwrap_or_default();
        let mut name = stem.clone();
        for i in 2..=existing.len() + 1 {
            if !existing.contains(&name) {
                break;
            }
            name = format!("{stem}-{i}");
        }
        name
    };
    let session = ws.session(&name).for_agent(&program);
    // Signals meant for the command reach it: the terminal's (Ctrl-C, Ctrl-\) go to the
    // whole foreground group by themselves; those sent to retrace alone (`kill`) are passed
    // on. retrace itself outlives them, to end the turn and exit as the command did.
    let child = Arc::new(AtomicU32::new(0));
    forward_signals(&child);
    let ran = wrap::run(&ws, session, &args.command, &cwd, &|pid| {
        child.store(pid.unwrap_or(ENDED), Ordering::SeqCst);
    });
    let (status, report) = match ran {
        Ok(r) => r,
        // As `env`, `nice` and `timeout` do: 127 when the command is not found, 126 when it
        // cannot be run.
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "retrace: cannot run {}: {e}; nothing was recorded",
                args.command[0].to_string_lossy()
            );
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    say(&name, &report);
    exit_as(status)
}

/// `YYYYmmdd-HHMMSS` in UTC, for a session's default name.
fn chrono_like_now() -> String {
    let text = crate::cli::text::format_time(crate::store::now_ms());
    text.chars()
        .filter(|c| c.is_ascii_digit() || *c == ' ')
        .collect::<String>()
        .replace(' ', "-")
}

/// After the run: the session, what it recorded, and what went wrong, on stderr.
fn say(name: &str, r: &wrap::Report) {
    // A closed stderr must not turn the command's exit status into a panic's.
    let mut err = std::io::stderr();
    let turns = match r.turns.as_slice() {
        [] => "no turn".to_string(),
        [one] => format!("turn {one}"),
        [first, .., last] => format!("turns {first}–{last}"),
    };
    let _ = writeln!(
        err,
        "retrace: session {name}: {turns}, {} step{}{}; `retrace --session {name} undo` takes \
         the last turn back",
        r.steps,
        if r.steps == 1 { "" } else { "s" },
        if r.bursts > 0 {
            format!(", {} burst(s) outside turns in `retrace log`", r.bursts)
        } else {
            String::new()
        }
    );
    if let (Some(from), false) = (&r.prompts_from, r.prompted) {
        let _ = writeln!(
            err,
            "retrace: no prompt was read from {from}: its writes are in the local history \
             (`retrace log`)"
        );
    }
    if let WatcherUse::Unavailable(why) = &r.watcher {
        let _ = writeln!(
            err,
            "retrace: no watcher ({why}): each turn was recorded as one step"
        );
    }
    for p in &r.problems {
        let _ = writeln!(err, "retrace: {p}");
    }
}

/// What [`forward_signals`] knows of the command: not started yet, its pid, or ended.
const NOT_STARTED: u32 = 0;
const ENDED: u32 = u32::MAX;

/// Before the command starts, a terminating signal ends retrace as it would have (nothing
/// ran; a turn begun is ended by the session's next). While it runs: SIGTERM, and SIGINT,
/// SIGQUIT and SIGHUP sent by a process (not the terminal's, which reached the command by
/// themselves), are passed on. Once it ended, retrace finishes recording and exits as it did.
fn forward_signals(child: &Arc<AtomicU32>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    use signal_hook::iterator::SignalsInfo;
    use signal_hook::iterator::exfiltrator::WithOrigin;
    let Ok(mut signals) = SignalsInfo::<WithOrigin>::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP]) else {
        return;
    };
    let child = Arc::clone(child);
    std::thread::spawn(move || {
        for info in signals.forever() {
            let pid = child.load(Ordering::SeqCst);
            if pid == NOT_STARTED {
                let _ = signal_hook::low_level::emulate_default_handler(info.signal);
                continue;
            }
            let from_terminal =
                matches!(info.signal, SIGINT | SIGQUIT | SIGHUP) && info.process.is_none();
            if from_terminal || pid == ENDED {
                continue;
            }
            if let (Some(pid), Some(sig)) = (
                rustix::process::Pid::from_raw(pid.cast_signed()),
                rustix::process::Signal::from_named_raw(info.signal),
            ) {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    });
}

/// Exits as the command did: its code, or killed by its signal (raised again here, with the
/// default action, so a shell sees the same).
fn exit_as(status: std::process::ExitStatus) -> Result<u8> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGTERM};
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        // The default action of a terminating signal ends this process here. Those that dump
        // a core (SIGSEGV, SIGABRT…) are the command's fault, not retrace's: exit 128 + N.
        if [SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGTERM].contains(&sig) {
            let _ = signal_hook::low_level::emulate_default_handler(sig);
        }
        return Ok(u8::try_from(128 + sig).unwrap_or(u8::MAX));
    }
    Ok(u8::try_from(status.code().unwrap_or(1)).unwrap_or(u8::MAX))
}
