//! Keeping the store small: retention rules decide which history stops being a root (age,
//! session count, a byte budget), then garbage collection frees what nothing refers to.
//! `docs/retention.md` describes every setting.

use serde::Serialize;

use crate::error::{Error, StoreError};
use crate::history::SessionOp;
use crate::history::db;
use crate::history::tables::LedgerMeta;
use crate::lock::LockMode;
use crate::object::ObjectId;
use crate::statcache::StatCache;
use crate::store::{DenseReport, GcReport, ReadTx, StoreReader};
use crate::working_copy::{Exclusive, WorkingCopy};


/// What names a root: where [`history_roots`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// A record of the snapshot log.
    Log,
    /// The store's last known state.
    LastKnown,
    /// A turn's before- or after-snapshot.
    Turn {
        session: db::SessionKey,
        number: u64,
    },
    /// A checkpoint's snapshot.
    Checkpoint {
        session: db::SessionKey,
        number: u64,
    },
    /// The snapshot a session last knew the disk to equal (its derived state).
    SessionState { session: db::SessionKey },
    /// The source or target of an interrupted restore's journal.
    Journal,
}

/// A snapshot root and what names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Root {
    pub id: ObjectId,
    pub holder: Holder,
}

/// A history record [`history_roots`] could not read, in the place of the roots it holds.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// The sessions table: no session's roots are known.
    Sessions(StoreError),
    /// One session's turns, checkpoints or operations.
    Session(db::SessionKey, StoreError),
    /// The restore journal.
    Journal(StoreError),
}

/// One item of [`history_roots`].
#[derive(Debug)]
pub(crate) enum Found {
    /// A root.
    Root(Root),
    /// A record that could not be read, in the place of the roots it holds.
    Unreadable(Unreadable),
}

/// Every snapshot root the store's records name, in order: the snapshot log (oldest first),
/// the last known state and the ledger's snapshot, each session's turns (before, then
/// after), checkpoints and derived last known state, and an interrupted restore's source
/// and target. A history record that
/// does not decode is [`Found::Unreadable`] in its place, so that a caller may go on past it
/// (`verify` does; GC does not). The one root enumeration of garbage collection
/// ([`gc_roots`] adds the stat cache's) and of [`crate::verify`].
///
/// # Errors
/// [`StoreError`] when the snapshot log or the store's metadata cannot be read.
pub(crate) fn history_roots(reader: &StoreReader, tx: &ReadTx) -> Result<Vec<Found>, StoreError> {
    let root = |id, holder| Found::Root(Root { id, holder });
    let mut out: Vec<Found> = reader
        .snapshots()?
        .into_iter()
        .map(|s| root(s.root, Holder::Log))
        .collect();
    out.extend(reader.last_known()?.map(|id| root(id, Holder::LastKnown)));
    // The ledger's snapshot: its next update diffs from it.
    out.extend(tx.ledger_at()?.map(|id| root(id, Holder::LastKnown)));
    match db::sessions(tx) {
        Err(e) => out.push(Found::Unreadable(Unreadable::Sessions(e))),
        Ok(sessions) => {
            for (session, _) in sessions {
                let l = match db::load(tx, &session) {
                    Ok(l) => l,
                    Err(e) => {
                        out.push(Found::Unreadable(Unreadable::Session(session, e)));
                        continue;
                    }
                };
                for t in &l.turns {
                    let holder = Holder::Turn {
                        session,
                        number: t.number,
                    };
                    out.extend(
                        [t.before, t.after]
                            .into_iter()
                            .flatten()
                            .map(|id| root(id, holder)),
                    );
                }
                out.extend(l.checkpoints.iter().map(|c| {
                    let holder = Holder::Checkpoint {
                        session,
                        number: c.number,
                    };
                    root(c.snapshot, holder)
                }));
                let holder = Holder::SessionState { session };
                out.extend(l.state.last_known.map(|id| root(id, holder)));
            }
        }
    }
    match crate::history::pending_journal(tx) {
        Ok(Some(j)) => {
            out.push(root(j.source, Holder::Journal));
            out.push(root(j.target, Holder::Journal));
        }
        Ok(None) => {}
        Err(e) => out.push(Found::Unreadable(Unreadable::Journal(e))),
    }
    Ok(out)
}

/// Every snapshot something still refers to: the snapshot log, the last known state,
/// every session's turns, checkpoints and derived state, an interrupted restore's
/// journal, and the stat cache's snapshot (whose ids the next capture trusts unread).
///
/// # Errors
/// [`Error::Store`] when the store cannot be read.
pub fn gc_roots(wc: &WorkingCopy) -> Result<Vec<ObjectId>, Error> {
    let reader = wc.store().reader()?;
    let tx = wc.store().begin_read()?;
    let mut roots = Vec::new();
    for found in history_roots(&reader, &tx)? {
        match found {
            Found::Root(r) => roots.push(r.id),
            // What GC cannot read, it cannot know to keep: it stops.
            Found::Unreadable(
                Unreadable::Sessions(e) | Unreadable::Session(_, e) | Unreadable::Journal(e),
            ) => return Err(e.into()),
        }
    }
    let cache = StatCache::load(&wc.dir().join("statcache"), &reader.cache_key()?);
    if cache.root() != ObjectId::ZERO {
        roots.push(cache.root());
    }
    roots.sort_unstable();
    roots.dedup();
    Ok(roots)
}

