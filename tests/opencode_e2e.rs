//! End to end with the real OpenCode CLI (`opencode-ai` from npm, through
//! `tests/e2e/install-clients.sh`), loading the plugin `retrace install opencode` writes, run
//! as `opencode serve` and driven through its HTTP API against a fake OpenAI-compatible model
//! server on 127.0.0.1 that streams a canned `write` or `bash` tool call, then a final text.
//!
//! One OpenCode server proves, with the files compared byte for byte each way: a turn that
//! writes a file and a turn that changes a file through the shell are undone by OpenCode's
//! revert (one turn, then two) and redone by its forward revert (what `/redo` does) and
//! unrevert; a file written by hand between turns survives; an edit to a file the turn
//! changed is never overwritten (the refusal is a toast, and OpenCode's revert is moved back
//! to match the files); a prompt after a revert makes it final without re-applying it; two
//! sessions keep separate histories; OpenCode made no snapshot repository; `opencode run`
//! ends its turn before it exits; and `retrace uninstall opencode` gives the project back.
//! Without the plugin's binary it warns once and stays out of the way.
//!
//! Without the CLI the test says so and passes, except under `CI`, where it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::fake_http::{FakeHttp, chat_sse, text_of};
use crate::common::{Env, RETRACE, missing_cli, output_within, stderr, stdout, succeeded};
use serde_json::{Value, json};

/// How long anything OpenCode does may take on a loaded machine (its first start installs
/// its plugin types package with npm).
const PATIENCE: Duration = Duration::from_secs(300);

fn opencode_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/opencode/node_modules/opencode-ai/bin/opencode.exe")
}

/// The fake chat-completions answer: a tool call for a prompt naming one of the markers
/// below, a final text after a tool result, and a plain title for OpenCode's title request
/// (the one without tools).
fn chat_answer(request: &Value, calls: &AtomicU64) -> String {
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let prompt = if last["role"] == "user" && request.get("tools").is_some() {
        text_of(&last["content"])
    } else {
        String::new()
    };
    let write =
        |path: &str, content: &str| Some(("write", json!({"filePath": path, "content": content})));
    let tool = if prompt.contains("WRITE-HELLO") {
        write("hello.txt", "hello from opencode\n")
    } else if prompt.contains("WRITE-SECOND") {
        write("second.txt", "second session\n")
    } else if prompt.contains("WRITE-THIRD") {
        write("third.txt", "third\n")
    } else if prompt.contains("BASH-EDIT") {
        Some((
            "bash",
            json!({"command": "printf 'edited by bash\\n' >> notes.txt",
                "description": "Append a line to notes.txt"}),
        ))
    } else {
        None
    };
    let id = tool
        .as_ref()
        .map(|_| format!("call_{}", calls.fetch_add(1, Ordering::Relaxed)));
    let call = tool
        .as_ref()
        .zip(id.as_deref())
        .map(|((n, a), id)| (*n, a, id));
    let text = if request.get("tools").is_some() {
        "Done."
    } else {
        "A title"
    };
    chat_sse(&request["model"], call, text)
}

/// The project's `opencode.json` before `retrace install opencode`: the fake model, every
/// tool allowed, nothing fetched.
fn config(port: u16) -> String {
    let provider = json!({"npm": "@ai-sdk/openai-compatible", "name": "Fake",
        "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "dummy"},
        "models": {"fake-model": {"name": "Fake", "tool_call": true}}});
    let config = json!({"$schema": "https://opencode.ai/config.json",
        "model": "fake/fake-model", "small_model": "fake/fake-model",
        "autoupdate": false, "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"},
        "provider": {"fake": provider}});
    serde_json::to_string_pretty(&config).unwrap() + "\n"
}

/// The private home OpenCode runs in: its config, data and cache directories.
struct AgentHome {
    dir: tempfile::TempDir,
    /// A registry OpenCode installs its plugins from; then the plugin's binary comes from
    /// its npm dependency alone (no `RETRACE_BIN`, no `retrace` on `PATH`).
    registry: Option<String>,
}

