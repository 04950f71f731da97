//! `retrace wrap -- CMD`: an agent without hooks run inside a session of its own. The
//! command keeps the terminal (it runs in retrace's process group, on the same terminal, so
//! a full-screen program works as if unwrapped), and its exit status is retrace's. Around
//! it: a watcher (the workspace's, or one started for the run and stopped after), turns and
//! steps. Where the agent records its prompts ([`super::prompts`]), each prompt begins a
//! turn named by it, and writes outside any turn (its start-up) go to the local history as
//! bursts; otherwise the whole run is one turn. Within a turn, each burst of writes (the
//! workspace quiet for `burst_quiet_ms` after a write) ends a step and begins the next: a
//! step is always open, so its before-capture precedes its writes.
//!
//! Nothing is printed while the command runs (it owns the terminal); what went wrong is
//! said once it exits.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use super::prompts::{self, PromptSource};
use crate::watch::{self, Watcher};
use crate::{Session, Turn, Workspace};

/// How often the run looks at the watcher and the agent's prompts.
const TICK: Duration = Duration::from_millis(100);

/// How long a turn's before-capture may take before the turn goes on without it.
const BEFORE_WAIT: Duration = Duration::from_mins(2);

/// What a wrapped run did, said after it.
#[derive(Debug, Default)]
pub struct Report {
    /// Turns begun, with their numbers.
    pub turns: Vec<u64>,
    /// Steps recorded (bursts within turns).
    pub steps: u64,
    /// Bursts recorded outside turns, in the local history.
    pub bursts: u64,
    /// Where prompts were read from, if anywhere.
    pub prompts_from: Option<String>,
    /// Whether a prompt was read.
    pub prompted: bool,
    /// What went wrong along the way (the run went on).
    pub problems: Vec<String>,
    /// The watcher started for the run (and stopped after), or that none could be.
    pub watcher: WatcherUse,
}

/// The watcher a run used.
#[derive(Debug, Default, PartialEq, Eq)]
pub enum WatcherUse {
    /// The workspace's, already running.
    #[default]
    Existing,
    /// One started for the run, stopped after.
    Started,
    /// None: bursts are not seen (the run is one step per turn).
    Unavailable(String),
}

/// Where the run learns of writes.
enum Activity {
    Local(Watcher),
    Remote { runtime_dir: PathBuf, root: PathBuf },
    None,
}

impl Activity {
    /// The change count and how long the workspace has been quiet, if known.
    fn sample(&self) -> Option<(u64, Duration)> {
        match self {
            Activity::Local(w) => {
                let a = w.activity();
                Some((a.count, a.last.map_or(Duration::MAX, |t| t.elapsed())))
            }
            Activity::Remote { runtime_dir, root } => {
                let s = watch::status(runtime_dir, root, Duration::from_millis(500))?;
                Some((
                    s.activity,
                    s.quiet_ms.map_or(Duration::MAX, Duration::from_millis),
                ))
            }
            Activity::None => None,
        }
    }
}

/// The session's state during the run.
struct Run<'a> {
    ws: &'a Workspace,
    session: Session,
    turn: Option<Turn>,
    step: u64,
    report: Report,
}

impl Run<'_> {
    fn problem(&mut self, what: &str, e: impl std::fmt::Display) {
        if self.report.problems.len() < 20 {
            self.report.problems.push(format!("{what}: {e}"));
        }
    }

    /// Begins a turn named by `prompt`, and its first step.
    fn begin_turn(&mut self, prompt: Option<String>) {
        self.end_turn();
        match self.session.begin_turn(None, prompt) {
            Ok(t) => {
                if let Err(e) = t.wait_before(BEFORE_WAIT) {
                    self.problem("the turn's before-snapshot", e);
                }
                self.report.turns.push(t.number());
                self.turn = Some(t);
                self.begin_step();
            }
            Err(e) => self.problem("beginning a turn", e),
        }
    }

    fn begin_step(&mut self) {
        self.step += 1;
        let call = format!("wrap-{}", self.step);
        if let Err(e) = self
            .session
            .begin_step(&call, "writes", "a burst of writes", &[])
        {
            self.problem("beginning a step", e);
        }
    }

    fn end_step(&mut self) {
        let call = format!("wrap-{}", self.step);
        match self.session.end_step(&call) {
            Ok(Some(_)) => self.report.steps += 1,
            Ok(None) => {}
            Err(e) => self.problem("ending a step", e),
        }
    }

    fn end_turn(&mut self) {
        let Some(t) = self.turn.take() else {
            return;
        };
        self.end_step();
        if let Err(e) = t.end(None) {
            self.problem("ending a turn", e);
        }
    }

    /// A burst of writes ended: the step ends and the next begins; outside a turn, the
    /// burst goes to the local history.
    fn burst(&mut self) {
        if self.turn.is_some() {
            self.end_step();
            self.begin_step();
        } else {
            match self.ws.capture_burst() {
                Ok(crate::BurstOutcome::Captured { .. }) => self.report.bursts += 1,
                Ok(_) => {}
                Err(e) => self.problem("capturing a burst", e),
            }
        }
    }
}