/// Resolves a snapshot id or unique prefix (≥ 8 hex digits). Only snapshots are accepted:
/// those of the log, and (by full id) every snapshot the history names (turns, checkpoints,
/// safety snapshots); the id of a directory or a file inside one is not a snapshot
/// (restoring a sub-tree over the root would delete everything else).
///
/// # Errors
/// [`crate::StoreError::BadSnapshotId`] when it matches nothing, several snapshots, or an
/// object that is not a snapshot.
pub fn resolve_snapshot(wc: &WorkingCopy, prefix: &str) -> Result<ObjectId, Error> {
    let reader = wc.store().reader()?;
    let id = reader.resolve(prefix)?;
    if reader.snapshots()?.iter().any(|s| s.root == id) || gc_roots(wc)?.contains(&id) {
        return Ok(id);
    }
    let what = match reader.record(&id).map(|r| r.kind) {
        Ok(crate::object::ObjectKind::Tree) => "the tree of a directory inside a snapshot",
        Ok(_) => "a file's content",
        Err(_) => "an object the store cannot read",
    };
    Err(crate::StoreError::BadSnapshotId(format!(
        "{prefix} is {what}, not a snapshot; give a snapshot id from `retrace log` (or \
         turn:N, checkpoint:N with --session)"
    ))
    .into())
}

/// The stored bytes [`gc`] would free now, an estimate worked out beside everything else:
/// it takes no lock (captures, undos and restores go on; what they add meanwhile is young,
/// so kept), writes nothing and completes no interrupted restore.
///
/// # Errors
/// [`Error::Store`] when the store fails.
pub fn gc_estimate(wc: &WorkingCopy, grace_secs: u64) -> Result<u64, Error> {
    let roots = gc_roots(wc)?;
    Ok(wc
        .store()
        .collect(&roots, grace_secs, true)?
        .stored_bytes_freed)
}

/// Collects unreferenced objects older than `grace_secs` and compacts the store. Holds
/// the workspace lock exclusively (captures wait; the wait is bounded), and completes an
/// interrupted restore first.
///
/// # Errors
/// [`Error::Store`] when the store fails or stays busy.
pub fn gc(wc: &WorkingCopy, grace_secs: u64, dry_run: bool) -> Result<GcReport, Error> {
    let ex = wc.lock_exclusive(crate::store::LOCK_WAIT)?;
    if !dry_run {
        wc.store().make_room();
    }
    if let Some(report) = crate::history::recover_journal(&ex, &crate::progress::NoProgress)? {
        wc.warn(report);
    }
    let roots = gc_roots(wc)?;
    Ok(wc.store().collect(&roots, grace_secs, dry_run)?)
}

/// What `retrace gc` is asked to do ([`collect`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct GcOptions {
    /// Only report what a collection would free: no retention, no sweep of the home.
    pub dry_run: bool,
    /// Keep unreferenced objects younger than this many seconds; `None`: the workspace's
    /// `gc_grace_secs` setting.
    pub grace_secs: Option<u64>,
}

/// What [`collect`] did. As JSON: the collection's fields at the top level, with
/// `retention` and `home` beside them when those ran (`retrace gc --json`).
///
/// ```
/// # fn main() -> Result<(), serde_json::Error> {
/// use retrace::retention::{GcOutcome, HomeReport, MaintenanceReport};
/// let dry = GcOutcome { gc: Default::default(), retention: None, home: None };
/// let v = serde_json::to_value(&dry)?;
/// assert!(v["objects_freed"].is_u64() && v.get("retention").is_none());
/// let real = GcOutcome {
///     retention: Some(MaintenanceReport::default()),
///     home: Some(HomeReport::default()),
///     ..dry
/// };
/// let v = serde_json::to_value(&real)?;
/// assert!(v["retention"]["gc"].is_object() && v["home"]["total_bytes"].is_u64());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Serialize)]
pub struct GcOutcome {
    /// The collection (of a real run: the last one of its retention pass).
    #[serde(flatten)]
    pub gc: GcReport,
    /// The retention pass of a real run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<MaintenanceReport>,
    /// The sweep of every workspace store under the home, after a real run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<HomeReport>,
}

