//! The capture itself: the watcher asked first (nothing changed: the last snapshot again;
//! some directories: a capture of those alone), else a walk of the whole workspace merged
//! with the stat cache, what missed read, the trees built and everything committed.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::flat::{flat_list, path_order};
use super::hash::{Hasher, Looked, Parent, now_ns};
use super::tree::{Scanned, TreeBuilder, kind_of};
use super::write::commit;
use super::{
    CacheRewrite, Capture, CaptureContext, CaptureOptions, Captured, DEFER_CACHE_READS, changed,
};
use crate::error::CaptureError;
use crate::object::{FlatEntry, ObjectId, ObjectKind, PendingObject, RelPath};
use crate::progress::Progress;
use crate::scan::{self, ScanEntry, ScanKind, Skipped};
use crate::statcache::{CacheEntry, Stat, StatCache};
use crate::store::{SnapshotRecord, StoreReader};

/// Entries per parallel job when looking paths up: large enough to merge with the cache in
/// long linear runs, small enough to balance files of very different sizes.
const LOOK_BLOCK: usize = 256;

/// One parallel job's place in the merge of the scan with the stat cache: the index it
/// expects next (a job takes a contiguous run), where the cache stands, and the files it
/// looked at since it last reported progress (reported when the job ends too).
struct Merge<'a> {
    next: usize,
    pos: usize,
    files: u64,
    progress: &'a dyn Progress,
    parent: Parent,
}

impl Merge<'_> {
    fn flush(&mut self) {
        self.progress.advance(self.files);
        self.files = 0;
    }
}

impl Drop for Merge<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Why a scanned path is not in the snapshot after all.
enum Fate {
    /// A credential by content.
    Secret,
    /// Unreadable or unstable: the reason.
    Skip(String),
    /// Deleted between the walk and the read.
    Gone,
}

