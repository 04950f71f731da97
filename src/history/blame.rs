//! Blame by agent turn (`retrace blame PATH`): for every line of a file as it is on
//! disk now, the turn that wrote it, like `git blame` by turn instead of by commit.
//!
//! The file's versions are walked through the turns in the order they began (every
//! session's, or one session's), carrying each line's origin forward with a line diff
//! (`similar`, as `retrace diff` uses): a line a step keeps keeps its origin, a line it
//! inserts gets the step's. The steps are:
//!
//! 1. the first turn's before-snapshot: its lines are **before retrace** (older than any
//!    snapshot the history has);
//! 2. for each turn, its before-snapshot when it differs from the version so far: those
//!    lines were edited **between turns** (by hand, or by another tool), attributed to the
//!    turn whose before-snapshot first holds them; then its after-snapshot: the lines it
//!    inserts are the **turn**'s;
//! 3. the workspace's newest snapshot when it is newer than the last turn (a checkpoint, a
//!    `retrace snapshot`): its new lines are **between turns** too, with no turn;
//! 4. the file on disk: lines no snapshot has are **unsnapshotted**.
//!
//! A version met before (an undo, a redo, a navigation back) gets back the origins it had,
//! rather than being diffed again: undoing a turn and redoing it keeps its lines the turn's.
//! With no turn at all, the oldest snapshot stands for step 1.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::Session;
use super::db::SessionKey;
use super::inspect::{Among, first_line, time_text, timeline};
use crate::error::{Error, StoreError};
use crate::object::{EntryKind, ObjectId};
use crate::store::StoreReader;
use crate::working_copy::WorkingCopy;

/// How many leading bytes are looked at for a NUL to call a file binary (git's rule, as
/// `retrace diff` applies it).
const BINARY_PROBE: usize = 8000;

/// Where a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OriginKind {
    /// A turn wrote it.
    Turn,
    /// It was edited outside any turn and then captured (by the before-snapshot of `turn`,
    /// or by a later snapshot when `turn` is None).
    BetweenTurns,
    /// It is on disk but in no snapshot.
    Unsnapshotted,
    /// It is older than the history: in the first snapshot the walk starts from.
    BeforeRetrace,
}

/// The origin of a range of lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// What kind of origin.
    pub kind: OriginKind,
    /// The turn's session (first 16 hex digits of its key), for `turn` and `between_turns`.
    pub session: Option<String>,
    /// The host's name of that session, when kept.
    pub session_name: Option<String>,
    /// The turn (for `between_turns`, the turn whose before-snapshot first holds the line).
    pub turn: Option<u64>,
    /// When the turn began (or the snapshot that captured the line was taken), Unix ms.
    pub time_ms: Option<u64>,
    /// The first line of the turn's prompt (for `turn`).
    pub prompt: Option<String>,
    /// The step of the turn that wrote it (`turn:N.K`), when the turn's steps tell: a
    /// captured shell step, or an edit step whose version of the file the ledger keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// That step's tool and input: `Bash: sed -i …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl Origin {
    fn plain(kind: OriginKind) -> Origin {
        Origin {
            kind,
            session: None,
            session_name: None,
            turn: None,
            time_ms: None,
            prompt: None,
            step: None,
            tool: None,
        }
    }

    /// The origin as `retrace blame` prints it: `turn 3 (session) 2026-12-01 10:22  prompt`,
    /// `between turns, before turn 3 (session) …`, `unsnapshotted`, `before retrace`.
    #[must_use]
    pub fn text(&self) -> String {
        let session = self
            .session_name
            .as_deref()
            .or(self.session.as_deref())
            .map(|s| first_line(s, 16));
        let when = self
            .time_ms
            .map(|t| time_text(t, false))
            .unwrap_or_default();
        match (self.kind, self.turn, session) {
            (OriginKind::Turn, Some(n), Some(s)) if self.step.is_some() => format!(
                "turn {n} step {} ({s}) {when}  {}",
                self.step.unwrap_or_default(),
                first_line(self.tool.as_deref().unwrap_or(""), 40)
            ),
            (OriginKind::Turn, Some(n), Some(s)) => format!(
                "turn {n} ({s}) {when}  {}",
                first_line(self.prompt.as_deref().unwrap_or(""), 32)
            ),
            (OriginKind::BetweenTurns, Some(n), Some(s)) => {
                format!("between turns, before turn {n} ({s}) {when}")
            }
            (OriginKind::BetweenTurns, _, _) => format!("between turns, snapshot {when}"),
            (OriginKind::Unsnapshotted, _, _) => "unsnapshotted".into(),
            (OriginKind::BeforeRetrace, _, _) => "before retrace".into(),
            (OriginKind::Turn, _, _) => format!("turn {when}"),
        }
    }
}

