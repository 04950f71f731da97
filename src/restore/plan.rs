//! Deciding what a restore writes and deletes, before anything is touched.

use std::collections::HashSet;
use std::path::Path;

use super::beneath::Expected;
use crate::capture::abs_path;
use crate::object::FlatEntry;
use crate::error::RestoreError;
use crate::object::show_path as lossy;
use crate::object::{EntryKind, RelPath};
use crate::scan::Skipped;
use crate::scan::exclude::{is_agent_record, is_never_restored};

/// A file or symlink to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The target entry.
    pub entry: FlatEntry,
    /// The version it replaces (checked when it is taken out); `None` when the path must
    /// be free.
    pub over: Option<Expected>,
}

/// A managed file or symlink to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete {
    /// Its path.
    pub path: RelPath,
    /// The version the plan saw there (checked when it is taken out).
    pub expected: Expected,
}

fn expected(c: &FlatEntry) -> Expected {
    Expected {
        kind: c.kind,
        id: c.id,
    }
}

/// Every change a restore will make.
#[derive(Debug, Default)]
pub struct Plan {
    /// Target files and symlinks to write.
    pub writes: Vec<Write>,
    /// Managed files and symlinks to delete.
    pub deletes: Vec<Delete>,
    /// Directories to create, parents first.
    pub mkdirs: Vec<RelPath>,
    /// Managed directories absent from the target (or replaced by a file): removed after
    /// the deletes when they are empty.
    pub prune: Vec<RelPath>,
    /// Target paths left alone because something unmanaged is in the way.
    pub left_alone: Vec<Skipped>,
}


fn fresh(t: &FlatEntry) -> Write {
    Write {
        entry: t.clone(),
        over: None,
    }
}

fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .map(move |(i, _)| &path[..i])
}

/// Plans the restore of `target` over the disk state `current` (both sorted by path).
///
/// # Errors
/// [`RestoreError::Unsafe`] when the target would write through a symlink, into a
/// hard-excluded name, or over a directory holding unmanaged files.
pub fn plan(
    root: &Path,
    current: &[FlatEntry],
    target: &[FlatEntry],
) -> Result<Plan, RestoreError> {
    let mut plan = Plan::default();
    let find = |p: &[u8]| {
        current
            .binary_search_by(|c| c.path.as_bytes().cmp(p))
            .ok()
            .map(|i| &current[i])
    };
    // Subtrees of the target we must not enter: nested repositories on disk, and paths
    // where an unmanaged file blocks a directory.
    let mut blocked: HashSet<RelPath> = current
        .iter()
        .filter(|c| c.kind == EntryKind::NestedRepo)
        .map(|c| c.path.clone())
        .collect();
    // A nested repository in the target whose files the disk's capture holds (the
    // `nested_repos` mode changed since): the target does not know those files, which is not
    // saying they are gone, so none is deleted.
    for t in target.iter().filter(|t| t.kind == EntryKind::NestedRepo) {
        if find(&t.path).is_some_and(|c| c.kind == EntryKind::Dir) {
            blocked.insert(t.path.clone());
            plan.left_alone.push(Skipped {
                path: t.path.show(),
                reason: "a nested repository whose files that snapshot did not capture: \
                         left as it is"
                    .into(),
            });
        }
    }
    let mut created: HashSet<RelPath> = HashSet::new();
    for t in target {
        if t.path.split(|&b| b == b'/').any(is_never_restored) {
            return Err(RestoreError::Unsafe {
                path: t.path.show(),
                reason: "the snapshot names a path never restored (.git, node_modules, a \
                         retrace temp file)"
                    .into(),
            });
        }
        // An agent's record an older retrace captured: the agent's history now, not ours.
        if t.path.split(|&b| b == b'/').any(is_agent_record) {
            if !ancestors(&t.path).any(|a| a.split(|&b| b == b'/').any(is_agent_record)) {
                plan.left_alone.push(Skipped {
                    path: t.path.show(),
                    reason: "an agent's own record (never restored over)".into(),
                });
            }
            blocked.insert(t.path.clone());
            continue;
        }
        if blocked.contains(&t.path) || ancestors(&t.path).any(|a| blocked.contains(a)) {
            if t.kind != EntryKind::NestedRepo {
                plan.left_alone.push(Skipped {
                    path: t.path.show(),
                    reason: "inside a nested repository or an unmanaged path".into(),
                });
            }
            continue;
        }
        if t.kind == EntryKind::NestedRepo {
            continue;
        }
        match find(&t.path) {
            Some(c) if c.kind == t.kind && (c.id == t.id || c.kind == EntryKind::Dir) => {}
            Some(c) => match (c.kind.is_content(), t.kind == EntryKind::Dir) {
                // A rename replaces a file or symlink atomically: no delete first.
                (true, false) => plan.writes.push(Write {
                    entry: t.clone(),
                    over: Some(expected(c)),
                }),
                (true, true) => {
                    plan.deletes.push(Delete {
                        path: c.path.clone(),
                        expected: expected(c),
                    });
                    created.insert(t.path.clone());
                    plan.mkdirs.push(t.path.clone());
                }
                (false, _) => {
                    check_only_managed(root, &c.path, current)?;
                    plan.prune.push(c.path.clone());
                    plan.writes.push(fresh(t));
                }
            },
            // Below a directory this plan creates nothing exists yet; an lstat there would
            // see through whatever the plan replaces (a symlink to elsewhere, say).
            None if ancestors(&t.path).any(|a| created.contains(a)) => {
                if t.kind == EntryKind::Dir {
                    created.insert(t.path.clone());
                    plan.mkdirs.push(t.path.clone());
                } else {
                    plan.writes.push(fresh(t));
                }
            }
            None => match abs_path(root, &t.path).symlink_metadata() {
                // ENOTDIR: an ancestor is a managed file this plan already replaces.
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(20) =>
                {
                    if t.kind == EntryKind::Dir {
                        created.insert(t.path.clone());
                        plan.mkdirs.push(t.path.clone());
                    } else {
                        plan.writes.push(fresh(t));
                    }
                }
                Err(e) => {
                    return Err(RestoreError::Io {
                        path: abs_path(root, &t.path),
                        source: e,
                    });
                }
                Ok(m) if t.kind == EntryKind::Dir && m.file_type().is_symlink() => {
                    return Err(RestoreError::Unsafe {
                        path: t.path.show(),
                        reason: "it is a symlink on disk that retrace does not manage; \
                                 writing into it could escape the workspace"
                            .into(),
                    });
                }
                Ok(m) if t.kind == EntryKind::Dir && m.is_dir() => {}
                Ok(_) => {
                    plan.left_alone.push(Skipped {
                        path: t.path.show(),
                        reason: "an ignored or excluded file is in the way".into(),
                    });
                    blocked.insert(t.path.clone());
                }
            },
        }
    }
    let in_target = |p: &[u8]| {
        target
            .binary_search_by(|t| t.path.as_bytes().cmp(p))
            .is_ok()
    };
    for c in current {
        if in_target(&c.path) || ancestors(&c.path).any(|a| blocked.contains(a)) {
            continue;
        }
        if c.kind.is_content() {
            plan.deletes.push(Delete {
                path: c.path.clone(),
                expected: expected(c),
            });
        } else if c.kind == EntryKind::Dir {
            plan.prune.push(c.path.clone());
        }
    }
    plan.mkdirs.sort();
    plan.deletes.sort_by(|a, b| a.path.cmp(&b.path));
    plan.deletes.dedup_by(|a, b| a.path == b.path);
    plan.prune.sort();
    plan.prune.dedup();
    Ok(plan)
}

