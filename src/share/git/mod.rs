//! Sessions as git commits on a side ref: [`export`] writes a session's turns as commits
//! (each turn's tree its after-snapshot, its parent the state before it) and [`import`]
//! rebuilds the session from them.
//!
//! This speaks to the `git` binary, not a git library: `git fast-import` writes a whole
//! export as one pack (deltas, the object format of the repository, existing objects
//! skipped) and updates only the named ref; `git cat-file --batch` reads commits, trees and
//! blobs through one process; and pushing and fetching need git's transports with the
//! user's credentials, SSH setup and hooks, which only the git binary honours. Whoever
//! shares through git has it installed. (`docs/sharing.md`, "Why the git binary".)

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::error::ShareError;

pub mod export;
pub mod import;
pub mod message;

/// Variables that would point git at another repository, index or object store than the
/// one named: cleared for every command retrace runs.
const REDIRECTS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
];

/// A git repository, by its git directory.
#[derive(Clone, Debug)]
pub struct Repo {
    git_dir: PathBuf,
}

/// Checks that `reference` is a full ref name under `refs/` that git accepts.
///
/// # Errors
/// [`ShareError::BadRef`].
pub fn check_ref(reference: &str) -> Result<(), ShareError> {
    let ok = reference.starts_with("refs/")
        && !reference.starts_with("refs/heads/")
        && Command::new("git")
            .args(["check-ref-format", reference])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|source| ShareError::NoGit { source })?
            .success();
    if ok {
        Ok(())
    } else {
        Err(ShareError::BadRef(reference.to_string()))
    }
}

impl Repo {
    /// The repository containing `dir` (a work tree or a bare repository).
    ///
    /// # Errors
    /// [`ShareError::Git`] when `dir` is not in a repository.
    pub fn open(dir: &Path) -> Result<Repo, ShareError> {
        let mut cmd = Command::new("git");
        for v in REDIRECTS {
            cmd.env_remove(v);
        }
        let out = cmd
            .current_dir(dir)
            .args(["rev-parse", "--absolute-git-dir"])
            .output()
            .map_err(|source| ShareError::NoGit { source })?;
        if !out.status.success() {
            return Err(ShareError::Git {
                action: "rev-parse".into(),
                repo: dir.to_path_buf(),
                detail: format!("{} is not in a git repository", dir.display()),
            });
        }
        let s = String::from_utf8_lossy(&out.stdout);
        Ok(Repo {
            git_dir: PathBuf::from(s.trim_end_matches('\n')),
        })
    }

    /// The bare repository at `path`, created when missing.
    ///
    /// # Errors
    /// [`ShareError::Git`] when it cannot be created.
    pub fn bare(path: &Path) -> Result<Repo, ShareError> {
        let repo = Repo {
            git_dir: path.to_path_buf(),
        };
        if !path.join("HEAD").exists() {
            let mut cmd = Command::new("git");
            for v in REDIRECTS {
                cmd.env_remove(v);
            }
            let out = cmd
                .args(["init", "--bare", "--quiet"])
                .arg(path)
                .output()
                .map_err(|source| ShareError::NoGit { source })?;
            if !out.status.success() {
                return Err(repo.failed("init --bare", &out.stderr));
            }
        }
        Ok(repo)
    }

    /// Its git directory.
    #[must_use]
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// A git command in this repository (and no other: see [`REDIRECTS`]).
    #[must_use]
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        for v in REDIRECTS {
            cmd.env_remove(v);
        }
        cmd.env("GIT_DIR", &self.git_dir)
            .current_dir(&self.git_dir)
            .stdin(Stdio::null());
        cmd
    }

    fn failed(&self, action: &str, stderr: &[u8]) -> ShareError {
        ShareError::Git {
            action: action.to_string(),
            repo: self.git_dir.clone(),
            detail: String::from_utf8_lossy(stderr).trim().to_string(),
        }
    }

    /// Runs git with `args`; its standard output.
    ///
    /// # Errors
    /// [`ShareError::Git`] naming what git said, when it fails.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>, ShareError> {
        let out = self
            .command()
            .args(args)
            .output()
            .map_err(|source| ShareError::NoGit { source })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failed(&args.join(" "), &out.stderr))
        }
    }

    /// The commit `reference` points at, if it exists.
    ///
    /// # Errors
    /// [`ShareError::NoGit`].
    pub fn tip(&self, reference: &str) -> Result<Option<String>, ShareError> {
        let out = self
            .command()
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{reference}^{{commit}}"))
            .output()
            .map_err(|source| ShareError::NoGit { source })?;
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }

    /// The commits of `tip`'s first-parent chain, oldest first.
    ///
    /// # Errors
    /// [`ShareError::Git`].
    pub fn chain(&self, tip: &str) -> Result<Vec<String>, ShareError> {
        let out = self.run(&["rev-list", "--first-parent", "--reverse", tip])?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// A reader of its objects (`git cat-file --batch`).
    ///
    /// # Errors
    /// [`ShareError::NoGit`].
    pub fn objects(&self) -> Result<Objects, ShareError> {
        let mut child = self
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| ShareError::NoGit { source })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(self.failed("cat-file --batch", b"no pipes"));
        };
        Ok(Objects {
            repo: self.clone(),
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }
}

