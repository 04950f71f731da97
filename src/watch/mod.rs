//! The optional file watcher: one process (or a thread of `retrace serve` and `retrace mcp`)
//! per workspace that watches its directories with inotify and tells a capture which
//! directories changed since the capture before it, so that the capture looks only at those.
//! The walk stays the truth: whenever the watcher cannot vouch, the capture walks.
//!
//! **Exactness.** A capture takes a [`Token`] from the watcher before it observes anything
//! and stores it in the stat cache with what it observed. The next capture sends that token
//! back; the watcher creates a cookie file in the workspace root and waits until it reads
//! the cookie's own event, so every change whose system call returned before the request is
//! in the answer (inotify queues an event inside the call that makes the change, in one
//! ordered queue), then names every directory with an event since the token. Everything
//! else is as the cache recorded it. See `docs/architecture.md`, "The watcher", for what a
//! watcher cannot see and how each hole is closed.
//!
//! **Wire.** A unix socket `<runtime dir>/watch/<workspace id>.sock` (the directory 0700),
//! one JSON request line per connection and one JSON reply line (see [`Request`] and
//! [`Reply`]).

mod server;
mod tree;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::vouch::{Changes, Token};
pub use server::{WatchSpec, Watcher};

/// How often a watcher has the next capture walk anyway, to repair what inotify cannot see
/// (see `docs/architecture.md`, "The watcher").
pub const SWEEP_EVERY: Duration = Duration::from_mins(10);

/// Protocol version of [`Request`] and [`Reply`].
pub const PROTOCOL: u32 = 1;

/// The watcher's answer to a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// It vouches: every directory outside `changes` is as the cache of `since` recorded.
    /// `token` is what the capture's cache records.
    Changes {
        /// Record this with what the capture observes.
        token: Token,
        /// What to look at.
        changes: Changes,
    },
    /// It answered but cannot vouch (see [`Reply::reason`]): walk, and record `token` if
    /// there is one.
    Walk {
        /// Record this with what the walk observes (None while the watcher starts).
        token: Option<Token>,
        /// Why (a protocol reason such as `overflow` or `watch_limit`).
        reason: String,
    },
    /// No watcher answered: none runs, it died, or it was slower than the timeout.
    Absent {
        /// Why.
        reason: String,
    },
}

impl Answer {
    /// The token to record, if any.
    #[must_use]
    pub fn token(&self) -> Option<Token> {
        match self {
            Answer::Changes { token, .. } => Some(*token),
            Answer::Walk { token, .. } => *token,
            Answer::Absent { .. } => None,
        }
    }

    /// Why the capture walks (None when the watcher vouches).
    #[must_use]
    pub fn fallback(&self) -> Option<&str> {
        match self {
            Answer::Changes { .. } => None,
            Answer::Walk { reason, .. } | Answer::Absent { reason } => Some(reason),
        }
    }
}

/// One request to a watcher.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// [`PROTOCOL`].
    pub v: u32,
    /// `changes`, `status` or `stop`.
    pub op: String,
    /// For `changes`: the token of the cache on disk.
    #[serde(default)]
    pub since: Option<Token>,
}

/// A path on the wire: text when it is UTF-8, else its bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WirePath {
    /// A UTF-8 path.
    Text(String),
    /// Any other path, byte for byte.
    Bytes(Vec<u8>),
}

impl WirePath {
    fn from_bytes(p: Vec<u8>) -> WirePath {
        match String::from_utf8(p) {
            Ok(s) => WirePath::Text(s),
            Err(e) => WirePath::Bytes(e.into_bytes()),
        }
    }

    fn into_bytes(self) -> Vec<u8> {
        match self {
            WirePath::Text(s) => s.into_bytes(),
            WirePath::Bytes(b) => b,
        }
    }
}

/// The reply to a [`Request`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply {
    /// [`PROTOCOL`].
    pub v: u32,
    /// For `changes`: whether the watcher vouches.
    pub ok: bool,
    /// For `changes`: the token to record.
    #[serde(default)]
    pub token: Option<Token>,
    /// Why it cannot vouch: `starting`, `no_token`, `epoch` (the token is another
    /// watcher's), `too_many_changes`, `cookie_timeout`, `cookie_failed`, `sweep` (the
    /// periodic full walk), or why its view broke: `overflow`, `watch_limit`, `unmount`,
    /// `inconsistent`, `mount_change`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Directories to look at again.
    #[serde(default)]
    pub dirty: Vec<WirePath>,
    /// Directories to walk whole.
    #[serde(default)]
    pub subtree: Vec<WirePath>,
    /// For `status`.
    #[serde(default)]
    pub status: Option<WatchStatus>,
}

