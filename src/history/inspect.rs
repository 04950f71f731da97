//! Reading history by path and by entry: what each turn and checkpoint changed
//! (its paths, their lines, the bytes it added to the store), a file's history
//! (`retrace log -- PATH`) and one entry in full (`retrace show`).
//!
//! Every entry is the change between two snapshots, its *span*:
//!
//! - a turn: its before-snapshot to its after-snapshot (a turn without both changed nothing
//!   that can be named: conversation-only, expired, pending);
//! - a checkpoint: the snapshot the workspace recorded just before it (in the workspace's
//!   snapshot log, whoever took it: a turn of any session, a `retrace snapshot`) to the
//!   checkpoint's snapshot, so a checkpoint is credited with exactly the edits it was the
//!   first to capture, and an edit another session's turn made is that turn's alone (the
//!   workspace's first snapshot is from nothing). When retention pruned that record: the
//!   session's last known state when it was taken (what its op log replays to just before
//!   the checkpoint), else the end of the session's previous entry, else nothing changed;
//! - a workspace snapshot (`retrace log --snapshots`): the previous snapshot to it, the
//!   first one from nothing (everything in it is added).
//!
//! **Bytes added** (`bytes_added`) of a workspace snapshot is recorded when its row is
//! written: the stored bytes the operation that wrote it added to the store (its capture's new
//! file contents, chunk lists, deltas and trees; what `retrace snapshot` reports as
//! `new_bytes`), so that listing the log reads rows and walks no trees. A row written before
//! that figure was kept (an older store) is counted as a turn is, below.
//!
//! A turn's or checkpoint's bytes added are computed, not recorded: walking the entries shown
//! oldest first, the stored bytes of the objects each entry's after-side introduced for the
//! paths it changed: the new blob, and for a file stored in chunks its chunk list and each
//! chunk, counted as stored (compressed; a delta as its delta; an object sharing a frame with
//! others as its share of the frame's stored bytes, in proportion to its length). An object
//! is counted once, for the oldest entry that introduced it; one already on the old side of
//! any change (the version a path had before) is not counted. What no entry's change ever
//! mentioned is unknown to the walk: a new file whose content equals that of a file no entry
//! changed (a copy of an untouched file) is counted although the store had it. Trees are **not** counted (every change rewrites the trees on its
//! paths, which are small and stored whole), nor are objects since removed by garbage
//! collection (0). Across sessions (`retrace log -- PATH` without `--session`) the walk is
//! over every session's entries together, so an object two sessions stored counts once.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use serde::Serialize;

use super::db::{self, Loaded, SessionKey};
use super::record::{Counts, Op, TurnState};
use super::{LogEntry, Session, SessionLog};
use crate::object::FlatEntry;
use crate::config::bytes_approx;
use crate::diff::{changes, flatten, selected};
use crate::error::{Error, StoreError};
use crate::object::record::{ObjectKind, ObjectRecord};
use crate::object::{EntryKind, ObjectId};
use crate::store::{ReadTx, SnapshotRecord, StoreReader};
use crate::working_copy::WorkingCopy;

/// One path an entry changed: how, and by how many lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathChange {
    /// The path, relative to the workspace root.
    pub path: String,
    /// `A` (added), `M` (modified: content, kind or executable bit) or `D` (deleted).
    pub change: &'static str,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    /// Whether either side is binary (its lines are not counted).
    pub binary: bool,
}

/// One entry of a file's history (`retrace log -- PATH`): a turn or checkpoint that changed
/// one of the paths asked about.
#[derive(Clone, Debug, Serialize)]
pub struct FileLogEntry {
    /// The session: the first 16 hex digits of its key.
    pub session: String,
    /// The host's name of the session, when kept.
    pub session_name: Option<String>,
    /// The entry, as the session's log shows it.
    #[serde(flatten)]
    pub entry: LogEntry,
    /// The paths asked about that it changed.
    pub paths: Vec<PathChange>,
    /// Lines added, summed over [`FileLogEntry::paths`].
    pub lines_added: u64,
    /// Lines removed, summed over [`FileLogEntry::paths`].
    pub lines_removed: u64,
}

impl FileLogEntry {
    /// The session as a person names it: its name, else its short key.
    #[must_use]
    pub fn session_shown(&self) -> &str {
        self.session_name.as_deref().unwrap_or(&self.session)
    }
}

