//! The watcher itself: a reader thread that owns the inotify instance and files every event
//! into the current batch, and an acceptor thread that answers requests on the socket (one
//! short thread per connection, since a `changes` request waits for its cookie).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::tree::{Break, COOKIE_PREFIX, Sink, Tree};
use super::{PROTOCOL, Reply, Request, Token, WatchStatus, WirePath};
use crate::error::WatchError;
use crate::lock::{LockMode, WorkspaceLock};

/// How long a `changes` request waits for its cookie's event before it answers
/// `cookie_timeout` (events that never arrive: some container filesystems).
const COOKIE_WAIT: Duration = Duration::from_secs(1);
/// Paths kept in unreported batches; past it, older tokens get `too_many_changes`.
const MAX_PATHS: usize = 200_000;
/// The reader wakes at least this often to notice a stop or the idle time.
const TICK: Duration = Duration::from_millis(200);
/// After the watch limit was hit, a new crawl is tried this long after.
const LIMIT_RETRY: Duration = Duration::from_mins(1);

/// What a watcher needs.
#[derive(Clone, Debug)]
pub struct WatchSpec {
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// The store directory, when it lies inside the workspace (never watched).
    pub store_dir: Option<PathBuf>,
    /// The runtime directory (`WorkingCopy::runtime_dir`).
    pub runtime_dir: PathBuf,
    /// It exits after this long without a request.
    pub idle: Duration,
    /// A full walk is asked for once this long after the last one (the repair of what
    /// inotify cannot see: writes through `mmap`, files hard-linked from outside).
    pub sweep: Duration,
}

/// What a watcher has seen change: see [`Watcher::activity`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// Grows with every change seen; equal counts mean nothing changed in between.
    pub count: u64,
    /// When the latest change was seen (None: none yet).
    pub last: Option<Instant>,
}

/// Why a watcher ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// No request came within the idle time.
    Idle,
    /// `retrace watch --stop`, or the host stopped it.
    Stopped,
    /// The workspace root was deleted or moved.
    RootGone,
    /// inotify itself could not be used (too many instances).
    NoInotify,
}

impl Exit {
    /// Why, in words.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Exit::Idle => "idle",
            Exit::Stopped => "stopped",
            Exit::RootGone => "the workspace root is gone",
            Exit::NoInotify => "inotify unavailable (fs.inotify.max_user_instances?)",
        }
    }
}

#[derive(Default)]
struct Batch {
    dirty: HashSet<Vec<u8>>,
    subtree: HashSet<Vec<u8>>,
}

struct State {
    epoch: u64,
    ready: bool,
    /// Why the view broke, while it is being rebuilt (or stays broken: the watch limit).
    broken: Option<&'static str>,
    last_break: Option<String>,
    /// The batch events go into now.
    cur: u64,
    /// The oldest token seq whose events are all still kept.
    oldest: u64,
    batches: BTreeMap<u64, Batch>,
    paths: usize,
    cookies: HashSet<u64>,
    last_request: Instant,
    last_sweep: Instant,
    events: u64,
    vouched: u64,
    walks: u64,
    last_fallback: Option<String>,
    watches: u64,
    tree_bytes: u64,
    /// Reads of the event queue that filed a change (cookies aside), and when the last did.
    activity: u64,
    last_activity: Option<Instant>,
}

impl State {
    fn batch(&mut self) -> &mut Batch {
        self.batches.entry(self.cur).or_default()
    }
}

struct Shared {
    state: Mutex<State>,
    cookie_seen: Condvar,
    stop: AtomicBool,
    /// A recorder captures bursts beside it (`Watcher::set_recording`).
    recording: AtomicBool,
    cookie_n: AtomicU64,
    spec: WatchSpec,
    socket: PathBuf,
    started_ms: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running watcher; dropping it stops it.
pub struct Watcher {
    shared: Arc<Shared>,
    reader: Option<JoinHandle<Exit>>,
    acceptor: Option<JoinHandle<()>>,
    _lock: WorkspaceLock,
}

fn new_epoch() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_le_bytes());
    h.update(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(&now.to_le_bytes());
    let b = h.finalize();
    u64::from_le_bytes(b.as_bytes()[..8].try_into().unwrap_or([1; 8])).max(1)
}

