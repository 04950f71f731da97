//! End to end with the real GitHub Copilot CLI (npm `@github/copilot` and its platform
//! package, installed by `tests/e2e/install-clients.sh` into `target/e2e/`), its hooks
//! installed by `retrace install copilot` (`.github/hooks/retrace.json`), with a model of
//! one's own (`COPILOT_PROVIDER_BASE_URL`: a fake OpenAI-compatible server on 127.0.0.1;
//! no GitHub login, `COPILOT_OFFLINE`), the folder trusted and every tool allowed
//! (`COPILOT_ALLOW_ALL`).
//!
//! Proves: a prompt of two tool calls (a file created, a shell command) is one turn of two
//! steps, paired without a call id (Copilot's hooks send none); a failed call
//! (`PostToolUseFailure`) ends its step; in the session continued with `--continue`,
//! `retrace undo` typed as the prompt takes the second turn back exactly (the hook blocks
//! the prompt: no model call), and `retrace redo` re-applies it.
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::fake_http::{FakeHttp, chat_sse, next_planned_call};
use crate::common::{
    Env, RETRACE, agent_session, missing_cli, output_within, prompts, stderr, stdout,
    step_summaries,
};
use serde_json::{Value, json};

/// Copilot's launcher, when installed with its platform package.
fn copilot_cli() -> Option<PathBuf> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e/copilot/node_modules");
    let launcher = modules.join("@github/copilot/npm-loader.js");
    (launcher.exists() && modules.join("@github/copilot-linux-x64").exists()).then_some(launcher)
}

/// The tool calls a prompt's marker asks for, in order: each answered once the previous
/// one's result is back, then a final text.
fn planned_calls(prompt: &str) -> Vec<(&'static str, Value)> {
    if prompt.contains("FIRST-TURN") {
        vec![
            (
                "create",
                json!({"path": "hello.txt", "file_text": "hello from copilot\n"}),
            ),
            (
                "bash",
                json!({"command": "printf 'first\\n' >> notes.txt", "description": "append"}),
            ),
        ]
    } else if prompt.contains("SECOND-TURN") {
        vec![
            // Fails: the file exists.
            (
                "create",
                json!({"path": "hello.txt", "file_text": "never\n"}),
            ),
            (
                "bash",
                json!({"command": "printf 'second\\n' >> notes.txt && rm hello.txt",
                    "description": "append and remove"}),
            ),
        ]
    } else {
        Vec::new()
    }
}

/// The fake chat-completions answer (Copilot streams): the next call the prompt plans
/// after the tool results already in the conversation, else a final text.
fn chat_answer(request: &Value, calls: &AtomicU64) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let call = next_planned_call(&messages, planned_calls);
    let id = format!("call_{}", calls.fetch_add(1, Ordering::Relaxed));
    chat_sse(
        &request["model"],
        call.as_ref().map(|(n, a)| (*n, a, id.as_str())),
        "Done.",
    )
}

/// Runs `copilot -p` in the workspace (continuing the latest session when `resume`),
/// killed after two minutes.
fn copilot(env: &Env, launcher: &Path, port: u16, resume: bool, prompt: &str) -> Output {
    let mut command = Command::new("node");
    command.arg(launcher);
    if resume {
        command.arg("--continue");
    }
    let home = env.home.path();
    // Its first run unpacks about 235 MB: once for every test run, beside the install.
    let cache = launcher.ancestors().nth(4).unwrap().join("cache");
    command
        .args(["-p", prompt])
        .current_dir(env.root())
        .env("HOME", home)
        .env("RETRACE_HOME", home)
        .env("COPILOT_HOME", home.join(".copilot"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", cache)
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{port}/v1"),
        )
        .env("COPILOT_PROVIDER_TYPE", "openai")
        .env("COPILOT_PROVIDER_API_KEY", "dummy")
        .env("COPILOT_MODEL", "gpt-4.1")
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        // Trusts the folder (project hooks load only in a trusted one) and allows every tool.
        .env("COPILOT_ALLOW_ALL", "true")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_TOKEN")
        .env_remove("COPILOT_GITHUB_TOKEN");
    output_within(&mut command, Duration::from_secs(120))
}

#[test]
fn real_copilot_turns_steps_undo_and_redo() {
    let launcher = copilot_cli();
    if missing_cli(launcher.is_some(), "GitHub Copilot CLI") {
        return;
    }
    let launcher = launcher.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let root = env.root().display().to_string();
    let calls = AtomicU64::new(0);
    let model = FakeHttp::start(move |request| chat_answer(request, &calls));
    let o = env.run(RETRACE, &["-C", &root, "install", "copilot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let hooks: Value = serde_json::from_str(&env.read(".github/hooks/retrace.json")).unwrap();
    assert_eq!(hooks["version"], 1, "{hooks}");
    let ran = |resume: bool, prompt: &str| {
        let o = copilot(&env, &launcher, model.port, resume, prompt);
        assert!(
            o.status.success(),
            "{prompt}: {}\n{}",
            stdout(&o),
            stderr(&o)
        );
    };

    ran(false, "please FIRST-TURN");
    assert_eq!(env.read("hello.txt"), "hello from copilot\n");
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    ran(true, "now SECOND-TURN");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());
    let requests = model.requests().len();

    let ws = env.open();
    let id = agent_session(&ws, "copilot");
    let prompts = prompts(&ws, &id);
    assert!(
        prompts.len() == 2
            && prompts[0]
                .as_deref()
                .is_some_and(|p| p.contains("now SECOND-TURN"))
            && prompts[1]
                .as_deref()
                .is_some_and(|p| p.contains("please FIRST-TURN")),
        "one turn per prompt: {prompts:?}"
    );
    let steps = |turn| step_summaries(&ws, &id, turn);
    let own = |s: &str| s.to_string();
    assert_eq!(
        steps(1),
        [
            (own("Write"), own("hello.txt"), true),
            (own("Bash"), own("printf 'first\\n' >> notes.txt"), true),
        ]
    );
    assert_eq!(
        steps(2),
        [
            // Ended by PostToolUseFailure.
            (own("Write"), own("hello.txt"), true),
            (
                own("Bash"),
                own("printf 'second\\n' >> notes.txt && rm hello.txt"),
                true
            ),
        ]
    );
    drop(ws);

    // A blocked prompt makes Copilot exit 1, saying the hook's reason.
    let o = copilot(&env, &launcher, model.port, true, "retrace undo");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("retrace: turn 2: restored"), "{said}");
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    assert_eq!(env.read("hello.txt"), "hello from copilot\n");
    let o = copilot(&env, &launcher, model.port, true, "retrace redo");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("re-applied"), "{said}");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());
    assert_eq!(
        model.requests().len(),
        requests,
        "a command reached the model"
    );
}
