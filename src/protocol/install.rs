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

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::{Metadata, OpenOptions, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hooks::Agent;

pub mod opencode;

/// Project or user scope, and the directories they resolve to.
#[derive(Clone, Debug)]
pub struct Target {
    /// The agent.
    pub agent: Agent,
    /// `.claude`, `.codex` or `.gemini` in the project or in the user's home directory.
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
        let name = match agent {
            Agent::ClaudeCode => ".claude",
            Agent::Codex => ".codex",
            Agent::Gemini => ".gemini",
        };
        if !user {
            return Target {
                agent,
                dir: project.join(name),
                user,
                local: false,
                record: None,
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
        if self.agent != Agent::ClaudeCode || self.user {
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
        match self.agent {
            Agent::ClaudeCode => {
                "Next: start a new session with `claude` (one already running does not load the \
                 new hooks). After a turn, type /undo to put the files back as they were before \
                 it, and /redo to re-apply it."
            }
            Agent::Gemini => {
                "Next: start a new session with `gemini` (one already running does not load the \
                 new hooks; a project's hooks run only in a folder you trust). After a turn, \
                 type /undo to put the files back as they were before it, and /redo to \
                 re-apply it."
            }
            Agent::Codex => {
                "Next: start a new session with `codex`, type /hooks and trust retrace's hooks \
                 (Codex runs a new or changed hook only once you trust it; non-interactive \
                 `codex exec` skips untrusted hooks, and project hooks also need the project \
                 trusted). After a turn, type `retrace undo` as the prompt to put the files \
                 back as they were before it, and `retrace redo` to re-apply it: Codex rejects \
                 slash commands it does not know."
            }
        }
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
        if !self.user && found_on_path(exe, &path) {
            return Ok(format!("retrace hook {}", self.agent.name()));
        }
        hook_command(exe, self.agent)
    }

    /// The file holding the hook entries.
    #[must_use]
    pub fn settings(&self) -> PathBuf {
        self.dir.join(match self.agent {
            Agent::Codex => "hooks.json",
            Agent::ClaudeCode if self.local => "settings.local.json",
            _ => "settings.json",
        })
    }

    /// The hook group (one entry, running `command`) added to each event's list.
    fn group<'a>(&self, command: &'a str, event: &str) -> Group<'a> {
        let entry = match self.agent {
            // Gemini's timeouts are in milliseconds; its `name` is what `/hooks` shows.
            Agent::Gemini => Entry {
                name: Some("retrace"),
                kind: "command",
                command,
                timeout: 60_000,
            },
            _ => Entry {
                name: None,
                kind: "command",
                command,
                timeout: 60,
            },
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
            (
                "revert",
                "take back one earlier turn's file changes, keeping later ones",
                "N",
            ),
            (
                "diff",
                "list the files a turn changed (default: the last)",
                "[N]",
            ),
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

/// A hook group as retrace writes it (the fields in this order).
#[derive(Serialize)]
struct Group<'a> {
    /// The tools a tool event's hook runs for (those that can write in the workspace:
    /// [`Agent::tool_matcher`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    matcher: Option<&'static str>,
    hooks: [Entry<'a>; 1],
}

/// A hook entry as retrace writes it.
#[derive(Serialize)]
struct Entry<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'static str>,
    #[serde(rename = "type")]
    kind: &'static str,
    command: &'a str,
    timeout: u32,
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
/// same file once links are followed (also a hard link of it).
fn found_on_path(exe: &Path, path: &OsStr) -> bool {
    let Ok(ours) = std::fs::metadata(exe) else {
        return false;
    };
    // As `sh` searches: the first executable file of that name (an empty entry is `.`).
    std::env::split_paths(path)
        .map(|dir| dir.join("retrace"))
        .find_map(|p| {
            let meta = std::fs::metadata(&p).ok().filter(Metadata::is_file)?;
            rustix::fs::access(&p, rustix::fs::Access::EXEC_OK)
                .is_ok()
                .then_some(meta)
        })
        .is_some_and(|m| (m.dev(), m.ino()) == (ours.dev(), ours.ino()))
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

// ---- The settings file as text ----

/// A JSON value's place in the text: bytes `start..end`, and a container's items.
struct Node {
    start: usize,
    end: usize,
    items: Items,
}

enum Items {
    /// Each member: its (decoded) key, where the key begins, and the value.
    Object(Vec<(String, usize, Node)>),
    Array(Vec<Node>),
    Scalar,
}

impl Node {
    /// The byte spans of the items: a member from its key to the end of its value.
    fn spans(&self) -> Vec<(usize, usize)> {
        match &self.items {
            Items::Object(m) => m.iter().map(|(_, k, v)| (*k, v.end)).collect(),
            Items::Array(a) => a.iter().map(|v| (v.start, v.end)).collect(),
            Items::Scalar => Vec::new(),
        }
    }

    /// The member `key` (the last one, as JSON parsers take it) and its index.
    fn member(&self, key: &str) -> Option<(usize, &Node)> {
        match &self.items {
            Items::Object(m) => m
                .iter()
                .enumerate()
                .rev()
                .find(|(_, (k, _, _))| k == key)
                .map(|(i, (_, _, v))| (i, v)),
            _ => None,
        }
    }

    fn elements(&self) -> Option<&[Node]> {
        match &self.items {
            Items::Array(a) => Some(a),
            _ => None,
        }
    }

    fn len(&self) -> usize {
        self.spans().len()
    }
}

/// A scanner that records where each value is. It runs on text `serde_json` has accepted
/// (which also bounds the nesting), so its own errors are only a safety net.
struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn fail<T>(&self) -> Result<T, String> {
        Err(format!("unexpected JSON at byte {}", self.at))
    }

    fn eat(&mut self, b: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            self.fail()
        }
    }

    fn string(&mut self) -> Result<(usize, usize), String> {
        let start = self.at;
        self.eat(b'"')?;
        loop {
            match self.peek() {
                None => return self.fail(),
                Some(b'\\') => self.at += 2,
                Some(b'"') => {
                    self.at += 1;
                    return Ok((start, self.at));
                }
                Some(_) => self.at += 1,
            }
        }
    }

    /// The items of a container up to `close`, each read by `item`.
    fn items<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let mut items = Vec::new();
        self.at += 1;
        self.skip_ws();
        if self.peek() == Some(close) {
            self.at += 1;
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(c) if c == close => {
                    self.at += 1;
                    return Ok(items);
                }
                _ => return self.fail(),
            }
        }
    }

    fn value(&mut self) -> Result<Node, String> {
        self.skip_ws();
        let start = self.at;
        let items = match self.peek() {
            Some(b'{') => Items::Object(self.items(b'}', |s| {
                s.skip_ws();
                let (ks, ke) = s.string()?;
                let key: String =
                    serde_json::from_str(&s.text[ks..ke]).map_err(|e| e.to_string())?;
                s.eat(b':')?;
                Ok((key, ks, s.value()?))
            })?),
            Some(b'[') => Items::Array(self.items(b']', Self::value)?),
            Some(b'"') => {
                self.string()?;
                Items::Scalar
            }
            Some(_) => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.at += 1;
                }
                if self.at == start {
                    return self.fail();
                }
                Items::Scalar
            }
            None => return self.fail(),
        };
        Ok(Node {
            start,
            end: self.at,
            items,
        })
    }
}