/// Garbage collection as `retrace gc` does it. A dry run only reports what [`gc`] would
/// free: it applies no retention and sweeps nothing. A real run applies retention and
/// collects ([`maintain`]), then sweeps every workspace store under the workspace's home
/// ([`sweep_home`], with the `max_workspaces` and `max_total_bytes` settings). The grace
/// period defaults to the `gc_grace_secs` setting. What the passes warned about is in
/// [`WorkingCopy::warnings`].
///
/// # Errors
/// [`Error::Store`] when the store fails or stays busy, or the home cannot be listed.
pub fn collect(wc: &WorkingCopy, opts: &GcOptions) -> Result<GcOutcome, Error> {
    let settings = wc.settings();
    let grace = opts.grace_secs.unwrap_or(settings.gc_grace_secs.value);
    if opts.dry_run {
        return Ok(GcOutcome {
            gc: gc(wc, grace, true)?,
            retention: None,
            home: None,
        });
    }
    let retention = maintain(wc, crate::store::now_ms(), grace)?;
    let limits = HomeLimits {
        max_workspaces: settings.max_workspaces.value,
        max_total_bytes: settings.max_total_bytes.value,
    };
    // The workspace's home is the one `Config` named (canonicalized when it was opened).
    let home = sweep_home(wc.home(), limits, crate::store::now_ms());
    Ok(GcOutcome {
        gc: retention.gc.clone(),
        retention: Some(retention),
        home: Some(home),
    })
}

/// What a maintenance pass did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MaintenanceReport {
    /// Sessions whose file history expired (first 16 hex digits of their keys).
    pub expired_sessions: Vec<String>,
    /// Expired sessions removed entirely (untouched for twice the retention period).
    pub tombstones_pruned: u64,
    /// Sessions removed because the workspace kept more than `max_sessions`.
    pub sessions_dropped: u64,
    /// Turns whose snapshots the byte budget evicted.
    pub turns_evicted: u64,
    /// Snapshot-log records removed.
    pub snapshots_pruned: u64,
    /// Op-log records folded into the records of their turns (`docs/retention.md`, "The op
    /// log").
    pub ops_folded: u64,
    /// Bursts of local history thinned from the snapshot log (`docs/retention.md`,
    /// "Bursts").
    pub bursts_thinned: u64,
    /// Sessions left alone because a process has them open (or a turn in progress).
    pub in_use_kept: u64,
    /// Bytes of packed objects after the pass (what the budget counts).
    pub store_bytes: u64,
    /// The budget, 0 = none.
    pub max_store_bytes: u64,
    /// The final collection.
    pub gc: GcReport,
    /// Frames recompressed at the dense level (see `store::dense`).
    pub dense: DenseReport,
    /// The packed objects still exceed the budget: all that is left is what is never
    /// evicted (the newest snapshot, the last known states, the top of every session's undo
    /// and redo stacks, turns in progress). Warned about once (see `WorkingCopy::warnings`).
    pub over_budget: bool,
    /// Ledger entries removed: paths whose writes are all older than every turn and
    /// checkpoint still kept (`docs/retention.md`, "The ledger").
    pub ledger_dropped: u64,
    /// Earlier versions cut from the ledger entries kept: written by turns that are gone.
    pub ledger_trimmed: u64,
}

/// How long the recompression part of a due pass may run ([`maintain_if_due`]);
/// the rest waits for the next pass or the background [`crate::Maintainer`].
pub const DUE_DENSE_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

const DAY_MS: f64 = 86_400_000.0;

/// A session as maintenance sees it.
struct Candidate {
    key: db::SessionKey,
    touched_ms: u64,
    loaded: db::Loaded,
    /// Open in some process (its marker is fresh) or with a turn in progress: never
    /// expired or removed.
    in_use: bool,
    /// A turn in progress whose owner may be alive: not even its old turns are evicted.
    busy: bool,
}

/// Applies retention, then collects: sessions untouched for longer than
/// `retention_days` expire (their turns keep their conversation anchors, lose their
/// snapshots; removed entirely after twice that); snapshot-log records older than that
/// go (never the newest); the least recently used sessions beyond `max_sessions` go;
/// while the packed objects exceed `max_store_bytes`, the oldest turns of the least
/// recently used sessions are evicted (never the turn a session's undo would revert or
/// its redo re-apply, never a session with a live turn in progress), each round followed
/// by a collection. When only that is left and it still exceeds the budget, it is kept,
/// [`MaintenanceReport::over_budget`] says so, and the first such pass adds one line to
/// [`WorkingCopy::warnings`]. Last, the ledger loses the entries no kept turn can consult
/// and the versions of turns that are gone ([`MaintenanceReport::ledger_dropped`],
/// `docs/retention.md`, "The ledger"). `now_ms` is the clock (injected by tests).
///
/// # Errors
/// [`Error::Store`] when the store fails or stays busy.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
pub fn maintain(
    wc: &WorkingCopy,
    now_ms: u64,
    grace_secs: u64,
) -> Result<MaintenanceReport, Error> {
    maintain_until(wc, now_ms, grace_secs, None)
}

