//! A capture that looks only where a watcher points it: the directories it names are
//! listed again (and those it names as subtrees walked whole), every other directory is as
//! the last capture recorded it, so its tree is taken from the store as it is.
//!
//! The last capture's head (the stat cache's header, or the head a capture like this one
//! wrote beside it) names the snapshot the watcher's changes start from. Its trees give the
//! listed directories' old entries and the ancestors' other entries; the stat cache (mapped
//! without its trailer checked) spares reading a file whose `lstat` data it holds, but only
//! when the id it holds is the one the snapshot's tree has for that name: a damaged record
//! costs a read, never a wrong id. New trees are built for the listed directories and their
//! ancestors alone; the turn's counts come from comparing trees. The cache's records are
//! not rewritten: a head written beside it ([`StatCache::write_watched`]) says what the
//! disk now is, and the next walk rewrites the cache.
//!
//! Whenever anything is unusual (a path left out, a nested repository, a file with several
//! links, a listing that cannot be reused, a changed `.gitignore`, a directory the watcher
//! did not name appearing or vanishing), this capture gives up and the caller walks.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;

use super::{
    Capture, CaptureContext, CaptureError, CaptureOptions, Captured, FlatEntry, Hasher, Looked,
    Parent, Reuse, TreeBuilder, kind_of,
};
use crate::object::{EntryKind, ObjectId, ObjectKind, PendingObject, RelPath, Tree};
use crate::scan::{self, ScanKind};
use crate::statcache::{Head, StatCache};
use crate::store::StoreReader;
use crate::watch::{Changes, Token};

/// More directories than this named by the watcher: the capture walks (each costs a
/// listing here, and the walk's cost no longer dwarfs theirs).
const MAX_DIRS: usize = 2048;

/// Says why this capture gives up (with `RETRACE_TRACE=1`): the caller walks.
fn declined(why: &str) -> Option<Capture> {
    crate::trace::note(&format!("capture: the watched capture walks: {why}"));
    None
}

/// The ancestors of `rel` (not itself), nearest last: `b""` (the root) first.
fn ancestors(rel: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::once(&rel[..0]).chain(
        rel.iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(move |(i, _)| &rel[..i]),
    )
}

/// Whether `rel` lies strictly below a directory of `dirs`.
fn below(rel: &[u8], dirs: &HashSet<Vec<u8>>) -> bool {
    !rel.is_empty() && ancestors(rel).any(|a| dirs.contains(a))
}

fn parent_and_name(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&rel[..0], rel),
    }
}

/// The trees of the last snapshot by directory path, read as needed.
struct OldTrees<'a> {
    reader: &'a StoreReader,
    root: ObjectId,
    trees: HashMap<Vec<u8>, Option<Tree>>,
}

impl OldTrees<'_> {
    /// The tree of directory `rel` in the last snapshot (`None`: not a directory there).
    fn get(&mut self, rel: &[u8]) -> Result<Option<&Tree>, CaptureError> {
        if !self.trees.contains_key(rel) {
            let (parent, name) = parent_and_name(rel);
            let id = if rel.is_empty() {
                Some(self.root)
            } else {
                self.get(parent)?
                    .and_then(|t| t.entry(name))
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id)
            };
            let tree = id.map(|id| self.reader.read_tree(&id)).transpose()?;
            self.trees.insert(rel.to_vec(), tree);
        }
        Ok(self.trees.get(rel).and_then(Option::as_ref))
    }
}

