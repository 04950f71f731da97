//! Every call retrace makes that only Linux offers, in one module, each with the contract the
//! rest of the crate relies on. `docs/platforms.md` lists them with what macOS and Windows
//! offer for each, what a port's tests must cover and what it costs; `.ci/layers.py` keeps
//! the calls here (no file elsewhere names `openat2`, `renameat_with`, `O_PATH`, `/proc` or
//! inotify).
//!
//! On any other target the build stops at the `compile_error!` below, with one line pointing
//! to that document: never a partial build that fails at run time.

#[cfg(not(target_os = "linux"))]
compile_error!(
    "retrace runs on Linux only for now: docs/platforms.md lists each Linux-specific call \
     (src/platform.rs) and what a port to this system needs"
);

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

/// inotify, the watcher's source of change events (`init`, `add_watch`, `remove_watch`,
/// `Reader`). Contract: one event per change of a watched directory's entries, queued
/// until read, and `IN_Q_OVERFLOW` when events were lost.
pub use rustix::fs::inotify;

/// `O_PATH`: opens a directory (or file) only to name it in `*at` calls and `fstat`, without
/// read permission and without reading it.
pub const PATH_ONLY: OFlags = OFlags::PATH;

/// What [`open_beneath`] did.
#[derive(Debug)]
pub enum Beneath {
    /// The call ran: the descriptor, or the errno (`ELOOP` for a symlink on the way, `EXDEV`
    /// for a way out of `dir`).
    Done(rustix::io::Result<OwnedFd>),
    /// The kernel has no such call: resolve one component at a time from now on.
    NoSuchCall,
    /// This call was refused (a filter) or kept racing renames: resolve by hand this time.
    Refused,
}

/// Opens `rel` below `dir` in one call that follows no symlink in any component and never
/// resolves outside `dir` (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), asking
/// again when a rename elsewhere raced the lookup.
#[must_use]
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &[u8], flags: OFlags) -> Beneath {
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    for _ in 0..4 {
        match rustix::fs::openat2(dir, OsStr::from_bytes(rel), flags, Mode::empty(), how) {
            // A rename elsewhere on the system raced the lookup: the kernel asks again.
            Err(Errno::AGAIN) => {}
            Err(Errno::NOSYS) => return Beneath::NoSuchCall,
            // A filter that refuses the call itself.
            Err(Errno::PERM) => return Beneath::Refused,
            r => return Beneath::Done(r),
        }
    }
    Beneath::Refused
}

/// Renames `from` (in `from_dir`) to `to` (in `to_dir`) atomically, failing with `EEXIST`
/// when `to` exists (`renameat2(RENAME_NOREPLACE)`): never replaces what another writer
/// put there.
///
/// # Errors
/// The errno of the rename.
pub fn rename_noreplace(
    from_dir: impl AsFd,
    from: &[u8],
    to_dir: impl AsFd,
    to: &[u8],
) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE)
}

/// Swaps `a` (in `a_dir`) and `b` (in `b_dir`) atomically (`renameat2(RENAME_EXCHANGE)`):
/// both names exist throughout, each naming the other's file after.
///
/// # Errors
/// The errno of the rename (`ENOENT` when either is missing).
pub fn rename_exchange(
    a_dir: impl AsFd,
    a: &[u8],
    b_dir: impl AsFd,
    b: &[u8],
) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(a_dir, a, b_dir, b, RenameFlags::EXCHANGE)
}

/// A path naming the file or directory open as `fd` (`/proc/self/fd/<n>`): usable while
/// `fd` stays open, by calls that take a path, whatever the file was renamed to.
#[must_use]
pub fn fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// A file whose readiness changes when this process's mounts change (`/proc/self/mountinfo`
/// polled for `POLLPRI`), if it can be opened.
#[must_use]
pub fn mount_table() -> Option<std::fs::File> {
    std::fs::File::open("/proc/self/mountinfo").ok()
}

/// How many directories one user's watchers may watch in all
/// (`fs.inotify.max_user_watches`), as text, if it can be read.
#[must_use]
pub fn max_user_watches() -> Option<String> {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .map(|t| t.trim().to_string())
}

/// This machine's name, if it can be read.
#[must_use]
pub fn hostname() -> Option<String> {
    read_trim("/proc/sys/kernel/hostname")
}

/// An id that changes at every boot of this machine, if it can be read.
#[must_use]
pub fn boot_id() -> Option<String> {
    read_trim("/proc/sys/kernel/random/boot_id")
}

/// 128 random bits as text (a fresh UUID), if the kernel gives them.
#[must_use]
pub fn random_uuid() -> Option<String> {
    read_trim("/proc/sys/kernel/random/uuid")
}

/// An id of this process's pid namespace: equal for two processes exactly when their pids
/// name the same processes.
///
/// # Errors
/// The error reading it.
pub fn pid_namespace() -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map(|m| m.ino())
}

