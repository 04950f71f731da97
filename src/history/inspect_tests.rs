//! Unit tests of `inspect.rs`.

use super::{first_line, stored_share, time_text};
use crate::object::record::{Codec, ObjectKind, ObjectRecord};

fn record(stored_len: u32, frame_len: u32, len: u32) -> ObjectRecord {
    ObjectRecord {
        kind: ObjectKind::Blob,
        size: u64::from(len),
        offset: 0,
        stored_len,
        codec: Codec::Zstd,
        frame_len,
        within: 0,
        len,
        written: 0,
        delta: None,
    }
}

#[test]
fn an_object_alone_in_its_frame_costs_the_frame_and_a_shared_one_its_share() {
    assert_eq!(stored_share(&record(500, 2000, 2000)), 500);
    assert_eq!(stored_share(&record(1000, 4000, 1000)), 250);
    // Rounded up: a tiny object in a big frame still costs a byte.
    assert_eq!(stored_share(&record(1000, 1_000_000, 1)), 1);
}

#[test]
fn times_and_first_lines_read_as_the_cli_prints_them() {
    assert_eq!(time_text(0, true), "1970-01-01 00:00:00");
    assert_eq!(time_text(1_796_120_520_000, false), "2026-12-01 10:22");
    assert_eq!(first_line("fix the bug\nthen more", 60), "fix the bug");
    assert_eq!(first_line("abcdef", 4), "abc…");
    assert_eq!(first_line("a\tb\x1b[2J", 20), r"a\tb\x1b[2J");
}
