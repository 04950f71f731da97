//! A session's turns written as git commits on one ref, through `git fast-import`.
//!
//! The commits form one first-parent chain in the order things happened: a `base` commit
//! whenever a turn's before-snapshot differs from the chain's tree (the workspace before
//! the first turn, and edits made between turns), then the turn's commit (its tree the
//! after-snapshot), and a commit per checkpoint. `git log -p REF` thus shows each turn's
//! change under its prompt. What git cannot hold (empty directories, nested repositories)
//! is named in trailers, so that [`super::import`] rebuilds every snapshot exactly.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::Stdio;
use std::rc::Rc;

use serde::Serialize;

use super::Repo;
use super::message::{Message, quote};
use crate::error::{Error, ShareError};
use crate::object::{EntryKind, ObjectId};
use crate::history::record::TurnState;
use crate::share::image::SessionImage;
use crate::store::StoreReader;

/// What [`crate::Workspace::export_git`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Exported {
    /// The ref written.
    pub reference: String,
    /// The repository's git directory.
    pub repo: std::path::PathBuf,
    /// The ref's commit afterwards.
    pub tip: String,
    /// Commits written (0: the ref already held the session).
    pub commits: u64,
    /// Turns the ref holds.
    pub turns: u64,
    /// Checkpoints the ref holds.
    pub checkpoints: u64,
}

/// What a commit of the chain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The workspace before a turn, when the chain's tree differs from it.
    Base,
    /// A turn.
    Turn,
    /// A checkpoint.
    Checkpoint,
}

impl Kind {
    /// Its `Retrace-Kind` value.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Kind::Base => "base",
            Kind::Turn => "turn",
            Kind::Checkpoint => "checkpoint",
        }
    }

    /// The kind a `Retrace-Kind` value names.
    #[must_use]
    pub fn of(name: &[u8]) -> Option<Kind> {
        match name {
            b"base" => Some(Kind::Base),
            b"turn" => Some(Kind::Turn),
            b"checkpoint" => Some(Kind::Checkpoint),
            _ => None,
        }
    }
}

/// One commit of the chain, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Planned {
    kind: Kind,
    /// The turn or checkpoint number (a base commit: the turn it precedes).
    number: u64,
    /// Index into the image's turns or checkpoints.
    index: usize,
    /// The snapshot this commit's tree is, when it is one.
    snapshot: Option<ObjectId>,
    /// The chain's tree after it (the snapshot, or the one before).
    tree: Option<ObjectId>,
}

/// The chain of commits for `image`, in order.
fn plan(image: &SessionImage) -> Vec<Planned> {
    plan_after(image, |_, _| false, None)
}

/// The chain of commits for the turns and checkpoints of `image` that `skip` does not name
/// (by kind and number), in order, on top of a chain whose tree is `tree`.
fn plan_after(
    image: &SessionImage,
    skip: impl Fn(Kind, u64) -> bool,
    mut tree: Option<ObjectId>,
) -> Vec<Planned> {
    let mut items: Vec<(u64, Kind, usize)> = image
        .turns
        .iter()
        .enumerate()
        .filter(|(_, t)| !skip(Kind::Turn, t.record.number))
        .map(|(i, t)| (t.record.began_ms, Kind::Turn, i))
        .chain(
            image
                .checkpoints
                .iter()
                .enumerate()
                .filter(|(_, c)| !skip(Kind::Checkpoint, c.number))
                .map(|(i, c)| (c.time_ms, Kind::Checkpoint, i)),
        )
        .collect();
    // Stable: equal times keep turns before checkpoints, each in number order.
    items.sort_by_key(|&(t, k, _)| (t, k == Kind::Checkpoint));
    let mut out: Vec<Planned> = Vec::new();
    for (_, kind, index) in items {
        match kind {
            Kind::Turn => {
                let t = &image.turns[index].record;
                if let Some(b) = t.before
                    && tree != Some(b)
                {
                    tree = Some(b);
                    out.push(Planned {
                        kind: Kind::Base,
                        number: t.number,
                        index,
                        snapshot: Some(b),
                        tree,
                    });
                }
                if t.after.is_some() {
                    tree = t.after;
                }
                out.push(Planned {
                    kind,
                    number: t.number,
                    index,
                    snapshot: t.after,
                    tree,
                });
            }
            Kind::Checkpoint | Kind::Base => {
                let c = &image.checkpoints[index];
                tree = Some(c.snapshot);
                out.push(Planned {
                    kind: Kind::Checkpoint,
                    number: c.number,
                    index,
                    snapshot: tree,
                    tree,
                });
            }
        }
    }
    out
}

