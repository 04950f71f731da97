//! `retrace mcp` spoken to as a real process with raw JSON-RPC: initialize, the initialized
//! notification, tools/list, tools/call of every tool, and a malformed call.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use crate::common::{self, Env, RETRACE};
use serde_json::{Value, json};

#[test]
fn the_mcp_tools_over_stdio() {
    let env = Env::new();
    env.write("a.txt", "before");
    let run = |args: &[&str]| assert!(env.run(RETRACE, args).status.success());
    run(&["--session", "m", "turn", "begin"]);
    env.write("a.txt", "after");
    env.write("b.txt", "new");
    run(&["--session", "m", "turn", "end"]);

    let mut child = env
        .command(RETRACE, &["--session", "m", "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|()| stdin.flush()).unwrap();
    let mut recv = || -> Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}),
    );
    let init = recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "retrace", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = recv();
    let mut names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "blame",
            "checkpoint",
            "diff",
            "file_history",
            "log",
            "redo",
            "revert",
            "status",
            "undo"
        ]
    );
    let undo_tool = &list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "undo")
        .unwrap();
    assert_eq!(
        undo_tool["inputSchema"]["properties"]["mode"]["enum"],
        json!(["both", "files", "conversation"]),
        "{undo_tool}"
    );

    let mut id = 3;
    let mut call = |name: &str, args: Value| -> (String, bool) {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
        id += 1;
        let v = recv();
        let r = &v["result"];
        (
            r["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            r["isError"].as_bool().unwrap_or(false),
        )
    };
    let (t, _) = call("log", json!({}));
    assert!(t.contains("turn:1 +1 ~1 -0"), "{t}");
    let (t, err) = call("undo", json!({}));
    assert!(!err && t.contains("restored"), "{t}");
    assert_eq!(env.read("a.txt"), "before");
    assert!(!env.path("b.txt").exists());
    let (t, _) = call("status", json!({}));
    assert!(t.contains("can redo: true"), "{t}");
    let (t, _) = call("redo", json!({}));
    assert!(t.contains("restored"), "{t}");
    assert_eq!(env.read("a.txt"), "after");
    env.write("c.txt", "by hand");
    let (t, _) = call("diff", json!({}));
    assert_eq!(t, "A c.txt");
    let (t, _) = call("checkpoint", json!({"label": "hand edit"}));
    assert!(t.contains("checkpoint 1 (hand edit)"), "{t}");
    // A malformed call is an error result, and the server keeps serving.
    let (t, err) = call("undo", json!({"mode": 7}));
    assert!(err, "{t}");
    let (t, err) = call("undo", json!({"mode": "sideways"}));
    assert!(err && t.contains("sideways"), "{t}");
    let (t, _) = call("status", json!({}));
    assert!(t.contains("can undo: true"), "{t}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A client of a real `retrace mcp` process.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Mcp {
    fn start(env: &Env, session: &str) -> Mcp {
        let mut child = env
            .command(RETRACE, &["--session", session, "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let init = m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "retrace", "{init}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], id, "{v}");
        v
    }

    /// A tool call's text and `isError`.
    fn call(&mut self, name: &str, args: Value) -> (String, bool) {
        let v = self.request("tools/call", json!({"name": name, "arguments": args}));
        let r = &v["result"];
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (text, r["isError"].as_bool().unwrap_or(false))
    }

    fn close(self) {
        let Mcp {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn the_models_undo_during_its_turn_puts_back_what_the_turn_changed_so_far() {
    let env = Env::new();
    env.write("keep.txt", "the user's file\n");
    env.write("app.py", "print(1)\n");
    let agent = common::LiveOwner::start();
    let run = |args: &[&str]| {
        let o = env.run(RETRACE, args);
        assert!(
            o.status.success(),
            "{}{}",
            common::stdout(&o),
            common::stderr(&o)
        );
    };
    // Turn 1 ends; turn 2 runs, owned by the live agent (as its prompt hook begins it).
    let pid = agent.pid();
    let begin = [
        "--session",
        "m",
        "turn",
        "begin",
        "--owner-pid",
        pid.as_str(),
    ];
    run(&begin);
    env.write("one.txt", "turn one\n");
    run(&["--session", "m", "turn", "end"]);
    run(&begin);
    // The model breaks things with its tools, then calls `undo` through MCP mid-turn.
    env.write("app.py", "print(broken\n");
    env.write("scratch.txt", "junk\n");
    let mut m = Mcp::start(&env, "m");
    let (t, err) = m.call("undo", json!({}));
    assert!(!err, "{t}");
    assert!(t.contains("restored files (1 written, 1 deleted)"), "{t}");
    assert_eq!(env.read("app.py"), "print(1)\n");
    assert!(!env.path("scratch.txt").exists());
    // Turn 1's file and the user's are untouched; the turn goes on.
    assert_eq!(env.read("one.txt"), "turn one\n");
    assert_eq!(env.read("keep.txt"), "the user's file\n");
    let (t, _) = m.call("status", json!({}));
    assert!(t.contains("turn 2 in progress"), "{t}");
    // Moving the conversation from inside the turn is refused, as an error result.
    let (t, err) = m.call("undo", json!({"mode": "conversation"}));
    assert!(err && t.contains("running"), "{t}");
    assert_eq!(env.read("one.txt"), "turn one\n");
    // The model fixes it properly; the turn ends with only that change.
    env.write("app.py", "print(2)\n");
    run(&["--session", "m", "turn", "end"]);
    let o = env.run(RETRACE, &["--session", "m", "log", "--json"]);
    let log: Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    // Newest first: turn 2 is the first entry.
    assert_eq!(log["entries"][0]["number"], 2, "{log}");
    assert_eq!(log["entries"][0]["counts"], json!([0, 1, 0]), "{log}");
    // After the turn, undo undoes the newest finished turn; refusals are errors.
    let (t, err) = m.call("undo", json!({}));
    assert!(!err && t.contains("restored"), "{t}");
    assert_eq!(env.read("app.py"), "print(1)\n");
    let (t, err) = m.call("redo", json!({}));
    assert!(!err, "{t}");
    let (t, err) = m.call("redo", json!({}));
    assert!(err && t.contains("nothing to redo"), "{t}");
    // Arguments that are not an object are invalid params; the server keeps serving.
    let v = m.request("tools/call", json!({"name": "undo", "arguments": []}));
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let (t, err) = m.call("undo", json!({"forse": true}));
    assert!(err && t.contains("forse"), "{t}");
    let (t, _) = m.call("status", json!({}));
    assert!(t.contains("can undo: true"), "{t}");
    m.close();
    drop(agent);
}

#[test]
fn requests_sent_all_at_once_are_all_answered_before_the_server_exits() {
    let env = Env::new();
    env.write("a.txt", "a");
    let lines: String = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "status", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "undo", "arguments": []}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "log", "arguments": {}}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect();
    let o = env.run_with_input(RETRACE, &["--session", "m", "mcp"], lines.as_bytes());
    assert!(o.status.success(), "{}", common::stderr(&o));
    let mut ids: Vec<u64> = common::stdout(&o)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4], "{}", common::stdout(&o));
}

