//! Where stores live: `$RETRACE_HOME`, else `$XDG_STATE_HOME/retrace`, else
//! `~/.local/state/retrace`; one directory per workspace named by a hash of its root path.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{OpenError, StoreError};

/// The retrace home directory from the environment.
#[must_use]
pub fn default_home() -> PathBuf {
    default_home_and_source().0
}

/// [`default_home`] and where it came from: `RETRACE_HOME`, `XDG_STATE_HOME` or `HOME`.
#[must_use]
pub fn default_home_and_source() -> (PathBuf, &'static str) {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(h) = env("RETRACE_HOME") {
        return (h, "RETRACE_HOME");
    }
    if let Some(x) = env("XDG_STATE_HOME") {
        return (x.join("retrace"), "XDG_STATE_HOME");
    }
    let home = env("HOME").unwrap_or_else(|| PathBuf::from("/tmp"));
    (home.join(".local/state/retrace"), "HOME")
}

/// The workspace id: the first 32 hex digits of `blake3(canonical root path)`.
#[must_use]
pub fn workspace_id(root: &Path) -> String {
    blake3::hash(root.as_os_str().as_encoded_bytes()).to_hex()[..32].to_string()
}

/// Creates `dir` and its missing parents with mode 0700, whatever the umask.
///
/// # Errors
/// [`StoreError::CreateDir`] naming the directory.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|source| StoreError::CreateDir {
            path: dir.into(),
            source,
        })
}

/// Writes `bytes` to `path` as a file only its owner can read: created 0600, or an existing
/// file truncated and set to 0600, whatever its mode was.
///
/// # Errors
/// The I/O error.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .mode(0o600)
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)
}

/// The workspace root for a directory: the nearest enclosing directory that holds `.git` (the
/// git toplevel) or that retrace already keeps a store for under `home`, else the directory
/// itself, as git looks upward for `.git`. `dir` must already be canonical.
#[must_use]
fn find_root(dir: &Path, home: &Path) -> PathBuf {
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    let held = |d: &Path| {
        home.join("workspaces")
            .join(workspace_id(d))
            .join("store.redb")
            .is_file()
    };
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.join(".git").symlink_metadata().is_ok() || held(d) {
            return d.to_path_buf();
        }
        cur = d.parent();
    }
    dir.to_path_buf()
}

/// Why `root` must not be snapshotted, if it must not: the home directory or a folder above
/// it, a filesystem root, or the temp directory (snapshotting them would copy `.ssh`, browser
/// profiles, other programs' files). Their subfolders are ordinary workspaces. `root` must
/// be canonical.
#[must_use]
fn refused_root(root: &Path) -> Option<String> {
    let canon = |p: PathBuf| p.canonicalize().unwrap_or(p);
    if root.parent().is_none() {
        return Some(format!("{} is a filesystem root", root.display()));
    }
    for tmp in [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
    ] {
        if canon(tmp) == root {
            return Some(format!("{} is the temporary directory", root.display()));
        }
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = canon(PathBuf::from(home));
        if home.starts_with(root) {
            return Some(if home == root {
                format!("{} is your home directory", root.display())
            } else {
                format!("{} holds your home directory", root.display())
            });
        }
    }
    None
}

/// A workspace root as every command resolves it: see [`resolve_root`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The canonical root directory.
    pub path: PathBuf,
    /// Why files are never snapshotted there (the home directory or above, a filesystem
    /// root, the temp directory), or None for an ordinary workspace.
    pub refused: Option<String>,
}

/// The workspace containing `dir`: the nearest enclosing directory that is a git toplevel or
/// a workspace retrace already holds a store for under the retrace home `home`, else `dir`
/// itself; a refused place above (dotfiles in a git repository at the home directory, a
/// session kept at the home directory) does not make its ordinary subfolders refused too.
/// The one rule every command uses.
///
/// # Errors
/// [`OpenError::Workspace`] for a missing path or one that is not a directory.
pub fn resolve_root(dir: &Path, home: &Path) -> Result<Root, OpenError> {
    let canonical = dir.canonicalize().map_err(|e| OpenError::Workspace {
        path: dir.into(),
        reason: format!("{e}; pass an existing directory with -C"),
    })?;
    if !canonical.is_dir() {
        return Err(OpenError::Workspace {
            path: dir.into(),
            reason: "not a directory".into(),
        });
    }
    let mut path = find_root(&canonical, home);
    if path != canonical && refused_root(&path).is_some() {
        path.clone_from(&canonical);
    }
    let refused = refused_root(&path);
    Ok(Root { path, refused })
}
