//! `retrace install|uninstall <agent>`: retrace's hook entries merged into an agent's
//! settings, and the slash-command files that route `/undo`, `/redo`, `/checkpoint` and
//! `/retrace-log` to the prompt hook.
//!
//! Every other hook and setting is kept; installing twice changes nothing; uninstalling
//! removes exactly what was added (a command file only while it still holds retrace's
//! text).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::hooks::Agent;

/// Project or user scope, and the directories they resolve to.
#[derive(Clone, Debug)]
pub struct Target {
    /// The agent.
    pub agent: Agent,
    /// `.claude`, `.codex` or `.gemini` in the project or in the user's home directory.
    pub dir: PathBuf,
}

impl Target {
    /// The agent's configuration directory in `project`, or in `$HOME` when `user`.
    #[must_use]
    pub fn new(agent: Agent, project: &Path, user: bool) -> Target {
        let name = match agent {
            Agent::ClaudeCode => ".claude",
            Agent::Codex => ".codex",
            Agent::Gemini => ".gemini",
        };
        if !user {
            return Target {
                agent,
                dir: project.join(name),
            };
        }
        // The agents' own overrides of their user directory.
        let own = match agent {
            Agent::ClaudeCode => std::env::var_os("CLAUDE_CONFIG_DIR"),
            Agent::Codex => std::env::var_os("CODEX_HOME"),
            Agent::Gemini => None,
        };
        let dir = own.filter(|d| !d.is_empty()).map_or_else(
            || {
                std::env::var_os("HOME")
                    .map_or_else(|| PathBuf::from("/"), PathBuf::from)
                    .join(name)
            },
            PathBuf::from,
        );
        Target { agent, dir }
    }

    /// What the user must still do for the hooks to run, if anything.
    #[must_use]
    pub fn next_step(&self) -> Option<&'static str> {
        match self.agent {
            Agent::Codex => Some(
                "Codex runs a new or changed hook only once you trust it: start `codex`, type \
                 /hooks and trust retrace's hooks (non-interactive `codex exec` skips untrusted \
                 hooks). Project hooks also need the project trusted.",
            ),
            _ => None,
        }
    }

    /// The file holding the hook entries.
    #[must_use]
    pub fn settings(&self) -> PathBuf {
        self.dir.join(match self.agent {
            Agent::Codex => "hooks.json",
            _ => "settings.json",
        })
    }

    /// One hook entry running `command`.
    fn entry(&self, command: &str) -> Value {
        match self.agent {
            // Gemini's timeouts are in milliseconds; its `name` is what `/hooks` shows.
            Agent::Gemini => json!({"name": "retrace", "type": "command",
                "command": command, "timeout": 60_000}),
            _ => json!({"type": "command", "command": command, "timeout": 60}),
        }
    }

    /// The slash-command files and their text. Claude Code runs its own `/undo` and
    /// `/checkpoint`, and rejects unknown commands, unless a command file of that name
    /// exists; its prompt hook then sees the typed text. Gemini CLI sends a command file's
    /// prompt. Codex's interface rejects unknown commands outright: there one types
    /// `retrace undo` and so on.
    fn command_files(&self) -> Vec<(PathBuf, String)> {
        let commands = [
            (
                "undo",
                "undo the last turn's file changes, shell edits included",
                "",
            ),
            ("redo", "re-apply the last undone turn's file changes", ""),
            ("checkpoint", "mark the workspace as it is now", "[label]"),
            (
                "retrace-log",
                "list this session's turns and checkpoints",
                "",
            ),
        ];
        let not_run = "The retrace hook answers this command before it reaches the model, so \
                       retrace did not run. Tell the user to check that `retrace` is on PATH \
                       and that `retrace install";
        match self.agent {
            Agent::ClaudeCode => commands
                .iter()
                .map(|(name, what, hint)| {
                    let hint = if hint.is_empty() {
                        String::new()
                    } else {
                        format!("argument-hint: {hint}\n")
                    };
                    let text = format!(
                        "---\ndescription: retrace: {what}\n{hint}disable-model-invocation: \
                         true\n---\n{not_run} claude-code` was run, and do nothing else.\n"
                    );
                    (self.dir.join("commands").join(format!("{name}.md")), text)
                })
                .collect(),
            Agent::Gemini => commands
                .iter()
                .map(|(name, what, hint)| {
                    let args = if hint.is_empty() { "" } else { " {{args}}" };
                    let text = format!(
                        "# Added by `retrace install gemini`: the retrace hook answers this \
                         prompt.\ndescription = \"retrace: {what}\"\nprompt = \"/{name}{args}\"\n"
                    );
                    (self.dir.join("commands").join(format!("{name}.toml")), text)
                })
                .collect(),
            Agent::Codex => Vec::new(),
        }
    }
}