/// One turn or checkpoint in full (`retrace show`).
#[derive(Clone, Debug, Serialize)]
pub struct EntryDetail {
    /// The session: the first 16 hex digits of its key.
    pub session: String,
    /// The host's name of the session, when kept.
    pub session_name: Option<String>,
    /// The entry, as the session's log shows it (`text` is the whole prompt or label).
    #[serde(flatten)]
    pub entry: LogEntry,
    /// When the turn ended (Unix milliseconds; None for a checkpoint or an open turn).
    pub ended_ms: Option<u64>,
    /// Every path it changed, sorted.
    pub paths: Vec<PathChange>,
    /// The two snapshots its change lies between (`None` before: everything in the
    /// second), for a diff of its paths (`WorkingCopy::patches`); `None` when it changed
    /// nothing that was captured.
    #[serde(skip)]
    pub span: Span,
}

/// One state of the workspace's log (`retrace log --snapshots`), with what it added: a
/// snapshot, and the snapshots taken right after it that found the same files (their labels
/// join its own).
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotLogEntry {
    /// The snapshot's record (the first snapshot of this state).
    #[serde(flatten)]
    pub snapshot: SnapshotRecord,
    /// Every label this state was given, oldest first.
    pub labels: Vec<String>,
    /// The bytes it added to the store (see the module docs).
    pub bytes_added: u64,
    /// With paths asked about: those it changed from the previous snapshot.
    pub paths: Vec<PathChange>,
    /// When the watcher's recorder captured it after a burst of writes (local history):
    /// what the burst changed.
    pub burst: Option<super::bursts::BurstSummary>,
}

/// The two snapshots an entry's change lies between: `(None, b)` is everything in `b`.
pub type Span = Option<(Option<ObjectId>, ObjectId)>;

/// A leaf path's entry on each side of a change (None: absent there).
type LeafChange = (Option<FlatEntry>, Option<FlatEntry>);

/// An entry of the history with what it changed.
pub(crate) struct Item {
    /// Its session.
    pub key: SessionKey,
    /// The session's name, when kept.
    pub name: Option<String>,
    /// The entry.
    pub entry: LogEntry,
    /// When the turn ended.
    pub ended_ms: Option<u64>,
    /// Its span.
    pub span: Span,
    /// The leaf paths its span changed, sorted (filled by [`fill`]).
    pub changes: Result<Vec<LeafChange>, StoreError>,
}

/// The log entries of a session, newest first (as [`Session::log`] lists them), each with
/// its span and when it ended. `bytes_added` is left 0.
fn entries(
    l: &Loaded,
    ops: &[crate::history::record::OpRecord],
    snapshots: &[SnapshotRecord],
) -> Vec<(LogEntry, Span, Option<u64>)> {
    let applied: HashSet<u64> = l.applied().into_iter().collect();
    let undone: HashSet<u64> = l.state.redo.iter().map(|r| r.0).collect();
    // Each checkpoint's baseline: the last known state just before its op.
    let mut baseline: HashMap<u64, Option<ObjectId>> = HashMap::new();
    let mut state = super::state::SessionState::new();
    for r in ops {
        if let Op::Checkpoint { number, .. } = &r.op {
            baseline.insert(*number, state.last_known);
        }
        state.apply(&r.op);
    }
    let mut out: Vec<(LogEntry, Span, Option<u64>)> = l
        .turns
        .iter()
        .map(|t| {
            let span = match (t.before, t.after, t.state) {
                (Some(b), Some(a), TurnState::Complete | TurnState::ConversationOnly) => {
                    Some((Some(b), a))
                }
                _ => None,
            };
            let revert = l.reverts(t.number);
            let e = LogEntry {
                kind: if revert.is_some() { "revert" } else { "turn" },
                number: t.number,
                time_ms: t.began_ms,
                state: Some(t.state),
                reason: t.reason.clone(),
                text: match revert {
                    Some(r) => Some(format!("revert of turn {}", r.reverts)),
                    None => t.prompt.clone(),
                },
                anchor: t.anchor.clone(),
                leaf: t.leaf.clone(),
                before: t.before,
                after: t.after,
                counts: t.counts,
                applied: applied.contains(&t.number),
                undone: undone.contains(&t.number),
                reverts: revert.map(|r| r.reverts),
                merged: revert.map(|r| r.merged.clone()).unwrap_or_default(),
                bytes_added: 0,
                steps: Vec::new(),
            };
            (e, span, t.ended_ms)
        })
        .chain(l.checkpoints.iter().map(|c| {
            // Its own record is the newest of its root up to its time (recorded just before).
            let recorded = snapshots
                .iter()
                .rposition(|s| s.root == c.snapshot && s.time_ms <= c.time_ms);
            let span = match recorded {
                Some(0) => Some((None, c.snapshot)),
                Some(i) => Some((Some(snapshots[i - 1].root), c.snapshot)),
                None => baseline
                    .get(&c.number)
                    .copied()
                    .flatten()
                    .map(|b| (Some(b), c.snapshot)),
            };
            let e = LogEntry {
                kind: "checkpoint",
                number: c.number,
                time_ms: c.time_ms,
                state: None,
                reason: None,
                text: c.label.clone(),
                anchor: None,
                leaf: None,
                before: Some(c.snapshot),
                after: None,
                counts: Counts::default(),
                applied: false,
                undone: false,
                reverts: None,
                merged: Vec::new(),
                bytes_added: 0,
                steps: Vec::new(),
            };
            (e, span, None)
        }))
        .collect();
    out.sort_by_key(|(e, _, _)| std::cmp::Reverse(e.time_ms));
    // A checkpoint the op log no longer explains: from the end of the entry before it.
    for i in 0..out.len() {
        if out[i].0.kind == "checkpoint"
            && out[i].1.is_none()
            && !baseline.contains_key(&out[i].0.number)
        {
            let previous = out[i + 1..]
                .iter()
                .find_map(|(e, _, _)| e.after.or(e.before));
            if let Some(b) = previous {
                out[i].1 = Some((Some(b), out[i].0.before.unwrap_or(b)));
            }
        }
    }
    out
}

