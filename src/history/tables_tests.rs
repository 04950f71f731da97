use super::*;
use crate::{Config, Workspace};

/// The tables `retrace-dump stats` lists, by name.
fn listed(ws: &Workspace) -> Vec<String> {
    let r = ws.working_copy().store().reader().unwrap();
    let tables = r.table_bytes(ALL).unwrap();
    tables.into_iter().map(|t| t.table).collect()
}

#[test]
fn a_new_store_has_the_tables_it_always_had() {
    let (dir, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ws = Workspace::open(dir.path(), &Config::with_home(home.path())).unwrap();
    let new = [
        "meta",
        "objects",
        "packs",
        "snapshots",
        "sessions",
        "turns",
        "checkpoints",
        "oplog",
        "leases",
        "journal",
    ];
    assert_eq!(listed(&ws), new);
    // A session's first turn creates the rest, and the list keeps its order.
    let s = ws.session("s");
    let t = s.begin_turn(Some("p".into()), None).unwrap();
    t.wait_before(std::time::Duration::from_mins(1)).unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    t.end(None).unwrap();
    let all = listed(&ws);
    let order: Vec<_> = ["meta", "objects", "packs", "snapshots", "snapshot_added"]
        .into_iter()
        .chain(ALL.iter().map(|t| t.name()))
        .chain(["staged"])
        .filter(|n| all.iter().any(|a| a == n))
        .collect();
    assert_eq!(all, order);
    assert!(all.iter().any(|t| t == "ledger"), "{all:?}");
}

#[test]
fn every_name_and_key_is_the_documented_one() {
    use crate::store::KeyKind::{Bytes, Key, Name, Rows};
    let tables: Vec<_> = ALL.iter().map(|t| (t.name(), t.key())).collect();
    assert_eq!(
        tables,
        [
            ("sessions", Key),
            ("turns", Rows),
            ("checkpoints", Rows),
            ("oplog", Rows),
            ("session_names", Rows),
            ("leases", Rows),
            ("reverts", Rows),
            ("steps", Rows),
            ("ledger", Bytes),
            ("journal", Name),
        ]
    );
    let meta = [META_LEDGER_AT, META_LEDGER_CLAIMS, META_LEDGER_OBSERVED].map(MetaKey::name);
    assert_eq!(meta, ["ledger_at", "ledger_claims", "ledger_observed"]);
}