/// The text of process `pid`'s `stat` record (its state, parent, start time, …), if it
/// exists and can be read; parsed by [`parent_in_stat`] and `lease::parse_start_time`.
#[must_use]
pub fn process_stat(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// The parent pid in the text of a process's `stat` record (field 4, after the
/// parenthesised name, which may hold spaces and parentheses).
#[must_use]
pub fn parent_in_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// What process `pid` runs, as far as this process may read it: its short name (`comm`),
/// its executable's file name and its arguments (`argv[0]` first). Empty where unreadable.
#[must_use]
pub fn process_command(pid: u32) -> (String, String, Vec<Vec<u8>>) {
    let proc = format!("/proc/{pid}");
    let comm = std::fs::read_to_string(format!("{proc}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string();
    let exe = std::fs::read_link(format!("{proc}/exe"))
        .ok()
        .and_then(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
        .unwrap_or_default();
    let cmdline = std::fs::read(format!("{proc}/cmdline")).unwrap_or_default();
    let argv = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(&cmdline)
        .split(|b| *b == 0)
        .map(<[u8]>::to_vec)
        .collect();
    (comm, exe, argv)
}

/// The directories (relative to `root`) of the files below `root` that some process maps
/// shared and writable (writes through such a mapping raise no change event), read from
/// the mappings of every process this one may inspect (the user's own). Empty where they
/// cannot be read.
#[must_use]
pub fn mapped_for_writing(root: &Path) -> Vec<Vec<u8>> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut prefix = root.as_os_str().as_bytes().to_vec();
    prefix.push(b'/');
    let mut out = std::collections::HashSet::new();
    for p in procs.flatten() {
        if !p.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(maps) = std::fs::read(p.path().join("maps")) else {
            continue;
        };
        for line in maps.split(|&b| b == b'\n') {
            // address perms offset dev inode path: "rw-s" is a shared writable mapping.
            let mut fields = line.splitn(6, |&b| b == b' ');
            let perms = fields.nth(1).unwrap_or_default();
            if perms.get(1) != Some(&b'w') || perms.get(3) != Some(&b's') {
                continue;
            }
            let path = fields.nth(3).unwrap_or_default().trim_ascii_start();
            if let Some(rel) = path.strip_prefix(prefix.as_slice())
                && !rel.ends_with(b" (deleted)")
            {
                let dir = rel
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(&rel[..0], |i| &rel[..i]);
                out.insert(dir.to_vec());
            }
        }
    }
    out.into_iter().collect()
}

/// This process's resident memory now (`now`: true) or at its peak, in KiB, if readable.
#[must_use]
pub fn memory_kib(now: bool) -> Option<u64> {
    let key = if now { "VmRSS:" } else { "VmHWM:" };
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Puts the calling thread (and the threads it starts later) in the idle I/O class: its
/// reads and writes wait while any other process uses the disk (`ioprio_set`). A refusal
/// changes nothing.
pub fn idle_io_priority() {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    // SAFETY: `ioprio_set(which, who, ioprio)` takes three integers and reads or writes
    // no memory of this process; `who` 0 is the calling thread.
    let _ = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
}

/// Caps glibc's malloc arenas at two (no-op with another C library): call it before any
/// other thread exists.
pub fn cap_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `mallopt` only sets an allocator parameter, under glibc's own lock; it is
    // called before any other thread exists, and a refusal (return 0) changes nothing.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// What retrace may rely on about the filesystem holding a path, read from its `statfs`
/// type number (Linux's filesystem magic numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filesystem {
    /// A local filesystem whose directory mtimes change whenever an entry is created,
    /// removed or renamed, as seen by this host (ext4, XFS, Btrfs, tmpfs, ZFS, F2FS,
    /// bcachefs): a listing may be reused while its directory's mtime is unchanged.
    Local,
    /// A network or userspace filesystem (named), on which changes made elsewhere reach
    /// neither inotify nor, promptly, directory mtimes.
    Remote(&'static str),
    /// Anything else (overlayfs, an unknown type, or `statfs` failed): promise nothing.
    Unknown,
}

/// The kind of filesystem holding `path` (see [`Filesystem`]).
#[must_use]
pub fn filesystem(path: &Path) -> Filesystem {
    let Ok(s) = rustix::fs::statfs(path) else {
        return Filesystem::Unknown;
    };
    #[allow(
        clippy::useless_conversion,
        reason = "f_type's width differs by target"
    )]
    let t = i64::from(s.f_type);
    filesystem_of_type(t)
}

fn filesystem_of_type(t: i64) -> Filesystem {
    match t {
        // ext2/3/4, XFS, Btrfs, tmpfs, ZFS, F2FS, bcachefs.
        0xEF53 | 0x5846_5342 | 0x9123_683E | 0x0102_1994 | 0x2FC1_2FC1 | 0xF2F5_2010
        | 0xCA45_1A4E => Filesystem::Local,
        0x6969 => Filesystem::Remote("NFS"),
        0x517B => Filesystem::Remote("SMB"),
        0xFF53_4D42 => Filesystem::Remote("CIFS"),
        0xFE53_4D42 => Filesystem::Remote("SMB2"),
        0x6573_5546 => Filesystem::Remote("FUSE"),
        0x0102_1997 => Filesystem::Remote("9p"),
        0x00C3_6400 => Filesystem::Remote("Ceph"),
        0x5346_414F | 0x6B41_4653 => Filesystem::Remote("AFS"),
        _ => Filesystem::Unknown,
    }
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
#[path = "platform_tests.rs"]
mod tests;
