//! Contract tests of the agent hooks: the JSON objects Claude Code, Codex CLI and Gemini
//! CLI send (one per hook run, on stdin, with the fields of their published schemas), fed
//! to the real `retrace hook <agent>`; and the installers' merges into each agent's
//! settings. `claude_code_e2e.rs` runs the real Claude Code.

use std::io::Write;
use std::process::Stdio;

use crate::common::{Env, RETRACE, stderr, stdout};
use serde_json::{Value, json};

fn hook(env: &Env, event: &Value) -> std::process::Output {
    hook_of(env, "claude-code", event)
}

fn hook_of(env: &Env, agent: &str, event: &Value) -> std::process::Output {
    env.run_with_input(RETRACE, &["hook", agent], event.to_string().as_bytes())
}

fn prompt(env: &Env, text: &str) -> std::process::Output {
    hook(
        env,
        &json!({"session_id": "c0ffee", "transcript_path": "/tmp/t.jsonl",
            "cwd": env.root(), "hook_event_name": "UserPromptSubmit", "prompt": text}),
    )
}

fn decision(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn prompts_are_turns_and_slash_commands_are_answered_by_the_hook() {
    let env = Env::new();
    env.write("src/app.py", "print('v1')\n");
    // A prompt begins a turn and lets it through (no output).
    let o = prompt(&env, "add a greeting and bump the version");
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    // The agent writes a file with its Write tool and changes another through Bash.
    env.write("hello.txt", "hello\n");
    env.write("src/app.py", "print('v2')\n");
    let o = hook(
        &env,
        &json!({"session_id": "c0ffee", "cwd": env.root(), "hook_event_name": "Stop",
            "stop_hook_active": false}),
    );
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );

    // /undo: handled by the hook itself, blocked from reaching the model.
    let d = decision(&prompt(&env, "/undo"));
    assert_eq!(d["decision"], "block");
    let reason = d["reason"].as_str().unwrap();
    assert!(
        reason.contains("restored") && reason.contains("/rewind"),
        "{reason}"
    );
    assert!(!env.path("hello.txt").exists());
    assert_eq!(env.read("src/app.py"), "print('v1')\n");
    // /redo brings both back.
    let d = decision(&prompt(&env, "/redo"));
    assert!(d["reason"].as_str().unwrap().contains("restored"), "{d}");
    assert_eq!(env.read("hello.txt"), "hello\n");
    assert_eq!(env.read("src/app.py"), "print('v2')\n");
    // /checkpoint with a label, and /retrace-log.
    let d = decision(&prompt(&env, "/checkpoint before refactor"));
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("checkpoint 1 (before refactor)"),
        "{d}"
    );
    let d = decision(&prompt(&env, "/retrace-log"));
    assert!(
        d["reason"].as_str().unwrap().contains("turn 1: +1 ~1 -0"),
        "{d}"
    );
    // Nothing to redo is said, not an error.
    let d = decision(&prompt(&env, "/redo"));
    assert!(
        d["reason"].as_str().unwrap().contains("nothing to redo"),
        "{d}"
    );
}