/// Captures the workspace.
pub(crate) fn capture(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
) -> Result<Capture, CaptureError> {
    std::fs::read_dir(ctx.root).map_err(|source| CaptureError::Root {
        path: ctx.root.into(),
        source,
    })?;
    let mut phases = crate::trace::Phases::new("capture");
    // Before the walk: every listing and read this capture records happens after it, which
    // is what the racy margin is measured from.
    let started_ns = now_ns();
    // Damage found by earlier reads is forgotten first, so no object known to be bad is
    // taken as "already stored" (see `store::heal`).
    ctx.store.forget_damaged()?;
    let reader = ctx.store.reader()?;
    let store_id = reader.cache_key()?;
    // The cache names the store (and store state: forgetting objects changes the key) it was
    // written for, after that store committed every id it holds, so its ids are usable
    // whether or not this capture stores anything.
    let head = StatCache::load_head(ctx.statcache, &store_id);
    let since = head
        .and_then(|h| h.token)
        .filter(|_| ctx.watch.is_some_and(|w| !w.rescan));
    let answer = match ctx.watch {
        Some(w) => crate::watch::ask(w.runtime_dir, ctx.root, since, w.timeout),
        None => crate::watch::Answer::Absent {
            reason: "no watcher".into(),
        },
    };
    phases.mark("watcher");
    let vouch = match &answer {
        crate::watch::Answer::Changes { changes, .. } if since.is_some() => Some(changes),
        _ => None,
    };
    if let (Some(changes), Some(head)) = (vouch, head)
        && let Some(done) = unchanged(ctx, opts, &reader, &store_id, &head, changes)?
    {
        phases.mark("unchanged");
        return Ok(done);
    }
    if let (Some(changes), Some(head), Some(token)) = (vouch, head, answer.token())
        && let Some(done) = changed::capture(
            ctx, opts, &reader, &store_id, &head, changes, token, started_ns,
        )?
    {
        phases.mark("changed directories");
        return Ok(done);
    }
    // Recorded with what this capture observes: the watcher's new token, else the old one
    // (older than anything observed now, so still a safe start for the next answer).
    let token = answer.token().or(head.and_then(|h| h.token));
    let cache = StatCache::load(ctx.statcache, &store_id);
    phases.mark("stat cache load");
    // The cache on disk must be the one the token was sent for (another capture may have
    // replaced it since the header was read), and not one a watched capture went past.
    let beside = head.is_some_and(|h| h.beside);
    let vouch = vouch.filter(|_| cache.head().token == since && !beside);
    let scan = scan::scan(
        ctx.root,
        ctx.store_dir,
        ctx.allow_secrets,
        ctx.nested_repos,
        Some(&cache),
        vouch,
        ctx.rules_settings,
    );
    phases.mark("scan");
    let (rules, listed, reused) = (scan.rules, scan.listed, scan.reused);
    // Whether every directory's record (its `lstat` data, its listing flag) is the one the
    // cache holds: with every path a hit, the cache on disk is then exact.
    let dirs_same = scan
        .entries
        .par_iter()
        .filter(|e| matches!(e.kind, ScanKind::Dir | ScanKind::NestedRepo))
        .all(|e| {
            cache.get(&e.path).is_some_and(|c| {
                c.kind == e.kind
                    && c.listing == e.listing
                    && c.stat.mode == e.mode
                    && c.stat.mtime_ns == e.mtime_ns
                    && c.stat.ctime_ns == e.ctime_ns
                    && c.stat.ino == e.ino
            })
        });
    let hasher = Hasher::new(ctx, &reader, opts.store_objects)?;
    let files = scan
        .entries
        .iter()
        .filter(|e| matches!(e.kind, ScanKind::File | ScanKind::Symlink))
        .count();
    opts.progress.start("capture", files as u64);
    // Both lists are sorted: each run of entries a job takes merges with the cache linearly.
    // Each scanned entry gets its id beside it and keeps what the next stat cache records
    // (a file read records its own `fstat`; a directory's size becomes its tree's), in one
    // indexed parallel pass that writes straight into the two lists: no second list of
    // entries while the cache is mapped, no serial pass, no copy while collecting.
    let left_out: Mutex<Vec<(Vec<u8>, Fate)>> = Mutex::new(Vec::new());
    let hashed_count = std::sync::atomic::AtomicU64::new(0);
    let mut scanned = scan.entries;
    let (mut ids, mut hits): (Vec<ObjectId>, Vec<bool>) = scanned
        .par_iter_mut()
        .enumerate()
        .with_min_len(LOOK_BLOCK)
        .map_init(
            || Merge {
                next: usize::MAX,
                pos: 0,
                files: 0,
                progress: opts.progress,
                parent: Parent::default(),
            },
            |m, (i, e)| {
                if i != m.next {
                    m.pos = cache.position(&e.path);
                }
                m.next = i + 1;
                if matches!(e.kind, ScanKind::File | ScanKind::Symlink) {
                    m.files += 1;
                    // Progress is reported per block: a bar's lock per file would cost more
                    // than a hit.
                    if m.files == LOOK_BLOCK as u64 {
                        m.flush();
                    }
                }
                let hit = cache.lookup_at(e, &mut m.pos);
                let previous = hit.is_none().then(|| cache.previous_at(e, m.pos)).flatten();
                match hasher.look(e, hit, previous, &mut m.parent) {
                    Looked::Done {
                        id,
                        size,
                        hit,
                        hashed,
                        fresh,
                    } => {
                        if hashed {
                            hashed_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        if let Some(f) = fresh {
                            (e.mode, e.mtime_ns, e.ctime_ns, e.ino, e.linked) =
                                (f.mode, f.mtime_ns, f.ctime_ns, f.ino, f.linked);
                        }
                        e.size = size;
                        (id, hit)
                    }
                    other => {
                        let fate = match other {
                            Looked::Secret => Fate::Secret,
                            Looked::Skip(reason) => Fate::Skip(reason),
                            _ => Fate::Gone,
                        };
                        left_out
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((e.path.clone(), fate));
                        // A placeholder, removed below (the size marks it).
                        e.size = u64::MAX;
                        (ObjectId::ZERO, false)
                    }
                }
            },
        )
        .unzip();
    opts.progress.finish();
    phases.mark("stat cache + read");
    if let Some(e) = hasher.error.lock().ok().and_then(|mut s| s.take()) {
        return Err(e.into());
    }
    let (omitted, omitted_bytes) = (scan.omitted, scan.omitted_bytes);
    let mut skipped = scan.skipped;
    let mut secrets = scan.secrets;
    let captured_repos = scan.repos;
    let left_out = left_out
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !left_out.is_empty() {
        let gone: HashSet<&[u8]> = left_out.iter().map(|(p, _)| p.as_slice()).collect();
        let keep: Vec<bool> = scanned
            .iter()
            .map(|e| !(e.size == u64::MAX && gone.contains(e.path.as_slice())))
            .collect();
        let mut k = keep.iter();
        scanned.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        ids.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        hits.retain(|_| *k.next().unwrap_or(&true));
    }
    // The walk vouched for these directories' listings, but capture left a path of theirs
    // out: the next walk must list them again and look at that path afresh (a key file
    // rewritten, a file that was changing, one that becomes readable), since a reused
    // listing only looks at the paths the cache holds.
    let any_left_out = !left_out.is_empty();
    for (path, _) in &left_out {
        let parent = path.iter().rposition(|&b| b == b'/').map(|i| &path[..i]);
        if let Some(parent) = parent
            && let Ok(i) = scanned.binary_search_by(|e| e.path.as_slice().cmp(parent))
        {
            scanned[i].listing = false;
        }
    }
    for (path, fate) in left_out {
        match fate {
            Fate::Secret => secrets.push(crate::object::show_path(&path)),
            Fate::Skip(reason) => skipped.push(Skipped {
                path: crate::object::show_path(&path),
                reason,
            }),
            Fate::Gone => {}
        }
    }
    let nested_repos: Vec<String> = scanned
        .iter()
        .filter(|e| e.kind == ScanKind::NestedRepo)
        .map(|e| crate::object::show_path(&e.path))
        .collect();
    let hashed = hashed_count.into_inner();
    let stat_cache_lost = || CaptureError::StatCache {
        path: ctx.statcache.into(),
    };
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    secrets.sort();
    // Trees are stored whole, never as deltas: a damaged tree would make every tree whose
    // chain runs through it unreadable, and with it every file of those snapshots (a
    // hostile review lost 8 snapshots to one flipped byte). Damage to a tree costs one
    // snapshot, as before deltas.
    let rows = Scanned {
        entries: &scanned,
        ids: &ids,
    };
    let store_trees = opts.store_objects;
    // The trees this capture builds, by id, for the commit's records when no flat list is
    // made (`also` without `list`): what they compare with the snapshot is read from these
    // and from the store, where every tree the capture did not build already is (a turn's
    // capture builds only the directories on the paths it touched).
    let keep_trees = opts.also.is_some() && !opts.list;
    let kept_trees: Mutex<HashMap<ObjectId, Vec<u8>>> = Mutex::new(HashMap::new());
    let (root, built) = TreeBuilder::new(&rows, &hits, &cache, &omitted)
        .root(&|id, bytes| {
            if keep_trees {
                kept_trees
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, bytes.clone());
            }
            // Queued as built: a capture of 40k new directories never holds all their trees.
            if store_trees && !hasher.known(&id) {
                hasher.queue(vec![PendingObject::whole(
                    id,
                    ObjectKind::Tree,
                    bytes.len() as u64,
                    bytes,
                )]);
            }
        })
        .ok_or_else(stat_cache_lost)?;
    // A batch the trees filled can fail too (busy, disk full): its objects were never
    // written, so no snapshot may name them.
    if let Some(e) = hasher
        .error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        return Err(e.into());
    }
    for (i, id, size) in built {
        ids[i] = id;
        scanned[i].size = size;
    }
    phases.mark("trees");
    let cached_before = cache.len();
    let content = |e: &&ScanEntry| matches!(e.kind, ScanKind::File | ScanKind::Symlink);
    let files = (scanned.iter().filter(content).count() + omitted.len()) as u64;
    let bytes = scanned.iter().filter(content).map(|e| e.size).sum::<u64>() + omitted_bytes;
    let all_hit = hits.iter().all(|h| *h);
    drop(hits);
    let total = scanned.len() + omitted.len();
    // Rows and standing records interleave in path order: `true` a row, `false` a record.
    // A walk with a token the cache does not hold yet records it, so that the next capture
    // can ask the watcher.
    let new_token = vouch.is_none() && token != cache.head().token;
    let needs_rewrite = opts.store_objects
        && (new_token
            || beside
            || !(all_hit && total == cached_before && dirs_same && !any_left_out))
        && !(opts.cache == CacheRewrite::Deferred
            && !new_token
            && !beside
            && !any_left_out
            && hashed <= DEFER_CACHE_READS);
    let quiet = capture_quiet(&scanned, &skipped, &secrets, &captured_repos)
        && !omitted
            .iter()
            .any(|&i| cache.at(i).is_none_or(|c| c.stat.linked));
    let listed_wanted = opts.list;
    let order = if needs_rewrite || (listed_wanted && !omitted.is_empty()) {
        path_order(&scanned, &cache, &omitted)
    } else {
        Vec::new()
    };
    // The flat list callers get (and the final commit's records see, unless they see the
    // trees built above); the scanned entries
    // keep their `lstat` data for the stat cache, which is written after the commit.
    let entries: Vec<FlatEntry> = if !listed_wanted {
        Vec::new()
    } else if omitted.is_empty() {
        scanned
            .par_iter_mut()
            .zip(ids.par_iter())
            .map(|(e, id)| FlatEntry {
                kind: kind_of(e),
                path: RelPath::from(std::mem::take(&mut e.path)),
                id: *id,
                size: e.size,
            })
            .collect()
    } else {
        flat_list(&scanned, &ids, &cache, &omitted, &order).ok_or_else(stat_cache_lost)?
    };
    let mut capture = Capture {
        id: root,
        files,
        bytes,
        new_objects: 0,
        new_bytes: 0,
        hashed,
        skipped,
        nested_repos,
        captured_repos,
        secrets,
        listed,
        reused,
        walked_because: answer.fallback().map(str::to_string),
        focused: false,
        entries: Vec::new(),
    };
    if opts.store_objects {
        let kept_trees = kept_trees
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let seen = if keep_trees {
            Captured::Trees(&kept_trees)
        } else {
            Captured::Flat(&entries)
        };
        commit(ctx, opts, hasher, &seen, &mut capture)?;
        phases.mark("commit");
        // Nothing read and the same paths: the cache on disk is already exact (and has no
        // racy entries, which are never hits), so a no-change capture skips the rewrite.
        if needs_rewrite {
            let listed = !entries.is_empty();
            let (order, scanned, entries, ids, cache, omitted) =
                (&order, &scanned, &entries, &ids, &cache, &omitted);
            let records = || {
                let (mut k, mut r, mut o) = (0, 0, 0);
                std::iter::from_fn(move || {
                    let row = if order.is_empty() {
                        r < scanned.len()
                    } else {
                        *order.get(k)?
                    };
                    if order.is_empty() && !row {
                        return None;
                    }
                    k += 1;
                    if !row {
                        o += 1;
                        return cache.entry(omitted[o - 1]);
                    }
                    let e = &scanned[r];
                    r += 1;
                    Some(CacheEntry {
                        // Rows moved their paths into the flat list when there is one.
                        path: if listed {
                            &entries[k - 1].path
                        } else {
                            &e.path
                        },
                        // A directory's size is its tree's (set above), not its `lstat`.
                        stat: Stat::of(e),
                        id: ids[r - 1],
                        kind: e.kind,
                        listing: e.listing,
                    })
                })
            };
            let header = crate::statcache::Header {
                store_id: &store_id,
                root: &root,
                written_ns: started_ns,
                rules: &rules,
                token,
                files,
                bytes,
                quiet,
                nested: !capture.nested_repos.is_empty(),
            };
            // The cache is disposable: failing to write it only costs re-hashing next time
            // (a record that cannot be read back ends the list early: the count then fails).
            let _ = StatCache::write_sorted(ctx.statcache, &header, total, records);
            // The head a watched capture wrote beside the old cache names it: stale now.
            let _ = std::fs::remove_file(crate::statcache::watched_path(ctx.statcache));
        }
        phases.mark("stat cache write");
    }
    capture.entries = entries;
    Ok(capture)
}

