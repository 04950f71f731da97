//! A session rebuilt from the commits [`super::export`] wrote: every commit's files stored
//! in this workspace's store, every snapshot rebuilt and checked against the id its commit
//! names, then the session's records written ([`crate::share::image::install`]).

use std::collections::{BTreeMap, HashMap};

use super::export::{EMPTY_DIR, Extra, Kind, NESTED_REPO};
use super::message::Message;
use super::{Objects, Repo, parse_tree};
use crate::error::{Error, ShareError};
use crate::history::record::{
    CheckpointRecord, Counts, HISTORY_VERSION, RevertRecord, TurnRecord, TurnState,
};
use crate::object::tree::is_safe_name;
use crate::scan::exclude::is_never_restored;
use crate::object::{EntryKind, ObjectId, Tree, TreeEntry};
use crate::share::image::{self, Imported, SessionImage, TurnImage};
use crate::share::sink::ObjectSink;
use crate::working_copy::WorkingCopy;

/// Extras below one directory, by path relative to it.
type ExtraList = Vec<(Vec<u8>, Extra)>;

/// Converts git trees and blobs into this store's objects.
struct Rebuild<'a, 's> {
    objects: Objects,
    sink: &'a mut ObjectSink<'s>,
    hash_len: usize,
    /// Git tree hash → its tree here and size (trees with no extras below them).
    trees: HashMap<String, (ObjectId, u64)>,
    /// Git blob hash → its blob here and size.
    blobs: HashMap<String, (ObjectId, u64)>,
    /// The newest version met at each path: the next version's delta base.
    at_path: HashMap<Vec<u8>, ObjectId>,
    /// Why the commit being read is refused, once found.
    refused: Option<String>,
}

impl Rebuild<'_, '_> {
    fn refuse(&mut self, why: String) -> (ObjectId, u64) {
        self.refused.get_or_insert(why);
        (ObjectId::ZERO, 0)
    }

