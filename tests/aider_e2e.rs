//! End to end with the real Aider (PyPI `aider-chat`, installed by
//! `tests/e2e/install-clients.sh` into a virtual environment in `target/e2e/aider`), which
//! has no hooks, run under `retrace wrap` against a fake OpenAI chat-completions server on
//! 127.0.0.1 that answers each prompt with a whole-file edit.
//!
//! Proves: each prompt Aider records in `.aider.chat.history.md` becomes a turn named by it,
//! `retrace undo` takes the second back exactly (the first's file stays), and Aider's own
//! records (`.aider*`) are never captured nor restored over. The server answers a prompt
//! only once retrace has begun its turn and the turn's first step (it asks `retrace log`),
//! so what the reply makes Aider write is the turn's whatever the machine's speed.
//!
//! Without Aider the test says so and passes, except under `CI`, where it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::fake_http::{FakeHttp, chat_sse};
use crate::common::{Env, RETRACE, missing_cli, stderr, stdout};

fn aider_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e/aider/bin/aider");
    p.exists().then_some(p)
}

/// The turns of session `aider` as `log --steps --json` lists them, oldest first.
fn turns(root: &Path, home: &Path) -> Vec<Value> {
    let o = std::process::Command::new(RETRACE)
        .args(["--session", "aider", "log", "--steps", "--json"])
        .current_dir(root)
        .env("RETRACE_HOME", home)
        .output()
        .unwrap();
    if !o.status.success() {
        return Vec::new();
    }
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut t: Vec<Value> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "turn")
        .cloned()
        .collect();
    t.reverse();
    t
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_mins(5), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn real_aider_under_wrap_gets_a_turn_per_prompt_and_undo_takes_the_second_back() {
    let bin = aider_binary();
    if missing_cli(bin.is_some(), "Aider") {
        return;
    }
    let env = Env::new();
    env.write("keep.txt", "kept\n");
    // Aider's own home: its model-price cache present, so it asks nothing of the network.
    let aider_home = tempfile::tempdir().unwrap();
    let caches = aider_home.path().join(".aider/caches");
    std::fs::create_dir_all(&caches).unwrap();
    std::fs::write(caches.join("model_prices_and_context_window.json"), "{}").unwrap();

    let (root, home) = (env.root().to_path_buf(), env.home.path().to_path_buf());
    let server = FakeHttp::start_with_path(move |path, request| {
        if !path.ends_with("/chat/completions") {
            return r#"{"object": "list", "data": []}"#.into();
        }
        let asked = request["messages"].to_string();
        let (n, file, body) = if asked.contains("create world.txt") {
            (2, "world.txt", "world\n")
        } else {
            (1, "hello.txt", "hello v1\n")
        };
        // Answer once turn n and its first step have begun (see the module docs).
        let start = Instant::now();
        let begun = |t: &Value| t["steps"].as_array().is_some_and(|s| !s.is_empty());
        while !turns(&root, &home).get(n - 1).is_some_and(begun) {
            if start.elapsed() > Duration::from_mins(5) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = format!("Creating {file}.\n\n{file}\n```\n{body}```\n");
        chat_sse(&request["model"], None, &text)
    });
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let mut child = env
        .command(
            RETRACE,
            &[
                "--session",
                "aider",
                "wrap",
                "--",
                bin.unwrap().to_str().unwrap(),
                "--openai-api-base",
                &base,
                "--openai-api-key",
                "sk-fake",
                "--model",
                "openai/fake-model",
                "--edit-format",
                "whole",
                "--yes-always",
                "--no-auto-commits",
                "--no-gitignore",
                "--no-git",
                "--no-show-release-notes",
                "--no-check-update",
                "--no-show-model-warnings",
                "--analytics-disable",
                "--no-pretty",
                "--no-fancy-input",
            ],
        )
        .env("HOME", aider_home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut keys = child.stdin.take().unwrap();
    keys.write_all(b"create hello.txt\n").unwrap();
    keys.flush().unwrap();
    until("Aider wrote hello.txt", || env.path("hello.txt").exists());
    keys.write_all(b"create world.txt\n").unwrap();
    keys.flush().unwrap();
    until("Aider wrote world.txt", || env.path("world.txt").exists());
    drop(keys); // end of input: Aider exits
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("retrace: session aider: turns 1–2"), "{said}");

    let t = turns(env.root(), env.home.path());
    let prompts: Vec<&str> = t.iter().map(|t| t["text"].as_str().unwrap_or("")).collect();
    assert_eq!(prompts, ["create hello.txt", "create world.txt"], "{t:#?}");
    assert_eq!(t[1]["counts"], serde_json::json!([1, 0, 0]), "{t:#?}");

    let history = env.read(".aider.chat.history.md");
    assert!(history.contains("#### create world.txt"), "{history}");
    let o = env.run(RETRACE, &["--session", "aider", "undo"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!env.path("world.txt").exists());
    assert_eq!(env.read("hello.txt"), "hello v1\n");
    assert_eq!(env.read("keep.txt"), "kept\n");
    assert_eq!(
        env.read(".aider.chat.history.md"),
        history,
        "Aider's record rewound"
    );
}
