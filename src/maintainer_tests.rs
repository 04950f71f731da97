use super::*;
use crate::history::SessionOp;
use crate::working_copy::Config;

fn workspace() -> (tempfile::TempDir, tempfile::TempDir, WorkingCopy) {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let wc = WorkingCopy::open::<SessionOp>(dir.path(), &Config::with_home(home.path())).unwrap();
    (dir, home, wc)
}

#[test]
fn a_new_store_is_maintained_when_it_is_created() {
    let before = crate::store::now_ms();
    let (_dir, _home, wc) = workspace();
    let maintained = wc.store().reader().unwrap().maintained_ms().unwrap();
    assert!((before..=crate::store::now_ms()).contains(&maintained));
    assert!(!crate::retention::is_due(&wc));
    assert!(matches!(maintain_later(&wc), Later::NotDue));
    assert!(run_detached_pass(&wc).is_none());
}

#[test]
fn deferred_warnings_are_taken_once_in_order_one_per_line() {
    let (_dir, _home, wc) = workspace();
    let store = wc.store();
    assert!(store.take_deferred_warnings().unwrap().is_empty());
    store.defer_warnings(&["first".into()]).unwrap();
    store
        .defer_warnings(&["second\nstill second".into(), "third".into()])
        .unwrap();
    store.defer_warnings(&[]).unwrap();
    let expected = ["first", "second still second", "third"];
    assert_eq!(
        store.reader().unwrap().deferred_warnings().unwrap(),
        expected
    );
    assert_eq!(store.take_deferred_warnings().unwrap(), expected);
    assert!(store.take_deferred_warnings().unwrap().is_empty());
    assert!(
        store
            .reader()
            .unwrap()
            .deferred_warnings()
            .unwrap()
            .is_empty()
    );
}
