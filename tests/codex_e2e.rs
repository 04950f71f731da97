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
//! And: a turn whose model edits with Codex's `apply_patch` tool (a freeform `custom` tool
//! on the Responses wire, offered only to models whose metadata says
//! `apply_patch_tool_type = "freeform"`: a `model_catalog_json` here) is a step named
//! `apply_patch` with exactly the patched files (its hooks get `tool_name: "apply_patch"`,
//! `tool_input: {"command": <patch>}`), and `retrace revert turn:1.1` takes that patch back
//! alone.
//!
//! Without the CLI the tests say so and pass, except under `CI`, where they fail.

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
    sse(&match command {
        Some(cmd) => shell_call("call_fake", cmd),
        None => done(),
    })
}

/// A call of Codex's unified shell tool.
fn shell_call(call: &str, cmd: &str) -> Value {
    json!({"type": "function_call", "id": "fc_fake", "call_id": call,
        "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()})
}

/// The final message of a turn.
fn done() -> Value {
    json!({"type": "message", "id": "msg_fake", "role": "assistant",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}]})
}

/// A response of one output item, as server-sent events.
fn sse(item: &Value) -> String {
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

/// The patch the fake model applies: adds a file in a new directory, updates another.
const PATCH: &str = concat!(
    "*** Begin Patch\n",
    "*** Add File: src/added.txt\n",
    "+added by the patch\n",
    "*** Update File: notes.txt\n",
    "@@\n",
    " first\n",
    "-second\n",
    "+second, patched\n",
    " third\n",
    "*** End Patch\n",
);

/// The shell command the fake model runs after the patch, in the same turn.
const LATER: &str = "printf 'written later\\n' > later.txt";

/// The fake Responses answer for the patch test: the prompt `APPLY-PATCH` is answered with
/// a call of the freeform `apply_patch` tool (a `custom_tool_call`, its input the patch
/// text), its output with a shell call, that one's with a final message.
fn patch_answer(request: &Value) -> String {
    let last = request["input"]
        .as_array()
        .and_then(|i| i.last())
        .cloned()
        .unwrap_or(Value::Null);
    sse(&match (last["type"].as_str(), last["call_id"].as_str()) {
        (Some("message"), _) if last.to_string().contains("APPLY-PATCH") => {
            json!({"type": "custom_tool_call", "id": "ctc_fake", "call_id": "call_patch",
                "name": "apply_patch", "input": PATCH})
        }
        (Some("custom_tool_call_output"), Some("call_patch")) => shell_call("call_later", LATER),
        _ => done(),
    })
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

/// A `CODEX_HOME` whose config points the model `fake-model` at the fake server on `port`
/// (`more` appended to it), with retrace's hooks installed by `retrace install codex --user`.
fn codex_home(env: &Env, port: u16, more: &str) -> PathBuf {
    let codex_home = env.home.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"fake-model\"\nmodel_provider = \"fake\"\n{more}\n\
             [model_providers.fake]\nname = \"fake\"\n\
             base_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\n"
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
    codex_home
}

/// Retrace's key of Codex's session in the workspace: the agent's session id.
fn codex_session(env: &Env) -> String {
    env.open()
        .sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.agent.as_deref() == Some("codex"))
        .expect("Codex's session")
        .name
        .expect("the agent's session id")
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
    let codex_home = codex_home(&env, model.port, "");

    codex(&env, &bin, &codex_home, false, "please SHELL-EDIT");
    assert_eq!(env.read("notes.txt"), "original\nedited by codex\n");
    codex(&env, &bin, &codex_home, true, "please SHELL-WRITE");
    assert_eq!(env.read("hello.txt"), "hello from codex\n");
    let requests = model.requests().len();
    assert!(requests >= 4, "two tool rounds per turn: {requests}");
    // PreToolUse and PostToolUse made each shell call a step of its turn (Codex names
    // every shell tool `Bash` to hooks, and each call by its call id).
    let id = codex_session(&env);
    let ws = env.open();
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

/// Model metadata for `fake-model` (Codex's `model_catalog_json`) that offers it Codex's
/// `apply_patch` tool, freeform: without it (fallback metadata) the model gets no
/// `apply_patch` tool at all. (Codex 0.171.0 takes only `freeform` here: the JSON function
/// form `{"input": <patch>}` is gone, and a `function_call` of `apply_patch` fails as an
/// incompatible payload.)
const CATALOG: &str = r#"{"models": [{"slug": "fake-model", "display_name": "fake-model",
    "apply_patch_tool_type": "freeform", "base_instructions": "You are a fake model.",
    "supported_reasoning_levels": [], "shell_type": "shell_command", "visibility": "list",
    "supported_in_api": true, "priority": 1, "support_verbosity": false,
    "truncation_policy": {"mode": "tokens", "limit": 10000},
    "experimental_supported_tools": []}]}"#;