/// What git cannot hold of a tree: its empty directories and nested repositories, by path
/// relative to it (the empty path: the tree itself is empty).
type Extras = Rc<Vec<(Vec<u8>, Extra)>>;

/// An entry git cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// An empty directory.
    EmptyDir,
    /// A nested repository (its files are never captured), of this recorded size.
    Nested(u64),
}

fn extras_of(
    reader: &StoreReader,
    tree: &ObjectId,
    memo: &mut HashMap<ObjectId, Extras>,
) -> Result<Extras, Error> {
    if let Some(e) = memo.get(tree) {
        return Ok(e.clone());
    }
    let t = reader.read_tree(tree)?;
    let mut out = Vec::new();
    if t.entries.is_empty() {
        out.push((Vec::new(), Extra::EmptyDir));
    }
    for e in &t.entries {
        match e.kind {
            EntryKind::Dir => {
                for (p, x) in extras_of(reader, &e.id, memo)?.iter() {
                    let mut path = e.name.clone();
                    if !p.is_empty() {
                        path.push(b'/');
                        path.extend_from_slice(p);
                    }
                    out.push((path, *x));
                }
            }
            EntryKind::NestedRepo => out.push((e.name.clone(), Extra::Nested(e.size))),
            _ => {}
        }
    }
    let out = Rc::new(out);
    memo.insert(*tree, out.clone());
    Ok(out)
}

/// The trailer naming an empty directory.
pub const EMPTY_DIR: &str = "Retrace-Empty-Dir";
/// The trailer naming a nested repository: its size, a space, its path.
pub const NESTED_REPO: &str = "Retrace-Nested-Repo";

/// The commit message of `p`.
fn message(
    image: &SessionImage,
    p: &Planned,
    extras: &[(Vec<u8>, Extra)],
) -> (Message, u64) {
    let mut m;
    let time_ms;
    match p.kind {
        Kind::Base => {
            let t = &image.turns[p.index].record;
            m = Message::new(&format!("Workspace before turn {}", p.number));
            time_ms = t.began_ms;
            m.add("Retrace-Session", &image.name);
            m.add("Retrace-Kind", "base");
            m.add("Retrace-Turn", p.number.to_string());
        }
        Kind::Turn => {
            let ti = &image.turns[p.index];
            let t = &ti.record;
            m = Message::new(
                t.prompt
                    .as_deref()
                    .unwrap_or(&format!("Turn {} (no prompt recorded)", t.number)),
            );
            time_ms = t.ended_ms.unwrap_or(t.began_ms);
            m.add("Retrace-Session", &image.name);
            if let Some(a) = &image.agent {
                m.add("Retrace-Agent", a);
            }
            m.add("Retrace-Kind", "turn");
            m.add("Retrace-Turn", t.number.to_string());
            if let Some(parent) = t.parent {
                m.add("Retrace-Parent", parent.to_string());
            }
            if let Some(r) = &ti.reverts {
                m.add("Retrace-Reverts", r.reverts.to_string());
                for path in &r.merged {
                    m.add("Retrace-Merged", path);
                }
            }
            if t.prompt.is_none() {
                m.add("Retrace-Prompt", "none");
            }
            m.add("Retrace-Began", t.began_ms.to_string());
            if let Some(e) = t.ended_ms {
                m.add("Retrace-Ended", e.to_string());
            }
            m.add("Retrace-State", t.state.name());
            if let Some(r) = &t.reason {
                m.add("Retrace-Reason", r);
            }
            m.add("Retrace-Steps", ti.steps.len().to_string());
            if let Some(b) = t.before {
                m.add("Retrace-Before", b.to_hex());
            }
        }
        Kind::Checkpoint => {
            let c = &image.checkpoints[p.index];
            m = Message::new(&match &c.label {
                Some(l) => format!("Checkpoint {}: {l}", c.number),
                None => format!("Checkpoint {}", c.number),
            });
            time_ms = c.time_ms;
            m.add("Retrace-Session", &image.name);
            m.add("Retrace-Kind", "checkpoint");
            m.add("Retrace-Checkpoint", c.number.to_string());
            if let Some(l) = &c.label {
                m.add("Retrace-Label", l);
            }
            if let Some(cur) = c.cursor {
                m.add("Retrace-Cursor", cur.to_string());
            }
            m.add("Retrace-Time", c.time_ms.to_string());
        }
    }
    if let Some(s) = p.snapshot {
        m.add("Retrace-Snapshot", s.to_hex());
    }
    for (path, x) in extras.iter().filter(|(p, _)| !p.is_empty()) {
        match x {
            Extra::EmptyDir => m.add(EMPTY_DIR, path),
            Extra::Nested(size) => {
                let mut v = format!("{size} ").into_bytes();
                v.extend_from_slice(path);
                m.add(NESTED_REPO, v);
            }
        }
    }
    (m, time_ms)
}