#[test]
fn a_hook_never_breaks_the_agent() {
    let env = Env::new();
    for input in [
        json!("not an object"),
        json!({"hook_event_name": "UserPromptSubmit"}),
        json!({"session_id": "x", "cwd": "/no/such/dir", "hook_event_name": "Stop"}),
    ] {
        let o = hook(&env, &input);
        assert!(o.status.success(), "{input}: exit {:?}", o.status.code());
        assert!(stdout(&o).is_empty(), "{input}: {}", stdout(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{input}: {}", stderr(&o));
    }
    // Garbage on stdin, and an event it does not handle.
    let mut child = env
        .command(RETRACE, &["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{{{").unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    let o = hook(
        &env,
        &json!({"session_id": "x", "cwd": env.root(), "hook_event_name": "SubagentStop"}),
    );
    assert!(o.status.success() && stdout(&o).is_empty() && stderr(&o).is_empty());
}

#[test]
fn install_merges_idempotently_and_uninstall_removes_exactly_what_it_added() {
    let env = Env::new();
    let settings = env.path(".claude/settings.json");
    let theirs = json!({
        "model": "opus",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]}
    });
    env.write(
        ".claude/settings.json",
        serde_json::to_string_pretty(&theirs).unwrap(),
    );
    let root = env.root().display().to_string();
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    for event in ["UserPromptSubmit", "Stop", "SessionStart"] {
        let cmds: Vec<String> = v["hooks"][event]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap().iter())
            .map(|h| h["command"].as_str().unwrap().to_string())
            .collect();
        assert!(
            cmds.iter().any(|c| c.ends_with("hook claude-code")),
            "{event}: {cmds:?}"
        );
    }
    assert_eq!(
        v["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    assert_eq!(v["model"], "opus");
    // Again: nothing changes.
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(stdout(&o).contains("nothing to change"), "{}", stdout(&o));
    let again: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(again, v);
    // Uninstall: back to exactly what the user had.
    let o = env.run(RETRACE, &["-C", &root, "uninstall", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(back, theirs);
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn claude_code_install_adds_command_files_and_leaves_the_users_own() {
    let env = Env::new();
    let root = env.root().display().to_string();
    // The user's own /redo stays as it is.
    env.write(".claude/commands/redo.md", "my own redo\n");
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("redo.md: left alone"), "{}", stdout(&o));
    let undo = env.read(".claude/commands/undo.md");
    assert!(undo.starts_with("---\ndescription: retrace"), "{undo}");
    assert!(undo.contains("disable-model-invocation: true"), "{undo}");
    assert!(
        env.read(".claude/commands/checkpoint.md")
            .contains("argument-hint: [label]")
    );
    assert_eq!(env.read(".claude/commands/redo.md"), "my own redo\n");
    // A reinstall from another binary path replaces the old entry instead of adding one.
    let settings = env.path(".claude/settings.json");
    let mut v = read_json(&settings);
    v["hooks"]["Stop"][0]["hooks"][0]["command"] = json!("'/old/bin/retrace' hook claude-code");
    std::fs::write(&settings, v.to_string()).unwrap();
    let o = env.run(RETRACE, &["-C", &root, "install", "claude-code"]);
    assert!(
        stdout(&o).contains("added hooks for Stop"),
        "{}",
        stdout(&o)
    );
    let v = read_json(&settings);
    assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 1, "{v}");
    // Uninstall removes retrace's files, not the user's, and a changed one is kept.
    env.write(".claude/commands/retrace-log.md", "edited by the user\n");
    let o = env.run(RETRACE, &["-C", &root, "uninstall", "claude-code"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!env.path(".claude/commands/undo.md").exists());
    assert!(!env.path(".claude/commands/checkpoint.md").exists());
    assert_eq!(env.read(".claude/commands/redo.md"), "my own redo\n");
    assert_eq!(
        env.read(".claude/commands/retrace-log.md"),
        "edited by the user\n"
    );
    assert!(!settings.exists() || read_json(&settings).get("hooks").is_none());
}

/// Codex CLI's payloads carry every field its schemas require (`model`, `permission_mode`,
/// `transcript_path`, `turn_id`, ...). Its interface rejects unknown slash commands, so
/// `retrace undo` works as well as `/undo`.
#[test]
fn codex_prompts_are_turns_and_retrace_commands_are_blocked() {
    let env = Env::new();
    env.write("src/lib.rs", "fn v1() {}\n");
    let base = |event: &str| {
        json!({"session_id": "019b9817-5571-7dc0-b3d4-a686d844c413",
            "transcript_path": null, "cwd": env.root(), "hook_event_name": event,
            "model": "gpt-5.5-codex", "permission_mode": "acceptEdits"})
    };
    let with = |event: &str, extra: Value| {
        let mut v = base(event);
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let codex = |v: &Value| hook_of(&env, "codex", v);
    let o = codex(&with("SessionStart", json!({"source": "startup"})));
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    let o = codex(&with(
        "UserPromptSubmit",
        json!({"turn_id": "turn-1", "prompt": "rename v1 to v2"}),
    ));
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    env.write("src/lib.rs", "fn v2() {}\n");
    env.write("NOTES.md", "renamed\n");
    let o = codex(&with(
        "Stop",
        json!({"turn_id": "turn-1", "stop_hook_active": false,
            "last_assistant_message": "Renamed."}),
    ));
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    // The turn is anchored at Codex's turn id.
    let o = env.run(
        RETRACE,
        &[
            "log",
            "--json",
            "--session",
            "019b9817-5571-7dc0-b3d4-a686d844c413",
        ],
    );
    assert!(stdout(&o).contains("turn-1"), "{}", stdout(&o));

    let prompt = |text: &str| {
        let o = codex(&with(
            "UserPromptSubmit",
            json!({"turn_id": "turn-2", "prompt": text}),
        ));
        decision(&o)
    };
    let d = prompt("retrace undo");
    assert_eq!(d["decision"], "block", "{d}");
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("conversation is unchanged"),
        "{d}"
    );
    assert_eq!(env.read("src/lib.rs"), "fn v1() {}\n");
    assert!(!env.path("NOTES.md").exists());
    let d = prompt("/redo");
    assert!(d["reason"].as_str().unwrap().contains("re-applied"), "{d}");
    assert_eq!(env.read("src/lib.rs"), "fn v2() {}\n");
    let d = prompt("retrace log");
    assert!(d["reason"].as_str().unwrap().contains("+1 ~1 -0"), "{d}");
    // Only those exact commands are taken: anything else is an ordinary prompt.
    let o = codex(&with(
        "UserPromptSubmit",
        json!({"turn_id": "turn-3", "prompt": "retrace the steps that broke /undo"}),
    ));
    assert!(
        o.status.success() && stdout(&o).is_empty(),
        "{}",
        stderr(&o)
    );
}

/// Gemini CLI: `BeforeAgent` begins the turn, `AfterAgent` ends it, `SessionEnd` ends one
/// left open; a block is `decision: deny`, and stdout is always JSON.
#[test]
fn gemini_before_and_after_agent_are_turns_and_undo_is_denied() {
    let env = Env::new();
    env.write("app.py", "print(1)\n");
    let base = |event: &str, extra: Value| {
        let mut v = json!({"session_id": "gem-1", "transcript_path": "/tmp/gem-1.json",
            "cwd": env.root(), "hook_event_name": event,
            "timestamp": "2026-11-30T03:00:00.000Z"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let gemini = |v: &Value| {
        let o = hook_of(&env, "gemini", v);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).is_empty(), "{}", stderr(&o));
        serde_json::from_str::<Value>(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("stdout must be JSON ({e}): {}", stdout(&o)))
    };
    assert_eq!(
        gemini(&base("SessionStart", json!({"source": "startup"}))),
        json!({})
    );
    assert_eq!(
        gemini(&base("BeforeAgent", json!({"prompt": "make it print 2"}))),
        json!({})
    );
    env.write("app.py", "print(2)\n");
    let after = base(
        "AfterAgent",
        json!({"prompt": "make it print 2", "prompt_response": "Done.", "stop_hook_active": false}),
    );
    assert_eq!(gemini(&after), json!({}));
    // A second turn the user leaves by quitting: SessionEnd ends it.
    assert_eq!(
        gemini(&base("BeforeAgent", json!({"prompt": "add a test"}))),
        json!({})
    );
    env.write("test_app.py", "assert True\n");
    assert_eq!(
        gemini(&base("SessionEnd", json!({"reason": "exit"}))),
        json!({})
    );

    let d = gemini(&base("BeforeAgent", json!({"prompt": "/undo"})));
    assert_eq!(d["decision"], "deny", "{d}");
    assert!(!env.path("test_app.py").exists());
    assert_eq!(env.read("app.py"), "print(2)\n");
    let d = gemini(&base("BeforeAgent", json!({"prompt": "/undo"})));
    assert_eq!(d["decision"], "deny", "{d}");
    assert_eq!(env.read("app.py"), "print(1)\n");
    // The custom command's expansion of `/checkpoint {{args}}` with no arguments.
    let d = gemini(&base("BeforeAgent", json!({"prompt": "/checkpoint "})));
    assert!(
        d["reason"].as_str().unwrap().contains("checkpoint 1"),
        "{d}"
    );
    // Events it does not handle get an empty answer too.
    assert_eq!(
        gemini(&base("BeforeTool", json!({"tool_name": "write_file"}))),
        json!({})
    );
}

#[test]
fn codex_and_gemini_install_merge_and_uninstall_exactly() {
    let env = Env::new();
    let root = env.root().display().to_string();
    let gemini_theirs = json!({"theme": "dark",
        "hooks": {"BeforeTool": [{"matcher": "write_file",
            "hooks": [{"type": "command", "command": "lint"}]}]}});
    env.write(".gemini/settings.json", gemini_theirs.to_string());
    for agent in ["codex", "gemini"] {
        let o = env.run(RETRACE, &["-C", &root, "install", agent]);
        assert!(o.status.success(), "{agent}: {}", stderr(&o));
        let o = env.run(RETRACE, &["-C", &root, "install", agent]);
        assert!(
            stdout(&o).contains("nothing to change"),
            "{agent}: {}",
            stdout(&o)
        );
    }
    let codex = read_json(&env.path(".codex/hooks.json"));
    for event in ["UserPromptSubmit", "Stop", "SessionStart"] {
        let h = &codex["hooks"][event][0]["hooks"][0];
        assert!(
            h["command"].as_str().unwrap().ends_with("hook codex"),
            "{codex}"
        );
        assert_eq!(h["timeout"], 60, "seconds: {codex}");
    }
    let gemini = read_json(&env.path(".gemini/settings.json"));
    for event in ["BeforeAgent", "AfterAgent", "SessionStart", "SessionEnd"] {
        let h = &gemini["hooks"][event][0]["hooks"][0];
        assert!(
            h["command"].as_str().unwrap().ends_with("hook gemini"),
            "{gemini}"
        );
        assert_eq!(h["timeout"], 60_000, "milliseconds: {gemini}");
        assert_eq!(h["name"], "retrace");
    }
    assert_eq!(gemini["theme"], "dark");
    let undo = env.read(".gemini/commands/undo.toml");
    let parsed: toml::Table = toml::from_str(&undo).unwrap();
    assert_eq!(parsed["prompt"].as_str(), Some("/undo"));
    let checkpoint: toml::Table =
        toml::from_str(&env.read(".gemini/commands/checkpoint.toml")).unwrap();
    assert_eq!(checkpoint["prompt"].as_str(), Some("/checkpoint {{args}}"));
    for agent in ["codex", "gemini"] {
        let o = env.run(RETRACE, &["-C", &root, "uninstall", agent]);
        assert!(o.status.success(), "{agent}: {}", stderr(&o));
    }
    assert_eq!(read_json(&env.path(".gemini/settings.json")), gemini_theirs);
    // Install created .codex/ and .gemini/commands/: uninstall takes them away again.
    assert!(!env.path(".codex").exists());
    assert!(!env.path(".gemini/commands").exists());
}

/// Gemini CLI parses a hook's stdout as JSON: a failed hook prints valid JSON too (and the
/// error on stderr); a sentence that begins like a command reaches the model.
#[test]
fn gemini_gets_json_even_when_the_hook_fails() {
    let env = Env::new();
    for input in [
        json!("not an object"),
        json!({"session_id": "x", "cwd": "/no/such/dir", "hook_event_name": "AfterAgent"}),
    ] {
        let o = hook_of(&env, "gemini", &input);
        assert!(o.status.success(), "{input}");
        let v: Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{input}: stdout is not JSON ({e}): {}", stdout(&o)));
        assert!(v.get("decision").is_none(), "{v}");
        assert!(!stderr(&o).is_empty(), "{input}");
    }
}

#[test]
fn a_sentence_that_begins_like_a_command_is_a_prompt() {
    let env = Env::new();
    env.write("a.txt", "one");
    let o = prompt(
        &env,
        "Retrace checkpoint creation in src/history/mod.rs and explain it",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Not blocked: the prompt reaches the model (a turn begins; nothing on stdout).
    assert!(
        !stdout(&o).contains("\"decision\""),
        "taken as a command: {}",
        stdout(&o)
    );
}

/// One agent's events, as its hooks send them (recorded shapes of each agent's payloads).
struct Agent {
    name: &'static str,
    prompt: &'static str,
    stop: &'static str,
    session: &'static str,
}

const AGENTS: [Agent; 3] = [
    Agent {
        name: "claude-code",
        prompt: "UserPromptSubmit",
        stop: "Stop",
        session: "5d1c2e1e-claude",
    },
    Agent {
        name: "codex",
        prompt: "UserPromptSubmit",
        stop: "Stop",
        session: "019b9817-codex",
    },
    Agent {
        name: "gemini",
        prompt: "BeforeAgent",
        stop: "AfterAgent",
        session: "gem-moving",
    },
];

impl Agent {
    fn send(&self, env: &Env, event: &str, cwd: &std::path::Path, extra: Value) -> Value {
        let mut v = json!({"session_id": self.session, "transcript_path": "/tmp/t.jsonl",
            "cwd": cwd, "hook_event_name": event});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let o = hook_of(env, self.name, &v);
        assert!(o.status.success(), "{}: {}", self.name, stderr(&o));
        assert!(
            stderr(&o).is_empty(),
            "{} {event}: {}",
            self.name,
            stderr(&o)
        );
        let out = stdout(&o);
        if out.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(out.trim()).unwrap()
        }
    }

    fn prompt(&self, env: &Env, text: &str, turn: u32) -> Value {
        self.prompt_in(env, env.root(), text, turn)
    }

    fn prompt_in(&self, env: &Env, cwd: &std::path::Path, text: &str, turn: u32) -> Value {
        self.send(
            env,
            self.prompt,
            cwd,
            json!({"prompt": text, "turn_id": format!("turn-{turn}")}),
        )
    }

    fn stop(&self, env: &Env, cwd: &std::path::Path, again: bool, turn: u32) -> Value {
        self.send(
            env,
            self.stop,
            cwd,
            json!({"stop_hook_active": again, "turn_id": format!("turn-{turn}"),
                "prompt_response": "Done.", "last_assistant_message": "Done."}),
        )
    }

    fn undo(&self, env: &Env) -> String {
        let d = self.prompt(env, "/undo", 99);
        assert!(
            d["decision"] == "block" || d["decision"] == "deny",
            "{}: {d}",
            self.name
        );
        d["reason"].as_str().unwrap().to_string()
    }
}

#[test]
fn an_interrupted_turn_without_a_stop_ends_at_the_next_prompt_and_undo_walks_past_it() {
    for a in &AGENTS {
        let env = Env::new();
        let root = env.root().to_path_buf();
        a.prompt(&env, "one", 1);
        env.write("one", "1");
        a.stop(&env, &root, false, 1);
        // The user interrupts turn two: no stop event comes.
        a.prompt(&env, "two", 2);
        env.write("two", "2");
        a.prompt(&env, "three", 3);
        env.write("three", "3");
        a.stop(&env, &root, false, 3);
        for (gone, left) in [("three", Some("two")), ("two", Some("one")), ("one", None)] {
            let said = a.undo(&env);
            assert!(said.contains("restored files"), "{}: {said}", a.name);
            assert!(!env.path(gone).exists(), "{}: {gone}: {said}", a.name);
            if let Some(left) = left {
                assert!(env.path(left).exists(), "{}: {left}: {said}", a.name);
            }
        }
        let said = a.undo(&env);
        assert!(said.contains("nothing to undo"), "{}: {said}", a.name);
    }
}

#[test]
fn a_second_stop_of_one_turn_extends_it() {
    for a in &AGENTS {
        let env = Env::new();
        let root = env.root().to_path_buf();
        a.prompt(&env, "make a and b", 1);
        env.write("a", "a");
        a.stop(&env, &root, false, 1);
        // Another Stop hook blocked the stop: the agent goes on and stops again.
        env.write("b", "b");
        a.stop(&env, &root, true, 1);
        let said = a.undo(&env);
        assert!(said.contains("restored files"), "{}: {said}", a.name);
        assert!(!env.path("a").exists(), "{}: {said}", a.name);
        assert!(!env.path("b").exists(), "{}: {said}", a.name);
        // A stop that is not a repeat never claims edits made after the turn ended.
        let env = Env::new();
        a.prompt(&env, "make a", 1);
        env.write("a", "a");
        a.stop(&env, &root_of(&env), false, 1);
        env.write("user", "the user's edit");
        a.stop(&env, &root_of(&env), false, 1);
        a.undo(&env);
        assert!(!env.path("a").exists(), "{}", a.name);
        assert_eq!(env.read("user"), "the user's edit", "{}", a.name);
    }
}

fn root_of(env: &Env) -> std::path::PathBuf {
    env.root().to_path_buf()
}

#[test]
fn a_hook_whose_cwd_moved_into_a_subfolder_still_ends_the_turn_in_its_workspace() {
    for a in &AGENTS {
        let env = Env::new();
        // Not a git repository: the workspace is the directory the session started in.
        assert!(!env.path(".git").exists());
        env.write("sub/keep", "k");
        let sub = env.path("sub");
        a.send(
            &env,
            "SessionStart",
            env.root(),
            json!({"source": "startup"}),
        );
        a.prompt(&env, "write x", 1);
        env.write("sub/x", "x");
        // The agent ran `cd sub` in its shell: later events carry that cwd.
        a.stop(&env, &sub, false, 1);
        let o = env.run(RETRACE, &["log", "--json", "--session", a.session]);
        let log: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let turn = &log["entries"][0];
        assert_eq!(turn["state"], "complete", "{}: {log}", a.name);
        assert!(log["session"].is_object(), "{}: {log}", a.name);
        assert_eq!(log["session"]["pending"], Value::Null, "{}: {log}", a.name);
        let d = a.prompt_in(&env, &sub, "/undo", 2);
        let said = d["reason"].as_str().unwrap();
        assert!(said.contains("restored files"), "{}: {said}", a.name);
        assert!(!env.path("sub/x").exists(), "{}", a.name);
        assert!(env.path("sub/keep").exists(), "{}", a.name);
        a.send(&env, "SessionEnd", &sub, json!({"reason": "exit"}));
    }
}

/// `/revert N` and `/diff [N]` (issue 17), answered by the prompt hook.
#[test]
fn revert_and_diff_are_answered_by_the_hook() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    let stop = |env: &Env| {
        let o = hook(
            env,
            &json!({"session_id": "c0ffee", "cwd": env.root(), "hook_event_name": "Stop",
                "stop_hook_active": false}),
        );
        assert!(o.status.success(), "{}", stderr(&o));
    };
    assert!(prompt(&env, "change a").status.success());
    env.write("a.txt", "two\nmore\n");
    stop(&env);
    assert!(prompt(&env, "add b").status.success());
    env.write("b.txt", "b\n");
    stop(&env);
    let d = decision(&prompt(&env, "/diff 1"));
    let reason = d["reason"].as_str().unwrap();
    assert!(
        reason.contains("turn 1 changed 1 file(s): +2 -1"),
        "{reason}"
    );
    assert!(reason.contains("M a.txt  +2 -1"), "{reason}");
    let d = decision(&prompt(&env, "/diff"));
    assert!(
        d["reason"].as_str().unwrap().contains("A b.txt  +1 -0"),
        "{d}"
    );
    let d = decision(&prompt(&env, "/revert 1"));
    let reason = d["reason"].as_str().unwrap();
    assert!(
        reason.contains("revert of turn 1: restored files"),
        "{reason}"
    );
    assert_eq!(env.read("a.txt"), "one\n");
    assert_eq!(env.read("b.txt"), "b\n");
    // Then /undo takes the revert back.
    decision(&prompt(&env, "/undo"));
    assert_eq!(env.read("a.txt"), "two\nmore\n");
}

/// Claude Code fires `SessionStart` again on compact, clear and resume, with the cwd the
/// agent's shell has then: a subfolder of a non-git workspace must not become the session's
/// workspace (two stores, and an `/undo` that takes back only the subfolder's part).
#[test]
fn a_session_start_in_a_subfolder_keeps_the_sessions_workspace() {
    for a in &AGENTS {
        let env = Env::new();
        assert!(!env.path(".git").exists());
        env.write("sub/keep", "k");
        let sub = env.path("sub");
        a.send(
            &env,
            "SessionStart",
            env.root(),
            json!({"source": "startup"}),
        );
        a.prompt(&env, "one", 1);
        env.write("top1", "1");
        env.write("sub/x1", "1");
        a.stop(&env, &sub, false, 1);
        // Compacted while the agent's shell is in `sub`.
        a.send(&env, "SessionStart", &sub, json!({"source": "compact"}));
        a.prompt_in(&env, &sub, "two", 2);
        env.write("top2", "2");
        env.write("sub/x2", "2");
        a.stop(&env, &sub, false, 2);
        let stores = std::fs::read_dir(env.home.path().join("workspaces"))
            .unwrap()
            .count();
        assert_eq!(stores, 1, "{}: the session was re-rooted", a.name);
        for (turn, gone) in [(2, ["top2", "sub/x2"]), (1, ["top1", "sub/x1"])] {
            let d = a.prompt_in(&env, &sub, "/undo", 10 + turn);
            let said = d["reason"].as_str().unwrap();
            assert!(said.contains("restored files"), "{}: {said}", a.name);
            for f in gone {
                assert!(!env.path(f).exists(), "{}: {f} after {said}", a.name);
            }
        }
        assert!(env.path("sub/keep").exists(), "{}", a.name);
    }
}

/// Codex names the turn each Stop ends. A Stop of an earlier turn that arrives late, while
/// the next turn runs, neither ends the running turn (whose later edits would then belong to
/// no turn) nor, with none running, extends the last one.
#[test]
fn a_late_codex_stop_of_an_earlier_turn_leaves_the_running_turn_alone() {
    let a = &AGENTS[1];
    assert_eq!(a.name, "codex");
    let env = Env::new();
    let root = root_of(&env);
    a.prompt(&env, "one", 1);
    env.write("a", "a");
    a.stop(&env, &root, false, 1);
    a.prompt(&env, "two", 2);
    env.write("b", "b");
    a.stop(&env, &root, false, 1);
    a.stop(&env, &root, true, 1);
    let o = env.run(RETRACE, &["log", "--json", "--session", a.session]);
    let log: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(log["session"]["pending"], 2, "{log}");
    env.write("c", "c");
    a.stop(&env, &root, false, 2);
    // The user edits; then turn 1's Stop comes again, as a repeat.
    env.write("user", "the user's edit");
    a.stop(&env, &root, true, 1);
    let said = a.undo(&env);
    assert!(said.contains("restored files"), "{said}");
    for gone in ["b", "c"] {
        assert!(!env.path(gone).exists(), "{gone}: {said}");
    }
    assert_eq!(env.read("a"), "a");
    assert_eq!(env.read("user"), "the user's edit");
}

/// A hook run through a wrapper (`timeout 900 retrace hook …`, `env X=1 …`, the agent's
/// `sh -c` around them, the npm package's launcher): the turn belongs to the agent behind them, not to the wrapper,
/// which exits with the hook; so an interrupted turn ends where the next prompt begins. The
/// test process plays the agent: it runs the hook commands and stays alive.
#[test]
fn a_hook_run_through_a_wrapper_is_owned_by_the_agent_behind_it() {
    let agent = std::process::id();
    let hook = format!("'{RETRACE}' hook claude-code");
    let direct = [RETRACE, "hook", "claude-code"];
    // `; true`: the shell waits for the hook instead of becoming it.
    let (in_timeout, in_env, plain) = (
        format!("timeout 900 {hook}"),
        format!("env X=1 nice -n 1 {hook}; true"),
        format!("{hook}; true"),
    );
    // The npm package's launcher (`node …/retrace-cli/bin/retrace`, running the binary
    // RETRACE_BINARY names): it only runs the binary too.
    let launcher = concat!(env!("CARGO_MANIFEST_DIR"), "/npm/cli/bin/retrace");
    let wrapped: [(&str, Vec<&str>); 6] = [
        ("node", vec![launcher, "hook", "claude-code"]),
        ("timeout", [&["900"][..], &direct].concat()),
        ("env", [&["X=1"][..], &direct].concat()),
        ("sh", vec!["-c", &in_timeout]),
        ("sh", vec!["-c", &in_env]),
        ("timeout", vec!["900", "sh", "-c", &plain]),
    ];
    for (program, args) in &wrapped {
        let env = Env::new();
        let prompt = |text: &str| {
            let event = json!({"session_id": "wrapped", "transcript_path": "/tmp/t.jsonl",
                "cwd": env.root(), "hook_event_name": "UserPromptSubmit", "prompt": text});
            // No deadline for the before-snapshot: a loaded machine makes the hook slow,
            // never the turn conversation-only.
            let mut run = env.command(program, args);
            run.env("RETRACE_HOOK_DEADLINE_MS", "600000")
                .env("RETRACE_BINARY", RETRACE);
            let o = crate::common::output_with_input(&mut run, event.to_string().as_bytes());
            assert!(
                o.status.success() && stderr(&o).is_empty(),
                "{}",
                stderr(&o)
            );
            let o = env.run(crate::common::RETRACE_DUMP, &["sessions", "--json"]);
            let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
            assert_eq!(v[0]["lease"]["pid"], agent, "{program} {args:?}: {v}");
        };
        prompt("one");
        env.write("one", "1");
        // Interrupted: no Stop. The agent, alive, takes the next prompt.
        prompt("two");
        let o = env.run(RETRACE, &["log", "--json", "--session", "wrapped"]);
        let log: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let entries = log["entries"].as_array().unwrap();
        let first = entries.iter().find(|e| e["number"] == 1).unwrap();
        assert_eq!(first["state"], "complete", "{program} {args:?}: {log}");
    }
}

/// Claude Code's PreToolUse and PostToolUse make each tool call a step: two sessions whose
/// turns overlap, one writing with its Write tool, the other with Bash, each `/undo` takes
/// back exactly its own file; a file the user saved while a turn ran, then removed by the
/// agent's `rm`, is in the snapshot taken before the command and comes back byte for byte.
#[test]
fn claude_codes_tool_events_are_steps_that_keep_parallel_sessions_apart() {
    let env = Env::new();
    env.write("notes.txt", "old\n");
    let event = |session: &str, name: &str, extra: Value| {
        let mut e = json!({"session_id": session, "transcript_path": "/tmp/t.jsonl",
            "cwd": env.root(), "hook_event_name": name});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        let o = hook(&env, &e);
        assert!(o.status.success(), "{name}: {}{}", stdout(&o), stderr(&o));
        o
    };
    let tool = |session: &str, id: &str, tool: &str, input: Value, act: &dyn Fn()| {
        let call = json!({"tool_name": tool, "tool_input": input, "tool_use_id": id});
        event(session, "PreToolUse", call.clone());
        act();
        let mut done = call;
        done["tool_response"] = json!({});
        event(session, "PostToolUse", done);
    };
    event("one", "UserPromptSubmit", json!({"prompt": "write a.txt"}));
    event("two", "UserPromptSubmit", json!({"prompt": "write b.txt"}));
    let a = env.path("a.txt");
    tool(
        "one",
        "t1",
        "Write",
        json!({"file_path": a, "content": "by one\n"}),
        &|| env.write("a.txt", "by one\n"),
    );
    // A read-only tool is no step.
    tool("two", "t2", "Read", json!({"file_path": a}), &|| {});
    // The user saves notes.txt; then session two's agent removes it with Bash.
    env.write("notes.txt", "the user's edit\n");
    tool(
        "two",
        "t3",
        "Bash",
        json!({"command": "echo by two > b.txt && rm notes.txt"}),
        &|| {
            env.write("b.txt", "by two\n");
            std::fs::remove_file(env.path("notes.txt")).unwrap();
        },
    );
    event("one", "Stop", json!({"stop_hook_active": false}));
    event("two", "Stop", json!({"stop_hook_active": false}));
    // Each /undo takes back exactly its own file.
    let undo = |session: &str| {
        let o = event(session, "UserPromptSubmit", json!({"prompt": "/undo"}));
        decision(&o)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let said = undo("one");
    assert!(!env.path("a.txt").exists(), "{said}");
    assert_eq!(
        env.read("b.txt"),
        "by two
",
        "{said}"
    );
    let said = undo("two");
    assert!(!env.path("b.txt").exists(), "{said}");
    // The user's edit, which the Bash step destroyed, is in the snapshot taken before it.
    let log = env.run(RETRACE, &["log", "--snapshots", "--json"]);
    let snaps: Value = serde_json::from_str(stdout(&log).trim()).unwrap();
    let before = snaps["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"].as_str().is_some_and(|l| l.contains("Bash")))
        .unwrap_or_else(|| panic!("no snapshot before the Bash step: {snaps}"));
    let id = before["id"].as_str().unwrap();
    let o = env.run(RETRACE, &["restore", id, "--force", "--", "notes.txt"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(env.read("notes.txt"), "the user's edit\n");
}

/// One agent's tool events as its hooks send them: the events' names, its shell and edit
/// tools and their inputs, and whether it names each call (`tool_use_id`).
struct ToolEvents {
    agent: &'static str,
    prompt: &'static str,
    stop: &'static str,
    pre: &'static str,
    post: &'static str,
    shell: &'static str,
    /// The edit tool and its input writing `a.txt` (at `path`) with `text`.
    edit: fn(&std::path::Path, &str) -> (&'static str, Value),
    ids: bool,
}

const TOOL_EVENTS: [ToolEvents; 2] = [
    ToolEvents {
        agent: "codex",
        prompt: "UserPromptSubmit",
        stop: "Stop",
        pre: "PreToolUse",
        post: "PostToolUse",
        // Every Codex shell tool (exec_command, shell, local_shell) is `Bash` to hooks.
        shell: "Bash",
        // Codex's edits are `apply_patch`, its input the patch text, paths from the cwd.
        edit: |_, text| {
            let patch = format!("*** Begin Patch\n*** Add File: a.txt\n+{text}\n*** End Patch\n");
            ("apply_patch", json!({ "command": patch }))
        },
        ids: true,
    },
    ToolEvents {
        agent: "gemini",
        prompt: "BeforeAgent",
        stop: "AfterAgent",
        pre: "BeforeTool",
        post: "AfterTool",
        shell: "run_shell_command",
        edit: |path, text| ("write_file", json!({"file_path": path, "content": text})),
        // Gemini CLI's tool events carry no call id.
        ids: false,
    },
];

/// Codex's PreToolUse / PostToolUse and Gemini CLI's BeforeTool / AfterTool make each tool
/// call a step, as Claude Code's do: two sessions whose turns overlap, one writing with the
/// agent's edit tool, the other with its shell tool, each undo takes back exactly its own
/// file; a file the user saved while a turn ran, then removed by the agent's `rm`, is in the
/// snapshot taken before the command and comes back byte for byte; read-only tools are no
/// steps.
#[test]
fn codex_and_gemini_tool_events_are_steps_that_keep_parallel_sessions_apart() {
    for a in &TOOL_EVENTS {
        let env = Env::new();
        env.write("notes.txt", "old\n");
        let event = |session: &str, name: &str, extra: Value| {
            let mut e = json!({"session_id": session, "transcript_path": "/tmp/t.jsonl",
                "cwd": env.root(), "hook_event_name": name, "turn_id": "turn-1"});
            for (k, v) in extra.as_object().unwrap() {
                e[k] = v.clone();
            }
            let o = hook_of(&env, a.agent, &e);
            assert!(o.status.success(), "{} {name}: {}", a.agent, stderr(&o));
            assert!(stderr(&o).is_empty(), "{} {name}: {}", a.agent, stderr(&o));
            o
        };
        let tool = |session: &str, id: &str, tool: &str, input: Value, act: &dyn Fn()| {
            let mut call = json!({"tool_name": tool, "tool_input": input});
            if a.ids {
                call["tool_use_id"] = json!(id);
            }
            event(session, a.pre, call.clone());
            act();
            call["tool_response"] = json!({});
            event(session, a.post, call);
        };
        event(
            &format!("{}-one", a.agent),
            a.prompt,
            json!({"prompt": "write a.txt"}),
        );
        event(
            &format!("{}-two", a.agent),
            a.prompt,
            json!({"prompt": "write b.txt"}),
        );
        let (one, two) = (format!("{}-one", a.agent), format!("{}-two", a.agent));
        let (edit, input) = (a.edit)(&env.path("a.txt"), "by one");
        tool(&one, "c1", edit, input, &|| env.write("a.txt", "by one\n"));
        // A read-only tool is no step (and gets no hook: the matcher leaves it out).
        tool(
            &two,
            "c2",
            "read_file",
            json!({"file_path": "a.txt"}),
            &|| {},
        );
        env.write("notes.txt", "the user's edit\n");
        tool(
            &two,
            "c3",
            a.shell,
            json!({"command": "echo by two > b.txt && rm notes.txt"}),
            &|| {
                env.write("b.txt", "by two\n");
                std::fs::remove_file(env.path("notes.txt")).unwrap();
            },
        );
        event(&one, a.stop, json!({"stop_hook_active": false}));
        event(&two, a.stop, json!({"stop_hook_active": false}));
        // The steps as recorded: the edit names its file, the shell step was captured around.
        let ws = env.open();
        let steps = ws.session(&one).steps(1).unwrap();
        assert_eq!(steps.len(), 1, "{}: {steps:?}", a.agent);
        assert_eq!(steps[0].tool, edit, "{}", a.agent);
        assert_eq!(steps[0].files, vec![b"a.txt".to_vec()], "{}", a.agent);
        let file = env.path("a.txt").display().to_string();
        // A patch's files as it names them; Gemini's path as given.
        let summary = if a.agent == "codex" {
            "a.txt"
        } else {
            file.as_str()
        };
        assert_eq!(steps[0].summary, summary, "{}", a.agent);
        assert!(steps[0].ended_ms.is_some(), "{}: {steps:?}", a.agent);
        let steps = ws.session(&two).steps(1).unwrap();
        assert_eq!(steps.len(), 1, "{}: {steps:?}", a.agent);
        assert_eq!(steps[0].tool, a.shell, "{}", a.agent);
        assert_eq!(
            steps[0].summary, "echo by two > b.txt && rm notes.txt",
            "{}",
            a.agent
        );
        assert!(
            steps[0].before.is_some() && steps[0].after.is_some(),
            "{}: {steps:?}",
            a.agent
        );
        drop(ws);
        let undo = |session: &str| {
            let o = event(session, a.prompt, json!({"prompt": "/undo"}));
            decision(&o)["reason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let said = undo(&one);
        assert!(!env.path("a.txt").exists(), "{}: {said}", a.agent);
        assert_eq!(env.read("b.txt"), "by two\n", "{}: {said}", a.agent);
        let said = undo(&two);
        assert!(!env.path("b.txt").exists(), "{}: {said}", a.agent);
        // The user's edit, which the shell step destroyed, is in the snapshot before it.
        let log = env.run(RETRACE, &["log", "--snapshots", "--json"]);
        let snaps: Value = serde_json::from_str(stdout(&log).trim()).unwrap();
        let before = snaps["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["label"].as_str().is_some_and(|l| l.contains(a.shell)))
            .unwrap_or_else(|| panic!("{}: no snapshot before the shell step: {snaps}", a.agent));
        let id = before["id"].as_str().unwrap();
        let o = env.run(RETRACE, &["restore", id, "--force", "--", "notes.txt"]);
        assert!(o.status.success(), "{}: {}", a.agent, stderr(&o));
        assert_eq!(env.read("notes.txt"), "the user's edit\n", "{}", a.agent);
    }
}

/// Gemini CLI names no tool call: two calls running at once are told apart by their tool
/// and input, so each end closes its own step, whichever ends first.
#[test]
fn gemini_tool_calls_without_ids_end_their_own_steps() {
    let env = Env::new();
    let event = |name: &str, extra: Value| {
        let mut e = json!({"session_id": "gem-par", "transcript_path": "/tmp/t.jsonl",
            "cwd": env.root(), "hook_event_name": name});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        let o = hook_of(&env, "gemini", &e);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_eq!(decision(&o), json!({}), "{name}");
    };
    let call = |path: &str| {
        json!({"tool_name": "write_file",
            "tool_input": {"file_path": env.path(path), "content": "x"}})
    };
    event("BeforeAgent", json!({"prompt": "write two files"}));
    event("BeforeTool", call("a.txt"));
    event("BeforeTool", call("b.txt"));
    env.write("a.txt", "x");
    env.write("b.txt", "x");
    // The first call ends first: the newest running step is the other one.
    event("AfterTool", call("a.txt"));
    let steps = env.open().session("gem-par").steps(1).unwrap();
    let ended: Vec<(&[u8], bool)> = steps
        .iter()
        .map(|s| (s.files[0].as_slice(), s.ended_ms.is_some()))
        .collect();
    assert_eq!(
        ended,
        vec![(b"a.txt".as_slice(), true), (b"b.txt".as_slice(), false)]
    );
    event("AfterTool", call("b.txt"));
    event("AfterAgent", json!({"stop_hook_active": false}));
    let steps = env.open().session("gem-par").steps(1).unwrap();
    assert!(steps.iter().all(|s| s.ended_ms.is_some()), "{steps:?}");
}

#[test]
fn qwen_prompt_events_naming_the_running_turn_continue_it_and_failures_end_it() {
    // Qwen Code's sequence, as 0.24.4 sends it: the prompt event fires again, with an empty
    // prompt and the same `prompt_id`, when a tool's result goes back to the model; a failed
    // call ends with `PostToolUseFailure`, a failed answer with `StopFailure`.
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let event = |name: &str, turn: u32, extra: Value| {
        let mut e = json!({"session_id": "qw-1", "transcript_path": "/tmp/qw-1.jsonl",
            "cwd": env.root(), "hook_event_name": name, "permission_mode": "yolo",
            "timestamp": "2026-12-06T20:53:33.460Z",
            "prompt_id": format!("qw-1########{turn}")});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        let o = hook_of(&env, "qwen", &e);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        o
    };
    let tool = |name: &str, turn: u32, id: &str, input: Value| {
        event(
            name,
            turn,
            json!({"tool_name": if input.get("command").is_some() { "run_shell_command" }
                else { "edit" }, "tool_input": input, "tool_use_id": id}),
        );
    };
    event("SessionStart", 0, json!({"source": "startup"}));
    let o = event("UserPromptSubmit", 0, json!({"prompt": "append a line"}));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let edit = json!({"file_path": env.path("notes.txt"), "old_string": "x", "new_string": "y"});
    tool("PreToolUse", 0, "toolu_1", edit.clone());
    tool("PostToolUseFailure", 0, "toolu_1", edit);
    event("UserPromptSubmit", 0, json!({"prompt": ""}));
    let shell = json!({"command": "echo more >> notes.txt"});
    tool("PreToolUse", 0, "toolu_2", shell.clone());
    env.write("notes.txt", "original\nmore\n");
    tool("PostToolUse", 0, "toolu_2", shell);
    event("UserPromptSubmit", 0, json!({"prompt": ""}));
    event("Stop", 0, json!({"stop_hook_active": false}));
    // A second turn whose answer fails.
    event("UserPromptSubmit", 1, json!({"prompt": "and another"}));
    env.write("other.txt", "x\n");
    event("StopFailure", 1, json!({"error": "API Error: 400"}));

    let ws = env.open();
    let log = ws.session("qw-1").log().unwrap();
    let turns: Vec<_> = log
        .entries
        .iter()
        .map(|e| (e.number, e.text.clone(), e.counts.added + e.counts.modified))
        .collect();
    assert_eq!(
        turns,
        [
            (2, Some("and another".into()), 1),
            (1, Some("append a line".into()), 1)
        ],
        "one turn per prompt, each ended"
    );
    assert_eq!(
        log.status.pending, None,
        "StopFailure ended the second turn"
    );
    let steps = ws.session("qw-1").steps(1).unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps.iter().all(|s| s.ended_ms.is_some()), "{steps:?}");
    drop(ws);
    // /undo through the command file's prompt: blocked, the second turn taken back.
    let d = decision(&event("UserPromptSubmit", 2, json!({"prompt": "/undo"})));
    assert_eq!(d["decision"], "block", "{d}");
    assert!(!env.path("other.txt").exists());
    assert_eq!(env.read("notes.txt"), "original\nmore\n");
}

#[test]
fn droid_command_prompts_are_stopped_with_continue_false() {
    // Droid reads no `decision` from a prompt hook: only `continue: false` stops a prompt.
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let event = |name: &str, extra: Value| {
        let mut e = json!({"session_id": "dr-1", "transcript_path": "/tmp/dr-1.jsonl",
            "cwd": env.root(), "hook_event_name": name, "permission_mode": "auto-high"});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        let o = hook_of(&env, "droid", &e);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        o
    };
    let o = event(
        "UserPromptSubmit",
        json!({"prompt": "append a line", "message_id": "m1", "has_images": false}),
    );
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let shell = json!({"tool_name": "Execute",
        "tool_input": {"command": "echo more >> notes.txt", "summary": "append"}});
    event("PreToolUse", shell.clone());
    env.write("notes.txt", "original\nmore\n");
    event("PostToolUse", shell);
    event(
        "Stop",
        json!({"stop_hook_active": false, "message_id": "m2"}),
    );
    let steps = env.open().session("dr-1").steps(1).unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert!(steps[0].ended_ms.is_some(), "{steps:?}");

    let d = decision(&event(
        "UserPromptSubmit",
        json!({"prompt": "retrace undo"}),
    ));
    assert_eq!(d["continue"], false, "{d}");
    assert!(d.get("decision").is_none(), "{d}");
    assert!(
        d["stopReason"]
            .as_str()
            .is_some_and(|r| r.contains("retrace: turn 1: restored")),
        "{d}"
    );
    assert_eq!(env.read("notes.txt"), "original\n");
}

#[test]
fn a_qwen_turn_that_goes_on_after_its_end_keeps_what_it_did_since() {
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let event = |session: &str, name: &str, extra: Value| {
        let mut e = json!({"session_id": session, "cwd": env.root(), "hook_event_name": name,
            "prompt_id": format!("{session}########1")});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        let o = hook_of(&env, "qwen", &e);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        o
    };
    let write = |session: &str, file: &str| {
        let call = json!({"tool_name": "write_file", "tool_use_id": format!("toolu-{file}"),
            "tool_input": {"file_path": env.path(file), "content": "x\n"}});
        event(session, "PreToolUse", call.clone());
        env.write(file, "x\n");
        event(session, "PostToolUse", call);
    };
    // A failed answer (StopFailure) the user retries: no new prompt, the same prompt_id.
    event("qa", "UserPromptSubmit", json!({"prompt": "do it"}));
    event("qa", "StopFailure", json!({"error": "API Error: 500"}));
    write("qa", "a.txt");
    event("qa", "UserPromptSubmit", json!({"prompt": ""}));
    event("qa", "Stop", json!({"stop_hook_active": false}));
    // Another Stop hook makes the agent go on: its reason comes as a prompt of the same turn.
    event("qb", "UserPromptSubmit", json!({"prompt": "make b"}));
    event("qb", "Stop", json!({"stop_hook_active": false}));
    event(
        "qb",
        "UserPromptSubmit",
        json!({"prompt": "Run the tests before stopping"}),
    );
    write("qb", "b.txt");
    event("qb", "Stop", json!({"stop_hook_active": true}));

    let ws = env.open();
    for (session, prompt, file) in [("qa", "do it", "a.txt"), ("qb", "make b", "b.txt")] {
        let log = ws.session(session).log().unwrap();
        let turns: Vec<_> = log
            .entries
            .iter()
            .map(|e| (e.text.clone(), e.counts.added))
            .collect();
        assert_eq!(turns, [(Some(prompt.to_string()), 1)], "{session}: {file}");
    }
    drop(ws);
    // Undo takes each back with what it did after its first end.
    for (session, file) in [("qb", "b.txt"), ("qa", "a.txt")] {
        let e = json!({"session_id": session, "cwd": env.root(),
            "hook_event_name": "UserPromptSubmit", "prompt": "/undo",
            "prompt_id": format!("{session}########2")});
        let d = decision(&hook_of(&env, "qwen", &e));
        assert_eq!(d["decision"], "block", "{d}");
        assert!(!env.path(file).exists(), "{session}: {d}");
    }
}