#[test]
fn real_codex_apply_patch_is_a_step_that_revert_takes_back() {
    let bin = codex_binary();
    if missing_cli(bin.is_some(), "Codex") {
        return;
    }
    let bin = bin.unwrap();
    let env = Env::new();
    env.write("notes.txt", "first\nsecond\nthird\n");
    let model = FakeHttp::start(patch_answer);
    let catalog = env.home.path().join("catalog.json");
    std::fs::write(&catalog, CATALOG).unwrap();
    let more = format!(
        "model_catalog_json = {}\n",
        json!(catalog.to_str().unwrap())
    );
    let codex_home = codex_home(&env, model.port, &more);

    codex(&env, &bin, &codex_home, false, "please APPLY-PATCH");
    // The model was offered the freeform tool, and Codex applied the patch, then ran the
    // shell command.
    let requests = model.requests();
    assert!(
        requests[0]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["type"] == "custom" && t["name"] == "apply_patch"),
        "no freeform apply_patch tool offered: {}",
        requests[0]["tools"]
    );
    assert_eq!(
        requests.len(),
        3,
        "a patch, a shell call, the final message"
    );
    let patched = requests[1]["input"].as_array().unwrap().last().unwrap();
    assert!(
        patched["output"].as_str().unwrap_or("").contains("Success"),
        "{patched}"
    );
    assert_eq!(env.read("src/added.txt"), "added by the patch\n");
    assert_eq!(env.read("notes.txt"), "first\nsecond, patched\nthird\n");
    assert_eq!(env.read("later.txt"), "written later\n");

    // PreToolUse and PostToolUse made the patch step 1 of turn 1 (tool `apply_patch`, its
    // input `{"command": <patch>}`), naming exactly the patched files, and the shell call
    // step 2.
    let id = codex_session(&env);
    let ws = env.open();
    let steps = ws.session(&id).steps(1).unwrap();
    let seen: Vec<_> = steps
        .iter()
        .map(|s| {
            (
                s.number,
                s.tool.as_str(),
                s.call.as_str(),
                s.files.clone(),
                s.ended_ms.is_some(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                1,
                "apply_patch",
                "call_patch",
                vec![b"src/added.txt".to_vec(), b"notes.txt".to_vec()],
                true
            ),
            (2, "Bash", "call_later", Vec::new(), true),
        ]
    );
    assert_eq!(steps[0].summary, "src/added.txt, notes.txt");
    drop(ws);

    // Reverting that step takes the patch back, exactly: the added file deleted, the
    // updated one as it was; the later shell step's file stays.
    let o = env.run(RETRACE, &["--session", &id, "revert", "turn:1.1"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!env.path("src/added.txt").exists(), "{}", stdout(&o));
    assert_eq!(env.read("notes.txt"), "first\nsecond\nthird\n");
    assert_eq!(env.read("later.txt"), "written later\n");
    assert_eq!(model.requests().len(), 3, "the revert reached the model");
}
