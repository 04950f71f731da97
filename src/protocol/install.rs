//! `retrace install|uninstall <agent>`: retrace's hook entries merged into an agent's
//! settings, and the slash-command files that route `/undo`, `/redo`, `/checkpoint` and
//! `/retrace-log` to the prompt hook.
//!
//! Every other hook and setting is kept; installing twice changes nothing; uninstalling
//! removes exactly what was added (a command file only while it still holds retrace's
//! text), and the files and directories an install created once nothing else is in them.
//! The settings file is edited as text: only retrace's entries are spliced in or cut out, in
//! the file's own indentation, so key order, number spelling and everything else stay byte
//! for byte, and it keeps its mode and owner (a read-only one is refused).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[cfg(doc)]
use super::agents::AgentSpec;
use super::agents::COMMANDS;
use super::hooks::Agent;

pub mod opencode;
mod record;
mod splice;
mod write;

pub use record::lost_installs;
#[allow(clippy::wildcard_imports)] // one installer's parts share its private helpers
use {record::*, splice::*, write::*};

/// Project or user scope, and the directories they resolve to.
#[derive(Clone, Debug)]
pub struct Target {
    /// The agent.
    pub agent: Agent,
    /// `.claude`, `.codex`, `.gemini`, `.qwen` or `.github/hooks` in the project, or the
    /// agent's directory in the user's home directory.
    pub dir: PathBuf,
    /// Whether `dir` is the user's (every project's) rather than one project's.
    pub user: bool,
    /// Claude Code's personal settings of the project (`.claude/settings.local.json`, which
    /// is not committed) rather than its shared ones (`.claude/settings.json`).
    pub local: bool,
    /// Where to remember what an install found and created (the user's own empty `hooks`
    /// object or event lists it filled, the files and directories it made), so that
    /// uninstall gives the project back as it was (see [`Target::remembering_in`]). `None`:
    /// not remembered.
    pub record: Option<PathBuf>,
}

impl Target {
    /// The agent's configuration directory in `project`, or in `$HOME` when `user`.
    #[must_use]
    pub fn new(agent: Agent, project: &Path, user: bool) -> Target {
        let spec = agent.spec();
        if !user {
            return Target {
                agent,
                dir: project.join(spec.config_dir),
                user,
                local: false,
                record: None,
            };
        }
        // The agents' own overrides of their user directory.
        let own = spec.user_dir_env.and_then(std::env::var_os);
        let dir = own.filter(|d| !d.is_empty()).map_or_else(
            || {
                std::env::var_os("HOME")
                    .map_or_else(|| PathBuf::from("/"), PathBuf::from)
                    .join(spec.user_config_dir.unwrap_or(spec.config_dir))
            },
            |d| home_relative(&PathBuf::from(d)).join(spec.user_env_subdir),
        );
        Target {
            agent,
            dir,
            user,
            local: false,
            record: None,
        }
    }

    /// The same project target in Claude Code's personal settings of the project,
    /// `.claude/settings.local.json` (Claude Code keeps it out of git), instead of the
    /// shared `.claude/settings.json`.
    ///
    /// # Errors
    /// For another agent (they have no such file) or a user-scope target.
    pub fn local(self) -> Result<Target, String> {
        if self.agent.spec().local_settings_file.is_none() || self.user {
            return Err(format!(
                "--local is Claude Code's personal project settings (.claude/settings.local.json); \
                 {} has no such file: install into the project's settings, or --user",
                if self.user {
                    "the user scope"
                } else {
                    self.agent.name()
                }
            ));
        }
        Ok(Target {
            local: true,
            ..self
        })
    }

    /// The same target, remembering what an install found and created in `installed.json`
    /// under the retrace home `home`.
    #[must_use]
    pub fn remembering_in(self, home: &Path) -> Target {
        Target {
            record: Some(home.join("installed.json")),
            ..self
        }
    }

