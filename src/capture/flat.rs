//! Flat lists of a snapshot's paths: the one a capture builds from its rows and the stat
//! cache's records, and the pairs of lists its commit's records compare, read back from
//! the snapshots' trees.

use rayon::prelude::*;

use super::Captured;
use super::tree::{kind_of, leaf_kind};
use crate::error::StoreError;
use crate::object::{EntryKind, FlatEntry, ObjectId, RelPath};
use crate::scan::ScanEntry;
use crate::statcache::StatCache;
use crate::store::StoreReader;

impl Captured<'_> {
    /// Paths added, modified and deleted from snapshot `before` (in the store) to this one
    /// (`root`): only the subtrees whose ids differ are read.
    ///
    /// # Errors
    /// [`StoreError`] for a tree of `before` that is missing or damaged.
    pub fn diff_from(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<crate::diff::Diff, StoreError> {
        let (old, now) = self.flat_pair(reader, before, root)?;
        Ok(crate::diff::diff(&old, &now))
    }

    /// [`Captured::diff_from`] as typed changes of files and symlinks (paths as bytes, the
    /// entries on both sides).
    ///
    /// # Errors
    /// As [`Captured::diff_from`].
    pub fn changes_from(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<Vec<crate::diff::Change>, StoreError> {
        let (old, now) = self.flat_pair(reader, before, root)?;
        Ok(crate::diff::pair(&old, &now))
    }

    fn flat_pair(
        &self,
        reader: &StoreReader,
        before: &ObjectId,
        root: &ObjectId,
    ) -> Result<(Vec<FlatEntry>, Vec<FlatEntry>), StoreError> {
        Ok(match self {
            Captured::Flat(after) => {
                let (old, same) = crate::diff::flatten_changed(reader, before, after)?;
                (old, crate::diff::outside(after, &same))
            }
            Captured::Trees(built) => {
                let read = |id: &ObjectId| match built.get(id) {
                    Some(bytes) => {
                        crate::object::Tree::decode(bytes).map_err(|e| StoreError::Corrupt {
                            path: reader.path().into(),
                            id: *id,
                            detail: format!("a tree this capture built does not decode: {e}"),
                        })
                    }
                    None => reader.read_tree(id),
                };
                crate::diff::flatten_pair(&read, before, root)?
            }
        })
    }
}

/// Positions per block when the flat list is built from [`path_order`] in parallel.
const ORDER_BLOCK: usize = 4096;

/// The flat list of rows (`scanned` with `ids`) and the records standing for the files of
/// clean directories (`omitted`), interleaved as `order` says, built in parallel; `None`
/// when a record cannot be read back.
pub(super) fn flat_list(
    scanned: &[ScanEntry],
    ids: &[ObjectId],
    cache: &StatCache,
    omitted: &[usize],
    order: &[bool],
) -> Option<Vec<FlatEntry>> {
    // Where each block of positions starts among the rows.
    let mut starts: Vec<usize> = order
        .par_chunks(ORDER_BLOCK)
        .map(|c| c.iter().filter(|r| **r).count())
        .collect();
    let mut before = 0;
    for s in &mut starts {
        (*s, before) = (before, before + *s);
    }
    let lost = std::sync::atomic::AtomicBool::new(false);
    let out: Vec<FlatEntry> = order
        .par_iter()
        .enumerate()
        .with_min_len(ORDER_BLOCK)
        .map_init(
            // A job's next position and where it stands among rows and records.
            || (usize::MAX, 0, 0),
            |(next, r, o), (k, &row)| {
                if k != *next {
                    let b = k / ORDER_BLOCK;
                    *r = starts[b] + order[b * ORDER_BLOCK..k].iter().filter(|x| **x).count();
                    *o = k - *r;
                }
                *next = k + 1;
                if row {
                    let e = &scanned[*r];
                    *r += 1;
                    return FlatEntry {
                        kind: kind_of(e),
                        path: RelPath::from(e.path.as_slice()),
                        id: ids[*r - 1],
                        size: e.size,
                    };
                }
                *o += 1;
                let c = cache.entry(omitted[*o - 1]);
                if let Some((kind, c)) = c.and_then(|c| Some((leaf_kind(c.kind, c.stat.mode)?, c)))
                {
                    return FlatEntry {
                        kind,
                        path: RelPath::from(c.path),
                        id: c.id,
                        size: c.stat.size,
                    };
                }
                lost.store(true, std::sync::atomic::Ordering::Relaxed);
                FlatEntry {
                    kind: EntryKind::File,
                    path: RelPath::default(),
                    id: ObjectId::ZERO,
                    size: 0,
                }
            },
        )
        .collect();
    (!lost.into_inner()).then_some(out)
}

/// How the rows (`scanned`, sorted) and the records standing for the files of clean
/// directories (`omitted`, ascending) interleave in path order: `true` for a row.
pub(super) fn path_order(scanned: &[ScanEntry], cache: &StatCache, omitted: &[usize]) -> Vec<bool> {
    let mut order = Vec::with_capacity(scanned.len() + omitted.len());
    let (mut r, mut o) = (0, 0);
    while r < scanned.len() || o < omitted.len() {
        let row = match (scanned.get(r), omitted.get(o).and_then(|&i| cache.path(i))) {
            (Some(e), Some(p)) => e.path.as_slice() < p,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if row {
            r += 1;
        } else {
            o += 1;
        }
        order.push(row);
    }
    order
}
