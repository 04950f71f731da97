//! End to end with the real Claude Code CLI (the npm package `@anthropic-ai/claude-code`,
//! installed by `tests/e2e/install-clients.sh` into `target/e2e/`), its hooks installed by
//! `retrace install claude-code`, talking to a fake Anthropic Messages server on 127.0.0.1
//! that streams canned tool calls.
//!
//! Proves: a turn that writes a file with the Write tool and a turn that changes a file
//! through Bash are both undone by typing `/undo`, `/redo` brings them back, and the model
//! server never saw a request for `/undo` or `/redo`.
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::fake_http::FakeHttp;
use common::{Env, RETRACE, missing_cli, output_within, stderr, stdout, succeeded};
use serde_json::{Value, json};

fn claude_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RETRACE_E2E_CLAUDE") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    p.exists().then_some(p)
}

/// The text of the last user message that is a prompt rather than tool results, or `None`
/// when the last user message carries tool results (the model's next answer ends the turn).
fn last_prompt(request: &Value) -> Option<String> {
    // Claude Code's requests can end with a system-role entry: find the last user message.
    let last_user = request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?;
    match &last_user["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            if parts.iter().any(|p| p["type"] == "tool_result") {
                return None;
            }
            Some(
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
        _ => None,
    }
}

/// A fake Anthropic Messages API answer: a prompt naming `WRITE-HELLO` or `BASH-EDIT` gets
/// that tool call, tool results get a final text.
fn messages_answer(request: &Value, ws: &Path) -> String {
    let tool = match last_prompt(request).as_deref() {
        Some(p) if p.contains("WRITE-HELLO") => Some((
            "Write",
            json!({"file_path": ws.join("hello.txt"), "content": "hello from claude\n"}),
        )),
        Some(p) if p.contains("BASH-EDIT") => Some((
            "Bash",
            json!({"command": "printf 'edited by bash\\n' >> notes.txt",
                "description": "Append a line to notes.txt"}),
        )),
        _ => None,
    };
    let mut sse = String::new();
    let mut event = |name: &str, data: Value| {
        sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
            "role": "assistant", "model": "claude-fake", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    let stop_reason = if let Some((name, input)) = tool {
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": "toolu_fake", "name": name, "input": {}}}),
        );
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "input_json_delta", "partial_json": input.to_string()}}),
        );
        "tool_use"
    } else {
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "text", "text": ""}}),
        );
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "text_delta", "text": "Done."}}),
        );
        "end_turn"
    };
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
            "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    sse
}

/// Runs `claude -p` in the workspace, killed after two minutes.
fn claude(env: &Env, bin: &Path, model: &FakeHttp, args: &[&str]) -> Output {
    let mut command = Command::new(bin);
    command
        .args([
            "-p",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash",
        ])
        .args(args)
        .current_dir(env.root())
        .env("HOME", env.home.path())
        .env("RETRACE_HOME", env.home.path())
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        )
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env_remove("ANTHROPIC_AUTH_TOKEN");
    let o = output_within(&mut command, Duration::from_secs(120));
    succeeded(o, &format!("claude {args:?}"))
}

#[test]
fn real_claude_code_undo_and_redo_restore_write_and_bash_changes() {
    let bin = claude_binary();
    if missing_cli(bin.is_some(), "Claude Code") {
        return;
    }
    let bin = bin.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let root = env.root().display().to_string();
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ws = env.root().to_path_buf();
    let model = FakeHttp::start(move |request| messages_answer(request, &ws));
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e0";

    // Turn 1 writes a file with the Write tool; turn 2 changes another through Bash.
    claude(
        &env,
        &bin,
        &model,
        &["--session-id", sid, "please WRITE-HELLO"],
    );
    assert_eq!(env.read("hello.txt"), "hello from claude\n");
    claude(&env, &bin, &model, &["--resume", sid, "please BASH-EDIT"]);
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    let o = env.run(RETRACE, &["log", "--session", sid]);
    assert!(
        stdout(&o).contains("+1 ~0 -0  please WRITE-HELLO")
            && stdout(&o).contains("+0 ~1 -0  please BASH-EDIT"),
        "{}",
        stdout(&o)
    );
    let requests = model.requests().len();
    assert!(requests >= 4, "two tool rounds per turn: {requests}");

    // /undo twice: the Bash change, then the written file.
    let o = claude(&env, &bin, &model, &["--resume", sid, "/undo"]);
    assert!(
        stdout(&o).contains("retrace: turn 2: restored") && stdout(&o).contains("/rewind"),
        "{}",
        stdout(&o)
    );
    assert_eq!(env.read("notes.txt"), "original\n");
    assert_eq!(env.read("hello.txt"), "hello from claude\n");
    claude(&env, &bin, &model, &["--resume", sid, "/undo"]);
    assert!(!env.path("hello.txt").exists());
    // /redo twice brings both back.
    claude(&env, &bin, &model, &["--resume", sid, "/redo"]);
    assert_eq!(env.read("hello.txt"), "hello from claude\n");
    assert_eq!(env.read("notes.txt"), "original\n");
    let o = claude(&env, &bin, &model, &["--resume", sid, "/redo"]);
    assert!(stdout(&o).contains("re-applied"), "{}", stdout(&o));
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");

    // The model server never saw the commands.
    assert_eq!(
        model.requests().len(),
        requests,
        "a slash command reached the model"
    );
    let prompts: Vec<String> = model.requests().iter().filter_map(last_prompt).collect();
    assert!(
        prompts
            .iter()
            .all(|p| !p.contains("/undo") && !p.contains("/redo")),
        "{prompts:?}"
    );
}
