//! A file rewritten while it is captured is either captured whole (some version that was
//! really written) or left out and named; never torn.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::Env;
use retrace::ObjectId;

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
    let valid: HashSet<ObjectId> = (0..=255u8).map(|k| ObjectId::of_blob(&version(k))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let path = env.path("busy.bin");
        std::thread::spawn(move || {
            let mut k = 0u8;
            while !stop.load(Ordering::Relaxed) {
                k = k.wrapping_add(1);
                // Rewritten in place (not renamed): a reader can see a mix of versions.
                std::fs::write(&path, version(k)).unwrap();
            }
        })
    };
    let mut captured = 0;
    let mut reported = 0;
    for _ in 0..20 {
        let snap = ws.snapshot(None).unwrap();
        match snap.entries.iter().find(|e| e.path == b"busy.bin") {
            Some(e) => {
                assert!(valid.contains(&e.id), "a torn read was captured");
                captured += 1;
            }
            None => {
                let s = snap.skipped.iter().find(|s| s.path == "busy.bin").expect("named");
                assert!(!s.reason.is_empty());
                reported += 1;
            }
        }
        assert!(snap.entries.iter().any(|e| e.path == b"calm.txt"));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(captured + reported, 20);
}
