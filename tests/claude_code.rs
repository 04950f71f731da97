//! Claude Code's hooks, fed the JSON objects Claude Code sends (one per hook run, on stdin),
//! through the real `retrace hook claude-code`; and the installer's merge into
//! `.claude/settings.json`.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{Env, RETRACE, stderr, stdout};
use serde_json::{Value, json};

fn hook(env: &Env, event: &Value) -> std::process::Output {
    let mut child = env
        .command(RETRACE, &["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn prompt(env: &Env, text: &str) -> std::process::Output {
    hook(
        env,
        &json!({"session_id": "c0ffee", "transcript_path": "/tmp/t.jsonl",
            "cwd": env.root(), "hook_event_name": "UserPromptSubmit", "prompt": text}),
    )
}

fn decision(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn prompts_are_turns_and_slash_commands_are_answered_by_the_hook() {
    let env = Env::new();
    env.write("src/app.py", "print('v1')\n");
    // A prompt begins a turn and lets it through (no output).
    let o = prompt(&env, "add a greeting and bump the version");
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    // The agent writes a file with its Write tool and changes another through Bash.
    env.write("hello.txt", "hello\n");
    env.write("src/app.py", "print('v2')\n");
    let o = hook(
        &env,
        &json!({"session_id": "c0ffee", "cwd": env.root(), "hook_event_name": "Stop",
            "stop_hook_active": false}),
    );
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );

    // /undo: handled by the hook itself, blocked from reaching the model.
    let d = decision(&prompt(&env, "/undo"));
    assert_eq!(d["decision"], "block");
    let reason = d["reason"].as_str().unwrap();
    assert!(
        reason.contains("restored") && reason.contains("/rewind"),
        "{reason}"
    );
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("src/app.py"), "print('v1')\n");
    // /redo brings both back.
    let d = decision(&prompt(&env, "/redo"));
    assert!(d["reason"].as_str().unwrap().contains("restored"), "{d}");
    assert_eq!(env.read("hello.txt"), "hello\n");
    assert_eq!(env.read("src/app.py"), "print('v2')\n");
    // /checkpoint with a label, and /retrace-log.
    let d = decision(&prompt(&env, "/checkpoint before refactor"));
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("checkpoint 1 (before refactor)"),
        "{d}"
    );
    let d = decision(&prompt(&env, "/retrace-log"));
    assert!(
        d["reason"].as_str().unwrap().contains("turn 1: +1 ~1 -0"),
        "{d}"
    );
    // Nothing to redo is said, not an error.
    let d = decision(&prompt(&env, "/redo"));
    assert!(
        d["reason"].as_str().unwrap().contains("nothing to redo"),
        "{d}"
    );
}

#[test]
fn a_hook_never_breaks_the_agent() {
    let env = Env::new();
    for input in [
        json!("not an object"),
        json!({"hook_event_name": "UserPromptSubmit"}),
        json!({"session_id": "x", "cwd": "/no/such/dir", "hook_event_name": "Stop"}),
    ] {
        let o = hook(&env, &input);
        assert!(o.status.success(), "{input}: exit {:?}", o.status.code());
        assert!(stdout(&o).is_empty(), "{input}: {}", stdout(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{input}: {}", stderr(&o));
    }
    // Garbage on stdin, and an event it does not handle.
    let mut child = env
        .command(RETRACE, &["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{{{").unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    let o = hook(
        &env,
        &json!({"session_id": "x", "cwd": env.root(), "hook_event_name": "SubagentStop"}),
    );
    assert!(o.status.success() && stdout(&o).is_empty() && stderr(&o).is_empty());
}

#[test]
fn install_merges_idempotently_and_uninstall_removes_exactly_what_it_added() {
    let env = Env::new();
    let settings = env.path(".claude/settings.json");
    let theirs = json!({
        "model": "opus",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]}
    });
    env.write(
        ".claude/settings.json",
        serde_json::to_string_pretty(&theirs).unwrap(),
    );
    let root = env.root().display().to_string();
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    for event in ["UserPromptSubmit", "Stop", "SessionStart"] {
        let cmds: Vec<String> = v["hooks"][event]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap().iter())
            .map(|h| h["command"].as_str().unwrap().to_string())
            .collect();
        assert!(
            cmds.iter().any(|c| c.ends_with("hook claude-code")),
            "{event}: {cmds:?}"
        );
    }
    assert_eq!(
        v["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    assert_eq!(v["model"], "opus");
    // Again: nothing changes.
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(stdout(&o).contains("nothing to change"), "{}", stdout(&o));
    let again: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(again, v);
    // Uninstall: back to exactly what the user had.
    let o = env.run(RETRACE, &["-C", &root, "uninstall", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(back, theirs);
}
