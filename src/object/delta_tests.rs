//! Unit tests of `delta.rs`.

use super::*;

fn text(seed: u64, lines: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut out = String::new();
    for i in 0..lines {
        let _ = writeln!(out, "let value_{i} = compute({seed}, {i}) * {};", i * 7);
    }
    out.into_bytes()
}

#[test]
fn a_small_edit_is_a_small_delta_that_decodes_exactly() {
    let base = text(1, 4000);
    let mut new = base.clone();
    new.splice(50_000..50_010, b"CHANGED!".iter().copied());
    let d = encode(&base, &new).unwrap();
    assert!(d.len() < 200, "{} bytes", d.len());
    assert_eq!(decode(&base, &d, new.len()).unwrap(), new);
}

#[test]
fn the_wrong_size_or_base_or_trailing_bytes_are_refused_or_differ() {
    let base = text(1, 500);
    let new = text(2, 500);
    let d = encode(&base, &new).unwrap();
    assert!(decode(&base, &d, new.len() + 1).is_err());
    assert!(decode(&base, &d, new.len() - 1).is_err());
    let mut longer = d.clone();
    longer.push(0);
    assert!(decode(&base, &longer, new.len()).is_err());
    assert!(decode(&base, &d[..d.len() - 1], new.len()).is_err());
    // A wrong base is not detected here (no dictionary id): only the content's id is.
    let other: Vec<u8> = base.iter().rev().copied().collect();
    assert!(decode(&other, &d, new.len()).ok() != Some(new));
}

#[test]
fn bases_that_look_like_zstd_dictionaries_are_plain_content() {
    let mut base = vec![0x37, 0xA4, 0x30, 0xEC];
    base.extend(text(4, 300));
    let mut new = base.clone();
    new.extend_from_slice(b"one more line\n");
    let d = encode(&base, &new).unwrap();
    assert_eq!(decode(&base, &d, new.len()).unwrap(), new);
}

#[test]
fn impossible_sizes_are_refused_before_allocating() {
    let d = encode(b"base", b"content").unwrap();
    assert!(decode(b"base", &d, usize::MAX).is_err());
    assert!(decode(b"base", &d, MAX_SIZE + 1).is_err());
    assert!(decode(b"base", &d, 1 << 20).is_err());
}

#[test]
fn empty_bases_and_contents_round_trip() {
    for (base, new) in [(&b""[..], &b"x"[..]), (b"abc", b""), (b"", b"")] {
        let d = encode(base, new).unwrap();
        assert_eq!(decode(base, &d, new.len()).unwrap(), new);
    }
}

#[test]
fn window_logs_cover_the_input_up_to_the_limit() {
    assert_eq!(window_log_for(0), 10);
    assert_eq!(window_log_for(1025), 11);
    assert_eq!(window_log_for(1 << 20), 20);
    assert_eq!(window_log_for(usize::MAX), MAX_WINDOW_LOG);
}