/// Objects read one at a time through `git cat-file --batch`.
pub struct Objects {
    repo: Repo,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A git object as read: its type and content.
pub struct GitObject {
    /// `commit`, `tree`, `blob` or `tag`.
    pub kind: String,
    /// Its content.
    pub data: Vec<u8>,
}

impl Objects {
    fn broken(&self, what: &str) -> ShareError {
        self.repo.failed("cat-file --batch", what.as_bytes())
    }

    /// Asks for `name`; its type and size.
    fn ask(&mut self, name: &str) -> Result<(String, u64), ShareError> {
        writeln!(self.stdin, "{name}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| self.broken(&e.to_string()))?;
        let mut head = String::new();
        self.stdout
            .read_line(&mut head)
            .map_err(|e| self.broken(&e.to_string()))?;
        let fields: Vec<&str> = head.trim_end().split(' ').collect();
        let [_, kind, size] = fields.as_slice() else {
            return Err(self.broken(&format!("object {name}: {}", head.trim_end())));
        };
        let size = size.parse().map_err(|_| self.broken(&head))?;
        Ok(((*kind).to_string(), size))
    }

    /// Reads the content `ask` announced to `f` (which may read less: the rest is skipped),
    /// then the newline after it.
    fn content<T>(
        &mut self,
        size: u64,
        f: impl FnOnce(&mut dyn Read) -> Result<T, crate::error::Error>,
    ) -> Result<T, crate::error::Error> {
        let mut body = (&mut self.stdout).take(size);
        let out = f(&mut body);
        let rest = std::io::copy(&mut body, &mut std::io::sink());
        let mut nl = [0u8];
        let ended = rest.is_ok() && body.limit() == 0 && self.stdout.read_exact(&mut nl).is_ok();
        if !ended || nl != *b"\n" {
            return Err(self.broken("an object ended early").into());
        }
        out
    }

    /// The object `name` (a hash) whole: a commit or a tree (at most [`MAX_READ`] bytes).
    ///
    /// # Errors
    /// [`ShareError::Git`] when the repository lacks it or it is too big.
    pub fn get(&mut self, name: &str) -> Result<GitObject, crate::error::Error> {
        let (kind, size) = self.ask(name)?;
        if size > MAX_READ {
            // Skipped, so that the next request reads its own answer.
            self.content(size, |_| Ok(()))?;
            return Err(self
                .broken(&format!("object {name} is a {kind} of {size} bytes, too big to read"))
                .into());
        }
        let repo = self.repo.clone();
        let data = self.content(size, |r| {
            let mut data = Vec::new();
            r.read_to_end(&mut data)
                .map_err(|e| repo.failed("cat-file --batch", e.to_string().as_bytes()))?;
            Ok(data)
        })?;
        Ok(GitObject { kind, data })
    }

    /// Streams the blob `name` to `f` with its size (a file's content is never held whole
    /// here); an error when `name` is not a blob.
    ///
    /// # Errors
    /// [`ShareError::Git`]; `f`'s.
    pub fn blob<T>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut dyn Read, u64) -> Result<T, crate::error::Error>,
    ) -> Result<Result<T, String>, crate::error::Error> {
        let (kind, size) = self.ask(name)?;
        if kind != "blob" {
            self.content(size, |_| Ok(()))?;
            return Ok(Err(kind));
        }
        self.content(size, |r| f(r, size)).map(Ok)
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One entry of a git tree.
pub struct GitEntry {
    /// Its mode, as octal text (`100644`, `40000`, …).
    pub mode: String,
    /// Its name bytes.
    pub name: Vec<u8>,
    /// Its object's hash, hex.
    pub hash: String,
}

/// The entries of a git tree's content; `None` when it is malformed. `hash_len` is the
/// repository's hash length in bytes (20 for SHA-1, 32 for SHA-256).
#[must_use]
pub fn parse_tree(data: &[u8], hash_len: usize) -> Option<Vec<GitEntry>> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let sp = rest.iter().position(|&b| b == b' ')?;
        let nul = rest.iter().position(|&b| b == 0)?;
        if nul < sp || rest.len() < nul + 1 + hash_len {
            return None;
        }
        let mode = String::from_utf8(rest[..sp].to_vec()).ok()?;
        let name = rest[sp + 1..nul].to_vec();
        let hash = hex(&rest[nul + 1..nul + 1 + hash_len]);
        out.push(GitEntry { mode, name, hash });
        rest = &rest[nul + 1 + hash_len..];
    }
    Some(out)
}