    /// What the user does next, in plain words: start a session that loads the hooks (and,
    /// in Codex, trust them), then what to type after a turn.
    #[must_use]
    pub fn next_step(&self) -> &'static str {
        // What each agent types follows from `command_files`.
        self.agent.spec().next_step
    }

    /// The hook command to install when the binary `exe` runs the install: plain `retrace
    /// hook <agent>` in a project's settings (usually committed, so they should not hold
    /// this machine's path) when the `retrace` that `PATH` finds is `exe`; else `exe`'s path,
    /// as [`hook_command`] writes it.
    ///
    /// # Errors
    /// As [`hook_command`].
    pub fn hook_command(&self, exe: &Path) -> Result<String, String> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        if found_on_path(exe, &path) {
            if !self.user {
                return Ok(format!("retrace hook {}", self.agent.name()));
            }
            // Run through the npm package's launcher: the user's settings name the launcher
            // where PATH finds it (npm's or pnpm's bin directory), which upgrades keep, not
            // the binary inside `node_modules`, which they move.
            if std::env::var_os("RETRACE_LAUNCHER").is_some()
                && let Some(launcher) = first_on_path(&path)
            {
                return hook_command(&launcher, self.agent);
            }
        }
        hook_command(exe, self.agent)
    }

    /// The file holding the hook entries.
    #[must_use]
    pub fn settings(&self) -> PathBuf {
        let spec = self.agent.spec();
        self.dir.join(match spec.local_settings_file {
            Some(local) if self.local => local,
            _ => spec.settings_file,
        })
    }

    /// The hook group (one entry, running `command`) added to each event's list.
    fn group<'a>(&self, command: &'a str, event: &str) -> Group<'a> {
        let spec = self.agent.spec();
        let entry = Entry {
            name: spec.entry_name,
            kind: "command",
            command,
            timeout_key: spec.timeout_key,
            timeout: spec.entry_timeout,
        };
        let matcher = self
            .agent
            .tool_event(event)
            .map(|_| self.agent.tool_matcher());
        Group {
            matcher,
            hooks: [entry],
        }
    }

    /// The slash-command files and their text ([`AgentSpec::command_file`]): where an
    /// agent runs its own `/undo` or rejects unknown commands, a command file of that name
    /// makes the prompt reach the hook. An agent without them (Codex) has one type
    /// `retrace undo` and so on.
    fn command_files(&self) -> Vec<(PathBuf, String)> {
        let Some(file) = self.agent.spec().command_file else {
            return Vec::new();
        };
        COMMANDS
            .iter()
            .map(|c| {
                let (path, text) = file(c);
                (self.dir.join(path), text)
            })
            .collect()
    }
}

/// `dir` with a leading `~` read as `$HOME`, as the agents read their directory variables
/// (`QWEN_HOME=~/q`).
fn home_relative(dir: &Path) -> PathBuf {
    match (dir.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => dir.to_path_buf(),
    }
}

/// A hook group as retrace writes it (the fields in this order).
#[derive(Serialize)]
struct Group<'a> {
    /// The tools a tool event's hook runs for (those that can write in the workspace:
    /// [`Agent::tool_matcher`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    matcher: Option<&'static str>,
    hooks: [Entry<'a>; 1],
}

/// A hook entry as retrace writes it: `name` (where the agent has one), `type`, `command`,
/// and the timeout under the agent's key ([`AgentSpec::timeout_key`]), in this order.
struct Entry<'a> {
    name: Option<&'static str>,
    kind: &'static str,
    command: &'a str,
    timeout_key: &'static str,
    timeout: u32,
}

impl Serialize for Entry<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        if let Some(name) = self.name {
            m.serialize_entry("name", name)?;
        }
        m.serialize_entry("type", self.kind)?;
        m.serialize_entry("command", self.command)?;
        m.serialize_entry(self.timeout_key, &self.timeout)?;
        m.end()
    }
}

