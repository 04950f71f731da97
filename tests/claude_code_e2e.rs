//! End to end with the real Claude Code CLI (the npm package `@anthropic-ai/claude-code`,
//! installed by `tests/e2e/install-clients.sh` into `target/e2e/`), its hooks installed by
//! `retrace install claude-code`, talking to a fake Anthropic Messages server on 127.0.0.1
//! that streams canned tool calls.
//!
//! Proves, typing `/undo` (which the model server never sees):
//! - a turn that writes a file with the Write tool and a turn that changes a file through
//!   Bash are both undone, and `/redo` brings them back;
//! - a turn that a blocking Stop hook of the user's made go on (two Stops, the second with
//!   `stop_hook_active`) is one turn holding both stops' files, undone at once;
//! - a turn interrupted while a tool runs (no Stop: the Agent SDK's interrupt on a
//!   stream-json `claude -p`) ends at the next prompt and is undone on its own;
//! - a turn whose `claude -p` was killed (SIGKILL: no hook at all) goes conversation-only at
//!   the next prompt, and `/undo` says it skips it instead of dead-ending;
//! - SIGINT is no interrupt for `claude -p`: it fires SessionEnd, which ends the turn.
//!
//! Without the CLI the tests say so and pass, except under `CI`, where they fail.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::fake_http::FakeHttp;
use crate::common::{Env, RETRACE, missing_cli, output_within, stderr, stdout, succeeded};
use serde_json::{Value, json};

fn claude_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RETRACE_E2E_CLAUDE") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    p.exists().then_some(p)
}

/// The text of the last user message after its last tool result: the prompt (with what
/// Claude Code adds to it, such as a Stop hook's feedback or "[Request interrupted by
/// user]"), or `None` when the message ends with tool results (the model's next answer
/// ends the turn).
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
            // Claude Code merges what follows a tool result (hook feedback, the next prompt
            // after an interrupt) into the message that carries it.
            let after = parts
                .iter()
                .rposition(|p| p["type"] == "tool_result")
                .map_or(0, |i| i + 1);
            let text: Vec<&str> = parts[after..]
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect();
            (!text.is_empty()).then(|| text.join("\n"))
        }
        _ => None,
    }
}

/// Whether the model already made this tool call since the last prompt: Claude Code merges
/// the calls of one turn into one assistant message, and puts the tool results first in the
/// user message after it, before any text (a Stop hook's feedback, the prompt that followed
/// an interrupt), so that text is still the last prompt once the call was made.
fn already_called(request: &Value, name: &str, input: &Value) -> bool {
    let Some(messages) = request["messages"].as_array() else {
        return false;
    };
    let Some(last_user) = messages.iter().rposition(|m| m["role"] == "user") else {
        return false;
    };
    messages[..last_user]
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["content"].as_array())
        .into_iter()
        .flatten()
        .any(|p| {
            p["type"] == "tool_use"
                && p["name"] == name
                && p["input"]["file_path"] == input["file_path"]
                && p["input"]["command"] == input["command"]
        })
}

/// What the blocking Stop hook of the double-Stop test tells the model.
const STOP_HOOK_REASON: &str = "also write b.txt";