/// The settings text with where its values are. An empty or missing file is `{}`.
fn scan(text: &str, path: &Path) -> Result<Node, String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| format!("{} is not valid JSON ({e}); fix it first", path.display()))?;
    let root = Scanner { text, at: 0 }
        .value()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match root.items {
        Items::Object(_) => Ok(root),
        _ => Err(format!("{} is not a JSON object", path.display())),
    }
}

/// How the file is written, for the text retrace adds.
struct Style {
    /// `\n`, or `\r\n` when the file uses it.
    newline: &'static str,
    /// One level of indentation: two or four spaces, a tab...
    unit: String,
    /// Whether an empty container is filled across lines (else on one line).
    pretty: bool,
}

impl Style {
    fn of(text: &str, root: &Node) -> Style {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let pretty = root.len() == 0 || text[root.start..root.end].contains('\n');
        // The first member's indentation beyond the line of the `{`, else the smallest
        // indentation of any line.
        let first = root.spans().first().map(|&(s, _)| {
            let ws = ws_before(text, s);
            ws.contains('\n')
                .then(|| after_newline(ws).strip_prefix(line_indent(text, root.start)))
                .flatten()
                .unwrap_or("")
                .to_string()
        });
        let unit = first.filter(|u| !u.is_empty()).unwrap_or_else(|| {
            let indents = text.lines().skip(1).map(|l| {
                let rest = l.trim_start_matches([' ', '\t']);
                &l[..l.len() - rest.len()]
            });
            if indents.clone().any(|i| i.starts_with('\t')) {
                "\t".to_string()
            } else {
                indents
                    .map(str::len)
                    .filter(|&n| n > 0)
                    .min()
                    .map_or_else(|| "  ".to_string(), |n| " ".repeat(n))
            }
        });
        Style {
            newline,
            unit,
            pretty,
        }
    }