/// The items of the sessions `keys` (every session when None), oldest first, without their
/// changes; with the `Loaded` of each session read.
fn collect(
    tx: &ReadTx,
    snapshots: &[SnapshotRecord],
    keys: Option<&[SessionKey]>,
) -> Result<(Vec<Item>, Vec<Loaded>), Error> {
    let keys: Vec<SessionKey> = match keys {
        Some(k) => k.to_vec(),
        None => db::sessions(tx)?.into_iter().map(|(k, _)| k).collect(),
    };
    let mut items = Vec::new();
    let mut loaded = Vec::new();
    for key in keys {
        let l = db::load(tx, &key)?;
        let ops = db::ops(tx, &key)?;
        let name = db::name(tx, &key)?.map(|n| n.name);
        // Newest first within the session; reversed below with the others.
        for (entry, span, ended_ms) in entries(&l, &ops, snapshots).into_iter().rev() {
            items.push(Item {
                key,
                name: name.clone(),
                entry,
                ended_ms,
                span,
                changes: Ok(Vec::new()),
            });
        }
        loaded.push(l);
    }
    // Oldest first; within a millisecond, by session then as each session orders them.
    items.sort_by(|a, b| {
        a.entry
            .time_ms
            .cmp(&b.entry.time_ms)
            .then(a.key.cmp(&b.key))
    });
    Ok((items, loaded))
}

/// The timeline of turns (for blame): every session's items, or one session's, oldest first.
pub(crate) fn timeline(wc: &WorkingCopy, only: Option<SessionKey>) -> Result<Vec<Item>, Error> {
    let snapshots = wc.store().reader()?.snapshots()?;
    let tx = wc.store().begin_read()?;
    let keys = only.map(|k| vec![k]);
    Ok(collect(&tx, &snapshots, keys.as_deref())?.0)
}

/// The leaf paths `span` changes, sorted.
fn leaf_changes(reader: &StoreReader, span: Span) -> Result<Vec<LeafChange>, StoreError> {
    let leaf = |e: Option<FlatEntry>| e.filter(|e| e.kind != EntryKind::Dir);
    Ok(match span {
        None => Vec::new(),
        Some((None, b)) => flatten(reader, &b)?
            .into_iter()
            .filter(|e| e.kind != EntryKind::Dir)
            .map(|e| (None, Some(e)))
            .collect(),
        Some((Some(a), b)) => changes(reader, &a, &b)?
            .into_iter()
            .map(|c| (leaf(c.old), leaf(c.new)))
            .filter(|(o, n)| o.is_some() || n.is_some())
            .collect(),
    })
}

/// An object's stored bytes: its frame's when alone in it, else its share of the frame in
/// proportion to its length.
fn stored_share(rec: &ObjectRecord) -> u64 {
    let (stored, len, frame) = (
        u64::from(rec.stored_len),
        u64::from(rec.len),
        u64::from(rec.frame_len),
    );
    if frame == 0 || len >= frame {
        stored
    } else {
        (stored * len).div_ceil(frame)
    }
}

