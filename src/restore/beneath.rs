//! File operations that cannot leave the workspace: every directory is opened from the root
//! down, one component at a time, with `O_NOFOLLOW | O_DIRECTORY`, and every create, rename,
//! chmod, symlink and unlink acts relative to such a descriptor (`openat`, `renameat2`,
//! `unlinkat`). A path checked and then used by name is a race — a directory swapped for a
//! symlink between the check and the write redirects the write; a descriptor is not: once
//! open it names that directory, wherever it is moved. The worst a swap can do is redirect
//! the restore into the original directory under its new name.
//!
//! Each path is replaced or removed by taking out what is there (an exchange, or a rename to
//! a temp name), checking that what came out is the version the plan expected, and only
//! then unlinking it; anything else is put back or kept under a visible name, and named in
//! the result (see [`Taken`]).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::fault::{Faults, Point};
use crate::error::RestoreError;
use crate::object::show_path as lossy;
use crate::object::{EntryKind, ObjectId};
use crate::statcache::StatCache;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temp name for a file being written: `.retrace-tmp-<pid>-<n>`, a hard-excluded
/// name (never captured) of bounded length whatever the target's name (a 255-byte name must
/// still be restorable). Such a file may be incomplete: recovery removes it.
#[must_use]
pub fn temp_name() -> Vec<u8> {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".retrace-tmp-{}-{n}", std::process::id()).into_bytes()
}

/// A fresh name for a complete version on its way in or out: `.retrace-tmp-<pid>-x<n>`
/// (the restore's new version before the exchange, the version taken out after it).
/// Recovery removes one only when the store holds its content.
#[must_use]
pub fn out_name() -> Vec<u8> {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".retrace-tmp-{}-x{n}", std::process::id()).into_bytes()
}

/// A visible name beside `name` for a version that must be kept but cannot stay at `name`:
/// `<name>.retrace-kept-<n>`, or `retrace-kept-<pid>-<n>` when that would be too long.
fn kept_name(name: &[u8]) -> Vec<u8> {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut long = name.to_vec();
    long.extend_from_slice(format!(".retrace-kept-{n}").as_bytes());
    if long.len() <= 255 {
        long
    } else {
        format!("retrace-kept-{}-{n}", std::process::id()).into_bytes()
    }
}

/// Splits a workspace-relative path into its directory and its last component.
#[must_use]
pub fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&[][..], path),
    }
}

/// Splits `rel` for an operation on its last component, refusing a name that is not one
/// plain component (empty, `.`, `..`, or holding a NUL byte): a hostile snapshot must not
/// reach a parent through it.
fn leaf(rel: &[u8]) -> Result<(&[u8], &[u8]), RestoreError> {
    let (parent, name) = split(rel);
    if name.is_empty() || name == b"." || name == b".." || name.contains(&0) {
        return Err(RestoreError::Unsafe {
            path: lossy(rel),
            reason: "not a plain file name".into(),
        });
    }
    Ok((parent, name))
}

/// The version a plan expects at a path it replaces or deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// File, executable or symlink.
    pub kind: EntryKind,
    /// Its blob id.
    pub id: ObjectId,
}

/// What taking a path out found.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// The expected version was there and is gone (replaced or deleted as planned).
    AsPlanned,
    /// The path held something else (someone edited it during the restore): it was left
    /// at its path, or, when that was taken meanwhile, kept at `kept_at`.
    Kept {
        /// Where the other version now is (relative to the workspace).
        kept_at: String,
    },
    /// Nothing was there (deleted meanwhile).
    Missing,
}

/// The workspace root and the directories opened below it, each once.
pub struct Beneath {
    root_path: PathBuf,
    root: Arc<OwnedFd>,
    dirs: Mutex<HashMap<Vec<u8>, Arc<OwnedFd>>>,
    faults: Faults,
}

fn at(root: &Path, rel: &[u8]) -> PathBuf {
    crate::capture::abs_path(root, rel)
}

impl Beneath {
    /// Opens the workspace root (the one path resolved normally: it is the user's choice).
    ///
    /// # Errors
    /// [`RestoreError::Io`] naming the root.
    pub fn open(root: &Path) -> Result<Beneath, RestoreError> {
        let fd = rustix::fs::open(
            root,
            crate::platform::PATH_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RestoreError::Io {
            path: root.to_path_buf(),
            source: e.into(),
        })?;
        Ok(Beneath {
            root_path: root.to_path_buf(),
            root: Arc::new(fd),
            dirs: Mutex::new(HashMap::new()),
            faults: Faults::from_env(),
        })
    }

