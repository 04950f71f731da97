//! Agent CLI hooks: `retrace hook <agent>` handles one hook event (a JSON object on stdin)
//! from Claude Code, Codex CLI or Gemini CLI.
//!
//! - The prompt event (`UserPromptSubmit`; Gemini's `BeforeAgent`) begins a turn: the
//!   before-snapshot, within a deadline. The commands `/undo`, `/redo`, `/revert N` (`/revert N.K`: one step), `/diff
//!   [N]`, `/checkpoint [label]` and `/retrace-log` (or `retrace undo|redo|revert
//!   N|diff [N]|checkpoint [label]|log`, for agents
//!   whose interface keeps `/` to itself) are handled right here and answered with a block
//!   decision, so no model call happens.
//! - The stop event (`Stop`; Gemini's `AfterAgent`) and `SessionEnd` end the turn.
//! - The tool events (`PreToolUse` / `PostToolUse`; Gemini's `BeforeTool` / `AfterTool`),
//!   installed for the tools of [`Agent::tool_matcher`], begin and end a step of the turn
//!   for each tool call that can write (see [`crate::history`]'s steps).
//! - `SessionStart` reopens the session (its history is in the store); anything else, such
//!   as `SubagentStop`, does nothing.
//!
//! A hook never breaks the agent: every failure becomes one line on stderr and exit 0.
//!
//! The turn, undo, redo, checkpoint and log are the operations of [`super::ops`], run with
//! the requests a hook event makes; what is the hooks' own (the remembered workspace, the
//! second `Stop` that extends a turn, the answers to the agent) is here.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::ops::{
    BeginStepRequest, BeginTurnRequest, CheckpointRequest, Context, DiffRequest, EndStepRequest,
    EndTurnRequest, LogRequest, OpError, Operation, OutcomeReport, RedoRequest,
    RevertInRunningTurnRequest, UndoMode, UndoRequest, WaitBeforeRequest,
};
use crate::history::Outcome;
use crate::{Config, Workspace};

mod owner;

pub use owner::agent_pid;

/// How long a prompt waits for its before-snapshot before the turn goes conversation-only
/// (`RETRACE_HOOK_DEADLINE_MS` overrides).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(20);

pub use super::agents::Agent;

/// The hook's answer: what to print on stdout (nothing, or a JSON decision).
#[derive(Debug, PartialEq)]
pub struct HookOutput {
    /// Printed on stdout when present.
    pub stdout: Option<Value>,
}

/// A retrace command typed as a prompt.
#[derive(Debug, PartialEq, Eq)]
pub enum PromptCommand {
    /// `/undo`: the last turn's file changes.
    Undo,
    /// `/redo`: the most recently undone turn.
    Redo,
    /// `/checkpoint [label]`.
    Checkpoint(Option<String>),
    /// `/retrace-log`: the session's recent turns.
    Log,
    /// `/revert N`: turn N's file changes taken back, later changes kept; `/revert N.K`: step
    /// K of turn N alone.
    Revert(u64, Option<u64>),
    /// `/diff [N]`: what turn N (default: the applied turn) changed, per file.
    Diff(Option<u64>),
}

/// A turn number as typed: `3` or `turn:3`.
fn turn_number(s: &str) -> Option<u64> {
    s.strip_prefix("turn:").unwrap_or(s).parse().ok()
}

/// A turn, or one step of it, as typed: `3`, `turn:3`, `3.2` or `turn:3.2`.
fn revert_target(s: &str) -> Option<PromptCommand> {
    let s = s.strip_prefix("turn:").unwrap_or(s);
    match s.split_once('.') {
        Some((n, k)) => Some(PromptCommand::Revert(
            n.parse().ok()?,
            Some(k.parse().ok()?),
        )),
        None => Some(PromptCommand::Revert(s.parse().ok()?, None)),
    }
}

