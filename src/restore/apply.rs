//! Carrying out a [`Plan`]: verify every object, then delete, create and write.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Mutex;

use rayon::prelude::*;

use super::beneath::{Beneath, Expected, Taken, split};
use super::fault::Point;
use super::plan::{Plan, Write};
use crate::capture::abs_path;
use crate::object::FlatEntry;
use crate::error::RestoreError;
use crate::object::show_path as lossy;
use crate::object::{CHUNK_THRESHOLD, EntryKind, ObjectId, RelPath};
use crate::progress::Progress;
use crate::scan::Skipped;
use crate::statcache::StatCache;
use crate::store::StoreReader;

/// Verified content kept in memory between the check and the writes, up to this many bytes
/// of files up to [`CHUNK_THRESHOLD`]. A bigger restore reads every object once: it checks
/// here only that the store holds each one whole (its index records, its delta chain, its
/// chunks), and verifies the content as it is written (see [`verify`]).
const KEEP_BYTES: u64 = 64 * 1024 * 1024;

/// The content [`verify`] prepared for a plan's writes.
#[derive(Debug)]
pub enum Content {
    /// Per write of the plan: its verified bytes, or `None` to stream it from the store.
    Kept(Vec<Option<Vec<u8>>>),
    /// Per write: the frame its object is stored in (its offset in the pack log) and where in
    /// the frame it starts. A big
    /// restore writes frame by frame and decompresses each frame once (in the plan's order,
    /// neighbours in a frame met a small frame cache at different times: the 100k restore
    /// decompressed 2.3 GB for 1.1 GB of files).
    ByFrame(Vec<(u64, u64)>),
}

impl Default for Content {
    fn default() -> Content {
        Content::Kept(Vec::new())
    }
}

/// Prepares the plan's content, writing nothing on disk. A restore of up to `KEEP_BYTES` (64 MiB)
/// reads and verifies every object now and keeps it for the writes, so damage found here
/// leaves the workspace untouched. A bigger one checks that every object is present whole
/// (no decompression: reading 1 GB twice was a third of a whole restore) and verifies each
/// as it is written: a file whose object turns out damaged is never put in place (its temp
/// file is removed), and the restore then rolls back what it wrote.
///
/// # Errors
/// The first missing object; with a small restore, the first corrupt one too.
pub fn verify(reader: &StoreReader, plan: &Plan) -> Result<Content, RestoreError> {
    let mut phases = crate::trace::Phases::new("restore");
    let total: u64 = plan.writes.iter().map(|w| w.entry.size).sum();
    let keep = total <= keep_bytes();
    let missing = |id: ObjectId| -> RestoreError {
        // Missing (or its delta chain or a chunk is): read it for the exact error.
        match reader.read_blob_into(&id, &mut std::io::sink()) {
            Err(e) => e.into(),
            Ok(_) => crate::error::StoreError::Missing {
                path: reader.path().to_path_buf(),
                id,
            }
            .into(),
        }
    };
    let content = if keep {
        let kept = plan
            .writes
            .par_iter()
            .map(|w| {
                let w = &w.entry;
                if w.size <= CHUNK_THRESHOLD {
                    // Small enough to hold: read, verified, kept for the write.
                    Ok(Some(reader.read_blob(&w.id)?))
                } else {
                    // A big file is never whole in memory: verified as it streams past,
                    // read (and verified) again when written.
                    let _ = reader.read_blob_into(&w.id, &mut std::io::sink())?;
                    Ok(None)
                }
            })
            .collect::<Result<_, RestoreError>>()?;
        Content::Kept(kept)
    } else {
        let frames = plan
            .writes
            .par_iter()
            .map_init(std::collections::HashMap::new, |memo, w| {
                let id = w.entry.id;
                match reader.record(&id) {
                    Ok(rec) if reader.is_whole(&id, memo) => {
                        Ok((rec.offset, u64::from(rec.within)))
                    }
                    _ => Err(missing(id)),
                }
            })
            .collect::<Result<_, RestoreError>>()?;
        Content::ByFrame(frames)
    };
    phases.mark(&format!(
        "verify ({} objects, {} MB{})",
        plan.writes.len(),
        total >> 20,
        if keep { ", kept" } else { ", present" }
    ));
    Ok(content)
}