/// What an existing commit of the ref says it is: its kind, number and snapshot.
fn identity(m: &Message) -> (Option<Kind>, Option<u64>, Option<Vec<u8>>) {
    let number = m
        .number("Retrace-Turn")
        .ok()
        .flatten()
        .or_else(|| m.number("Retrace-Checkpoint").ok().flatten());
    (
        m.get("Retrace-Kind").and_then(Kind::of),
        number,
        m.get("Retrace-Snapshot").map(<[u8]>::to_vec),
    )
}

/// Checks that the ref's commits (`existing`: each commit with the kind, number and snapshot
/// it names) are this session's chain so far, so that what `full` (the session's whole chain)
/// holds beyond them can be appended: every turn or checkpoint they name is the session's
/// (its snapshot the same, unless retention expired the turn here or the turn cap removed
/// it), and every one the session has before the last of them is among them (or has no
/// snapshot left to export). Answers what of `full` the ref stands for (what it holds, and
/// what expired before it was exported), or why the ref holds another history.
fn appended(
    image: &SessionImage,
    full: &[Planned],
    existing: &[(&String, Kind, u64, Option<Vec<u8>>)],
) -> Result<std::collections::HashSet<(Kind, u64)>, String> {
    let expired = |p: &Planned| {
        p.kind == Kind::Turn && image.turns[p.index].record.state == TurnState::Expired
    };
    let mut last = None;
    for (commit, kind, number, snapshot) in existing.iter().filter(|e| e.1 != Kind::Base) {
        let Some(at) = full
            .iter()
            .position(|p| p.kind == *kind && p.number == *number)
        else {
            // Gone from this session (the turn cap): its commit stays as it is.
            continue;
        };
        let p = &full[at];
        if !expired(p) && p.snapshot.map(|s| s.to_hex().into_bytes()) != *snapshot {
            return Err(format!(
                "its commit {commit} is another {} {number} than this session's",
                kind.name()
            ));
        }
        last = Some(last.map_or(at, |l: usize| l.max(at)));
    }
    if let Some(last) = last
        && let Some(p) = full[..last].iter().find(|p| {
            p.kind != Kind::Base
                && !expired(p)
                && !existing.iter().any(|e| e.1 == p.kind && e.2 == p.number)
        })
    {
        return Err(format!(
            "it lacks the session's {} {} before what it holds",
            p.kind.name(),
            p.number
        ));
    }
    let upto = last.map_or(0, |l| l + 1);
    Ok(full[..upto]
        .iter()
        .map(|p| (p.kind, p.number))
        .chain(existing.iter().map(|e| (e.1, e.2)))
        .collect())
}

