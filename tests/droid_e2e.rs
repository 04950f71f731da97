//! End to end with the real Factory Droid (npm `@factory/cli-linux-x64`, the CLI's own
//! binary, installed by `tests/e2e/install-clients.sh` into `target/e2e/`), its hooks
//! installed by `retrace install droid` (`.factory/settings.json`), with a custom model
//! (`customModels` in the user's settings) served by a fake OpenAI-compatible server on
//! 127.0.0.1, which also stands in for Factory's API (`FACTORY_API_BASE_URL`): no login.
//!
//! Droid fires its prompt hook in its JSON-RPC mode (`droid exec --input-format
//! stream-jsonrpc`, what editors drive; plain `droid exec "prompt"` fires none), so the
//! test talks JSON-RPC to one Droid process: a prompt of two tool calls (a file created, a
//! shell command) is one turn of two steps, paired without a call id; `retrace undo` typed
//! as the next prompt is stopped by the hook (`{"continue": false}`: no model call, Droid
//! reports the hook's reason) and takes the second turn back exactly; `retrace redo`
//! re-applies it.
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::common::fake_http::{FakeHttp, chat_sse, next_planned_call};
use crate::common::{Env, RETRACE, agent_session, missing_cli, prompts, stderr, step_summaries};
use serde_json::{Value, json};

fn droid_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/droid/node_modules/@factory/cli-linux-x64/bin/droid");
    p.exists().then_some(p)
}

/// The tool calls a prompt's marker asks for, in order, then a final text.
fn planned_calls(prompt: &str) -> Vec<(&'static str, Value)> {
    let shell = |command: &str| {
        json!({"command": command, "summary": "edit notes", "riskLevel": "low",
            "riskLevelReason": "writes a local file"})
    };
    if prompt.contains("FIRST-TURN") {
        vec![
            (
                "Create",
                json!({"file_path": "hello.txt", "content": "hello from droid\n"}),
            ),
            ("Execute", shell("printf 'first\\n' >> notes.txt")),
        ]
    } else if prompt.contains("SECOND-TURN") {
        vec![(
            "Execute",
            shell("printf 'second\\n' >> notes.txt && rm hello.txt"),
        )]
    } else {
        Vec::new()
    }
}

