//! Local history: with the `record = "bursts"` setting (or `retrace watch --record`), a
//! running watcher captures a snapshot after each burst of writes, once the workspace has
//! been quiet for `burst_quiet_ms`, at most one every `burst_interval_ms`, and never while
//! a session's turn runs (its steps and its own captures cover that). The snapshots go to
//! the workspace's log like any other; a `bursts` row beside each says it was a burst and
//! what it changed, so `retrace log` can show it and maintenance can thin bursts as backup
//! tools do: every burst for `bursts_all_hours`, then the newest of each hour for
//! `bursts_hourly_hours`, then the newest of each (UTC) day for `bursts_daily_days`
//! (`docs/retention.md`, "Bursts"). Only snapshots recorded as bursts are ever thinned, and
//! never the newest snapshot of the log.
//!
//! A burst is the user's: it is taken only while no turn runs, and the ownership ledger
//! already records whatever is written while no session's tool call runs as the user's.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::error::{Error, StoreError};
use crate::history::SessionOp;
use crate::history::db;
use crate::history::bursts::{
    BURST_PATHS, BURST_VERSION, BURSTS, BurstRecord, BurstSummary, WORKSPACE, bursts,
};
use crate::history::record::{Counts, TurnState};
use crate::history::timeline::{Moment, TimelineEntry};
use crate::object::ObjectId;
use crate::progress::NoProgress;
use crate::store::ReadTx;
use crate::watch::Watcher;
use crate::working_copy::WorkingCopy;

/// A turn begun longer ago than this and never ended (its agent died without a hook
/// firing, and left no lease to tell) no longer holds bursts back.
const ABANDONED_TURN_MS: u64 = 12 * 3_600_000;

/// How often the recorder looks at the watcher's activity.
const TICK: Duration = Duration::from_millis(200);

/// After a capture failed (other than busy), the next try waits this long.
const BACKOFF: Duration = Duration::from_secs(30);

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// How bursts are thinned: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thinning {
    /// Every burst younger than this many milliseconds is kept.
    pub all: u64,
    /// Then the newest of each hour, up to this age (milliseconds).
    pub hourly: u64,
    /// Then the newest of each UTC day, up to this age (milliseconds); older bursts go.
    pub daily: u64,
}

impl Thinning {
    /// The thinning the settings ask for.
    #[must_use]
    pub fn of(s: &Settings) -> Thinning {
        // Non-negative and finite (the settings refuse anything else); `as` saturates.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let ms = |v: f64, unit: u64| (v * unit as f64) as u64;
        Thinning {
            all: ms(s.bursts_all_hours.value, HOUR_MS),
            hourly: ms(s.bursts_hourly_hours.value, HOUR_MS),
            daily: ms(s.bursts_daily_days.value, DAY_MS),
        }
    }
}

/// The bursts to drop, of `bursts` (row, time in Unix ms) at `now_ms`: a pure function of
/// its inputs (tests drive it with a clock of their own).
#[must_use]
pub fn thin(bursts: &[(u64, u64)], now_ms: u64, t: Thinning) -> Vec<u64> {
    let mut sorted: Vec<(u64, u64)> = bursts.to_vec();
    // Newest first: the first burst seen in a bucket is the one it keeps.
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    let mut taken: HashSet<(bool, u64)> = HashSet::new();
    let mut drop = Vec::new();
    for (row, time) in sorted {
        let age = now_ms.saturating_sub(time);
        let keep = if age < t.all {
            true
        } else if age < t.hourly {
            taken.insert((false, time / HOUR_MS))
        } else if age < t.daily {
            taken.insert((true, time / DAY_MS))
        } else {
            false
        };
        if !keep {
            drop.push(row);
        }
    }
    drop.sort_unstable();
    drop
}

/// What [`crate::Workspace::capture_burst`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BurstOutcome {
    /// A snapshot recorded as a burst, in log row `row`.
    Captured {
        /// Its row in the snapshot log.
        row: u64,
        /// Its root.
        root: ObjectId,
        /// What it changed.
        summary: BurstSummary,
    },
    /// The disk equals the newest snapshot: nothing recorded.
    Unchanged,
    /// A session's turn runs: its own captures cover the writes.
    TurnRunning,
}