/// Runs `argv` in `cwd` inside session `session` of `ws` (see the module docs), and returns
/// its exit status with what was recorded. `spawned` hears the child's process id once it
/// runs (to forward signals to it), and None once it has ended (its id may be reused).
///
/// # Errors
/// The command could not be started (not found, not executable): nothing was recorded.
pub fn run(
    ws: &Workspace,
    session: Session,
    argv: &[OsString],
    cwd: &Path,
    spawned: &dyn Fn(Option<u32>),
) -> std::io::Result<(ExitStatus, Report)> {
    // Nothing is recorded for a command that cannot run.
    find_program(&argv[0], cwd)?;
    let spec = ws.watch_spec();
    let mut report = Report::default();
    let activity = if watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(1)).is_some()
    {
        Activity::Remote {
            runtime_dir: spec.runtime_dir.clone(),
            root: spec.root.clone(),
        }
    } else {
        let mut mine = spec.clone();
        // Stopped when the run ends, not for being idle.
        mine.idle = Duration::from_hours(100 * 365 * 24);
        match Watcher::start(mine) {
            Ok(w) => {
                report.watcher = WatcherUse::Started;
                let waited = std::time::Instant::now();
                while !w.ready() && waited.elapsed() < Duration::from_mins(1) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Activity::Local(w)
            }
            // Another process started one meanwhile: use it.
            Err(crate::WatchError::Running { .. }) => Activity::Remote {
                runtime_dir: spec.runtime_dir.clone(),
                root: spec.root.clone(),
            },
            Err(e) => {
                report.watcher = WatcherUse::Unavailable(e.to_string());
                Activity::None
            }
        }
    };
    let mut source: Option<Box<dyn PromptSource>> = prompts::source_for(argv, cwd);
    report.prompts_from = source.as_ref().map(|s| s.describe());
    let quiet = Duration::from_millis(ws.settings().burst_quiet_ms.value);
    let mut run = Run {
        ws,
        session,
        turn: None,
        step: 0,
        report,
    };
    if source.is_none() {
        let line: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        run.begin_turn(Some(format!("wrap: {}", line.join(" "))));
    }
    let mut seen = activity.sample().map(|(count, _)| count);
    let mut child = match std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            // Found a moment ago, gone now: the turn begun for it changed nothing.
            run.end_turn();
            return Err(e);
        }
    };
    spawned(Some(child.id()));
    let status = loop {
        if let Some(status) = child.try_wait()? {
            spawned(None);
            break status;
        }
        std::thread::sleep(TICK);
        if let Some(s) = source.as_mut() {
            let new = s.poll();
            if let Some(last) = new.last() {
                run.report.prompted = true;
                run.begin_turn(Some(last.clone()));
                seen = activity.sample().map(|(count, _)| count);
                continue;
            }
        }
        if let Some((count, quiet_for)) = activity.sample()
            && seen != Some(count)
            && quiet_for >= quiet
        {
            seen = Some(count);
            run.burst();
        }
    };
    // What the agent wrote last, and a prompt it recorded just before it exited.
    if let Some(s) = source.as_mut()
        && let Some(last) = s.poll().last()
    {
        run.report.prompted = true;
        run.begin_turn(Some(last.clone()));
    }
    if run.turn.is_none() && activity.sample().is_some_and(|(count, _)| seen != Some(count)) {
        run.burst();
    }
    run.end_turn();
    drop(activity);
    Ok((status, run.report))
}

/// The executable file `program` names: a path (relative to `cwd`) when it holds a `/`,
/// else the first match on `PATH`, as the shell finds it.
///
/// # Errors
/// `NotFound` when there is none; `PermissionDenied` when a path names a file that cannot
/// be run (the shell's 126).
fn find_program(program: &std::ffi::OsStr, cwd: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_encoded_bytes().contains(&b'/') {
        let p = cwd.join(program);
        return match std::fs::metadata(&p) {
            Ok(_) if runnable(&p) => Ok(p),
            Ok(_) => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "not an executable file",
            )),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            )),
        };
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| cwd.join(d).join(program))
        .find(|p| runnable(p))
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "not found on PATH"))
}
