//! Unit tests of the parent module.

use std::cell::Cell;
use std::time::Duration;

use super::*;
use crate::history::tables::{LEDGER, LedgerMeta};
use crate::{Config, Workspace};

thread_local! {
    /// Makes every history write of this thread fail (captures still succeed).
    pub(super) static FAIL_WRITES: Cell<bool> = const { Cell::new(false) };
}

fn one_turn(dir: &std::path::Path, home: &std::path::Path) -> Session {
    let ws = Workspace::open(dir, &Config::with_home(home)).unwrap();
    let s = ws.session("s");
    let t = s
        .begin_turn(Some("start".into()), Some("p".into()))
        .unwrap();
    t.wait_before(Duration::from_mins(1)).unwrap();
    std::fs::write(dir.join("f"), "agent").unwrap();
    t.end(Some("end".into())).unwrap();
    s
}

#[test]
fn an_unsaved_history_after_files_changed_is_reported_uncertain() {
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = one_turn(dir.path(), home.path());
    FAIL_WRITES.with(|f| f.set(true));
    let o = s.undo(Mode::Both).unwrap();
    FAIL_WRITES.with(|f| f.set(false));
    assert!(
        matches!(&o, Outcome::PersistenceUncertain { detail } if detail.contains("injected")),
        "{o:?}"
    );
    assert!(!o.is_success());
    assert!(o.message().contains("could not be confirmed"));
    // The files did change; the history did not, and says so on the next look.
    assert!(!dir.path().join("f").exists());
    assert_eq!(s.status().unwrap().cursor, Some(1));
}

#[test]
fn an_expired_turn_moves_only_the_conversation() {
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = one_turn(dir.path(), home.path());
    // What retention does to a turn whose snapshots it removed.
    s.write(|w, _| {
        let mut t = w.get_turn(1)?.unwrap();
        t.state = TurnState::Expired;
        w.turn(&t)
    })
    .unwrap();
    let o = s.undo(Mode::Both).unwrap();
    assert!(
        matches!(&o, Outcome::Expired { anchor: Some(a), prompt: Some(p), .. } if a == "start" && p == "p"),
        "{o:?}"
    );
    assert!(o.is_success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f")).unwrap(),
        "agent"
    );
    assert_eq!(s.status().unwrap().cursor, None);
    let o = s.navigate("end", Mode::Both).unwrap();
    assert!(matches!(o, Outcome::Expired { .. }), "{o:?}");
}

/// The ledger update before an operation writes nothing when the ledger stands at the disk
/// already with nothing waiting (it then needs no commit), and still takes in a claim or an
/// edit step's read that waits for it, though the ledger stands there.
#[test]
fn an_up_to_date_ledger_still_takes_in_what_waits() {
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = one_turn(dir.path(), home.path());
    let store = s.ws.store();
    let at = store.begin_read().unwrap().ledger_at().unwrap().unwrap();
    ledger::up_to(store, at).unwrap();
    assert!(ledger_up_to_date(store, at));
    store
        .transact(|tx| ledger::claim(tx, &[b"f".to_vec()], &ledger::Writer::User))
        .unwrap();
    assert!(!ledger_up_to_date(store, at));
    ledger::up_to(store, at).unwrap();
    assert!(ledger_up_to_date(store, at));
    let entry = store.begin_read().unwrap().bytes_entry(LEDGER, b"f").unwrap().unwrap();
    let entry = ledger::LedgerEntry::decode(&entry).unwrap();
    assert_eq!(entry.writer, ledger::Writer::User);
}

/// Whether the ledger stands at `at` with no claim and no read waiting.
fn ledger_up_to_date(store: &crate::store::Store, at: crate::object::ObjectId) -> bool {
    let tx = store.begin_read().unwrap();
    tx.ledger_at().unwrap() == Some(at)
        && tx.ledger_claims().unwrap().is_none()
        && tx.ledger_observed().unwrap().is_none()
}
