//! A file rewritten while it is captured is captured as a state it really had, or left out
//! and named; never torn (a mix of two versions, which never existed on disk).

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::Env;
use retrace::ObjectId;
use retrace::store::Store;

const LEN: usize = 3 * 1024 * 1024;

fn version(k: u8) -> Vec<u8> {
    vec![k; LEN]
}

#[test]
fn a_file_changing_during_capture_is_never_torn() {
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
        match snap.entries.iter().find(|e| e.path == b"busy.bin") {
            Some(e) => {
                // Every real state of the file is one byte value repeated: a whole version,
                // or, mid-rewrite, an empty file or a prefix of the next version.
                let store = Store::open_read_only(ws.store_path()).unwrap();
                let data = store.reader().unwrap().read_blob(&e.id).unwrap();
                assert!(
                    data.iter().all(|&b| b == data[0]),
                    "a torn read was captured"
                );
                if data.len() == LEN {
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
        assert!(snap.entries.iter().any(|e| e.path == b"calm.txt"));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(captured + reported, 40);
}