/// [`maintain`], recompressing frames at the dense level until `dense_deadline`
/// (all of them when `None`) between the collection and the byte budget.
///
/// # Errors
/// As [`maintain`].
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
pub fn maintain_until(
    wc: &WorkingCopy,
    now_ms: u64,
    grace_secs: u64,
    dense_deadline: Option<std::time::Instant>,
) -> Result<MaintenanceReport, Error> {
    let ex = wc.lock_exclusive(crate::store::LOCK_WAIT)?;
    // On a full disk every write below would fail: give back what can be given first.
    wc.store().make_room();
    if let Some(report) = crate::history::recover_journal(&ex, &crate::progress::NoProgress)? {
        wc.warn(report);
    }
    let s = &wc.settings();
    let mut report = MaintenanceReport {
        max_store_bytes: s.max_store_bytes.value,
        ..MaintenanceReport::default()
    };
    let retention_ms = (s.retention_days.value * DAY_MS) as u64;
    let mut sessions = candidates(wc, now_ms)?;
    report.in_use_kept = sessions.iter().filter(|c| c.in_use).count() as u64;
    // Age: expire, then prune tombstones.
    if retention_ms > 0 {
        for c in sessions.iter().filter(|c| !c.in_use) {
            let age = now_ms.saturating_sub(c.touched_ms);
            if age > 2 * retention_ms {
                wc.store()
                    .transact(|tx| db::Writer::open(tx, c.key).delete_session())?;
                report.tombstones_pruned += 1;
            } else if age > retention_ms && c.loaded.turns.iter().any(has_files) {
                wc.store()
                    .transact(|tx| db::Writer::open(tx, c.key).expire(None))?;
                report.expired_sessions.push(c.key.short());
            }
        }
        report.snapshots_pruned += wc
            .store()
            .prune_snapshots(now_ms - retention_ms.min(now_ms))?;
        sessions = candidates(wc, now_ms)?;
    }
    // Count: least recently used sessions beyond the limit.
    let max_sessions = usize::try_from(s.max_sessions.value).unwrap_or(usize::MAX);
    if sessions.len() > max_sessions {
        sessions.sort_by_key(|c| std::cmp::Reverse(c.touched_ms));
        for c in sessions.iter().skip(max_sessions).filter(|c| !c.in_use) {
            wc.store()
                .transact(|tx| db::Writer::open(tx, c.key).delete_session())?;
            report.sessions_dropped += 1;
        }
    }
    report.bursts_thinned =
        crate::local_history::thin_bursts(wc, now_ms, crate::local_history::Thinning::of(s))?;
    // The ops each turn's record already holds, folded (`history::log_thin`).
    let keep = crate::history::log_thin::KEEP_NEWEST;
    let foldable: Vec<db::SessionKey> = {
        let tx = wc.store().begin_read()?;
        let mut keys = Vec::new();
        for (key, _) in db::sessions(&tx)? {
            if db::ops_to_fold(&tx, &key, keep)? > 0 {
                keys.push(key);
            }
        }
        keys
    };
    for key in foldable {
        report.ops_folded += wc
            .store()
            .transact(|tx| db::Writer::open(tx, key).thin_log(keep))?;
    }
    report.gc = wc
        .store()
        .collect_at(&gc_roots(wc)?, grace_secs, false, now_ms / 1000)?;
    report.dense = wc.store().recompress(dense_deadline)?;
    if report.dense.frames == 0 && report.dense.trees.objects == 0 && report.dense.roots.objects == 0 {
        // Holes an earlier slice left, or a collection below its own bar.
        report.dense.packs_freed = wc.store().vacate_sparse_packs()?;
    }
    evict_to_budget(
        &ex,
        s.max_store_bytes.value,
        now_ms,
        grace_secs,
        &mut report,
    )?;
    // Over budget with nothing left to evict: say so once, when the store first gets
    // there, not at every command (the store remembers the size it could not go below,
    // and a due pass waits until it grows past it).
    let over = if report.over_budget {
        if wc.store().reader()?.over_budget()? == 0 {
            wc.warn(over_budget_warning(&report));
        }
        report.store_bytes
    } else {
        0
    };
    prune_ledger(wc, &mut report)?;
    // Compaction is maintenance: commands never wait for it (it once ran after every
    // snapshot and restore, a few commits each, ~0.3 s at a million files). After the
    // pass's other commits, so that the pages they freed are given back too; the pass counts
    // as done (maintained) once compaction is over.
    let compacted =
        if report.dense.frames > 0 || report.dense.trees.objects > 0
            || report.dense.roots.objects > 0
            || report.dense.packs_freed > 0 {
            wc.store().compact_now()
        } else {
            wc.store().compact_if_sparse()
        };
    report.gc.compacted |= compacted;
    wc.store().set_maintained(now_ms, over)?;
    report.gc.disk_bytes_after = crate::store::disk_bytes(wc.store().path());
    Ok(report)
}

