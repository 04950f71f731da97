//! End to end with the real Codex CLI (npm `@openai/codex`, installed by
//! `tests/e2e/install-clients.sh` into `target/e2e/`), its hooks installed by `retrace
//! install codex --user` into `CODEX_HOME`, against a fake OpenAI Responses server on
//! 127.0.0.1 that answers with canned `exec_command` calls.
//!
//! `codex exec` runs only hooks the user has trusted (`/hooks` in the TUI);
//! `--dangerously-bypass-hook-trust` stands in for that review here.
//!
//! Proves: two turns that change files through the shell are undone by the prompts
//! `retrace undo` and `/undo` and redone by `retrace redo`, in sessions resumed with
//! `codex exec resume --last`, and the model server never saw those prompts; each shell
//! call was a step of its turn (PreToolUse / PostToolUse).
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::fake_http::FakeHttp;
use crate::common::{Env, RETRACE, missing_cli, output_within, stderr, stdout, succeeded};
use serde_json::{Value, json};

fn codex_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "target/e2e/codex/node_modules/@openai/codex-linux-x64/vendor/\
         x86_64-unknown-linux-musl/bin/codex",
    );
    p.exists().then_some(p)
}

/// The fake Responses answer: the shell command a prompt names, then a final message once
/// the command's output comes back.
fn responses_answer(request: &Value) -> String {
    let last = request["input"]
        .as_array()
        .and_then(|i| i.last())
        .cloned()
        .unwrap_or(Value::Null);
    let text = last.to_string();
    let command = if last["type"] != "message" {
        None
    } else if text.contains("SHELL-EDIT") {
        Some("printf 'edited by codex\\n' >> notes.txt")
    } else if text.contains("SHELL-WRITE") {
        Some("printf 'hello from codex\\n' > hello.txt")
    } else {
        None
    };
    let item = match command {
        Some(cmd) => json!({"type": "function_call", "id": "fc_fake", "call_id": "call_fake",
            "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()}),
        None => json!({"type": "message", "id": "msg_fake", "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}),
    };
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_fake"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_fake", "usage":
            {"input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
             "output_tokens_details": null, "total_tokens": 2}}}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// Runs `codex exec` (or `codex exec resume --last` when `resume`) in the workspace, killed
/// after two minutes.
fn codex(env: &Env, bin: &Path, codex_home: &Path, resume: bool, prompt: &str) -> Output {
    let mut command = Command::new(bin);
    command.args([
        "exec",
        "--dangerously-bypass-hook-trust",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
    ]);
    if resume {
        command.args(["resume", "--last"]);
    }
    command
        .arg(prompt)
        .current_dir(env.root())
        .env("HOME", env.home.path())
        .env("CODEX_HOME", codex_home)
        .env("RETRACE_HOME", env.home.path())
        .env_remove("OPENAI_API_KEY");
    let o = output_within(&mut command, Duration::from_secs(120));
    succeeded(o, &format!("codex {prompt:?}"))
}

#[test]
fn real_codex_undo_and_redo_restore_shell_changes() {
    let bin = codex_binary();
    if missing_cli(bin.is_some(), "Codex") {
        return;
    }
    let bin = bin.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let model = FakeHttp::start(responses_answer);
    let codex_home = env.home.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"fake-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\n\
             name = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n",
            model.port
        ),
    )
    .unwrap();
    let o = env
        .command(RETRACE, &["install", "codex", "--user"])
        .env("CODEX_HOME", &codex_home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(codex_home.join("hooks.json").exists(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("/hooks"),
        "says how to trust them: {}",
        stdout(&o)
    );

    codex(&env, &bin, &codex_home, false, "please SHELL-EDIT");
    assert_eq!(env.read("notes.txt"), "original\nedited by codex\n");
    codex(&env, &bin, &codex_home, true, "please SHELL-WRITE");
    assert_eq!(env.read("hello.txt"), "hello from codex\n");
    let requests = model.requests().len();
    assert!(requests >= 4, "two tool rounds per turn: {requests}");
    // PreToolUse and PostToolUse made each shell call a step of its turn (Codex names
    // every shell tool `Bash` to hooks, and each call by its call id).
    let ws = env.open();
    let session = ws
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.agent.as_deref() == Some("codex"))
        .expect("Codex's session");
    // `name` is the agent's session id (`id` is retrace's key).
    let id = session.name.expect("the agent's session id");
    for (turn, command) in [
        (1, "printf 'edited by codex\\n' >> notes.txt"),
        (2, "printf 'hello from codex\\n' > hello.txt"),
    ] {
        let steps = ws.session(&id).steps(turn).unwrap();
        let seen: Vec<_> = steps
            .iter()
            .map(|s| {
                (
                    s.tool.as_str(),
                    s.summary.as_str(),
                    s.call.as_str(),
                    s.ended_ms.is_some(),
                )
            })
            .collect();
        assert_eq!(seen, [("Bash", command, "call_fake", true)], "turn {turn}");
    }
    drop(ws);

    codex(&env, &bin, &codex_home, true, "retrace undo");
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("notes.txt"), "original\nedited by codex\n");
    codex(&env, &bin, &codex_home, true, "/undo");
    assert_eq!(env.read("notes.txt"), "original\n");
    codex(&env, &bin, &codex_home, true, "retrace redo");
    assert_eq!(env.read("notes.txt"), "original\nedited by codex\n");
    codex(&env, &bin, &codex_home, true, "retrace redo");
    assert_eq!(env.read("hello.txt"), "hello from codex\n");

    assert_eq!(
        model.requests().len(),
        requests,
        "a command reached the model"
    );
    for r in model.requests() {
        let input = r["input"].to_string();
        assert!(
            !input.contains("retrace undo") && !input.contains("/undo"),
            "{input}"
        );
    }
}
