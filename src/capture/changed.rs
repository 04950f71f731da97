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
//! Nested repositories left alone (`nested_repos = "skip"`) are entries like files: what
//! happens inside one is in no snapshot, so the directories named inside one of the last
//! snapshot's are not looked at. One stays a repository while its own directory has no
//! event (a `.git` created, removed or renamed is an entry changing there); a named one is
//! listed to see it still is. The set of repositories never changes here: a directory that
//! becomes one, one that stops being one, goes, moves or comes in a new subtree makes the
//! capture walk, so the stat cache's records of them name the new snapshot's too.
//!
//! Whenever anything else is unusual (a path left out, a file with several links, a listing
//! that cannot be reused, a changed `.gitignore`, a directory the watcher did not name
//! appearing or vanishing), this capture gives up and the caller walks.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rayon::prelude::*;
use rustix::fs::{AtFlags, FileType};

use super::hash::{Hasher, Looked, Parent};
use super::tree::{Reuse, TreeBuilder, kind_of};
use super::write::commit;
use super::{Capture, CaptureContext, CaptureOptions, Captured};
use crate::error::CaptureError;
use crate::object::{EntryKind, FlatEntry, ObjectId, ObjectKind, PendingObject, RelPath, Tree};
use crate::scan::beneath::Root;
use crate::scan::{self, ScanEntry, ScanKind};
use crate::statcache::{Head, Stat, StatCache};
use crate::store::StoreReader;
use crate::watch::{Changes, Token};

/// More directories than this named by the watcher: the capture walks (each costs a
/// listing here, and the walk's cost no longer dwarfs theirs).
const MAX_DIRS: usize = 2048;

/// Entries looked at per parallel job, each merged with the stat cache from its first path.
const BLOCK: usize = 512;

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

    /// The tree of `rel` when [`OldTrees::get`] read it already.
    fn peek(&self, rel: &[u8]) -> Option<&Tree> {
        self.trees.get(rel).and_then(Option::as_ref)
    }
}

/// The kind of the entry at `rel` (not the root) in the snapshot whose root tree is `root`:
/// its trees are those this capture built (`built`) or the store's, each decoded once into
/// `trees`. `None` where the snapshot has nothing.
fn kind_at(
    reader: &StoreReader,
    built: &HashMap<ObjectId, Vec<u8>>,
    trees: &mut HashMap<ObjectId, Tree>,
    root: ObjectId,
    rel: &[u8],
) -> Result<Option<EntryKind>, CaptureError> {
    let mut id = root;
    let mut names = rel.split(|&b| b == b'/').peekable();
    while let Some(name) = names.next() {
        let tree = match trees.entry(id) {
            std::collections::hash_map::Entry::Occupied(t) => t.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(match built.get(&id) {
                Some(bytes) => Tree::decode(bytes).map_err(|e| {
                    CaptureError::from(crate::error::StoreError::Corrupt {
                        path: reader.path().into(),
                        id,
                        detail: format!("a tree this capture built does not decode: {e}"),
                    })
                })?,
                None => reader.read_tree(&id)?,
            }),
        };
        let Some(e) = tree.entry(name) else {
            return Ok(None);
        };
        if names.peek().is_none() {
            return Ok(Some(e.kind));
        }
        if e.kind != EntryKind::Dir {
            return Ok(None);
        }
        id = e.id;
    }
    Ok(None)
}

/// The nested repositories of the snapshot whose root tree is `root`, as the stat cache's
/// records name them, each checked to be one in that snapshot; `None` when one is not (or
/// the cache names none, or a record is malformed): the caller walks. Exact when the
/// snapshot has no repository the records lack, which holds because no capture but a walk
/// (which rewrites the records) lets one come.
fn repos_in(
    cache: &StatCache,
    reader: &StoreReader,
    built: &HashMap<ObjectId, Vec<u8>>,
    root: ObjectId,
) -> Result<Option<Vec<String>>, CaptureError> {
    let Some(paths) = cache.nested_repos().filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let mut trees = HashMap::new();
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        if p.is_empty()
            || kind_at(reader, built, &mut trees, root, p)? != Some(EntryKind::NestedRepo)
        {
            return Ok(None);
        }
        out.push(crate::object::show_path(p));
    }
    Ok(Some(out))
}

