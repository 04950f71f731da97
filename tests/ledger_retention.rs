//! The ledger bounded by retention (issue 38): a maintenance pass drops the entries no kept
//! turn can consult and cuts old versions written by turns that are gone, and an undo of a
//! kept turn still takes back exactly its own writes afterwards.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::Env;
use retrace::config::Settings;
use retrace::history::ledger::{LedgerEntry, Writer};
use retrace::history::tables::LEDGER;
use retrace::store::now_ms;
use retrace::{Config, Mode, Session, Workspace};

const DAY: u64 = 86_400_000;

fn open(env: &Env, f: impl FnOnce(&mut Settings)) -> Workspace {
    Workspace::open(env.root(), &Config::with_home(env.home.path()).configure(f)).unwrap()
}

/// A workspace whose sessions keep at most `max_turns` turns.
fn capped(env: &Env, max_turns: u64) -> Workspace {
    Workspace::open(
        env.root(),
        &Config::with_home(env.home.path()).max_turns(max_turns),
    )
    .unwrap()
}

/// A turn in which `edit` runs (no steps: the turn as a whole is the writer), begun a few
/// milliseconds after whatever came before (distinct times for the ledger's entries).
fn turn(s: &Session, edit: impl FnOnce()) {
    std::thread::sleep(Duration::from_millis(3));
    let t = s.begin_turn(None, None).unwrap();
    t.wait_before(Duration::from_mins(1)).unwrap();
    edit();
    t.end(None).unwrap();
}

/// An edit tool's call of session `s`'s running turn: a step naming `file`, which `write`
/// writes.
fn edit(s: &Session, file: &str, write: impl FnOnce()) {
    s.begin_step("", "Write", file, &[file.to_string()])
        .unwrap()
        .expect("a turn runs");
    write();
    s.end_step("").unwrap().expect("the step runs");
}

fn append(env: &Env, file: &str, line: &str) {
    let mut text = std::fs::read_to_string(env.path(file)).unwrap_or_default();
    text.push_str(line);
    env.write(file, text);
}

/// The ledger's entries, by path.
pub(crate) fn ledger(ws: &Workspace) -> BTreeMap<String, LedgerEntry> {
    let tx = ws.working_copy().store().begin_read().unwrap();
    tx.bytes_entries(LEDGER)
        .unwrap()
        .into_iter()
        .map(|(p, b)| {
            let e = LedgerEntry::decode(&b).unwrap();
            (String::from_utf8(p).unwrap(), e)
        })
        .collect()
}

fn paths(ws: &Workspace) -> Vec<String> {
    ledger(ws).into_keys().collect()
}

/// The turn numbers an entry names, newest first (`None`: not a turn of that session).
fn turns_named(e: &LedgerEntry) -> Vec<Option<u64>> {
    std::iter::once(&e.writer)
        .chain(e.earlier.iter().map(|(_, w)| w))
        .map(|w| match w {
            Writer::Turn { turn, .. } => Some(*turn),
            _ => None,
        })
        .collect()
}

/// Eight turns under a cap of three, each writing its own file and a line of a shared one,
/// the user writing between them: after a pass, the entries of the dropped turns (and of the
/// user's write before the oldest kept turn) are gone, those of the kept turns and of the
/// user's later write stay, the shared file's entry keeps the versions the kept turns
/// need, and each kept turn's undo takes back its own line.
#[test]
fn entries_only_of_turns_the_cap_dropped_go_at_maintenance() {
    let env = Env::new();
    let ws = capped(&env, 3);
    let s = ws.session("capped");
    for i in 1..=8 {
        turn(&s, || {
            env.write(&format!("f{i}.txt"), format!("turn {i}\n"));
            append(&env, "shared.txt", &format!("line {i}\n"));
        });
        if i == 1 {
            env.write("user_early.txt", "by the user\n");
        }
        if i == 7 {
            env.write("user_late.txt", "by the user\n");
        }
    }
    let mut all: Vec<String> = (1..=8).map(|i| format!("f{i}.txt")).collect();
    all.extend(["shared.txt", "user_early.txt", "user_late.txt"].map(String::from));
    all.sort();
    assert_eq!(paths(&ws), all, "every path ever written has an entry");
    assert_eq!(turns_named(&ledger(&ws)["shared.txt"]).len(), 8);

    let r = ws.maintain(now_ms(), 3600).unwrap();
    assert_eq!(
        r.ledger_dropped, 6,
        "f1..f5 and the early user write: {r:?}"
    );
    assert_eq!(
        paths(&ws),
        ["f6.txt", "f7.txt", "f8.txt", "shared.txt", "user_late.txt"]
    );
    // Turns 6..8 are kept: theirs, and the version turn 6 replaced (turn 5's), stay.
    assert_eq!(
        turns_named(&ledger(&ws)["shared.txt"]),
        [Some(8), Some(7), Some(6), Some(5)]
    );
    assert_eq!(r.ledger_trimmed, 4, "{r:?}");
    // A second pass finds nothing more.
    let again = ws.maintain(now_ms(), 3600).unwrap();
    assert_eq!(
        (again.ledger_dropped, again.ledger_trimmed),
        (0, 0),
        "{again:?}"
    );

    for i in (6..=8).rev() {
        assert!(s.undo(Mode::Files).unwrap().is_success());
        assert!(!env.path(&format!("f{i}.txt")).exists());
        let lines: String = (1..i).map(|k| format!("line {k}\n")).collect();
        assert_eq!(env.read("shared.txt"), lines, "after the undo of turn {i}");
    }
    // And redo puts them back.
    for i in 6..=8 {
        assert!(s.redo().unwrap().is_success());
        assert_eq!(env.read(&format!("f{i}.txt")), format!("turn {i}\n"));
    }
    let lines: String = (1..=8).map(|k| format!("line {k}\n")).collect();
    assert_eq!(env.read("shared.txt"), lines);
}

