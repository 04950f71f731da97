//! Racy timestamps: a file rewritten with the same size right after a capture must never be
//! mistaken for unchanged by the stat cache.

use crate::common::Env;
use retrace::ObjectId;
use retrace::object::EntryKind;

#[test]
fn hundred_write_then_capture_rounds_always_see_the_new_content() {
    let env = Env::new();
    let ws = env.open();
    for round in 0..100 {
        // Same size every round, written immediately after the previous capture, so size,
        // and often mtime and ctime (coarse clocks), match the cached entry.
        let content = format!("round {round:04}");
        env.write("hot.txt", &content);
        let snap = ws.snapshot(None).unwrap();
        let entry = snap
            .entries()
            .iter()
            .find(|e| e.path == b"hot.txt")
            .unwrap();
        assert_eq!(entry.kind, EntryKind::File);
        assert_eq!(
            entry.id,
            ObjectId::of_blob(content.as_bytes()),
            "round {round}"
        );
    }
}
