//! Git's ignore rules as the walk applies them: each directory's `.gitignore` (read on
//! first use, beneath the root), its parents' up to the walk root, the root's
//! `info/exclude` and the global excludes file; and the key of the rules outside the tree.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::OFlags;
use rustix::io::Errno;

use super::{Found, Walk};
use crate::scan::{Skipped, exclude};

/// Ignore rules in force in one directory: its own `.gitignore`, then its parents' up to
/// the walk root, then the root's `.git/info/exclude` and the global excludes file.
pub(super) struct Rules {
    /// The directory (absolute).
    pub(super) dir: PathBuf,
    /// Whether it holds a `.gitignore` to read.
    pub(super) has_file: bool,
    /// Its `.gitignore`, read on first use (a reused listing never needs it unless a
    /// directory below it is listed).
    pub(super) gitignore: OnceLock<Gitignore>,
    pub(super) parent: Option<Arc<Rules>>,
    /// At a walk root: `.git/info/exclude` and the global excludes file.
    pub(super) root: Option<RootRules>,
}

pub(super) struct RootRules {
    exclude: Gitignore,
    global: Gitignore,
}

impl Rules {
    pub(super) fn gitignore(&self, found: &mut Found, walk: &Walk<'_>) -> &Gitignore {
        self.gitignore.get_or_init(|| {
            if !self.has_file {
                return Gitignore::empty();
            }
            let path = self.dir.join(".gitignore");
            let rel = rel_of(walk.root, &path);
            // Read beneath the root like every file; a FIFO or device named `.gitignore`
            // would block or never end: not read.
            let bytes = match walk.open_beneath(&rel, OFlags::RDONLY | OFlags::NONBLOCK) {
                Ok(fd) => small_fd(fd.into()),
                // Gone, or a symlink (captured as a symlink; git does not follow one either).
                Err(Errno::NOENT | Errno::LOOP) => None,
                // Unreadable: its rules are not applied, and that is said (the listing is
                // then not reused).
                Err(e) => {
                    found.skipped.push(Skipped {
                        path: crate::object::show_path(&rel),
                        reason: format!(
                            "cannot be read, its rules are not applied: {}",
                            std::io::Error::from(e)
                        ),
                    });
                    None
                }
            };
            let Some(bytes) = bytes else {
                return Gitignore::empty();
            };
            let (gi, err) = parse_gitignore(&self.dir, &path, &bytes);
            if let Some(err) = err {
                found.skipped.push(Skipped {
                    path: crate::object::show_path(&rel),
                    reason: err.to_string(),
                });
            }
            gi
        })
    }

    /// Whether `path` (absolute, inside this directory) is ignored: the nearest
    /// `.gitignore` with a matching pattern decides, then the root's exclude file, then the
    /// global one, as git and the `ignore` crate decide.
    pub(super) fn ignored(&self, path: &Path, is_dir: bool, found: &mut Found, walk: &Walk<'_>) -> bool {
        let mut node = Some(self);
        while let Some(r) = node {
            match r.gitignore(found, walk).matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
            if let Some(rr) = &r.root {
                for g in [&rr.exclude, &rr.global] {
                    match g.matched(path, is_dir) {
                        Match::Ignore(_) => return true,
                        Match::Whitelist(_) => return false,
                        Match::None => {}
                    }
                }
                return false;
            }
            node = r.parent.as_deref();
        }
        false
    }
}

fn rel_of(root: &Path, path: &Path) -> Vec<u8> {
    let (root, path) = (root.as_os_str().as_bytes(), path.as_os_str().as_bytes());
    match path.strip_prefix(root) {
        Some(rest) => rest.strip_prefix(b"/").unwrap_or(rest).to_vec(),
        None => path.to_vec(),
    }
}

/// The directory holding `info/exclude` for a repository whose `.git` is in `dir`: the
/// `.git` directory, or for a worktree's `.git` file, its common directory.
fn git_common_dir(dir: &Path) -> PathBuf {
    let dot_git = dir.join(".git");
    let Some(text) = small_file(&dot_git).and_then(|b| String::from_utf8(b).ok()) else {
        return dot_git;
    };
    let Some(gitdir) = text.lines().next().and_then(|l| l.strip_prefix("gitdir: ")) else {
        return dot_git;
    };
    let real = dir.join(gitdir.trim());
    match small_file(&real.join("commondir")).and_then(|b| String::from_utf8(b).ok()) {
        Some(common) => real.join(common.lines().next().unwrap_or("").trim()),
        None => real,
    }
}