/// The objects counted so far (see the module docs).
struct Counter<'a> {
    reader: &'a StoreReader,
    seen: HashSet<ObjectId>,
}

impl Counter<'_> {
    /// The ids of a file's content: the blob, and for a chunked one its chunks.
    fn parts(&self, e: &FlatEntry) -> Vec<(ObjectId, u64)> {
        if !matches!(
            e.kind,
            EntryKind::File | EntryKind::Executable | EntryKind::Symlink
        ) {
            return Vec::new();
        }
        let Ok(rec) = self.reader.record(&e.id) else {
            return Vec::new();
        };
        let mut out = vec![(e.id, stored_share(&rec))];
        if rec.kind == ObjectKind::ChunkedBlob
            && let Ok(list) = self.reader.chunk_list(&e.id)
        {
            for (chunk, _) in &list.chunks {
                let bytes = self.reader.record(chunk).map_or(0, |r| stored_share(&r));
                out.push((*chunk, bytes));
            }
        }
        out
    }

    /// Marks the old side of a change as already stored.
    fn seed(&mut self, e: &FlatEntry) {
        if self.seen.contains(&e.id) {
            return;
        }
        for (id, _) in self.parts(e) {
            self.seen.insert(id);
        }
    }

    /// The bytes the new side of a change introduced.
    fn added(&mut self, e: &FlatEntry) -> u64 {
        if self.seen.contains(&e.id) {
            return 0;
        }
        self.parts(e)
            .into_iter()
            .filter(|(id, _)| self.seen.insert(*id))
            .map(|(_, bytes)| bytes)
            .sum()
    }
}

/// Fills each item's changes and `bytes_added`, walking them oldest first.
fn fill(reader: &StoreReader, items: &mut [Item]) {
    let mut counter = Counter {
        reader,
        seen: HashSet::new(),
    };
    for item in items.iter_mut() {
        item.changes = leaf_changes(reader, item.span);
        if let Ok(changes) = &item.changes {
            for (old, _) in changes {
                if let Some(o) = old {
                    counter.seed(o);
                }
            }
            item.entry.bytes_added = changes
                .iter()
                .filter_map(|(_, new)| new.as_ref())
                .map(|n| counter.added(n))
                .sum();
        }
    }
}

/// How `old` → `new` changed a path, with its lines counted as `retrace diff --stat` counts
/// them.
fn path_change(
    reader: &StoreReader,
    old: Option<&FlatEntry>,
    new: Option<&FlatEntry>,
) -> PathChange {
    let path = old.or(new).map(|e| e.path.show()).unwrap_or_default();
    let change = match (old, new) {
        (None, _) => "A",
        (_, None) => "D",
        _ => "M",
    };
    let sides = crate::patch::Sides { reader, disk: None };
    let patches = crate::patch::patches(sides, old, new);
    PathChange {
        path,
        change,
        added: patches.iter().map(|p| p.added).sum(),
        removed: patches.iter().map(|p| p.removed).sum(),
        binary: patches.iter().any(|p| p.binary),
    }
}

/// The changes of `changes` below one of `paths` (every change when `paths` is empty).
fn selected_changes(
    reader: &StoreReader,
    changes: &[LeafChange],
    paths: &[String],
) -> Vec<PathChange> {
    changes
        .iter()
        .filter(|(o, n)| {
            o.as_ref()
                .or(n.as_ref())
                .is_some_and(|e| selected(&e.path.show(), paths))
        })
        .map(|(o, n)| path_change(reader, o.as_ref(), n.as_ref()))
        .collect()
}

/// `paths` as [`selected`] takes them: a leading `./` dropped.
fn normalized(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.strip_prefix("./").unwrap_or(p).to_string())
        .collect()
}

/// A session's log (its entries newest first, with `bytes_added`) and its loaded state.
pub(crate) fn session_log(wc: &WorkingCopy, key: SessionKey) -> Result<(Loaded, Vec<Item>), Error> {
    let reader = wc.store().reader()?;
    let snapshots = reader.snapshots()?;
    let tx = wc.store().begin_read()?;
    let (mut items, mut loaded) = collect(&tx, &snapshots, Some(&[key]))?;
    drop(tx);
    fill(&reader, &mut items);
    items.reverse();
    Ok((loaded.pop().unwrap_or_default(), items))
}

