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

/// [`three_way`], where changes that only touch a pure deletion also merge: one side
/// inserting lines at an edge of lines the other side deleted (a line appended after the
/// line a session takes out) keeps the insertion at that edge, and neighbouring deletions
/// both apply. diff3 (and git) call such changes a conflict; for taking one writer's own
/// lines out of a file another writer added to right beside them, the result is not in
/// doubt. Changes that overlap, two insertions at one point, an insertion inside the other
/// side's lines, and anything touching a replacement still conflict.
///
/// # Errors
/// [`Unmerged`] says why not.
pub fn three_way_touching(base: &[u8], ours: &[u8], theirs: &[u8]) -> Result<Vec<u8>, Unmerged> {
    match three_way(base, ours, theirs) {
        Err(Unmerged::Conflict) => {}
        done => return done,
    }
    let lines: Vec<&[u8]> = base.split_inclusive(|&b| b == b'\n').collect();
    let mut hunks = edits(base, ours);
    let theirs_edits = edits(base, theirs);
    for t in theirs_edits {
        if hunks.contains(&t) {
            continue; // the same change on both sides
        }
        let clash = hunks.iter().any(|o| {
            let (o_ins, t_ins) = (o.start == o.end, t.start == t.end);
            // Touching (an insertion at an edge of the other's lines, or two neighbouring
            // ranges) merges only beside a pure deletion: beside a replacement, as git says,
            // which version the new lines belong with is in doubt.
            let touch = o.start == t.end
                || t.start == o.end
                || (o_ins && o.start == t.start)
                || (t_ins && t.start == o.start);
            let beside_deletion = (!o_ins && o.lines.is_empty()) || (!t_ins && t.lines.is_empty());
            o.start.max(t.start) < o.end.min(t.end)
                || (o_ins && t_ins && o.start == t.start)
                || (o_ins && t.start < o.start && o.start < t.end)
                || (t_ins && o.start < t.start && t.start < o.end)
                || (touch && !beside_deletion)
        });
        if clash {
            return Err(Unmerged::Conflict);
        }
        hunks.push(t);
    }
    // In base order; at one point an insertion comes before the lines replaced there.
    hunks.sort_by_key(|h| (h.start, h.end != h.start, h.end));
    let mut out = Vec::with_capacity(ours.len().max(theirs.len()));
    let mut at = 0;
    for h in &hunks {
        if h.start < at {
            return Err(Unmerged::Conflict);
        }
        for l in lines.get(at..h.start).unwrap_or_default() {
            out.extend_from_slice(l);
        }
        for l in &h.lines {
            out.extend_from_slice(l);
        }
        at = h.end;
    }
    for l in lines.get(at..).unwrap_or_default() {
        out.extend_from_slice(l);
    }
    if out.len() as u64 > MAX_MERGE_BYTES {
        return Err(Unmerged::TooLarge);
    }
    Ok(out)
}

/// One change from a base: its lines `start..end` (0-based; empty for an insertion before
/// line `start`) become `lines`.
#[derive(Debug, PartialEq, Eq)]
struct Edit<'a> {
    start: usize,
    end: usize,
    lines: Vec<&'a [u8]>,
}

/// The changes from `base` to `new`, without context, in base order.
fn edits<'a>(base: &[u8], new: &'a [u8]) -> Vec<Edit<'a>> {
    let new_lines: Vec<&'a [u8]> = new.split_inclusive(|&b| b == b'\n').collect();
    // Unified ranges count from 1, but an empty range names the line before it.
    let from = |start: usize, len: usize| if len == 0 { start } else { start - 1 };
    diffy::DiffOptions::new()
        .set_context_len(0)
        .create_patch_bytes(base, new)
        .hunks()
        .iter()
        .map(|h| {
            let (old, added) = (h.old_range(), h.new_range());
            let start = from(old.start(), old.len());
            let at = from(added.start(), added.len());
            Edit {
                start,
                end: start + old.len(),
                lines: new_lines
                    .get(at..at + added.len())
                    .unwrap_or_default()
                    .to_vec(),
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