/// The fake server's answers: chat completions (streamed, as Droid asks) with the next
/// call the prompt plans after the tool results already in the conversation; anything
/// else (Factory's API: sessions, telemetry) an empty JSON object.
fn answer(path: &str, request: &Value, calls: &AtomicU64) -> String {
    if !path.ends_with("/chat/completions") {
        return "{}".into();
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let call = next_planned_call(&messages, planned_calls);
    let id = format!("call_{}", calls.fetch_add(1, Ordering::Relaxed));
    chat_sse(
        &request["model"],
        call.as_ref().map(|(n, a)| (*n, a, id.as_str())),
        "Done.",
    )
}

/// One Droid process in its JSON-RPC mode, and the lines it writes.
struct Droid {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next: u64,
}

/// How long one exchange may take before the test gives up (a hang guard, not a timing
/// assumption: every wait ends at a message Droid sends).
const LIMIT: Duration = Duration::from_secs(120);

impl Droid {
    fn start(env: &Env, bin: &Path, port: u16) -> Droid {
        let mut child = Command::new(bin)
            .args(["exec", "--input-format", "stream-jsonrpc"])
            .args(["--output-format", "stream-jsonrpc"])
            .args(["--auto", "high", "-m", "custom:fake-model"])
            .current_dir(env.root())
            .env("HOME", env.home.path())
            .env("RETRACE_HOME", env.home.path())
            .env("FACTORY_API_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env_remove("FACTORY_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Droid {
            stdin: child.stdin.take(),
            child,
            lines,
            next: 0,
        }
    }

    /// Sends a request; its id.
    fn send(&mut self, method: &str, params: Value) -> String {
        self.next += 1;
        let id = format!("req-{}", self.next);
        let m = json!({"type": "request", "jsonrpc": "2.0", "factoryApiVersion": "1.0.0",
            "factoryProtocolVersion": "1.220.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
        id
    }

    /// The messages Droid writes until one `done` says so (that one last).
    fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let start = Instant::now();
        let mut seen = Vec::new();
        loop {
            let left = LIMIT.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    let last = done(&v);
                    seen.push(v);
                    if last {
                        return seen;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("Droid never sent {what}; it sent: {seen:#?}")
                }
            }
        }
    }

    /// Sends a prompt and waits for the end of its turn; the notifications of the turn.
    fn prompt(&mut self, text: &str) -> Vec<Value> {
        self.send("droid.add_user_message", json!({"text": text}));
        self.until("the end of a turn", |v| {
            v["params"]["notification"]["type"] == "agent_turn_completed"
        })
    }
}

impl Drop for Droid {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The notifications' `error` messages (where Droid says why a prompt was stopped).
fn errors(seen: &[Value]) -> String {
    seen.iter()
        .filter(|v| v["params"]["notification"]["type"] == "error")
        .filter_map(|v| v["params"]["notification"]["message"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn real_droid_turns_steps_undo_and_redo() {
    let bin = droid_binary();
    if missing_cli(bin.is_some(), "Factory Droid") {
        return;
    }
    let bin = bin.unwrap();
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let root = env.root().display().to_string();
    let calls = AtomicU64::new(0);
    let model = FakeHttp::start_with_path(move |path, request| answer(path, request, &calls));
    // The user's settings: the custom model on the fake server.
    let factory = env.home.path().join(".factory");
    std::fs::create_dir_all(&factory).unwrap();
    let custom = json!({"customModels": [{"model": "fake-model", "displayName": "Fake",
        "baseUrl": format!("http://127.0.0.1:{}/v1", model.port), "apiKey": "dummy",
        "provider": "generic-chat-completion-api", "maxOutputTokens": 4096}]});
    std::fs::write(factory.join("settings.json"), custom.to_string()).unwrap();
    let o = env.run(RETRACE, &["-C", &root, "install", "droid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(env.path(".factory/settings.json").exists());

    let mut droid = Droid::start(&env, &bin, model.port);
    let id = droid.send(
        "droid.initialize_session",
        json!({"machineId": "retrace-test", "cwd": root, "modelId": "custom:fake-model",
            "autonomyLevel": "high"}),
    );
    droid.until("the session", |v| v["type"] == "response" && v["id"] == id);
    droid.prompt("please FIRST-TURN");
    assert_eq!(env.read("hello.txt"), "hello from droid\n");
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    droid.prompt("now SECOND-TURN");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());
    let chats = |r: &[Value]| r.iter().filter(|r| r.get("messages").is_some()).count();
    let asked = chats(&model.requests());

    let ws = env.open();
    let session = agent_session(&ws, "droid");
    assert_eq!(
        prompts(&ws, &session),
        [
            Some("now SECOND-TURN".into()),
            Some("please FIRST-TURN".into())
        ],
        "one turn per prompt"
    );
    assert_eq!(
        step_summaries(&ws, &session, 1),
        [
            ("Create".into(), "hello.txt".into(), true),
            (
                "Execute".into(),
                "printf 'first\\n' >> notes.txt".into(),
                true
            ),
        ]
    );
    drop(ws);

    let seen = droid.prompt("retrace undo");
    assert!(
        errors(&seen).contains("retrace: turn 2: restored"),
        "{seen:#?}"
    );
    assert_eq!(env.read("notes.txt"), "original\nfirst\n");
    assert_eq!(env.read("hello.txt"), "hello from droid\n");
    let seen = droid.prompt("retrace redo");
    assert!(errors(&seen).contains("re-applied"), "{seen:#?}");
    assert_eq!(env.read("notes.txt"), "original\nfirst\nsecond\n");
    assert!(!env.path("hello.txt").exists());
    assert_eq!(
        chats(&model.requests()),
        asked,
        "a command reached the model"
    );
}