/// The turns and checkpoints of the session `only` (every session when None) that changed a
/// path below one of `paths`, newest first, each with those paths' changes and lines.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or a snapshot tree is damaged.
pub fn file_log(
    wc: &WorkingCopy,
    only: Option<SessionKey>,
    paths: &[String],
) -> Result<Vec<FileLogEntry>, Error> {
    let paths = normalized(paths);
    let reader = wc.store().reader()?;
    let snapshots = reader.snapshots()?;
    let tx = wc.store().begin_read()?;
    let keys = only.map(|k| vec![k]);
    let (mut items, _) = collect(&tx, &snapshots, keys.as_deref())?;
    drop(tx);
    fill(&reader, &mut items);
    let mut out = Vec::new();
    for item in items.into_iter().rev() {
        let changes = item.changes?;
        let changed = selected_changes(&reader, &changes, &paths);
        if changed.is_empty() {
            continue;
        }
        out.push(FileLogEntry {
            session: item.key.short(),
            session_name: item.name,
            lines_added: changed.iter().map(|c| c.added).sum(),
            lines_removed: changed.iter().map(|c| c.removed).sum(),
            entry: item.entry,
            paths: changed,
        });
    }
    Ok(out)
}

/// The workspace's snapshots, newest first, each with the bytes it added; with `paths`, only
/// those that changed a path below one of them from the previous snapshot, with the changes.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or a snapshot tree is damaged.
pub fn snapshot_log(wc: &WorkingCopy, paths: &[String]) -> Result<Vec<SnapshotLogEntry>, Error> {
    let paths = normalized(paths);
    let reader = wc.store().reader()?;
    let snapshots = reader.snapshot_rows()?;
    let recorded = reader.snapshot_added()?;
    // Only listing: unreadable burst records show as plain snapshots.
    let mut bursts = wc
        .store()
        .begin_read()
        .and_then(|tx| super::bursts::summaries(&tx))
        .unwrap_or_default();
    let mut counter = Counter {
        reader: &reader,
        seen: HashSet::new(),
    };
    let mut out: Vec<SnapshotLogEntry> = Vec::new();
    let mut previous: Option<ObjectId> = None;
    for (row, s) in snapshots {
        if previous == Some(s.root) {
            // The same files again: one state, one row, with every label it was given.
            if let (Some(last), Some(label)) = (out.last_mut(), &s.label)
                && last.snapshot.root == s.root
                && !last.labels.contains(label)
            {
                last.labels.push(label.clone());
            }
            continue;
        }
        let known = recorded.get(&row).copied();
        // A row whose figure was recorded needs its change walked only to name paths.
        let changes = if known.is_some() && paths.is_empty() {
            Vec::new()
        } else {
            match leaf_changes(&reader, Some((previous, s.root))) {
                Ok(c) => c,
                // Only listing: a damaged snapshot shows as changing nothing (verify names it).
                Err(_) if paths.is_empty() => Vec::new(),
                Err(e) => return Err(e.into()),
            }
        };
        previous = Some(s.root);
        let bytes_added = if let Some(b) = known {
            b
        } else {
            for o in changes.iter().filter_map(|(o, _)| o.as_ref()) {
                counter.seed(o);
            }
            changes
                .iter()
                .filter_map(|(_, n)| n.as_ref())
                .map(|n| counter.added(n))
                .sum()
        };
        let changed = if paths.is_empty() {
            Vec::new()
        } else {
            let c = selected_changes(&reader, &changes, &paths);
            if c.is_empty() {
                continue;
            }
            c
        };
        let burst = bursts
            .remove(&row)
            .filter(|(root, _)| *root == s.root && s.label.is_none())
            .map(|(_, b)| b);
        out.push(SnapshotLogEntry {
            labels: s.label.iter().cloned().collect(),
            snapshot: s,
            bytes_added,
            paths: changed,
            burst,
        });
    }
    out.reverse();
    Ok(out)
}

/// One snapshot in full (`retrace show ID`): its state's row of the log, the snapshot before
/// it, and every path that changed from that one to it.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotDetail {
    /// The snapshot's id.
    pub id: ObjectId,
    /// When its state was first captured (Unix milliseconds), when the log still lists it.
    pub time_ms: Option<u64>,
    /// Every label its state was given, oldest first.
    pub labels: Vec<String>,
    /// Files (and symlinks) it holds.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// The bytes it added to the store, as `retrace log` counts them (0 when the log no
    /// longer lists it).
    pub bytes_added: u64,
    /// The snapshot before it in the log (None: the first one, or one the log no longer
    /// lists; then every path counts as added).
    pub previous: Option<ObjectId>,
    /// Every path that changed from `previous` to it, sorted.
    pub paths: Vec<PathChange>,
}