/// What a watcher says about itself (`retrace status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchStatus {
    /// Its process.
    pub pid: u32,
    /// When it started (ms since the Unix epoch).
    pub started_ms: u64,
    /// Whether its crawl is done and it issues tokens.
    pub ready: bool,
    /// Directories watched.
    pub watches: u64,
    /// Events read.
    pub events: u64,
    /// Answers that vouched.
    pub vouched: u64,
    /// Answers that made the capture walk, and the last reason.
    pub walks: u64,
    /// Why the last capture it answered walked.
    pub last_fallback: Option<String>,
    /// Why its view broke last (overflow, watch limit…), if it ever did.
    pub last_break: Option<String>,
    /// Heap bytes of its directory tree and event batches.
    pub heap_bytes: u64,
    /// It exits after this many seconds without a request.
    pub idle_secs: u64,
    /// Grows with every change it sees (see `Watcher::activity`; 0 from a watcher older
    /// than the field).
    #[serde(default)]
    pub activity: u64,
    /// Milliseconds since the latest change it saw (None: none yet).
    #[serde(default)]
    pub quiet_ms: Option<u64>,
    /// Whether a recorder captures bursts beside it (`retrace watch --record`).
    #[serde(default)]
    pub recording: bool,
}

/// The directory of the watcher sockets and locks under a runtime directory.
#[must_use]
pub fn socket_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("watch")
}

/// The socket of the watcher of the workspace at `root`.
#[must_use]
pub fn socket_path(runtime_dir: &Path, root: &Path) -> PathBuf {
    socket_dir(runtime_dir).join(format!("{}.sock", crate::home::workspace_id(root)))
}

/// Runs `f` with a path to `path` short enough for a socket address (108 bytes): `path`
/// itself, or the same name through `/proc/self/fd/<n>` of its opened directory.
fn short_path<T>(path: &Path, f: impl FnOnce(&Path) -> std::io::Result<T>) -> std::io::Result<T> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().as_bytes().len() < 100 {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let d = rustix::fs::open(
        dir,
        crate::platform::PATH_ONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let via = crate::platform::fd_path(std::os::fd::AsFd::as_fd(&d)).join(name);
    f(&via)
}

/// A watcher hosted by a long-lived process (`retrace serve`, `retrace mcp`): it runs until
/// the host drops it, whatever the idle setting. `None` when another watcher serves the
/// workspace already or it cannot be watched (captures then use the other one, or walk).
#[must_use]
pub fn host(mut spec: WatchSpec) -> Option<Watcher> {
    spec.idle = Duration::from_hours(100 * 365 * 24);
    Watcher::start(spec).ok()
}

/// Sends one request and reads the reply, all within `timeout`.
///
/// # Errors
/// The socket's I/O error (`NotFound` or `ConnectionRefused` when no watcher runs,
/// `WouldBlock`/`TimedOut` when it is too slow), or `InvalidData` for a reply that is not
/// one.
pub fn request(socket: &Path, req: &Request, timeout: Duration) -> std::io::Result<Reply> {
    let start = Instant::now();
    let stream = short_path(socket, |p| UnixStream::connect(p))?;
    let left = || {
        timeout
            .checked_sub(start.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
    };
    stream.set_write_timeout(Some(left()?))?;
    let mut line = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    line.push(b'\n');
    (&stream).write_all(&line)?;
    stream.set_read_timeout(Some(left()?))?;
    let mut reader = BufReader::new(&stream);
    let mut buf = Vec::new();
    reader.read_until(b'\n', &mut buf)?;
    serde_json::from_slice(&buf)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Asks the watcher of the workspace at `root` what changed since `since` (the token of the
/// cache on disk), waiting at most `timeout`.
#[must_use]
pub fn ask(runtime_dir: &Path, root: &Path, since: Option<Token>, timeout: Duration) -> Answer {
    let socket = socket_path(runtime_dir, root);
    let req = Request {
        v: PROTOCOL,
        op: "changes".into(),
        since,
    };
    let reply = match request(&socket, &req, timeout) {
        Ok(r) => r,
        Err(e) => {
            let reason = match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    "no watcher".to_string()
                }
                std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof => "the watcher went away".to_string(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("no answer within {} ms", timeout.as_millis())
                }
                _ => format!("watcher socket: {e}"),
            };
            return Answer::Absent { reason };
        }
    };
    match (reply.ok, reply.token) {
        (true, Some(token)) if reply.v == PROTOCOL => Answer::Changes {
            token,
            changes: Changes {
                dirty: reply.dirty.into_iter().map(WirePath::into_bytes).collect(),
                subtree: reply
                    .subtree
                    .into_iter()
                    .map(WirePath::into_bytes)
                    .collect(),
            },
        },
        _ => Answer::Walk {
            token: reply.token.filter(|_| reply.v == PROTOCOL),
            reason: reply.reason.unwrap_or_else(|| "refused".into()),
        },
    }
}

/// The status of the workspace's watcher, or None when none answers within `timeout`.
#[must_use]
pub fn status(runtime_dir: &Path, root: &Path, timeout: Duration) -> Option<WatchStatus> {
    let req = Request {
        v: PROTOCOL,
        op: "status".into(),
        since: None,
    };
    request(&socket_path(runtime_dir, root), &req, timeout)
        .ok()?
        .status
}

/// Asks the workspace's watcher to exit; whether one answered.
#[must_use]
pub fn stop(runtime_dir: &Path, root: &Path, timeout: Duration) -> bool {
    let req = Request {
        v: PROTOCOL,
        op: "stop".into(),
        since: None,
    };
    request(&socket_path(runtime_dir, root), &req, timeout).is_ok_and(|r| r.ok)
}