/// MCP's `revert` (issue 17): called while the model's turn runs, an earlier turn's change
/// is taken back as part of the running turn; undoing that turn brings it back.
#[test]
fn the_models_revert_during_its_turn_becomes_part_of_the_turn() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    let agent = common::LiveOwner::start();
    let run = |args: &[&str]| {
        let o = env.run(RETRACE, args);
        assert!(o.status.success(), "{}", common::stderr(&o));
    };
    let pid = agent.pid();
    let begin = [
        "--session",
        "m",
        "turn",
        "begin",
        "--owner-pid",
        pid.as_str(),
    ];
    run(&begin);
    env.write("a.txt", "two\n");
    env.write("t1.txt", "turn 1\n");
    run(&["--session", "m", "turn", "end"]);
    run(&begin);
    env.write("t2.txt", "turn 2\n");
    let mut m = Mcp::start(&env, "m");
    let (t, err) = m.call("revert", json!({"turn": 1}));
    assert!(!err, "{t}");
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.path("t1.txt").exists());
    assert_eq!(env.read("t2.txt"), "turn 2\n");
    let (t, _) = m.call("status", json!({}));
    assert!(t.contains("turn 2 in progress"), "{t}");
    run(&["--session", "m", "turn", "end"]);
    // Undoing turn 2 undoes its own file and the revert made in it.
    let (t, err) = m.call("undo", json!({}));
    assert!(!err, "{t}");
    assert_eq!(env.read("a.txt"), "two\n");
    assert_eq!(env.read("t1.txt"), "turn 1\n");
    assert!(!env.path("t2.txt").exists());
    // A turn that is not applied cannot be reverted: an error result.
    let (t, err) = m.call("revert", json!({"turn": 2}));
    assert!(err && t.contains("not applied"), "{t}");
    m.close();
    drop(agent);
}

/// MCP's `revert` of one step (`step`): during the model's turn, what one tool call of an
/// earlier turn wrote is taken back alone, as part of the running turn.
#[test]
fn the_models_revert_of_one_step_takes_back_that_tool_call_alone() {
    let env = Env::new();
    let agent = common::LiveOwner::start();
    let run = |args: &[&str]| {
        let mut all = vec!["--session", "m"];
        all.extend_from_slice(args);
        let o = env.run(RETRACE, &all);
        assert!(o.status.success(), "{}", common::stderr(&o));
    };
    let pid = agent.pid();
    let begin = ["turn", "begin", "--owner-pid", pid.as_str()];
    run(&begin);
    for (file, text) in [("one.txt", "first\n"), ("two.txt", "second\n")] {
        run(&["step", "begin", "--tool", "Write", "--file", file]);
        env.write(file, text);
        run(&["step", "end"]);
    }
    run(&["turn", "end"]);
    run(&begin);
    let mut m = Mcp::start(&env, "m");
    let (t, _) = m.call("log", json!({"steps": true}));
    assert!(t.contains("turn:1.2 Write ~ two.txt"), "{t}");
    let (t, err) = m.call("revert", json!({"turn": 1, "step": 2}));
    assert!(!err, "{t}");
    assert!(!env.path("two.txt").exists(), "{t}");
    assert_eq!(env.read("one.txt"), "first\n");
    run(&["turn", "end"]);
    // The revert is part of turn 2: undoing it brings the step's file back.
    let (t, err) = m.call("undo", json!({}));
    assert!(!err, "{t}");
    assert_eq!(env.read("two.txt"), "second\n", "{t}");
    m.close();
    drop(agent);
}