impl Watcher {
    /// Takes the workspace's watcher lock, binds its socket and starts watching (the crawl
    /// runs in the background; until it is done, requests are answered `starting`).
    ///
    /// # Errors
    /// [`WatchError::Running`] when another watcher holds the lock; [`WatchError::Setup`]
    /// when the runtime directory, lock or socket cannot be made;
    /// [`WatchError::Unwatchable`] on a network or userspace filesystem.
    pub fn start(spec: WatchSpec) -> Result<Watcher, WatchError> {
        let root = spec.root.clone();
        let setup = |path: &Path, source: std::io::Error| WatchError::Setup {
            root: root.clone(),
            path: path.to_path_buf(),
            source,
        };
        if let crate::platform::Filesystem::Remote(what) = crate::platform::filesystem(&spec.root) {
            return Err(WatchError::Unwatchable {
                root: spec.root.clone(),
                what: what.into(),
            });
        }
        let dir = super::socket_dir(&spec.runtime_dir);
        crate::home::create_private_dir(&dir)
            .map_err(|e| setup(&dir, std::io::Error::other(e.to_string())))?;
        let socket = super::socket_path(&spec.runtime_dir, &spec.root);
        let lock_path = socket.with_extension("lock");
        let lock = crate::lock::lock(&lock_path, LockMode::Exclusive, Duration::ZERO).map_err(
            |e| match e {
                crate::error::StoreError::Busy { .. } => WatchError::Running {
                    root: spec.root.clone(),
                    socket: socket.clone(),
                },
                other => setup(&lock_path, std::io::Error::other(other.to_string())),
            },
        )?;
        // A socket left by a watcher that was killed: ours now.
        let _ = std::fs::remove_file(&socket);
        let listener =
            super::short_path(&socket, |p| UnixListener::bind(p)).map_err(|e| setup(&socket, e))?;
        let now = Instant::now();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                ready: false,
                broken: None,
                last_break: None,
                cur: 1,
                oldest: 1,
                batches: BTreeMap::new(),
                paths: 0,
                cookies: HashSet::new(),
                last_request: now,
                last_sweep: now,
                events: 0,
                vouched: 0,
                walks: 0,
                last_fallback: None,
                watches: 0,
                tree_bytes: 0,
                activity: 0,
                last_activity: None,
            }),
            cookie_seen: Condvar::new(),
            stop: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            cookie_n: AtomicU64::new(0),
            spec,
            socket,
            started_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        });
        let r = Arc::clone(&shared);
        let reader = std::thread::Builder::new()
            .name("retrace-watch-events".into())
            .spawn(move || read_events(&r))
            .map_err(|e| setup(&shared.socket, e))?;
        let a = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("retrace-watch-socket".into())
            .spawn(move || accept(&a, &listener))
            .map_err(|e| setup(&shared.socket, e))?;
        Ok(Watcher {
            shared,
            reader: Some(reader),
            acceptor: Some(acceptor),
            _lock: lock,
        })
    }

    /// Whether its crawl is done (it issues tokens).
    #[must_use]
    pub fn ready(&self) -> bool {
        self.shared.lock().ready
    }

    /// What it has seen change in the workspace: a count that grows with each read of the
    /// event queue that filed a change (its own cookies aside), and when the last one came.
    /// A caller that samples it learns whether anything was written since, and for how long
    /// the workspace has been quiet (local history's bursts).
    #[must_use]
    pub fn activity(&self) -> Activity {
        let st = self.shared.lock();
        Activity {
            count: st.activity,
            last: st.last_activity,
        }
    }

    /// Says in its status that a recorder captures bursts beside it (local history).
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, Ordering::SeqCst);
    }

    /// Whether it has ended (idle, stopped, the root gone): [`Watcher::wait`] would not
    /// block.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.reader.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Blocks until it ends (idle, stopped, the root gone) and says why.
    #[must_use]
    pub fn wait(mut self) -> Exit {
        self.finish()
    }

    /// Asks it to stop (as `retrace watch --stop` does).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }

    fn finish(&mut self) -> Exit {
        let exit = self
            .reader
            .take()
            .map_or(Exit::Stopped, |r| r.join().unwrap_or(Exit::Stopped));
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        let _ = std::fs::remove_file(&self.shared.socket);
        exit
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.stop();
            self.finish();
        }
    }
}