/// Captures by looking only at what `changes` names, from the snapshot of `head` (which the
/// watcher's token `since` belongs to); `None` when this capture cannot be sure and the
/// caller must walk. `token` is the watcher's new token, recorded with the result.
#[allow(clippy::too_many_arguments)]
pub(super) fn capture(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
    reader: &StoreReader,
    store_id: &[u8; 16],
    head: &Head,
    changes: &Changes,
    token: Token,
    started_ns: i64,
) -> Result<Option<Capture>, CaptureError> {
    let mut phases = crate::trace::Phases::new("changed");
    if !head.quiet {
        return Ok(declined("the last capture was not quiet"));
    }
    if opts.list {
        return Ok(declined("the caller wants every path"));
    }
    if changes.subtree.contains(&b""[..]) || changes.dirty.len() + changes.subtree.len() > MAX_DIRS
    {
        return Ok(declined("too many directories changed"));
    }
    let rules = scan::rules(
        ctx.root,
        ctx.store_dir,
        ctx.nested_repos,
        ctx.rules_settings,
    );
    if rules != head.rules || !reader.contains(&head.root)? {
        return Ok(declined("the rules changed"));
    }
    let Some(cache) = StatCache::load_unverified(ctx.statcache, store_id, head) else {
        return Ok(declined("the stat cache changed meanwhile"));
    };
    phases.mark("rules and cache");
    // Subtrees inside other subtrees are walked with them; listed directories inside a
    // subtree too.
    let mut whole: HashSet<Vec<u8>> = changes
        .subtree
        .iter()
        .filter(|d| !below(d, &changes.subtree))
        .cloned()
        .collect();
    let mut listed: HashSet<Vec<u8>> = changes
        .dirty
        .iter()
        .filter(|d| !whole.contains(*d) && !below(d, &whole))
        .cloned()
        .collect();
    let (dirs, walked): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (
        listed.iter().cloned().collect(),
        whole.iter().cloned().collect(),
    );
    let (found, inside, beyond) = scan::scan_some(
        ctx.root,
        ctx.store_dir,
        ctx.allow_secrets,
        ctx.nested_repos,
        &dirs,
        &walked,
        rules,
    );
    // Ignored directories are watched too: what changed in them is in no snapshot.
    for d in &beyond {
        listed.remove(d);
        whole.remove(d);
    }
    // Directories whose trees are rebuilt: the named ones and every ancestor.
    // The root is always rebuilt (from its old entries, when nothing named is reached).
    let mut rebuilt: HashSet<Vec<u8>> = HashSet::from([Vec::new()]);
    for d in whole.iter().chain(&listed) {
        rebuilt.insert(d.clone());
        rebuilt.extend(ancestors(d).map(<[u8]>::to_vec));
    }
    phases.mark("listing");
    let unusual = !found.skipped.is_empty()
        || !found.secrets.is_empty()
        || !found.repos.is_empty()
        || found.entries.iter().any(|e| {
            e.linked || e.kind == ScanKind::NestedRepo || (e.kind == ScanKind::Dir && !e.listing)
        });
    if unusual {
        return Ok(declined(
            "a path is left out, a nested repository, a linked file or a listing that cannot be reused",
        ));
    }
    // Directories there now among those this capture looked at or into.
    let present: HashSet<&[u8]> = found
        .entries
        .iter()
        .filter(|e| e.kind == ScanKind::Dir)
        .map(|e| e.path.as_slice())
        .chain(inside.iter().map(Vec::as_slice))
        .collect();
    let mut old = OldTrees {
        reader,
        root: head.root,
        trees: HashMap::new(),
    };
    let mut rows: Vec<FlatEntry> = Vec::new();
    // The ancestors' other entries, from the last snapshot: the watcher saw no change in
    // them, so every directory they hold is still there. (One whose own parent was listed
    // and no longer holds it adds rows no tree takes.)
    let mut spine: Vec<&Vec<u8>> = rebuilt.iter().filter(|d| !listed.contains(*d)).collect();
    spine.retain(|d| !whole.contains(*d));
    for a in spine {
        let Some(tree) = old.get(a)? else {
            return Ok(declined("an ancestor the last snapshot lacks"));
        };
        for e in &tree.entries {
            let path = RelPath::from(a.as_slice()).join(&e.name);
            let again = e.kind == EntryKind::Dir && rebuilt.contains(path.as_bytes());
            rows.push(FlatEntry {
                path,
                kind: e.kind,
                id: if again { ObjectId::ZERO } else { e.id },
                size: e.size,
            });
        }
    }
    // A named directory under an ancestor that was not listed is one the last snapshot
    // had (else the watcher would have named the ancestor, whose entries changed).
    for d in whole.iter().chain(&listed) {
        let (parent, name) = parent_and_name(d);
        if d.is_empty() || listed.contains(parent) {
            continue;
        }
        let held = old
            .get(parent)?
            .and_then(|t| t.entry(name))
            .is_some_and(|e| e.kind == EntryKind::Dir);
        if !held || !present.contains(d.as_slice()) {
            return Ok(declined("a named directory its parent did not hold"));
        }
    }
    // The directories inside listed ones: rebuilt, or as the last snapshot had them.
    for d in &inside {
        if rebuilt.contains(d) {
            rows.push(FlatEntry {
                path: RelPath::from(d.as_slice()),
                kind: EntryKind::Dir,
                id: ObjectId::ZERO,
                size: 0,
            });
            continue;
        }
        let (parent, name) = parent_and_name(d);
        let was = old.get(parent)?.and_then(|t| t.entry(name).cloned());
        match was {
            Some(e) if e.kind == EntryKind::Dir => rows.push(FlatEntry {
                path: RelPath::from(d.as_slice()),
                kind: EntryKind::Dir,
                id: e.id,
                size: e.size,
            }),
            // New, or not a directory before: the watcher would have named it.
            _ => return Ok(declined("a directory the watcher did not name")),
        }
    }
    // What the files were: the last snapshot's entry for each, to check the cache against
    // and to store a new version as a delta of.
    let mut was: Vec<Option<(EntryKind, ObjectId)>> = Vec::with_capacity(found.entries.len());
    for e in &found.entries {
        let (parent, name) = parent_and_name(&e.path);
        let before = old
            .get(parent)?
            .and_then(|t| t.entry(name))
            .map(|t| (t.kind, t.id));
        // A listed directory's own `.gitignore` decides what is ignored below it: a new,
        // changed or vanished one means walking.
        if name == b".gitignore" && e.kind == ScanKind::File && listed.contains(parent) {
            let cached = cache.lookup(e).map(|(id, _)| id);
            if before.is_none() || cached.is_none() || cached != before.map(|b| b.1) {
                return Ok(declined("a .gitignore changed"));
            }
        }
        was.push(before);
    }
    for d in &listed {
        let (gi, had) = (
            crate::object::RelPath::from(d.as_slice()).join(b".gitignore"),
            old.get(d)?
                .is_some_and(|t| t.entry(b".gitignore").is_some()),
        );
        let has = found
            .entries
            .binary_search_by(|e| e.path.as_slice().cmp(gi.as_bytes()))
            .is_ok();
        if had != has {
            return Ok(declined("a .gitignore came or went"));
        }
    }
    phases.mark("old trees");
    let hasher = Hasher::new(ctx, reader, opts.store_objects)?;
    let hashed = std::sync::atomic::AtomicU64::new(0);
    let gone = std::sync::atomic::AtomicBool::new(false);
    let looked: Vec<Option<(ObjectId, u64)>> = found
        .entries
        .par_iter()
        .zip(&was)
        .map_init(Parent::default, |parent, (e, was)| {
            if e.kind == ScanKind::Dir {
                return None;
            }
            let old_id = was.and_then(|(k, id)| k.is_content().then_some(id));
            // A record is taken only with the id the snapshot has for the name.
            let hit = cache.lookup(e).filter(|(id, _)| Some(*id) == old_id);
            let Looked::Done {
                id,
                size,
                hashed: h,
                ..
            } = hasher.look(e, hit, old_id, parent)
            else {
                gone.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            };
            if h {
                hashed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Some((id, size))
        })
        .collect();
    phases.mark("read");
    if let Some(e) = hasher.failed() {
        return Err(e.into());
    }
    // Gone, unreadable, changing or a secret by content since the walk: walk.
    if gone.into_inner() {
        return Ok(declined("a path changed while it was read"));
    }
    for (e, got) in found.entries.iter().zip(looked) {
        // A named directory's own entry: its parent's entries hold it already.
        if e.kind == ScanKind::Dir && (listed.contains(&e.path) || whole.contains(&e.path)) {
            continue;
        }
        rows.push(FlatEntry {
            path: RelPath::from(e.path.as_slice()),
            kind: kind_of(e),
            id: got.map_or(ObjectId::ZERO, |g| g.0),
            size: got.map_or(0, |g| g.1),
        });
    }
    rows.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
    if rows.windows(2).any(|w| w[0].path == w[1].path) {
        return Ok(declined("two entries for one path"));
    }
    let none = HashSet::new();
    let built: std::sync::Mutex<HashMap<ObjectId, Vec<u8>>> = std::sync::Mutex::new(HashMap::new());
    let store_trees = opts.store_objects;
    let root = TreeBuilder {
        entries: &rows[..],
        reuse: Reuse::Except(&none),
    }
    .root(&|id, bytes| {
        if store_trees && !hasher.known(&id) {
            hasher.queue(vec![PendingObject::whole(
                id,
                ObjectKind::Tree,
                bytes.len() as u64,
                bytes.clone(),
            )]);
        }
        built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, bytes);
    });
    let Some((root, _)) = root else {
        return Ok(declined("a tree could not be built"));
    };
    if let Some(e) = hasher.failed() {
        return Err(e.into());
    }
    phases.mark("trees");
    let built = built
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let seen = Captured::Trees(&built);
    let d = seen.diff_from(reader, &head.root, &root)?;
    let files = (head.files + d.added.len() as u64).saturating_sub(d.deleted.len() as u64);
    let bytes = built
        .get(&root)
        .and_then(|b| Tree::decode(b).ok())
        .map_or(0, |t| t.entries.iter().map(|e| e.size).sum());
    phases.mark("diff");
    let mut capture = Capture {
        id: root,
        files,
        bytes,
        hashed: hashed.into_inner(),
        listed: (listed.len() + whole.len()) as u64,
        focused: true,
        ..Capture::default()
    };
    if opts.store_objects {
        super::commit(ctx, opts, hasher, &seen, &mut capture)?;
        phases.mark("commit");
        let header = crate::statcache::Header {
            store_id,
            root: &root,
            written_ns: started_ns,
            rules: &rules,
            token: Some(token),
            files,
            bytes,
            quiet: true,
        };
        // Disposable like the cache: without it the next capture walks.
        let _ = StatCache::write_watched(ctx.statcache, head, &header);
        phases.mark("head");
    }
    Ok(Some(capture))
}