/// The ledger part of a pass, once its turns are expired, evicted or dropped: removes the
/// entries no kept turn can consult and cuts the versions of turns that are gone, in one
/// commit (`docs/retention.md`, "The ledger").
fn prune_ledger(wc: &WorkingCopy, report: &mut MaintenanceReport) -> Result<(), Error> {
    let pruned = wc.store().transact(crate::history::ledger_prune::prune)?;
    report.ledger_dropped += pruned.dropped;
    report.ledger_trimmed += pruned.trimmed;
    Ok(())
}

/// The byte-budget part of [`maintain`]: while the packed objects exceed
/// `budget` (0 = none), evict the oldest turns of the least recently used sessions and
/// collect.
#[allow(clippy::cast_possible_truncation)]
fn evict_to_budget(
    wc: &Exclusive<'_>,
    budget: u64,
    now_ms: u64,
    grace_secs: u64,
    report: &mut MaintenanceReport,
) -> Result<(), Error> {
    let mut sessions = candidates(wc, now_ms)?;
    // Bytes: evict the oldest turns of the least recently used sessions, in rounds.
    report.over_budget = false;
    loop {
        report.store_bytes = wc.store().reader()?.packed_bytes()?;
        if budget == 0 || report.store_bytes <= budget {
            break;
        }
        // Idle sessions' turns first, then open sessions' (a long-running agent must
        // not grow past the budget either); within each, turns no undo or redo reaches
        // (abandoned branches) before those on a stack. Never a session with a turn in
        // progress, nor the top of either stack: the turn undo would revert and the one
        // redo would re-apply.
        let mut evictable: Vec<(bool, bool, u64, u64, db::SessionKey, u64)> = Vec::new();
        for c in sessions.iter().filter(|c| !c.busy) {
            let stacked = c.loaded.applied();
            let redo: Vec<u64> = c.loaded.state.redo.iter().map(|r| r.0).collect();
            let tops = [c.loaded.state.cursor, redo.last().copied()];
            for t in c.loaded.turns.iter().filter(|t| has_files(t)) {
                if !tops.contains(&Some(t.number)) {
                    let on_stack = stacked.contains(&t.number) || redo.contains(&t.number);
                    let end = t.ended_ms.unwrap_or(0);
                    evictable.push((c.in_use, on_stack, c.touched_ms, t.number, c.key, end));
                }
            }
        }
        if evictable.is_empty() {
            // Only what is in use is left: the budget cannot be met without losing it.
            // The log keeps its newest record (`prune_snapshots` never removes it).
            report.snapshots_pruned += wc.store().prune_snapshots(now_ms).unwrap_or(0);
            report.gc = wc
                .store()
                .collect_at(&gc_roots(wc)?, grace_secs, false, now_ms / 1000)?;
            report.store_bytes = wc.store().reader()?.packed_bytes()?;
            report.over_budget = report.store_bytes > budget;
            break;
        }
        evictable.sort_unstable();
        // Only a batch whose eviction frees bytes, once the deltas it orphans are stored
        // again, is evicted: the first quarter, else more, up to everything evictable. When
        // evicting everything evictable cannot bring the store under the budget (its
        // versions are small deltas of what stays, or what stays is too big), the history is
        // kept and the pass says so: evicting would lose turns and could grow the store.
        let all = eviction_frees(wc, &evictable, grace_secs, now_ms)?;
        if report.store_bytes.saturating_sub(all) > budget {
            report.over_budget = true;
            break;
        }
        let mut take = (evictable.len() / 4).max(1);
        while take < evictable.len()
            && eviction_frees(wc, &evictable[..take], grace_secs, now_ms)? == 0
        {
            take = (take * 2).min(evictable.len());
        }
        let batch = &evictable[..take];
        let newest_end = batch.iter().map(|b| b.5).max().unwrap_or(0);
        for key in batch
            .iter()
            .map(|b| b.4)
            .collect::<std::collections::BTreeSet<_>>()
        {
            let turns: Vec<u64> = batch.iter().filter(|b| b.4 == key).map(|b| b.3).collect();
            wc.store()
                .transact(|tx| db::Writer::open(tx, key).expire(Some(&turns)))?;
        }
        report.turns_evicted += take as u64;
        // Log records of that age name the same states: they go with them.
        report.snapshots_pruned += wc.store().prune_snapshots(newest_end + 1)?;
        report.gc = wc
            .store()
            .collect_at(&gc_roots(wc)?, grace_secs, false, now_ms / 1000)?;
        sessions = candidates(wc, now_ms)?;
    }
    Ok(())
}