impl SnapshotDetail {
    /// The detail as `retrace show` prints it.
    #[must_use]
    pub fn text(&self) -> String {
        let mut out = format!("snapshot {}\n", self.id);
        if let Some(t) = self.time_ms {
            let _ = writeln!(out, "taken    {}", time_text(t, true));
        }
        if !self.labels.is_empty() {
            let _ = writeln!(out, "labels   {}", self.labels.join(", "));
        }
        let _ = writeln!(
            out,
            "holds    {} file{}, {}",
            self.files,
            if self.files == 1 { "" } else { "s" },
            bytes_approx(self.bytes)
        );
        let _ = writeln!(
            out,
            "added    {} to the store",
            bytes_approx(self.bytes_added)
        );
        match self.previous {
            Some(p) => {
                let _ = writeln!(out, "since    {}", p.short());
            }
            None => out.push_str("since    nothing (every path is added)\n"),
        }
        out.push_str(&paths_text(&self.paths));
        out
    }
}

/// What `id` is, as [`SnapshotDetail`] says.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or the snapshot's trees are damaged.
pub fn snapshot_detail(wc: &WorkingCopy, id: &ObjectId) -> Result<SnapshotDetail, Error> {
    let log = snapshot_log(wc, &[])?;
    let at = log.iter().position(|e| e.snapshot.root == *id);
    let reader = wc.store().reader()?;
    let previous = at.and_then(|i| log.get(i + 1)).map(|e| e.snapshot.root);
    let changes = leaf_changes(&reader, Some((previous, *id)))?;
    let paths = selected_changes(&reader, &changes, &[]);
    if let Some(e) = at.map(|i| &log[i]) {
        return Ok(SnapshotDetail {
            id: *id,
            time_ms: Some(e.snapshot.time_ms),
            labels: e.labels.clone(),
            files: e.snapshot.files,
            bytes: e.snapshot.bytes,
            bytes_added: e.bytes_added,
            previous,
            paths,
        });
    }
    let files = flatten(&reader, id)?;
    let leaves = files.iter().filter(|f| f.kind != EntryKind::Dir);
    Ok(SnapshotDetail {
        id: *id,
        time_ms: None,
        labels: Vec::new(),
        files: leaves.clone().count() as u64,
        bytes: leaves.map(|f| f.size).sum(),
        bytes_added: 0,
        previous: None,
        paths,
    })
}

/// The entry `reference` names in `l`: `turn:N`, `turn:N:before`, `checkpoint:N`, a host
/// anchor (of a turn's start, end or rounds; the newest turn naming it) or a checkpoint label.
fn resolve(l: &Loaded, reference: &str) -> Result<(&'static str, u64), Error> {
    let unknown = |reason: String| Error::Inspect {
        name: reference.to_string(),
        reason,
    };
    let as_turn = super::navigate::revert_as_turn(reference);
    let reference = as_turn.as_deref().unwrap_or(reference);
    let number = |n: &str, what: &str| {
        n.parse::<u64>()
            .map_err(|_| unknown(format!("write {what}:N with a number")))
    };
    if let Some(rest) = reference.strip_prefix("turn:") {
        let n = number(rest.strip_suffix(":before").unwrap_or(rest), "turn")?;
        return match l.turn(n) {
            Some(_) => Ok(("turn", n)),
            None => Err(unknown(format!(
                "the session keeps no turn {n} (see `retrace log`)"
            ))),
        };
    }
    if let Some(rest) = reference.strip_prefix("checkpoint:") {
        let n = number(rest, "checkpoint")?;
        if l.checkpoints.iter().any(|c| c.number == n) {
            return Ok(("checkpoint", n));
        }
        return Err(unknown(format!(
            "the session keeps no checkpoint {n} (see `retrace log`)"
        )));
    }
    let r = Some(reference);
    if let Some(t) = l.turns.iter().rev().find(|t| {
        t.anchor.as_deref() == r
            || t.leaf.as_deref() == r
            || t.rounds.iter().any(|x| x == reference)
    }) {
        return Ok(("turn", t.number));
    }
    if let Some(c) = l.checkpoints.iter().rev().find(|c| c.label.as_deref() == r) {
        return Ok(("checkpoint", c.number));
    }
    Err(unknown(
        "no turn or checkpoint of this session names it: give turn:N, checkpoint:N, a \
         checkpoint label or a host anchor (see `retrace log`)"
            .into(),
    ))
}

/// Whose turns a file's history or a blame looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Among {
    /// Only the session asked.
    ThisSession,
    /// Every session of its workspace.
    AllSessions,
}