/// Whether a hook command is one of retrace's for `agent`, whatever the binary's path.
fn is_ours(command: &str, agent: Agent) -> bool {
    let command = command.trim_start();
    // The program: a quoted path (which may hold spaces) or the first word.
    let program = match command.chars().next() {
        Some(q @ ('\'' | '"')) => command[1..].split(q).next(),
        _ => command.split_whitespace().next(),
    };
    let Some(program) = program else {
        return false;
    };
    let base = program.rsplit('/').next().unwrap_or(program);
    base.starts_with("retrace")
        && command
            .trim_end()
            .ends_with(&format!("hook {}", agent.name()))
}

fn read_json(path: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => Ok(json!({})),
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| format!("{} is not valid JSON ({e}); fix it first", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The file `path` names once its symlinks are followed (also when the last target does not
/// exist yet). A settings file kept as a link (a dotfiles manager's) is edited where it lives
/// and stays a link.
fn follow_links(path: &Path) -> Result<PathBuf, String> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            // `join` keeps an absolute target as it is.
            Ok(target) => {
                p = p
                    .parent()
                    .map_or_else(|| target.clone(), |d| d.join(&target));
            }
            // Not a link (EINVAL), or nothing there yet: this is the file.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::InvalidInput | std::io::ErrorKind::NotFound
                ) =>
            {
                return Ok(p);
            }
            Err(e) => return Err(format!("cannot read the link {}: {e}", p.display())),
        }
    }
    Err(format!(
        "{}: too many levels of symbolic links; point it at a real file",
        path.display()
    ))
}

/// Replaces the file `path` names (through any symlinks) by `text`: written beside it, then
/// renamed over it, so a reader sees the old or the new file.
fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let path = &follow_links(path)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".retrace-tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What an install or uninstall changed, one line per file.
#[derive(Debug, Default)]
pub struct Changes {
    /// `<file>: <what changed>` lines.
    pub lines: Vec<String>,
}

impl Changes {
    fn push(&mut self, path: &Path, what: impl std::fmt::Display) {
        self.lines.push(format!("{}: {what}", path.display()));
    }
}

/// Adds retrace's hook entries (running `command`) for every event the agent needs,
/// replacing older retrace entries (another binary path) and keeping every other hook; then
/// writes the command files that are missing.
///
/// # Errors
/// A message naming the file when it cannot be read, parsed or written.
pub fn install(target: &Target, command: &str) -> Result<Changes, String> {
    let path = target.settings();
    let mut v = read_json(&path)?;
    let hooks = v
        .as_object_mut()
        .ok_or(format!("{} is not a JSON object", path.display()))?
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(format!("\"hooks\" in {} is not an object", path.display()))?;
    let mut added = Vec::new();
    for event in target.agent.events() {
        let list = hooks
            .entry(*event)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or(format!("hooks.{event} in {} is not a list", path.display()))?;
        let current = list.iter().any(|group| {
            group["hooks"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["command"] == command))
        });
        if current {
            continue;
        }
        remove_ours(list, target.agent);
        list.push(json!({"hooks": [target.entry(command)]}));
        added.push(*event);
    }
    let mut changes = Changes::default();
    if !added.is_empty() {
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n";
        write_atomic(&path, &text)?;
        changes.push(&path, format_args!("added hooks for {}", added.join(", ")));
    }
    for (file, text) in target.command_files() {
        match std::fs::read_to_string(&file) {
            Ok(existing) if existing == text => {}
            Ok(_) => changes.push(&file, "left alone: it exists and is not retrace's"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_atomic(&file, &text)?;
                changes.push(&file, "added");
            }
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        }
    }
    Ok(changes)
}

