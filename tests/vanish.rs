//! Files deleted between the walk and the read are simply absent from the snapshot: not an
//! error, not "unreadable". (Its own test binary: its CPU load would disturb the timing of the
//! torn-read test in `unstable.rs`.)

use crate::common::{self, Env};

#[test]
fn files_deleted_while_they_are_captured_are_simply_absent() {
    let env = Env::new();
    for i in 0..3000 {
        env.write(&format!("d{}/f{i}", i % 30), format!("{i}"));
    }
    let ws = env.open();
    let root = env.root().to_path_buf();
    let deleter = std::thread::spawn(move || {
        for i in 0..3000 {
            let _ = std::fs::remove_file(root.join(format!("d{}/f{i}", i % 30)));
        }
    });
    // Captures race the deletions: each must succeed and list no vanished file as skipped.
    let mut captures = 0;
    while !deleter.is_finished() || captures == 0 {
        let c = ws.snapshot(None).unwrap();
        assert!(
            c.skipped.is_empty(),
            "{:?}",
            &c.skipped[..c.skipped.len().min(3)]
        );
        captures += 1;
    }
    deleter.join().unwrap();
    assert_eq!(ws.snapshot(None).unwrap().files, 0);
    common::assert_verified(&env);
}