/// Ignore files and `.git` files larger than this are not read (no real one comes close).
const RULES_FILE_MAX: u64 = 16 << 20;

/// Builds the rules of one `.gitignore` (`path`, in `dir`) from its bytes, as
/// `GitignoreBuilder::add` would from the file: lines split on `\n`, a leading BOM dropped,
/// lines that are not UTF-8 or not valid globs reported (and skipped).
fn parse_gitignore(dir: &Path, path: &Path, bytes: &[u8]) -> (Gitignore, Option<ignore::Error>) {
    let mut b = GitignoreBuilder::new(dir);
    let mut errs = Vec::new();
    let tag = |line: usize, err: ignore::Error| ignore::Error::WithPath {
        path: path.to_path_buf(),
        err: Box::new(ignore::Error::WithLineNumber {
            line: line as u64 + 1,
            err: Box::new(err),
        }),
    };
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, line) in body.split(|&c| c == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else {
            let invalid = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            );
            errs.push(tag(i, ignore::Error::Io(invalid)));
            continue;
        };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        if let Err(err) = b.add_line(Some(path.to_path_buf()), line) {
            errs.push(tag(i, err));
        }
    }
    let gi = b.build().unwrap_or_else(|_| Gitignore::empty());
    let err = match errs.len() {
        0 => None,
        1 => errs.pop(),
        _ => Some(ignore::Error::Partial(errs)),
    };
    (gi, err)
}

/// The bytes of an open file if it is a regular file of at most [`RULES_FILE_MAX`].
fn small_fd(f: std::fs::File) -> Option<Vec<u8>> {
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > RULES_FILE_MAX {
        return None;
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, RULES_FILE_MAX), &mut out).ok()?;
    Some(out)
}

/// The bytes of `path` if it is a regular file (after symlinks) of at most
/// [`RULES_FILE_MAX`]: never a FIFO that would block, nor `/dev/zero`.
fn small_file(path: &Path) -> Option<Vec<u8>> {
    let m = std::fs::metadata(path).ok()?;
    if !m.is_file() || m.len() > RULES_FILE_MAX {
        return None;
    }
    let f = std::fs::File::open(path).ok()?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, RULES_FILE_MAX), &mut out).ok()?;
    Some(out)
}

/// Reads the file at `path` for the rules key (empty when it is not a small regular file).
fn content(path: &Path) -> Vec<u8> {
    small_file(path).unwrap_or_default()
}

/// The rules of a walk root: its `info/exclude` and the global excludes file, both
/// relative to it.
pub(super) fn root_rules(dir: &Path, global_path: Option<&Path>) -> RootRules {
    let build = |path: Option<PathBuf>| {
        let mut b = GitignoreBuilder::new(dir);
        if let Some(p) = path.filter(|p| small_file(p).is_some()) {
            let _ = b.add(p);
        }
        b.build().unwrap_or_else(|_| Gitignore::empty())
    };
    RootRules {
        exclude: build(Some(git_common_dir(dir).join("info/exclude"))),
        global: build(global_path.map(Path::to_path_buf)),
    }
}

/// The key of everything outside the tree that decides what a listing keeps: the
/// workspace's `.git/info/exclude`, the global excludes file (its path and content), and
/// the caller's settings (`settings`: nested-repository mode, allowed credentials).
pub(in crate::scan) fn rules_key(root: &Path, settings: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    // The code's own rules too: a version that excludes other names must not reuse a
    // listing an older one recorded.
    h.update(b"retrace rules v1\0");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for name in exclude::HARD_EXCLUSIONS
        .iter()
        .chain(exclude::AGENT_RECORDS)
        .chain(exclude::SECRET_NAMES)
    {
        h.update(name.as_bytes());
        h.update(b"\0");
    }
    let mut part = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(settings);
    part(&content(&git_common_dir(root).join("info/exclude")));
    let global = ignore::gitignore::gitconfig_excludes_path();
    part(
        global
            .as_deref()
            .map_or(&[][..], |p| p.as_os_str().as_bytes()),
    );
    part(&global.as_deref().map(content).unwrap_or_default());
    *h.finalize().as_bytes()
}
