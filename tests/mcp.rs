//! `retrace mcp` spoken to as a real process with raw JSON-RPC: initialize, the initialized
//! notification, tools/list, tools/call of every tool, and a malformed call.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::{Env, RETRACE};
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
        ["checkpoint", "diff", "log", "redo", "status", "undo"]
    );
    let undo_tool = &list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "undo")
        .unwrap();
    assert!(
        undo_tool["inputSchema"]["properties"]["mode"].is_object(),
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
    assert!(!err && t.contains("unknown mode"), "{t}");
    let (t, _) = call("status", json!({}));
    assert!(t.contains("can undo: true"), "{t}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