/// Whether a session's turn ran at any moment since `since_ms` (it runs now, or began or
/// ended since), or runs now when `since_ms` is None. A turn begun more than 12 hours ago
/// and never ended, or whose owner process is certainly gone (its lease), runs no more.
fn turn_ran(tx: &ReadTx, home: &std::path::Path, since_ms: Option<u64>) -> Result<bool, StoreError> {
    let now = crate::store::now_ms();
    for (key, t) in db::newest_turns(tx)? {
        let running = t.state == TurnState::Pending
            && t.ended_ms.is_none()
            && now.saturating_sub(t.began_ms) < ABANDONED_TURN_MS
            && !matches!(
                db::lease(tx, &key, t.number)?,
                Some(Ok(lease)) if crate::lease::liveness(&lease, home) == crate::lease::Liveness::Dead
            );
        let recent = since_ms.is_some_and(|s| t.began_ms >= s || t.ended_ms.is_some_and(|e| e >= s));
        if running || recent {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Captures the workspace as a burst, unless a turn runs: records the snapshot in the log
/// and, when it added a row, a [`BurstRecord`] for that row.
///
/// # Errors
/// [`Error::Capture`] when the capture fails (busy included: see [`Error::is_busy`]);
/// [`Error::Store`] when the store cannot be read or written.
pub fn capture_burst(wc: &WorkingCopy) -> Result<BurstOutcome, Error> {
    let store = wc.store();
    if turn_ran(&store.begin_read()?, wc.home(), None)? {
        return Ok(BurstOutcome::TurnRunning);
    }
    let before = store.reader()?.newest_snapshot_row()?;
    let began = crate::store::now_ms();
    let c = wc.snapshot_with::<SessionOp>(None, &NoProgress, false, false)?;
    // A turn that ran at any moment of the capture (begun, or even begun and ended, during
    // it) may have written into it: then the snapshot stays a plain one (the turn's captures
    // say who wrote what). One that begins after this look cannot have.
    if turn_ran(&store.begin_read()?, wc.home(), Some(began))? {
        return Ok(BurstOutcome::TurnRunning);
    }
    let reader = store.reader()?;
    let Some((row, rec)) = reader.newest_snapshot_row()? else {
        return Ok(BurstOutcome::Unchanged);
    };
    // The newest row is this capture's only if it is new, unlabelled (turns, checkpoints
    // and the user label theirs) and of this root.
    if before.as_ref().is_some_and(|(n, _)| *n >= row) || rec.root != c.id || rec.label.is_some()
    {
        return Ok(BurstOutcome::Unchanged);
    }
    let (counts, paths) = match &before {
        Some((_, prev)) => {
            let changes: Vec<_> = crate::diff::changes(&reader, &prev.root, &c.id)?
                .into_iter()
                .filter(|ch| !ch.dirs_only())
                .collect();
            let mut paths: Vec<Vec<u8>> = changes
                .iter()
                .take(BURST_PATHS)
                .map(|ch| ch.path.as_bytes().to_vec())
                .collect();
            paths.sort();
            (Counts::of(&changes), paths)
        }
        // The log's first snapshot: everything in it is new.
        None => (
            Counts {
                added: u32::try_from(c.files).unwrap_or(u32::MAX),
                ..Counts::default()
            },
            Vec::new(),
        ),
    };
    let burst = BurstRecord {
        version: BURST_VERSION,
        root: c.id,
        counts,
        paths,
    };
    let bytes = crate::object::record::to_bytes(&burst).map_err(|detail| StoreError::Encode {
        path: store.path().into(),
        detail,
    })?;
    store.transact(|tx| tx.put_row(BURSTS, &WORKSPACE, row, &bytes))?;
    Ok(BurstOutcome::Captured {
        row,
        root: c.id,
        summary: burst.summary(),
    })
}

/// An explicit snapshot of the state a burst captured adds no row of its own (the log lists
/// states): the newest row, when it is a burst of `root`, becomes the snapshot its caller
/// asked for, and loses its burst record so that thinning never takes it.
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written.
pub(crate) fn keep_as_snapshot(wc: &WorkingCopy, root: ObjectId) -> Result<(), StoreError> {
    let store = wc.store();
    let Some((row, rec)) = store.reader()?.newest_snapshot_row()? else {
        return Ok(());
    };
    if rec.root != root || store.begin_read()?.row(BURSTS, &WORKSPACE, row)?.is_none() {
        return Ok(());
    }
    store.transact(|tx| tx.remove_row(BURSTS, &WORKSPACE, row))
}

/// Thins the bursts of the snapshot log at `now_ms` (see [`thin`]) and drops burst records
/// whose snapshot row is gone. Returns how many snapshots went from the log; their objects
/// go at the next collection.
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written.
pub fn thin_bursts(wc: &WorkingCopy, now_ms: u64, t: Thinning) -> Result<u64, StoreError> {
    let store = wc.store();
    let tx = store.begin_read()?;
    let records = bursts(&tx)?;
    let mut all_rows = Vec::new();
    tx.each_row(BURSTS, &WORKSPACE, |n, _| {
        all_rows.push(n);
        Ok(())
    })?;
    drop(tx);
    if all_rows.is_empty() {
        return Ok(0);
    }
    // A log with a row that does not decode is left to `retrace repair`: thinning waits.
    let Ok(rows) = store.reader()?.snapshot_rows() else {
        return Ok(0);
    };
    let rows: std::collections::HashMap<u64, crate::store::SnapshotRecord> =
        rows.into_iter().collect();
    let mut live = Vec::new();
    let mut dangling: Vec<u64> = all_rows
        .iter()
        .copied()
        .filter(|n| !records.iter().any(|(m, _)| m == n))
        .collect();
    for (n, r) in &records {
        match rows.get(n) {
            Some(s) if s.root == r.root && s.label.is_none() => live.push((*n, s.time_ms)),
            _ => dangling.push(*n),
        }
    }
    // The log's newest row stays, and stays a burst.
    let newest = rows.keys().max().copied();
    let drop: Vec<u64> = thin(&live, now_ms, t)
        .into_iter()
        .filter(|n| Some(*n) != newest)
        .collect();
    if drop.is_empty() && dangling.is_empty() {
        return Ok(0);
    }
    store.transact(|tx| {
        let removed = tx.remove_snapshots(&drop)?;
        for n in drop.iter().chain(&dangling) {
            tx.remove_row(BURSTS, &WORKSPACE, *n)?;
        }
        Ok(removed)
    })
}

/// The bursts of the local history, newest first, as timeline entries: each with its
/// snapshot, what its recorder saw it change, and its span from the snapshot before it in
/// the log now (another burst, a turn's capture, any snapshot), for its paths and diffs.
/// A row whose snapshot is gone or relabelled is not a burst (thinning drops its record).
///
/// # Errors
/// [`StoreError`] when the store cannot be read or a snapshot record does not decode.
pub fn timeline(wc: &WorkingCopy) -> Result<Vec<TimelineEntry>, StoreError> {
    let mut records: std::collections::HashMap<u64, BurstRecord> =
        bursts(&wc.store().begin_read()?)?.into_iter().collect();
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut previous: Option<ObjectId> = None;
    for (row, s) in wc.store().reader()?.snapshot_rows()? {
        if let Some(r) = records.remove(&row)
            && r.root == s.root
            && s.label.is_none()
        {
            // After thinning, the row before may hold the same files (a burst that undid
            // the one thinned away): then it changed nothing, not everything.
            let before = previous;
            out.push(TimelineEntry {
                moment: Moment::Burst,
                time_ms: s.time_ms,
                entry: None,
                to: None,
                snapshot: Some(s.root),
                burst: Some(r.summary()),
                span: Some((before, s.root)),
            });
        }
        previous = Some(s.root);
    }
    out.reverse();
    Ok(out)
}

/// What the local history looks like at a glance, for a reload to tell it changed without
/// reading it: how many burst rows the log has, and the newest one's row number.
///
/// # Errors
/// [`StoreError`] when the store cannot be read.
pub(crate) fn stamp(wc: &WorkingCopy) -> Result<(usize, u64), StoreError> {
    let (mut n, mut newest) = (0, 0);
    wc.store().begin_read()?.each_row(BURSTS, &WORKSPACE, |row, _| {
        n += 1;
        newest = newest.max(row);
        Ok(())
    })?;
    Ok((n, newest))
}

/// What the recorder tells its caller.
pub enum RecorderEvent<'a> {
    /// A burst was captured (or found nothing new), in this long.
    Burst(&'a BurstOutcome, Duration),
    /// A capture failed; the recorder tries again later.
    Failed(&'a Error),
}

/// Records bursts while `watcher` runs and `stop` is unset: samples the watcher's activity
/// every 200 ms and captures once the workspace has been quiet for `burst_quiet_ms` since
/// the latest change, at most once every `burst_interval_ms` (see [`capture_burst`]).
/// Busy stores are retried at the next tick; other failures after 30 s. `report` hears of
/// each capture and failure.
pub fn record_bursts(
    wc: &WorkingCopy,
    watcher: &Watcher,
    stop: &AtomicBool,
    report: &mut dyn FnMut(RecorderEvent<'_>),
) {
    let settings = wc.settings();
    let quiet = Duration::from_millis(settings.burst_quiet_ms.value);
    let interval = Duration::from_millis(settings.burst_interval_ms.value);
    // What happened before the recorder started is the first burst's too.
    let mut seen = None;
    let mut next_try = Instant::now();
    while !stop.load(Ordering::SeqCst) && !watcher.finished() {
        std::thread::sleep(TICK);
        let a = watcher.activity();
        if seen == Some(a.count) || Instant::now() < next_try {
            continue;
        }
        if a.last.is_some_and(|l| l.elapsed() < quiet) {
            continue;
        }
        let began = Instant::now();
        match capture_burst(wc) {
            Ok(outcome) => {
                seen = Some(a.count);
                next_try = Instant::now() + interval;
                report(RecorderEvent::Burst(&outcome, began.elapsed()));
            }
            Err(e) if e.is_busy() => {}
            Err(e) => {
                next_try = Instant::now() + BACKOFF;
                report(RecorderEvent::Failed(&e));
            }
        }
    }
}

#[cfg(test)]
#[path = "local_history_tests.rs"]
mod tests;