impl PromptCommand {
    /// The command a prompt is, if it is one: exactly `/undo`, `/redo`, `/revert N`, `/diff
    /// [N]`, `/checkpoint [label]` or `/retrace-log` (the slash word in any case), or an
    /// exact command line `retrace undo|redo|log|revert N|diff [N]|checkpoint [label]`
    /// (lowercase `retrace`, as in a shell, and a
    /// label of one word or in quotes, as the CLI takes it). Ordinary sentences are never
    /// commands: "Retrace checkpoint creation in mod.rs and explain it" reaches the model.
    #[must_use]
    pub fn parse(prompt: &str) -> Option<PromptCommand> {
        let text = prompt.trim();
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let rest = rest.trim();
        if word == "retrace" {
            let (w, label) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let label = label.trim();
            return match (w, label.is_empty()) {
                ("undo", true) => Some(PromptCommand::Undo),
                ("redo", true) => Some(PromptCommand::Redo),
                ("log", true) => Some(PromptCommand::Log),
                ("revert", false) => revert_target(label),
                ("diff", true) => Some(PromptCommand::Diff(None)),
                ("diff", false) => turn_number(label).map(|n| PromptCommand::Diff(Some(n))),
                ("checkpoint", true) => Some(PromptCommand::Checkpoint(None)),
                ("checkpoint", false) => shell_word(label)
                    .map(|l| PromptCommand::Checkpoint(Some(l).filter(|l| !l.is_empty()))),
                _ => None,
            };
        }
        if !word.starts_with('/') {
            return None;
        }
        match (word.to_ascii_lowercase().as_str(), rest.is_empty()) {
            ("/undo", true) => Some(PromptCommand::Undo),
            ("/redo", true) => Some(PromptCommand::Redo),
            ("/retrace-log", true) => Some(PromptCommand::Log),
            ("/revert", false) => revert_target(rest),
            ("/diff", true) => Some(PromptCommand::Diff(None)),
            ("/diff", false) => turn_number(rest).map(|n| PromptCommand::Diff(Some(n))),
            ("/checkpoint", _) => Some(PromptCommand::Checkpoint(
                Some(rest.to_string()).filter(|l| !l.is_empty()),
            )),
            _ => None,
        }
    }
}

/// One shell word: a bare word, or a whole `"…"` / `'…'` quoted string (without its quotes).
fn shell_word(s: &str) -> Option<String> {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return (!inner.contains(q)).then(|| inner.to_string());
        }
    }
    (!s.contains(char::is_whitespace) && !s.contains(['"', '\''])).then(|| s.to_string())
}

/// The workspace a hook session works in, remembered in the retrace home
/// (`hook-sessions/<hash of agent and session id>`, holding the root path) from its first
/// event (`SessionStart`, or the first prompt) until its `SessionEnd`; a later
/// `SessionStart` of the session (resume, clear, compact) keeps it. Entries untouched for 30
/// days are swept when a new one is remembered.
struct Remembered {
    dir: std::path::PathBuf,
    file: std::path::PathBuf,
}

/// How long a remembered workspace outlives its last use.
const REMEMBER_FOR: Duration = Duration::from_hours(30 * 24);

impl Remembered {
    fn new(home: &Path, agent: Agent, id: &str) -> Remembered {
        let dir = home.join("hook-sessions");
        let key = blake3::hash(format!("{}\0{id}", agent.name()).as_bytes()).to_hex();
        let file = dir.join(&key[..32]);
        Remembered { dir, file }
    }