/// Whether a capture that found this would find it again from the cache alone (see
/// [`crate::statcache::Header::quiet`]): nothing left out, every listing reusable, and no
/// file with several links (written through another path, it changes with no event the
/// watcher sees). Nested repositories left alone are quiet (their records say where they
/// are, and a `.git` created, removed or renamed is an event in the repository's own
/// directory); those captured as roots of their own are not: what is captured inside one
/// follows its `.git/info/exclude`, in no rules key, whose writes make no event (`.git` is
/// never watched), and their listings are never reused.
fn capture_quiet(
    scanned: &[ScanEntry],
    skipped: &[Skipped],
    secrets: &[String],
    captured: &[String],
) -> bool {
    skipped.is_empty()
        && secrets.is_empty()
        && captured.is_empty()
        && scanned.iter().all(|e| match e.kind {
            ScanKind::Dir => e.listing,
            _ => !e.linked,
        })
}

/// The capture when a watcher says nothing changed since the cache on disk was written:
/// its header's snapshot, recorded again, without reading a record but the kinds, when it
/// holds nested repositories, to name them (`None` when the header cannot stand for the
/// disk, or the caller wants the list of paths).
fn unchanged(
    ctx: &CaptureContext<'_>,
    opts: &CaptureOptions<'_>,
    reader: &StoreReader,
    store_id: &[u8; 16],
    head: &crate::statcache::Head,
    changes: &crate::watch::Changes,
) -> Result<Option<Capture>, CaptureError> {
    if !changes.is_empty() || !head.quiet || opts.list {
        return Ok(None);
    }
    let rules = scan::rules(
        ctx.root,
        ctx.store_dir,
        ctx.nested_repos,
        ctx.rules_settings,
    );
    if rules != head.rules || !reader.contains(&head.root)? {
        return Ok(None);
    }
    let root = head.root;
    // The nested repositories are those the last capture found (the cache's records).
    let nested_repos = if head.nested {
        let Some(found) = changed::nested_repos(ctx, reader, store_id, head)? else {
            return Ok(None);
        };
        found
    } else {
        Vec::new()
    };
    let mut capture = Capture {
        id: root,
        files: head.files,
        bytes: head.bytes,
        new_objects: 0,
        new_bytes: 0,
        hashed: 0,
        skipped: Vec::new(),
        nested_repos,
        captured_repos: Vec::new(),
        secrets: Vec::new(),
        listed: 0,
        reused: 0,
        walked_because: None,
        focused: false,
        entries: Vec::new(),
    };
    // Nothing to record: the snapshot is stored already, and an empty commit would only sync.
    if opts.store_objects && (opts.record.is_some() || opts.also.is_some()) {
        let record = opts
            .record
            .as_ref()
            .map(|label| SnapshotRecord::now(root, label.clone(), head.files, head.bytes));
        let last_known = record.as_ref().map(|_| root);
        let none = std::collections::HashMap::new();
        let written =
            ctx.store
                .write_with(Vec::new(), record.as_ref(), last_known, crate::store::WriteStats::default(), |tx| {
                    match opts.also {
                        Some(also) => also(tx, root, &Captured::Trees(&none)),
                        None => Ok(()),
                    }
                })?;
        capture.new_objects = written.objects;
        capture.new_bytes = written.stored_bytes;
    }
    Ok(Some(capture))
}