/// The compressed bytes evicting the turns of `batch` (as `evict_to_budget` lists them:
/// session key and turn number at 4 and 3) would free, net of what collecting their objects
/// writes again (deltas whose base goes, stored whole or re-based; survivors of rewritten
/// frames): a dry-run collection over the roots that would be left. Log records naming only
/// those turns' snapshots go with them, as the pass prunes them.
fn eviction_frees(
    wc: &Exclusive<'_>,
    batch: &[(bool, bool, u64, u64, db::SessionKey, u64)],
    grace_secs: u64,
    now_ms: u64,
) -> Result<u64, Error> {
    let evicted = |h: &Holder| {
        matches!(h, Holder::Turn { session, number }
            if batch.iter().any(|b| b.4 == *session && b.3 == *number))
    };
    let reader = wc.store().reader()?;
    let tx = wc.store().begin_read()?;
    let mut found = history_roots(&reader, &tx)?;
    // What cannot be read cannot be known to stay: nothing is evicted (as GC stops).
    if let Some(at) = found.iter().position(|f| matches!(f, Found::Unreadable(_)))
        && let Found::Unreadable(
            Unreadable::Sessions(e) | Unreadable::Session(_, e) | Unreadable::Journal(e),
        ) = found.swap_remove(at)
    {
        return Err(e.into());
    }
    let roots_of = |keep: &dyn Fn(&Root) -> bool| -> Vec<ObjectId> {
        found
            .iter()
            .filter_map(|f| match f {
                Found::Root(r) if keep(r) => Some(r.id),
                _ => None,
            })
            .collect()
    };
    let gone: std::collections::HashSet<ObjectId> =
        roots_of(&|r| evicted(&r.holder)).into_iter().collect();
    let still: std::collections::HashSet<ObjectId> =
        roots_of(&|r| !evicted(&r.holder) && !matches!(r.holder, Holder::Log))
            .into_iter()
            .collect();
    let mut roots = roots_of(&|r| match r.holder {
        Holder::Log => !gone.contains(&r.id) || still.contains(&r.id),
        _ => !evicted(&r.holder),
    });
    let cache = StatCache::load(&wc.dir().join("statcache"), &reader.cache_key()?);
    if cache.root() != ObjectId::ZERO {
        roots.push(cache.root());
    }
    drop((reader, tx));
    roots.sort_unstable();
    roots.dedup();
    let dry = wc
        .store()
        .collect_at(&roots, grace_secs, true, now_ms / 1000)?;
    Ok(dry
        .stored_bytes_freed
        .saturating_sub(dry.stored_bytes_added))
}

/// Holds the store under `budget` bytes of packed objects by evicting old turns (as the
/// byte budget of [`maintain`] does), without applying the age or count
/// rules: what a budget across workspaces asks of one store.
///
/// # Errors
/// [`Error::Store`] when the store fails or stays busy.
pub fn enforce_budget(
    wc: &WorkingCopy,
    budget: u64,
    now_ms: u64,
    grace_secs: u64,
) -> Result<MaintenanceReport, Error> {
    let ex = wc.lock_exclusive(crate::store::LOCK_WAIT)?;
    let mut report = MaintenanceReport {
        max_store_bytes: budget,
        ..MaintenanceReport::default()
    };
    evict_to_budget(&ex, budget, now_ms, grace_secs, &mut report)?;
    if report.turns_evicted > 0 {
        prune_ledger(&ex, &mut report)?;
    }
    Ok(report)
}

/// Runs [`maintain`] if it is due (an hour since the last pass, or the byte
/// budget exceeded and the store grown since a pass last found nothing more to evict)
/// and the workspace is free right now; never waits. For hosts to call after a turn has
/// been recorded; the CLI and the hooks leave it to a background process instead
/// ([`crate::maintainer::maintain_later`]), so that no command waits for a pass.
#[must_use = "the report says what maintenance did"]
pub fn maintain_if_due(wc: &WorkingCopy) -> Option<MaintenanceReport> {
    if !is_pass_due(wc) {
        // Not a pass, but a file with much dead space: only the compaction.
        if wc.store().is_sparse()
            && let Ok(_lock) = wc.lock_exclusive(std::time::Duration::ZERO)
        {
            wc.store().compact_if_sparse();
        }
        return None;
    }
    // Only when nobody else holds the workspace: maintenance waits for no one.
    drop(wc.lock_exclusive(std::time::Duration::ZERO).ok()?);
    let deadline = std::time::Instant::now() + DUE_DENSE_BUDGET;
    let now = crate::store::now_ms();
    maintain_until(wc, now, wc.settings().gc_grace_secs.value, Some(deadline)).ok()
}

/// How long after a pass the next one is due ([`is_due`]).
pub const DUE_AFTER_MS: u64 = 3_600_000;

/// Whether maintenance is due: a pass, [`DUE_AFTER_MS`] since the last one (a new store
/// counts as maintained when it is created), or the byte budget exceeded and the store
/// grown since a pass last found nothing more to evict; or a compaction, the file holding
/// much dead space ([`crate::store::Store::is_sparse`]). Two reads and a `stat`; takes no
/// lock. False when the store cannot be read.
#[must_use]
pub fn is_due(wc: &WorkingCopy) -> bool {
    is_pass_due(wc) || wc.store().is_sparse()
}