/// Files events into the state's current batch.
struct Filing<'a> {
    st: MutexGuard<'a, State>,
    cookie: bool,
    /// A change was filed (not only cookies).
    changed: bool,
}

impl Sink for Filing<'_> {
    fn dirty(&mut self, path: Vec<u8>) {
        self.changed = true;
        if self.st.batch().dirty.insert(path) {
            self.st.paths += 1;
        }
    }
    fn subtree(&mut self, path: Vec<u8>) {
        self.changed = true;
        if self.st.batch().subtree.insert(path) {
            self.st.paths += 1;
        }
    }
    fn cookie(&mut self, n: u64) {
        self.st.cookies.insert(n);
        self.cookie = true;
    }
}

/// Test hook: `RETRACE_FAULT_WATCH_PAUSE=<path>` makes the reader stop reading events
/// while that file exists (to overflow the kernel's queue on purpose).
fn paused() -> bool {
    #[cfg(feature = "fault-injection")]
    if let Some(p) = std::env::var_os("RETRACE_FAULT_WATCH_PAUSE") {
        return Path::new(&p).exists();
    }
    false
}

/// The reader thread: one crawl per epoch, then events until the view breaks.
fn read_events(shared: &Shared) -> Exit {
    let spec = &shared.spec;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 256 << 10];
    let mountinfo = crate::platform::mount_table();
    let mut retry_at: Option<Instant> = None;
    loop {
        if let Some(at) = retry_at {
            // Broken for good for a while (the watch limit): keep answering, try later.
            while Instant::now() < at {
                if let Some(exit) = should_exit(shared) {
                    return exit;
                }
                std::thread::sleep(TICK);
            }
        }
        let Ok(mut tree) = Tree::new(&spec.root, spec.store_dir.as_deref()) else {
            return Exit::NoInotify;
        };
        let crawled = tree.crawl();
        {
            let mut st = shared.lock();
            st.watches = tree.watches() as u64;
            st.tree_bytes = tree.heap_bytes() as u64;
            match crawled {
                Ok(()) => {
                    st.epoch = new_epoch();
                    st.cur = 1;
                    st.oldest = 1;
                    st.batches.clear();
                    st.paths = 0;
                    st.cookies.clear();
                    st.ready = true;
                    st.broken = None;
                    retry_at = None;
                }
                Err(Break::RootGone) => return Exit::RootGone,
                Err(b) => {
                    st.ready = false;
                    st.broken = Some(b.reason());
                    st.last_break = Some(b.reason().into());
                    drop(st);
                    drop(tree);
                    retry_at = Some(Instant::now() + LIMIT_RETRY);
                    continue;
                }
            }
        }
        // Events until the view breaks.
        let broke = loop {
            if let Some(exit) = should_exit(shared) {
                return exit;
            }
            let mut fds = vec![rustix::event::PollFd::new(
                tree.fd(),
                rustix::event::PollFlags::IN,
            )];
            if let Some(m) = &mountinfo {
                fds.push(rustix::event::PollFd::new(m, rustix::event::PollFlags::PRI));
            }
            let timeout = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: i64::try_from(TICK.as_nanos()).unwrap_or(200_000_000),
            };
            if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
                continue;
            }
            let mounts_changed = fds.get(1).is_some_and(|f| {
                f.revents()
                    .intersects(rustix::event::PollFlags::PRI | rustix::event::PollFlags::ERR)
            });
            if mounts_changed {
                break "mount_change";
            }
            if paused() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let mut filing = Filing {
                st: shared.lock(),
                cookie: false,
                changed: false,
            };
            let drained = tree.drain(&mut buf, &mut filing);
            let seen_cookie = filing.cookie;
            let mut st = filing.st;
            if filing.changed {
                st.activity += 1;
                st.last_activity = Some(Instant::now());
            }
            st.watches = tree.watches() as u64;
            st.tree_bytes = tree.heap_bytes() as u64;
            if st.paths > MAX_PATHS {
                // Too much to keep: tokens from before now can no longer be answered.
                st.batches.clear();
                st.paths = 0;
                st.oldest = st.cur;
            }
            match drained {
                Ok(n) => st.events += n,
                Err(Break::RootGone) => return Exit::RootGone,
                Err(b) => {
                    drop(st);
                    break b.reason();
                }
            }
            drop(st);
            if seen_cookie {
                shared.cookie_seen.notify_all();
            }
        };
        let mut st = shared.lock();
        st.ready = false;
        st.broken = Some(broke);
        st.last_break = Some(broke.into());
        // What changed meanwhile is unknown: as good as a change (the next capture walks).
        st.activity += 1;
        st.last_activity = Some(Instant::now());
        drop(st);
        shared.cookie_seen.notify_all();
    }
}