/// Lines `start..=end` (from 1) and where they came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlameRange {
    /// First line, from 1.
    pub start: usize,
    /// Last line, inclusive.
    pub end: usize,
    /// Where they came from.
    pub origin: Origin,
}

/// A file's lines by origin (`retrace blame`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blame {
    /// The file, relative to the workspace root.
    pub path: String,
    /// How many lines it has.
    pub lines: usize,
    /// Its lines in ranges of one origin, in order, covering every line.
    pub ranges: Vec<BlameRange>,
    /// The lines themselves (without their line ends), for the text form.
    #[serde(skip)]
    pub text: Vec<String>,
}

impl Blame {
    /// As `retrace blame` prints it: one line per line of the file, its origin then `| ` and
    /// the line, origins padded to one width.
    #[must_use]
    pub fn text(&self) -> String {
        let origins: Vec<(usize, String)> = self
            .ranges
            .iter()
            .map(|r| (r.end, r.origin.text()))
            .collect();
        let width = origins
            .iter()
            .map(|(_, t)| t.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        let mut at = 0;
        for (i, line) in self.text.iter().enumerate() {
            while at + 1 < origins.len() && origins[at].0 < i + 1 {
                at += 1;
            }
            let origin = origins.get(at).map_or("", |(_, t)| t.as_str());
            let _ = writeln!(out, "{origin:<width$}  | {line}");
        }
        out
    }
}

/// The version of `path` (its components) in snapshot `root`: its blob when a regular file is
/// there, else None.
fn version(
    reader: &StoreReader,
    root: &ObjectId,
    path: &[&[u8]],
) -> Result<Option<ObjectId>, StoreError> {
    let mut id = *root;
    for (i, name) in path.iter().enumerate() {
        let tree = reader.read_tree(&id)?;
        let Some(e) = tree.entries.iter().find(|e| e.name == *name) else {
            return Ok(None);
        };
        let last = i + 1 == path.len();
        match e.kind {
            EntryKind::Dir if !last => id = e.id,
            EntryKind::File | EntryKind::Executable if last => return Ok(Some(e.id)),
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The versions of file `rel` that the ledger keeps as written by steps of turn `turn` of
/// session `key` (their blobs stored), by step.
fn edit_versions(
    tx: &crate::store::ReadTx,
    rel: &str,
    key: [u8; 32],
    turn: u64,
) -> HashMap<u64, ObjectId> {
    use super::ledger::{LedgerEntry, Writer};
    use super::tables::LEDGER;
    let Some(e) = tx
        .bytes_entry(LEDGER, rel.as_bytes())
        .ok()
        .flatten()
        .and_then(|b| LedgerEntry::decode(&b).ok())
    else {
        return HashMap::new();
    };
    std::iter::once((e.left, e.writer))
        .chain(e.earlier)
        .filter_map(|(v, w)| match (v, w) {
            (
                Some((EntryKind::File | EntryKind::Executable, id)),
                Writer::Turn {
                    session,
                    turn: t,
                    step: Some(k),
                },
            ) if session == key && t == turn => Some((k, id)),
            _ => None,
        })
        // Newest first: a step's last version of the file is the one kept.
        .fold(HashMap::new(), |mut m, (k, id)| {
            m.entry(k).or_insert(id);
            m
        })
}

/// `path` as given (workspace-relative, or absolute inside `root`), checked: its `/`-joined
/// relative form.
fn relative(root: &Path, path: &str) -> Result<String, Error> {
    let refuse = |reason: &str| Error::Inspect {
        name: path.to_string(),
        reason: reason.to_string(),
    };
    let p = Path::new(path);
    let rel = if p.is_absolute() {
        p.strip_prefix(root)
            .map_err(|_| refuse("not inside the workspace"))?
    } else {
        p
    };
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => parts.push(
                n.to_str()
                    .ok_or_else(|| refuse("not a UTF-8 path"))?
                    .to_string(),
            ),
            std::path::Component::CurDir => {}
            _ => return Err(refuse("give a path inside the workspace, without `..`")),
        }
    }
    if parts.is_empty() {
        return Err(refuse("give a file of the workspace"));
    }
    Ok(parts.join("/"))
}

/// The lines of `text` as the line diff splits them (each with its line end).
fn split(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The walk: the version so far, its lines' origins (indices into `origins`), and the
/// origins of every version met.
struct Walk<'a> {
    reader: &'a StoreReader,
    origins: Vec<Origin>,
    id: Option<ObjectId>,
    content: String,
    lines: Vec<usize>,
    known: HashMap<ObjectId, Vec<usize>>,
}

impl Walk<'_> {
    /// Moves to version `id` (None: absent), whose new lines come from `origin`.
    fn step(&mut self, id: Option<ObjectId>, origin: &Origin) -> Result<(), StoreError> {
        if id == self.id {
            return Ok(());
        }
        let content = match id {
            Some(id) => String::from_utf8_lossy(&self.reader.read_blob(&id)?).into_owned(),
            None => String::new(),
        };
        self.step_to(id, content, origin);
        Ok(())
    }

    /// Moves to `content` (of blob `id`).
    fn step_to(&mut self, id: Option<ObjectId>, content: String, origin: &Origin) {
        let count = split(&content).len();
        let lines = match id.and_then(|id| self.known.get(&id)) {
            Some(l) if l.len() == count => l.clone(),
            _ => {
                let index = self.origin(origin);
                let diff = similar::TextDiff::from_lines(&self.content, &content);
                let mut lines = Vec::with_capacity(count);
                for c in diff.iter_all_changes() {
                    match c.tag() {
                        similar::ChangeTag::Equal => lines.push(
                            c.old_index()
                                .and_then(|i| self.lines.get(i).copied())
                                .unwrap_or(index),
                        ),
                        similar::ChangeTag::Insert => lines.push(index),
                        similar::ChangeTag::Delete => {}
                    }
                }
                lines.resize(count, index);
                lines
            }
        };
        if let Some(id) = id {
            self.known.insert(id, lines.clone());
        }
        self.id = id;
        self.content = content;
        self.lines = lines;
    }

    /// The index of `origin`, added when new.
    fn origin(&mut self, origin: &Origin) -> usize {
        if let Some(i) = self.origins.iter().position(|o| o == origin) {
            return i;
        }
        self.origins.push(origin.clone());
        self.origins.len() - 1
    }
}

/// Blames `path` through the turns of the session `only` (every session when None); see
/// the module docs.
///
/// # Errors
/// [`Error::Inspect`] for a path that is not a text file of the workspace (missing, a
/// directory, a symlink, binary); [`Error::Store`] when a version cannot be read.
pub fn blame(wc: &WorkingCopy, only: Option<SessionKey>, path: &str) -> Result<Blame, Error> {
    let rel = relative(wc.root(), path)?;
    let refuse = |reason: String| Error::Inspect {
        name: rel.clone(),
        reason,
    };
    let abs = wc.root().join(&rel);
    let meta = std::fs::symlink_metadata(&abs).map_err(|e| {
        refuse(if e.kind() == std::io::ErrorKind::NotFound {
            "no such file in the workspace".into()
        } else {
            format!("cannot be read: {e}")
        })
    })?;
    if meta.is_dir() {
        return Err(refuse("a directory: blame takes a file".into()));
    }
    if !meta.is_file() {
        return Err(refuse(
            "not a regular file (a symlink?): blame takes a text file".into(),
        ));
    }
    let bytes = std::fs::read(&abs).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    let disk = match std::str::from_utf8(&bytes) {
        Ok(s) if !bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) => s.to_string(),
        _ => return Err(refuse("a binary file: blame shows text files only".into())),
    };
    let components: Vec<&[u8]> = rel.split('/').map(str::as_bytes).collect();
    let turns: Vec<_> = timeline(wc, only)?
        .into_iter()
        .filter(|i| i.entry.kind != "checkpoint")
        .filter_map(|i| match i.span {
            Some((Some(before), after)) => Some((i, before, after)),
            _ => None,
        })
        .collect();
    let reader = wc.store().reader()?;
    let tx = wc.store().begin_read()?;
    let snapshots = reader.snapshots()?;
    let mut walk = Walk {
        reader: &reader,
        origins: Vec::new(),
        id: None,
        content: String::new(),
        lines: Vec::new(),
        known: HashMap::new(),
    };
    let mut roots: HashMap<ObjectId, Option<ObjectId>> = HashMap::new();
    let mut at = |root: &ObjectId| -> Result<Option<ObjectId>, StoreError> {
        if let Some(v) = roots.get(root) {
            return Ok(*v);
        }
        let v = version(&reader, root, &components)?;
        roots.insert(*root, v);
        Ok(v)
    };
    let before_retrace = Origin::plain(OriginKind::BeforeRetrace);
    let mut last_time = 0;
    match turns.first() {
        Some((_, before, _)) => walk.step(at(before)?, &before_retrace)?,
        None => {
            if let Some(oldest) = snapshots.first() {
                walk.step(at(&oldest.root)?, &before_retrace)?;
            }
        }
    }
    for (item, before, after) in &turns {
        let of = |kind| Origin {
            kind,
            session: Some(item.key.short()),
            session_name: item.name.clone(),
            turn: Some(item.entry.number),
            time_ms: Some(item.entry.time_ms),
            // Exact, as JSON gives it; `Origin::text` escapes it for a terminal.
            prompt: (kind == OriginKind::Turn).then(|| {
                let line = item.entry.text.as_deref().unwrap_or("").lines().next();
                let line = line.unwrap_or("");
                if line.chars().count() > 200 {
                    format!("{}…", line.chars().take(199).collect::<String>())
                } else {
                    line.to_string()
                }
            }),
            step: None,
            tool: None,
        };
        walk.step(at(before)?, &of(OriginKind::BetweenTurns))?;
        // The turn's steps, where they tell who wrote a line: a captured step's snapshots,
        // an edit step's version of the file as the ledger keeps it.
        let edited = edit_versions(&tx, &rel, item.key.0, item.entry.number);
        for st in super::db::steps(&tx, &item.key, item.entry.number)? {
            let by_step = Origin {
                step: Some(st.number),
                tool: Some(format!("{}: {}", st.tool, st.summary)),
                ..of(OriginKind::Turn)
            };
            match (st.before, st.after) {
                (Some(b), Some(a)) => {
                    walk.step(at(&b)?, &of(OriginKind::Turn))?;
                    walk.step(at(&a)?, &by_step)?;
                }
                _ => {
                    // Stored by the step's own look, so possibly collected since.
                    if let Some(v) = edited.get(&st.number)
                        && reader.contains(v)?
                    {
                        walk.step(Some(*v), &by_step)?;
                    }
                }
            }
        }
        walk.step(at(after)?, &of(OriginKind::Turn))?;
        last_time = last_time.max(item.ended_ms.unwrap_or(item.entry.time_ms));
    }
    if let Some(newest) = snapshots.last()
        && newest.time_ms >= last_time
    {
        let origin = Origin {
            time_ms: Some(newest.time_ms),
            ..Origin::plain(OriginKind::BetweenTurns)
        };
        walk.step(at(&newest.root)?, &origin)?;
    }
    walk.step_to(
        Some(ObjectId::of_blob(&bytes)),
        disk,
        &Origin::plain(OriginKind::Unsnapshotted),
    );
    let mut ranges: Vec<BlameRange> = Vec::new();
    for (i, o) in walk.lines.iter().enumerate() {
        match ranges.last_mut() {
            Some(r) if walk.origins.get(*o) == Some(&r.origin) => r.end = i + 1,
            _ => ranges.push(BlameRange {
                start: i + 1,
                end: i + 1,
                origin: walk
                    .origins
                    .get(*o)
                    .cloned()
                    .unwrap_or_else(|| Origin::plain(OriginKind::Unsnapshotted)),
            }),
        }
    }
    let text = split(&walk.content)
        .into_iter()
        .map(|l| {
            l.strip_suffix('\n')
                .map_or(l, |l| l.strip_suffix('\r').unwrap_or(l))
                .to_string()
        })
        .collect();
    Ok(Blame {
        path: rel,
        lines: walk.lines.len(),
        ranges,
        text,
    })
}

impl Session {
    /// Blames `path` (workspace-relative) through this session's turns, or every session's
    /// (`blame`); with this session's only, other sessions' edits count as made between
    /// turns.
    ///
    /// # Errors
    /// As `blame`.
    pub fn blame(&self, path: &str, among: Among) -> Result<Blame, Error> {
        blame(&self.ws, self.among(among), path)
    }
}