/// A fake Anthropic Messages API answer. A prompt naming
/// - `WRITE-HELLO` gets a Write of `hello.txt`, `WRITE-<NAME>` a Write of `<name>.txt`;
/// - `BASH-EDIT` gets a Bash command appending to `notes.txt`;
/// - `SLOW-TWO` gets a Bash command writing `two.txt` that then waits until `release`
///   exists (a tool call in progress, to interrupt; at most five minutes, so that a shell
///   orphaned by a killed test ends anyway);
/// - the blocking Stop hook's feedback ([`STOP_HOOK_REASON`]) gets a Write of `b.txt`.
///
/// Anything else, and a call already made since the last prompt, gets a final text.
fn messages_answer(request: &Value, ws: &Path, release: &Path) -> String {
    if let Some(call) = midturn_call(request, release) {
        return sse_answer(request, call);
    }
    let prompt = last_prompt(request).unwrap_or_default();
    let write = |name: &str, content: &str| {
        Some((
            "Write",
            json!({"file_path": ws.join(name), "content": content}),
        ))
    };
    let named = prompt.split("WRITE-").nth(1).map(|rest| {
        rest.chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_lowercase()
    });
    let tool = if prompt.contains("Stop hook feedback") && prompt.contains(STOP_HOOK_REASON) {
        write("b.txt", "b from the continued turn\n")
    } else if prompt.contains("WRITE-HELLO") {
        write("hello.txt", "hello from claude\n")
    } else if let Some(name) = named.filter(|n| !n.is_empty()) {
        write(&format!("{name}.txt"), &format!("{name}\n"))
    } else if prompt.contains("BASH-EDIT") {
        Some((
            "Bash",
            json!({"command": "printf 'edited by bash\\n' >> notes.txt",
                "description": "Append a line to notes.txt"}),
        ))
    } else if prompt.contains("SLOW-TWO") {
        Some((
            "Bash",
            json!({"command": format!(
                    "printf 'two\\n' > two.txt && i=0 && \
                     while [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done",
                    release.display()),
                "description": "Write two.txt, then wait"}),
        ))
    } else {
        None
    }
    .filter(|(name, input)| !already_called(request, name, input));
    sse_answer(request, tool)
}

/// The first Bash command of an `EDIT-MIDTURN` turn: it marks that it runs (`waiting`) and
/// waits until `release` exists (at most five minutes).
fn midturn_wait(release: &Path) -> String {
    format!(
        "touch waiting && i=0 && while [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.1; \
         i=$((i+1)); done",
        release.display()
    )
}

/// The second, which overwrites `notes.txt`.
const MIDTURN_OVERWRITE: &str = "printf 'from bash\\n' > notes.txt";

/// A turn of two Bash calls for a prompt naming `EDIT-MIDTURN` (None for any other
/// conversation): the first waits ([`midturn_wait`]; the user edits meanwhile), the second
/// overwrites `notes.txt` ([`MIDTURN_OVERWRITE`]), then a final text (`Some(None)`).
fn midturn_call(request: &Value, release: &Path) -> Option<Option<(&'static str, Value)>> {
    let messages = request["messages"].as_array()?;
    let asked = messages.iter().rposition(|m| {
        m["role"] == "user"
            && crate::common::fake_http::text_of(&m["content"]).contains("EDIT-MIDTURN")
    })?;
    // A prompt after it is another turn's.
    if last_prompt(request).is_some_and(|p| !p.contains("EDIT-MIDTURN")) {
        return None;
    }
    let made: Vec<&str> = messages[asked..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == "tool_use")
        .filter_map(|p| p["input"]["command"].as_str())
        .collect();
    let wait = midturn_wait(release);
    Some(if !made.contains(&wait.as_str()) {
        Some((
            "Bash",
            json!({"command": wait, "description": "Wait for the user"}),
        ))
    } else if !made.contains(&MIDTURN_OVERWRITE) {
        Some((
            "Bash",
            json!({"command": MIDTURN_OVERWRITE, "description": "Overwrite notes.txt"}),
        ))
    } else {
        None
    })
}