impl AgentHome {
    fn new() -> AgentHome {
        AgentHome {
            dir: tempfile::tempdir().unwrap(),
            registry: None,
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join(".local/share")
    }

    /// `command` with OpenCode's and retrace's environment (`retrace` = `bin`).
    fn env<'c>(&self, command: &'c mut Command, env: &Env, bin: &str) -> &'c mut Command {
        let home = self.dir.path();
        command
            .current_dir(env.root())
            // `opencode run` takes its directory from PWD (with another one it waits for
            // the session's end in the wrong place and never exits).
            .env("PWD", env.root())
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", self.data())
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("RETRACE_HOME", env.home.path())
            .env_remove("OPENCODE_CONFIG")
            .env_remove("OPENCODE_CONFIG_DIR");
        match &self.registry {
            None => command.env("RETRACE_BIN", bin),
            Some(url) => command
                .env_remove("RETRACE_BIN")
                .env_remove("RETRACE_BINARY")
                .env("npm_config_registry", url)
                .env("PATH", crate::common::registry::path_without_retrace()),
        }
    }
}

/// One HTTP/1.1 request to 127.0.0.1:`port`; the JSON answer (`Null` for an empty one).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let (status, chunked, length) = read_head(&mut reader);
    let mut raw = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(&mut reader) {
            raw.extend(chunk);
        }
    } else if let Some(n) = length {
        raw.resize(n, 0);
        reader.read_exact(&mut raw).unwrap();
    } else {
        reader.read_to_end(&mut raw).unwrap();
    }
    let text = String::from_utf8_lossy(&raw);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: HTTP {status}: {text}"
    );
    if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
    }
}

/// Reads a response's status line and headers: the status, whether the body is chunked,
/// and its length when given.
fn read_head(reader: &mut impl BufRead) -> (u16, bool, Option<usize>) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (mut chunked, mut length) = (false, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap() == 0 || h.trim().is_empty() {
            return (status, chunked, length);
        }
        let h = h.to_ascii_lowercase();
        if h.starts_with("transfer-encoding:") && h.contains("chunked") {
            chunked = true;
        }
        if let Some(n) = h.strip_prefix("content-length:") {
            length = n.trim().parse().ok();
        }
    }
}

/// One chunk of a chunked body; `None` at its end.
fn read_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut size = String::new();
    if reader.read_line(&mut size).ok()? == 0 {
        return None;
    }
    let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
    if n == 0 {
        return None;
    }
    let mut chunk = vec![0; n + 2];
    reader.read_exact(&mut chunk).ok()?;
    chunk.truncate(n);
    Some(chunk)
}

/// A running `opencode serve`, its event stream and its stderr; killed on drop.
struct Server {
    child: Child,
    port: u16,
    events: Arc<Mutex<Vec<Value>>>,
    /// Toasts already waited for.
    toasts_seen: usize,
    log: PathBuf,
}