/// [`KEEP_BYTES`], or with the `fault-injection` feature `RETRACE_FAULT_KEEP_BYTES`, so that
/// tests reach the path of big restores with small workspaces.
fn keep_bytes() -> u64 {
    #[cfg(feature = "fault-injection")]
    if let Some(n) = std::env::var("RETRACE_FAULT_KEEP_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    KEEP_BYTES
}

fn parent(path: &[u8]) -> &[u8] {
    split(path).0
}

/// Writes one file or symlink: from `kept` bytes, or streamed from the store (big restores:
/// a file is never whole in memory, and a corrupt chunk leaves only a temp file, removed),
/// then puts it in place: at a free path with [`Beneath::write_new`], over the version the
/// plan expects with [`Beneath::place`].
fn write_one(
    b: &Beneath,
    reader: &StoreReader,
    w: &Write,
    kept: Option<Vec<u8>>,
    cache: &StatCache,
) -> Result<Taken, RestoreError> {
    let e = &w.entry;
    let (link, mut bytes) = if e.kind == EntryKind::Symlink {
        let target = match kept {
            Some(bytes) => bytes,
            None => reader.read_blob(&e.id)?,
        };
        (Some(target), None)
    } else {
        (None, kept)
    };
    let mut fill = |out: &mut dyn std::io::Write| -> Result<(), RestoreError> {
        let io = |source| RestoreError::Io {
            path: abs_path(b.root(), &e.path),
            source,
        };
        b.faults().writing().map_err(io)?;
        match bytes.take() {
            Some(bytes) => out.write_all(&bytes).map_err(io),
            None => reader.read_blob_into(&e.id, out)?.map_err(io),
        }
    };
    if w.over.is_none() {
        return b.write_new(&e.path, e.kind, &mut fill, link.as_deref());
    }
    let (dir, tmp, ours) = b.write_temp(&e.path, e.kind, &mut fill, link.as_deref())?;
    let version = Expected {
        kind: e.kind,
        id: e.id,
    };
    b.place(&dir, &tmp, (ours, version), &e.path, w.over, cache)
}

/// What [`apply`] changed.
#[derive(Debug, Default)]
pub struct Applied {
    /// Directories removed because they ended up empty.
    pub removed_dirs: Vec<String>,
    /// Paths someone else changed while the restore ran: their version is kept (at the
    /// path, or at the name the reason gives) and the plan's write or delete not done.
    pub kept: Vec<Skipped>,
    /// How many writes and deletes touched the disk (0: the workspace is as it was).
    pub done: usize,
}

/// Checks, before anything is written, that every existing directory the plan writes into
/// or deletes from is a real directory below the root (opening it, which also keeps it for
/// the writes) and writable by this process, so that a restore which cannot finish does
/// not start: it fails naming the directory, with the workspace untouched. (A directory
/// swapped or a permission changed after this check fails that restore midway; its
/// journal then completes it once the cause is fixed.)
///
/// # Errors
/// [`RestoreError::Unsafe`] for a directory that is a symlink or a file;
/// [`RestoreError::Io`] (permission denied) naming the directory.
pub fn preflight(b: &Beneath, plan: &Plan) -> Result<(), RestoreError> {
    let made: HashSet<&[u8]> = plan.mkdirs.iter().map(RelPath::as_bytes).collect();
    let mut dirs: HashSet<&[u8]> = HashSet::new();
    for p in plan
        .writes
        .iter()
        .map(|w| w.entry.path.as_bytes())
        .chain(plan.deletes.iter().map(|d| d.path.as_bytes()))
        .chain(plan.mkdirs.iter().map(RelPath::as_bytes))
        .chain(plan.prune.iter().map(RelPath::as_bytes))
    {
        // The nearest ancestor that exists now is the one written into.
        let mut d = parent(p);
        while made.contains(d) {
            d = parent(d);
        }
        dirs.insert(d);
    }
    for d in dirs {
        if b.dir(d)?.is_none() {
            continue; // gone meanwhile: the write-time open fails
        }
        let path = abs_path(b.root(), d);
        let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
        if let Err(e) = rustix::fs::access(&path, access) {
            return Err(RestoreError::Io {
                path,
                source: std::io::Error::from(e),
            });
        }
    }
    Ok(())
}

/// Applies a verified plan. `data` comes from [`verify`]; `cache` vouches for the versions
/// taken out (see [`Beneath::place`]).
///
/// # Errors
/// The first I/O failure or unsafe path met, saying whether the disk was touched.
pub fn apply(
    b: &Beneath,
    reader: &StoreReader,
    plan: &Plan,
    data: Content,
    cache: &StatCache,
    progress: &dyn Progress,
) -> Result<Applied, Failed> {
    let mut phases = crate::trace::Phases::new("restore");
    progress.start("restore", (plan.writes.len() + plan.deletes.len()) as u64);
    let mut applied = Applied::default();
    let kept = Mutex::new(Vec::new());
    let keep = |path: &[u8], t: Taken| {
        if let Taken::Kept { kept_at } = t
            && let Ok(mut k) = kept.lock()
        {
            let reason = if kept_at.as_bytes() == path {
                "changed during the restore: left as it was".to_string()
            } else {
                format!("changed during the restore: that version is kept as {kept_at}")
            };
            k.push(Skipped {
                path: lossy(path),
                reason,
            });
        }
    };
    let done = std::sync::atomic::AtomicUsize::new(0);
    let result = (|| {
        for d in &plan.deletes {
            let t = b.delete(&d.path, d.expected, cache)?;
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            keep(&d.path, t);
            b.faults().reached(Point::Done);
            progress.advance(1);
        }
        // Directories the restore emptied: managed directories absent from the target (every
        // ancestor of a deleted file that the target lacks is one), deepest first, before the
        // writes since a file may take a directory's place; one still holding anything
        // (ignored files, a version kept above) stays.
        prune(b, plan.prune.iter(), &mut applied)?;
        phases.mark(&format!(
            "deletes ({}) and prune ({})",
            plan.deletes.len(),
            plan.prune.len()
        ));
        // A path whose delete was refused above (edited meanwhile) cannot become a directory.
        let blocked: HashSet<RelPath> = kept
            .lock()
            .map(|k| {
                k.iter()
                    .map(|s| RelPath::from(s.path.clone().into_bytes()))
                    .collect()
            })
            .unwrap_or_default();
        let under_blocked = |p: &[u8]| {
            blocked.contains(p)
                || p.iter()
                    .enumerate()
                    .any(|(i, &c)| c == b'/' && blocked.contains(&p[..i]))
        };
        for d in &plan.mkdirs {
            if under_blocked(d) {
                continue;
            }
            b.mkdir(d)?;
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        phases.mark(&format!("mkdirs ({})", plan.mkdirs.len()));
        let write = |w: &Write, bytes: Option<Vec<u8>>| {
            if under_blocked(&w.entry.path) {
                keep(
                    &w.entry.path,
                    Taken::Kept {
                        kept_at: w.entry.path.show(),
                    },
                );
                return Ok(());
            }
            let t = write_one(b, reader, w, bytes, cache)?;
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            keep(&w.entry.path, t);
            b.faults().reached(Point::Done);
            progress.advance(1);
            Ok::<(), RestoreError>(())
        };
        let written = match data {
            Content::Kept(mut kept) => {
                // Never fewer than the writes: a missing entry streams its object.
                kept.resize_with(plan.writes.len(), || None);
                plan.writes
                    .par_iter()
                    .zip(kept.into_par_iter())
                    .try_for_each(|(w, bytes)| write(w, bytes))
            }
            Content::ByFrame(frames) => {
                // Frame by frame, each frame's writes in a row on one thread.
                let mut order: Vec<usize> = (0..plan.writes.len()).collect();
                // In each frame, in the order the objects lie in it.
                let at = |i: usize| frames.get(i).copied().unwrap_or((u64::MAX, 0));
                order.sort_by_key(|&i| (at(i), i));
                let groups: Vec<&[usize]> = order.chunk_by(|&x, &y| at(x).0 == at(y).0).collect();
                groups.par_iter().try_for_each(|group| {
                    group.iter().try_for_each(|&i| write(&plan.writes[i], None))
                })
            }
        };
        let (frames, bytes) = reader.frames_decompressed();
        phases.mark(&format!(
            "writes ({}; {frames} frames decompressed by then, {} MB)",
            plan.writes.len(),
            bytes >> 20
        ));
        written
    })();
    applied.done = done.into_inner();
    let done_any = applied.done > 0 || !applied.removed_dirs.is_empty();
    applied.kept = kept.into_inner().unwrap_or_default();
    applied.kept.sort_by(|a, b| a.path.cmp(&b.path));
    progress.finish();
    result.map(|()| applied).map_err(|error| Failed {
        error: Box::new(error),
        touched: done_any,
    })
}

/// A restore that failed midway.
#[derive(Debug)]
pub struct Failed {
    /// Why.
    pub error: Box<RestoreError>,
    /// Whether anything on disk had been changed (false: the workspace is as it was).
    pub touched: bool,
}

/// How closely [`check`] looks at what a restore wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// Every written file read again and hashed (a restore of a few paths).
    Content,
    /// Kind, executable bit and size (a big restore, whose content was verified as it was
    /// written: reading a gigabyte again would double its cost). Symlinks are read.
    Stat,
}

/// Paths the restore wrote or deleted that are not what the plan intended: a written file
/// that does not hash to its id (with [`Look::Stat`]: whose size differs) or lost its
/// executable bit, or is no longer a symlink; a deleted path that exists again. Empty when
/// the restore is verified.
#[must_use]
pub fn check(root: &Path, plan: &Plan, look: Look) -> Vec<String> {
    // Paths deleted then recreated (a file replaced by a directory) are not "deleted".
    let recreated: HashSet<&[u8]> = plan
        .writes
        .iter()
        .map(|w| w.entry.path.as_bytes())
        .chain(plan.mkdirs.iter().map(RelPath::as_bytes))
        .collect();
    let mut bad: Vec<String> = plan
        .writes
        .par_iter()
        .filter(|w| !written_as_planned(root, &w.entry, look))
        .map(|w| w.entry.path.show())
        .collect();
    for d in plan
        .deletes
        .iter()
        .filter(|d| !recreated.contains(d.path.as_bytes()))
    {
        if exists_in_place(root, &d.path) {
            bad.push(d.path.show());
        }
    }
    bad.sort();
    bad
}

/// Whether `path` exists as itself: every ancestor a real directory (an `lstat` through a
/// symlinked ancestor would find some other file) and the path present.
fn exists_in_place(root: &Path, path: &[u8]) -> bool {
    let real_dir = |p: &[u8]| {
        abs_path(root, p)
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir())
    };
    let ancestors_real = path
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .all(|(i, _)| real_dir(&path[..i]));
    ancestors_real && abs_path(root, path).symlink_metadata().is_ok()
}