impl Session {
    /// The session key `among` limits a walk to.
    pub(crate) fn among(&self, among: Among) -> Option<SessionKey> {
        (among == Among::ThisSession).then_some(self.key)
    }

    /// The turns and checkpoints of this session (or of every session of its workspace)
    /// that changed a path below one of `paths` (workspace-relative), newest first
    /// (`file_log`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read or a snapshot tree is damaged.
    pub fn file_log(&self, paths: &[String], among: Among) -> Result<Vec<FileLogEntry>, Error> {
        file_log(&self.ws, self.among(among), paths)
    }

    /// One turn or checkpoint in full: `reference` is `turn:N` (`turn:N:before` names the
    /// same turn), `checkpoint:N`, a checkpoint label or a host anchor.
    ///
    /// # Errors
    /// [`Error::Inspect`] when `reference` names no entry of the session; [`Error::Store`].
    pub fn show(&self, reference: &str) -> Result<EntryDetail, Error> {
        if let Some((n, k, false)) = super::navigate::step_name(reference) {
            return self.show_step(reference, n, k);
        }
        let (l, items) = session_log(&self.ws, self.key)?;
        let (kind, number) = resolve(&l, reference)?;
        let Some(item) = items.into_iter().find(|i| {
            (i.entry.kind == "checkpoint") == (kind == "checkpoint") && i.entry.number == number
        }) else {
            return Err(Error::Inspect {
                name: reference.to_string(),
                reason: "it is no longer kept".into(),
            });
        };
        let changes = item.changes?;
        let paths = if changes.is_empty() {
            Vec::new()
        } else {
            selected_changes(&self.ws.store().reader()?, &changes, &[])
        };
        Ok(EntryDetail {
            session: item.key.short(),
            session_name: item
                .name
                .or_else(|| self.name.as_deref().map(str::to_string)),
            entry: item.entry,
            ended_ms: item.ended_ms,
            paths,
            span: item.span,
        })
    }
}

impl Session {
    /// `show turn:N.K`: turn N as [`Session::show`] shows it, narrowed to its step K (its
    /// `steps` holds that step alone): a captured step's paths with their lines, or the
    /// files an edit step named.
    fn show_step(&self, reference: &str, n: u64, k: u64) -> Result<EntryDetail, Error> {
        let mut d = self.show(&format!("turn:{n}"))?;
        let Some(step) = self.step_log(n)?.into_iter().find(|s| s.number == k) else {
            return Err(Error::Inspect {
                name: reference.to_string(),
                reason: format!("turn {n} has no step {k} (`retrace log --steps` lists them)"),
            });
        };
        (d.paths, d.span) = match (step.before, step.after) {
            (Some(b), Some(a)) => {
                let span = Some((Some(b), a));
                (self.span_changes(span)?, span)
            }
            _ => (
                step.files
                    .iter()
                    .map(|f| PathChange {
                        path: f.clone(),
                        change: "M",
                        added: 0,
                        removed: 0,
                        binary: false,
                    })
                    .collect(),
                None,
            ),
        };
        d.entry.steps = vec![step];
        Ok(d)
    }

    /// Every path that changed between the two snapshots of `span` (an entry's change, as
    /// [`EntryDetail::span`] and [`crate::history::timeline::TimelineEntry::span`] name
    /// it), sorted, with its lines counted: what [`Session::show`] lists, for one entry
    /// without reading the whole log again.
    ///
    /// # Errors
    /// [`Error::Store`] when a snapshot tree is damaged or the store cannot be read.
    pub fn span_changes(&self, span: Span) -> Result<Vec<PathChange>, Error> {
        span_changes(&self.ws, span)
    }

    /// The paths of [`Session::span_changes`] alone, no line counted (reads trees only).
    ///
    /// # Errors
    /// As [`Session::span_changes`].
    pub fn span_paths(&self, span: Span) -> Result<Vec<String>, Error> {
        span_paths(&self.ws, span)
    }
}

/// [`Session::span_changes`] of any two snapshots of `wc`'s store.
pub(crate) fn span_changes(wc: &WorkingCopy, span: Span) -> Result<Vec<PathChange>, Error> {
    let reader = wc.store().reader()?;
    let changes = leaf_changes(&reader, span)?;
    Ok(selected_changes(&reader, &changes, &[]))
}

/// [`Session::span_paths`] of any two snapshots of `wc`'s store.
pub(crate) fn span_paths(wc: &WorkingCopy, span: Span) -> Result<Vec<String>, Error> {
    let reader = wc.store().reader()?;
    Ok(leaf_changes(&reader, span)?
        .into_iter()
        .filter_map(|(old, new)| old.or(new).map(|e| e.path.show()))
        .collect())
}

