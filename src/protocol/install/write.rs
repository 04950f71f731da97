//! Writing a settings or command file: links followed, atomically, keeping its owner and
//! mode.

use std::fs::{Metadata, OpenOptions, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file `path` names once its symlinks are followed (also when the last target does not
/// exist yet). A settings file kept as a link (a dotfiles manager's) is edited where it lives
/// and stays a link.
pub(super) fn follow_links(path: &Path) -> Result<PathBuf, String> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            // `join` keeps an absolute target as it is.
            Ok(target) => {
                p = p
                    .parent()
                    .map_or_else(|| target.clone(), |d| d.join(&target));
            }
            // Not a link (EINVAL), or nothing there yet: this is the file.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::InvalidInput | std::io::ErrorKind::NotFound
                ) =>
            {
                return Ok(p);
            }
            Err(e) => return Err(format!("cannot read the link {}: {e}", p.display())),
        }
    }
    Err(format!(
        "{}: too many levels of symbolic links; point it at a real file",
        path.display()
    ))
}

/// The file `path` names (through its links) and its metadata when it exists, after
/// checking that the user lets it be changed: a file without a write permission bit is
/// refused even for root, who could write it anyway.
pub(super) fn writable(path: &Path) -> Result<(PathBuf, Option<Metadata>), String> {
    let real = follow_links(path)?;
    let meta = match std::fs::metadata(&real) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((real, None)),
        Err(e) => return Err(format!("cannot read {}: {e}", real.display())),
    };
    let read_only = meta.permissions().mode() & 0o222 == 0
        || rustix::fs::access(&real, rustix::fs::Access::WRITE_OK).is_err();
    if read_only {
        let via = if real == path {
            String::new()
        } else {
            format!(" (where {} points)", path.display())
        };
        return Err(format!(
            "{}{via} is read-only for you; nothing was changed. Make it writable \
             (chmod u+w) to let retrace edit it",
            real.display()
        ));
    }
    Ok((real, Some(meta)))
}

/// Replaces the file `path` names (through any symlinks) by `text`: written to a new file
/// beside it with the old file's mode and owner, then renamed over it, so a reader sees the
/// old or the new file. A read-only file is refused (see [`writable`]). A new file is
/// created 0600 when `private` (else as the umask has it).
pub(super) fn write_atomic(path: &Path, text: &str, private: bool) -> Result<(), String> {
    let (real, old) = writable(path)?;
    let (dir, name) = match (real.parent(), real.file_name()) {
        (Some(d), Some(n)) => (d, n.to_string_lossy()),
        _ => return Err(format!("{} is not a file's path", real.display())),
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let cannot = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", real.display());
    let mut created = None;
    for n in 0..100 {
        let tmp = dir.join(format!(".{name}.retrace-{}-{n}", std::process::id()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        if old.is_some() || private {
            // Private until it has the old file's mode.
            options.mode(0o600);
        }
        match options.open(&tmp) {
            Ok(f) => {
                created = Some((tmp, f));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cannot(&e)),
        }
    }
    let Some((tmp, mut file)) = created else {
        return Err(cannot(&"no free temporary name beside it"));
    };
    let result = (|| {
        file.write_all(text.as_bytes()).map_err(|e| cannot(&e))?;
        if let Some(old) = &old {
            keep_owner_and_mode(&file, old, &real)?;
        } else if private {
            file.set_permissions(Permissions::from_mode(0o600))
                .map_err(|e| cannot(&e))?;
        }
        file.sync_all().map_err(|e| cannot(&e))?;
        std::fs::rename(&tmp, &real).map_err(|e| cannot(&e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Gives the new file `file` the owner (when we may: as root, or a group we are in) and
/// the mode of the file `old` it replaces.
pub(super) fn keep_owner_and_mode(file: &std::fs::File, old: &Metadata, real: &Path) -> Result<(), String> {
    let new = file
        .metadata()
        .map_err(|e| format!("cannot write {}: {e}", real.display()))?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid())
        && let Err(e) = std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid()))
    {
        // Only the group could not be kept, of a file that is ours anyway.
        let only_group = e.kind() == std::io::ErrorKind::PermissionDenied && new.uid() == old.uid();
        if !only_group {
            return Err(format!(
                "cannot keep the owner ({}:{}) of {}: {e}; nothing was changed",
                old.uid(),
                old.gid(),
                real.display()
            ));
        }
    }
    file.set_permissions(Permissions::from_mode(old.mode() & 0o7777))
        .map_err(|e| format!("cannot keep the mode of {}: {e}", real.display()))
}

