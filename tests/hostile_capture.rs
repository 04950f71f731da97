//! A hostile world during a capture: a directory swapped for a symlink to a private
//! directory outside the workspace while `retrace snapshot` walks and reads. The capture must
//! read the directory as it was or leave it out and name it, never follow the symlink: no
//! snapshot may hold a byte from outside, and restoring it must write none into the
//! workspace. Run at exact points (the `RETRACE_FAULT_PAUSE` hooks `listed` and `read` stop
//! the capture, the test swaps, the capture goes on; these need the cargo feature
//! `fault-injection`) and by free races.

use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};

use crate::common::{Env, RETRACE, spawn_paused, stderr, stdout, wait_paused};

const MARK: &str = "SECRET";

/// `d/g*` and `d/sub/f*` in the workspace; the same names with secret contents outside.
fn setup(env: &Env, files: usize) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let secret = out.path().join("secret");
    fs::create_dir_all(secret.join("sub")).unwrap();
    for i in 0..files {
        env.write(&format!("d/g{i:04}"), format!("ws g {i}\n"));
        env.write(&format!("d/sub/f{i:04}"), format!("ws f {i}\n"));
        fs::write(secret.join(format!("g{i:04}")), format!("{MARK} g {i}\n")).unwrap();
        fs::write(
            secret.join(format!("sub/f{i:04}")),
            format!("{MARK} f {i}\n"),
        )
        .unwrap();
    }
    out
}

fn swap(env: &Env, target: &Path) {
    fs::rename(env.path("d"), env.path("d.real")).unwrap();
    std::os::unix::fs::symlink(target, env.path("d")).unwrap();
}

fn swap_back(env: &Env) {
    fs::remove_file(env.path("d")).unwrap();
    fs::rename(env.path("d.real"), env.path("d")).unwrap();
}

fn snapshot(env: &Env, pause: Option<(&str, usize, &Path)>) -> Child {
    spawn_paused(env, &["snapshot", "--json"], pause)
}

/// Every file's bytes in snapshot `id`, as one string.
fn snapshot_content(env: &Env, id: &str) -> String {
    let ws = env.open();
    let path = ws.store_path().to_path_buf();
    drop(ws);
    let store = retrace::store::Store::open_read_only(&path).unwrap();
    let reader = store.reader().unwrap();
    let root = retrace::object::ObjectId::from_hex(id).unwrap();
    let mut out = String::new();
    for e in retrace::diff::flatten(&reader, &root).unwrap() {
        if matches!(
            e.kind,
            retrace::object::EntryKind::File | retrace::object::EntryKind::Executable
        ) {
            out.push_str(&String::from_utf8_lossy(&reader.read_blob(&e.id).unwrap()));
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_directory_swapped_for_a_symlink_at_exact_points_is_never_followed() {
    let files = 40;
    // With one thread the walk lists the root, then `d`, then `d/sub`; the reads go in path
    // order: `d/g*`, then `d/sub/f*`.
    for (point, n) in [
        ("listed", 1),
        ("listed", 2),
        ("read", 1),
        ("read", 20),
        ("read", files + 1),
        ("read", files + 15),
    ] {
        let env = Env::new();
        let out = setup(&env, files);
        let pause = env.home.path().join("paused");
        let mut child = snapshot(&env, Some((point, n, &pause)));
        assert!(wait_paused(&mut child, &pause), "{point}:{n} never reached");
        swap(&env, &out.path().join("secret"));
        fs::remove_file(&pause).unwrap();
        let o = child.wait_with_output().unwrap();
        swap_back(&env);
        let what = format!("{point}:{n}");
        let v = check_output(&env, o, &what);
        // What was left out is named.
        let skipped = v["skipped"].to_string();
        let files_in = v["files"].as_u64().unwrap();
        if files_in < 2 * files as u64 {
            assert!(
                skipped.contains("replaced by a symlink") || skipped.contains("d/"),
                "{what}: {files_in} files captured and nothing named as left out\n{v}"
            );
        }
    }
}

/// Checks a finished capture: no outside byte in its snapshot, and restoring it (with the
/// workspace swapped back) writes none into the workspace. Returns the snapshot's JSON.
fn check_output(env: &Env, o: std::process::Output, what: &str) -> serde_json::Value {
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    assert!(
        !snapshot_content(env, &id).contains(MARK),
        "{what}: the snapshot holds bytes from outside the workspace\n{v}"
    );
    let r = env.run(RETRACE, &["restore", &id, "--force"]);
    assert!(r.status.success(), "{what}: {}", stderr(&r));
    assert_no_mark(env.root(), what);
    v
}

fn assert_no_mark(root: &Path, what: &str) {
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let text = fs::read(e.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&text).contains(MARK),
                "{what}: restoring wrote outside bytes to {}",
                e.path().display()
            );
        }
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_during_cold_captures_is_never_followed() {
    // 100 cold captures, each raced by a swap that lands at a point moving through the
    // capture from run to run and holds until the capture ends (as in the report).
    let files = 2000;
    let mut landed = 0;
    for run in 0..100 {
        let env = Env::new();
        let out = setup(&env, files);
        let child = snapshot(&env, None);
        std::thread::sleep(std::time::Duration::from_millis(3 * (run % 12)));
        swap(&env, &out.path().join("secret"));
        let o = child.wait_with_output().unwrap();
        swap_back(&env);
        let v = check_output(&env, o, &format!("run {run}"));
        if v["files"].as_u64() != Some(2 * files as u64) {
            landed += 1;
        }
    }
    // Not asserted (timing): how many swaps fell inside a capture.
    eprintln!("{landed} of 100 captures saw the swap");
}

#[test]
fn a_write_through_a_shared_mapping_is_in_the_next_watched_snapshot() {
    use std::io::BufRead;
    // inotify sees no write through a shared writable mapping: the watcher names the
    // directories of the files mapped so, and the capture looks at them again.
    let env = Env::new();
    env.write("data/state.bin", vec![b'.'; 4096]);
    env.write("other.txt", "x");
    let cli = |args: &[&str]| {
        let o = env
            .command(RETRACE, args)
            .env("RETRACE_WATCH_TIMEOUT_MS", "30000")
            .env("RETRACE_WATCH_IDLE_MINUTES", "0.5")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
        stdout(&o)
    };
    cli(&["watch", "--detach"]);
    cli(&["snapshot"]);
    let settled: serde_json::Value = serde_json::from_str(&cli(&["snapshot", "--json"])).unwrap();
    assert!(
        settled["walked_because"].is_null(),
        "not watched: {settled}"
    );
    let script = "import mmap,sys\n\
                  f=open(sys.argv[1],'r+b')\n\
                  m=mmap.mmap(f.fileno(),4096,mmap.MAP_SHARED,mmap.PROT_READ|mmap.PROT_WRITE)\n\
                  m[0:4]=b'EDIT'\n\
                  print('written',flush=True)\n\
                  sys.stdin.read()\n";
    let mut writer = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(env.path("data/state.bin"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(writer.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "written");
    let v: serde_json::Value = serde_json::from_str(&cli(&["snapshot", "--json"])).unwrap();
    drop(writer.stdin.take());
    let _ = writer.wait();
    let _ = env.command(RETRACE, &["watch", "--stop"]).output();
    assert!(v["walked_because"].is_null(), "the capture walked: {v}");
    let id = v["id"].as_str().unwrap();
    assert!(
        snapshot_content(&env, id).contains("EDIT"),
        "the write through the mapping is in no snapshot: {v}"
    );
}