/// `text` quoted for POSIX `sh`: in single quotes, each `'` written as `'\''`.
#[must_use]
pub fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The hook command retrace installs for `agent`: the binary `exe`, quoted for `sh` (the
/// agents run hook commands through a shell), then `hook <agent>`.
///
/// # Errors
/// When the path is not UTF-8 (a JSON string cannot hold it).
pub fn hook_command(exe: &Path, agent: Agent) -> Result<String, String> {
    let exe = exe.to_str().ok_or(format!(
        "the path of the retrace binary, {}, is not UTF-8; install it somewhere else",
        exe.display()
    ))?;
    Ok(format!("{} hook {}", sh_quote(exe), agent.name()))
}

/// Whether the `retrace` a shell finds on `path` (a `PATH` value) is the file `exe`: the
/// same file once links are followed (also a hard link of it), or the npm package's
/// launcher that started `exe` (`RETRACE_LAUNCHER`): then hooks name plain `retrace`, never
/// a path inside `node_modules` that an upgrade moves.
fn found_on_path(exe: &Path, path: &OsStr) -> bool {
    let launcher = std::env::var_os("RETRACE_LAUNCHER").map(PathBuf::from);
    let ours = match launcher.as_deref().map(std::fs::metadata) {
        Some(Ok(m)) => m,
        _ => match std::fs::metadata(exe) {
            Ok(m) => m,
            Err(_) => return false,
        },
    };
    first_on_path(path)
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| (m.dev(), m.ino()) == (ours.dev(), ours.ino()))
}

/// The `retrace` a shell finds on `path`, as `sh` searches: the first executable file of
/// that name (an empty entry is `.`).
fn first_on_path(path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join("retrace"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file())
                && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
        })
}

/// The first word of `command` as `sh` reads it (single quotes, double quotes with their
/// backslash escapes, backslashes), and the rest of the command; `None` when a quote is
/// left open.
fn first_word(command: &str) -> Option<(String, &str)> {
    let s = command.trim_start_matches([' ', '\t', '\n']);
    let mut word = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => {
                return Some((word, &s[i..]));
            }
            '\'' => loop {
                match chars.next()?.1 {
                    '\'' => break,
                    c => word.push(c),
                }
            },
            '"' => loop {
                match chars.next()?.1 {
                    '"' => break,
                    '\\' => {
                        let c = chars.next()?.1;
                        if !matches!(c, '$' | '`' | '"' | '\\' | '\n') {
                            word.push('\\');
                        }
                        if c != '\n' {
                            word.push(c);
                        }
                    }
                    c => word.push(c),
                }
            },
            '\\' => match chars.next()?.1 {
                '\n' => {}
                c => word.push(c),
            },
            c => word.push(c),
        }
    }
    Some((word, ""))
}

/// The program of a hook command shaped as retrace's for `agent` (`PROGRAM … hook <agent>`,
/// `--watch` allowed after), as `sh` reads that word.
fn hook_program(command: &str, agent: Agent) -> Option<String> {
    let (program, rest) = first_word(command)?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let words = words.strip_suffix(&["--watch"]).unwrap_or(&words);
    words.ends_with(&["hook", agent.name()]).then_some(program)
}