/// Two sessions append to one file in turns that overlap in time (tool calls apart), after
/// A's older turns were dropped by the cap: after a pass, A's undo takes out exactly A's
/// line (B's stays, merged), and B's undo then exactly B's.
#[test]
fn after_maintenance_two_sessions_appending_each_undo_exactly_their_own_lines() {
    let env = Env::new();
    env.write("log.txt", "base\n");
    let ws = capped(&env, 3);
    let a = ws.session("A");
    let b = ws.session("B");
    for i in 1..=5 {
        turn(&a, || {
            env.write(&format!("a{i}.txt"), "x");
            append(&env, "log.txt", &format!("A{i}\n"));
        });
    }
    std::thread::sleep(Duration::from_millis(3));
    let ta = a.begin_turn(None, None).unwrap();
    ta.wait_before(Duration::from_mins(1)).unwrap();
    let tb = b.begin_turn(None, None).unwrap();
    tb.wait_before(Duration::from_mins(1)).unwrap();
    edit(&a, "log.txt", || append(&env, "log.txt", "A's line\n"));
    edit(&b, "log.txt", || append(&env, "log.txt", "B's line\n"));
    ta.end(None).unwrap();
    tb.end(None).unwrap();
    let base = "base\nA1\nA2\nA3\nA4\nA5\n";
    assert_eq!(env.read("log.txt"), format!("{base}A's line\nB's line\n"));

    let r = ws.maintain(now_ms(), 3600).unwrap();
    // A keeps turns 4..6: a1..a3 go, a4, a5 and the log stay.
    assert_eq!(r.ledger_dropped, 3, "{r:?}");
    assert_eq!(paths(&ws), ["a4.txt", "a5.txt", "log.txt"]);

    let o = a.undo(Mode::Files).unwrap();
    assert!(o.is_success(), "{o:?}");
    assert_eq!(env.read("log.txt"), format!("{base}B's line\n"), "{o:?}");
    let o = b.undo(Mode::Files).unwrap();
    assert!(o.is_success(), "{o:?}");
    assert_eq!(env.read("log.txt"), base, "{o:?}");
}

/// B's tool call writes its own file while A's turn runs, then B's session is removed (the
/// session count): every writer the file's entry names is gone, but the write happened
/// during A's kept turn, so the entry stays, and A's undo leaves B's file alone.
#[test]
fn an_entry_written_during_a_kept_turn_stays_when_its_writer_is_gone() {
    let env = Env::new();
    let ws = open(&env, |s| {
        s.max_sessions.value = 1;
        s.retention_days.value = 0.0;
    });
    let a = ws.session("A");
    let b = ws.session("B");
    turn(&a, || env.write("old.txt", "A's first turn"));
    std::thread::sleep(Duration::from_millis(3));
    let ta = a.begin_turn(None, None).unwrap();
    ta.wait_before(Duration::from_mins(1)).unwrap();
    let tb = b.begin_turn(None, None).unwrap();
    tb.wait_before(Duration::from_mins(1)).unwrap();
    edit(&b, "b.txt", || env.write("b.txt", "by B\n"));
    edit(&a, "a.txt", || env.write("a.txt", "by A\n"));
    tb.end(None).unwrap();
    ta.end(None).unwrap();
    // Two days on, no process has refreshed B's "in use" mark: B, used least recently, goes.
    let r = ws.maintain(now_ms() + 2 * DAY, 3600).unwrap();
    assert_eq!(r.sessions_dropped, 1, "{r:?}");
    let o = a.undo(Mode::Files).unwrap();
    assert!(o.is_success(), "{o:?}");
    assert!(!env.path("a.txt").exists(), "{o:?}");
    // Without the entry, the undo would take B's file for A's own write and delete it.
    assert!(env.path("b.txt").exists(), "B's file was taken back: {o:?}");
    assert_eq!(env.read("b.txt"), "by B\n", "{o:?}");
    assert_eq!(r.ledger_dropped, 0, "{r:?}");
    assert!(paths(&ws).contains(&"b.txt".to_string()));
}

/// An entry that does not decode is dropped by the pass (no panic, no error); the others
/// stay.
#[test]
fn an_entry_that_does_not_decode_is_dropped() {
    let env = Env::new();
    let ws = open(&env, |_| {});
    let s = ws.session("s");
    turn(&s, || env.write("f.txt", "x"));
    ws.working_copy()
        .store()
        .transact(|tx| tx.put_bytes_entry(LEDGER, b"junk.txt", b"\xff\x00not a record"))
        .unwrap();
    let r = ws.maintain(now_ms(), 3600).unwrap();
    assert_eq!(r.ledger_dropped, 1, "{r:?}");
    assert_eq!(paths(&ws), ["f.txt"]);
    assert!(s.undo(Mode::Files).unwrap().is_success());
    assert!(!env.path("f.txt").exists());
}
