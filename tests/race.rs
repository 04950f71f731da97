//! Two agents on one workspace, each a stream of real `retrace` processes (turn begin, its
//! edits, turn end, and now and then undo or redo), racing for 100 rounds: every command
//! must succeed, and at the end each session's history and files must agree with a model.
//! `RETRACE_RACE_ROUNDS` sets the number of rounds (default 100).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::common::{Env, RETRACE, assert_verified, stderr, stdout};
use serde_json::Value;

fn run(env: &Env, session: &str, rest: &[&str]) -> Value {
    let mut a = vec!["--session", session];
    a.extend_from_slice(rest);
    a.push("--json");
    let o = env.run(RETRACE, &a);
    let v: Value = serde_json::from_str(stdout(&o).trim())
        .unwrap_or_else(|e| panic!("{session} {rest:?}: {e}\n{}{}", stdout(&o), stderr(&o)));
    // Refusals that a race makes expected: exit 1 with their own result.
    let refused = ["conflict", "nothing_restored", "nothing_to_redo"];
    assert!(
        o.status.success()
            || (o.status.code() == Some(1) && refused.iter().any(|r| v["result"] == *r)),
        "{session} {rest:?} failed: {v}\n{}",
        stderr(&o)
    );
    v
}

/// One agent's loop; returns the files it must have on disk at the end. Its own file of an
/// undone turn goes only if the undo says it deleted it: a path the other agent's concurrent
/// turn also changed is left alone (and reported as skipped).
fn agent(env: &Env, name: &str, rounds: usize) -> BTreeSet<String> {
    let mut present: BTreeSet<String> = BTreeSet::new();
    for r in 0..rounds {
        run(
            env,
            name,
            &["turn", "begin", "--prompt", &format!("round {r}")],
        );
        let file = format!("round-{r:03}.txt");
        env.write(&format!("{name}/{file}"), format!("{name} {r}\n"));
        run(env, name, &["turn", "end"]);
        present.insert(file);
        let ops: &[&str] = match r % 7 {
            2 => &["undo", "redo"],
            5 => &["undo"],
            _ => &[],
        };
        let mut undone = false;
        for op in ops {
            let v = run(env, name, &[op]);
            // An undo whose every path the other agent's turn also changed (conservatively:
            // all the other's running turn changed so far) restores nothing and stays put;
            // then there is nothing to redo.
            let fine = match v["result"].as_str() {
                Some("restored" | "conflict" | "nothing_restored") => true,
                Some("nothing_to_redo") => *op == "redo" && !undone,
                _ => false,
            };
            assert!(fine, "{name} round {r} {op}: {v}");
            if v["result"] != "restored" {
                continue;
            }
            undone = *op == "undo";
            let turn = v["turn"].as_u64().unwrap();
            let own = format!("{name}/round-{:03}.txt", turn - 1);
            let listed = |k: &str| {
                v[k].as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p.as_str() == Some(own.as_str()))
            };
            let short = own.rsplit('/').next().unwrap().to_string();
            if listed("files_deleted") {
                present.remove(&short);
            }
            if listed("files_written") {
                present.insert(short);
            }
            // Nothing of the other agent's is ever deleted by this agent's undo or redo.
            for p in v["files_deleted"].as_array().unwrap() {
                let p = p.as_str().unwrap();
                assert!(p.starts_with(name), "{name} {op} deleted {p}: {v}");
            }
        }
    }
    present
}

#[test]
fn two_agents_racing_on_one_workspace_keep_consistent_histories() {
    let rounds: usize = std::env::var("RETRACE_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let env = Arc::new(Env::new());
    env.write("shared/README", "both agents work here\n");
    let threads: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|name| {
            let env = Arc::clone(&env);
            std::thread::spawn(move || (name, agent(&env, name, rounds)))
        })
        .collect();
    for t in threads {
        let (name, expected) = t.join().expect("an agent failed");
        let on_disk: BTreeSet<String> = std::fs::read_dir(env.path(name))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(on_disk, expected, "{name}'s files");
        let status = run(&env, name, &["status"]);
        assert_eq!(
            status["session"]["pending"],
            Value::Null,
            "{name}: {status}"
        );
        let log = run(&env, name, &["log"]);
        let turns = log["entries"].as_array().unwrap();
        assert!(
            turns
                .iter()
                .filter(|e| e["kind"] == "turn")
                .all(|e| e["state"] == "complete"),
            "{name}: {log}"
        );
        assert_eq!(
            turns.iter().filter(|e| e["kind"] == "turn").count(),
            rounds,
            "{name}: every round is a turn"
        );
    }
    assert_eq!(env.read("shared/README"), "both agents work here\n");
    assert_verified(&env);
}