fn should_exit(shared: &Shared) -> Option<Exit> {
    if shared.stop.load(Ordering::SeqCst) {
        return Some(Exit::Stopped);
    }
    if shared.lock().last_request.elapsed() >= shared.spec.idle {
        return Some(Exit::Idle);
    }
    if std::fs::symlink_metadata(&shared.spec.root).is_err() {
        return Some(Exit::RootGone);
    }
    None
}

/// Answers connections until told to stop. It polls with a tick rather than waiting to be
/// woken by a connection: the socket's path may be gone (its directory removed) by then.
fn accept(shared: &Arc<Shared>, listener: &UnixListener) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: i64::try_from(TICK.as_nanos()).unwrap_or(200_000_000),
    };
    while !shared.stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener, PollFlags::IN)];
        if poll(&mut fds, Some(&tick)).is_err() || fds[0].revents().is_empty() {
            continue;
        }
        let Ok((conn, _)) = listener.accept() else {
            continue;
        };
        let s = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("retrace-watch-client".into())
            .spawn(move || serve_one(&s, &conn));
    }
}

fn serve_one(shared: &Shared, conn: &UnixStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let mut line = Vec::new();
    if BufReader::new(std::io::Read::take(conn, 64 << 10))
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return;
    }
    let reply = match serde_json::from_slice::<Request>(&line) {
        Ok(req) if req.v == PROTOCOL => match req.op.as_str() {
            "changes" => changes(shared, req.since),
            "status" => Reply {
                v: PROTOCOL,
                ok: true,
                status: Some(status(shared)),
                ..Reply::default()
            },
            "stop" => {
                shared.stop.store(true, Ordering::SeqCst);
                Reply {
                    v: PROTOCOL,
                    ok: true,
                    ..Reply::default()
                }
            }
            _ => refuse(None, "unknown_op"),
        },
        _ => refuse(None, "bad_request"),
    };
    let Ok(mut out) = serde_json::to_vec(&reply) else {
        return;
    };
    out.push(b'\n');
    let _ = (&*conn).write_all(&out);
}

fn refuse(token: Option<Token>, reason: &str) -> Reply {
    Reply {
        v: PROTOCOL,
        ok: false,
        token,
        reason: Some(reason.into()),
        ..Reply::default()
    }
}

fn status(shared: &Shared) -> WatchStatus {
    let st = shared.lock();
    let batch_bytes: usize = st
        .batches
        .values()
        .flat_map(|b| b.dirty.iter().chain(&b.subtree))
        .map(|p| p.capacity() + 32)
        .sum();
    WatchStatus {
        pid: std::process::id(),
        started_ms: shared.started_ms,
        ready: st.ready,
        watches: st.watches,
        events: st.events,
        vouched: st.vouched,
        walks: st.walks,
        last_fallback: st.last_fallback.clone(),
        last_break: st.last_break.clone(),
        heap_bytes: st.tree_bytes + batch_bytes as u64,
        idle_secs: shared.spec.idle.as_secs(),
        activity: st.activity,
        recording: shared.recording.load(Ordering::SeqCst),
        quiet_ms: st
            .last_activity
            .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)),
    }
}

