//! `retrace repair`: read every object, forget the damaged ones (see `store::heal`), store
//! again from the workspace whatever its files still hold, and list the snapshots that stay
//! broken (some object below them is neither in the store nor on disk any more).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::Error;
use crate::history::db;
use crate::object::ObjectId;
use crate::progress::Progress;
use crate::working_copy::WorkingCopy;

/// A snapshot that still lacks objects after a repair, and what refers to it.
#[derive(Clone, Debug, Serialize)]
pub struct BrokenSnapshot {
    /// The snapshot (root tree) id.
    pub id: ObjectId,
    /// What refers to it: "snapshot log", "session 1a2b… turn 3", "checkpoint 2", ….
    pub used_by: Vec<String>,
}

/// What [`Workspace::repair`](crate::Workspace::repair) found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepairReport {
    /// Objects read and verified.
    pub objects: u64,
    /// Damaged objects the store forgot.
    pub forgotten: Vec<ObjectId>,
    /// Objects stored again from the workspace's files.
    pub restored: u64,
    /// Snapshots that stay broken, oldest reference first.
    pub broken: Vec<BrokenSnapshot>,
    /// One line per fault found.
    pub faults: Vec<String>,
    /// Parity frames with a damaged shard, written again whole.
    pub rebuilt_frames: u64,
}

/// Verifies every object, forgets the damaged ones, stores again from the workspace
/// what its files still hold, and lists the snapshots that stay broken. Holds the
/// workspace lock exclusively (as GC does), so no capture runs meanwhile.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or written.
pub fn repair(wc: &WorkingCopy, progress: &dyn Progress) -> Result<RepairReport, Error> {
    let ex = wc.lock_exclusive(crate::store::LOCK_WAIT)?;
    if let Some(report) = crate::history::recover_journal(&ex, progress)? {
        wc.warn(report);
    }
    let reader = wc.store().reader()?;
    let scan = reader.check_objects()?;
    drop(reader);
    wc.store().forget_damaged()?;
    let mut report = RepairReport {
        objects: scan.objects,
        forgotten: scan.damaged,
        faults: scan.faults,
        rebuilt_frames: wc.store().rewrite_rebuilt_frames()?,
        ..RepairReport::default()
    };
    if wc.conversation_only().is_none() {
        report.restored = ex.store_disk(progress)?.new_objects;
    }
    let reader = wc.store().reader()?;
    let mut memo = HashMap::new();
    let mut broken: BTreeMap<ObjectId, (usize, Vec<String>)> = BTreeMap::new();
    for (order, (id, what)) in labelled_roots(wc)?.into_iter().enumerate() {
        if !reader.is_whole(&id, &mut memo) {
            broken.entry(id).or_insert((order, Vec::new())).1.push(what);
        }
    }
    let mut broken: Vec<_> = broken.into_iter().collect();
    broken.sort_by_key(|(_, (order, _))| *order);
    report.broken = broken
        .into_iter()
        .map(|(id, (_, used_by))| BrokenSnapshot { id, used_by })
        .collect();
    Ok(report)
}

/// Every snapshot something refers to, with what refers to it.
fn labelled_roots(wc: &WorkingCopy) -> Result<Vec<(ObjectId, String)>, Error> {
    let reader = wc.store().reader()?;
    let mut roots: Vec<(ObjectId, String)> = reader
        .snapshots()?
        .into_iter()
        .map(|s| {
            let label = s.label.map(|l| format!(" {l:?}")).unwrap_or_default();
            (s.root, format!("snapshot log{label}"))
        })
        .collect();
    roots.extend(reader.last_known()?.map(|k| (k, "last known state".into())));
    let tx = wc.store().begin_read()?;
    for (key, _) in db::sessions(&tx)? {
        let short = &key.short();
        let l = db::load(&tx, &key)?;
        for t in &l.turns {
            let n = t.number;
            roots.extend(
                t.before
                    .map(|s| (s, format!("session {short} turn {n} before"))),
            );
            roots.extend(
                t.after
                    .map(|s| (s, format!("session {short} turn {n} after"))),
            );
        }
        for c in &l.checkpoints {
            roots.push((
                c.snapshot,
                format!("session {short} checkpoint {}", c.number),
            ));
        }
    }
    if let Some(j) = crate::history::pending_journal(&tx)? {
        roots.push((j.source, "interrupted restore (source)".into()));
        roots.push((j.target, "interrupted restore (target)".into()));
    }
    Ok(roots)
}