    /// `key: value` (or `value`) as text, its later lines indented by `indent`.
    fn render(
        &self,
        key: Option<&str>,
        value: &impl Serialize,
        indent: &str,
        pretty: bool,
    ) -> Result<String, String> {
        let mut out = match key {
            Some(k) => serde_json::to_string(k).map_err(|e| e.to_string())? + ":",
            None => String::new(),
        };
        if pretty {
            if key.is_some() {
                out.push(' ');
            }
            let mut buf = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
            value
                .serialize(&mut serde_json::Serializer::with_formatter(
                    &mut buf, formatter,
                ))
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8(buf).map_err(|e| e.to_string())?;
            out += &text.replace('\n', &format!("{}{indent}", self.newline));
        } else {
            out += &serde_json::to_string(value).map_err(|e| e.to_string())?;
        }
        Ok(out)
    }
}

/// The whitespace just before byte `pos`.
fn ws_before(text: &str, pos: usize) -> &str {
    let kept = text[..pos].trim_end_matches([' ', '\t', '\n', '\r']).len();
    &text[kept..pos]
}

fn after_newline(ws: &str) -> &str {
    ws.rsplit('\n').next().unwrap_or(ws)
}

/// The indentation of the line holding byte `pos`.
fn line_indent(text: &str, pos: usize) -> &str {
    let line = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let rest = text[line..].trim_start_matches([' ', '\t']);
    &text[line..text.len() - rest.len()]
}

fn splice(text: &str, range: std::ops::Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len());
    out.push_str(&text[..range.start]);
    out.push_str(with);
    out.push_str(&text[range.end..]);
    out
}

/// `text` with an item appended to the container `c`: after the last item with the same
/// separator that precedes it, or (an empty container) on its own line one level deeper.
/// [`remove`] of the last item undoes it exactly.
fn append(
    text: &str,
    c: &Node,
    key: Option<&str>,
    value: &impl Serialize,
    style: &Style,
) -> Result<String, String> {
    if let Some(&(start, end)) = c.spans().last() {
        let ws = ws_before(text, start);
        let item = style.render(key, value, after_newline(ws), ws.contains('\n'))?;
        return Ok(splice(text, end..end, &format!(",{ws}{item}")));
    }
    let inner = if style.pretty {
        let line = line_indent(text, c.start);
        let indent = format!("{line}{}", style.unit);
        let item = style.render(key, value, &indent, true)?;
        format!("{nl}{indent}{item}{nl}{line}", nl = style.newline)
    } else {
        style.render(key, value, "", false)?
    };
    Ok(splice(text, c.start + 1..c.end - 1, &inner))
}