/// Creates and removes the next cookie, then waits until the reader has read its event:
/// from then on, every change made before this call is in the batches. `Err` with the
/// protocol reason otherwise.
fn sync_cookie(shared: &Shared, epoch: u64) -> Result<(), &'static str> {
    let n = shared.cookie_n.fetch_add(1, Ordering::Relaxed);
    let mut name = COOKIE_PREFIX.to_vec();
    name.extend_from_slice(format!("{}-{n}", std::process::id()).as_bytes());
    let path = shared.spec.root.join(std::ffi::OsStr::from_bytes(&name));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path);
    if made.is_err() {
        return Err("cookie_failed");
    }
    drop(made);
    let _ = std::fs::remove_file(&path);
    let deadline = Instant::now() + COOKIE_WAIT;
    let mut st = shared.lock();
    loop {
        if st.epoch != epoch || !st.ready {
            return Err(st.broken.unwrap_or("epoch"));
        }
        if st.cookies.remove(&n) {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("cookie_timeout");
        }
        st = shared
            .cookie_seen
            .wait_timeout(st, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Answers a capture holding `since`.
fn changes(shared: &Shared, since: Option<Token>) -> Reply {
    let epoch = {
        let mut st = shared.lock();
        st.last_request = Instant::now();
        if !st.ready {
            let reason = st.broken.unwrap_or("starting");
            st.walks += 1;
            st.last_fallback = Some(reason.into());
            return refuse(None, reason);
        }
        st.epoch
    };
    // A token this watcher can answer for: its own, with its batches still kept.
    let usable = since.filter(|s| s.epoch == epoch);
    let synced = match usable {
        Some(_) => sync_cookie(shared, epoch),
        None => Err(if since.is_some() { "epoch" } else { "no_token" }),
    };
    // Read before the state lock is taken: reading every process's maps must never hold
    // up the thread that reads inotify's events.
    let mapped = if synced.is_ok() {
        crate::platform::mapped_for_writing(&shared.spec.root)
    } else {
        Vec::new()
    };
    let mut st = shared.lock();
    if st.epoch != epoch || !st.ready {
        let reason = st.broken.unwrap_or("epoch");
        st.walks += 1;
        st.last_fallback = Some(reason.into());
        return refuse(None, reason);
    }
    // Close the current batch: events read from now on belong to the new token.
    let upto = st.cur;
    st.cur += 1;
    let token = Token { epoch, seq: st.cur };
    let verdict = synced.and_then(|()| {
        let s = usable.map_or(0, |t| t.seq);
        if s < st.oldest || s > upto {
            return Err("too_many_changes");
        }
        if st.last_sweep.elapsed() >= shared.spec.sweep {
            return Err("sweep");
        }
        Ok(s)
    });
    match verdict {
        Ok(from) => {
            // Writes through a shared writable mapping raise no inotify event: the
            // directories of the workspace files mapped so now are listed again (the write
            // shows in the file's mtime), so a before-snapshot holds what they hold.
            let mut dirty: HashSet<Vec<u8>> = mapped.into_iter().collect();
            let mut subtree = HashSet::new();
            for (_, b) in st.batches.range(from..=upto) {
                dirty.extend(b.dirty.iter().cloned());
                subtree.extend(b.subtree.iter().cloned());
            }
            // Batches before `from` are never asked for again by a cache this new.
            let keep = st.batches.split_off(&from);
            let dropped: usize = st
                .batches
                .values()
                .map(|b| b.dirty.len() + b.subtree.len())
                .sum();
            st.batches = keep;
            st.paths -= dropped.min(st.paths);
            st.oldest = st.oldest.max(from);
            st.vouched += 1;
            st.last_fallback = None;
            Reply {
                v: PROTOCOL,
                ok: true,
                token: Some(token),
                dirty: dirty.into_iter().map(WirePath::from_bytes).collect(),
                subtree: subtree.into_iter().map(WirePath::from_bytes).collect(),
                ..Reply::default()
            }
        }
        Err(reason) => {
            if reason == "sweep" {
                st.last_sweep = Instant::now();
            }
            st.walks += 1;
            st.last_fallback = Some(reason.into());
            refuse(Some(token), reason)
        }
    }
}