/// The streamed answer: a call of `tool` with its input, or a final text.
fn sse_answer(request: &Value, tool: Option<(&str, Value)>) -> String {
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
        // A distinct id per call: the calls of one turn are merged into one message.
        let id = format!(
            "toolu_fake_{}",
            request["messages"].as_array().map_or(0, Vec::len)
        );
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": id, "name": name, "input": {}}}),
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

/// `claude -p` in the workspace, against the fake model server.
fn claude_command(env: &Env, bin: &Path, model: &FakeHttp, args: &[&str]) -> Command {
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
    command
}

/// Runs `claude -p` in the workspace, killed after two minutes.
fn claude(env: &Env, bin: &Path, model: &FakeHttp, args: &[&str]) -> Output {
    let o = output_within(
        &mut claude_command(env, bin, model, args),
        Duration::from_secs(120),
    );
    succeeded(o, &format!("claude {args:?}"))
}

/// How long any one wait for the CLI may take: only a bound on "wait until", for a loaded
/// machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// Waits until `done` holds, polling; panics with `what` after [`PATIENCE`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A workspace with retrace's hooks installed, a recorder hook for some events (each
/// payload one line of `events.jsonl` in the retrace home), and the fake model server.
struct Setup {
    env: Env,
    bin: PathBuf,
    model: FakeHttp,
    /// The file whose existence lets the `SLOW-TWO` Bash command finish (created on drop,
    /// so that no waiting shell outlives a failed test).
    release: PathBuf,
}

impl Setup {
    /// The hook events recorded, and the one right after turn two's prompt.
    fn event_after_slow_two(&self) -> (Vec<(String, String)>, (String, String)) {
        let events = self.events();
        let slow = events
            .iter()
            .position(|e| e.0 == "UserPromptSubmit" && e.1 == "please SLOW-TWO")
            .unwrap_or_else(|| panic!("{events:?}"));
        let next = events
            .get(slow + 1)
            .cloned()
            .unwrap_or_else(|| panic!("{events:?}"));
        (events, next)
    }

    /// Turn one (`WRITE-ONE`, ended), then a `claude -p` running turn two (`SLOW-TWO`),
    /// returned once its Bash call has written `two.txt` and waits for the release file.
    fn one_then_slow_two(&self, sid: &str) -> Reaped {
        self.claude(&["--session-id", sid, "please WRITE-ONE"]);
        let running = self.spawn(&["--resume", sid, "please SLOW-TWO"]);
        wait_until("two.txt is written", || {
            std::fs::read_to_string(self.env.path("two.txt")).is_ok_and(|s| s == "two\n")
        });
        running
    }

    /// None (the test is skipped) when the CLI is not installed.
    fn new(recorded_events: &[&str]) -> Option<Setup> {
        let bin = claude_binary();
        if missing_cli(bin.is_some(), "Claude Code") {
            return None;
        }
        let env = Env::new();
        let root = env.root().display().to_string();
        let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let recorder = script(
            &env,
            "record.sh",
            &format!(
                "{{ tr -d '\\n'; echo; }} >> '{}'\n",
                env.home.path().join("events.jsonl").display()
            ),
        );
        for event in recorded_events {
            add_hook(&env, event, &recorder);
        }
        let ws = env.root().to_path_buf();
        let release = env.home.path().join("release");
        let r = release.clone();
        let model = FakeHttp::start(move |request| messages_answer(request, &ws, &r));
        Some(Setup {
            env,
            bin: bin.unwrap(),
            model,
            release,
        })
    }

    fn claude(&self, args: &[&str]) -> Output {
        claude(&self.env, &self.bin, &self.model, args)
    }

    fn command(&self, args: &[&str]) -> Command {
        claude_command(&self.env, &self.bin, &self.model, args)
    }

    /// `claude -p ARGS` started with no input or output, killed when dropped.
    fn spawn(&self, args: &[&str]) -> Reaped {
        Reaped(
            self.command(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// The recorded hook payloads, in order, as (event, prompt or stop_hook_active).
    fn events(&self) -> Vec<(String, String)> {
        let text =
            std::fs::read_to_string(self.env.home.path().join("events.jsonl")).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                let detail = match v["hook_event_name"].as_str() {
                    Some("UserPromptSubmit") => v["prompt"].as_str().unwrap_or("").to_string(),
                    Some("Stop") => format!("stop_hook_active={}", v["stop_hook_active"]),
                    Some("SessionEnd") => format!("reason={}", v["reason"]),
                    _ => String::new(),
                };
                (
                    v["hook_event_name"].as_str().unwrap_or("?").to_string(),
                    detail,
                )
            })
            .collect()
    }

    /// The session's turns (`retrace --session <sid> log --json` entries), oldest first.
    fn turns(&self, sid: &str) -> Vec<Value> {
        let o = self.env.run(RETRACE, &["--session", sid, "log", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mut entries: Vec<Value> = v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "turn")
            .cloned()
            .collect();
        entries.sort_by_key(|e| e["number"].as_u64());
        entries
    }

    /// Types `/undo` (a `claude -p` of its own) and returns what Claude Code printed,
    /// asserting that no request reached the model server.
    fn undo(&self, sid: &str) -> String {
        let requests = self.model.requests().len();
        let o = self.claude(&["--resume", sid, "/undo"]);
        assert_eq!(
            self.model.requests().len(),
            requests,
            "/undo reached the model"
        );
        stdout(&o)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.release, "");
    }
}

/// An executable `sh` script in the retrace home (outside the workspace).
fn script(env: &Env, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.home.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Adds a command hook for `event` to `.claude/settings.json`, after retrace's own.
fn add_hook(env: &Env, event: &str, command: &Path) {
    let settings = env.path(".claude/settings.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let entries = v["hooks"][event]
        .as_array_mut()
        .unwrap_or_else(|| panic!("no {event} hooks installed"));
    entries.push(json!({"hooks": [{"type": "command",
        "command": format!("'{}'", command.display())}]}));
    std::fs::write(&settings, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// A child process killed (and reaped) when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Claude Code driven as the Agent SDK drives it: one `claude -p --input-format
/// stream-json` process taking prompts (and control requests, such as an interrupt) on
/// stdin and printing stream-json messages.
struct Streaming {
    child: Reaped,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Streaming {
    fn start(setup: &Setup, args: &[&str]) -> Streaming {
        let mut command = setup.command(&[
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ]);
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Streaming {
            child: Reaped(child),
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn prompt(&mut self, text: &str) {
        self.send(&json!({"type": "user", "message": {"role": "user", "content": text}}));
    }

    /// Waits for the next message `is` accepts and returns it.
    fn wait_for(&mut self, what: &str, is: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let left = PATIENCE.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(v) if is(&v) => return v,
                Ok(v) => self.seen.push(v),
                Err(e) => panic!("no {what} from claude ({e}); it printed {:#?}", self.seen),
            }
        }
    }

    /// The end of the current turn: its `result` message.
    fn result(&mut self) -> Value {
        self.wait_for("result", |v| v["type"] == "result")
    }

    /// Closes stdin and waits for the process to exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let child = &mut self.child.0;
        wait_until("claude exits after its stdin closed", || {
            child.try_wait().unwrap().is_some()
        });
    }
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
    let release = env.home.path().join("release");
    let model = FakeHttp::start(move |request| messages_answer(request, &ws, &release));
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
        // Each line: counts, the bytes the turn added, the prompt.
        stdout(&o)
            .lines()
            .any(|l| l.contains("+1 ~0 -0  ") && l.ends_with("  please WRITE-HELLO"))
            && stdout(&o)
                .lines()
                .any(|l| l.contains("+0 ~1 -0  ") && l.ends_with("  please BASH-EDIT")),
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

/// Issue 13, item 5, with the real CLI: a user Stop hook blocks the first Stop (Claude Code
/// then goes on with the turn and fires Stop again, with `stop_hook_active: true`). retrace
/// ended the turn at the first Stop and extends it at the second, so the one turn holds
/// both files and one `/undo` removes both.
#[test]
fn real_claude_code_second_stop_after_a_blocking_stop_hook_extends_the_turn() {
    let Some(t) = Setup::new(&["UserPromptSubmit", "Stop", "SessionEnd"]) else {
        return;
    };
    // Blocks a first Stop (`stop_hook_active` false); does nothing for a second.
    let block = script(
        &t.env,
        "block-first-stop.sh",
        &format!(
            "case $(tr -d ' \\n') in\n\
             *'\"stop_hook_active\":false'*) \
             printf '%s\\n' '{{\"decision\":\"block\",\"reason\":\"{STOP_HOOK_REASON}\"}}' ;;\n\
             esac\n"
        ),
    );
    add_hook(&t.env, "Stop", &block);
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e1";

    t.claude(&["--session-id", sid, "please WRITE-A"]);
    assert_eq!(t.env.read("a.txt"), "a\n");
    assert_eq!(t.env.read("b.txt"), "b from the continued turn\n");
    // Claude Code fired Stop twice in the one turn.
    let stops: Vec<String> = t
        .events()
        .into_iter()
        .filter(|(e, _)| e == "Stop")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        stops,
        ["stop_hook_active=false", "stop_hook_active=true"],
        "{:?}",
        t.events()
    );
    // The continuation carried the hook's reason (that is what made the model write b.txt).
    let requests = t.model.requests();
    assert!(
        requests
            .iter()
            .filter_map(last_prompt)
            .any(|p| p.contains(STOP_HOOK_REASON)),
        "no request carried the Stop hook's feedback"
    );

    // One turn, ended at the first Stop and extended at the second: its after-snapshot is
    // the extended one, and holds both files.
    let turns = t.turns(sid);
    assert_eq!(turns.len(), 1, "{turns:#?}");
    assert_eq!(turns[0]["state"], "complete", "{turns:#?}");
    assert_eq!(turns[0]["counts"], json!([2, 0, 0]), "{turns:#?}");
    let o = t.env.run(RETRACE, &["log", "--json"]);
    let log: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let snapshots: Vec<Value> = log["entries"].as_array().unwrap().clone();
    let labelled = |label: &str| snapshots.iter().find(|s| s["label"] == label).cloned();
    assert!(labelled("after turn 1").is_some(), "{snapshots:#?}");
    let extended = labelled("after turn 1 (extended)").expect("no extended after-snapshot");
    assert_eq!(extended["id"], turns[0]["after"]);
    let before = turns[0]["before"].as_str().unwrap();
    let after = turns[0]["after"].as_str().unwrap();
    let o = t.env.run(RETRACE, &["diff", "--json", before, after]);
    let diff: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(diff["added"], json!(["a.txt", "b.txt"]), "{diff}");

    // One /undo removes both files, without a model call.
    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 1: restored"), "{out}");
    assert!(!t.env.path("a.txt").exists() && !t.env.path("b.txt").exists());
    let prompts: Vec<String> = t.model.requests().iter().filter_map(last_prompt).collect();
    assert!(prompts.iter().all(|p| !p.contains("/undo")), "{prompts:?}");
}

/// Issue 13, item 4, with the real CLI: a turn interrupted while a tool runs. Claude Code
/// fires no Stop for an interrupted turn. The Agent SDK's interrupt (a `control_request`
/// of subtype `interrupt` on a stream-json `claude -p`) is the one the real CLI offers
/// without a terminal; the process lives on and takes the next prompt, so the interrupted turn's owner is alive and the turn ends at
/// the next prompt's before-snapshot. `/undo` then steps back over turn three, turn two
/// (the interrupted one: its file goes) and turn one.
#[test]
fn real_claude_code_interrupted_turn_ends_at_the_next_prompt() {
    let Some(t) = Setup::new(&["UserPromptSubmit", "Stop", "SessionEnd"]) else {
        return;
    };
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e2";
    t.claude(&["--session-id", sid, "please WRITE-ONE"]);
    assert_eq!(t.env.read("one.txt"), "one\n");

    let mut agent = Streaming::start(&t, &["--resume", sid]);
    agent.prompt("please SLOW-TWO");
    // The Bash call wrote two.txt and is waiting: interrupt it.
    wait_until("two.txt is written", || {
        std::fs::read_to_string(t.env.path("two.txt")).is_ok_and(|s| s == "two\n")
    });
    agent.send(
        &json!({"type": "control_request", "request_id": "interrupt-1",
        "request": {"subtype": "interrupt"}}),
    );
    agent.wait_for("the interrupt's control_response", |v| {
        v["type"] == "control_response" && v["response"]["request_id"] == "interrupt-1"
    });
    agent.result();
    agent.prompt("please WRITE-THREE");
    agent.result();
    assert_eq!(t.env.read("three.txt"), "three\n");
    agent.finish();

    // Claude Code sent no Stop (nor SessionEnd) for the interrupted turn.
    let (events, next) = t.event_after_slow_two();
    assert_eq!(
        next,
        ("UserPromptSubmit".into(), "please WRITE-THREE".into()),
        "{events:?}"
    );
    let turns = t.turns(sid);
    assert_eq!(turns.len(), 3, "{turns:#?}");
    assert!(turns.iter().all(|e| e["state"] == "complete"), "{turns:#?}");
    assert!(
        turns[1]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no stop event arrived")),
        "{turns:#?}"
    );
    assert_eq!(turns[1]["counts"], json!([1, 0, 0]), "{turns:#?}");
    assert_eq!(turns[1]["after"], turns[2]["before"], "{turns:#?}");

    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 3: restored"), "{out}");
    assert!(!t.env.path("three.txt").exists());
    assert!(t.env.path("two.txt").exists());
    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 2: restored"), "{out}");
    assert!(!t.env.path("two.txt").exists());
    assert!(t.env.path("one.txt").exists());
    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 1: restored"), "{out}");
    assert!(!t.env.path("one.txt").exists());
}

/// Issue 13, item 4, with the real CLI: a `claude -p` killed (SIGKILL) while its tool call
/// runs fires no hook at all, so its turn is left pending with a dead owner. (SIGINT and
/// SIGTERM are no interrupt: `claude -p` then fires SessionEnd, which ends the turn; see
/// the next test.) The next prompt, from a new `claude -p --resume`, closes the dead turn:
/// it changed a file, so it goes conversation-only and its file is left alone. `/undo`
/// steps back over turn three, then says turn two was skipped (never a dead end), then
/// steps back over turn one.
#[test]
fn real_claude_code_killed_turn_is_conversation_only_and_undo_steps_over_it() {
    let Some(t) = Setup::new(&["UserPromptSubmit", "Stop", "SessionEnd"]) else {
        return;
    };
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e3";
    let mut killed = t.one_then_slow_two(sid);
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    // The killed CLI's shell is orphaned, still waiting: let it finish.
    std::fs::write(&t.release, "").unwrap();
    let turns = t.turns(sid);
    assert_eq!(turns[1]["state"], "pending", "{turns:#?}");

    t.claude(&["--resume", sid, "please WRITE-THREE"]);
    let (events, next) = t.event_after_slow_two();
    assert_eq!(
        next,
        ("UserPromptSubmit".into(), "please WRITE-THREE".into()),
        "no hook fires for a killed claude: {events:?}"
    );
    let turns = t.turns(sid);
    assert_eq!(turns.len(), 3, "{turns:#?}");
    assert_eq!(turns[0]["state"], "complete", "{turns:#?}");
    assert_eq!(turns[1]["state"], "conversation_only", "{turns:#?}");
    assert_eq!(turns[2]["state"], "complete", "{turns:#?}");

    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 3: restored"), "{out}");
    assert!(!t.env.path("three.txt").exists());
    let out = t.undo(sid);
    assert!(
        out.contains("retrace: turn 2: conversation only") && out.contains("skipped"),
        "{out}"
    );
    assert_eq!(
        t.env.read("two.txt"),
        "two\n",
        "the dead turn's file is left"
    );
    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 1: restored"), "{out}");
    assert!(!t.env.path("one.txt").exists());
    assert_eq!(t.env.read("two.txt"), "two\n");
}

/// What `claude -p` does on SIGINT while a tool call runs: it fires SessionEnd (reason
/// "other"), not Stop, and exits; retrace ends the turn at SessionEnd, so it is complete
/// and `/undo` restores it.
#[test]
fn real_claude_code_sigint_ends_the_turn_through_session_end() {
    let Some(t) = Setup::new(&["UserPromptSubmit", "Stop", "SessionEnd"]) else {
        return;
    };
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e4";
    let mut interrupted = t.one_then_slow_two(sid);
    let pid = interrupted.0.id().to_string();
    let o = Command::new("kill").args(["-INT", &pid]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let child = &mut interrupted.0;
    wait_until("claude exits on SIGINT", || {
        child.try_wait().unwrap().is_some()
    });
    std::fs::write(&t.release, "").unwrap();

    let events = t.events();
    let slow = events
        .iter()
        .position(|e| {
            e == &(
                "UserPromptSubmit".to_string(),
                "please SLOW-TWO".to_string(),
            )
        })
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(
        events[slow + 1..],
        [("SessionEnd".into(), "reason=\"other\"".into())],
        "{events:?}"
    );
    let turns = t.turns(sid);
    assert_eq!(turns.len(), 2, "{turns:#?}");
    assert_eq!(turns[1]["state"], "complete", "{turns:#?}");
    assert_eq!(turns[1]["counts"], json!([1, 0, 0]), "{turns:#?}");
    let out = t.undo(sid);
    assert!(out.contains("retrace: turn 2: restored"), "{out}");
    assert!(!t.env.path("two.txt").exists());
    assert!(t.env.path("one.txt").exists());
}

/// Issue 38, with the real CLI: the user saves an edit while the agent's turn runs, and the
/// agent's next Bash command overwrites the file. The step's capture before that command
/// (`step_captures = "auto"`: `>` can destroy) holds the edit: `log --steps --json` names it
/// as the step's `before`, and `restore ID -- notes.txt` brings the edit back byte for byte.
#[test]
fn real_claude_code_a_users_edit_saved_mid_turn_survives_a_bash_overwrite() {
    let Some(t) = Setup::new(&[]) else {
        return;
    };
    t.env.write("notes.txt", "original\n");
    let sid = "5e55a1d0-0000-4000-8000-00000000e2e6";
    let mut running = t.spawn(&["--session-id", sid, "please EDIT-MIDTURN"]);
    wait_until("the first Bash call waits", || {
        t.env.path("waiting").exists()
    });
    let edit = "the user's edit, saved mid-turn\n";
    t.env.write("notes.txt", edit);
    std::fs::write(&t.release, "").unwrap();
    let status = running.0.wait().unwrap();
    assert!(status.success(), "claude -p failed: {status}");
    assert_eq!(t.env.read("notes.txt"), "from bash\n");

    let o = t
        .env
        .run(RETRACE, &["--session", sid, "log", "--steps", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let steps = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "turn" && e["number"] == 1)
        .map(|e| e["steps"].clone())
        .unwrap_or_else(|| panic!("{log}"));
    let overwrite = steps
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["summary"]
                .as_str()
                .is_some_and(|c| c.contains("> notes.txt"))
        })
        .unwrap_or_else(|| panic!("no step of the overwrite: {steps}"));
    assert_eq!(overwrite["tool"], "Bash", "{steps}");
    let before = overwrite["before"]
        .as_str()
        .unwrap_or_else(|| panic!("the overwrite was not captured before: {steps}"));
    let o = t
        .env
        .run(RETRACE, &["restore", "--json", before, "--", "notes.txt"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(t.env.read("notes.txt"), edit);
}