    /// The tree here for git tree `git` (None: a directory git does not hold) with `extras`
    /// added, at `prefix` (ending in `/`, or empty for the root).
    fn tree(
        &mut self,
        git: Option<&str>,
        prefix: &[u8],
        extras: &[(Vec<u8>, Extra)],
    ) -> Result<(ObjectId, u64), Error> {
        if prefix.iter().filter(|&&b| b == b'/').count() > crate::share::MAX_DEPTH {
            let shown = crate::object::show_path(prefix);
            return Ok(self.refuse(format!(
                "{shown} lies deeper than {} directories",
                crate::share::MAX_DEPTH
            )));
        }
        if self.refused.is_some() {
            return Ok((ObjectId::ZERO, 0));
        }
        if let Some(g) = git
            && extras.is_empty()
            && let Some(found) = self.trees.get(g)
        {
            return Ok(*found);
        }
        let mut groups: BTreeMap<Vec<u8>, ExtraList> = BTreeMap::new();
        let mut entries = Vec::new();
        for (path, x) in extras {
            match path.iter().position(|&b| b == b'/') {
                Some(at) => groups
                    .entry(path[..at].to_vec())
                    .or_default()
                    .push((path[at + 1..].to_vec(), *x)),
                None => entries.push(match x {
                    Extra::EmptyDir => TreeEntry {
                        name: path.clone(),
                        kind: EntryKind::Dir,
                        id: self.sink.tree(&Tree::default())?,
                        size: 0,
                    },
                    Extra::Nested(size) => TreeEntry {
                        name: path.clone(),
                        kind: EntryKind::NestedRepo,
                        id: ObjectId::ZERO,
                        size: *size,
                    },
                }),
            }
        }
        if let Some(g) = git {
            let o = self.objects.get(g)?;
            let Some(listed) = (o.kind == "tree")
                .then(|| parse_tree(&o.data, self.hash_len))
                .flatten()
            else {
                return Ok(self.refuse(format!("its tree {g} is not a tree git can read")));
            };
            for e in listed {
                let mut path = prefix.to_vec();
                path.extend_from_slice(&e.name);
                let kind = match e.mode.as_str() {
                    "40000" => EntryKind::Dir,
                    "100644" | "100664" => EntryKind::File,
                    "100755" => EntryKind::Executable,
                    "120000" => EntryKind::Symlink,
                    m => {
                        let shown = crate::object::show_path(&path);
                        return Ok(self.refuse(format!("{shown} has mode {m}, which retrace never writes")));
                    }
                };
                let (id, size) = if kind == EntryKind::Dir {
                    let below = groups.remove(&e.name).unwrap_or_default();
                    path.push(b'/');
                    self.tree(Some(&e.hash), &path, &below)?
                } else {
                    self.blob(&e.hash, &path)?
                };
                entries.push(TreeEntry {
                    name: e.name,
                    kind,
                    id,
                    size,
                });
            }
        }
        for (name, below) in groups {
            let mut path = prefix.to_vec();
            path.extend_from_slice(&name);
            path.push(b'/');
            let (id, size) = self.tree(None, &path, &below)?;
            entries.push(TreeEntry {
                name,
                kind: EntryKind::Dir,
                id,
                size,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        // What a restore would refuse to write, and `.git` in any case (a case-insensitive
        // file system takes `.GIT` for it).
        if let Some(bad) = entries.iter().find(|e| {
            !is_safe_name(&e.name)
                || is_never_restored(&e.name)
                || e.name.eq_ignore_ascii_case(b".git")
        }) {
            let shown = crate::object::show_path(&bad.name);
            return Ok(self.refuse(format!("it holds an unsafe name {shown}")));
        }
        if let Some(w) = entries.windows(2).find(|w| w[0].name == w[1].name) {
            let shown = crate::object::show_path(&w[0].name);
            return Ok(self.refuse(format!("{shown} is listed twice")));
        }
        let size = entries.iter().map(|e| e.size).sum();
        let id = self.sink.tree(&Tree { entries })?;
        if let Some(g) = git.filter(|_| extras.is_empty()) {
            self.trees.insert(g.to_string(), (id, size));
        }
        Ok((id, size))
    }

    fn blob(&mut self, hash: &str, path: &[u8]) -> Result<(ObjectId, u64), Error> {
        if let Some(found) = self.blobs.get(hash).copied() {
            self.at_path.insert(path.to_vec(), found.0);
            return Ok(found);
        }
        let previous = self.at_path.get(path).copied();
        let Rebuild { objects, sink, .. } = self;
        let mut size = 0;
        let stored = objects.blob(hash, |r, len| {
            size = len;
            Ok(sink.blob_from(r, len, previous)?)
        })?;
        let id = match stored {
            Ok(Ok(id)) => id,
            Ok(Err(e)) => {
                let shown = crate::object::show_path(path);
                return Ok(self.refuse(format!("{shown} could not be read from git ({e})")));
            }
            Err(kind) => {
                let shown = crate::object::show_path(path);
                return Ok(self.refuse(format!("{shown} is a {kind} in git, not a file")));
            }
        };
        self.blobs.insert(hash.to_string(), (id, size));
        self.at_path.insert(path.to_vec(), id);
        Ok((id, size))
    }
}

/// The tree hash and the message of a raw commit.
fn commit_parts(data: &[u8]) -> Option<(String, &[u8])> {
    let at = data.windows(2).position(|w| w == b"\n\n")?;
    let head = std::str::from_utf8(&data[..at]).ok()?;
    let tree = head.lines().next()?.strip_prefix("tree ")?.to_string();
    Some((tree, &data[at + 2..]))
}

/// Rebuilds the session `reference` of `repo` holds in `wc`'s store, named `as_name` when
/// given (else as it was exported). Importing the same commits twice adds nothing.
///
/// # Errors
/// [`ShareError::NotRetrace`] for a ref whose commits retrace did not write (or that were
/// rewritten: a commit's files do not rebuild the snapshot it names); as
/// [`image::install`]; [`ShareError::Git`].
#[allow(clippy::too_many_lines)] // one pass over the chain, reading each commit's trailers
pub fn import(
    wc: &WorkingCopy,
    repo: &Repo,
    reference: &str,
    as_name: Option<&str>,
) -> Result<Imported, Error> {
    super::check_ref(reference)?;
    let not_retrace = |detail: String| ShareError::NotRetrace {
        reference: reference.to_string(),
        repo: repo.git_dir().to_path_buf(),
        detail,
    };
    let Some(tip) = repo.tip(reference)? else {
        return Err(ShareError::Git {
            action: "import".into(),
            repo: repo.git_dir().to_path_buf(),
            detail: format!(
                "it has no ref {reference}; a clone does not fetch it: run `git fetch origin \
                 {reference}:{reference}` there first, or give the remote's URL or path"
            ),
        }
        .into());
    };
    let format = repo.run(&["rev-parse", "--show-object-format"])?;
    let hash_len = if String::from_utf8_lossy(&format).trim() == "sha256" {
        32
    } else {
        20
    };
    let chain = repo.chain(&tip)?;
    let mut sink = ObjectSink::new(wc.store())?;
    let mut rebuild = Rebuild {
        objects: repo.objects()?,
        sink: &mut sink,
        hash_len,
        trees: HashMap::new(),
        blobs: HashMap::new(),
        at_path: HashMap::new(),
        refused: None,
    };
    let mut name: Option<String> = None;
    let mut agent = None;
    let mut turns: Vec<TurnImage> = Vec::new();
    let mut checkpoints = Vec::new();
    let mut current: Option<ObjectId> = None;
    for commit in &chain {
        let o = rebuild.objects.get(commit)?;
        let Some((tree, body)) = commit_parts(&o.data) else {
            return Err(not_retrace(format!("commit {commit} does not parse")).into());
        };
        let Some(m) = Message::decode(body) else {
            return Err(not_retrace(format!(
                "commit {commit} was not written by `retrace export` (no Retrace trailers)"
            ))
            .into());
        };
        let bad = |what: &str| not_retrace(format!("commit {commit}: {what}"));
        let session = m.text_of("Retrace-Session").ok_or_else(|| bad("no session"))?;
        if name.get_or_insert_with(|| session.clone()) != &session {
            return Err(bad("it belongs to another session than the commits before it").into());
        }
        if let Some(a) = m.text_of("Retrace-Agent") {
            agent = Some(a);
        }
        let hex = |key: &str| -> Result<Option<ObjectId>, ShareError> {
            m.get(key)
                .map(|v| {
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(ObjectId::from_hex)
                        .ok_or_else(|| bad(&format!("its {key} is not a snapshot id")))
                })
                .transpose()
        };
        let snapshot = hex("Retrace-Snapshot")?;
        if let Some(want) = snapshot {
            let mut extras: ExtraList = m
                .all(EMPTY_DIR)
                .map(|p| (p.to_vec(), Extra::EmptyDir))
                .collect();
            for v in m.all(NESTED_REPO) {
                let at = v.iter().position(|&b| b == b' ');
                let size = at
                    .and_then(|at| std::str::from_utf8(&v[..at]).ok()?.parse().ok())
                    .ok_or_else(|| bad("a nested repository trailer is malformed"))?;
                extras.push((v[at.unwrap_or(0) + 1..].to_vec(), Extra::Nested(size)));
            }
            extras.sort_by(|a, b| a.0.cmp(&b.0));
            let (got, _) = rebuild.tree(Some(&tree), b"", &extras)?;
            if let Some(why) = rebuild.refused.take() {
                return Err(bad(&why).into());
            }
            if got != want {
                return Err(bad(&format!(
                    "its files do not rebuild the snapshot {} it names (was it rewritten?)",
                    want.to_hex()
                ))
                .into());
            }
        }
        let number = |key: &str| m.number(key).map_err(|e| bad(&e));
        match m.get("Retrace-Kind").and_then(Kind::of) {
            Some(Kind::Base) => {}
            Some(Kind::Turn) => {
                let n = number("Retrace-Turn")?.ok_or_else(|| bad("no turn number"))?;
                let before = hex("Retrace-Before")?;
                if before.is_some() && before != current {
                    return Err(bad("its before-snapshot is not its parent's files").into());
                }
                let state = match m.get("Retrace-State") {
                    Some(b"complete") => TurnState::Complete,
                    Some(b"conversation_only") => TurnState::ConversationOnly,
                    Some(b"expired") => TurnState::Expired,
                    _ => return Err(bad("its turn state is unknown").into()),
                };
                let prompt = (m.get("Retrace-Prompt") != Some(b"none")).then(|| m.text.clone());
                let reverts = number("Retrace-Reverts")?.map(|r| RevertRecord {
                    version: HISTORY_VERSION,
                    number: n,
                    reverts: r,
                    merged: m
                        .all("Retrace-Merged")
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .collect(),
                });
                turns.push(TurnImage {
                    record: TurnRecord {
                        version: HISTORY_VERSION,
                        number: n,
                        parent: number("Retrace-Parent")?,
                        anchor: None,
                        leaf: None,
                        rounds: Vec::new(),
                        prompt,
                        began_ms: number("Retrace-Began")?.unwrap_or(0),
                        ended_ms: number("Retrace-Ended")?,
                        before,
                        after: snapshot,
                        state,
                        reason: m.text_of("Retrace-Reason"),
                        counts: Counts::default(),
                    },
                    reverts,
                    steps: Vec::new(),
                });
            }
            Some(Kind::Checkpoint) => {
                checkpoints.push(CheckpointRecord {
                    version: HISTORY_VERSION,
                    number: number("Retrace-Checkpoint")?
                        .ok_or_else(|| bad("no checkpoint number"))?,
                    label: m.text_of("Retrace-Label"),
                    snapshot: snapshot.ok_or_else(|| bad("no snapshot"))?,
                    cursor: number("Retrace-Cursor")?,
                    time_ms: number("Retrace-Time")?.unwrap_or(0),
                });
            }
            None => return Err(bad("its kind is unknown").into()),
        }
        if snapshot.is_some() {
            current = snapshot;
        }
    }
    drop(rebuild);
    sink.finish()?;
    let reader = wc.store().reader()?;
    for t in &mut turns {
        if let (Some(b), Some(a)) = (t.record.before, t.record.after) {
            t.record.counts = Counts::of(&crate::diff::changes(&reader, &b, &a)?);
        }
    }
    drop(reader);
    turns.sort_by_key(|t| t.record.number);
    checkpoints.sort_by_key(|c| c.number);
    let image = SessionImage {
        name: name.unwrap_or_default(),
        agent,
        created_ms: turns.first().map_or(0, |t| t.record.began_ms),
        // The cursor where the session was is not exported: its newest turn is applied.
        cursor: turns.last().map(|t| t.record.number),
        redo: Vec::new(),
        turns,
        checkpoints,
    };
    image::install(wc, image, as_name)
}
