//! Delta payloads: an object's payload compressed with zstd against the payload of a similar
//! object (its **base**, usually the previous version of the same file) as a raw-content
//! reference prefix ("patch-from"). A one-line edit of a 200 KB file stores about 130 bytes
//! instead of 40 KB (measurements: `docs/notes/deltas.md`).
//!
//! A delta frame is an ordinary zstd frame (content size in its header, window log at most
//! [`MAX_WINDOW_LOG`], long-distance matching on) that decodes only with the base's bytes as
//! prefix. A wrong base decodes to wrong bytes without complaint (prefix frames carry no
//! dictionary id), so readers verify the reconstructed content's id, as for every object.

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, DParameter, ResetDirective};

/// Longest chain of deltas: an object at this depth is never used as a base, and a new
/// version of it is a delta against the chain's whole root (depth 1) or stored whole.
/// Reading a 200 KB file through 50 deltas costs about 3 ms (`docs/notes/deltas.md`).
pub const MAX_DEPTH: u8 = 50;

/// The largest window a delta frame uses (base and new content must fit in it for the base
/// to be seen whole). zstd decoders accept up to 2^27 without being told.
pub const MAX_WINDOW_LOG: u32 = 27;

/// The zstd level deltas are made at: they are small already, and level 3 is fast.
const DELTA_LEVEL: i32 = 3;

/// The smallest window log covering `total` bytes (at least zstd's minimum of 2^10).
fn window_log_for(total: usize) -> u32 {
    let mut w = 10u32;
    while w < MAX_WINDOW_LOG && (1usize << w) < total {
        w += 1;
    }
    w
}

fn zstd_err(what: &str, code: zstd_safe::ErrorCode) -> String {
    format!("{what}: {}", zstd_safe::get_error_name(code))
}

/// `new` compressed against `base`.
///
/// # Errors
/// zstd's message (it fails only when it cannot allocate its context).
pub fn encode(base: &[u8], new: &[u8]) -> Result<Vec<u8>, String> {
    // A context per delta: `ref_prefix` borrows the base for the context's lifetime, so a
    // long-lived context cannot take one (creating one costs about 0.03 ms).
    let mut c = CCtx::try_create().ok_or("cannot create a zstd context")?;
    c.reset(ResetDirective::SessionAndParameters)
        .map_err(|e| zstd_err("reset", e))?;
    c.set_parameter(CParameter::CompressionLevel(DELTA_LEVEL))
        .map_err(|e| zstd_err("level", e))?;
    c.set_parameter(CParameter::WindowLog(window_log_for(
        base.len().saturating_add(new.len()),
    )))
    .map_err(|e| zstd_err("window", e))?;
    // Without it, bases of 2 MB and more lose their early part (docs/notes/deltas.md).
    c.set_parameter(CParameter::EnableLongDistanceMatching(true))
        .map_err(|e| zstd_err("long-distance matching", e))?;
    c.set_parameter(CParameter::ContentSizeFlag(true))
        .map_err(|e| zstd_err("content size", e))?;
    c.ref_prefix(base).map_err(|e| zstd_err("prefix", e))?;
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(new.len()));
    c.compress2(&mut out, new)
        .map_err(|e| zstd_err("compress", e))?;
    Ok(out)
}

/// Whether a delta of `delta_len` bytes is worth storing instead of `data` whole: at most a
/// sixteenth of it, or else at most half of what compressing it alone gives.
#[must_use]
pub fn pays(delta_len: usize, data: &[u8]) -> bool {
    delta_len.saturating_mul(16) <= data.len()
        || delta_len.saturating_mul(2) <= super::record::compress(data).1.len()
}

/// The largest content a delta rebuilds (what a record may claim, see
/// [`super::record::MAX_FRAME_BYTES`]).
const MAX_SIZE: usize = super::record::MAX_FRAME_BYTES as usize;

/// Reverses [`encode`]: the `size` bytes that `delta` encodes against `base`. `size` (the
/// recorded size, at most 256 MiB) bounds the output, so a hostile frame cannot make it
/// balloon.
///
/// # Errors
/// A message when `size` is over 256 MiB, `delta` is not one zstd frame declaring `size`
/// bytes of content, or it does not decode to exactly them.
pub fn decode(base: &[u8], delta: &[u8], size: usize) -> Result<Vec<u8>, String> {
    if size > MAX_SIZE {
        return Err(format!(
            "a delta of {size} bytes is more than any object holds"
        ));
    }
    match zstd_safe::get_frame_content_size(delta) {
        Ok(Some(n)) if n == size as u64 => {}
        Ok(Some(n)) => return Err(format!("delta declares {n} bytes, not the recorded {size}")),
        Ok(None) => return Err("delta declares no content size".into()),
        Err(_) => return Err("delta is not a zstd frame".into()),
    }
    let mut d = DCtx::try_create().ok_or("cannot create a zstd context")?;
    d.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))
        .map_err(|e| zstd_err("window", e))?;
    d.ref_prefix(base).map_err(|e| zstd_err("prefix", e))?;
    let mut out = Vec::with_capacity(size);
    let n = d
        .decompress(&mut out, delta)
        .map_err(|e| zstd_err("delta does not decode", e))?;
    if n != size || out.len() != size {
        return Err(format!(
            "delta decodes to {n} bytes, not the recorded {size}"
        ));
    }
    // More input than one frame: not what `encode` writes.
    let frame =
        zstd_safe::find_frame_compressed_size(delta).map_err(|e| zstd_err("delta frame", e))?;
    if frame != delta.len() {
        return Err(format!(
            "{} bytes after the delta frame",
            delta.len() - frame
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