/// `log` of a session as [`Session::log`] returns it.
pub(crate) fn log_of(session: &Session) -> Result<SessionLog, Error> {
    let (l, items) = session_log(&session.ws, session.key)?;
    Ok(SessionLog {
        status: session.status_of(&l),
        entries: items.into_iter().map(|i| i.entry).collect(),
    })
}

/// `YYYY-MM-DD HH:MM` (UTC) of Unix milliseconds, with `:SS` when `seconds`.
#[must_use]
pub fn time_text(ms: u64, seconds: bool) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm), valid for all dates after 1970.
    let z = days.cast_signed() + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let mut out = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    );
    if seconds {
        let _ = write!(out, ":{:02}", rem % 60);
    }
    out
}

/// The first line of `text`, cut at `max` characters (with `…`), what a terminal would act
/// on shown escaped ([`crate::object::terminal_line`]).
#[must_use]
pub fn first_line(text: &str, max: usize) -> String {
    let line = crate::object::terminal_line(text.lines().next().unwrap_or("")).into_owned();
    if line.chars().count() > max {
        format!(
            "{}…",
            line.chars().take(max.saturating_sub(1)).collect::<String>()
        )
    } else {
        line
    }
}

/// A file's history as `retrace log -- PATH` prints it: one line per entry, newest first:
/// `turn:3  session  time  +added -removed  bytes added  prompt`, aligned.
#[must_use]
pub fn file_log_text(entries: &[FileLogEntry]) -> String {
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|e| {
            [
                format!("{}:{}", e.entry.kind, e.entry.number),
                first_line(e.session_shown(), 24),
                time_text(e.entry.time_ms, true),
                format!("+{} -{}", e.lines_added, e.lines_removed),
                bytes_approx(e.entry.bytes_added),
                first_line(e.entry.text.as_deref().unwrap_or(""), 60),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w3, w4) = (width(0), width(1), width(3), width(4));
    let mut out = String::new();
    for [id, session, time, lines, bytes, text] in &rows {
        let line = format!("{id:<w0$}  {session:<w1$}  {time}  {lines:<w3$}  {bytes:>w4$}  {text}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

impl EntryDetail {
    /// As `retrace show` prints it: a header (entry, session, times, state, bytes added), the
    /// prompt or label in full, then each path with its change and lines.
    #[must_use]
    pub fn text(&self) -> String {
        let e = &self.entry;
        let mut out = format!(
            "{}:{}  session {}\n",
            e.kind,
            e.number,
            self.session_name.as_deref().unwrap_or(&self.session)
        );
        let _ = writeln!(out, "began    {}", time_text(e.time_ms, true));
        if let Some(end) = self.ended_ms {
            let _ = writeln!(out, "ended    {}", time_text(end, true));
        }
        if let Some(state) = e.state {
            let _ = write!(out, "state    {}", state.name().replace('_', " "));
            if let Some(r) = &e.reason {
                let _ = write!(out, " ({r})");
            }
            out.push('\n');
        }
        let _ = writeln!(out, "added    {} to the store", bytes_approx(e.bytes_added));
        if let [st] = e.steps.as_slice() {
            let _ = writeln!(out, "step     {}: {} {}", st.number, st.tool, st.summary);
        }
        let label = if e.kind == "checkpoint" {
            "label"
        } else {
            "prompt"
        };
        match e.text.as_deref() {
            Some(t) if !t.is_empty() => {
                let _ = writeln!(out, "{label}:");
                for line in t.lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            _ => {
                let _ = writeln!(out, "{label}   (none)");
            }
        }
        out.push_str(&paths_text(&self.paths));
        out
    }
}

/// The changed paths of a `show`, one per line with its lines added and removed.
fn paths_text(paths: &[PathChange]) -> String {
    if paths.is_empty() {
        return "no files changed\n".into();
    }
    let mut out = String::new();
    let width = paths
        .iter()
        .map(|p| p.path.chars().count())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "{} path{} changed:",
        paths.len(),
        if paths.len() == 1 { "" } else { "s" }
    );
    for p in paths {
        let lines = if p.binary {
            "binary".to_string()
        } else {
            format!("+{} -{}", p.added, p.removed)
        };
        let _ = writeln!(out, "  {} {:<width$}  {lines}", p.change, p.path);
    }
    out
}

#[cfg(test)]
#[path = "inspect_tests.rs"]
mod tests;
