//! Claude Code hooks: `retrace hook claude-code` handles one hook event (a JSON object on
//! stdin), and `retrace install claude-code` adds the hook entries to Claude Code's settings.
//!
//! - `UserPromptSubmit` begins a turn (the before-snapshot, within a deadline); the prompts
//!   `/undo`, `/redo`, `/checkpoint [label]` and `/retrace-log` are handled right here and
//!   answered with `{"decision":"block","reason":…}`, so no model call happens.
//! - `Stop` ends the turn; `SessionStart` reopens the session (its history is in the store);
//!   `SubagentStop` does nothing.
//!
//! A hook never breaks the agent: every failure becomes one line on stderr and exit 0.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::history::{Mode, Outcome};
use crate::{Config, Workspace};

/// How long a prompt waits for its before-snapshot before the turn goes conversation-only
/// (`RETRACE_HOOK_DEADLINE_MS` overrides).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(20);

/// The hook's answer: what to print on stdout (nothing, or a JSON decision).
#[derive(Debug, PartialEq)]
pub struct HookOutput {
    /// Printed on stdout when present.
    pub stdout: Option<Value>,
}

fn block(reason: &str) -> HookOutput {
    HookOutput {
        stdout: Some(json!({"decision": "block", "reason": reason})),
    }
}

/// The process that owns a turn begun by a hook: the agent, i.e. the hook's parent, or its
/// grandparent when the parent is the shell that ran the hook command.
#[must_use]
pub fn agent_pid() -> u32 {
    let parent = std::os::unix::process::parent_id();
    let comm = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    if matches!(comm(parent).as_str(), "sh" | "bash" | "dash" | "zsh") {
        let stat = std::fs::read_to_string(format!("/proc/{parent}/stat")).unwrap_or_default();
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(p) = ppid.filter(|p| *p > 1) {
            return p;
        }
    }
    parent
}

/// Handles one hook event.
///
/// # Errors
/// A one-line message (the caller prints it and exits 0).
pub fn handle(event: &Value, config: &Config) -> Result<HookOutput, String> {
    let field = |k: &str| event.get(k).and_then(Value::as_str);
    let name = field("hook_event_name").ok_or("no hook_event_name in the hook input")?;
    if name == "SubagentStop" {
        return Ok(HookOutput { stdout: None });
    }
    let cwd = field("cwd").ok_or("no cwd in the hook input")?;
    let id = field("session_id").ok_or("no session_id in the hook input")?;
    let ws = Workspace::open(Path::new(cwd), config).map_err(|e| e.to_string())?;
    let session = ws.session(id).owned_by(agent_pid());
    match name {
        "UserPromptSubmit" => {
            let prompt = field("prompt").unwrap_or("");
            let command = prompt.trim();
            let (word, rest) = command.split_once(' ').unwrap_or((command, ""));
            let files_note = "retrace restored the files (shell-made changes too, which Claude \
                              Code's own checkpoints miss); type /rewind to move the \
                              conversation back as well";
            let outcome = match word {
                "/undo" => session.undo(Mode::Files),
                "/redo" => session.redo(),
                "/checkpoint" => {
                    let label = Some(rest.trim().to_string()).filter(|l| !l.is_empty());
                    session.checkpoint(label)
                }
                "/retrace-log" => return log(&session),
                _ => {
                    let turn = session
                        .begin_turn(None, Some(prompt.to_string()))
                        .map_err(|e| e.to_string())?;
                    let deadline = std::env::var("RETRACE_HOOK_DEADLINE_MS")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .map_or(DEFAULT_DEADLINE, Duration::from_millis);
                    turn.wait_before(deadline).map_err(|e| e.to_string())?;
                    return Ok(HookOutput { stdout: None });
                }
            }
            .map_err(|e| e.to_string())?;
            let mut reason = format!("retrace: {}", outcome.message());
            if matches!(outcome, Outcome::Restored { .. }) && word != "/checkpoint" {
                reason.push_str(". ");
                reason.push_str(files_note);
            }
            Ok(block(&reason))
        }
        "Stop" => {
            session.end_turn(None).map_err(|e| e.to_string())?;
            let _ = ws.maintain_if_due();
            Ok(HookOutput { stdout: None })
        }
        // SessionStart (startup, resume, clear, compact): the session's history is in the
        // store; opening it marks it in use and warns if it expired.
        _ => Ok(HookOutput { stdout: None }),
    }
}

