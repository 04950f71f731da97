use super::*;
use serde_json::json;

#[test]
fn retrace_commands_are_recognised_exactly() {
    use PromptCommand::{Checkpoint, Diff, Log, Redo, Revert, Undo};
    let cases = [
        ("/undo", Some(Undo)),
        ("  /undo \n", Some(Undo)),
        ("retrace undo", Some(Undo)),
        ("retrace redo", Some(Redo)),
        ("/UNDO", Some(Undo)),
        ("/Redo", Some(Redo)),
        ("/redo", Some(Redo)),
        ("/retrace-log", Some(Log)),
        ("retrace log", Some(Log)),
        ("/revert 3", Some(Revert(3, None))),
        ("/revert turn:3", Some(Revert(3, None))),
        ("retrace revert 2", Some(Revert(2, None))),
        ("/revert 3.2", Some(Revert(3, Some(2)))),
        ("/revert turn:3.2", Some(Revert(3, Some(2)))),
        ("retrace revert turn:4.1", Some(Revert(4, Some(1)))),
        ("/revert 3.", None),
        ("/revert 3.x", None),
        ("/revert", None),
        ("/revert the last change", None),
        ("/diff", Some(Diff(None))),
        ("/diff 4", Some(Diff(Some(4)))),
        ("retrace diff turn:4", Some(Diff(Some(4)))),
        ("retrace diff", Some(Diff(None))),
        ("/diff of main.rs please", None),
        ("/checkpoint", Some(Checkpoint(None))),
        ("/checkpoint ", Some(Checkpoint(None))),
        (
            "/checkpoint before refactor",
            Some(Checkpoint(Some("before refactor".into()))),
        ),
        ("retrace checkpoint v2", Some(Checkpoint(Some("v2".into())))),
        ("retrace checkpoint", Some(Checkpoint(None))),
        (
            "retrace checkpoint \"before refactor\"",
            Some(Checkpoint(Some("before refactor".into()))),
        ),
        // Sentences that begin with the word are ordinary prompts.
        (
            "Retrace checkpoint creation in src/history/mod.rs and explain it",
            None,
        ),
        ("retrace checkpoint creation in src/history/mod.rs", None),
        ("Retrace redo", None),
        ("retrace undo please", None),
        ("undo /undo", None),
        // Anything else is an ordinary prompt.
        ("/undo the last change to main.rs", None),
        ("retrace the steps that broke /undo", None),
        ("retrace", None),
        ("undo", None),
        ("/undone", None),
        ("", None),
    ];
    for (prompt, expected) in cases {
        assert_eq!(PromptCommand::parse(prompt), expected, "{prompt:?}");
    }
}

#[test]
fn agents_are_named_as_on_the_command_line() {
    for agent in Agent::ALL {
        assert_eq!(Agent::from_name(agent.name()), Some(agent));
    }
    assert_eq!(Agent::from_name("claude"), Some(Agent::CLAUDE_CODE));
    assert_eq!(Agent::from_name("cursor"), None);
    assert_eq!(Agent::from_name("qwen-code"), Some(Agent::QWEN));
    assert_eq!(Agent::from_name("copilot-cli"), Some(Agent::COPILOT));
    assert_eq!(Agent::from_name("factory"), Some(Agent::DROID));
    assert_eq!(
        Agent::names(),
        "claude-code, codex, gemini, qwen, copilot, droid"
    );
}

#[test]
fn each_agents_writing_tools_are_steps_and_name_their_files() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+new\n*** Update File: src/lib.rs\n@@\n-x\n+y\n\
                 *** Move to: src/moved.rs\n*** Delete File: old.txt\n*** Update File: a.txt\n+z\n\
                 *** End Patch\n";
    let cases = [
        ("Bash", json!({"command": "rm -rf build"}), Some(vec![])),
        (
            "Write",
            json!({"file_path": "/w/a.txt"}),
            Some(vec!["/w/a.txt"]),
        ),
        ("Read", json!({"file_path": "/w/a.txt"}), None),
        (
            "apply_patch",
            json!({ "command": patch }),
            Some(vec!["a.txt", "src/lib.rs", "src/moved.rs", "old.txt"]),
        ),
        ("run_shell_command", json!({"command": "ls"}), Some(vec![])),
        (
            "write_file",
            json!({"file_path": "b.txt"}),
            Some(vec!["b.txt"]),
        ),
        (
            "replace",
            json!({"file_path": "/w/c.txt"}),
            Some(vec!["/w/c.txt"]),
        ),
        ("read_file", json!({"file_path": "b.txt"}), None),
    ];
    for (tool, input, files) in cases {
        let want = files.map(|f| f.into_iter().map(str::to_string).collect::<Vec<_>>());
        assert_eq!(tool_writes(tool, &input), want, "{tool}");
    }
    let files = tool_writes("apply_patch", &json!({ "command": patch })).unwrap();
    assert_eq!(
        tool_summary("apply_patch", &json!({ "command": patch }), &files),
        "a.txt, src/lib.rs, src/moved.rs, old.txt"
    );
    assert_eq!(
        tool_summary("Bash", &json!({"command": "cargo test"}), &[]),
        "cargo test"
    );
}

#[test]
fn every_tool_event_installed_has_a_matcher_of_writing_tools() {
    for agent in Agent::ALL {
        let tools: Vec<&str> = agent
            .events()
            .iter()
            .copied()
            .filter(|e| agent.tool_event(e).is_some())
            .collect();
        // One start, then its end (and any failed end).
        assert!(tools.len() >= 2, "{agent:?}: {tools:?}");
        assert_eq!(agent.tool_event(tools[0]), Some(true), "{agent:?}");
        for end in &tools[1..] {
            assert_eq!(agent.tool_event(end), Some(false), "{agent:?} {end}");
        }
    }
    // Gemini CLI's and Qwen Code's matchers are unanchored regular expressions: anchored,
    // no MCP tool that merely contains a name matches.
    for agent in [Agent::GEMINI, Agent::QWEN] {
        let m = agent.tool_matcher();
        assert!(m.starts_with("^(") && m.ends_with(")$"), "{m}");
        for name in m[2..m.len() - 2].split('|') {
            assert!(tool_writes(name, &json!({})).is_some(), "{agent:?} {name}");
        }
    }
    for agent in [Agent::CLAUDE_CODE, Agent::CODEX, Agent::COPILOT, Agent::DROID] {
        for name in agent.tool_matcher().split('|') {
            assert!(tool_writes(name, &json!({})).is_some(), "{agent:?} {name}");
        }
    }
}

#[test]
fn a_tool_call_without_an_id_is_paired_by_its_tool_and_input() {
    let input = json!({"command": "ls"});
    let before = json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command"});
    let (a, derived) = tool_call_id(&before, "run_shell_command", &input);
    assert!(derived);
    assert_eq!(tool_call_id(&before, "run_shell_command", &input).0, a);
    assert_ne!(
        tool_call_id(&before, "run_shell_command", &json!({"command": "pwd"})).0,
        a
    );
    let claude = json!({"tool_use_id": "toolu_1"});
    assert_eq!(
        tool_call_id(&claude, "Bash", &input),
        ("toolu_1".to_string(), false)
    );
}
