//! Carrying out a [`Plan`]: verify every object, then delete, create and write.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::plan::Plan;
use crate::capture::{FlatEntry, abs_path};
use crate::error::RestoreError;
use crate::object::{CHUNK_THRESHOLD, EntryKind};
use crate::progress::Progress;
use crate::store::StoreReader;

/// Verified content kept in memory between the check and the writes, up to this many bytes
/// of files up to [`CHUNK_THRESHOLD`]; beyond it, and for bigger files, objects are verified
/// as they stream past, dropped, and streamed (and verified) again when written.
const KEEP_BYTES: u64 = 512 * 1024 * 1024;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Reads and verifies every object the plan writes. Nothing on disk changes.
///
/// # Errors
/// The first missing or corrupt object.
pub fn verify(reader: &StoreReader, plan: &Plan) -> Result<Vec<Option<Vec<u8>>>, RestoreError> {
    let total: u64 = plan.writes.iter().map(|w| w.size).sum();
    let keep = total <= KEEP_BYTES;
    plan.writes
        .par_iter()
        .map(|w| {
            // Big files are always streamed: never whole in memory.
            if keep && w.size <= CHUNK_THRESHOLD {
                Ok(Some(reader.read_blob(&w.id)?))
            } else {
                // Verified as it streams past; read (and verified) again when written.
                let _ = reader.read_blob_into(&w.id, &mut std::io::sink())?;
                Ok(None)
            }
        })
        .collect()
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RestoreError + '_ {
    move |source| RestoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks that every directory from the root down to `dir` is a real directory, never a
/// symlink, right before writing into it (guards against a symlink swapped in meanwhile).
fn check_real_dirs(
    root: &Path,
    dir: &[u8],
    seen: &Mutex<HashSet<Vec<u8>>>,
) -> Result<(), RestoreError> {
    if dir.is_empty() || seen.lock().is_ok_and(|s| s.contains(dir)) {
        return Ok(());
    }
    let mut end = 0;
    while end < dir.len() {
        end = dir[end + 1..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(dir.len(), |i| end + 1 + i);
        let part = &dir[..end];
        let meta = abs_path(root, part)
            .symlink_metadata()
            .map_err(io(&abs_path(root, part)))?;
        if !meta.file_type().is_dir() {
            return Err(RestoreError::Unsafe {
                path: String::from_utf8_lossy(part).into_owned(),
                reason: "not a real directory (a symlink appeared?); nothing beyond it is written"
                    .into(),
            });
        }
    }
    if let Ok(mut s) = seen.lock() {
        s.insert(dir.to_vec());
    }
    Ok(())
}

fn parent(path: &[u8]) -> &[u8] {
    path.iter()
        .rposition(|&b| b == b'/')
        .map_or(&[][..], |i| &path[..i])
}

/// Writes one file or symlink: from `kept` bytes, or streamed from the store (big restores:
/// a file is never whole in memory, and a corrupt chunk leaves only a temp file, removed).
fn write_one(
    root: &Path,
    reader: &StoreReader,
    w: &FlatEntry,
    kept: Option<Vec<u8>>,
) -> Result<(), RestoreError> {
    let dest = abs_path(root, &w.path);
    let dir = dest.parent().unwrap_or(root);
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.retrace-tmp-{}-{n}", std::process::id()));
    let result = (|| {
        if w.kind == EntryKind::Symlink {
            use std::os::unix::ffi::OsStrExt;
            let target = match kept {
                Some(bytes) => bytes,
                None => reader.read_blob(&w.id)?,
            };
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), &tmp)
                .map_err(io(&dest))?;
        } else {
            let old_mode = dest
                .symlink_metadata()
                .ok()
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.permissions().mode());
            let base = old_mode.unwrap_or(0o644) & 0o7777;
            let mode = if w.kind == EntryKind::Executable {
                base | ((base & 0o444) >> 2) | 0o100
            } else {
                base & !0o111
            };
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(io(&dest))?;
            if let Some(bytes) = kept {
                f.write_all(&bytes).map_err(io(&dest))?;
            } else {
                let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut f);
                reader.read_blob_into(&w.id, &mut out)?.map_err(io(&dest))?;
                out.flush().map_err(io(&dest))?;
            }
            f.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(io(&dest))?;
        }
        fs::rename(&tmp, &dest).map_err(io(&dest))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// What [`apply`] changed.
#[derive(Debug, Default)]
pub struct Applied {
    /// Directories removed because they ended up empty.
    pub removed_dirs: Vec<String>,
}

/// Checks, before anything is written, that every existing directory the plan writes into
/// or deletes from is writable by this process, so that a restore which cannot finish does
/// not start: it fails naming the directory, with the workspace untouched. (A permission
/// changed after this check fails that restore midway; its journal then completes it once
/// the cause is fixed.)
///
/// # Errors
/// [`RestoreError::Io`] (permission denied) naming the directory.
pub fn preflight(root: &Path, plan: &Plan) -> Result<(), RestoreError> {
    let made: HashSet<&[u8]> = plan.mkdirs.iter().map(Vec::as_slice).collect();
    let mut dirs: HashSet<&[u8]> = HashSet::new();
    for p in plan
        .writes
        .iter()
        .map(|w| w.path.as_slice())
        .chain(plan.deletes.iter().map(Vec::as_slice))
        .chain(plan.mkdirs.iter().map(Vec::as_slice))
        .chain(plan.prune.iter().map(Vec::as_slice))
    {
        // The nearest ancestor that exists now is the one written into.
        let mut d = parent(p);
        while made.contains(d) {
            d = parent(d);
        }
        dirs.insert(d);
    }
    for d in dirs {
        let path = abs_path(root, d);
        if !path.is_dir() {
            continue; // replaced meanwhile: the write-time check refuses it
        }
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

/// Crash-test hook: with `RETRACE_FAULT_ABORT_AFTER_WRITES=N` in the environment, the
/// process aborts (as abruptly as a SIGKILL) once a restore has deleted or written N files.
/// Tests use it to stop a restore at an exact point; it costs one environment read per
/// restore otherwise.
struct CrashAfter {
    after: Option<usize>,
    done: std::sync::atomic::AtomicUsize,
}

impl CrashAfter {
    fn from_env() -> CrashAfter {
        CrashAfter {
            after: std::env::var("RETRACE_FAULT_ABORT_AFTER_WRITES")
                .ok()
                .and_then(|v| v.parse().ok()),
            done: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn tick(&self) {
        if let Some(n) = self.after {
            let done = self.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if done >= n {
                std::process::abort();
            }
        }
    }
}

/// Applies a verified plan. `data` comes from [`verify`].
///
/// # Errors
/// The first I/O failure or unsafe path met.
pub fn apply(
    root: &Path,
    reader: &StoreReader,
    plan: &Plan,
    data: Vec<Option<Vec<u8>>>,
    progress: &dyn Progress,
) -> Result<Applied, RestoreError> {
    progress.start("restore", (plan.writes.len() + plan.deletes.len()) as u64);
    let crash = CrashAfter::from_env();
    for d in &plan.deletes {
        let p = abs_path(root, d);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&p)(e)),
        }
        crash.tick();
        progress.advance(1);
    }
    // Directories the restore emptied: managed directories absent from the target (every
    // ancestor of a deleted file that the target lacks is one), deepest first, before the
    // writes since a file may take a directory's place; one still holding anything (ignored
    // files) stays.
    let mut applied = Applied::default();
    prune(root, plan.prune.iter(), &mut applied)?;
    for d in &plan.mkdirs {
        let p = abs_path(root, d);
        check_real_dirs(root, parent(d), &Mutex::new(HashSet::new()))?;
        match fs::create_dir(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => return Err(io(&p)(e)),
        }
    }
    let seen = Mutex::new(HashSet::new());
    plan.writes
        .par_iter()
        .zip(data.into_par_iter())
        .try_for_each(|(w, kept)| {
            check_real_dirs(root, parent(&w.path), &seen)?;
            write_one(root, reader, w, kept)?;
            crash.tick();
            progress.advance(1);
            Ok::<(), RestoreError>(())
        })?;
    progress.finish();
    Ok(applied)
}

/// Paths the restore wrote or deleted that are not what the plan intended: a written file
/// that does not hash to its id (or lost its executable bit, or is no longer a symlink), a
/// deleted path that exists again. Empty when the restore is verified.
#[must_use]
pub fn check(root: &Path, plan: &Plan) -> Vec<String> {
    // Paths deleted then recreated (a file replaced by a directory) are not "deleted".
    let recreated: HashSet<&[u8]> = plan
        .writes
        .iter()
        .map(|w| w.path.as_slice())
        .chain(plan.mkdirs.iter().map(Vec::as_slice))
        .collect();
    let mut bad: Vec<String> = plan
        .writes
        .par_iter()
        .filter(|w| !written_as_planned(root, w))
        .map(|w| String::from_utf8_lossy(&w.path).into_owned())
        .collect();
    for d in plan
        .deletes
        .iter()
        .filter(|d| !recreated.contains(d.as_slice()))
    {
        if exists_in_place(root, d) {
            bad.push(String::from_utf8_lossy(d).into_owned());
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

fn written_as_planned(root: &Path, w: &FlatEntry) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let p = abs_path(root, &w.path);
    let Ok(meta) = p.symlink_metadata() else {
        return false;
    };
    let content = match w.kind {
        EntryKind::Symlink if meta.file_type().is_symlink() => {
            fs::read_link(&p).map(|t| t.as_os_str().as_bytes().to_vec())
        }
        EntryKind::File | EntryKind::Executable if meta.is_file() => {
            let exec = meta.permissions().mode() & 0o100 != 0;
            if exec != (w.kind == EntryKind::Executable) {
                return false;
            }
            fs::read(&p)
        }
        _ => return false,
    };
    content.is_ok_and(|c| crate::object::ObjectId::of_blob(&c) == w.id)
}

fn prune<'a>(
    root: &Path,
    dirs: impl Iterator<Item = &'a Vec<u8>>,
    applied: &mut Applied,
) -> Result<(), RestoreError> {
    let mut dirs: Vec<&Vec<u8>> = dirs.collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.iter().filter(|&&b| b == b'/').count()));
    dirs.dedup();
    for d in dirs {
        let p = abs_path(root, d);
        match fs::remove_dir(&p) {
            Ok(()) => applied
                .removed_dirs
                .push(String::from_utf8_lossy(d).into_owned()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
                ) => {}
            Err(e) if e.raw_os_error() == Some(20) => {} // ENOTDIR: already replaced
            Err(e) => return Err(io(&p)(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
