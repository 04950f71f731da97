//! `retrace serve` driven as a real process over stdin/stdout: a whole turn, undo and redo,
//! two sessions in one server, progress notifications, malformed input, shutdown and EOF.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, Env, RETRACE, stderr};
use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    notifications: Vec<Value>,
}

impl Client {
    fn start(env: &Env) -> Client {
        Client::start_with(env, &[])
    }

    fn start_with(env: &Env, vars: &[(&str, &str)]) -> Client {
        let mut child = env
            .command(RETRACE, &["serve"])
            .envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Client {
            child,
            stdin,
            stdout,
            next: 1,
            notifications: Vec::new(),
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message that is not a notification.
    fn read_reply(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                return v;
            }
            self.notifications.push(v);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&req.to_string());
        let v = self.read_reply();
        assert_eq!(v["id"], id);
        v
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }
}

#[test]
fn a_turn_undo_and_redo_over_json_rpc() {
    let env = Env::new();
    env.write("a.txt", "original");
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    let open = c.ok("open", json!({"workspace": root, "session": "pi-1"}));
    let s = open["session"].as_str().unwrap().to_string();
    assert_eq!(
        c.ok(
            "begin_turn",
            json!({"session": s, "anchor": "n1", "prompt": "edit"})
        )["turn"],
        1
    );
    assert_eq!(
        c.ok("wait_before", json!({"session": s, "timeout_ms": 60000}))["before"],
        "ready"
    );
    env.write("a.txt", "agent");
    assert_eq!(
        c.ok("round", json!({"session": s, "anchor": "n1.5"}))["ok"],
        true
    );
    env.write("new.txt", "agent");
    let end = c.ok("end_turn", json!({"session": s, "anchor": "n2"}));
    assert_eq!(
        (end["added"].as_u64(), end["modified"].as_u64()),
        (Some(1), Some(1))
    );

    let undo = c.ok("undo", json!({"session": s}));
    assert_eq!(undo["result"], "restored", "{undo}");
    assert_eq!(
        (undo["anchor"].as_str(), undo["prompt"].as_str()),
        (Some("n1"), Some("edit"))
    );
    assert!(undo["message"].as_str().unwrap().contains("restored"));
    assert_eq!(env.read("a.txt"), "original");
    assert!(!env.path("new.txt").exists());
    assert!(
        c.notifications
            .iter()
            .any(|n| n["method"] == "$/progress" && n["params"]["session"] == s),
        "{:?}",
        c.notifications
    );
    let status = c.ok("status", json!({"session": s}));
    assert_eq!(
        (status["can_undo"].as_bool(), status["can_redo"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(c.ok("redo", json!({"session": s}))["anchor"], "n2");
    assert_eq!(env.read("a.txt"), "agent");
    let log = c.ok("log", json!({"session": s}));
    assert_eq!(log["entries"][0]["counts"], json!([1, 1, 0]));
    // A round's anchor lies inside the turn: navigating there says so.
    let inside = c.call("navigate", json!({"session": s, "anchor": "n1.5"}));
    let why = inside["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("inside turn 1"), "{inside}");
    let diff = c.ok("diff", json!({"session": s}));
    assert_eq!(
        diff["added"],
        json!([]),
        "the disk equals the last known state: {diff}"
    );

    // A second session in the same server is isolated.
    let other = c.ok("open", json!({"workspace": root, "session": "pi-2"}))["session"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(other, s);
    assert_eq!(
        c.ok("undo", json!({"session": other}))["result"],
        "nothing_to_undo"
    );
    // Checkpoint and navigation by label.
    assert_eq!(
        c.ok("checkpoint", json!({"session": s, "label": "here"}))["result"],
        "checkpointed"
    );
    env.write("a.txt", "later");
    assert_eq!(c.ok("checkpoint", json!({"session": s}))["number"], 2);
    assert_eq!(
        c.ok("navigate", json!({"session": s, "anchor": "here"}))["result"],
        "restored"
    );
    assert_eq!(env.read("a.txt"), "agent");

    // Bad input: errors, and the server keeps going.
    c.send_line("this is not json");
    assert_eq!(c.read_reply()["error"]["code"], -32700);
    c.send_line(r#"{"id": 99, "method": "undo"}"#);
    assert_eq!(c.read_reply()["error"]["code"], -32600);
    assert_eq!(c.call("fly", json!({}))["error"]["code"], -32601);
    assert_eq!(
        c.call("undo", json!({"session": "s99"}))["error"]["code"],
        -32602
    );
    assert_eq!(
        c.call("undo", json!({"session": s, "mode": "all"}))["error"]["code"],
        -32602
    );
    let e = c.call("navigate", json!({"session": s, "anchor": "nowhere"}));
    assert_eq!(e["error"]["code"], -32000);
    assert!(e["error"]["message"].as_str().unwrap().contains("nowhere"));
    assert_eq!(c.ok("status", json!({"session": s}))["cursor"], 1);

    // Shutdown answers, then the process exits cleanly.
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
    common::assert_verified(&env);
}

/// One line that is not UTF-8 is one bad request: a parse error, and the next requests
/// (here the end of a pending turn) are answered.
#[test]
fn a_line_that_is_not_utf8_is_a_parse_error_and_the_server_keeps_reading() {
    let env = Env::new();
    env.write("a.txt", "a");
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    c.ok("open", json!({"workspace": root, "session": "bytes"}));
    c.ok("begin_turn", json!({}));
    assert_eq!(c.ok("wait_before", json!({}))["before"], "ready");
    c.send_bytes(b"\xff\xfe\n");
    let e = c.read_reply();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("UTF-8"),
        "{e}"
    );
    env.write("a.txt", "b");
    let end = c.ok("end_turn", json!({}));
    assert_eq!(end["modified"], 1, "{end}");
    assert_eq!(c.ok("status", json!({}))["pending"], Value::Null);
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
}

#[test]
fn end_of_input_finishes_pending_work_and_exits() {
    let env = Env::new();
    for i in 0..500 {
        env.write(&format!("d/f{i}"), format!("{i}"));
    }
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    c.ok("open", json!({"workspace": root, "session": "x"}));
    // Begin a turn and leave at once, while its before-snapshot is being taken.
    c.ok("begin_turn", json!({}));
    drop(c.stdin.take());
    assert!(c.child.wait().unwrap().success());
    // The capture finished and the store was closed cleanly: a read-only tool can open it.
    common::assert_verified(&env);
    let o = env.run(RETRACE, &["--session", "x", "status", "--json"]);
    let v: Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_eq!(
        v["session"]["pending"], 1,
        "the turn is still open for a later end: {v}"
    );
}

/// A long-running server maintains its workspaces on a timer, with no turn to trigger it.
#[test]
fn maintenance_runs_on_a_timer_while_the_server_runs() {
    let env = Env::new();
    // A store created within its budget (a new store counts as maintained when created),
    // which the server's budget exceeds: a pass is due at once.
    env.write("a.bin", common::noise(1, 300_000));
    assert!(env.run(RETRACE, &["snapshot"]).status.success());
    let started = retrace::store::now_ms();
    let mut c = Client::start_with(
        &env,
        &[
            ("RETRACE_MAINTAIN_EVERY_MS", "100"),
            ("RETRACE_MAX_STORE_BYTES", "64KiB"),
        ],
    );
    let root = env.root().display().to_string();
    c.ok("open", json!({"workspace": root, "session": "timer"}));
    common::wait_for_pass(&env, started);
    c.ok("shutdown", json!({}));
    assert!(c.child.wait().unwrap().success());
}

/// A turn begun over serve and left by EOF is never ended with edits made after the server
/// went away: its owner is gone, so the next undo makes it conversation-only and writes no
/// file (neither the agent's nor the user's later edit).
#[test]
fn a_turn_left_by_eof_never_absorbs_later_edits() {
    let env = Env::new();
    env.write("f.txt", "v1\n");
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    c.ok("open", json!({"workspace": root, "session": "x"}));
    c.ok("begin_turn", json!({"prompt": "p"}));
    c.ok("wait_before", json!({"timeout_ms": 60000}));
    env.write("f.txt", "by the agent\n");
    drop(c.stdin.take());
    assert!(c.child.wait().unwrap().success());
    env.write("user.txt", "the user's edit after the agent left\n");
    let o = env.run(RETRACE, &["--session", "x", "undo", "--json"]);
    let v: Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
    assert_ne!(v["result"], "restored", "{v}");
    assert_eq!(
        env.read("user.txt"),
        "the user's edit after the agent left\n"
    );
    assert_eq!(env.read("f.txt"), "by the agent\n");
}

/// Asserts `v` is a -32602 error naming `param` (in the message and in `data.param`).
fn assert_invalid_param(v: &Value, param: &str) {
    assert_eq!(v["error"]["code"], -32602, "{param}: {v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("\"{param}\"")), "{param}: {v}");
    assert_eq!(v["error"]["data"]["param"], param, "{v}");
}

/// A server with one session whose last turn changed `a.txt` from "original" to "agent"
/// (undoable), and its handle.
fn one_turn_done(env: &Env) -> (Client, String) {
    env.write("a.txt", "original");
    let mut c = Client::start(env);
    let root = env.root().display().to_string();
    let s = c.ok("open", json!({"workspace": root, "session": "typed"}))["session"]
        .as_str()
        .unwrap()
        .to_string();
    c.ok("begin_turn", json!({"session": s, "anchor": "n1"}));
    c.ok("wait_before", json!({"session": s}));
    env.write("a.txt", "agent");
    assert_eq!(
        c.ok("end_turn", json!({"session": s, "anchor": "n2"}))["modified"],
        1
    );
    (c, s)
}

/// Issue 13 item 10: a parameter of the wrong type is -32602 naming it, and nothing runs
/// (it used to be read as absent: `"mode": 5` undid both, `"force": "yes"` was false,
/// `"timeout_ms": "5"` waited 60 s, `"anchor": 42` was dropped).
#[test]
fn a_parameter_of_the_wrong_type_is_invalid_params_and_changes_nothing() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    let intact = |c: &mut Client, what: &str| {
        assert_eq!(env.read("a.txt"), "agent", "{what} ran");
        let st = c.ok("status", json!({"session": s}));
        assert_eq!(
            (st["cursor"].as_u64(), st["can_redo"].as_bool()),
            (Some(1), Some(false)),
            "{what}: {st}"
        );
    };
    let e = c.call("undo", json!({"session": s, "mode": 5}));
    assert_invalid_param(&e, "mode");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("got 5"),
        "{e}"
    );
    intact(&mut c, "undo with mode 5");
    let e = c.call("undo", json!({"session": s, "force": "yes"}));
    assert_invalid_param(&e, "force");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("boolean"),
        "{e}"
    );
    intact(&mut c, "undo with force \"yes\"");
    assert_invalid_param(&c.call("redo", json!({"session": s, "force": 1})), "force");
    assert_invalid_param(
        &c.call("navigate", json!({"session": s, "anchor": 42})),
        "anchor",
    );
    intact(&mut c, "navigate to 42");
    assert_invalid_param(&c.call("undo", json!({"session": 1})), "session");
    intact(&mut c, "undo of session 1");

    // A turn: a bad anchor neither begins nor ends it; a bad timeout does not wait.
    assert_invalid_param(
        &c.call("begin_turn", json!({"session": s, "anchor": 42})),
        "anchor",
    );
    assert_eq!(
        c.ok("status", json!({"session": s}))["pending"],
        Value::Null
    );
    c.ok("begin_turn", json!({"session": s, "anchor": "n2"}));
    let t = std::time::Instant::now();
    assert_invalid_param(
        &c.call("wait_before", json!({"session": s, "timeout_ms": "5"})),
        "timeout_ms",
    );
    assert_invalid_param(
        &c.call("wait_before", json!({"session": s, "timeout_ms": -5})),
        "timeout_ms",
    );
    assert_invalid_param(
        &c.call("wait_before", json!({"session": s, "timeout_ms": 2.5})),
        "timeout_ms",
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(
        c.ok("wait_before", json!({"session": s, "timeout_ms": 60000}))["before"],
        "ready"
    );
    env.write("a.txt", "second");
    assert_invalid_param(
        &c.call("end_turn", json!({"session": s, "anchor": 42})),
        "anchor",
    );
    assert_eq!(c.ok("status", json!({"session": s}))["pending"], 2);
    let end = c.ok("end_turn", json!({"session": s, "anchor": "n3"}));
    assert_eq!(
        (end["turn"].as_u64(), end["modified"].as_u64()),
        (Some(2), Some(1))
    );
    assert_invalid_param(
        &c.call("checkpoint", json!({"session": s, "label": true})),
        "label",
    );
    assert_invalid_param(
        &c.call(
            "open",
            json!({"workspace": env.root(), "session": "x", "subagent": "no"}),
        ),
        "subagent",
    );
    assert_invalid_param(&c.call("diff", json!({"session": s, "from": 7})), "from");

    // `null` is as absent; the server kept going throughout.
    let undo = c.ok("undo", json!({"session": s, "mode": null, "force": null}));
    assert_eq!(undo["result"], "restored", "{undo}");
    assert_eq!(env.read("a.txt"), "agent");
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
}

/// An unknown parameter (a typo) is -32602 naming it, and so are `params` that are not an
/// object: nothing runs.
#[test]
fn an_unknown_parameter_or_params_not_an_object_is_invalid_params() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    let e = c.call("undo", json!({"session": s, "forse": true}));
    assert_invalid_param(&e, "forse");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("force"),
        "names the parameters undo takes: {e}"
    );
    assert_eq!(env.read("a.txt"), "agent");
    // A parameter documented for another method only is unknown here too.
    assert_invalid_param(
        &c.call("redo", json!({"session": s, "mode": "files"})),
        "mode",
    );
    assert_invalid_param(
        &c.call("status", json!({"session": s, "verbose": true})),
        "verbose",
    );
    assert_invalid_param(&c.call("shutdown", json!({"now": true})), "now");
    for params in [json!([s]), json!("s1"), json!(3)] {
        assert_invalid_param(&c.call("undo", params), "params");
        assert_eq!(env.read("a.txt"), "agent");
    }
    // A method that takes no parameters also accepts `params` left out or null.
    c.send_line(r#"{"jsonrpc":"2.0","id":100,"method":"status"}"#);
    assert_eq!(c.read_reply()["result"]["cursor"], 1);
    c.send_line(r#"{"jsonrpc":"2.0","id":101,"method":"status","params":null}"#);
    assert_eq!(c.read_reply()["result"]["cursor"], 1);
    // An unknown method is still -32601, whatever its params.
    assert_eq!(c.call("fly", json!([1]))["error"]["code"], -32601);
    assert_eq!(c.call("fly", json!({"x": 1}))["error"]["code"], -32601);
    assert_eq!(c.ok("undo", json!({"session": s}))["result"], "restored");
    assert_eq!(env.read("a.txt"), "original");
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
}

/// Issue 13 item 10: `open` twice with one session id, a turn begun through one handle and
/// ended through each. The turn ends once with one result: the second end says no turn is
/// in progress (it used to record another after-snapshot and answer other counts).
#[test]
fn opening_a_session_twice_shares_it_and_a_turn_ends_once() {
    let env = Env::new();
    env.write("a.txt", "original");
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    let open = |c: &mut Client| {
        c.ok("open", json!({"workspace": root, "session": "twice"}))["session"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (h1, h2) = (open(&mut c), open(&mut c));
    c.ok("begin_turn", json!({"session": h1, "anchor": "n1"}));
    c.ok("wait_before", json!({"session": h1}));
    assert_eq!(c.ok("status", json!({"session": h2}))["pending"], 1);
    env.write("a.txt", "agent");
    let end = c.ok("end_turn", json!({"session": h2, "anchor": "n2"}));
    assert_eq!(
        (
            end["turn"].as_u64(),
            end["state"].as_str(),
            end["modified"].as_u64()
        ),
        (Some(1), Some("complete"), Some(1)),
        "{end}"
    );
    let snapshots = || {
        let o = env.run(common::RETRACE_DUMP, &["-C", &root, "stats", "--json"]);
        let v: Value = serde_json::from_str(common::stdout(&o).trim()).unwrap();
        v["snapshots"].clone()
    };
    let before = snapshots();
    env.write("a.txt", "after the turn");
    for h in [&h1, &h2] {
        let again = c.call("end_turn", json!({"session": h, "anchor": "n3"}));
        if again.get("result").is_some() {
            assert_eq!(
                again["result"], end,
                "a second end_turn answers another summary"
            );
        } else {
            let why = again["error"]["message"].as_str().unwrap_or_default();
            assert!(why.contains("no turn"), "{again}");
        }
    }
    let log = c.ok("log", json!({"session": h1}));
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log}");
    assert_eq!(entries[0]["counts"], json!([0, 1, 0]), "{log}");
    assert_eq!(entries[0]["leaf"], "n2", "{log}");
    assert_eq!(snapshots(), before, "a second end_turn recorded a snapshot");
    // One handle: the same session is the same handle, so every request shares its turn.
    assert_eq!(h1, h2);
    env.write("a.txt", "agent");
    assert_eq!(c.ok("undo", json!({"session": h2}))["result"], "restored");
    assert_eq!(c.ok("status", json!({"session": h1}))["can_redo"], true);
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
}

/// `diff` with `patch` and `paths` (issue 17): unified diffs of the files changed on disk.
#[test]
fn diff_answers_unified_patches_of_the_paths_asked_for() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    env.write("a.txt", "agent\nand more\n");
    env.write("b.txt", "other\n");
    let d = c.ok(
        "diff",
        json!({"session": s, "patch": true, "paths": ["a.txt"]}),
    );
    assert_eq!(
        (d["modified"].clone(), d["added"].clone()),
        (json!(["a.txt"]), json!([]))
    );
    let patches = d["patches"].as_array().unwrap();
    assert_eq!(patches.len(), 1, "{d}");
    let text = patches[0]["text"].as_str().unwrap();
    assert!(
        text.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n-agent\n\\ No newline at end of file\n+agent\n+and more\n"),
        "{text}"
    );
    // Without `patch`, no patches key, as before.
    let plain = c.ok("diff", json!({"session": s}));
    assert!(plain.get("patches").is_none(), "{plain}");
    assert_eq!(plain["added"], json!(["b.txt"]));
}

/// `revert` and `restore_paths` (issue 17): a past turn reverted with later changes kept,
/// a dry run first; some paths of a snapshot restored, the others untouched.
#[test]
fn revert_and_restore_paths_over_serve() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    env.write("b.txt", "one\n");
    c.ok("begin_turn", json!({"session": s, "anchor": "n3"}));
    c.ok("wait_before", json!({"session": s}));
    env.write("b.txt", "two\n");
    c.ok("end_turn", json!({"session": s, "anchor": "n4"}));

    let p = c.ok("revert", json!({"session": s, "turn": 1, "dry_run": true}));
    assert_eq!(p["would_write"], json!(["a.txt"]), "{p}");
    assert_eq!(env.read("a.txt"), "agent");
    let r = c.ok("revert", json!({"session": s, "turn": 1}));
    assert_eq!(r["result"], "restored", "{r}");
    assert_eq!(env.read("a.txt"), "original");
    assert_eq!(env.read("b.txt"), "two\n");
    let log = c.ok("log", json!({"session": s}));
    assert_eq!(log["entries"][0]["kind"], "revert", "{log}");

    // Some paths: b.txt as turn 2 found it; a.txt stays as the revert left it.
    let r = c.ok(
        "restore_paths",
        json!({"session": s, "snapshot": "turn:2:before", "paths": ["b.txt"]}),
    );
    assert_eq!(r["written"], json!(["b.txt"]), "{r}");
    assert_eq!(env.read("b.txt"), "one\n");
    assert_eq!(env.read("a.txt"), "original");
}

