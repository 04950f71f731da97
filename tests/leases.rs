//! Leases on pending turns, with real processes: a dead owner's turn is cleaned up; a live
//! owner's, a foreign host's and an unreadable lease's are kept and reported.

use std::process::{Child, Command};

use crate::common::{Env, RETRACE, RETRACE_DUMP, stderr, stdout};
use redb::ReadableTable;
use retrace::history::db::session_key;
use retrace::history::tables::LEASES;
use retrace::lease::LeaseRecord;
use retrace::{Config, Workspace};
use serde_json::Value;

fn json(env: &Env, session: &str, rest: &[&str]) -> (Value, i32) {
    let mut a = vec!["--session", session];
    a.extend_from_slice(rest);
    a.push("--json");
    let o = env.run(RETRACE, &a);
    let v = serde_json::from_str(stdout(&o).trim())
        .unwrap_or_else(|e| panic!("{rest:?}: {e}: {}{}", stdout(&o), stderr(&o)));
    (v, o.status.code().unwrap_or(-1))
}

/// A stand-in agent process that owns a turn.
fn agent() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

/// Begins a turn of `session` owned by `owner`, and lets the "agent" edit a file.
fn pending_turn(env: &Env, session: &str, owner: &Child) {
    let pid = owner.id().to_string();
    let (v, code) = json(env, session, &["turn", "begin", "--owner-pid", &pid]);
    assert_eq!((code, v["before"].as_str()), (0, Some("ready")), "{v}");
    env.write("agent.txt", "written by the agent, which then dies");
}