/// Writes `image` as commits on `reference` in `repo`, reading objects from `reader`.
/// When the ref already holds the first commits of the chain, only the rest are added; when
/// it holds anything else, the export is refused unless `force` (the ref is then replaced).
/// Only `reference` is updated: no branch, index, HEAD or work tree is touched.
///
/// # Errors
/// [`ShareError::Diverged`], [`ShareError::Git`], [`Error::Store`].
pub fn export(
    reader: &StoreReader,
    image: &SessionImage,
    repo: &Repo,
    reference: &str,
    force: bool,
) -> Result<Exported, Error> {
    super::check_ref(reference)?;
    let planned = plan(image);
    let mut objects = repo.objects()?;
    let tip = repo.tip(reference)?;
    let mut planned = planned;
    let mut held = (0, 0);
    let mut tip_tree = None;
    if let Some(tip) = tip.as_deref().filter(|_| !force) {
        let chain = repo.chain(tip)?;
        let diverged = |detail: String| ShareError::Diverged {
            reference: reference.to_string(),
            repo: repo.git_dir().to_path_buf(),
            detail,
        };
        let mut existing = Vec::with_capacity(chain.len());
        for commit in &chain {
            let o = objects.get(commit)?;
            let body = o
                .data
                .windows(2)
                .position(|w| w == b"\n\n")
                .map_or(&[][..], |at| &o.data[at + 2..]);
            let m = Message::decode(body)
                .filter(|m| m.get("Retrace-Session") == Some(image.name.as_bytes()));
            let Some(m) = m else {
                return Err(diverged(format!(
                    "its commit {commit} is not this session's (written by retrace for it)"
                ))
                .into());
            };
            let (kind, number, snapshot) = identity(&m);
            let (Some(kind), Some(number)) = (kind, number) else {
                return Err(diverged(format!("its commit {commit} names no turn")).into());
            };
            if let Some(s) = &snapshot {
                tip_tree = std::str::from_utf8(s).ok().and_then(ObjectId::from_hex);
            }
            existing.push((commit, kind, number, snapshot));
        }
        let done = appended(image, &planned, &existing).map_err(diverged)?;
        held = (
            existing.iter().filter(|e| e.1 == Kind::Turn).count() as u64,
            existing.iter().filter(|e| e.1 == Kind::Checkpoint).count() as u64,
        );
        planned = plan_after(image, |k, n| done.contains(&(k, n)), tip_tree);
    }
    drop(objects);
    let count = |k: Kind| planned.iter().filter(|p| p.kind == k).count() as u64;
    let mut out = Exported {
        reference: reference.to_string(),
        repo: repo.git_dir().to_path_buf(),
        tip: tip.clone().unwrap_or_default(),
        commits: 0,
        turns: held.0 + count(Kind::Turn),
        checkpoints: held.1 + count(Kind::Checkpoint),
    };
    if planned.is_empty() {
        return Ok(out);
    }
    // No hook of the repository runs (`--repo .` is the user's own repository).
    let mut args = vec![
        "-c",
        "core.hooksPath=/dev/null",
        "fast-import",
        "--quiet",
        "--date-format=raw",
        // Input that ends without `done` (this process failed while feeding it) is an error:
        // fast-import then updates no ref.
        "--done",
    ];
    if force {
        args.push("--force");
    }
    let mut child = repo
        .command()
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ShareError::NoGit { source })?;
    let stdin = child.stdin.take();
    let fed = match stdin {
        Some(stdin) => feed(
            reader,
            image,
            &planned,
            (tip.as_deref().filter(|_| !force), tip_tree),
            (reference, repo.git_dir()),
            BufWriter::with_capacity(1 << 20, stdin),
        ),
        None => Ok(()),
    };
    let result = child
        .wait_with_output()
        .map_err(|source| ShareError::NoGit { source })?;
    // A failure of ours while feeding it (a store read) is the cause of fast-import's
    // ("stream ends early"); a pipe fast-import closed says nothing: its own words do.
    match fed {
        Err(Error::Share(ShareError::Git { .. })) if !result.status.success() => {}
        other => other?,
    }
    if !result.status.success() {
        return Err(ShareError::Git {
            action: "fast-import".into(),
            repo: repo.git_dir().to_path_buf(),
            detail: String::from_utf8_lossy(&result.stderr).trim().to_string(),
        }
        .into());
    }
    out.commits = planned.len() as u64;
    out.tip = repo.tip(reference)?.unwrap_or_default();
    Ok(out)
}

