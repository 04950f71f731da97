//! Helpers shared by the scenario tests: temp workspaces, a model of the tree, the binaries.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use retrace::{Config, Workspace};

pub mod fake_http;
pub mod registry;

/// A workspace directory and a private retrace home, both removed on drop.
pub struct Env {
    pub ws: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            ws: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> &Path {
        self.ws.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.ws.path().join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn open(&self) -> Workspace {
        Workspace::open(self.root(), &Config::with_home(self.home.path())).unwrap()
    }

    /// Runs a binary of this package with RETRACE_HOME set and HOME isolated.
    pub fn run(&self, bin: &str, args: &[&str]) -> Output {
        self.command(bin, args).output().unwrap()
    }

    /// Runs `bin` with `input` on its stdin.
    pub fn run_with_input(&self, bin: &str, args: &[&str], input: &[u8]) -> Output {
        output_with_input(&mut self.command(bin, args), input)
    }

    /// The workspace lock file (to hold it as another process would).
    pub fn lock_path(&self) -> PathBuf {
        Workspace::locate_store(self.root(), &Config::with_home(self.home.path()))
            .unwrap()
            .with_file_name("lock")
    }

    /// Runs a binary as an unprivileged user when the tests run as root (as root every file
    /// is readable and every directory writable), else as ourselves.
    pub fn run_as_user(&self, bin: &str, args: &[&str]) -> Output {
        use std::os::unix::process::CommandExt;
        let mut cmd = self.command(bin, args);
        if is_root() {
            cmd.uid(65534).gid(65534);
        }
        cmd.output().unwrap()
    }

    pub fn command(&self, bin: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args)
            .current_dir(self.root())
            .env("RETRACE_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME");
        c
    }
}

pub const RETRACE: &str = env!("CARGO_BIN_EXE_retrace");