/// Issue 20: `retrace serve` hosts the workspace's watcher: it answers from the server's
/// process, vouches for the captures of a turn, and the server still exits at the end of
/// its input when the watcher's socket directory was removed under it (it used to hang,
/// waiting to wake its listener through that path).
#[test]
fn serve_hosts_a_watcher_and_exits_at_eof_even_with_its_socket_gone() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    let spec = env.open().watch_spec();
    let ask = || retrace::watch::status(&spec.runtime_dir, &spec.root, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_mins(2);
    let ready = loop {
        match ask() {
            Some(st) if st.ready => break st,
            _ if Instant::now() > deadline => panic!("serve's watcher never became ready"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert_eq!(
        ready.pid,
        c.child.id(),
        "the watcher runs inside the server"
    );
    c.ok("begin_turn", json!({"session": s, "anchor": "n3"}));
    c.ok("wait_before", json!({"session": s}));
    env.write("a.txt", "agent, again");
    env.write("dir/new.txt", "new");
    let end = c.ok("end_turn", json!({"session": s, "anchor": "n4"}));
    assert_eq!(
        (end["modified"].clone(), end["added"].clone()),
        (json!(1), json!(1))
    );
    let after = ask().expect("the watcher still answers");
    assert!(
        after.vouched > ready.vouched,
        "the turn's end was vouched for: {ready:?} then {after:?}"
    );
    std::fs::remove_dir_all(retrace::watch::socket_dir(&spec.runtime_dir)).unwrap();
    drop(c.stdin.take());
    let deadline = Instant::now() + Duration::from_mins(2);
    while c.child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = c.child.kill();
            panic!("serve did not exit at the end of its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(c.child.wait().unwrap().success());
}

/// `begin_step` / `end_step`: each tool call of a turn is a step, so two sessions of one
/// server whose turns overlap each undo exactly their own file; the shell step's capture
/// before it keeps a user's edit that the command then deletes; a call outside every turn,
/// a subagent's and an end of no running step record nothing; a missing `tool` is -32602.
#[test]
fn tool_calls_are_steps_over_serve_and_keep_parallel_sessions_apart() {
    let env = Env::new();
    env.write("notes.txt", "old\n");
    let mut c = Client::start(&env);
    let root = env.root().display().to_string();
    let open = |c: &mut Client, id: &str, subagent: bool| {
        c.ok(
            "open",
            json!({"workspace": root, "session": id, "subagent": subagent}),
        )["session"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (a, b, sub) = (
        open(&mut c, "serve-a", false),
        open(&mut c, "serve-b", false),
        open(&mut c, "serve-a", true),
    );
    let outside = c.ok(
        "begin_step",
        json!({"session": a, "tool": "bash", "summary": "ls"}),
    );
    assert_eq!(outside, json!({"recorded": false}));
    assert_invalid_param(&c.call("begin_step", json!({"session": a})), "tool");
    assert_invalid_param(
        &c.call(
            "begin_step",
            json!({"session": a, "tool": "edit", "files": "a.txt"}),
        ),
        "files",
    );
    for (h, anchor) in [(&a, "a1"), (&b, "b1")] {
        c.ok("begin_turn", json!({"session": h, "anchor": anchor}));
        c.ok("wait_before", json!({"session": h}));
    }
    let began = c.ok(
        "begin_step",
        json!({"session": a, "tool": "write", "call": "w1", "summary": "a.txt",
            "files": [env.path("a.txt")]}),
    );
    assert_eq!(
        (
            &began["recorded"],
            &began["turn"],
            &began["step"],
            &began["snapshot"]
        ),
        (&json!(true), &json!(1), &json!(1), &Value::Null),
        "{began}"
    );
    env.write("a.txt", "by a\n");
    assert_eq!(
        c.ok("end_step", json!({"session": a, "call": "w1"}))["recorded"],
        true
    );
    // A subagent's tool calls are its parent's: reported on its own handle, nothing.
    assert_eq!(
        c.ok("begin_step", json!({"session": sub, "tool": "bash"}))["recorded"],
        false
    );
    env.write("notes.txt", "the user's edit\n");
    let command = "echo by b > b.txt && rm notes.txt";
    let began = c.ok(
        "begin_step",
        json!({"session": b, "tool": "bash", "call": "s1", "summary": command}),
    );
    let before = began["snapshot"]
        .as_str()
        .expect("a capture before rm")
        .to_string();
    env.write("b.txt", "by b\n");
    std::fs::remove_file(env.path("notes.txt")).unwrap();
    let ended = c.ok("end_step", json!({"session": b, "call": "s1"}));
    assert!(ended["snapshot"].is_string(), "{ended}");
    assert_eq!(
        c.ok("end_step", json!({"session": b, "call": "s1"})),
        json!({"recorded": false})
    );
    for (h, anchor) in [(&a, "a2"), (&b, "b2")] {
        c.ok("end_turn", json!({"session": h, "anchor": anchor}));
    }
    let undone = c.ok("undo", json!({"session": a, "mode": "files"}));
    assert_eq!(undone["result"], "restored", "{undone}");
    assert!(!env.path("a.txt").exists(), "{undone}");
    assert_eq!(env.read("b.txt"), "by b\n", "{undone}");
    let undone = c.ok("undo", json!({"session": b, "mode": "files"}));
    assert_eq!(undone["result"], "restored", "{undone}");
    assert!(!env.path("b.txt").exists(), "{undone}");
    let restored = c.ok(
        "restore_paths",
        json!({"session": b, "snapshot": before, "paths": ["notes.txt"], "force": true}),
    );
    assert_eq!(env.read("notes.txt"), "the user's edit\n", "{restored}");
    assert_eq!(c.ok("shutdown", json!({}))["ok"], true);
    assert!(c.child.wait().unwrap().success());
}

/// One step of a turn reverted over serve (`revert` with `step`), and the step methods
/// answer what `retrace step begin --json` answers (`recorded`, `turn`, `step`, `snapshot`).
#[test]
fn one_step_is_reverted_alone_over_serve() {
    let env = Env::new();
    let (mut c, s) = one_turn_done(&env);
    c.ok("begin_turn", json!({"session": s, "anchor": "n3"}));
    c.ok("wait_before", json!({"session": s}));
    let begun = c.ok(
        "begin_step",
        json!({"session": s, "tool": "Write", "files": ["one.txt"]}),
    );
    env.write("one.txt", "first\n");
    c.ok("end_step", json!({"session": s}));
    c.ok(
        "begin_step",
        json!({"session": s, "tool": "Write", "files": ["two.txt"]}),
    );
    env.write("two.txt", "second\n");
    let ended = c.ok("end_step", json!({"session": s}));
    c.ok("end_turn", json!({"session": s, "anchor": "n4"}));
    assert_eq!(
        (&begun["recorded"], &begun["turn"], &begun["step"]),
        (&json!(true), &json!(2), &json!(1)),
        "{begun}"
    );
    assert_eq!((&ended["turn"], &ended["step"]), (&json!(2), &json!(2)));
    let p = c.ok(
        "revert",
        json!({"session": s, "turn": 2, "step": 1, "dry_run": true}),
    );
    assert_eq!(
        (&p["step"], &p["would_delete"]),
        (&json!(1), &json!(["one.txt"])),
        "{p}"
    );
    let r = c.ok("revert", json!({"session": s, "turn": 2, "step": 1}));
    assert_eq!(r["result"], "restored", "{r}");
    assert!(!env.path("one.txt").exists());
    assert_eq!(env.read("two.txt"), "second\n");
    assert_eq!(env.read("a.txt"), "agent");

    // The CLI's JSON carries the same fields.
    let o = env.run(RETRACE, &["--session", "cli", "turn", "begin", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = env.run(
        RETRACE,
        &[
            "--session",
            "cli",
            "step",
            "begin",
            "--tool",
            "Write",
            "--file",
            "c.txt",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in ["recorded", "turn", "step", "snapshot"] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert_eq!(
        (&v["ok"], &v["recorded"]),
        (&json!(true), &json!(true)),
        "{v}"
    );
}
