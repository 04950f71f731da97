//! A file rewritten while it is captured is captured as a state it held at one instant, or
//! left out and named; never a mix of two reads. A writer preempted in the middle of one
//! `write()` really leaves the file half-written (a prefix of the next version over the
//! previous one): that state is on disk, every read agrees with it, and capture may store it
//! (docs/crash-model.md, Limits). What no instant ever held (older bytes after newer ones, two
//! versions apart) is never stored.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::Env;
use retrace::ObjectId;
use retrace::store::Store;

const LEN: usize = 3 * 1024 * 1024;

fn version(k: u8) -> Vec<u8> {
    vec![k; LEN]
}

/// Every state the file holds at some instant: version k whole, or, while one rewrite is in
/// progress (the writer may be preempted inside a single `write()`), a prefix of version k+1
/// over the rest of version k. The length never changes (rewritten in place, same size).
fn held_at_one_instant(data: &[u8]) -> bool {
    let Some(&new) = data.first() else {
        return false;
    };
    let n = data.iter().position(|&b| b != new).unwrap_or(data.len());
    data.len() == LEN && data[n..].iter().all(|&b| b == new.wrapping_sub(1))
}

/// The runs of byte values in `data`, for a failure message.
fn describe(data: &[u8]) -> String {
    let mut runs: Vec<(u8, usize)> = Vec::new();
    for &b in data {
        match runs.last_mut() {
            Some((v, n)) if *v == b => *n += 1,
            _ => runs.push((b, 1)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(8)
        .map(|(v, n)| format!("{n}×{v}"))
        .collect();
    format!("{} bytes: {}", data.len(), shown.join(" "))
}

#[test]
fn held_at_one_instant_accepts_real_states_only() {
    let mut mid = version(8);
    mid[..1000].fill(9);
    assert!(held_at_one_instant(&version(7)));
    assert!(held_at_one_instant(&mid), "a preempted write() leaves this");
    let mut wrap = version(255);
    wrap[..10].fill(0);
    assert!(held_at_one_instant(&wrap));
    let mut older_over_newer = version(9);
    older_over_newer[..1000].fill(8);
    assert!(!held_at_one_instant(&older_over_newer));
    let mut two_apart = version(7);
    two_apart[..1000].fill(9);
    assert!(!held_at_one_instant(&two_apart));
    let mut three_parts = mid.clone();
    three_parts[LEN - 10..].fill(9);
    assert!(!held_at_one_instant(&three_parts));
    assert!(!held_at_one_instant(&[]));
    assert!(!held_at_one_instant(&version(7)[..LEN - 1]));
}

#[test]
fn a_file_changing_during_capture_is_captured_as_a_state_it_held() {
    let env = Env::new();
    env.write("busy.bin", version(0));
    env.write("calm.txt", "calm");
    let ws = env.open();
    let valid: HashSet<ObjectId> = (0..=255u8)
        .map(|k| ObjectId::of_blob(&version(k)))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let path = env.path("busy.bin");
        std::thread::spawn(move || {
            use std::io::{Seek, Write};
            let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            let mut k = 0u8;
            while !stop.load(Ordering::Relaxed) {
                k = k.wrapping_add(1);
                // Overwritten in place, same size: a reader can see a mix of versions, and
                // several rewrites can share one mtime tick.
                f.seek(std::io::SeekFrom::Start(0)).unwrap();
                f.write_all(&version(k)).unwrap();
            }
        })
    };
    let mut captured = 0;
    let mut reported = 0;
    for _ in 0..40 {
        let snap = ws.snapshot(None).unwrap();
        match snap.entries().iter().find(|e| e.path == b"busy.bin") {
            Some(e) => {
                let store = Store::open_read_only(ws.store_path()).unwrap();
                let data = store.reader().unwrap().read_blob(&e.id).unwrap();
                assert!(
                    held_at_one_instant(&data),
                    "captured a state the file never held: {}",
                    describe(&data)
                );
                if data.iter().all(|&b| b == data[0]) {
                    assert!(valid.contains(&e.id));
                }
                captured += 1;
            }
            None => {
                let s = snap
                    .skipped
                    .iter()
                    .find(|s| s.path == "busy.bin")
                    .expect("named");
                assert!(!s.reason.is_empty());
                reported += 1;
            }
        }
        assert!(snap.entries().iter().any(|e| e.path == b"calm.txt"));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(captured + reported, 40);
}
