//! Opening paths below the workspace root without ever leaving it.
//!
//! A capture reads what a walk listed a moment before, and another process may swap a
//! directory for a symlink in between (`mv d d.real; ln -s /elsewhere d`). Resolving
//! `root/d/f` by path would then follow the symlink and read files outside the workspace.
//! Every read of the walk, the capture and the watcher's crawl goes through [`Root`]: the
//! root is opened once (its path is the user's choice, resolved normally), and every path
//! below it is resolved from that descriptor with no symlink followed in any component
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or, where the kernel has no
//! `openat2`, one `openat(O_NOFOLLOW | O_DIRECTORY)` per component). A swapped directory
//! then fails to open (`ELOOP`): it is left out and named, never followed.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// Cleared once `openat2` is found missing (old kernels, some seccomp filters): from then
/// on paths are resolved one component at a time.
static HAS_OPENAT2: AtomicBool = AtomicBool::new(true);

/// The workspace root, open, from which paths below it are resolved.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

/// Whether a failed resolution beneath the root means that a component is no longer a
/// real directory below the root (a symlink or a file was put in its place; `ELOOP`,
/// `ENOTDIR`, or `EXDEV` for a way out).
#[must_use]
pub fn swapped(e: Errno) -> bool {
    e == Errno::LOOP || e == Errno::NOTDIR || e == Errno::XDEV
}

impl Root {
    /// Opens `path` (symlinks in it followed: the root is the user's choice).
    ///
    /// # Errors
    /// The error of `open(2)`.
    pub fn open(path: &Path) -> std::io::Result<Root> {
        let fd = rustix::fs::open(
            path,
            crate::platform::PATH_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root { fd })
    }

    /// Opens `rel` (workspace-relative; empty: the root itself) with `flags`, following no
    /// symlink in any component, the last included: an error [`swapped`] recognises when a
    /// component is a symlink or not a directory.
    ///
    /// # Errors
    /// The errno of the failed open.
    pub fn open_at(&self, rel: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
        open_beneath(self.fd.as_fd(), rel, flags)
    }

    /// [`Root::open_at`] for a directory, as `O_PATH` (for `*at` calls relative to it).
    ///
    /// # Errors
    /// As [`Root::open_at`].
    pub fn dir(&self, rel: &[u8]) -> rustix::io::Result<OwnedFd> {
        self.open_at(rel, crate::platform::PATH_ONLY | OFlags::DIRECTORY)
    }
}

/// Opens `rel` below `dir` with `flags | O_CLOEXEC | O_NOFOLLOW`, following no symlink.
///
/// # Errors
/// The errno of the failed open (`ELOOP` for a symlink on the way).
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let rel = if rel.is_empty() { &b"."[..] } else { rel };
    if HAS_OPENAT2.load(Ordering::Relaxed) {
        match crate::platform::open_beneath(dir, rel, flags) {
            crate::platform::Beneath::Done(r) => return r,
            crate::platform::Beneath::NoSuchCall => HAS_OPENAT2.store(false, Ordering::Relaxed),
            crate::platform::Beneath::Refused => {}
        }
    }
    by_components(dir, rel, flags)
}

/// The fallback of [`open_beneath`]: one `openat` per component, none followed, every one
/// checked to be a directory by its descriptor.
fn by_components(dir: BorrowedFd<'_>, rel: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let mut parts = rel
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .peekable();
    let mut here: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        if part == b".." {
            return Err(Errno::XDEV);
        }
        let at = here.as_ref().map_or(dir, AsFd::as_fd);
        if parts.peek().is_none() {
            return rustix::fs::openat(at, OsStr::from_bytes(part), flags, Mode::empty());
        }
        let next = rustix::fs::openat(
            at,
            OsStr::from_bytes(part),
            crate::platform::PATH_ONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // O_PATH with O_NOFOLLOW can open a symlink itself on some kernels: check.
        if FileType::from_raw_mode(rustix::fs::fstat(&next)?.st_mode) != FileType::Directory {
            return Err(Errno::LOOP);
        }
        here = Some(next);
    }
    rustix::fs::openat(dir, ".", flags, Mode::empty())
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
