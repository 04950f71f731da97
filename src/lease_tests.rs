//! Unit tests of the parent module.

use super::*;

#[test]
fn this_process_is_alive_and_an_exited_child_is_dead() {
    let home = tempfile::tempdir().unwrap();
    let me = new_lease(home.path(), std::process::id()).unwrap();
    assert_eq!(liveness(&me, home.path()), Liveness::Alive);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let lease = new_lease(home.path(), pid).unwrap_or_else(|_| LeaseRecord { pid, ..me.clone() });
    child.wait().unwrap();
    assert_eq!(liveness(&lease, home.path()), Liveness::Dead);
    // A reused pid: same number, another start time.
    let reused = LeaseRecord {
        start_time: me.start_time + 1,
        ..me.clone()
    };
    assert_eq!(liveness(&reused, home.path()), Liveness::Dead);
}

#[test]
fn anything_foreign_or_unknown_is_uncertain() {
    let home = tempfile::tempdir().unwrap();
    let me = new_lease(home.path(), std::process::id()).unwrap();
    for other in [
        LeaseRecord {
            host_id: "another".into(),
            ..me.clone()
        },
        LeaseRecord {
            boot_id: "earlier".into(),
            ..me.clone()
        },
        LeaseRecord {
            pid_ns: me.pid_ns + 1,
            ..me.clone()
        },
        LeaseRecord {
            version: 9,
            ..me.clone()
        },
    ] {
        assert!(
            matches!(liveness(&other, home.path()), Liveness::Uncertain(_)),
            "{other:?}"
        );
    }
    assert_eq!(
        host_id(home.path()),
        host_id(home.path()),
        "the host id persists"
    );
}

#[test]
fn stat_and_host_id_texts_parse_or_give_none() {
    let fields = (3..=52)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(parse_start_time(&format!("42 (a) b) {fields}")), Some(22));
    assert_eq!(parse_start_time(&format!("42 (a) {fields}")), Some(22));
    assert_eq!(parse_start_time("42 (cut) R 1 2"), None);
    assert_eq!(parse_start_time("no parenthesis 1 2 3"), None);
    assert_eq!(parse_start_time(""), None);
    let id = "0123456789abcdef0123456789abcdef";
    assert_eq!(parse_host_id(&format!(" {id}\n")).as_deref(), Some(id));
    assert_eq!(parse_host_id(&id[1..]), None);
    assert_eq!(parse_host_id(""), None);
}