impl Server {
    fn start(home: &AgentHome, env: &Env) -> Server {
        // A free port (OpenCode's `--port 0` means its default, 4096).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = home.dir.path().join("serve.stderr");
        let mut command = Command::new(opencode_bin());
        home.env(&mut command, env, RETRACE)
            .args([
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut child = command.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let start = Instant::now();
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!(
                    "opencode serve exited: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if line.contains("listening on") {
                break;
            }
            assert!(start.elapsed() < PATIENCE, "opencode serve did not start");
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "GET /event HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let (_, chunked, _) = read_head(&mut reader);
            let mut text = String::new();
            loop {
                let piece = if chunked {
                    read_chunk(&mut reader)
                } else {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(n) if n > 0 => Some(line.into_bytes()),
                        _ => None,
                    }
                };
                let Some(piece) = piece else { return };
                text.push_str(&String::from_utf8_lossy(&piece));
                while let Some(i) = text.find('\n') {
                    let line: String = text.drain(..=i).collect();
                    if let Some(data) = line.trim_end().strip_prefix("data:")
                        && let Ok(v) = serde_json::from_str::<Value>(data.trim())
                    {
                        seen.lock().unwrap().push(v);
                    }
                }
            }
        });
        let server = Server {
            child,
            port,
            events,
            toasts_seen: 0,
            log,
        };
        // The stream is subscribed once its first event (`server.connected`) arrives.
        server.wait_for("the event stream", |s| !s.events.lock().unwrap().is_empty());
        server
    }

    fn wait_for(&self, what: &str, mut done: impl FnMut(&Server) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < PATIENCE,
                "waited in vain for {what}; toasts: {:#?}\nopencode stderr:\n{}",
                self.toasts(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every toast's message so far.
    fn toasts(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.get("payload").unwrap_or(e))
            .filter(|e| e["type"] == "tui.toast.show")
            .filter_map(|e| e["properties"]["message"].as_str().map(str::to_string))
            .collect()
    }

    /// The next toast; asserts it holds `needle`.
    fn next_toast(&mut self, needle: &str) -> String {
        let seen = self.toasts_seen;
        self.wait_for(&format!("a toast saying {needle:?}"), |s| {
            s.toasts().len() > seen
        });
        let toast = self.toasts()[seen].clone();
        self.toasts_seen = seen + 1;
        assert!(
            toast.contains(needle),
            "expected {needle:?} in the toast {toast:?}"
        );
        toast
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        http(self.port, "POST", path, Some(body))
    }

    fn new_session(&self) -> String {
        self.post("/session", &json!({}))["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Sends a prompt and waits for the answer.
    fn prompt(&self, session: &str, text: &str) {
        self.post(
            &format!("/session/{session}/message"),
            &json!({"parts": [{"type": "text", "text": text}]}),
        );
    }

    /// The ids of the session's user messages, oldest first.
    fn prompts(&self, session: &str) -> Vec<String> {
        let messages = http(
            self.port,
            "GET",
            &format!("/session/{session}/message"),
            None,
        );
        messages
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["info"]["role"] == "user")
            .map(|m| m["info"]["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The last part of the answer before the user message `prompt`: its message and id.
    fn last_part_before(&self, session: &str, prompt: &str) -> (String, String) {
        let messages = http(
            self.port,
            "GET",
            &format!("/session/{session}/message"),
            None,
        );
        let messages = messages.as_array().unwrap();
        let at = messages
            .iter()
            .position(|m| m["info"]["id"] == prompt)
            .unwrap();
        let answer = &messages[at - 1];
        assert_eq!(answer["info"]["role"], "assistant", "{answer}");
        let part = answer["parts"].as_array().unwrap().last().unwrap();
        (
            answer["info"]["id"].as_str().unwrap().to_string(),
            part["id"].as_str().unwrap().to_string(),
        )
    }

    fn revert(&self, session: &str, message: &str) {
        self.post(
            &format!("/session/{session}/revert"),
            &json!({"messageID": message}),
        );
    }

    fn unrevert(&self, session: &str) {
        self.post(&format!("/session/{session}/unrevert"), &json!({}));
    }

    /// The session's revert point, as OpenCode has it.
    fn revert_point(&self, session: &str) -> Option<String> {
        let info = http(self.port, "GET", &format!("/session/{session}"), None);
        info["revert"]["messageID"].as_str().map(str::to_string)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `retrace log --json` of the OpenCode session `session`, once retrace has it.
fn retrace_log(env: &Env, session: &str) -> Option<Value> {
    let o = env.run(RETRACE, &["log", "--session", session, "--json"]);
    o.status
        .success()
        .then(|| serde_json::from_str(&stdout(&o)).ok())
        .flatten()
}

/// Waits until retrace has recorded `turns` finished turns of `session`.
fn wait_turns(server: &Server, env: &Env, session: &str, turns: usize) {
    server.wait_for(&format!("{turns} finished turn(s) of {session}"), |_| {
        retrace_log(env, session).is_some_and(|log| {
            let entries = log["entries"].as_array().cloned().unwrap_or_default();
            let finished = entries
                .iter()
                .filter(|e| e["kind"] == "turn" && e["state"] != "pending")
                .count();
            finished == turns && log["session"]["pending"].is_null()
        })
    });
}

/// The numbers of `session`'s turns that are applied.
fn applied(env: &Env, session: &str) -> Vec<u64> {
    let log = retrace_log(env, session).unwrap();
    let mut turns: Vec<u64> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "turn" && e["applied"] == true)
        .map(|e| e["number"].as_u64().unwrap())
        .collect();
    turns.sort_unstable();
    turns
}

/// OpenCode's log (every OpenCode process of the home appends to it).
fn opencode_log(home: &AgentHome) -> String {
    let dir = home.data().join("opencode/log");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.sort();
    logs.last()
        .and_then(|l| std::fs::read_to_string(l).ok())
        .unwrap_or_default()
}

/// Whether the directory holds any file, at any depth.
fn holds_files(dir: &Path) -> bool {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .any(|e| e.file_type().is_file())
}

#[test]
fn opencode_revert_and_unrevert_restore_the_files_through_retrace() {
    if missing_cli(opencode_bin().exists(), "OpenCode") {
        return;
    }
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    let model = FakeHttp::start(move |request| chat_answer(request, &counter));
    let env = Env::new();
    let home = AgentHome::new();
    let original = config(model.port);
    env.write("opencode.json", &original);
    env.write("notes.txt", "base\n");

    // The newcomer's one command.
    let mut install = Command::new(RETRACE);
    home.env(&mut install, &env, RETRACE)
        .args(["install", "opencode"]);
    let o = succeeded(install.output().unwrap(), "retrace install opencode");
    assert!(stdout(&o).contains("snapshot"), "{}", stdout(&o));
    let plugin = env.path(".opencode/plugins/retrace.ts");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/opencode/retrace.ts");
    assert_eq!(
        std::fs::read(&plugin).unwrap(),
        std::fs::read(&shipped).unwrap()
    );
    let installed: Value = serde_json::from_str(&env.read("opencode.json")).unwrap();
    assert_eq!(installed["snapshot"], false);
    assert_eq!(
        installed["provider"]["fake"]["name"], "Fake",
        "the rest is kept"
    );

    let mut server = Server::start(&home, &env);
    let a = server.new_session();
    server.prompt(&a, "Please WRITE-HELLO");
    wait_turns(&server, &env, &a, 1);
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    env.write("manual.txt", "by hand\n");
    server.prompt(&a, "Now BASH-EDIT");
    wait_turns(&server, &env, &a, 2);
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");
    // Each tool call was a step of its turn: the write named its file, bash its command.
    let steps = |turn| {
        let steps = env.open().session(&a).steps(turn).unwrap();
        steps
            .iter()
            .map(|s| {
                let files: Vec<String> = s
                    .files
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect();
                (
                    s.tool.clone(),
                    s.summary.clone(),
                    files,
                    s.ended_ms.is_some(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        steps(1),
        [(
            "write".into(),
            "hello.txt".into(),
            vec!["hello.txt".to_string()],
            true
        )]
    );
    assert_eq!(
        steps(2),
        [(
            "bash".into(),
            "printf 'edited by bash\\n' >> notes.txt".into(),
            vec![],
            true
        )]
    );
    let [m1, m2] = <[String; 2]>::try_from(server.prompts(&a)).unwrap();

    // `/undo`: the shell turn.
    server.revert(&a, &m2);
    server.next_toast("undo: turn 2");
    assert_eq!(env.read("notes.txt"), "base\n");
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    assert_eq!(
        env.read("manual.txt"),
        "by hand\n",
        "the edit between turns survives"
    );
    // `/undo` again: the write turn.
    server.revert(&a, &m1);
    server.next_toast("undo: turn 1");
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("notes.txt"), "base\n");
    assert_eq!(env.read("manual.txt"), "by hand\n");
    // `/redo` moves the revert point one prompt forward: turn 1 comes back.
    server.revert(&a, &m2);
    server.next_toast("redo: turn 1");
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    assert_eq!(env.read("notes.txt"), "base\n");
    // Unrevert: turn 2 too.
    server.unrevert(&a);
    server.next_toast("redo: turn 2");
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    assert_eq!(env.read("manual.txt"), "by hand\n");
    // Reverting several prompts at once (the message menu): both turns.
    server.revert(&a, &m1);
    let toast = server.next_toast("undo: turn 2");
    assert!(toast.contains("undo: turn 1"), "{toast}");
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("notes.txt"), "base\n");
    server.unrevert(&a);
    server.next_toast("redo: turn 1");
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");

    // An edit to a file the turn changed is never overwritten.
    env.write("notes.txt", "base\nedited by bash\nmine\n");
    server.revert(&a, &m2);
    let toast = server.next_toast("undo refused");
    assert!(toast.contains("notes.txt"), "{toast}");
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\nmine\n");
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    server.wait_for("OpenCode's revert moved back", |s| {
        s.revert_point(&a).is_none()
    });
    assert_eq!(applied(&env, &a), [1, 2]);
    env.write("notes.txt", "base\nedited by bash\n");

    // A second session keeps its own history.
    let b = server.new_session();
    server.prompt(&b, "WRITE-SECOND please");
    wait_turns(&server, &env, &b, 1);
    assert_eq!(env.read("second.txt"), "second session\n");
    let [b1] = <[String; 1]>::try_from(server.prompts(&b)).unwrap();
    server.revert(&b, &b1);
    server.next_toast("undo: turn 1");
    assert!(!env.path("second.txt").exists());
    assert_eq!(
        env.read("notes.txt"),
        "base\nedited by bash\n",
        "A's turn stays"
    );
    assert_eq!(
        env.read("hello.txt"),
        "hello from opencode\n",
        "A's turn stays"
    );
    assert_eq!(applied(&env, &a), [1, 2]);
    server.unrevert(&b);
    server.next_toast("redo: turn 1");
    assert_eq!(env.read("second.txt"), "second session\n");
    let sessions = env.run(RETRACE, &["sessions"]);
    for id in [&a, &b] {
        assert!(
            stdout(&sessions).contains(id.as_str()),
            "{}",
            stdout(&sessions)
        );
    }

    // A prompt after a revert makes it final: turn 2 is not re-applied.
    server.revert(&a, &m2);
    server.next_toast("undo: turn 2");
    server.prompt(&a, "WRITE-THIRD now");
    wait_turns(&server, &env, &a, 3);
    assert_eq!(env.read("third.txt"), "third\n");
    assert_eq!(
        env.read("notes.txt"),
        "base\n",
        "the reverted turn stays undone"
    );
    assert_eq!(applied(&env, &a), [1, 3]);
    assert_eq!(
        server.toasts().len(),
        server.toasts_seen,
        "no toast: nothing was redone"
    );
    // The same after a revert to a part of an answer (OpenCode then deletes only what
    // follows it).
    server.prompt(&a, "BASH-EDIT again");
    wait_turns(&server, &env, &a, 4);
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");
    let (message, part) = server.last_part_before(&a, server.prompts(&a).last().unwrap());
    server.post(
        &format!("/session/{a}/revert"),
        &json!({"messageID": message, "partID": part}),
    );
    server.next_toast("undo: turn 4");
    assert_eq!(env.read("notes.txt"), "base\n");
    server.prompt(&a, "just talk");
    wait_turns(&server, &env, &a, 5);
    assert_eq!(
        env.read("notes.txt"),
        "base\n",
        "the reverted turn stays undone"
    );
    assert_eq!(applied(&env, &a), [1, 3, 5]);
    assert_eq!(
        server.toasts().len(),
        server.toasts_seen,
        "no toast: nothing was redone"
    );

    // OpenCode kept no snapshot repository of its own.
    let snapshots = home.data().join("opencode/snapshot");
    assert!(
        !holds_files(&snapshots),
        "{} holds OpenCode snapshot data",
        snapshots.display()
    );
    assert_eq!(calls.load(Ordering::Relaxed), 5, "one tool call per prompt");
    drop(server);

    // `opencode run`: the turn ends (after-snapshot recorded) before the process exits.
    let mut run = Command::new(opencode_bin());
    home.env(&mut run, &env, RETRACE)
        .args(["run", "--session", &a, "WRITE-HELLO again"])
        .stdin(Stdio::null());
    let o = output_within(&mut run, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "opencode run: {:?}\n{}\n{}\n{}",
        o.status,
        stdout(&o),
        stderr(&o),
        opencode_log(&home)
    );
    let log = retrace_log(&env, &a).unwrap();
    assert!(log["session"]["pending"].is_null(), "{log}");
    assert_eq!(log["entries"][0]["number"], 6, "{log}");
    assert_eq!(log["entries"][0]["state"], "complete", "{log}");

    // Without the binary: one warning, and OpenCode works as before.
    let missing = env.path("no-such-retrace");
    let mut run = Command::new(opencode_bin());
    home.env(&mut run, &env, missing.to_str().unwrap())
        .args(["run", "WRITE-SECOND without retrace"])
        .stdin(Stdio::null());
    let o = output_within(&mut run, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "opencode run: {}\n{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(env.read("second.txt"), "second session\n");
    let warned = opencode_log(&home)
        .matches("the retrace binary is not on PATH")
        .count();
    assert_eq!(warned, 1, "one warning:\n{}", opencode_log(&home));

    let mut uninstall = Command::new(RETRACE);
    home.env(&mut uninstall, &env, RETRACE)
        .args(["uninstall", "opencode"]);
    succeeded(uninstall.output().unwrap(), "retrace uninstall opencode");
    assert!(!plugin.exists());
    assert_eq!(
        env.read("opencode.json"),
        original,
        "opencode.json is given back byte for byte"
    );
}

/// The plugin by name (`retrace install opencode --npm`: `"plugin": ["retrace-opencode"]` in
/// `opencode.json`), installed by OpenCode itself from a real registry on loopback holding the packages built from this
/// tree (other packages proxied to the machine's registry): with neither `RETRACE_BIN` nor
/// a `retrace` on `PATH`, the plugin runs the binary of its `retrace-cli` dependency, and
/// OpenCode's revert and unrevert restore the files through it.
#[test]
fn opencode_loads_the_plugin_by_name_from_the_npm_registry() {
    if missing_cli(
        opencode_bin().exists() && crate::common::registry::installed(),
        "OpenCode (and Verdaccio)",
    ) {
        return;
    }
    let packages = tempfile::tempdir().unwrap();
    let upstream = crate::common::registry::upstream();
    let (registry, _) = crate::common::registry::publish_tree(packages.path(), Some(&upstream));
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    let model = FakeHttp::start(move |request| chat_answer(request, &counter));
    let env = Env::new();
    let mut home = AgentHome::new();
    home.registry = Some(registry.url.clone());
    env.write("opencode.json", config(model.port));
    env.write("notes.txt", "base\n");
    let mut install = Command::new(RETRACE);
    home.env(&mut install, &env, RETRACE)
        .args(["install", "opencode", "--npm"]);
    succeeded(install.output().unwrap(), "retrace install opencode --npm");
    let installed: Value = serde_json::from_str(&env.read("opencode.json")).unwrap();
    assert_eq!(
        installed["plugin"],
        json!([format!("retrace-opencode@{}", env!("CARGO_PKG_VERSION"))])
    );
    assert_eq!(installed["snapshot"], false);
    assert!(!env.path(".opencode/plugins/retrace.ts").exists());

    let mut server = Server::start(&home, &env);
    let a = server.new_session();
    server.prompt(&a, "Please WRITE-HELLO");
    wait_turns(&server, &env, &a, 1);
    server.prompt(&a, "Now BASH-EDIT");
    wait_turns(&server, &env, &a, 2);
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");
    let [_, m2] = <[String; 2]>::try_from(server.prompts(&a)).unwrap();
    server.revert(&a, &m2);
    server.next_toast("undo: turn 2");
    assert_eq!(env.read("notes.txt"), "base\n");
    assert_eq!(env.read("hello.txt"), "hello from opencode\n");
    server.unrevert(&a);
    server.next_toast("redo: turn 2");
    assert_eq!(env.read("notes.txt"), "base\nedited by bash\n");
    assert!(
        !opencode_log(&home).contains("not on PATH"),
        "{}",
        opencode_log(&home)
    );
}