fn log(session: &crate::Session) -> Result<HookOutput, String> {
    let log = session.log().map_err(|e| e.to_string())?;
    let mut lines = vec![format!(
        "retrace: {} turn(s), can undo: {}, can redo: {}",
        log.status.turns,
        if log.status.can_undo { "yes" } else { "no" },
        if log.status.can_redo { "yes" } else { "no" }
    )];
    for e in log.entries.iter().rev().take(10) {
        let text = e.text.as_deref().unwrap_or("").lines().next().unwrap_or("");
        lines.push(format!(
            "{} {}: +{} ~{} -{} {}",
            e.kind, e.number, e.counts[0], e.counts[1], e.counts[2], text
        ));
    }
    Ok(block(&lines.join("\n")))
}

/// The hook entries retrace adds, by event.
const EVENTS: &[&str] = &["UserPromptSubmit", "Stop", "SessionStart"];

/// Where the settings live: the project's `.claude/settings.json` or the user's.
#[must_use]
pub fn settings_path(project: &Path, user: bool) -> PathBuf {
    if user {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        home.join(".claude").join("settings.json")
    } else {
        project.join(".claude").join("settings.json")
    }
}

fn read_settings(path: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => Ok(json!({})),
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| format!("{} is not valid JSON ({e}); fix it first", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn write_settings(path: &Path, v: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())? + "\n";
    let tmp = path.with_extension("json.retrace-tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Adds retrace's hook entries (running `command`) to the settings file, keeping every
/// other hook; does nothing for an event that already has it. Returns the events added.
///
/// # Errors
/// A message naming the file when it cannot be read, parsed or written.
pub fn install(path: &Path, command: &str) -> Result<Vec<String>, String> {
    let mut v = read_settings(path)?;
    let root = v
        .as_object_mut()
        .ok_or("the settings file is not a JSON object")?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks
        .as_object_mut()
        .ok_or("\"hooks\" in the settings file is not an object")?;
    let mut added = Vec::new();
    for event in EVENTS {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let list = list
            .as_array_mut()
            .ok_or(format!("hooks.{event} in the settings file is not a list"))?;
        let present = list.iter().any(|group| {
            group["hooks"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["command"] == command))
        });
        if !present {
            list.push(json!({"hooks": [{"type": "command", "command": command, "timeout": 60}]}));
            added.push((*event).to_string());
        }
    }
    write_settings(path, &v)?;
    Ok(added)
}

/// Removes exactly the hook entries running `command`, and the lists and objects that
/// become empty because of it. Returns the events changed.
///
/// # Errors
/// As [`install`].
pub fn uninstall(path: &Path, command: &str) -> Result<Vec<String>, String> {
    let mut v = read_settings(path)?;
    let mut removed = Vec::new();
    if let Some(hooks) = v.get_mut("hooks").and_then(Value::as_object_mut) {
        for event in EVENTS {
            let Some(list) = hooks.get_mut(*event).and_then(Value::as_array_mut) else {
                continue;
            };
            let before = list.len();
            for group in list.iter_mut() {
                if let Some(h) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                    h.retain(|h| h["command"] != command);
                }
            }
            list.retain(|g| g["hooks"].as_array().is_none_or(|h| !h.is_empty()));
            if list.len() != before {
                removed.push((*event).to_string());
            }
            if list.is_empty() {
                hooks.remove(*event);
            }
        }
        if hooks.is_empty()
            && let Some(o) = v.as_object_mut()
        {
            o.remove("hooks");
        }
    }
    write_settings(path, &v)?;
    Ok(removed)
}