/// `text` without item `i` of the container `c` and its separator; the only item leaves
/// the container empty (`[]`, `{}`).
fn remove(text: &str, c: &Node, i: usize) -> String {
    let spans = c.spans();
    let range = if spans.len() <= 1 {
        c.start + 1..c.end - 1
    } else if i + 1 == spans.len() {
        spans[i - 1].1..spans[i].1
    } else {
        spans[i].0..spans[i + 1].0
    };
    splice(text, range, "")
}

/// A group's `hooks` list, and each entry's command.
fn entries<'n>(text: &str, group: &'n Node) -> Option<(&'n Node, Vec<Option<String>>)> {
    let (_, list) = group.member("hooks")?;
    let commands = list
        .elements()?
        .iter()
        .map(|e| {
            let v: Value = serde_json::from_str(&text[e.start..e.end]).ok()?;
            v.get("command")?.as_str().map(str::to_string)
        })
        .collect();
    Some((list, commands))
}

/// The first of retrace's entries in an event's groups ([`is_ours`]): the group's index,
/// its `hooks` list, the entry's index there.
fn find_ours<'n>(
    text: &str,
    groups: &'n [Node],
    agent: Agent,
    programs: &BTreeSet<String>,
) -> Option<(usize, &'n Node, usize)> {
    groups.iter().enumerate().find_map(|(gi, g)| {
        let (list, commands) = entries(text, g)?;
        let ei = commands
            .iter()
            .position(|c| c.as_deref().is_some_and(|c| is_ours(c, agent, programs)))?;
        Some((gi, list, ei))
    })
}

/// The hook commands left in the settings `text` that look like retrace's hook for `agent`
/// (`PROGRAM hook <agent>`) though their program is not known to be retrace, each with its
/// events: what an uninstall cannot tell is retrace's, to be named rather than kept quiet.
fn unrecognised(
    text: &str,
    path: &Path,
    agent: Agent,
) -> Result<BTreeMap<String, Vec<&'static str>>, String> {
    let mut left: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    if text.trim().is_empty() {
        return Ok(left);
    }
    let root = scan(text, path)?;
    let Some((_, hooks)) = root.member("hooks") else {
        return Ok(left);
    };
    for event in agent.events() {
        let groups = hooks.member(event).and_then(|(_, l)| l.elements());
        for g in groups.unwrap_or_default() {
            let commands = entries(text, g).map(|(_, c)| c).unwrap_or_default();
            for c in commands.into_iter().flatten() {
                if hook_program(&c, agent).is_some() {
                    let events = left.entry(c).or_default();
                    if !events.contains(event) {
                        events.push(event);
                    }
                }
            }
        }
    }
    Ok(left)
}

/// Reads the settings text; a missing or blank file is `{}`.
fn read_text(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

// ---- Writing ----

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

/// The file `path` names (through its links) and its metadata when it exists, after
/// checking that the user lets it be changed: a file without a write permission bit is
/// refused even for root, who could write it anyway.
fn writable(path: &Path) -> Result<(PathBuf, Option<Metadata>), String> {
    let real = follow_links(path)?;
    let meta = match std::fs::metadata(&real) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((real, None)),
        Err(e) => return Err(format!("cannot read {}: {e}", real.display())),
    };
    let read_only = meta.permissions().mode() & 0o222 == 0
        || rustix::fs::access(&real, rustix::fs::Access::WRITE_OK).is_err();
    if read_only {
        let via = if real == path {
            String::new()
        } else {
            format!(" (where {} points)", path.display())
        };
        return Err(format!(
            "{}{via} is read-only for you; nothing was changed. Make it writable \
             (chmod u+w) to let retrace edit it",
            real.display()
        ));
    }
    Ok((real, Some(meta)))
}