/// The nested repositories of the snapshot `head` names (quiet, with nested repositories),
/// for a capture that records it again: see [`repos_in`].
pub(super) fn nested_repos(
    ctx: &CaptureContext<'_>,
    reader: &StoreReader,
    store_id: &[u8; 16],
    head: &Head,
) -> Result<Option<Vec<String>>, CaptureError> {
    let Some(cache) = StatCache::load_unverified(ctx.statcache, store_id, head) else {
        return Ok(None);
    };
    repos_in(&cache, reader, &HashMap::new(), head.root)
}

/// Whether `rel` lies strictly inside a nested repository of the last snapshot.
fn inside_repo(old: &mut OldTrees<'_>, rel: &[u8]) -> Result<bool, CaptureError> {
    for a in ancestors(rel).skip(1) {
        let (parent, name) = parent_and_name(a);
        match old.get(parent)?.and_then(|t| t.entry(name)).map(|e| e.kind) {
            Some(EntryKind::NestedRepo) => return Ok(true),
            Some(EntryKind::Dir) => {}
            _ => return Ok(false),
        }
    }
    Ok(false)
}

/// `lstat` data as the walk records them.
fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let ns = |s: i64, n: u64| {
        s.saturating_mul(1_000_000_000)
            .saturating_add(n.cast_signed())
    };
    Stat {
        mode: st.st_mode,
        size: st.st_size.cast_unsigned(),
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        ino: st.st_ino,
        linked: st.st_nlink > 1 && FileType::from_raw_mode(st.st_mode) != FileType::Directory,
    }
}