/// Whether a hook command is one of retrace's for `agent`, however it is quoted: its binary
/// is named `retrace…` wherever it lives, or is one of the `programs` an install wrote (a
/// binary installed under another name, `rt` say).
fn is_ours(command: &str, agent: Agent, programs: &BTreeSet<String>) -> bool {
    hook_program(command, agent).is_some_and(|program| {
        let base = program.rsplit('/').next().unwrap_or(&program);
        base.starts_with("retrace") || programs.contains(&program)
    })
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

/// Adds retrace's hook entries (running `command`, see [`Target::hook_command`]) for every
/// event the agent needs, replacing older retrace entries (another binary path, however
/// quoted, or plain `retrace`) and keeping every other hook and setting as written; then
/// writes the command files that are missing. What it creates is remembered in the
/// target's record, for [`uninstall`].
///
/// # Errors
/// A message naming the file when it cannot be read, parsed or written, or is read-only.
pub fn install(target: &Target, command: &str) -> Result<Changes, String> {
    let path = target.settings();
    let original = read_text(&path)?;
    // A missing or blank file starts as the agent's new one; so does an empty object where
    // the agent's new file holds more (Copilot's says its format's version).
    let start = target.agent.spec().new_settings;
    let mut text = match &original {
        Some(t) if t.trim().is_empty() => start.to_string(),
        Some(t) if is_empty_object(t) && !is_empty_object(start) => start.to_string(),
        Some(t) => t.clone(),
        None => start.to_string(),
    };
    let root = scan(&text, &path)?;
    let style = Style::of(&text, &root);
    let mut record = recorded(target);
    // The user's empty containers, which uninstall gives back empty.
    let kept = &mut record.kept;
    let empty_before = |n: Option<(usize, &Node)>| n.map(|(_, n)| n.len() == 0);
    let hooks_before = root.member("hooks");
    let mut note = |name: &str, before: Option<bool>| match before {
        None => {
            kept.remove(name);
        }
        Some(true) => {
            kept.insert(name.to_string());
        }
        Some(false) => {}
    };
    let mut added = Vec::new();
    for event in target.agent.events() {
        loop {
            let root = scan(&text, &path)?;
            let Some((_, hooks)) = root.member("hooks") else {
                text = append(&text, &root, Some("hooks"), &serde_json::Map::new(), &style)?;
                continue;
            };
            if !matches!(hooks.items, Items::Object(_)) {
                return Err(format!("\"hooks\" in {} is not an object", path.display()));
            }
            let Some((_, list)) = hooks.member(event) else {
                text = append(&text, hooks, Some(event), &Vec::<()>::new(), &style)?;
                continue;
            };
            let groups = list
                .elements()
                .ok_or(format!("hooks.{event} in {} is not a list", path.display()))?;
            let current = groups.iter().any(|g| {
                entries(&text, g)
                    .is_some_and(|(_, c)| c.iter().any(|c| c.as_deref() == Some(command)))
            });
            if current {
                break;
            }
            if let Some((gi, entries, ei)) =
                find_ours(&text, groups, target.agent, &record.programs)
            {
                text = if entries.len() > 1 {
                    remove(&text, entries, ei)
                } else {
                    remove(&text, list, gi)
                };
                continue;
            }
            text = append(&text, list, None, &target.group(command, event), &style)?;
            added.push(*event);
            let before = hooks_before.and_then(|(_, h)| h.member(event));
            note(event, empty_before(before));
            break;
        }
    }
    if !added.is_empty() {
        note("hooks", empty_before(hooks_before));
        // Refused before anything is written when the file is read-only.
        let (real, _) = writable(&path)?;
        match &original {
            None => {
                record.create(&real);
                record.blank = None;
            }
            Some(blank) if blank.trim().is_empty() => {
                if let Some(name) = record_name(&real) {
                    record.created.remove(&name);
                }
                record.blank = Some(blank.clone());
            }
            Some(_) => {}
        }
    }
    if let Some(program) = hook_program(command, target.agent) {
        record.programs.insert(program);
    }
    // Each command file: whether it holds retrace's text, `None` when missing.
    let mut files = Vec::new();
    for (file, text) in target.command_files() {
        let ours = match std::fs::read_to_string(&file) {
            Ok(existing) => Some(existing == text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                record.create(&file);
                None
            }
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        };
        files.push((file, text, ours));
    }
    remember(target, &record)?;
    let mut changes = Changes::default();
    if !added.is_empty() {
        write_atomic(&path, &text, false)?;
        changes.push(&path, format_args!("added hooks for {}", added.join(", ")));
    }
    for (file, text, ours) in files {
        match ours {
            Some(true) => {}
            Some(false) => changes.push(&file, "left alone: it exists and is not retrace's"),
            None => {
                write_atomic(&file, &text, false)?;
                changes.push(&file, "added");
            }
        }
    }
    Ok(changes)
}

/// Removes retrace's hook entries, and the groups, lists and objects that become empty
/// because of it (not the user's own empty ones, nor those an install filled), and the
/// command files that still hold retrace's text; then what an install created (the
/// settings file, its directories) once nothing else is in it. Everything else keeps its
/// bytes.
///
/// # Errors
/// As [`install`].
pub fn uninstall(target: &Target) -> Result<Changes, String> {
    let path = target.settings();
    let record = recorded(target);
    let mut changes = Changes::default();
    if let Some(original) = read_text(&path)? {
        let mut text = original.clone();
        let mut removed = Vec::new();
        'next: loop {
            if text.trim().is_empty() {
                break;
            }
            let root = scan(&text, &path)?;
            let Some((hi, hooks)) = root.member("hooks") else {
                break;
            };
            for event in target.agent.events() {
                let Some((li, list)) = hooks.member(event) else {
                    continue;
                };
                let Some(groups) = list.elements() else {
                    continue;
                };
                let Some((gi, entries, ei)) =
                    find_ours(&text, groups, target.agent, &record.programs)
                else {
                    continue;
                };
                // The innermost container that stays.
                text = if entries.len() > 1 {
                    remove(&text, entries, ei)
                } else if groups.len() > 1 || record.kept.contains(*event) {
                    remove(&text, list, gi)
                } else if hooks.len() > 1 || record.kept.contains("hooks") {
                    remove(&text, hooks, li)
                } else {
                    remove(&text, &root, hi)
                };
                if !removed.contains(event) {
                    removed.push(*event);
                }
                continue 'next;
            }
            break;
        }
        let mut what = Vec::new();
        if !removed.is_empty() {
            what.push(format!("removed hooks for {}", removed.join(", ")));
        }
        for (command, events) in unrecognised(&text, &path, target.agent)? {
            what.push(format!(
                "left hooks for {} running `{command}`: shaped as retrace's, but no install \
                 recorded that program; if it is retrace under another name, remove them by \
                 hand (or install, then uninstall, with that binary)",
                events.join(", ")
            ));
        }
        // Left as an install started from it: the file goes if install created it, a blank
        // one gets its text back.
        let real = follow_links(&path)?;
        let start = is_empty_object(&text) || same_json(&text, target.agent.spec().new_settings);
        if start && record.created(&real) {
            writable(&path)?;
            std::fs::remove_file(&real)
                .map_err(|e| format!("cannot remove {}: {e}", real.display()))?;
            what.push("removed the file, which install created".to_string());
        } else {
            if start && let Some(blank) = &record.blank {
                text.clone_from(blank);
            }
            if text != original {
                writable(&path)?;
                write_atomic(&path, &text, false)?;
            }
        }
        if !what.is_empty() {
            changes.push(&path, what.join("; "));
        }
    }
    for (file, text) in target.command_files() {
        match std::fs::read_to_string(&file) {
            Ok(existing) if existing == text => {
                std::fs::remove_file(&file)
                    .map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
                changes.push(&file, "removed");
            }
            Ok(_) if record.created(&file) => {
                changes.push(&file, "left alone: changed since it was installed");
            }
            Ok(_) => changes.push(&file, "left alone: not retrace's"),
            Err(_) => {}
        }
    }
    // The directories install created, deepest first (a path sorts after its parent), and
    // only once empty: one the user put something in stays.
    for dir in record.created.iter().rev().map(Path::new) {
        if dir.symlink_metadata().is_ok_and(|m| m.is_dir()) && std::fs::remove_dir(dir).is_ok() {
            changes.push(dir, "removed the directory, which install created");
        }
    }
    remember(target, &Installed::default())?;
    Ok(changes)
}

#[cfg(test)]
#[path = "install_tests.rs"]
mod tests;
