//! End to end with the real Gemini CLI (npm `@google/gemini-cli`, installed by
//! `tests/e2e/install-clients.sh` into `target/e2e/`) on the machine's Node, its hooks and
//! commands installed by `retrace install gemini`, against a fake Gemini API server on
//! 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`) that answers with a canned `run_shell_command`.
//!
//! Proves: a turn that changes a file through the shell is undone by `/undo` (the installed
//! command file, whose prompt the `BeforeAgent` hook denies) and redone by `/redo`, in
//! sessions resumed with `--resume latest`, and the model server never saw those prompts;
//! the shell call was a step of its turn (`BeforeTool` / `AfterTool`).
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::fake_http::FakeHttp;
use crate::common::{Env, RETRACE, missing_cli, output_within, stderr, stdout};
use serde_json::{Value, json};

fn gemini_script() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/gemini/node_modules/@google/gemini-cli/bundle/gemini.js");
    p.exists().then_some(p)
}

/// The fake Gemini answer: the model router's choice for `generateContent`; for the
/// streamed call, the shell command a prompt names, or a final text after its result.
fn gemini_answer(request: &Value, streamed: bool) -> String {
    let usage = json!({"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2});
    if !streamed {
        let choice = json!({"reasoning": "simple", "model_choice": "flash"}).to_string();
        return json!({"candidates": [{"content": {"role": "model", "parts": [{"text": choice}]},
            "finishReason": "STOP"}], "usageMetadata": usage})
        .to_string();
    }
    let last = request["contents"]
        .as_array()
        .and_then(|c| c.last())
        .cloned()
        .unwrap_or(Value::Null);
    let answered = last["parts"]
        .as_array()
        .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()));
    let parts = if !answered && last.to_string().contains("SHELL-EDIT") {
        json!([{"functionCall": {"name": "run_shell_command", "args":
            {"command": "printf 'edited by gemini\\n' >> notes.txt", "description": "edit"}}}])
    } else {
        json!([{"text": "Done."}])
    };
    let chunk = json!({"candidates": [{"content": {"role": "model", "parts": parts},
        "finishReason": "STOP", "index": 0}], "usageMetadata": usage});
    format!("data: {chunk}\n\n")
}

/// Runs `gemini -p` in the workspace (resuming the latest session when `resume`), killed
/// after two minutes.
fn gemini(env: &Env, script: &Path, port: u16, resume: bool, prompt: &str) -> Output {
    let mut command = Command::new("node");
    command.arg(script);
    if resume {
        command.args(["--resume", "latest"]);
    }
    command
        .args(["--approval-mode", "yolo", "-p", prompt])
        .current_dir(env.root())
        .env("HOME", env.home.path())
        .env("RETRACE_HOME", env.home.path())
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    output_within(&mut command, Duration::from_secs(120))
}

#[test]
fn real_gemini_undo_and_redo_restore_shell_changes() {
    let script = gemini_script();
    if missing_cli(script.is_some(), "Gemini CLI") {
        return;
    }
    let script = script.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    // The user's settings: an API key login (the key and the server come from the env).
    let user = env.home.path().join(".gemini");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )
    .unwrap();
    // The one model call that is not streamed is the router's.
    let model = FakeHttp::start_with_path(|path, request| {
        gemini_answer(request, path.contains("streamGenerateContent"))
    });
    let root = env.root().display().to_string();
    let o = env.run(RETRACE, &["-C", &root, "install", "gemini"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let o = gemini(&env, &script, model.port, false, "please SHELL-EDIT");
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(env.read("notes.txt"), "original\nedited by gemini\n");
    let requests = model.requests().len();
    // BeforeTool and AfterTool made the shell call a step of the turn.
    let ws = env.open();
    let session = ws
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.agent.as_deref() == Some("gemini"))
        .expect("Gemini's session");
    // `name` is the agent's session id (`id` is retrace's key).
    let id = session.name.expect("the agent's session id");
    let steps = ws.session(&id).steps(1).unwrap();
    let seen: Vec<_> = steps
        .iter()
        .map(|s| (s.tool.as_str(), s.summary.as_str(), s.ended_ms.is_some()))
        .collect();
    assert_eq!(
        seen,
        [(
            "run_shell_command",
            "printf 'edited by gemini\\n' >> notes.txt",
            true
        )]
    );
    drop(ws);

    let o = gemini(&env, &script, model.port, true, "/undo");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("retrace: turn 1: restored"), "{said}");
    assert_eq!(env.read("notes.txt"), "original\n");
    let o = gemini(&env, &script, model.port, true, "/redo");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("re-applied"), "{said}");
    assert_eq!(env.read("notes.txt"), "original\nedited by gemini\n");

    assert_eq!(
        model.requests().len(),
        requests,
        "a command reached the model"
    );
}