/// The same `lstat` data, as a walk compares them to trust a listing or an ignore file.
fn same(a: &Stat, b: &Stat, with_size: bool) -> bool {
    a.mode == b.mode
        && a.mtime_ns == b.mtime_ns
        && a.ctime_ns == b.ctime_ns
        && a.ino == b.ino
        && (!with_size || a.size == b.size)
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        p.extend_from_slice(rel);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A listed directory whose names the stat cache still holds: its files and symlinks now
/// (sorted), and the directories inside it.
struct Relisted {
    entries: Vec<ScanEntry>,
    dirs: Vec<Vec<u8>>,
}

/// Whether the `.gitignore` of the directory `dir` is what the cache recorded (or absent
/// from both): its rules are those the cache's listings were made with.
fn gitignore_same(root: &Root, cache: &StatCache, dir: &[u8]) -> bool {
    let gi = join(dir, b".gitignore");
    match (cache.get(&gi), root.open_at(&gi, crate::platform::PATH_ONLY)) {
        (None, Err(e)) => e == rustix::io::Errno::NOENT,
        (Some(c), Ok(fd)) => rustix::fs::fstat(fd).is_ok_and(|st| {
            let now = stat_of(&st);
            c.kind == ScanKind::File && same(&c.stat, &now, true) && cache.settled(&now)
        }),
        _ => false,
    }
}

/// The entries of the directory `rel` from the stat cache's records, as a walk reuses a
/// listing ("Reused listings" in `docs/architecture.md`): the directory's `lstat` data are
/// those recorded, settled, so it holds the same names (creating, deleting or renaming an
/// entry changes its mtime and ctime), and the rules are those it was listed with (the
/// caller checked the rules key; here no `.gitignore` from the root down changed). Each
/// name is `lstat`ed relative to the directory, both cores at once. `None` when the
/// directory must be listed: anything a walk would not reuse, a name gone or of another
/// kind, a file with several links.
fn relist(root: &Root, root_dev: u64, cache: &StatCache, rel: &[u8]) -> Option<Relisted> {
    // A walk lists the root every time; so does this capture.
    if rel.is_empty() {
        return None;
    }
    let rec = cache.get(rel)?;
    if rec.kind != ScanKind::Dir || !rec.listing || !cache.settled(&rec.stat) {
        return None;
    }
    let fd = root.dir(rel).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    // A mount inside the workspace may not keep directory mtimes as the root's does.
    if st.st_dev != root_dev || !same(&rec.stat, &stat_of(&st), false) {
        return None;
    }
    if !ancestors(rel).all(|a| gitignore_same(root, cache, a)) {
        return None;
    }
    let mut prefix = rel.to_vec();
    prefix.push(b'/');
    let kids = cache.child_indices(&prefix)?;
    let looked: Option<Vec<(Vec<u8>, Option<ScanEntry>)>> = kids
        .par_iter()
        .with_min_len(256)
        .map(|&i| {
            let c = cache.at(i)?;
            let name = &c.path[prefix.len()..];
            let now = rustix::fs::statat(&fd, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|s| stat_of(&s))?;
            let kind = match FileType::from_raw_mode(now.mode) {
                FileType::RegularFile => ScanKind::File,
                FileType::Symlink => ScanKind::Symlink,
                FileType::Directory => ScanKind::Dir,
                _ => return None,
            };
            // A nested repository left alone is a directory on disk: its entry is the last
            // snapshot's while its own directory has no event.
            let same_kind =
                kind == c.kind || (kind, c.kind) == (ScanKind::Dir, ScanKind::NestedRepo);
            if !same_kind || now.linked {
                return None;
            }
            if name == b".gitignore"
                && !(kind == ScanKind::File && same(&c.stat, &now, true) && cache.settled(&now))
            {
                return None;
            }
            let path = c.path.to_vec();
            if kind == ScanKind::Dir {
                return Some((path, None));
            }
            Some((
                Vec::new(),
                Some(ScanEntry {
                    path,
                    kind,
                    size: now.size,
                    mtime_ns: now.mtime_ns,
                    ctime_ns: now.ctime_ns,
                    ino: now.ino,
                    mode: now.mode,
                    listing: false,
                    clean: false,
                    linked: false,
                }),
            ))
        })
        .collect();
    let mut out = Relisted {
        entries: Vec::with_capacity(kids.len()),
        dirs: Vec::new(),
    };
    for (dir, e) in looked? {
        match e {
            Some(e) => out.entries.push(e),
            None => out.dirs.push(dir),
        }
    }
    Some(out)
}

/// What the count of files after a changed-only capture compares trees with: the last
/// snapshot's trees, read where their ids differ.
struct Counting<'a, 'r> {
    old: &'a mut OldTrees<'r>,
    reader: &'r StoreReader,
    built: &'a HashMap<ObjectId, Vec<u8>>,
    /// Relisted directories without a directory inside: the same names of the same kinds
    /// as in the last snapshot, so the same count of files.
    same_names: &'a HashSet<Vec<u8>>,
}

impl Counting<'_, '_> {
    /// The tree `id` of the new snapshot: built by this capture, or already stored.
    fn new_tree(&self, id: &ObjectId) -> Result<Tree, CaptureError> {
        match self.built.get(id) {
            Some(bytes) => Tree::decode(bytes).map_err(|e| {
                CaptureError::from(crate::error::StoreError::Corrupt {
                    path: self.reader.path().into(),
                    id: *id,
                    detail: format!("a tree this capture built does not decode: {e}"),
                })
            }),
            None => Ok(self.reader.read_tree(id)?),
        }
    }

    /// Files and symlinks the new snapshot's directory `path` (tree `now`) holds beyond
    /// what the last snapshot's (`was`, read through [`OldTrees`] by path) held, with
    /// everything below; `None` on a side where it is not a directory. Only subtrees whose
    /// ids differ are read, and no list of paths is built.
    fn delta(
        &mut self,
        path: &mut Vec<u8>,
        was: Option<ObjectId>,
        now: Option<ObjectId>,
    ) -> Result<i64, CaptureError> {
        if was == now {
            return Ok(0);
        }
        if was.is_some() && now.is_some() && self.same_names.contains(path.as_slice()) {
            return Ok(0);
        }
        // Files count by kind alone; directories are paired by name and compared in turn.
        let split = |t: &Tree| {
            let files = t.entries.iter().filter(|e| e.kind.is_content()).count();
            let dirs: Vec<(Vec<u8>, ObjectId)> = t
                .entries
                .iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| (e.name.clone(), e.id))
                .collect();
            (files, dirs)
        };
        let (new_files, new_dirs) = match now {
            Some(id) => split(&self.new_tree(&id)?),
            None => (0, Vec::new()),
        };
        let (old_files, old_dirs) = match was {
            // Read by path, so the trees read for the listing are not read again.
            Some(_) => self.old.get(path)?.map(split).unwrap_or_default(),
            None => (0, Vec::new()),
        };
        let mut delta = i64::try_from(new_files).unwrap_or(i64::MAX)
            - i64::try_from(old_files).unwrap_or(i64::MAX);
        let len = path.len();
        let (mut i, mut j) = (0, 0);
        while i < old_dirs.len() || j < new_dirs.len() {
            let order = match (old_dirs.get(i), new_dirs.get(j)) {
                (Some(o), Some(n)) => o.0.cmp(&n.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let o = (order != std::cmp::Ordering::Greater).then(|| &old_dirs[i]);
            let n = (order != std::cmp::Ordering::Less).then(|| &new_dirs[j]);
            i += usize::from(o.is_some());
            j += usize::from(n.is_some());
            let Some(name) = o.or(n).map(|d| &d.0) else {
                break;
            };
            if len > 0 {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            delta += self.delta(path, o.map(|d| d.1), n.map(|d| d.1))?;
            path.truncate(len);
        }
        Ok(delta)
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
    if changes.subtree.contains(&b""[..]) {
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
    let mut old = OldTrees {
        reader,
        root: head.root,
        trees: HashMap::new(),
    };
    // Directories inside a nested repository of the last snapshot hold nothing it captures:
    // left out. The repository is still one unless its own directory is named (then it is
    // listed, below) or something above it is (then it is seen there).
    let outside;
    let (dirty, subtree) = if head.nested {
        let mut keep = |set: &HashSet<Vec<u8>>| -> Result<HashSet<Vec<u8>>, CaptureError> {
            let mut kept = HashSet::with_capacity(set.len());
            for d in set {
                if !inside_repo(&mut old, d)? {
                    kept.insert(d.clone());
                }
            }
            Ok(kept)
        };
        outside = (keep(&changes.dirty)?, keep(&changes.subtree)?);
        (&outside.0, &outside.1)
    } else {
        (&changes.dirty, &changes.subtree)
    };
    if dirty.len() + subtree.len() > MAX_DIRS {
        return Ok(declined("too many directories changed"));
    }
    phases.mark("rules and cache");
    // Subtrees inside other subtrees are walked with them; listed directories inside a
    // subtree too.
    let mut whole: HashSet<Vec<u8>> = subtree
        .iter()
        .filter(|d| !below(d, subtree))
        .cloned()
        .collect();
    let mut listed: HashSet<Vec<u8>> = dirty
        .iter()
        .filter(|d| !whole.contains(*d) && !below(d, &whole))
        .cloned()
        .collect();
    // A listed directory whose names the cache still holds is not listed: its files are
    // `lstat`ed by the names of its records, as a walk reuses a listing.
    let beneath = Root::open(ctx.root).ok();
    let root_dev = rustix::fs::stat(ctx.root).ok().map(|s| s.st_dev);
    let relisting = cache.rules() == rules && scan::trusts_directory_mtimes(ctx.root);
    let mut relisted: Vec<(Vec<u8>, Relisted)> = Vec::new();
    let mut dirs: Vec<Vec<u8>> = Vec::new();
    for d in &listed {
        let again = match (&beneath, root_dev) {
            (Some(root), Some(dev)) if relisting => relist(root, dev, &cache, d),
            _ => None,
        };
        match again {
            Some(r) => relisted.push((d.clone(), r)),
            None => dirs.push(d.clone()),
        }
    }
    let walked: Vec<Vec<u8>> = whole.iter().cloned().collect();
    let (mut found, mut inside, beyond) = scan::scan_some(
        ctx.root,
        ctx.store_dir,
        ctx.allow_secrets,
        ctx.nested_repos,
        &dirs,
        &walked,
        rules,
    );
    // Relisted directories and what they hold: no entry of their own (their parents' entries
    // or trees hold them), and the directories inside them as the listed ones'.
    let relisted_dirs: HashSet<Vec<u8>> = relisted.iter().map(|r| r.0.clone()).collect();
    let same_names: HashSet<Vec<u8>> = relisted
        .iter()
        .filter(|r| r.1.dirs.is_empty())
        .map(|r| r.0.clone())
        .collect();
    if !relisted.is_empty() {
        for (_, r) in relisted {
            found.entries.extend(r.entries);
            inside.extend(r.dirs);
        }
        found
            .entries
            .par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
        inside.sort_unstable();
    }
    // Ignored directories are watched too: what changed in them is in no snapshot.
    for d in &beyond {
        listed.remove(d);
        whole.remove(d);
    }
    // A listed directory that is a nested repository, as it was in the last snapshot: its
    // entry there stands (its parent's tree, or its parent's listing, holds it). Any other
    // (a directory that became one, one in a subtree walked whole) is a repository the
    // cache's records do not name: walk.
    let mut repos: HashSet<Vec<u8>> = HashSet::new();
    for e in found
        .entries
        .iter()
        .filter(|e| e.kind == ScanKind::NestedRepo)
    {
        let (parent, name) = parent_and_name(&e.path);
        let was = old.get(parent)?.and_then(|t| t.entry(name)).map(|e| e.kind);
        if !head.nested || !listed.contains(&e.path) || was != Some(EntryKind::NestedRepo) {
            return Ok(declined("a nested repository came or moved"));
        }
        repos.insert(e.path.clone());
    }
    if !repos.is_empty() {
        found.entries.retain(|e| e.kind != ScanKind::NestedRepo);
        listed.retain(|d| !repos.contains(d));
    }
    // Directories whose trees are rebuilt: the named ones and every ancestor.
    // The root is always rebuilt (from its old entries, when nothing named is reached).
    let mut rebuilt: HashSet<Vec<u8>> = HashSet::from([Vec::new()]);
    for d in whole.iter().chain(&listed) {
        rebuilt.insert(d.clone());
        rebuilt.extend(ancestors(d).map(<[u8]>::to_vec));
    }
    phases.mark(&format!(
        "listing ({} directories relisted from the cache)",
        relisted_dirs.len()
    ));
    let unusual = !found.skipped.is_empty()
        || !found.secrets.is_empty()
        || !found.repos.is_empty()
        || found
            .entries
            .iter()
            .any(|e| e.linked || (e.kind == ScanKind::Dir && !e.listing));
    if unusual {
        return Ok(declined(
            "a path is left out, a repository captured, a linked file or a listing that cannot be reused",
        ));
    }
    // Directories there now among those this capture looked at or into.
    let present: HashSet<&[u8]> = found
        .entries
        .iter()
        .filter(|e| e.kind == ScanKind::Dir)
        .map(|e| e.path.as_slice())
        .chain(inside.iter().map(Vec::as_slice))
        .chain(relisted_dirs.iter().map(Vec::as_slice))
        .collect();
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
            // A nested repository whose own directory had no event (or was listed and
            // still is one): as it was.
            Some(e)
                if e.kind == EntryKind::NestedRepo
                    && (repos.contains(d) || !(dirty.contains(d) || subtree.contains(d))) =>
            {
                rows.push(FlatEntry {
                    path: RelPath::from(d.as_slice()),
                    kind: EntryKind::NestedRepo,
                    id: e.id,
                    size: e.size,
                });
            }
            // New, or not a directory before: the watcher would have named it.
            _ => return Ok(declined("a directory the watcher did not name")),
        }
    }
    // The cache's records are trusted as a walk trusts them once its checksum is checked,
    // which costs a pass over the file: done when this capture looks at enough paths for
    // that pass to be small beside its `lstat`s. Otherwise a record is taken only with the
    // id the last snapshot's tree has for the name, so a damaged record costs a read, never
    // a wrong id.
    let verified = cache.len() / 16 <= found.entries.len() && cache.verify();
    // A relisted directory's tree is read only to check records against (its names, so
    // its count of files, are those of the last snapshot); a listed one's always, to count.
    let wanted = |parent: &[u8]| !verified || !relisted_dirs.contains(parent);
    let mut last: Option<&[u8]> = None;
    for e in &found.entries {
        let (parent, _) = parent_and_name(&e.path);
        if last != Some(parent) {
            last = Some(parent);
            if wanted(parent) {
                old.get(parent)?;
            }
        }
    }
    // What the files were: the last snapshot's entry for each, to check the cache against
    // and to store a new version as a delta of.
    let mut was: Vec<Option<(EntryKind, ObjectId)>> = Vec::with_capacity(found.entries.len());
    let mut last: Option<(&[u8], Option<&Tree>)> = None;
    for e in &found.entries {
        let (parent, name) = parent_and_name(&e.path);
        let tree = match last {
            Some((p, t)) if p == parent => t,
            _ => {
                let t = if wanted(parent) {
                    old.peek(parent)
                } else {
                    None
                };
                last = Some((parent, t));
                t
            }
        };
        let before = tree.and_then(|t| t.entry(name)).map(|t| (t.kind, t.id));
        // A listed directory's own `.gitignore` decides what is ignored below it: a new,
        // changed or vanished one means walking. (A relisted one was checked against its
        // record.)
        if name == b".gitignore"
            && e.kind == ScanKind::File
            && listed.contains(parent)
            && !relisted_dirs.contains(parent)
        {
            let cached = cache.lookup(e).map(|(id, _)| id);
            if before.is_none() || cached.is_none() || cached != before.map(|b| b.1) {
                return Ok(declined("a .gitignore changed"));
            }
        }
        was.push(before);
    }
    for d in listed.iter().filter(|d| !relisted_dirs.contains(*d)) {
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
    // Blocks of entries in path order, each merged with the cache from its first path on.
    let looked: Vec<Option<(ObjectId, u64)>> = found
        .entries
        .par_chunks(BLOCK)
        .zip(was.par_chunks(BLOCK))
        .flat_map_iter(|(block, was)| {
            let mut parent = Parent::default();
            let mut pos = block.first().map_or(0, |e| cache.position(&e.path));
            let looked: Vec<Option<(ObjectId, u64)>> = block
                .iter()
                .zip(was)
                .map(|(e, was)| {
                    if e.kind == ScanKind::Dir {
                        return None;
                    }
                    let old_id = was.and_then(|(k, id)| k.is_content().then_some(id));
                    let record = cache.lookup_at(e, &mut pos);
                    let (hit, base) = if verified {
                        (record, old_id.or_else(|| cache.previous_at(e, pos)))
                    } else {
                        // A record is taken only with the id the snapshot has for the name.
                        (record.filter(|(id, _)| Some(*id) == old_id), old_id)
                    };
                    let Looked::Done {
                        id,
                        size,
                        hashed: h,
                        ..
                    } = hasher.look(e, hit, base, &mut parent)
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
            looked
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
    rows.reserve(found.entries.len());
    for (e, got) in found.entries.into_iter().zip(looked) {
        // A named directory's own entry: its parent's entries hold it already.
        if e.kind == ScanKind::Dir && (listed.contains(&e.path) || whole.contains(&e.path)) {
            continue;
        }
        rows.push(FlatEntry {
            kind: kind_of(&e),
            path: RelPath::from(e.path),
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
    // The count of files from the last snapshot's, by comparing only the trees whose ids
    // differ, and not even those of relisted directories without subdirectories.
    let delta = Counting {
        old: &mut old,
        reader,
        built: &built,
        same_names: &same_names,
    }
    .delta(&mut Vec::new(), Some(head.root), Some(root))?;
    let Some(files) = head.files.checked_add_signed(delta) else {
        return Ok(declined("the count of files does not add up"));
    };
    // Every repository the records name is still one in the new snapshot, and none came
    // (see above): the records name its repositories too.
    let nested_repos = if head.nested {
        match repos_in(&cache, reader, &built, root)? {
            Some(r) => r,
            None => return Ok(declined("a nested repository went")),
        }
    } else {
        Vec::new()
    };
    let seen = Captured::Trees(&built);
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
        listed: (listed.len() - relisted_dirs.len() + whole.len()) as u64,
        reused: relisted_dirs.len() as u64,
        focused: true,
        nested_repos,
        ..Capture::default()
    };
    if opts.store_objects {
        commit(ctx, opts, hasher, &seen, &mut capture)?;
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
            nested: head.nested,
        };
        // Disposable like the cache: without it the next capture walks.
        let _ = StatCache::write_watched(ctx.statcache, head, &header);
        phases.mark("head");
    }
    Ok(Some(capture))
}
