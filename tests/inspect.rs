//! Reading history by path and by entry (issue 17): `retrace log -- PATH` across sessions,
//! the bytes each entry added, `retrace show`, `retrace blame`, and the same over `serve`
//! and MCP, through the real binary.

use serde_json::{Value, json};

use crate::common::{Env, RETRACE, noise, stderr, stdout};

/// `retrace ARGS` in `env`, which must succeed: its stdout.
fn ok(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    assert!(
        o.status.success(),
        "retrace {args:?}: {:?}\n{}{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// `retrace ARGS --json` in `env`, which must succeed: its JSON.
fn json_of(env: &Env, args: &[&str]) -> Value {
    // Before the `--` of paths, where there is one.
    let mut all = args.to_vec();
    let at = all.iter().position(|a| *a == "--").unwrap_or(all.len());
    all.insert(at, "--json");
    let out = ok(env, &all);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// One turn of `session`: `work` is the agent's edits.
fn turn(env: &Env, session: &str, prompt: &str, work: impl FnOnce()) {
    ok(
        env,
        &["--session", session, "turn", "begin", "--prompt", prompt],
    );
    work();
    ok(env, &["--session", session, "turn", "end"]);
}

fn lines(n: std::ops::RangeInclusive<u32>) -> String {
    n.map(|i| format!("line {i}\n")).collect()
}

/// Two sessions: s1's turn 1 edits a.txt, its turn 2 only b.txt, s2's turn 1 a.txt again,
/// then s1 checkpoints without touching a.txt.
fn two_sessions(env: &Env) {
    env.write("src/a.txt", lines(1..=5));
    env.write("b.txt", "b\n");
    turn(env, "s1", "edit a\nwith details", || {
        env.write(
            "src/a.txt",
            lines(1..=5).replace("line 3\n", "three\nthree bis\n"),
        );
    });
    turn(env, "s1", "edit b", || env.write("b.txt", "bb\n"));
    turn(env, "s2", "append to a", || {
        let mut a = env.read("src/a.txt");
        a.push_str("line 6\n");
        env.write("src/a.txt", a);
    });
    env.write("c.txt", "by hand\n");
    ok(env, &["--session", "s1", "checkpoint", "hand"]);
}

#[test]
fn log_of_a_path_lists_only_the_entries_that_changed_it_across_sessions() {
    let env = Env::new();
    two_sessions(&env);
    // No session named: every session's entries, newest first, each naming its session.
    let v = json_of(&env, &["log", "--", "src/a.txt"]);
    assert_eq!(v["session"], Value::Null, "{v:#}");
    let entries = v["entries"].as_array().unwrap();
    let seen: Vec<(&str, &str, u64, u64, u64)> = entries
        .iter()
        .map(|e| {
            (
                e["session_name"].as_str().unwrap(),
                e["kind"].as_str().unwrap(),
                e["number"].as_u64().unwrap(),
                e["lines_added"].as_u64().unwrap(),
                e["lines_removed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("s2", "turn", 1, 1, 0), ("s1", "turn", 1, 2, 1)],
        "{v:#}"
    );
    assert_eq!(entries[1]["paths"][0]["path"], "src/a.txt");
    assert_eq!(entries[1]["paths"][0]["change"], "M");
    assert_eq!(entries[1]["text"], "edit a\nwith details");
    assert!(entries[0]["time_ms"].as_u64() >= entries[1]["time_ms"].as_u64());
    // A directory selects what is below it; several paths sum their lines per entry.
    assert_eq!(json_of(&env, &["log", "--", "src"]), v);
    let both = json_of(&env, &["log", "--", "src/a.txt", "b.txt"]);
    let numbers: Vec<(&str, u64)> = both["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["session_name"].as_str().unwrap(),
                e["number"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(numbers, [("s2", 1), ("s1", 2), ("s1", 1)]);
    // One session's only.
    let s1 = json_of(&env, &["--session", "s1", "log", "--", "src/a.txt"]);
    assert_eq!(s1["entries"].as_array().unwrap().len(), 1, "{s1:#}");
    assert_eq!(s1["entries"][0]["number"], 1);
    // The checkpoint changed c.txt (from s1's state after its turn 2: s2's edit too).
    let c = json_of(&env, &["log", "--", "c.txt"]);
    assert_eq!(c["entries"].as_array().unwrap().len(), 1, "{c:#}");
    let c = &c["entries"];
    assert_eq!(
        (c[0]["kind"].as_str(), c[0]["paths"][0]["change"].as_str()),
        (Some("checkpoint"), Some("A"))
    );
    // The text form: one aligned line per entry.
    let text = ok(&env, &["log", "--", "src/a.txt"]);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].starts_with("turn:1  s2  ") && rows[0].contains("  +1 -0  "),
        "{text}"
    );
    assert!(
        rows[1].starts_with("turn:1  s1  ") && rows[1].contains("  +2 -1  "),
        "{text}"
    );
    assert!(rows[1].ends_with("  edit a"), "{text}");
    assert!(
        rows.iter()
            .all(|r| r.contains(" B  ") || r.contains("iB  ")),
        "{text}"
    );
    // A path nothing changed: an answer, not an error.
    let none = ok(&env, &["log", "--", "nothing.txt"]);
    assert!(
        none.contains("no turn or checkpoint changed nothing.txt"),
        "{none}"
    );
    // The snapshot log takes paths too: the snapshots where b.txt changed.
    let snaps = json_of(&env, &["log", "--snapshots", "--", "b.txt"]);
    let labels: Vec<&str> = snaps["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(labels, ["after turn 2", "before turn 1"], "{snaps:#}");
    assert_eq!(snaps["entries"][0]["paths"][0]["added"], 1);
}

#[test]
fn every_log_line_shows_the_bytes_its_entry_added_to_the_store() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let big = noise(7, 300 * 1024);
    turn(&env, "s", "add a big file", || env.write("big.bin", &big));
    turn(&env, "s", "do nothing", || {});
    // The same content again under another name is stored once: nothing new.
    turn(&env, "s", "copy it", || env.write("copy.bin", &big));
    turn(&env, "s", "small edit", || env.write("a.txt", "a\nb\n"));
    let log = json_of(&env, &["--session", "s", "log"]);
    let bytes: Vec<(u64, u64)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["number"].as_u64().unwrap(),
                e["bytes_added"].as_u64().unwrap(),
            )
        })
        .collect();
    let of = |n: u64| bytes.iter().find(|(k, _)| *k == n).unwrap().1;
    assert!(of(1) >= 300 * 1024, "incompressible 300 KiB: {bytes:?}");
    assert!(of(1) < 310 * 1024, "{bytes:?}");
    assert_eq!(of(2), 0, "{bytes:?}");
    assert_eq!(of(3), 0, "{bytes:?}");
    assert!(of(4) > 0 && of(4) < 1024, "{bytes:?}");
    // The text form shows it human-readable.
    let text = ok(&env, &["--session", "s", "log"]);
    let first = text.lines().find(|l| l.contains("add a big file")).unwrap();
    assert!(first.contains(" KiB  "), "{text}");
    // So does the snapshot log: the after-snapshot of turn 1 added the big file.
    let snaps = json_of(&env, &["log", "--snapshots"]);
    let after1 = snaps["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "after turn 1")
        .unwrap();
    assert!(
        after1["bytes_added"].as_u64().unwrap() >= 300 * 1024,
        "{snaps:#}"
    );
    let text = ok(&env, &["log", "--snapshots"]);
    assert!(text.lines().all(|l| l.contains(" added")), "{text}");
}

#[test]
fn show_gives_one_turn_in_full() {
    let env = Env::new();
    env.write("keep.txt", "k\n");
    env.write("edit.txt", "1\n2\n3\n");
    env.write("gone.txt", "x\ny\n");
    turn(&env, "s", "first", || env.write("keep.txt", "k2\n"));
    turn(&env, "s", "second prompt\nsecond line", || {
        env.write("edit.txt", "1\ntwo\n3\n4\n");
        env.write("new.txt", "n\n");
        std::fs::remove_file(env.path("gone.txt")).unwrap();
    });
    let v = json_of(&env, &["--session", "s", "show", "turn:2"]);
    assert_eq!(v["kind"], "turn");
    assert_eq!(v["number"], 2);
    assert_eq!(v["session_name"], "s");
    assert_eq!(v["text"], "second prompt\nsecond line");
    assert_eq!(v["state"], "complete");
    assert!(v["ended_ms"].as_u64() >= v["time_ms"].as_u64(), "{v:#}");
    assert!(v["bytes_added"].as_u64().unwrap() > 0, "{v:#}");
    let paths: Vec<(&str, &str, u64, u64)> = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap(),
                p["change"].as_str().unwrap(),
                p["added"].as_u64().unwrap(),
                p["removed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("edit.txt", "M", 2, 1),
            ("gone.txt", "D", 0, 2),
            ("new.txt", "A", 1, 0)
        ]
    );
    // The same entry by its before name, and as text (the prompt in full).
    assert_eq!(
        json_of(&env, &["--session", "s", "show", "turn:2:before"]),
        v
    );
    let text = ok(&env, &["--session", "s", "show", "turn:2"]);
    assert!(text.starts_with("turn:2  session s\n"), "{text}");
    assert!(
        text.contains("prompt:\n    second prompt\n    second line\n"),
        "{text}"
    );
    assert!(text.contains("  M edit.txt  +2 -1\n"), "{text}");
    assert!(text.contains("  D gone.txt  +0 -2\n"), "{text}");
    // Without --session: the only session with history. An unknown entry is a usage error.
    assert_eq!(
        json_of(&env, &["show", "turn:1"])["paths"][0]["path"],
        "keep.txt"
    );
    let o = env.run(RETRACE, &["--session", "s", "show", "turn:9"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no turn 9"), "{}", stderr(&o));
}

/// Each line of a blame's JSON: its origin's kind and turn.
fn origins(v: &Value) -> Vec<(String, Option<u64>)> {
    let mut out = Vec::new();
    for r in v["ranges"].as_array().unwrap() {
        let o = &r["origin"];
        for _ in r["start"].as_u64().unwrap()..=r["end"].as_u64().unwrap() {
            out.push((o["kind"].as_str().unwrap().to_string(), o["turn"].as_u64()));
        }
    }
    out
}

#[test]
fn blame_names_the_turn_of_every_line() {
    let env = Env::new();
    env.write("f.txt", "a1\na2\na3\n");
    env.write("other.txt", "o\n");
    turn(&env, "s1", "turn one", || {
        env.write("f.txt", "a1\nt1\na3\nt1b\n")
    });
    // The user edits between turns.
    env.write("f.txt", "u1\na1\nt1\na3\nt1b\n");
    turn(&env, "s1", "turn two", || {
        env.write("f.txt", "u1\na1\nt1\na3\nt1b\nt2\n");
    });
    turn(&env, "s2", "turn three", || {
        env.write("f.txt", "u1\na1\nt1\nt3\nt1b\nt2\n");
    });
    // Undo and redo of the last turn keep its lines its own.
    ok(&env, &["--session", "s2", "undo"]);
    ok(&env, &["--session", "s2", "redo"]);
    // An edit on disk, in no snapshot.
    env.write("f.txt", "u1\na1\nt1\nt3\nt1b\nt2\ndisk\n");
    let v = json_of(&env, &["blame", "f.txt"]);
    assert_eq!(v["path"], "f.txt");
    assert_eq!(v["lines"], 7);
    let want: Vec<(String, Option<u64>)> = [
        ("between_turns", Some(2)),
        ("before_retrace", None),
        ("turn", Some(1)),
        ("turn", Some(1)),
        ("turn", Some(1)),
        ("turn", Some(2)),
        ("unsnapshotted", None),
    ]
    .iter()
    .map(|(k, t)| ((*k).to_string(), *t))
    .collect();
    // Line 4 is turn three's (s2's turn 1): its session is checked below.
    assert_eq!(origins(&v), want, "{v:#}");
    let ranges = v["ranges"].as_array().unwrap();
    let line = |n: u64| {
        ranges
            .iter()
            .find(|r| r["start"].as_u64().unwrap() <= n && n <= r["end"].as_u64().unwrap())
            .unwrap()["origin"]
            .clone()
    };
    assert_eq!(line(3)["session_name"], "s1");
    assert_eq!(line(3)["prompt"], "turn one");
    assert_eq!(line(4)["session_name"], "s2");
    assert_eq!(line(4)["prompt"], "turn three");
    assert_eq!(line(1)["session_name"], "s1");
    assert!(line(3)["time_ms"].as_u64().unwrap() > 0);
    // The text form: one aligned line per line of the file.
    let text = ok(&env, &["blame", "f.txt"]);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 7, "{text}");
    let bar = rows[0].find("  | ").unwrap();
    assert!(rows.iter().all(|r| r.find("  | ") == Some(bar)), "{text}");
    assert!(
        rows[1].starts_with("before retrace ") && rows[1].ends_with("| a1"),
        "{text}"
    );
    assert!(
        rows[2].starts_with("turn 1 (s1) ") && rows[2].contains("  turn one"),
        "{text}"
    );
    assert!(
        rows[3].starts_with("turn 1 (s2) ") && rows[3].ends_with("| t3"),
        "{text}"
    );
    assert!(
        rows[6].starts_with("unsnapshotted ") && rows[6].ends_with("| disk"),
        "{text}"
    );
    // One session's turns: s2's line is an edit between s1's turns.
    let s1 = json_of(&env, &["--session", "s1", "blame", "f.txt"]);
    assert_eq!(origins(&s1)[3].0, "between_turns", "{s1:#}");
    assert_eq!(origins(&s1)[2], ("turn".to_string(), Some(1)));
    // A binary file is refused, a missing one is a usage error.
    env.write("bin.dat", b"\x00\x01\x02");
    let o = env.run(RETRACE, &["blame", "bin.dat"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("binary"), "{}", stderr(&o));
    let o = env.run(RETRACE, &["blame", "missing.txt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no such file"), "{}", stderr(&o));
}

/// JSON-RPC answers of `retrace serve` to `requests` (sent in one go), by id.
fn serve(env: &Env, requests: &[Value]) -> Vec<Value> {
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let o = env.run_with_input(RETRACE, &["serve"], input.as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("id").is_some())
        .collect()
}

#[test]
fn serve_answers_file_history_show_and_blame() {
    let env = Env::new();
    two_sessions(&env);
    let root = env.root().display().to_string();
    let call = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let answers = serve(
        &env,
        &[
            call(1, "open", json!({"workspace": root, "session": "s1"})),
            call(
                2,
                "file_history",
                json!({"session": "s1", "path": "src/a.txt"}),
            ),
            call(
                3,
                "file_history",
                json!({"session": "s1", "paths": ["src/a.txt"], "this_session_only": true}),
            ),
            call(
                4,
                "file_history",
                json!({"session": "s1", "path": "src", "max": 1}),
            ),
            call(5, "show", json!({"session": "s1", "ref": "turn:1"})),
            call(6, "blame", json!({"session": "s1", "path": "src/a.txt"})),
            call(7, "file_history", json!({"session": "s1"})),
            call(8, "show", json!({"session": "s1"})),
            call(9, "blame", json!({"session": "s1", "path": "nope.txt"})),
        ],
    );
    let by = |id: u64| answers.iter().find(|a| a["id"] == id).unwrap().clone();
    let all = &by(2)["result"]["entries"];
    assert_eq!(all.as_array().unwrap().len(), 2, "{all:#}");
    assert_eq!(
        (
            all[0]["session_name"].as_str(),
            all[1]["session_name"].as_str()
        ),
        (Some("s2"), Some("s1"))
    );
    let own = &by(3)["result"]["entries"];
    assert_eq!(own.as_array().unwrap().len(), 1, "{own:#}");
    assert_eq!(own[0]["lines_added"], 2);
    assert_eq!(by(4)["result"]["entries"].as_array().unwrap().len(), 1);
    let show = &by(5)["result"];
    assert_eq!(show["paths"][0]["change"], "M", "{show:#}");
    assert_eq!(show["text"], "edit a\nwith details");
    let blame = &by(6)["result"];
    assert_eq!(blame["lines"], 7, "{blame:#}");
    let kinds: Vec<String> = origins(blame).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        [
            "before_retrace",
            "before_retrace",
            "turn",
            "turn",
            "before_retrace",
            "before_retrace",
            "turn"
        ]
    );
    // Parameters missing or naming nothing: errors naming what to give.
    assert_eq!(by(7)["error"]["code"], -32602, "{:#}", by(7));
    assert!(by(7)["error"]["message"].as_str().unwrap().contains("path"));
    assert_eq!(by(8)["error"]["code"], -32602, "{:#}", by(8));
    assert_eq!(by(8)["error"]["data"]["param"], "ref", "{:#}", by(8));
    assert_eq!(by(9)["error"]["code"], -32000, "{:#}", by(9));
    assert!(
        by(9)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no such file")
    );
}

#[test]
fn mcp_offers_file_history_and_blame() {
    let env = Env::new();
    two_sessions(&env);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let tool = |id: u64, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
    };
    let input: String = [
        init,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        tool(2, "file_history", json!({"path": "src/a.txt"})),
        tool(3, "blame", json!({"path": "src/a.txt"})),
        tool(4, "blame", json!({"path": "nope.txt"})),
    ]
    .iter()
    .map(|r| format!("{r}\n"))
    .collect();
    let o = env.run_with_input(RETRACE, &["--session", "s1", "mcp"], input.as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    let answers: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text = |id: u64| {
        let a = answers.iter().find(|a| a["id"] == id).unwrap();
        (
            a["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string(),
            a["result"]["isError"].as_bool().unwrap_or(false),
        )
    };
    let (history, err) = text(2);
    assert!(!err, "{history}");
    assert_eq!(history.lines().count(), 2, "{history}");
    assert!(history.starts_with("turn:1  s2  "), "{history}");
    let (blame, err) = text(3);
    assert!(!err, "{blame}");
    assert_eq!(blame.lines().count(), 7, "{blame}");
    assert!(
        blame.lines().nth(2).unwrap().starts_with("turn 1 (s1) "),
        "{blame}"
    );
    let (missing, err) = text(4);
    assert!(err && missing.contains("no such file"), "{missing}");
}