/// `command.output()` with `input` on its stdin.
pub fn output_with_input(command: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A program that exits without reading all of it is not an error here.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

/// Runs `retrace snapshot --json` in the workspace; returns the snapshot id.
pub fn snapshot_id(env: &Env) -> String {
    let o = env.run(RETRACE, &["snapshot", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["id"].as_str().unwrap().to_string()
}
pub const RETRACE_DUMP: &str = env!("CARGO_BIN_EXE_retrace-dump");

/// What a path holds, for comparing a directory to a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { data: Vec<u8>, exec: bool },
    Symlink(PathBuf),
    Dir,
}

/// Every path under `root` except `.git`, with what it holds.
pub fn tree_of(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1).follow_links(false) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
        let ft = e.file_type();
        let node = if ft.is_symlink() {
            Node::Symlink(fs::read_link(e.path()).unwrap())
        } else if ft.is_dir() {
            Node::Dir
        } else {
            let mode = e.metadata().unwrap().permissions().mode();
            Node::File {
                data: fs::read(e.path()).unwrap(),
                exec: mode & 0o100 != 0,
            }
        };
        out.insert(rel, node);
    }
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `meta.maintained` of the env's store, as `retrace-dump stats` reads it: Unix ms of the
/// last maintenance pass, or of the store's creation (0: no store yet).
pub fn maintained_ms(env: &Env) -> u64 {
    let root = env.root().display().to_string();
    let o = env.run(RETRACE_DUMP, &["-C", &root, "stats", "--json"]);
    serde_json::from_str::<serde_json::Value>(stdout(&o).trim())
        .ok()
        .and_then(|v| v["maintained_ms"].as_u64())
        .unwrap_or(0)
}

/// Waits (polling, with a deadline generous for a loaded machine) until the env's store
/// records a maintenance pass at or after `since_ms`, as one a command started in the
/// background does when it finishes; returns its time.
pub fn wait_for_pass(env: &Env, since_ms: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let m = maintained_ms(env);
        if m >= since_ms {
            return m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no maintenance pass since {since_ms} within 180 s (last: {m})"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Asserts `retrace-dump verify` finds the store of this env clean.
pub fn assert_verified(env: &Env) {
    let o = env.run(RETRACE_DUMP, &["verify"]);
    assert!(
        o.status.success(),
        "verify failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// For the tests of real agent CLIs: true (after saying so) when `name` is not installed,
/// so the test returns early; under `CI` a missing CLI fails the test instead.
pub fn missing_cli(installed: bool, name: &str) -> bool {
    if installed {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{name} is not installed: run tests/e2e/install-clients.sh"
    );
    eprintln!("skipped: {name} is not installed (run tests/e2e/install-clients.sh)");
    true
}

/// Whether this process runs as root (from /proc, without libc).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Runs `command` with no stdin, killing it after `limit`, and returns its output.
pub fn output_within(command: &mut Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `o`, after asserting that `what` exited successfully.
pub fn succeeded(o: Output, what: &str) -> Output {
    assert!(
        o.status.success(),
        "{what}: {:?}\n{}\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

/// Restores every snapshot of the workspace's log in turn (forced), proving each is whole.
pub fn restore_every_snapshot(ws: &Workspace) {
    for s in ws.log().unwrap() {
        ws.restore(
            &s.root,
            retrace::RestoreOptions {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
    }
}

/// Pseudo-random bytes that do not compress (so sizes on disk are predictable).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(2_862_933_555_777_941_757)
        .wrapping_add(3_037_000_493);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A stand-in agent process that owns turns (`--owner-pid`): alive until dropped, its
/// output detached so that a failing test never leaves it holding the harness's pipes.
pub struct LiveOwner(std::process::Child);

impl LiveOwner {
    /// Starts one.
    pub fn start() -> LiveOwner {
        LiveOwner(
            std::process::Command::new("sleep")
                .arg("1000")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// Its pid, as `--owner-pid` takes it.
    pub fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for LiveOwner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where proptest keeps the failing cases it found: beside the test's source file
/// (`tests/property.proptest-regressions`). Its default puts them beside the directory holding
/// the crate's `main.rs`, which `tests/main.rs` now is (`proptest-regressions/property.txt`).
pub fn regressions_beside_the_source() -> Option<Box<dyn proptest::test_runner::FailurePersistence>>
{
    Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
    ))
}

/// For a test that must be the first of its process to do something a process does once (the
/// sweep of dead processes' runtime state): all the tests share one process, so run from the
/// harness this runs the test binary again on just `test` (its full name, `file::function`),
/// asserts that it ran and passed, and returns false (the caller returns); in that process it
/// returns true (the caller runs the test).
pub fn in_own_process(test: &str) -> bool {
    const ALONE: &str = "RETRACE_TEST_ALONE";
    if std::env::var_os(ALONE).is_some_and(|v| v == test) {
        return true;
    }
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(ALONE, test)
        .output()
        .unwrap();
    assert!(
        o.status.success() && stdout(&o).contains("1 passed"),
        "{test} in a process of its own: {:?}\n{}\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    false
}

/// The workspace's store opened directly with redb, behind retrace's back (to damage it).
pub fn open_raw(env: &Env) -> redb::Database {
    let path = env.open().store_path().to_path_buf();
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    b.open(path).unwrap()
}

/// Flips the byte at `offset` of the pack log, behind retrace's back.
pub fn flip_byte(env: &Env, offset: u64) {
    use redb::ReadableTable;
    use retrace::store::schema::{PACK_BYTES, PACKS};
    let db = open_raw(env);
    let tx = db.begin_write().unwrap();
    {
        let mut packs = tx.open_table(PACKS).unwrap();
        let no = offset / PACK_BYTES;
        let at = usize::try_from(offset % PACK_BYTES).unwrap();
        let mut bytes = packs.get(no).unwrap().unwrap().value().to_vec();
        bytes[at] ^= 0xff;
        packs.insert(no, bytes.as_slice()).unwrap();
    }
    tx.commit().unwrap();
}

/// The workspace's stat cache file.
pub fn statcache(env: &Env) -> PathBuf {
    let store = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    store.with_file_name("statcache")
}

/// Pretends the stat cache was written an hour later than it was (and seals the change
/// with a new checksum, as retrace would have written it): every entry it holds is then
/// settled, as if the capture had happened long ago, with no sleeping. No cache: nothing.
pub fn age_statcache(env: &Env) {
    let p = statcache(env);
    let Ok(mut bytes) = fs::read(&p) else {
        return;
    };
    let written = i64::from_le_bytes(bytes[8..16].try_into().unwrap());
    bytes[8..16].copy_from_slice(&(written + 3_600_000_000_000).to_le_bytes());
    // The header's own checksum (fields 0..144, sum 144..176), then the whole file's.
    let head = *blake3::hash(&bytes[..144]).as_bytes();
    bytes[144..176].copy_from_slice(&head);
    let body = bytes.len() - 32;
    let sum = *blake3::hash(&bytes[..body]).as_bytes();
    bytes[body..].copy_from_slice(&sum);
    fs::write(&p, bytes).unwrap();
}

/// Spawns `retrace ARGS` with piped output, stopped at `pause` (`point`, N-th time, the file
/// it creates) by the `RETRACE_FAULT_PAUSE` hook, on one thread so the points are exact.
pub fn spawn_paused(
    env: &Env,
    args: &[&str],
    pause: Option<(&str, usize, &Path)>,
) -> std::process::Child {
    let mut c = env.command(RETRACE, args);
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some((point, n, file)) = pause {
        c.env(
            "RETRACE_FAULT_PAUSE",
            format!("{point}:{n}:{}", file.display()),
        )
        .env("RAYON_NUM_THREADS", "1");
    }
    c.spawn().unwrap()
}

/// Waits until a paused process created `file` (or ended without reaching the point).
pub fn wait_paused(child: &mut std::process::Child, file: &Path) -> bool {
    loop {
        if file.exists() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The agent's id of the session `agent` opened in `ws` (retrace's key is another).
pub fn agent_session(ws: &Workspace, agent: &str) -> String {
    ws.sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.agent.as_deref() == Some(agent))
        .unwrap_or_else(|| panic!("no session of {agent}"))
        .name
        .expect("the agent's session id")
}

/// Turn `turn` of session `id`'s steps: tool, summary, and whether it ended.
pub fn step_summaries(ws: &Workspace, id: &str, turn: u64) -> Vec<(String, String, bool)> {
    ws.session(id)
        .steps(turn)
        .unwrap()
        .into_iter()
        .map(|s| (s.tool, s.summary, s.ended_ms.is_some()))
        .collect()
}

/// Session `id`'s prompts, newest first.
pub fn prompts(ws: &Workspace, id: &str) -> Vec<Option<String>> {
    ws.session(id)
        .log()
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.text)
        .collect()
}