/// Where and how [`crate::Workspace::export_git`] writes a session.
#[derive(Clone, Debug, Default)]
pub struct GitExport {
    /// The ref to write, `refs/retrace/<name>` by convention (never a branch).
    pub reference: String,
    /// The repository: a directory inside one (the workspace's own only when asked);
    /// None: a bare repository kept beside the workspace's store, created on first use.
    pub repo: Option<PathBuf>,
    /// Only the turns numbered in this range (and the checkpoints taken between them).
    pub turns: Option<std::ops::RangeInclusive<u64>>,
    /// Replace whatever the ref holds.
    pub force: bool,
    /// Push the ref there afterwards (a remote's name, URL or path), with `git push`.
    pub push: Option<String>,
}

/// Largest commit or tree read whole (a tree of a million entries is about 50 MB); file
/// contents are streamed, never held whole unless small.
pub const MAX_READ: u64 = 256 << 20;

/// Refuses a remote or source that git would take for an option.
fn not_an_option(what: &str, value: &str) -> Result<(), ShareError> {
    if value.starts_with('-') {
        return Err(ShareError::Git {
            action: what.to_string(),
            repo: PathBuf::from(value),
            detail: "a repository or remote cannot begin with '-'".into(),
        });
    }
    Ok(())
}

/// Where [`crate::Workspace::import_git`] reads a session from.
#[derive(Clone, Debug, Default)]
pub struct GitImport {
    /// The ref to read.
    pub reference: String,
    /// A directory inside a repository, or a URL to fetch the ref from (into the bare
    /// repository beside the store); None: that bare repository itself.
    pub source: Option<String>,
    /// The session's name here, instead of the one it was exported under.
    pub as_name: Option<String>,
}

/// The repository [`GitExport::repo`] names (or the bare one at `default`).
///
/// # Errors
/// [`ShareError::Git`].
pub fn repo_for(given: Option<&Path>, default: &Path) -> Result<Repo, ShareError> {
    match given {
        Some(dir) => Repo::open(dir),
        None => Repo::bare(default),
    }
}

/// The repository to import from and the ref to read there: a directory's repository and
/// `reference`; or the bare one at `default`, `reference` fetched from a URL into a ref of
/// its own (`refs/retrace-import/<hash of the URL>/…`, so that an import never moves the
/// ref an export of this workspace writes); or that bare repository itself.
///
/// # Errors
/// [`ShareError::Git`].
pub fn source_for(
    source: Option<&str>,
    reference: &str,
    default: &Path,
) -> Result<(Repo, String), ShareError> {
    match source {
        Some(s) if Path::new(s).is_dir() => Ok((Repo::open(Path::new(s))?, reference.to_string())),
        Some(url) => {
            not_an_option("fetch", url)?;
            let repo = Repo::bare(default)?;
            let place = format!(
                "refs/retrace-import/{}/{}",
                &blake3::hash(url.as_bytes()).to_hex()[..16],
                reference.trim_start_matches("refs/")
            );
            repo.run(&[
                "fetch",
                "--quiet",
                "--no-tags",
                "--",
                url,
                &format!("+{reference}:{place}"),
            ])?;
            Ok((repo, place))
        }
        None => Ok((Repo::bare(default)?, reference.to_string())),
    }
}

/// Pushes `reference` of `repo` to `remote` (replacing it there when `force`).
///
/// # Errors
/// [`ShareError::Git`] with what git said.
pub fn push(repo: &Repo, remote: &str, reference: &str, force: bool) -> Result<(), ShareError> {
    not_an_option("push", remote)?;
    let spec = format!("{}{reference}:{reference}", if force { "+" } else { "" });
    repo.run(&["push", "--quiet", "--", remote, &spec])
        .map(|_| ())
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}
