use super::*;

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
        ("/revert 3", Some(Revert(3))),
        ("/revert turn:3", Some(Revert(3))),
        ("retrace revert 2", Some(Revert(2))),
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
    assert_eq!(Agent::from_name("claude"), Some(Agent::ClaudeCode));
    assert_eq!(Agent::from_name("cursor"), None);
    assert_eq!(Agent::names(), "claude-code, codex, gemini");
}
