//! Three-way text merges, for reverting a turn whose files changed since: the change the
//! revert makes (the turn's after-version back to its before-version) applied over what the
//! disk holds now, when the two do not touch the same lines. Line-based, by the `diffy`
//! crate (diff3); binary content and conflicts are refused, never written with markers.

/// Largest file merged, on any side (larger files conflict instead): the bound of a
/// single blob, so a merged file's id is its blob id.
pub const MAX_MERGE_BYTES: u64 = crate::object::CHUNK_THRESHOLD;

/// Why two changes of a file could not be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmerged {
    /// A side holds a NUL byte: not text.
    Binary,
    /// A side is over [`MAX_MERGE_BYTES`].
    TooLarge,
    /// Both changed the same lines (or adjacent ones) differently.
    Conflict,
}

impl Unmerged {
    /// A few words for a conflict list.
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            Unmerged::Binary => "binary content cannot be merged",
            Unmerged::TooLarge => "too large to merge",
            Unmerged::Conflict => "changed on the same lines since",
        }
    }
}

/// `ours` with the change from `base` to `theirs` applied, when the two changes touch
/// different lines. Identical changes merge.
///
/// # Errors
/// [`Unmerged`] says why not.
pub fn three_way(base: &[u8], ours: &[u8], theirs: &[u8]) -> Result<Vec<u8>, Unmerged> {
    let sides = [base, ours, theirs];
    if sides.iter().any(|s| s.len() as u64 > MAX_MERGE_BYTES) {
        return Err(Unmerged::TooLarge);
    }
    if sides.iter().any(|s| s.contains(&0)) {
        return Err(Unmerged::Binary);
    }
    let merged = diffy::merge_bytes(base, ours, theirs).map_err(|_| Unmerged::Conflict)?;
    if merged.len() as u64 > MAX_MERGE_BYTES {
        return Err(Unmerged::TooLarge);
    }
    Ok(merged)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
