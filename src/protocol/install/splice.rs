//! The settings file as text: a JSON scanner that knows where every value lies, and the
//! splices that add or cut retrace's entries in the file's own style, leaving every other
//! byte as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

#[allow(clippy::wildcard_imports)] // one installer's parts share its private helpers
use super::*;

/// A JSON value's place in the text: bytes `start..end`, and a container's items.
pub(super) struct Node {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) items: Items,
}

pub(super) enum Items {
    /// Each member: its (decoded) key, where the key begins, and the value.
    Object(Vec<(String, usize, Node)>),
    Array(Vec<Node>),
    Scalar,
}

impl Node {
    /// The byte spans of the items: a member from its key to the end of its value.
    pub(super) fn spans(&self) -> Vec<(usize, usize)> {
        match &self.items {
            Items::Object(m) => m.iter().map(|(_, k, v)| (*k, v.end)).collect(),
            Items::Array(a) => a.iter().map(|v| (v.start, v.end)).collect(),
            Items::Scalar => Vec::new(),
        }
    }

    /// The member `key` (the last one, as JSON parsers take it) and its index.
    pub(super) fn member(&self, key: &str) -> Option<(usize, &Node)> {
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

    pub(super) fn elements(&self) -> Option<&[Node]> {
        match &self.items {
            Items::Array(a) => Some(a),
            _ => None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.spans().len()
    }
}

/// A scanner that records where each value is. It runs on text `serde_json` has accepted
/// (which also bounds the nesting), so its own errors are only a safety net.
pub(super) struct Scanner<'a> {
    pub(super) text: &'a str,
    pub(super) at: usize,
}

impl Scanner<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    pub(super) fn fail<T>(&self) -> Result<T, String> {
        Err(format!("unexpected JSON at byte {}", self.at))
    }

    pub(super) fn eat(&mut self, b: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            self.fail()
        }
    }

    pub(super) fn string(&mut self) -> Result<(usize, usize), String> {
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
    pub(super) fn items<T>(
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

    pub(super) fn value(&mut self) -> Result<Node, String> {
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
pub(super) fn scan(text: &str, path: &Path) -> Result<Node, String> {
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
pub(super) struct Style {
    /// `\n`, or `\r\n` when the file uses it.
    pub(super) newline: &'static str,
    /// One level of indentation: two or four spaces, a tab...
    pub(super) unit: String,
    /// Whether an empty container is filled across lines (else on one line).
    pub(super) pretty: bool,
}

impl Style {
    pub(super) fn of(text: &str, root: &Node) -> Style {
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
    pub(super) fn render(
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
pub(super) fn ws_before(text: &str, pos: usize) -> &str {
    let kept = text[..pos].trim_end_matches([' ', '\t', '\n', '\r']).len();
    &text[kept..pos]
}

pub(super) fn after_newline(ws: &str) -> &str {
    ws.rsplit('\n').next().unwrap_or(ws)
}

/// The indentation of the line holding byte `pos`.
pub(super) fn line_indent(text: &str, pos: usize) -> &str {
    let line = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let rest = text[line..].trim_start_matches([' ', '\t']);
    &text[line..text.len() - rest.len()]
}

pub(super) fn splice(text: &str, range: std::ops::Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len());
    out.push_str(&text[..range.start]);
    out.push_str(with);
    out.push_str(&text[range.end..]);
    out
}

/// `text` with an item appended to the container `c`: after the last item with the same
/// separator that precedes it, or (an empty container) on its own line one level deeper.
/// [`remove`] of the last item undoes it exactly.
pub(super) fn append(
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
pub(super) fn remove(text: &str, c: &Node, i: usize) -> String {
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
pub(super) fn entries<'n>(text: &str, group: &'n Node) -> Option<(&'n Node, Vec<Option<String>>)> {
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
pub(super) fn find_ours<'n>(
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
pub(super) fn unrecognised(
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
pub(super) fn read_text(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

