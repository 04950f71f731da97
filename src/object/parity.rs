//! Frames that survive damage: a zstd frame cut into shards, each with a checksum, plus one
//! parity shard (the XOR of the others), so that any one damaged shard — flipped bytes within
//! one shard — is rebuilt from the rest (codec `ZstdParity`, `docs/format.md`, "Parity
//! frames"). Damage spanning two shards (shards are 256 bytes to 1/16 of the frame, not
//! aligned to disk sectors, so a torn 4 KiB sector usually does) loses the frame, as it would
//! a frame of any codec.
//!
//! Maintenance packs many small objects of different snapshots into one such frame (the
//! versions of a directory's tree compress against each other as git's tree deltas do),
//! where a plain shared frame would let one flipped byte take every snapshot naming any of
//! them. Layout, all integers little endian:
//!
//! ```text
//! header      zstd_len u32 | shard_len u32 | check u64      (16 bytes; check = first 8 bytes
//! header      the same 16 bytes again                        of blake3(zstd_len | shard_len))
//! data        k = ceil(zstd_len / shard_len) shards of shard_len bytes: the zstd frame,
//!             zero padded to k × shard_len
//! parity      shard_len bytes: the XOR of the k data shards
//! checks      k + 1 × u64: the first 8 bytes of blake3 of each data shard, then the parity's
//! ```

use std::borrow::Cow;

/// Bytes of one copy of the header.
const HEADER: usize = 16;

/// Data shards a frame is cut into, at most (fewer for small frames: a shard is at least
/// [`MIN_SHARD`] bytes).
const MAX_SHARDS: usize = 16;

/// The smallest shard worth a checksum of its own.
const MIN_SHARD: usize = 256;

/// A checksum: the first 8 bytes of blake3.
fn check(bytes: &[u8]) -> u64 {
    let h = blake3::hash(bytes);
    let mut b = [0; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(b)
}

fn header(zstd_len: u32, shard_len: u32) -> [u8; HEADER] {
    let mut h = [0; HEADER];
    h[..4].copy_from_slice(&zstd_len.to_le_bytes());
    h[4..8].copy_from_slice(&shard_len.to_le_bytes());
    let c = check(&h[..8]);
    h[8..].copy_from_slice(&c.to_le_bytes());
    h
}

/// `zstd` (a zstd frame) with shards, parity and checksums around it; `None` for an empty
/// frame or one over 4 GiB.
#[must_use]
pub fn protect(zstd: &[u8]) -> Option<Vec<u8>> {
    if zstd.is_empty() {
        return None;
    }
    let zstd_len = u32::try_from(zstd.len()).ok()?;
    let shard_len = zstd.len().div_ceil(MAX_SHARDS).max(MIN_SHARD);
    let k = zstd.len().div_ceil(shard_len).max(1);
    let h = header(zstd_len, u32::try_from(shard_len).ok()?);
    let mut out = Vec::with_capacity(2 * HEADER + (k + 1) * (shard_len + 8));
    out.extend_from_slice(&h);
    out.extend_from_slice(&h);
    out.extend_from_slice(zstd);
    out.resize(2 * HEADER + k * shard_len, 0);
    let mut parity = vec![0u8; shard_len];
    for shard in out[2 * HEADER..].chunks_exact(shard_len) {
        xor_into(&mut parity, shard);
    }
    let mut checks: Vec<u64> = out[2 * HEADER..]
        .chunks_exact(shard_len)
        .map(check)
        .collect();
    checks.push(check(&parity));
    out.extend_from_slice(&parity);
    for c in checks {
        out.extend_from_slice(&c.to_le_bytes());
    }
    Some(out)
}

fn xor_into(acc: &mut [u8], shard: &[u8]) {
    for (a, b) in acc.iter_mut().zip(shard) {
        *a ^= b;
    }
}

/// What [`unprotect`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Shards {
    /// Every shard matched its checksum.
    Intact,
    /// One shard did not (data shard `n`, or the parity shard, numbered `k`): the frame was
    /// rebuilt without it.
    Rebuilt(usize),
}

/// The zstd frame inside a frame [`protect`] made, rebuilding one damaged shard.
///
/// # Errors
/// A message when neither header copy holds, the length does not match the header, or more
/// than one shard is damaged.
pub fn unprotect(stored: &[u8]) -> Result<(Cow<'_, [u8]>, Shards), String> {
    let read_header = |h: &[u8]| -> Option<(usize, usize)> {
        let c = u64::from_le_bytes(h.get(8..16)?.try_into().ok()?);
        if check(h.get(..8)?) != c {
            return None;
        }
        let zstd_len = u32::from_le_bytes(h.get(..4)?.try_into().ok()?) as usize;
        let shard_len = u32::from_le_bytes(h.get(4..8)?.try_into().ok()?) as usize;
        (zstd_len > 0 && shard_len > 0).then_some((zstd_len, shard_len))
    };
    let (zstd_len, shard_len) = stored
        .get(..HEADER)
        .and_then(read_header)
        .or_else(|| stored.get(HEADER..2 * HEADER).and_then(read_header))
        .ok_or("parity frame: both copies of its header are damaged")?;
    let k = zstd_len.div_ceil(shard_len);
    let expect = k
        .checked_add(1)
        .and_then(|n| n.checked_mul(shard_len.checked_add(8)?))
        .and_then(|n| n.checked_add(2 * HEADER));
    if expect != Some(stored.len()) {
        return Err(format!(
            "parity frame: {} bytes where its header says {}",
            stored.len(),
            expect.map_or_else(|| "more than fit in memory".into(), |n| n.to_string())
        ));
    }
    let body = &stored[2 * HEADER..2 * HEADER + (k + 1) * shard_len];
    let checks = &stored[2 * HEADER + (k + 1) * shard_len..];
    let bad: Vec<usize> = body
        .chunks_exact(shard_len)
        .zip(checks.chunks_exact(8))
        .enumerate()
        .filter(|(_, (shard, c))| {
            <[u8; 8]>::try_from(*c).map(u64::from_le_bytes).ok() != Some(check(shard))
        })
        .map(|(n, _)| n)
        .collect();
    match bad[..] {
        [] => Ok((Cow::Borrowed(&body[..zstd_len]), Shards::Intact)),
        [n] if n == k => Ok((Cow::Borrowed(&body[..zstd_len]), Shards::Rebuilt(n))),
        [n] => {
            let mut data = body[..k * shard_len].to_vec();
            let mut rebuilt = body[k * shard_len..].to_vec();
            for (i, shard) in body[..k * shard_len].chunks_exact(shard_len).enumerate() {
                if i != n {
                    xor_into(&mut rebuilt, shard);
                }
            }
            data[n * shard_len..(n + 1) * shard_len].copy_from_slice(&rebuilt);
            data.truncate(zstd_len);
            Ok((Cow::Owned(data), Shards::Rebuilt(n)))
        }
        _ => Err(format!(
            "parity frame: {} of its {} shards are damaged; one can be rebuilt",
            bad.len(),
            k + 1
        )),
    }
}

#[cfg(test)]
#[path = "parity_tests.rs"]
mod tests;
