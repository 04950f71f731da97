//! Unit tests of `parity.rs`.

use super::*;

fn sample(len: usize) -> Vec<u8> {
    (0..len).map(|i| u8::try_from((i * 7 + i / 13) % 256).unwrap()).collect()
}

#[test]
fn an_intact_frame_reads_back_exactly() {
    for len in [1, 255, 256, 257, 4096, 4097, 70_000] {
        let z = sample(len);
        let p = protect(&z).unwrap();
        let (back, shards) = unprotect(&p).unwrap();
        assert_eq!(back.as_ref(), z.as_slice(), "length {len}");
        assert_eq!(shards, Shards::Intact);
    }
    assert!(protect(&[]).is_none());
}

#[test]
fn any_one_flipped_byte_is_rebuilt() {
    for len in [1, 300, 5000, 20_001] {
        let z = sample(len);
        let p = protect(&z).unwrap();
        for at in 0..p.len() {
            let mut bad = p.clone();
            bad[at] ^= 0x5A;
            let (back, _) = unprotect(&bad)
                .unwrap_or_else(|e| panic!("length {len}, byte {at} flipped: {e}"));
            assert_eq!(back.as_ref(), z.as_slice(), "length {len}, byte {at} flipped");
        }
    }
}

#[test]
fn a_rebuilt_shard_is_named() {
    let z = sample(5000);
    let p = protect(&z).unwrap();
    let mut bad = p.clone();
    bad[2 * HEADER + 10] ^= 1;
    assert_eq!(unprotect(&bad).unwrap().1, Shards::Rebuilt(0));
}

#[test]
fn two_damaged_shards_are_refused_not_misread() {
    let z = sample(5000);
    let p = protect(&z).unwrap();
    let shard_len = 5000usize.div_ceil(MAX_SHARDS).max(MIN_SHARD);
    let mut bad = p.clone();
    bad[2 * HEADER] ^= 1;
    bad[2 * HEADER + shard_len] ^= 1;
    let e = unprotect(&bad).unwrap_err();
    assert!(e.contains("2 of its"), "{e}");
}

#[test]
fn hostile_frames_are_refused_without_panicking() {
    let p = protect(&sample(3000)).unwrap();
    for cut in [0, 1, 15, 16, 31, 32, 100, p.len() - 1] {
        assert!(unprotect(&p[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = p.clone();
    longer.push(0);
    assert!(unprotect(&longer).is_err());
    // A header claiming huge shards, with a valid check.
    let mut h = header(u32::MAX, u32::MAX).to_vec();
    h.extend_from_slice(&header(u32::MAX, u32::MAX));
    assert!(unprotect(&h).is_err());
}