/// Replaces the file `path` names (through any symlinks) by `text`: written to a new file
/// beside it with the old file's mode and owner, then renamed over it, so a reader sees the
/// old or the new file. A read-only file is refused (see [`writable`]). A new file is
/// created 0600 when `private` (else as the umask has it).
fn write_atomic(path: &Path, text: &str, private: bool) -> Result<(), String> {
    let (real, old) = writable(path)?;
    let (dir, name) = match (real.parent(), real.file_name()) {
        (Some(d), Some(n)) => (d, n.to_string_lossy()),
        _ => return Err(format!("{} is not a file's path", real.display())),
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let cannot = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", real.display());
    let mut created = None;
    for n in 0..100 {
        let tmp = dir.join(format!(".{name}.retrace-{}-{n}", std::process::id()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        if old.is_some() || private {
            // Private until it has the old file's mode.
            options.mode(0o600);
        }
        match options.open(&tmp) {
            Ok(f) => {
                created = Some((tmp, f));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cannot(&e)),
        }
    }
    let Some((tmp, mut file)) = created else {
        return Err(cannot(&"no free temporary name beside it"));
    };
    let result = (|| {
        file.write_all(text.as_bytes()).map_err(|e| cannot(&e))?;
        if let Some(old) = &old {
            keep_owner_and_mode(&file, old, &real)?;
        } else if private {
            file.set_permissions(Permissions::from_mode(0o600))
                .map_err(|e| cannot(&e))?;
        }
        file.sync_all().map_err(|e| cannot(&e))?;
        std::fs::rename(&tmp, &real).map_err(|e| cannot(&e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Gives the new file `file` the owner (when we may: as root, or a group we are in) and
/// the mode of the file `old` it replaces.
fn keep_owner_and_mode(file: &std::fs::File, old: &Metadata, real: &Path) -> Result<(), String> {
    let new = file
        .metadata()
        .map_err(|e| format!("cannot write {}: {e}", real.display()))?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid())
        && let Err(e) = std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid()))
    {
        // Only the group could not be kept, of a file that is ours anyway.
        let only_group = e.kind() == std::io::ErrorKind::PermissionDenied && new.uid() == old.uid();
        if !only_group {
            return Err(format!(
                "cannot keep the owner ({}:{}) of {}: {e}; nothing was changed",
                old.uid(),
                old.gid(),
                real.display()
            ));
        }
    }
    file.set_permissions(Permissions::from_mode(old.mode() & 0o7777))
        .map_err(|e| format!("cannot keep the mode of {}: {e}", real.display()))
}

// ---- What an install found and created ----

/// `path` with its links followed and `.`/`..` resolved, also when its last components do
/// not exist yet (the deepest existing ancestor is resolved, the rest kept), so that a path
/// remembered before a file was created names it as found after.
fn canonical(path: &Path) -> PathBuf {
    for base in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(base) {
            return match path.strip_prefix(base) {
                Ok(rest) if !rest.as_os_str().is_empty() => real.join(rest),
                _ => real,
            };
        }
    }
    path.to_path_buf()
}

/// The key of a settings file in the record: its real path.
fn record_key(settings: &Path) -> String {
    let real = follow_links(settings).unwrap_or_else(|_| settings.to_path_buf());
    canonical(&real).to_string_lossy().into_owned()
}

/// The record's name for a path install created; `None` when not UTF-8 (such a path is not
/// remembered, so uninstall leaves it).
fn record_name(path: &Path) -> Option<String> {
    canonical(path).to_str().map(str::to_string)
}

/// What `installed.json` remembers of the installs into one settings file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Installed {
    /// The containers (`hooks`, or an event's name for `hooks.<event>`) that were the
    /// user's and empty when an install filled them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    kept: BTreeSet<String>,
    /// The paths an install created: the settings file (when missing), command files, and
    /// the directories made for them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    created: BTreeSet<String>,
    /// The settings file's text when it held only whitespace before the install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blank: Option<String>,
    /// The top-level keys an install set, each with the text of its value before (`None`:
    /// the key was not there), for uninstall to put back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    set: BTreeMap<String, Option<String>>,
    /// The programs of the hook commands installs wrote (their first word, as `sh` reads
    /// it): an entry running one is retrace's whatever the binary is named.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    programs: BTreeSet<String>,
}

impl Installed {
    fn created(&self, path: &Path) -> bool {
        record_name(path).is_some_and(|p| self.created.contains(&p))
    }

    /// Notes that an install creates `path`, and the directories above it that are missing.
    fn create(&mut self, path: &Path) {
        let missing = path.ancestors().take_while(|p| {
            !p.as_os_str().is_empty()
                && matches!(p.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        });
        self.created.extend(missing.filter_map(record_name));
    }
}

/// What the record holds for the target's settings file (nothing without a record).
fn recorded(target: &Target) -> Installed {
    match &target.record {
        Some(record) => recorded_at(record, &target.settings()),
        None => Installed::default(),
    }
}

/// What the record file `record` holds for the settings file `settings`.
fn recorded_at(record: &Path, settings: &Path) -> Installed {
    let mut all: serde_json::Map<String, Value> = std::fs::read_to_string(record)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let Some(entry) = all.remove(&record_key(settings)) else {
        return Installed::default();
    };
    // Before `created`, an entry was the list `kept`.
    match serde_json::from_value::<BTreeSet<String>>(entry.clone()) {
        Ok(kept) => Installed {
            kept,
            ..Installed::default()
        },
        Err(_) => serde_json::from_value(entry).unwrap_or_default(),
    }
}

/// Records `installed` for the target's settings file (when it changed); the record file
/// goes once it holds nothing.
fn remember(target: &Target, installed: &Installed) -> Result<(), String> {
    match &target.record {
        Some(record) => remember_at(record, &target.settings(), installed),
        None => Ok(()),
    }
}

/// Records `installed` for the settings file `settings` in the record file `record`.
fn remember_at(record: &Path, settings: &Path, installed: &Installed) -> Result<(), String> {
    let mut all: serde_json::Map<String, Value> = std::fs::read_to_string(record)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let key = record_key(settings);
    let before = all.get(&key).cloned();
    if *installed == Installed::default() {
        all.remove(&key);
    } else {
        all.insert(
            key.clone(),
            serde_json::to_value(installed).map_err(|e| e.to_string())?,
        );
    }
    if all.get(&key) == before.as_ref() {
        return Ok(());
    }
    if all.is_empty() {
        return std::fs::remove_file(record)
            .map_err(|e| format!("cannot remove {}: {e}", record.display()));
    }
    if let Some(dir) = record.parent() {
        crate::home::create_private_dir(dir).map_err(|e| e.to_string())?;
    }
    let text = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())? + "\n";
    write_atomic(record, &text, true)
}

/// Whether the settings text is an empty object: what an install into a missing file
/// starts from.
fn is_empty_object(text: &str) -> bool {
    text.chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\r'))
        .eq("{}".chars())
}

/// The settings files under the workspace `root` that an install recorded in the retrace
/// home `home` and that no longer hold retrace's hooks, or whose command files are gone:
/// what a restore to a snapshot older than the install took back. Sorted.
#[must_use]
pub fn lost_installs(home: &Path, root: &Path) -> Vec<PathBuf> {
    let all: serde_json::Map<String, Value> = std::fs::read_to_string(home.join("installed.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut lost = Vec::new();
    for (key, entry) in all {
        let settings = PathBuf::from(&key);
        if !settings.starts_with(root) {
            continue;
        }
        let Ok(installed) = serde_json::from_value::<Installed>(entry) else {
            continue;
        };
        if installed.programs.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(&settings).unwrap_or_default();
        // A retrace hook command, however its program is quoted: `… hook <agent>`.
        let hooked = [Agent::ClaudeCode, Agent::Codex, Agent::Gemini]
            .iter()
            .any(|a| text.contains(&format!(" hook {}", a.name())));
        // Command files (not the directories made for them, nor the settings file).
        let files_gone = installed.created.iter().any(|c| {
            let c = Path::new(c);
            c != settings && c.extension().is_some() && !c.exists()
        });
        if !hooked || files_gone {
            lost.push(settings);
        }
    }
    lost.sort();
    lost
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
    let mut text = match &original {
        Some(t) if !t.trim().is_empty() => t.clone(),
        _ => "{}\n".to_string(),
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
        let start = is_empty_object(&text);
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
