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
    let x = lock(&p, LockMode::Exclusive, Duration::ZERO).unwrap();
    assert!(lock(&p, LockMode::Shared, Duration::from_millis(20)).is_err());
    drop(x);
    lock(&p, LockMode::Shared, Duration::ZERO).unwrap();
}