/// `git fast-import`'s input for `planned[start..]`, on top of `from` when given.
fn feed(
    reader: &StoreReader,
    image: &SessionImage,
    planned: &[Planned],
    (from, on): (Option<&str>, Option<ObjectId>),
    (reference, git_dir): (&str, &std::path::Path),
    mut w: impl Write,
) -> Result<(), Error> {
    let io = |e: std::io::Error| ShareError::Git {
        action: "fast-import".into(),
        repo: git_dir.to_path_buf(),
        detail: format!("writing its input: {e}"),
    };
    // What each commit writes and deletes, against the chain's tree before it. The ref's
    // tip tree may be gone from this store (retention expired its turn since): the first
    // commit then lists every file anew (`deleteall`).
    let mut changes = Vec::with_capacity(planned.len());
    let mut prev = on.filter(|t| crate::diff::flatten(reader, t).is_ok());
    let anew = on.is_some() && prev.is_none();
    for p in planned {
        let (mut writes, mut deletes) = (Vec::new(), Vec::new());
        if let Some(tree) = p.tree.filter(|t| Some(*t) != prev) {
            match prev {
                Some(old) => {
                    for c in crate::diff::changes(reader, &old, &tree)? {
                        match &c.new {
                            Some(e) if e.kind.is_content() => writes.push(e.clone()),
                            _ if c.old.as_ref().is_some_and(|o| o.kind.is_content()) => {
                                deletes.push(c.path.clone());
                            }
                            _ => {}
                        }
                    }
                }
                None => {
                    writes = crate::diff::flatten(reader, &tree)?
                        .into_iter()
                        .filter(|e| e.kind.is_content())
                        .collect();
                }
            }
        }
        if p.tree.is_some() {
            prev = p.tree;
        }
        changes.push((writes, deletes));
    }
    // Every new content first, the versions of each path one after another: fast-import
    // stores a blob as a delta against the blob before it in the stream.
    let mut order: Vec<(&[u8], usize, ObjectId)> = changes
        .iter()
        .enumerate()
        .flat_map(|(i, (writes, _))| writes.iter().map(move |e| (e.path.as_bytes(), i, e.id)))
        .collect();
    order.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut marks: HashMap<ObjectId, u64> = HashMap::new();
    let mut next_mark = 1u64;
    for (_, _, id) in order {
        if marks.contains_key(&id) {
            continue;
        }
        let data = reader.read_blob(&id)?;
        writeln!(w, "blob\nmark :{next_mark}\ndata {}", data.len()).map_err(io)?;
        w.write_all(&data).map_err(io)?;
        w.write_all(b"\n").map_err(io)?;
        marks.insert(id, next_mark);
        next_mark += 1;
    }
    let mut memo = HashMap::new();
    for ((i, p), (writes, deletes)) in planned.iter().enumerate().zip(&changes) {
        let extras = match p.tree {
            Some(t) => extras_of(reader, &t, &mut memo)?,
            None => Rc::new(Vec::new()),
        };
        let (m, time_ms) = message(image, p, &extras);
        let msg = m.encode();
        // Fixed: names from the session (which an import may have brought from anywhere)
        // go only into the message, whose length fast-import is told.
        let who = "retrace <retrace@localhost>";
        let when = format!("{} +0000", time_ms / 1000);
        writeln!(
            w,
            "commit {reference}\nmark :{next_mark}\nauthor {who} {when}\ncommitter {who} {when}\ndata {}",
            msg.len()
        )
        .map_err(io)?;
        next_mark += 1;
        w.write_all(&msg).map_err(io)?;
        w.write_all(b"\n").map_err(io)?;
        if i == 0 {
            if let Some(from) = from {
                writeln!(w, "from {from}").map_err(io)?;
            }
            if anew {
                w.write_all(b"deleteall\n").map_err(io)?;
            }
        }
        for d in deletes {
            w.write_all(b"D ").map_err(io)?;
            w.write_all(&quote(d.as_bytes())).map_err(io)?;
            w.write_all(b"\n").map_err(io)?;
        }
        for e in writes {
            let mode = match e.kind {
                EntryKind::Executable => "100755",
                EntryKind::Symlink => "120000",
                _ => "100644",
            };
            let mark = marks.get(&e.id).copied().unwrap_or(0);
            write!(w, "M {mode} :{mark} ").map_err(io)?;
            w.write_all(&quote(e.path.as_bytes())).map_err(io)?;
            w.write_all(b"\n").map_err(io)?;
        }
        w.write_all(b"\n").map_err(io)?;
    }
    w.write_all(b"done\n").map_err(io)?;
    w.flush().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::record::{CheckpointRecord, Counts, HISTORY_VERSION, TurnRecord, TurnState};
    use crate::share::image::TurnImage;

    fn id(n: u8) -> ObjectId {
        ObjectId([n; 32])
    }

    fn turn(number: u64, began: u64, before: u8, after: u8) -> TurnImage {
        TurnImage {
            record: TurnRecord {
                version: HISTORY_VERSION,
                number,
                parent: number.checked_sub(1).filter(|n| *n > 0),
                anchor: None,
                leaf: None,
                rounds: Vec::new(),
                prompt: Some(format!("prompt {number}")),
                began_ms: began,
                ended_ms: Some(began + 1),
                before: Some(id(before)),
                after: Some(id(after)),
                state: TurnState::Complete,
                reason: None,
                counts: Counts::default(),
            },
            reverts: None,
            steps: Vec::new(),
        }
    }

    /// The ref ends on a tree this store no longer holds: the first new commit lists every
    /// file anew, on top of the ref's tip.
    #[test]
    fn a_tip_whose_tree_is_gone_is_followed_by_every_file_anew() {
        let d = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&d.path().join("store"), d.path()).unwrap();
        let mut sink = crate::share::sink::ObjectSink::new(&store).unwrap();
        let blob = sink.blob(b"hello\n".to_vec(), None).unwrap();
        let root = sink
            .tree(&crate::object::Tree {
                entries: vec![crate::object::TreeEntry {
                    name: b"a.txt".to_vec(),
                    kind: EntryKind::File,
                    id: blob,
                    size: 6,
                }],
            })
            .unwrap();
        sink.finish().unwrap();
        let image = SessionImage {
            name: "s".into(),
            agent: None,
            created_ms: 0,
            cursor: None,
            redo: Vec::new(),
            turns: Vec::new(),
            checkpoints: vec![CheckpointRecord {
                version: HISTORY_VERSION,
                number: 2,
                label: None,
                snapshot: root,
                cursor: None,
                time_ms: 5,
            }],
        };
        let mut out = Vec::new();
        let gone = ObjectId([9; 32]);
        feed(
            &store.reader().unwrap(),
            &image,
            &plan_after(&image, |_, _| false, Some(gone)),
            (Some("0123abcd"), Some(gone)),
            ("refs/retrace/x", d.path()),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("from 0123abcd\ndeleteall\nM 100644 :1 a.txt\n"),
            "{text}"
        );
    }

    #[test]
    fn the_chain_puts_a_base_commit_where_the_disk_moved_between_turns() {
        let image = SessionImage {
            name: "s".into(),
            agent: None,
            created_ms: 0,
            cursor: Some(3),
            redo: Vec::new(),
            turns: vec![turn(1, 10, 1, 2), turn(2, 20, 2, 3), turn(3, 40, 9, 4)],
            checkpoints: vec![CheckpointRecord {
                version: HISTORY_VERSION,
                number: 1,
                label: None,
                snapshot: id(5),
                cursor: Some(2),
                time_ms: 30,
            }],
        };
        let got: Vec<(Kind, u64, Option<ObjectId>)> =
            plan(&image).iter().map(|p| (p.kind, p.number, p.snapshot)).collect();
        assert_eq!(
            got,
            vec![
                (Kind::Base, 1, Some(id(1))),
                (Kind::Turn, 1, Some(id(2))),
                (Kind::Turn, 2, Some(id(3))),
                (Kind::Checkpoint, 1, Some(id(5))),
                (Kind::Base, 3, Some(id(9))),
                (Kind::Turn, 3, Some(id(4))),
            ]
        );
    }
}