/// A managed directory replaced by a file may hold only managed entries: anything else
/// (ignored build output, say) would be lost, so the restore is refused.
fn check_only_managed(root: &Path, dir: &[u8], current: &[FlatEntry]) -> Result<(), RestoreError> {
    let base = abs_path(root, dir);
    for entry in walkdir::WalkDir::new(&base)
        .min_depth(1)
        .follow_links(false)
    {
        let entry = entry.map_err(|e| RestoreError::Io {
            path: base.clone(),
            source: e
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("walk failed")),
        })?;
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let rel = rel.as_os_str().as_encoded_bytes();
        if current
            .binary_search_by(|c| c.path.as_bytes().cmp(rel))
            .is_err()
        {
            return Err(RestoreError::Unsafe {
                path: lossy(dir),
                reason: format!(
                    "the snapshot has a file here, but the directory holds {} which retrace \
                     does not manage; move it away first",
                    lossy(rel)
                ),
            });
        }
    }
    Ok(())
}

/// Names the real reason a target path is left alone when what stands on disk is not an
/// ignored file but one no capture could take: a file it could not read (with the OS error),
/// or a FIFO, socket or device. Paths inside nested repositories keep their reason.
pub(crate) fn explain_left_alone(
    root: &Path,
    current: &[FlatEntry],
    left: &mut [crate::scan::Skipped],
) {
    use std::os::unix::fs::OpenOptionsExt;
    // Sorted, as `current` is.
    let nested: Vec<RelPath> = current
        .iter()
        .filter(|e| e.kind == crate::object::EntryKind::NestedRepo)
        .map(|e| e.path.clone())
        .collect();
    for s in left {
        let rel = s.path.as_bytes();
        if crate::diff::below_any(rel, &nested) || nested.iter().any(|n| n == rel) {
            continue;
        }
        let path = crate::capture::abs_path(root, rel);
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let ft = meta.file_type();
        if ft.is_file() {
            // Non-blocking and not through a link: only asks whether it can be read.
            let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
            if let Err(e) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags.bits().cast_signed())
                .open(&path)
            {
                s.reason = format!("unreadable ({e}): left alone");
            }
        } else if !ft.is_dir() && !ft.is_symlink() {
            s.reason = format!("{}: left alone", crate::scan::special_reason(ft));
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
