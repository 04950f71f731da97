//! Helpers shared by the unit tests.

/// `n` incompressible bytes (xorshift from seed `x`), so a frame of them is as big as they
/// are.
pub(crate) fn noise(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}