/// [`is_due`] without the compaction: whether a whole pass is due.
fn is_pass_due(wc: &WorkingCopy) -> bool {
    let Ok(reader) = wc.store().reader() else {
        return false;
    };
    let (Ok(packed), Ok(floor), Ok(maintained)) = (
        reader.packed_bytes(),
        reader.over_budget(),
        reader.maintained_ms(),
    ) else {
        return false;
    };
    // Over the budget, and grown since a pass last found it could evict nothing more.
    let budget = wc.settings().max_store_bytes.value;
    let over = budget > 0 && packed > budget && packed > floor;
    over || crate::store::now_ms().saturating_sub(maintained) > DUE_AFTER_MS
}

/// Recompresses frames at the dense level for at most `budget`, if no other process
/// holds the workspace exclusively right now (never waits). `None` when it did not run.
/// For background threads between full passes: captures may run meanwhile.
#[must_use = "the report says whether frames remain"]
pub fn recompress_if_free(wc: &WorkingCopy, budget: std::time::Duration) -> Option<DenseReport> {
    let _lock = wc.lock_shared(std::time::Duration::ZERO).ok()?;
    wc.store()
        .recompress(Some(std::time::Instant::now() + budget))
        .ok()
}

fn candidates(wc: &WorkingCopy, now_ms: u64) -> Result<Vec<Candidate>, Error> {
    let tx = wc.store().begin_read()?;
    let mut out = Vec::new();
    for (key, rec) in db::sessions(&tx)? {
        let loaded = db::load(&tx, &key)?;
        // Busy: a turn in progress whose owner is not certainly gone.
        let busy = loaded.state.pending.is_some_and(|n| {
            !matches!(
                db::lease(&tx, &key, n),
                Ok(Some(Ok(ref l))) if crate::lease::liveness(l, wc.home())
                    == crate::lease::Liveness::Dead
            )
        });
        let in_use = busy || crate::history::liveness::in_use(wc.dir(), &key, now_ms);
        out.push(Candidate {
            key,
            touched_ms: rec.touched_ms,
            loaded,
            in_use,
            busy,
        });
    }
    Ok(out)
}

/// The one line a pass that cannot meet the byte budget adds to the workspace's warnings.
fn over_budget_warning(report: &MaintenanceReport) -> String {
    format!(
        "the store holds {} of history, more than its byte budget of {} (max_store_bytes); \
         retrace kept its history because evicting the turns it may evict would not bring \
         it under (the newest snapshot and what an undo or redo needs are never evicted, and \
         versions stored as small deltas free little). Raise max_store_bytes (0 = no budget) or leave the big files out with \
         .gitignore",
        human_bytes(report.store_bytes),
        human_bytes(report.max_store_bytes)
    )
}

/// `1.5 GiB`, `320.0 MiB`, `12 KiB`: sizes as a person reads them.
#[allow(clippy::cast_precision_loss)]
fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    match n {
        n if n >= KIB * KIB * KIB => format!("{:.1} GiB", n as f64 / (KIB * KIB * KIB) as f64),
        n if n >= KIB * KIB => format!("{:.1} MiB", n as f64 / (KIB * KIB) as f64),
        n if n >= KIB => format!("{} KiB", n / KIB),
        n => format!("{n} bytes"),
    }
}

fn has_files(t: &crate::history::record::TurnRecord) -> bool {
    t.before.is_some() || t.after.is_some()
}

/// What a home-wide sweep did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HomeReport {
    /// Workspaces whose folder was found missing for the first time (checked again later).
    pub missing_noted: Vec<String>,
    /// Stores set aside because their workspace vanished.
    pub vanished_evicted: Vec<String>,
    /// Stores set aside because more than `max_workspaces` exist (least recently used).
    pub lru_evicted: Vec<String>,
    /// Set-aside stores deleted after their waiting period.
    pub deleted: Vec<String>,
    /// Workspaces whose old turns were evicted to hold the budget across workspaces, with
    /// their packed bytes before and after.
    pub budget_trimmed: Vec<(String, u64, u64)>,
    /// Packed bytes of all stores after the sweep.
    pub total_bytes: u64,
}

/// Limits of a home-wide sweep.
#[derive(Clone, Copy, Debug)]
pub struct HomeLimits {
    /// Workspace stores kept (`max_workspaces`).
    pub max_workspaces: u64,
    /// Packed bytes of all stores together (`max_total_bytes`; 0 = none).
    pub max_total_bytes: u64,
}

/// How long a workspace must have been unused before its store may be evicted.
pub const IDLE_BEFORE_EVICTION_MS: u64 = 24 * 3_600_000;
/// How far apart the two checks that find a workspace missing must be.
pub const MISSING_RECHECK_MS: u64 = 5_000;
/// How long an evicted store is kept (renamed aside) before it is deleted.
pub const KEEP_EVICTED_MS: u64 = 7 * 24 * 3_600_000;

struct Known {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
    last_used_ms: u64,
}