fn written_as_planned(root: &Path, w: &FlatEntry, look: Look) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let p = abs_path(root, &w.path);
    let Ok(meta) = p.symlink_metadata() else {
        return false;
    };
    let id = match w.kind {
        EntryKind::Symlink if meta.file_type().is_symlink() => {
            fs::read_link(&p).map(|t| crate::object::ObjectId::of_blob(t.as_os_str().as_bytes()))
        }
        EntryKind::File | EntryKind::Executable if meta.is_file() => {
            let exec = meta.permissions().mode() & 0o100 != 0;
            if exec != (w.kind == EntryKind::Executable) {
                return false;
            }
            if look == Look::Stat {
                return meta.len() == w.size;
            }
            // Streamed: a big file is never whole in memory.
            fs::File::open(&p).and_then(|f| {
                let mut h = blake3::Hasher::new();
                h.update_reader(f)?;
                Ok(crate::object::ObjectId(*h.finalize().as_bytes()))
            })
        }
        _ => return false,
    };
    id.is_ok_and(|id| id == w.id)
}

fn prune<'a>(
    b: &Beneath,
    dirs: impl Iterator<Item = &'a RelPath>,
    applied: &mut Applied,
) -> Result<(), RestoreError> {
    let mut dirs: Vec<&RelPath> = dirs.collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.iter().filter(|&&b| b == b'/').count()));
    dirs.dedup();
    for d in dirs {
        if b.rmdir_if_empty(d)? {
            applied.removed_dirs.push(d.show());
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
