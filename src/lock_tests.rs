//! Unit tests of the parent module.

use super::*;

#[test]
fn exclusive_excludes_and_shared_shares() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("lock");
    let a = lock(&p, LockMode::Shared, Duration::ZERO).unwrap();
    let b = lock(&p, LockMode::Shared, Duration::ZERO).unwrap();
    assert!(matches!(
        lock(&p, LockMode::Exclusive, Duration::from_millis(20)),
        Err(StoreError::Busy { .. })
    ));
    drop((a, b));
    // Released: taken at once, unless a test thread forking a child this instant holds a
    // copy of the descriptors until the child's exec closes them (hence a bounded wait).
    let x = lock(&p, LockMode::Exclusive, Duration::from_secs(10)).unwrap();
    assert!(lock(&p, LockMode::Shared, Duration::from_millis(20)).is_err());
    drop(x);
    lock(&p, LockMode::Shared, Duration::from_secs(10)).unwrap();
}