/// Whether any process uses the store in `dir`: its lock is held, or a session in it was
/// marked in use within a day.
fn store_in_use(dir: &std::path::Path, now_ms: u64) -> bool {
    if crate::lock::lock(
        &dir.join("lock"),
        LockMode::Exclusive,
        std::time::Duration::ZERO,
    )
    .is_err()
    {
        return true;
    }
    std::fs::read_dir(dir.join("active")).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .and_then(|d| u64::try_from(d.as_millis()).ok())
                .is_some_and(|t| now_ms.saturating_sub(t) < crate::history::liveness::FRESH_MS)
        })
    })
}

fn set_aside(dir: &std::path::Path, now_ms: u64) -> Option<String> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let to = dir.with_file_name(format!("{name}.evicted-{now_ms}"));
    std::fs::rename(dir, &to).ok()?;
    Some(name)
}

/// Sweeps every workspace store under `home`: a store whose workspace folder is missing on
/// two checks at least [`MISSING_RECHECK_MS`] apart, unused for a day and not in use is
/// renamed aside (`<id>.evicted-<ms>`); so are the least recently used beyond
/// `max_workspaces`; stores set aside more than seven days ago are deleted. `now_ms` is the
/// clock (tests inject it). Never deletes a store directly: a transient unmount or
/// permission problem costs nothing. Never fails: a home that cannot be listed has nothing
/// to sweep, and a store that cannot be moved aside stays.
#[must_use]
pub fn sweep_home(home: &std::path::Path, limits: HomeLimits, now_ms: u64) -> HomeReport {
    let mut report = HomeReport::default();
    let root = home.join("workspaces");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return report;
    };
    let mut known = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((_, at)) = name.split_once(".evicted-") {
            if at
                .parse::<u64>()
                .is_ok_and(|at| now_ms.saturating_sub(at) > KEEP_EVICTED_MS)
                && std::fs::remove_dir_all(e.path()).is_ok()
            {
                report.deleted.push(name);
            }
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join("workspace.json")) else {
            continue;
        };
        let Ok(info) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let (Some(path), Some(last)) = (info["path"].as_str(), info["last_used_ms"].as_u64())
        else {
            continue;
        };
        known.push(Known {
            dir: e.path(),
            path: path.into(),
            last_used_ms: last,
        });
    }
    let idle = |k: &Known| now_ms.saturating_sub(k.last_used_ms) > IDLE_BEFORE_EVICTION_MS;
    let mut remaining = Vec::new();
    for k in known {
        let note = k.dir.join("missing-since");
        if k.path.exists() {
            let _ = std::fs::remove_file(&note);
            remaining.push(k);
            continue;
        }
        let first = std::fs::read_to_string(&note)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        match first {
            None => {
                let _ = std::fs::write(&note, now_ms.to_string());
                report.missing_noted.push(k.path.display().to_string());
                remaining.push(k);
            }
            Some(at)
                if now_ms.saturating_sub(at) >= MISSING_RECHECK_MS
                    && idle(&k)
                    && !store_in_use(&k.dir, now_ms) =>
            {
                match set_aside(&k.dir, now_ms) {
                    Some(_) => report.vanished_evicted.push(k.path.display().to_string()),
                    None => remaining.push(k),
                }
            }
            Some(_) => remaining.push(k),
        }
    }
    let max = usize::try_from(limits.max_workspaces).unwrap_or(usize::MAX);
    remaining.sort_by_key(|k| std::cmp::Reverse(k.last_used_ms));
    if remaining.len() > max {
        let mut kept = Vec::new();
        for (i, k) in remaining.into_iter().enumerate() {
            if i >= max
                && idle(&k)
                && !store_in_use(&k.dir, now_ms)
                && set_aside(&k.dir, now_ms).is_some()
            {
                report.lru_evicted.push(k.path.display().to_string());
            } else {
                kept.push(k);
            }
        }
        remaining = kept;
    }
    // Bytes across workspaces: trim the least recently used first.
    let packed = |k: &Known| {
        crate::store::Store::open_read_only(&k.dir.join("store.redb"))
            .and_then(|s| s.reader()?.packed_bytes())
            .unwrap_or_else(|_| crate::store::disk_bytes(&k.dir.join("store.redb")))
    };
    let mut sizes: Vec<u64> = remaining.iter().map(packed).collect();
    report.total_bytes = sizes.iter().sum();
    let budget = limits.max_total_bytes;
    for (k, size) in remaining.iter().zip(sizes.iter_mut()).rev() {
        if budget == 0 || report.total_bytes <= budget {
            break;
        }
        if !k.path.is_dir() {
            continue;
        }
        let over = report.total_bytes - budget;
        let config = crate::Config::with_home(home).reading_settings();
        let Ok(wc) = WorkingCopy::open::<SessionOp>(&k.path, &config) else {
            continue;
        };
        let grace = wc.settings().gc_grace_secs.value;
        if let Ok(r) = enforce_budget(&wc, size.saturating_sub(over), now_ms, grace) {
            report.total_bytes = report.total_bytes - *size + r.store_bytes;
            report
                .budget_trimmed
                .push((k.path.display().to_string(), *size, r.store_bytes));
            *size = r.store_bytes;
        }
    }
    report
}