    /// The remembered root, while it is still a directory (touched: in use).
    fn root(&self) -> Option<std::path::PathBuf> {
        use std::os::unix::ffi::OsStringExt;
        let bytes = std::fs::read(&self.file).ok()?;
        let root = std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes));
        if !root.is_absolute() || !root.is_dir() {
            return None;
        }
        let _ = std::fs::File::options()
            .append(true)
            .open(&self.file)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        Some(root)
    }

    /// Remembers `root` (best effort: without it, each event's cwd is used), and sweeps
    /// entries unused for [`REMEMBER_FOR`].
    fn set(&self, root: &Path) {
        if crate::home::create_private_dir(&self.dir).is_err() {
            return;
        }
        let tmp = self
            .file
            .with_extension(format!("tmp-{}", std::process::id()));
        let written = crate::home::write_private(&tmp, root.as_os_str().as_encoded_bytes())
            .and_then(|()| std::fs::rename(&tmp, &self.file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        let now = std::time::SystemTime::now();
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > REMEMBER_FOR);
            if old {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    fn forget(&self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// The workspace root an event belongs to, as [`handle`] finds it (the session's remembered
/// root, else the event's `cwd`), without opening it; `None` for an event without one.
#[must_use]
pub fn event_root(agent: Agent, event: &Value, config: &Config) -> Option<std::path::PathBuf> {
    let field = |k: &str| event.get(k).and_then(Value::as_str);
    field("hook_event_name")?;
    let remembered = Remembered::new(config.home(), agent, field("session_id")?);
    remembered.root().or_else(|| {
        crate::home::resolve_root(Path::new(field("cwd")?), config.home())
            .ok()
            .map(|r| r.path)
    })
}

/// Handles one hook event from `agent`.
///
/// # Errors
/// A one-line message (the caller prints it and exits 0).
pub fn handle(agent: Agent, event: &Value, config: &Config) -> Result<HookOutput, String> {
    let field = |k: &str| event.get(k).and_then(Value::as_str);
    let name = field("hook_event_name").ok_or("no hook_event_name in the hook input")?;
    let ends = agent.is_stop_event(name) || name == "SessionEnd";
    if let Some(start) = agent.tool_event(name) {
        return tool_step(agent, event, config, start);
    }
    if name != agent.prompt_event() && !ends && name != "SessionStart" {
        return Ok(agent.quiet());
    }
    let cwd = field("cwd").ok_or("no cwd in the hook input")?;
    let id = field("session_id").ok_or("no session_id in the hook input")?;
    let remembered = Remembered::new(config.home(), agent, id);
    // The agent's cwd moves (a `cd` in its shell): the session's workspace is the one its
    // start (or first prompt) was in, not each event's cwd; also for the SessionStart that
    // Claude Code fires again on compact, clear and resume, which must not re-root it.
    let ws = match remembered.root() {
        Some(root) => Workspace::open(&root, config),
        None => Workspace::open(Path::new(cwd), config).inspect(|ws| remembered.set(ws.root())),
    }
    .map_err(|e| e.to_string())?;
    let session = ws.session(id).for_agent(agent.name()).owned_by(agent_pid());
    // Each event runs its operations holding the turn it begins, for this event only.
    let mut turn = None;
    let mut cx = Context::new(&session, &mut turn);
    // Codex and Qwen Code name each turn; the id anchors the turn in retrace's history.
    let anchor = agent.turn_field().and_then(field).map(str::to_string);
    if ends {
        // A late Stop naming an earlier turn (Codex sends each turn's id) is not about the
        // running turn: ending it there would leave its later edits in no turn.
        if let Some(stop) = anchor.as_deref()
            && about_another_turn(&ws, id, stop)?
        {
            return Ok(agent.quiet());
        }
        let end = EndTurnRequest {
            anchor: anchor.clone(),
        };
        let ended = match end.run(&mut cx) {
            Ok(_) => true,
            Err(OpError::NoTurn) => false,
            Err(e) => return Err(e.to_string()),
        };
        // A second Stop of one turn (another Stop hook made the agent go on, or Qwen Code
        // retried its answer after a failure, naming the same turn): what the agent did
        // since the first is that turn's.
        let again = event.get("stop_hook_active").and_then(Value::as_bool) == Some(true)
            || (!ended
                && agent.turns_go_on()
                && anchor
                    .as_deref()
                    .is_some_and(|a| turn_named(&ws, id, a) == Ok(Some(false))));
        if !ended && again && agent.is_stop_event(name) {
            session.extend_turn(anchor).map_err(|e| e.to_string())?;
        }
        if name == "SessionEnd" {
            remembered.forget();
        }
        // Due maintenance runs in a process of its own; the hook returns at once. Run here
        // (`RETRACE_MAINTAIN=inline`), its warnings wait in the store for the next command:
        // a hook has no one to say them to.
        if let crate::maintainer::Later::Ran { warnings, .. } = ws.maintain_later() {
            let _ = ws.working_copy().store().defer_warnings(&warnings);
        }
        return Ok(agent.quiet());
    }
    if name == "SessionStart" {
        // startup, resume, clear, compact: the history is in the store; opening the
        // session marked it in use and warned if it had expired.
        return Ok(agent.quiet());
    }
    let prompt = field("prompt").unwrap_or("");
    // Qwen Code fires its prompt event again, naming the same turn, when a tool's result
    // goes back to the model: the running turn goes on. After that turn's end (another Stop
    // hook made it go on, or a failed answer is retried), it goes on too: its next Stop
    // extends it to what it did since.
    if let Some(a) = anchor.as_deref()
        && PromptCommand::parse(prompt).is_none()
        && match turn_named(&ws, id, a)? {
            Some(running) => running || agent.turns_go_on(),
            None => false,
        }
    {
        return Ok(agent.quiet());
    }
    let Some(command) = PromptCommand::parse(prompt) else {
        let begin = BeginTurnRequest {
            anchor,
            prompt: Some(prompt.to_string()),
        };
        begin.run(&mut cx).map_err(|e| e.to_string())?;
        let deadline = std::env::var("RETRACE_HOOK_DEADLINE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_DEADLINE, Duration::from_millis);
        WaitBeforeRequest::for_at_most(deadline)
            .run(&mut cx)
            .map_err(|e| e.to_string())?;
        return Ok(agent.quiet());
    };
    let done = match &command {
        PromptCommand::Undo => UndoRequest {
            mode: Some(UndoMode::Files),
            force: None,
        }
        .run(&mut cx),
        PromptCommand::Redo => RedoRequest::default().run(&mut cx),
        PromptCommand::Checkpoint(label) => CheckpointRequest {
            label: label.clone(),
        }
        .run(&mut cx),
        PromptCommand::Log => return log(agent, &mut cx),
        PromptCommand::Diff(n) => return diff(agent, &mut cx, *n),
        // Between turns (a prompt that is a command begins none): a revert of its own.
        PromptCommand::Revert(n, step) => RevertInRunningTurnRequest {
            turn: *n,
            step: *step,
        }
        .run(&mut cx),
    };
    let OutcomeReport(outcome) = done.map_err(|e| e.to_string())?;
    let target = |n: &u64, step: &Option<u64>| match step {
        Some(k) => format!("{n}.{k}"),
        None => n.to_string(),
    };
    let mut reason = match &command {
        PromptCommand::Revert(n, step) => {
            let what = match step {
                Some(k) => format!("revert of turn {n} step {k}"),
                None => format!("revert of turn {n}"),
            };
            format!("retrace: {}", outcome.message_at(Some(&what)))
        }
        _ => format!("retrace: {}", outcome.message()),
    };
    if let (PromptCommand::Revert(n, step), Outcome::Conflict { .. }) = (&command, &outcome) {
        let _ = write!(
            reason,
            " (`retrace revert turn:{} --dry-run` in a shell says why each conflicts)",
            target(n, step)
        );
    }
    if matches!(outcome, Outcome::Restored { .. })
        && matches!(command, PromptCommand::Undo | PromptCommand::Redo)
    {
        reason.push_str(". ");
        reason.push_str(agent.conversation_note(command == PromptCommand::Redo));
    }
    Ok(agent.block(&reason))
}

/// What a tool call can write: `Some(files)` for an edit tool (the files it names, as
/// given: absolute or relative to the agent's cwd), `Some([])` for a shell tool (anything),
/// None for a tool that writes nothing in the workspace. The tools are those of
/// [`Agent::tool_matcher`]: Claude Code's, Codex's (every shell tool is `Bash` to its hooks,
/// every edit `apply_patch`, whose patch text names the files), Gemini CLI's, Qwen Code's,
/// Copilot's (`Bash`, `Write`, `Edit`) and Droid's (`Execute`, `Create`, `Edit`, `ApplyPatch`).
fn tool_writes(tool: &str, input: &Value) -> Option<Vec<String>> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "Bash" | "run_shell_command" | "shell" | "local_shell" | "exec_command" | "Execute" => {
            Some(Vec::new())
        }
        // Droid's patch tool: its files are not named in a form read here, so anything.
        "ApplyPatch" => Some(Vec::new()),
        // An edit tool that names no file may write anything.
        "apply_patch" => Some(text("command").map(|p| patch_files(&p)).unwrap_or_default()),
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "write_file" | "replace" | "edit"
        | "notebook_edit" | "Create" => {
            Some(
                ["file_path", "notebook_path", "absolute_path", "path"]
                    .iter()
                    .filter_map(|k| text(k))
                    .take(1)
                    .collect(),
            )
        }
        _ => None,
    }
}

/// The files a Codex patch (`*** Begin Patch` … `*** End Patch`) adds, deletes, updates or
/// moves to, in order, each once.
fn patch_files(patch: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in patch.lines() {
        let named = [
            "*** Add File: ",
            "*** Delete File: ",
            "*** Update File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .map(str::trim)
        .filter(|f| !f.is_empty());
        if let Some(f) = named
            && !files.iter().any(|g| g == f)
        {
            files.push(f.to_string());
        }
    }
    files
}

/// One line of a tool call's input for its step: a shell tool's command, an edit tool's
/// file (a patch's files, comma-separated).
fn tool_summary(tool: &str, input: &Value, files: &[String]) -> String {
    if tool == "apply_patch" {
        return files.join(", ");
    }
    for k in [
        "command",
        "file_path",
        "notebook_path",
        "absolute_path",
        "path",
    ] {
        match input.get(k) {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(a)) => {
                let words: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                return words.join(" ");
            }
            _ => {}
        }
    }
    String::new()
}

/// The id that pairs a tool call's start and end: the agent's (`tool_use_id`: Claude Code,
/// Codex), else one made from the tool and its input, which Gemini CLI sends alike to both
/// (`derived`: then an end that finds no step of that id ends the newest one running, as
/// another hook may have rewritten the input in between).
fn tool_call_id(event: &Value, tool: &str, input: &Value) -> (String, bool) {
    match event.get("tool_use_id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => (id.to_string(), false),
        _ => {
            let hash = blake3::hash(format!("{tool}\0{input}").as_bytes()).to_hex();
            (format!("input:{}", &hash[..16]), true)
        }
    }
}

/// A tool call's start or end: a step of the session's running turn (see
/// [`crate::history`]'s steps), run as [`BeginStepRequest`] or [`EndStepRequest`]. Tools
/// that write nothing in the workspace are not steps.
fn tool_step(
    agent: Agent,
    event: &Value,
    config: &Config,
    start: bool,
) -> Result<HookOutput, String> {
    let field = |k: &str| event.get(k).and_then(Value::as_str);
    let tool = field("tool_name").unwrap_or_default();
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let Some(files) = tool_writes(tool, &input) else {
        return Ok(agent.quiet());
    };
    let id = field("session_id").ok_or("no session_id in the hook input")?;
    let remembered = Remembered::new(config.home(), agent, id);
    let Some(root) = remembered.root().or_else(|| {
        crate::home::resolve_root(Path::new(field("cwd")?), config.home())
            .ok()
            .map(|r| r.path)
    }) else {
        return Ok(agent.quiet());
    };
    let ws = Workspace::open(&root, config).map_err(|e| e.to_string())?;
    let session = ws.session(id).for_agent(agent.name()).owned_by(agent_pid());
    let mut turn = None;
    let mut cx = Context::new(&session, &mut turn);
    let (call, derived) = tool_call_id(event, tool, &input);
    if start {
        let summary = tool_summary(tool, &input, &files);
        // A relative path is the agent's: from its cwd, which a `cd` may have moved below
        // the workspace root.
        let cwd = field("cwd").map(Path::new);
        let files = files
            .iter()
            .map(|f| match cwd {
                Some(cwd) if Path::new(f).is_relative() => cwd.join(f).display().to_string(),
                _ => f.clone(),
            })
            .collect::<Vec<_>>();
        let begin = BeginStepRequest {
            summary: Some(summary),
            tool: tool.to_string(),
            call: Some(call),
            files: Some(files),
        };
        begin.run(&mut cx).map_err(|e| e.to_string())?;
        return Ok(agent.quiet());
    }
    let ended = EndStepRequest { call: Some(call) }
        .run(&mut cx)
        .map_err(|e| e.to_string())?;
    if derived && !ended.recorded {
        EndStepRequest { call: None }
            .run(&mut cx)
            .map_err(|e| e.to_string())?;
    }
    Ok(agent.quiet())
}

/// Whether a stop event naming turn `stop` (Codex's `turn_id`) is about another turn than
/// the one it would end or extend: the session's open turn, else its last one. A turn begun
/// without an id is not compared.
fn about_another_turn(ws: &Workspace, id: &str, stop: &str) -> Result<bool, String> {
    use crate::history::{db, record};
    let tx = ws.working_copy().store().begin_read().map_err(|e| e.to_string())?;
    let l = db::load(&tx, &db::session_key(id)).map_err(|e| e.to_string())?;
    let turn = l
        .state
        .pending
        .or_else(|| l.state.next_turn.checked_sub(1))
        .and_then(|n| l.turn(n));
    // Anchors are stored cut to their longest length.
    let stop = record::truncate(stop.to_string(), record::MAX_ANCHOR_BYTES);
    Ok(turn
        .and_then(|t| t.anchor.as_deref())
        .is_some_and(|open| open != stop))
}

/// Whether session `id`'s agent names `anchor` its running turn (`Some(true)`) or, with
/// none running, its last turn (`Some(false)`); `None` for neither.
fn turn_named(ws: &Workspace, id: &str, anchor: &str) -> Result<Option<bool>, String> {
    use crate::history::{db, record};
    let tx = ws.working_copy().store().begin_read().map_err(|e| e.to_string())?;
    let l = db::load(&tx, &db::session_key(id)).map_err(|e| e.to_string())?;
    let anchor = record::truncate(anchor.to_string(), record::MAX_ANCHOR_BYTES);
    let running = l.state.pending.is_some();
    let turn = l
        .state
        .pending
        .or_else(|| l.state.next_turn.checked_sub(1))
        .and_then(|n| l.turn(n));
    Ok(turn
        .filter(|t| t.anchor.as_deref() == Some(anchor.as_str()))
        .map(|_| running))
}

/// Most files `/diff` lists.
const DIFF_LINES: usize = 40;

/// `/diff [N]`: the files turn N (default: the applied turn) changed, with lines added and
/// removed, as `retrace diff --stat` prints them.
fn diff(agent: Agent, cx: &mut Context<'_>, n: Option<u64>) -> Result<HookOutput, String> {
    let log = LogRequest::default().run(cx).map_err(|e| e.to_string())?;
    let Some(n) = n.or(log.status.cursor) else {
        return Ok(agent.block("retrace: no turn is applied in this session: nothing to show"));
    };
    let entry = log
        .entries
        .iter()
        .find(|e| e.kind != "checkpoint" && e.number == n);
    let (Some(before), Some(after)) = (entry.and_then(|e| e.before), entry.and_then(|e| e.after))
    else {
        return Ok(agent.block(&format!(
            "retrace: turn {n} has no file snapshots in this session (see /retrace-log)"
        )));
    };
    let request = DiffRequest {
        from: Some(before.to_hex()),
        to: Some(after.to_hex()),
        paths: Vec::new(),
        patch: true,
    };
    let d = request.run(cx).map_err(|e| e.to_string())?;
    let patches = d.patches.unwrap_or_default();
    let mut lines = vec![format!(
        "retrace: turn {n} changed {} file(s): +{} -{} lines",
        patches.len(),
        patches.iter().map(|p| p.added).sum::<u64>(),
        patches.iter().map(|p| p.removed).sum::<u64>()
    )];
    for p in patches.iter().take(DIFF_LINES) {
        let mark = if d.diff.added.contains(&p.path) {
            "A"
        } else if d.diff.deleted.contains(&p.path) {
            "D"
        } else {
            "M"
        };
        let change = if p.binary {
            "binary".to_string()
        } else {
            format!("+{} -{}", p.added, p.removed)
        };
        lines.push(format!("{mark} {}  {change}", p.path));
    }
    if patches.len() > DIFF_LINES {
        lines.push(format!(
            "... and {} more (`retrace diff turn:{n}:before turn:{n} -p` in a shell shows all)",
            patches.len() - DIFF_LINES
        ));
    }
    Ok(agent.block(&lines.join("\n")))
}

fn log(agent: Agent, cx: &mut Context<'_>) -> Result<HookOutput, String> {
    let log = LogRequest::default().run(cx).map_err(|e| e.to_string())?;
    let mut lines = vec![format!(
        "retrace: {} turn(s), can undo: {}, can redo: {}",
        log.status.turns,
        if log.status.can_undo { "yes" } else { "no" },
        if log.status.can_redo { "yes" } else { "no" }
    )];
    for e in log.entries.iter().take(10) {
        let text = e.text.as_deref().unwrap_or("").lines().next().unwrap_or("");
        lines.push(format!(
            "{} {}: +{} ~{} -{} {}",
            e.kind, e.number, e.counts.added, e.counts.modified, e.counts.deleted, text
        ));
    }
    Ok(agent.block(&lines.join("\n")))
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
