//! Sessions by name, as a person meets them: `retrace sessions`, `--session NAME` or a key
//! prefix, the session picked (or the choice refused) without `--session`, the workspace
//! views beside a session's, and a second `turn begin` over an open turn.

use crate::common::{Env, RETRACE, stderr, stdout};
use retrace::history::db::SessionKey;
use serde_json::Value;

fn run(env: &Env, args: &[&str]) -> (i32, String, String) {
    let o = env.run(RETRACE, args);
    (o.status.code().unwrap_or(-1), stdout(&o), stderr(&o))
}

/// One complete turn of session `name` that writes `file`.
fn turn(env: &Env, name: &str, file: &str) {
    let (code, _, err) = run(env, &["--session", name, "turn", "begin", "--prompt", file]);
    assert_eq!(code, 0, "{err}");
    env.write(file, format!("written by {name}\n"));
    let (code, _, err) = run(env, &["--session", name, "turn", "end"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sessions_are_listed_by_name_and_named_back_by_name_or_key_prefix() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    turn(&env, "my-chat", "one.txt");
    turn(&env, "other-chat", "two.txt");
    turn(&env, "other-chat", "three.txt");

    let (code, out, err) = run(&env, &["sessions"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("LAST ACTIVE"), "{out}");
    // 80 columns hold the table with a name of 20 characters; the name comes last, whole.
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{out}");
    // Most recently used first, with turn counts.
    assert!(lines[1].ends_with("  other-chat"), "{out}");
    assert!(lines[2].ends_with("  my-chat"), "{out}");
    let (code, out, _) = run(&env, &["sessions", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessions"][0]["name"], "other-chat");
    assert_eq!(v["sessions"][0]["turns"], 2);
    assert_eq!(v["sessions"][1]["name"], "my-chat");
    assert_eq!(v["sessions"][1]["pending"], Value::Null);

    // `status` names the session, and the key it shows is accepted back.
    let (code, out, err) = run(&env, &["--session", "my-chat", "status"]);
    assert_eq!(code, 0, "{err}");
    let short = SessionKey::of("my-chat").short();
    assert!(out.contains(&format!("my-chat ({short})")), "{out}");
    let (code, out, err) = run(&env, &["--session", &short[..6], "log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session"]["name"], "my-chat");
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);

    // A unique prefix of a name names the session, as one of its key does.
    let (code, out, err) = run(&env, &["--session", "my-c", "log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session"]["name"], "my-chat");

    // An unknown name is a usage error that lists the sessions there, for every command
    // that does not begin a session.
    for args in [
        &["undo"][..],
        &["redo"],
        &["log"],
        &["status"],
        &["turn", "end"],
        &["show", "turn:1"],
    ] {
        let mut all = vec!["--session", "my-chta"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&env, &all);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("no session \"my-chta\"")
                && err.contains("my-chat")
                && err.contains("other-chat"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_key_prefix_two_sessions_share_is_refused_with_both_listed() {
    // Two names whose keys start with the same 4 hex digits.
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0..)
        .find_map(|i| {
            let name = format!("s{i}");
            let prefix = SessionKey::of(&name).short()[..4].to_string();
            seen.insert(prefix, name.clone()).map(|other| (other, name))
        })
        .unwrap();
    let env = Env::new();
    turn(&env, &a, "a.txt");
    turn(&env, &b, "b.txt");
    let prefix = &SessionKey::of(&a).short()[..4];
    let (code, _, err) = run(&env, &["--session", prefix, "log"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("several") && err.contains(&a) && err.contains(&b),
        "{err}"
    );
}

#[test]
fn without_a_session_undo_uses_the_only_one_with_history() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    // No session at all: a refusal that says why, not "nothing to undo" of a hidden one.
    let (code, _, err) = run(&env, &["undo"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no session"), "{err}");
    let (code, out, _) = run(&env, &["undo", "--json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["result"], "refused");

    turn(&env, "chat-1", "new.txt");
    let (code, out, err) = run(&env, &["undo"]);
    assert_eq!(code, 0, "{out}{err}");
    // The only session with history goes without saying (only a guess is said).
    assert!(!err.contains("session chat-1"), "{err}");
    assert!(!env.path("new.txt").exists());
    let (code, _, err) = run(&env, &["redo"]);
    assert_eq!(code, 0, "{err}");
    assert!(env.path("new.txt").exists());
    let (code, out, err) = run(&env, &["navigate", "turn:1:before"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!env.path("new.txt").exists());
    // A checkpoint lands in the same session, not a hidden default one.
    let (code, _, err) = run(&env, &["checkpoint", "mine"]);
    assert_eq!(code, 0, "{err}");
    let (code, log, err) = run(&env, &["--session", "chat-1", "log"]);
    assert_eq!(code, 0, "{err}");
    assert!(log.contains("mine"), "{log}");

    // Two recent sessions with history: no guessing, both listed.
    turn(&env, "chat-2", "other.txt");
    let (code, _, err) = run(&env, &["undo"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("chat-1") && err.contains("chat-2"), "{err}");
    assert!(env.path("other.txt").exists());
}

#[test]
fn a_sessions_status_and_log_keep_the_workspace_views() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    turn(&env, "chat", "a.txt");
    env.write("a.txt", "my own edit\n");
    // undo --force keeps a safety snapshot of the edit: reachable with a session set.
    let o = env
        .command(RETRACE, &["undo", "--force"])
        .env("RETRACE_SESSION", "chat")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stdout(&o);
    let safety = said
        .split("kept in snapshot ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();
    let with = |args: &[&str]| {
        let o = env
            .command(RETRACE, args)
            .env("RETRACE_SESSION", "chat")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    assert!(with(&["log", "--snapshots"]).contains(&safety));
    assert!(with(&["log"]).contains("retrace log --snapshots"));
    env.write("b.txt", "unsnapshotted\n");
    let status = with(&["status"]);
    assert!(status.contains("session    chat"), "{status}");
    assert!(status.contains("workspace  "), "{status}");
    assert!(status.contains("b.txt"), "{status}");
    let v: Value = serde_json::from_str(&with(&["status", "--json"])).unwrap();
    assert_eq!(v["session"]["name"], "chat");
    assert_eq!(v["workspace"]["changed"][0], "b.txt", "{v}");
}

#[test]
fn a_second_turn_begin_over_an_open_turn_warns() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let (code, _, err) = run(&env, &["--session", "s", "turn", "begin"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&env, &["--session", "s", "turn", "begin"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("turn 1 was still open when turn 2 began"),
        "{err}"
    );
    let (code, _, err) = run(&env, &["--session", "s", "turn", "end"]);
    assert_eq!(code, 0, "{err}");
    // A begin with no turn open says nothing of the kind.
    let (_, _, err) = run(&env, &["--session", "s", "turn", "begin"]);
    assert!(!err.contains("still open"), "{err}");
}

#[test]
fn the_agent_that_opened_a_session_is_kept_with_its_name() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("pi-7f3a").for_agent("pi");
    s.checkpoint(Some("x".into())).unwrap();
    let all = ws.sessions().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].name.as_deref(), Some("pi-7f3a"));
    assert_eq!(all[0].agent.as_deref(), Some("pi"));
    assert_eq!(all[0].checkpoints, 1);
    // A later handle without an agent keeps the one recorded.
    ws.session("pi-7f3a").checkpoint(None).unwrap();
    assert_eq!(ws.sessions().unwrap()[0].agent.as_deref(), Some("pi"));
}

#[test]
fn serve_and_hooks_keep_the_agent_with_the_session() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let root = env.root().display().to_string();
    let open = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "open",
        "params": {"workspace": root, "session": "pi-7f3a", "agent": "pi"}});
    let checkpoint = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "checkpoint",
        "params": {"label": "x"}});
    let input = format!("{open}\n{checkpoint}\n");
    let o = env.run_with_input(RETRACE, &["serve"], input.as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("error"), "{}", stdout(&o));
    // A hook session names its agent too.
    let event = serde_json::json!({"hook_event_name": "UserPromptSubmit",
        "session_id": "claude-1", "cwd": root, "prompt": "hi"});
    let o = env.run_with_input(
        RETRACE,
        &["hook", "claude-code"],
        event.to_string().as_bytes(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (_, out, _) = run(&env, &["sessions", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let agent = |name: &str| {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["agent"].clone())
    };
    assert_eq!(agent("pi-7f3a"), Some(Value::from("pi")), "{v}");
    assert_eq!(agent("claude-1"), Some(Value::from("claude-code")), "{v}");
}

#[test]
fn odd_session_names_keep_the_sessions_table_one_row_each() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let long = "x".repeat(300);
    for name in ["line\nbreak", "\u{1b}[31mred", long.as_str()] {
        let (code, _, err) = run(&env, &["--session", name, "checkpoint"]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = run(&env, &["sessions"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    // What a terminal would act on is shown escaped.
    assert!(
        out.contains(r"line\nbreak") && out.contains(r"\x1b[31mred"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "{out}");
    assert!(out.lines().all(|l| l.chars().count() < 140), "{out}");
}