    /// The test hooks of this restore.
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The workspace root's path (for messages).
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    fn io(&self, rel: &[u8]) -> impl Fn(Errno) -> RestoreError + '_ {
        let path = at(&self.root_path, rel);
        move |e| RestoreError::Io {
            path: path.clone(),
            source: e.into(),
        }
    }

    fn unsafe_dir(rel: &[u8]) -> RestoreError {
        RestoreError::Unsafe {
            path: lossy(rel),
            reason: "not a real directory (a symlink or a file was put in its place); nothing \
                     is written through it"
                .into(),
        }
    }

    /// The directory `rel` (empty: the root), opened component by component without
    /// following symlinks. `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`RestoreError::Unsafe`] when a component is a symlink or not a directory;
    /// [`RestoreError::Io`] otherwise.
    pub fn dir(&self, rel: &[u8]) -> Result<Option<Arc<OwnedFd>>, RestoreError> {
        if rel.is_empty() {
            return Ok(Some(self.root.clone()));
        }
        if let Some(fd) = self.dirs.lock().ok().and_then(|d| d.get(rel).cloned()) {
            return Ok(Some(fd));
        }
        let (parent, name) = leaf(rel).map_err(|_| Self::unsafe_dir(rel))?;
        let Some(up) = self.dir(parent)? else {
            return Ok(None);
        };
        let fd = match rustix::fs::openat(
            &*up,
            name,
            crate::platform::PATH_ONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::NOTDIR | Errno::LOOP) => return Err(Self::unsafe_dir(rel)),
            Err(e) => return Err(self.io(rel)(e)),
        };
        // O_PATH with O_NOFOLLOW could name a symlink itself on some kernels: check.
        let st = rustix::fs::fstat(&fd).map_err(self.io(rel))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(Self::unsafe_dir(rel));
        }
        let fd = Arc::new(fd);
        if let Ok(mut d) = self.dirs.lock() {
            d.insert(rel.to_vec(), fd.clone());
        }
        Ok(Some(fd))
    }

    /// [`Beneath::dir`] for a directory that must exist.
    ///
    /// # Errors
    /// As [`Beneath::dir`]; [`RestoreError::Io`] (not found) when it is missing.
    pub fn existing_dir(&self, rel: &[u8]) -> Result<Arc<OwnedFd>, RestoreError> {
        self.dir(rel)?.ok_or_else(|| self.io(rel)(Errno::NOENT))
    }

    /// Creates directory `rel` (its parent must exist); an existing real directory is fine.
    ///
    /// # Errors
    /// [`RestoreError::Unsafe`] when something else is in the way; I/O errors.
    pub fn mkdir(&self, rel: &[u8]) -> Result<(), RestoreError> {
        let (parent, name) = leaf(rel)?;
        let up = self.existing_dir(parent)?;
        match rustix::fs::mkdirat(&*up, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => self.existing_dir(rel).map(|_| ()),
            Err(e) => Err(self.io(rel)(e)),
        }
    }

    /// Removes directory `rel` if it is empty. Returns whether it was removed.
    ///
    /// # Errors
    /// I/O errors other than "not empty", "gone" or "not a directory".
    pub fn rmdir_if_empty(&self, rel: &[u8]) -> Result<bool, RestoreError> {
        let (parent, name) = leaf(rel)?;
        let up = match self.dir(parent) {
            Ok(Some(up)) => up,
            Ok(None) | Err(RestoreError::Unsafe { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&*up, name, AtFlags::REMOVEDIR) {
            Ok(()) => {
                if let Ok(mut d) = self.dirs.lock() {
                    d.retain(|k, _| k != rel && !k.starts_with(&[rel, b"/"].concat()));
                }
                Ok(true)
            }
            Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST | Errno::NOTDIR) => Ok(false),
            Err(e) => Err(self.io(rel)(e)),
        }
    }

    /// The mode bits of the regular file at `rel`, if one is there.
    fn file_mode(dir: &OwnedFd, name: &[u8]) -> Option<u32> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then_some(st.st_mode)
    }

    /// Writes a new file or symlink at `rel`, a path that must be free, and returns what it
    /// found there: [`Taken::AsPlanned`], or [`Taken::Kept`] when something was created at
    /// `rel` meanwhile (it is kept; ours is discarded). A symlink is created at `rel` whole. A
    /// file is filled by `fill` under a temp name in its directory, created with its final
    /// mode (0644, 0755 with the executable bit of `kind`), then renamed to `rel` without
    /// replacing anything: four system calls and the writes.
    ///
    /// The temp name is one recovery removes unconditionally ([`temp_name`], an incomplete
    /// version), even once the file is complete: it only ever holds the restore's own
    /// content, which the store holds. (Only a name that may hold a version taken out of a
    /// path, someone else's, must be a complete one: see [`Beneath::write_temp`].)
    ///
    /// # Errors
    /// I/O errors (the temp file is removed); `fill`'s errors.
    pub fn write_new(
        &self,
        rel: &[u8],
        kind: EntryKind,
        fill: &mut dyn FnMut(&mut dyn Write) -> Result<(), RestoreError>,
        link_target: Option<&[u8]>,
    ) -> Result<Taken, RestoreError> {
        let (parent, name) = leaf(rel)?;
        let dir = self.existing_dir(parent)?;
        let io = self.io(rel);
        let taken = || Taken::Kept {
            kept_at: lossy(rel),
        };
        if let Some(target) = link_target {
            return match rustix::fs::symlinkat(target, &*dir, name) {
                Ok(()) => Ok(Taken::AsPlanned),
                Err(Errno::EXIST) => Ok(taken()),
                Err(e) => Err(io(e)),
            };
        }
        let mode = if kind == EntryKind::Executable {
            0o755
        } else {
            0o644
        };
        let tmp = temp_name();
        let fd = rustix::fs::openat(
            &*dir,
            tmp.as_slice(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(&io)?;
        let written = (|| {
            let mut f = std::fs::File::from(fd);
            fill(&mut f)?;
            // The mode asked for at the open went through the umask (or a default ACL).
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(&io)
        })();
        let placed = written.and_then(|()| {
            match crate::platform::rename_noreplace(&*dir, tmp.as_slice(), &*dir, name) {
                Ok(()) => Ok(Taken::AsPlanned),
                Err(Errno::EXIST) => Ok(taken()),
                Err(e) => Err(io(e)),
            }
        });
        if !matches!(placed, Ok(Taken::AsPlanned)) {
            let _ = rustix::fs::unlinkat(&*dir, tmp.as_slice(), AtFlags::empty());
        }
        placed
    }

    /// Writes a new file (or symlink) under a temp name in `rel`'s directory, filled by
    /// `fill`, with the executable bit of `kind` (other bits from the file it replaces, else
    /// 0644). Returns the directory, the temp name and the new file's inode.
    ///
    /// # Errors
    /// I/O errors (the temp file is removed); `fill`'s errors.
    pub fn write_temp(
        &self,
        rel: &[u8],
        kind: EntryKind,
        fill: &mut dyn FnMut(&mut dyn Write) -> Result<(), RestoreError>,
        link_target: Option<&[u8]>,
    ) -> Result<(Arc<OwnedFd>, Vec<u8>, u64), RestoreError> {
        let (parent, name) = leaf(rel)?;
        let dir = self.existing_dir(parent)?;
        let io = self.io(rel);
        if let Some(target) = link_target {
            // A symlink is created whole: it can take the name of a complete version at once.
            let tmp = out_name();
            rustix::fs::symlinkat(target, &*dir, tmp.as_slice()).map_err(&io)?;
            let st = rustix::fs::statat(&*dir, tmp.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(&io)?;
            return Ok((dir, tmp, st.st_ino));
        }
        let base = Self::file_mode(&dir, name).unwrap_or(0o644) & 0o7777;
        let mode = if kind == EntryKind::Executable {
            base | ((base & 0o444) >> 2) | 0o100
        } else {
            base & !0o111
        };
        let tmp = temp_name();
        let fd = rustix::fs::openat(
            &*dir,
            tmp.as_slice(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(&io)?;
        let result = (|| {
            let mut f = std::fs::File::from(fd);
            // Unbuffered: `fill` writes whole blobs and chunks.
            fill(&mut f)?;
            rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(&io)?;
            let st = rustix::fs::fstat(&f).map_err(&io)?;
            // Complete: from here on it carries the name of a complete version.
            let out = out_name();
            crate::platform::rename_noreplace(&*dir, tmp.as_slice(), &*dir, out.as_slice())
            .map_err(&io)?;
            Ok((st.st_ino, out))
        })();
        match result {
            Ok((ino, out)) => Ok((dir, out, ino)),
            Err(e) => {
                let _ = rustix::fs::unlinkat(&*dir, tmp.as_slice(), AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Puts the temp file `tmp` (inode and version `ours`) at `rel`. With `over`, the path must hold
    /// that version: it is exchanged out, checked and unlinked; anything else there is put
    /// back and our file discarded. Without `over` the path must be free; something created
    /// there meanwhile is kept and our file discarded.
    ///
    /// # Errors
    /// I/O errors; the temp file is removed.
    pub fn place(
        &self,
        dir: &OwnedFd,
        tmp: &[u8],
        ours: (u64, Expected),
        rel: &[u8],
        over: Option<Expected>,
        cache: &StatCache,
    ) -> Result<Taken, RestoreError> {
        let (_, name) = leaf(rel)?;
        let io = self.io(rel);
        let Some(expected) = over else {
            return match crate::platform::rename_noreplace(dir, tmp, dir, name) {
                Ok(()) => Ok(Taken::AsPlanned),
                Err(Errno::EXIST) => {
                    let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
                    Ok(Taken::Kept {
                        kept_at: lossy(rel),
                    })
                }
                Err(e) => {
                    let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
                    Err(io(e))
                }
            };
        };
        let before = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        match crate::platform::rename_exchange(dir, tmp, dir, name) {
            Ok(()) => {}
            Err(Errno::NOENT) => {
                // Deleted meanwhile: a deletion is the user's too; leave the path empty.
                let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
                return Ok(Taken::Missing);
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
                return Err(io(e));
            }
        }
        // `tmp` now holds what was at the path.
        self.faults.reached(Point::Taken);
        let verdict = Self::check_out(dir, tmp, rel, expected, before.as_ref(), cache);
        if verdict == Check::Matches {
            return self.discard(dir, tmp, rel, expected);
        }
        // Someone else's version: swap it back; what comes out should be our file.
        match crate::platform::rename_exchange(dir, tmp, dir, name) {
            Ok(()) => {
                // Ours, unless yet another version arrived meanwhile or someone wrote into
                // ours while it was at the path: then that is kept visible too.
                let back = rustix::fs::statat(dir, tmp, AtFlags::SYMLINK_NOFOLLOW).ok();
                let untouched = back.is_some_and(|s| s.st_ino == ours.0)
                    && Self::check_out(dir, tmp, rel, ours.1, None, cache) == Check::Matches;
                if untouched {
                    self.faults.reached(Point::Back);
                    // An editor that opened the path while ours was there may write into it
                    // until it is unlinked: discard it as a taken-out version, which keeps
                    // such a late write visible.
                    match self.discard(dir, tmp, rel, ours.1)? {
                        Taken::AsPlanned => Ok(Taken::Kept {
                            kept_at: lossy(rel),
                        }),
                        kept => Ok(kept),
                    }
                } else {
                    self.keep(dir, tmp, rel)
                }
            }
            Err(_) => self.keep(dir, tmp, rel),
        }
    }

    /// Deletes `rel`, which must hold `expected`: it is renamed out, checked and unlinked;
    /// anything else is put back (or kept beside it when the path was taken meanwhile).
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete(
        &self,
        rel: &[u8],
        expected: Expected,
        cache: &StatCache,
    ) -> Result<Taken, RestoreError> {
        let (parent, name) = leaf(rel)?;
        let Some(dir) = self.dir(parent)? else {
            return Ok(Taken::Missing);
        };
        let io = self.io(rel);
        let before = rustix::fs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        let tmp = out_name();
        match crate::platform::rename_noreplace(&*dir, name, &*dir, tmp.as_slice())
        {
            Ok(()) => {}
            Err(Errno::NOENT) => return Ok(Taken::Missing),
            Err(e) => return Err(io(e)),
        }
        self.faults.reached(Point::Taken);
        if Self::check_out(&dir, &tmp, rel, expected, before.as_ref(), cache) == Check::Matches {
            return self.discard(&dir, &tmp, rel, expected);
        }
        match crate::platform::rename_noreplace(&*dir, tmp.as_slice(), &*dir, name)
        {
            Ok(()) => Ok(Taken::Kept {
                kept_at: lossy(rel),
            }),
            Err(_) => self.keep(&dir, &tmp, rel),
        }
    }

    /// Moves `tmp` to a visible kept name beside `rel`.
    fn keep(&self, dir: &OwnedFd, tmp: &[u8], rel: &[u8]) -> Result<Taken, RestoreError> {
        let (parent, name) = split(rel);
        loop {
            let kept = kept_name(name);
            match crate::platform::rename_noreplace(dir, tmp, dir, kept.as_slice())
            {
                Ok(()) => {
                    let mut at = parent.to_vec();
                    if !at.is_empty() {
                        at.push(b'/');
                    }
                    at.extend_from_slice(&kept);
                    return Ok(Taken::Kept {
                        kept_at: lossy(&at),
                    });
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(self.io(rel)(e)),
            }
        }
    }

    /// Unlinks a taken-out version that matched, then looks at it once more through a
    /// descriptor: a write that landed between the check and the unlink is put back.
    fn discard(
        &self,
        dir: &OwnedFd,
        tmp: &[u8],
        rel: &[u8],
        expected: Expected,
    ) -> Result<Taken, RestoreError> {
        let io = self.io(rel);
        if expected.kind == EntryKind::Symlink {
            // A symlink cannot be written through: what was checked is what is unlinked.
            rustix::fs::unlinkat(dir, tmp, AtFlags::empty()).map_err(io)?;
            return Ok(Taken::AsPlanned);
        }
        let fd = match rustix::fs::openat(
            dir,
            tmp,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => return Err(io(e)),
        };
        let first = rustix::fs::fstat(&fd).map_err(&io)?;
        rustix::fs::unlinkat(dir, tmp, AtFlags::empty()).map_err(&io)?;
        let after = rustix::fs::fstat(&fd).map_err(&io)?;
        // An unlink sets the ctime, not the mtime: a write since `first` would have set the
        // mtime to now, which differs from an mtime that is not recent.
        let unchanged = first.st_size == after.st_size
            && first.st_mtime == after.st_mtime
            && first.st_mtime_nsec == after.st_mtime_nsec
            && !recent(&after);
        if unchanged || hash_fd(&fd).is_ok_and(|id| id == expected.id) {
            return Ok(Taken::AsPlanned);
        }
        // Written to between the check and the unlink: copy it back, visibly.
        let copy = temp_name();
        let out = rustix::fs::openat(
            dir,
            copy.as_slice(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(after.st_mode & 0o7777),
        )
        .map_err(&io)?;
        let mut src = std::fs::File::from(fd);
        let mut dst = std::fs::File::from(out);
        let copied = std::io::Seek::rewind(&mut src)
            .and_then(|()| std::io::copy(&mut src, &mut dst))
            .and_then(|_| dst.flush());
        if let Err(e) = copied {
            let _ = rustix::fs::unlinkat(dir, copy.as_slice(), AtFlags::empty());
            return Err(RestoreError::Io {
                path: at(&self.root_path, rel),
                source: e,
            });
        }
        self.keep(dir, &copy, rel)
    }

    /// Whether the version taken out to `tmp` is `expected`: by `lstat` when the stat cache
    /// vouches for the path's stat before it was taken out and nothing changed since, else
    /// by content.
    fn check_out(
        dir: &OwnedFd,
        tmp: &[u8],
        rel: &[u8],
        expected: Expected,
        before: Option<&rustix::fs::Stat>,
        cache: &StatCache,
    ) -> Check {
        let Ok(st) = rustix::fs::statat(dir, tmp, AtFlags::SYMLINK_NOFOLLOW) else {
            return Check::Differs;
        };
        let ft = FileType::from_raw_mode(st.st_mode);
        if expected.kind == EntryKind::Symlink {
            if ft != FileType::Symlink {
                return Check::Differs;
            }
            return match rustix::fs::readlinkat(dir, tmp, Vec::new()) {
                Ok(t) if ObjectId::of_blob(t.as_bytes()) == expected.id => Check::Matches,
                _ => Check::Differs,
            };
        }
        let exec = st.st_mode & 0o100 != 0;
        if ft != FileType::RegularFile || exec != (expected.kind == EntryKind::Executable) {
            return Check::Differs;
        }
        // The stat cache vouches for the path's state before it was taken out (its mtime
        // settled), and what came out is that inode with that mtime, not recent: a write
        // since would have set the mtime to now (a rename sets only the ctime).
        let vouched = before.is_some_and(|b| {
            b.st_ino == st.st_ino
                && b.st_size == st.st_size
                && b.st_mtime == st.st_mtime
                && b.st_mtime_nsec == st.st_mtime_nsec
                && !recent(&st)
                && cache
                    .lookup(&scan_entry(rel, b))
                    .is_some_and(|(id, _)| id == expected.id)
        });
        if vouched {
            return Check::Matches;
        }
        let Ok(fd) = rustix::fs::openat(
            dir,
            tmp,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Check::Differs;
        };
        if hash_fd(&fd).is_ok_and(|id| id == expected.id) {
            Check::Matches
        } else {
            Check::Differs
        }
    }

    /// Removes the temp files a restore by process `pid` left in `dirs` (killed between
    /// writing one and renaming it, or between taking a version out and unlinking it). A
    /// temp file whose content the store holds loses nothing and is removed; one it does not
    /// hold (a version someone wrote during the restore) is kept under a visible name.
    /// Returns the kept paths.
    pub fn sweep_temp_files<'a>(
        &self,
        dirs: impl Iterator<Item = &'a [u8]>,
        pid: u32,
        stored: &dyn Fn(&ObjectId) -> bool,
    ) -> Vec<String> {
        let ours = format!(".retrace-tmp-{pid}-");
        let complete = format!(".retrace-tmp-{pid}-x");
        let mut kept = Vec::new();
        for d in dirs {
            let Ok(Some(dir)) = self.dir(d) else {
                continue;
            };
            let Ok(listing) = rustix::fs::openat(
                &*dir,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let Ok(mut entries) = rustix::fs::Dir::read_from(&listing) else {
                continue;
            };
            let mut names = Vec::new();
            while let Some(Ok(e)) = entries.next() {
                let name = e.file_name().to_bytes();
                if name.starts_with(ours.as_bytes()) {
                    names.push(name.to_vec());
                }
            }
            for name in names {
                // A file still being written is only ever the restore's own, incomplete.
                if !name.starts_with(complete.as_bytes()) || Self::is_stored(&dir, &name, stored) {
                    let _ = rustix::fs::unlinkat(&*dir, name.as_slice(), AtFlags::empty());
                } else {
                    let mut rel = d.to_vec();
                    if !rel.is_empty() {
                        rel.push(b'/');
                    }
                    rel.extend_from_slice(b"recovered");
                    if let Ok(Taken::Kept { kept_at }) = self.keep(&dir, &name, &rel) {
                        kept.push(kept_at);
                    }
                }
            }
        }
        kept
    }

    fn is_stored(dir: &OwnedFd, name: &[u8], stored: &dyn Fn(&ObjectId) -> bool) -> bool {
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return true; // gone
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => rustix::fs::readlinkat(dir, name, Vec::new())
                .is_ok_and(|t| stored(&ObjectId::of_blob(t.as_bytes()))),
            FileType::RegularFile => rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()
            .and_then(|fd| hash_fd(&fd).ok())
            .is_some_and(|id| stored(&id)),
            _ => false,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Check {
    Matches,
    Differs,
}

/// Whether a file's mtime is too recent for an unchanged mtime to prove that nothing was
/// written since (timestamps are coarse: a second write in the same tick keeps them). The
/// ctime is not looked at: taking a file out (a rename) sets it.
fn recent(st: &rustix::fs::Stat) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
        });
    let mtime = st
        .st_mtime
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_mtime_nsec.cast_signed());
    mtime > now.saturating_sub(crate::statcache::RACY_MARGIN_NS)
}

fn scan_entry(rel: &[u8], st: &rustix::fs::Stat) -> crate::scan::ScanEntry {
    let ns = |s: i64, n: u64| {
        s.saturating_mul(1_000_000_000)
            .saturating_add(n.cast_signed())
    };
    crate::scan::ScanEntry {
        path: rel.to_vec(),
        kind: crate::scan::ScanKind::File,
        size: st.st_size.cast_unsigned(),
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        ino: st.st_ino,
        mode: st.st_mode,
        listing: false,
        clean: false,
        linked: st.st_nlink > 1,
    }
}

/// The blob id of an open file's content, read from its start.
fn hash_fd(fd: &impl AsFd) -> std::io::Result<ObjectId> {
    let mut f = std::fs::File::from(fd.as_fd().try_clone_to_owned()?);
    std::io::Seek::rewind(&mut f)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(ObjectId(*h.finalize().as_bytes()))
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
