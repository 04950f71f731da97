use super::*;

const T: Thinning = Thinning {
    all: HOUR_MS,
    hourly: 24 * HOUR_MS,
    daily: 7 * DAY_MS,
};

/// A simulated week of work: a burst every 10 s from 09:00 to 17:00 UTC, days `0..days`.
fn week(days: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for day in 0..days {
        let start = day * DAY_MS + 9 * HOUR_MS;
        for i in 0..(8 * 360) {
            out.push((out.len() as u64 + 1, start + i * 10_000));
        }
    }
    out
}

fn kept(all: &[(u64, u64)], drop: &[u64]) -> Vec<(u64, u64)> {
    all.iter().copied().filter(|(n, _)| !drop.contains(n)).collect()
}

#[test]
fn a_week_of_bursts_thins_to_the_documented_counts() {
    let bursts = week(7);
    // Just after day 6's last burst (16:59:50).
    let now = 6 * DAY_MS + 17 * HOUR_MS - 9_999;
    let left = kept(&bursts, &thin(&bursts, now, T));
    let age = |t: u64| now - t;
    // Every burst of the last hour (16:00 to 16:59:50): 360.
    assert_eq!(left.iter().filter(|(_, t)| age(*t) < HOUR_MS).count(), 360);
    // One an hour for the rest of the day: 09:00 to 15:59 of day 6, 7 hours.
    let hourly: Vec<_> = left
        .iter()
        .filter(|(_, t)| (HOUR_MS..24 * HOUR_MS).contains(&age(*t)))
        .collect();
    assert_eq!(hourly.len(), 7);
    // Each is the newest of its hour.
    for (_, t) in &hourly {
        assert_eq!((t + 10_000) % HOUR_MS, 0, "{t}");
    }
    // One a day for the week before: days 0 to 5, each its newest (16:59:50).
    let daily: Vec<_> = left.iter().filter(|(_, t)| age(*t) >= 24 * HOUR_MS).collect();
    assert_eq!(daily.len(), 6);
    for (_, t) in &daily {
        assert_eq!(t % DAY_MS, 17 * HOUR_MS - 10_000, "{t}");
    }
    assert_eq!(left.len(), 373, "the count docs/retention.md gives");
}

#[test]
fn thinning_every_hour_keeps_what_thinning_once_keeps() {
    // Maintenance thins once an hour (or less often): what is left must not depend on when,
    // bucket for bucket (which burst of a bucket stays may: a burst an hourly pass dropped
    // is not there for a later daily pass to keep).
    let bursts = week(7);
    let end = 7 * DAY_MS + 12 * HOUR_MS;
    let once = kept(&bursts, &thin(&bursts, end, T));
    let mut left: Vec<(u64, u64)> = Vec::new();
    let mut next = 0;
    let mut now = 0;
    while now <= end {
        while next < bursts.len() && bursts[next].1 <= now {
            left.push(bursts[next]);
            next += 1;
        }
        left = kept(&left, &thin(&left, now, T));
        now += HOUR_MS;
    }
    left = kept(&left, &thin(&left, end, T));
    let buckets = |v: &[(u64, u64)]| -> Vec<(u8, u64)> {
        let mut b: Vec<(u8, u64)> = v
            .iter()
            .map(|&(_, t)| match end - t {
                a if a < T.all => (0, t),
                a if a < T.hourly => (1, t / HOUR_MS),
                _ => (2, t / DAY_MS),
            })
            .collect();
        b.dedup();
        b
    };
    assert_eq!(left.len(), once.len());
    assert_eq!(buckets(&left), buckets(&once));
}

#[test]
fn older_than_the_daily_window_goes_and_the_future_is_kept() {
    let bursts = [(1, 0), (2, 10 * DAY_MS), (3, 30 * DAY_MS)];
    // A clock set back: a burst "in the future" is young, never dropped for its age.
    assert_eq!(thin(&bursts, 20 * DAY_MS, T), [1, 2]);
    let none = Thinning {
        all: 0,
        hourly: 0,
        daily: 0,
    };
    assert_eq!(thin(&bursts, 30 * DAY_MS, none), [1, 2, 3]);
}

#[test]
fn the_settings_give_the_thinning() {
    let mut s = Settings::default();
    assert_eq!(Thinning::of(&s), T);
    s.bursts_all_hours.value = 0.5;
    s.bursts_daily_days.value = 0.0;
    let t = Thinning::of(&s);
    assert_eq!((t.all, t.daily), (HOUR_MS / 2, 0));
}

#[test]
fn a_burst_after_a_thinned_one_that_it_undid_changed_nothing_not_everything() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ws =
        crate::Workspace::open(dir.path(), &crate::Config::with_home(home.path())).unwrap();
    let write = |text: &str| std::fs::write(dir.path().join("a.txt"), text).unwrap();
    write("x\n");
    ws.capture_burst().unwrap();
    write("y\n");
    ws.capture_burst().unwrap();
    write("x\n");
    ws.capture_burst().unwrap();
    // Thin the middle burst away: the newest now follows a row of the same files.
    let wc = ws.working_copy();
    let rows: Vec<u64> = wc
        .store()
        .reader()
        .unwrap()
        .snapshot_rows()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(rows.len(), 3);
    wc.store()
        .transact(|tx| tx.remove_snapshots(&rows[1..2]))
        .unwrap();
    let entries = timeline(wc).unwrap();
    assert_eq!(entries.len(), 2);
    let (before, after) = entries[0].span.unwrap();
    assert_eq!(before, Some(after));
    assert!(ws.span_changes(entries[0].span).unwrap().is_empty());
    // The oldest: everything it holds is new.
    assert_eq!(entries[1].span.unwrap().0, None);
    assert_eq!(ws.span_changes(entries[1].span).unwrap().len(), 1);
}

#[test]
fn the_log_shows_what_each_capture_stored_and_forgets_it_with_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ws =
        crate::Workspace::open(dir.path(), &crate::Config::with_home(home.path())).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.txt"), "x".repeat(5000)).unwrap();
    let first = ws.snapshot(None).unwrap();
    std::fs::write(dir.path().join("src/b.txt"), "y\n").unwrap();
    let second = ws.snapshot(None).unwrap();
    std::fs::write(dir.path().join("c.txt"), "z\n").unwrap();
    let third = ws.snapshot(None).unwrap();
    // Trees included: a walk of the changed files alone would say less.
    assert!(second.new_bytes > 0 && third.new_bytes > 0);
    let figures = |ws: &crate::Workspace| -> Vec<u64> {
        ws.snapshot_log(&[])
            .unwrap()
            .iter()
            .map(|e| e.bytes_added)
            .collect()
    };
    assert_eq!(
        figures(&ws),
        [third.new_bytes, second.new_bytes, first.new_bytes]
    );
    let wc = ws.working_copy();
    let rows = || -> Vec<u64> {
        let r = wc.store().reader().unwrap();
        let mut kept: Vec<u64> = r.snapshot_added().unwrap().into_keys().collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            r.snapshot_rows()
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>()
        );
        kept
    };
    let all = rows();
    wc.store()
        .transact(|tx| tx.remove_snapshots(&all[1..2]))
        .unwrap();
    assert_eq!(rows().len(), 2);
    assert_eq!(figures(&ws), [third.new_bytes, first.new_bytes]);
    // Age pruning takes the figures with the rows (never the newest row).
    wc.store().prune_snapshots(u64::MAX).unwrap();
    assert_eq!(rows().len(), 1);
}