/// Removes retrace's entries from a list of hook groups, and the groups left empty.
fn remove_ours(list: &mut Vec<Value>, agent: Agent) -> bool {
    let before = list.clone();
    for group in list.iter_mut() {
        if let Some(h) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            h.retain(|h| !h["command"].as_str().is_some_and(|c| is_ours(c, agent)));
        }
    }
    list.retain(|g| g["hooks"].as_array().is_none_or(|h| !h.is_empty()));
    *list != before
}

/// Removes retrace's hook entries, and the lists and objects that become empty because of
/// it, and the command files that still hold retrace's text.
///
/// # Errors
/// As [`install`].
pub fn uninstall(target: &Target) -> Result<Changes, String> {
    let path = target.settings();
    let mut v = read_json(&path)?;
    let mut removed = Vec::new();
    if let Some(hooks) = v.get_mut("hooks").and_then(Value::as_object_mut) {
        for event in target.agent.events() {
            let Some(list) = hooks.get_mut(*event).and_then(Value::as_array_mut) else {
                continue;
            };
            if remove_ours(list, target.agent) {
                removed.push(*event);
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
    let mut changes = Changes::default();
    if !removed.is_empty() {
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n";
        write_atomic(&path, &text)?;
        changes.push(
            &path,
            format_args!("removed hooks for {}", removed.join(", ")),
        );
    }
    for (file, text) in target.command_files() {
        match std::fs::read_to_string(&file) {
            Ok(existing) if existing == text => {
                std::fs::remove_file(&file)
                    .map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
                changes.push(&file, "removed");
                if let Some(dir) = file.parent() {
                    // Only succeeds once the directory is empty.
                    let _ = std::fs::remove_dir(dir);
                }
            }
            Ok(_) => changes.push(&file, "left alone: changed since it was installed"),
            Err(_) => {}
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_settings_file_is_edited_through_the_link_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir_all(&dotfiles).unwrap();
        for agent in [Agent::ClaudeCode, Agent::Codex, Agent::Gemini] {
            let target = Target::new(agent, &dir.path().join(agent.name()), false);
            let real = dotfiles.join(format!("{}.json", agent.name()));
            std::fs::write(&real, r#"{"model": "mine"}"#).unwrap();
            std::fs::create_dir_all(&target.dir).unwrap();
            // A relative link, as dotfiles managers make them.
            let link = target.settings();
            let rel = PathBuf::from("../../dotfiles").join(real.file_name().unwrap());
            std::os::unix::fs::symlink(&rel, &link).unwrap();
            install(&target, &format!("retrace hook {}", agent.name())).unwrap();
            let is_link = |p: &Path| p.symlink_metadata().unwrap().file_type().is_symlink();
            assert!(is_link(&link), "{agent:?}: the link was replaced");
            assert_eq!(std::fs::read_link(&link).unwrap(), rel);
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
            assert_eq!(v["model"], "mine", "{agent:?}");
            assert!(v["hooks"].is_object(), "{agent:?}: {v}");
            uninstall(&target).unwrap();
            assert!(is_link(&link), "{agent:?}: uninstall replaced the link");
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
            assert_eq!(v, json!({"model": "mine"}), "{agent:?}");
        }
    }

    #[test]
    fn retraces_own_hook_commands_are_recognised_wherever_the_binary_lives() {
        for c in [
            "'/usr/local/bin/retrace' hook codex",
            "'/home/me/my tools/retrace' hook codex",
            "\"/opt/x y/retrace\" hook codex",
            "retrace hook codex",
        ] {
            assert!(is_ours(c, Agent::Codex), "{c}");
        }
        for c in [
            "'/usr/local/bin/retrace' hook gemini",
            "notify-send done",
            "'/my tools/other' hook codex",
            "",
        ] {
            assert!(!is_ours(c, Agent::Codex), "{c}");
        }
    }
}