fn dump_lease(env: &Env) -> Value {
    let o = env.run(RETRACE_DUMP, &["sessions", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    v[0]["lease"].clone()
}

/// Rewrites the lease of turn 1 of `session` with `f` (as another host or a damaged store
/// would have left it).
fn rewrite_lease(env: &Env, session: &str, f: impl FnOnce(Vec<u8>) -> Vec<u8>) {
    let path = Workspace::locate_store(env.root(), &Config::with_home(env.home.path())).unwrap();
    let mut b = redb::Database::builder();
    b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    let db = b.create(&path).unwrap();
    let key = session_key(session).0;
    let tx = db.begin_write().unwrap();
    {
        // The table as docs/format.md describes it, opened with redb alone.
        let leases: redb::TableDefinition<(&[u8; 32], u64), &[u8]> =
            redb::TableDefinition::new(LEASES.table().name());
        let mut t = tx.open_table(leases).unwrap();
        let old = t.get((&key, 1)).unwrap().unwrap().value().to_vec();
        t.insert((&key, 1), f(old).as_slice()).unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn a_dead_owners_turn_never_absorbs_edits_made_after_it_died() {
    let env = Env::new();
    env.write("base.txt", "base");
    let mut owner = agent();
    pending_turn(&env, "s", &owner);
    assert_eq!(dump_lease(&env)["liveness"]["owner"], "alive");
    owner.kill().unwrap();
    owner.wait().unwrap();
    assert_eq!(dump_lease(&env)["liveness"]["owner"], "dead");
    // The user edits a file after the agent died: it must never be undone as the turn's.
    env.write("user.txt", "the user's own edit");
    // Undo cleans the dead turn up: what it did cannot be told from what came after, so it
    // is conversation-only and no file is written.
    let (v, _) = json(&env, "s", &["undo", "--mode", "both"]);
    assert_ne!(v["result"], "restored", "{v}");
    assert_eq!(env.read("user.txt"), "the user's own edit");
    assert_eq!(
        env.read("agent.txt"),
        "written by the agent, which then dies"
    );
    let (log, _) = json(&env, "s", &["log"]);
    let turn = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "turn");
    assert_eq!(turn.unwrap()["state"], "conversation_only", "{log}");
}

#[test]
fn a_dead_owners_turn_that_changed_nothing_ends_complete() {
    let env = Env::new();
    env.write("base.txt", "base");
    let mut owner = agent();
    let pid = owner.id().to_string();
    let (v, code) = json(&env, "s", &["turn", "begin", "--owner-pid", &pid]);
    assert_eq!((code, v["before"].as_str()), (0, Some("ready")), "{v}");
    owner.kill().unwrap();
    owner.wait().unwrap();
    // The next undo cleans it up: it provably changed nothing.
    json(&env, "s", &["undo"]);
    let (log, _) = json(&env, "s", &["log"]);
    assert_eq!(log["entries"][0]["state"], "complete", "{log}");
    assert_eq!(log["entries"][0]["counts"], serde_json::json!([0, 0, 0]));
}

#[test]
fn a_dead_owners_turn_becomes_conversation_only_when_others_recorded_since() {
    let env = Env::new();
    let mut owner = agent();
    pending_turn(&env, "s", &owner);
    // Another session records the workspace after the dead turn's baseline: an
    // after-snapshot taken now would claim that work too.
    json(&env, "other", &["checkpoint", "someone else"]);
    owner.kill().unwrap();
    owner.wait().unwrap();
    let (v, _) = json(&env, "s", &["undo"]);
    assert_eq!(v["result"], "conversation_only", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("died before it ended"),
        "{v}"
    );
    assert!(env.path("agent.txt").exists(), "files are left as they are");
}

#[test]
fn a_live_owners_turn_is_kept() {
    let env = Env::new();
    let mut owner = agent();
    pending_turn(&env, "s", &owner);
    let (v, code) = json(&env, "s", &["undo"]);
    assert_eq!((v["result"].as_str(), code), (Some("busy"), 2), "{v}");
    let pid = owner.id().to_string();
    assert!(v["message"].as_str().unwrap().contains(&pid), "{v}");
    owner.kill().unwrap();
    owner.wait().unwrap();
}

#[test]
fn a_foreign_hosts_turn_is_kept_and_reported() {
    let env = Env::new();
    let mut owner = agent();
    pending_turn(&env, "s", &owner);
    rewrite_lease(&env, "s", |old| {
        let mut rec: LeaseRecord = retrace::history::record::decode(&old).unwrap();
        rec.host_id = "0123456789abcdef0123456789abcdef".into();
        rec.hostname = "build-server-7".into();
        retrace::history::record::encode(&rec).unwrap()
    });
    // Even with its pid gone, a lease from another machine proves nothing here.
    owner.kill().unwrap();
    owner.wait().unwrap();
    let (v, code) = json(&env, "s", &["undo"]);
    assert_eq!((v["result"].as_str(), code), (Some("busy"), 2), "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("another host"),
        "{v}"
    );
    let lease = dump_lease(&env);
    assert_eq!(lease["liveness"]["owner"], "uncertain", "{lease}");
    assert!(
        lease["liveness"]["detail"]
            .as_str()
            .unwrap()
            .contains("build-server-7")
    );
    assert!(env.path("agent.txt").exists());
    // Ending the turn explicitly still works.
    let (v, code) = json(&env, "s", &["turn", "end"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(json(&env, "s", &["undo"]).0["result"], "restored");
}

#[test]
fn an_unreadable_lease_is_kept_and_reported() {
    let env = Env::new();
    let mut owner = agent();
    pending_turn(&env, "s", &owner);
    rewrite_lease(&env, "s", |mut old| {
        old[0] = 7; // a future record version
        old
    });
    owner.kill().unwrap();
    owner.wait().unwrap();
    let (v, _) = json(&env, "s", &["undo"]);
    assert_eq!(v["result"], "busy", "{v}");
    assert!(v["message"].as_str().unwrap().contains("unreadable"), "{v}");
    let lease = dump_lease(&env);
    assert!(
        lease["unreadable"].as_str().unwrap().contains("version 7"),
        "{lease}"
    );
}

/// `--owner-pid` naming no process is refused (a usage error) before any turn begins; a
/// turn left pending can always be closed with `retrace turn end`.
#[test]
fn an_owner_pid_naming_no_process_is_refused() {
    let env = Env::new();
    env.write("f.txt", "v1\n");
    let o = env.run(
        RETRACE,
        &["--session", "s", "turn", "begin", "--owner-pid", "4000000"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("process 4000000 does not exist"),
        "{}",
        stderr(&o)
    );
    // No turn began: the session does not exist (a usage error, not busy).
    let o = env.run(RETRACE, &["--session", "s", "undo", "--json"]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["result"], "usage", "{v}");
    assert!(v["message"].as_str().unwrap().contains("no session"), "{v}");
}
