//! `retrace demo`: it runs the real CLI and shows each command before its output, explains
//! its words before using them, prints no Rust debug formatting, ends by pointing at
//! `retrace ui` over the history it kept, and refuses `-C` (it always works in a directory
//! of its own).

use crate::common::{Env, RETRACE, stderr, stdout};

#[test]
fn the_demo_shows_each_command_before_its_output_and_keeps_its_history_for_retrace_ui() {
    let env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let o = env
        .command(RETRACE, &["demo"])
        .env("TMPDIR", tmp.path())
        .env("RETRACE_SESSION", "the-users-own")
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let lines: Vec<&str> = out.lines().collect();
    for command in [
        "$ retrace snapshot --label \"before the agent\"",
        "$ retrace turn begin --session demo --anchor msg-1 --prompt \"fix the greeting\"",
        "$ retrace turn end --session demo",
        "$ retrace log --session demo",
        "$ retrace log",
        "$ retrace diff ",
        "$ retrace undo --session demo",
        "$ retrace redo --session demo",
        "$ retrace restore ",
        "$ retrace checkpoint --session demo",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(command)),
            "no `{command}` in:\n{out}"
        );
    }
    // A command's output follows it, indented.
    let undo = lines
        .iter()
        .position(|l| l.starts_with("$ retrace undo"))
        .unwrap();
    assert!(
        lines[undo + 1].starts_with("    turn 1: restored files"),
        "{out}"
    );
    for debug in ["[\"", "Some(", "{ ", "None"] {
        assert!(
            !out.contains(debug),
            "debug formatting {debug:?} in:\n{out}"
        );
    }
    // "host" and "anchor" are explained before a command shows them.
    let first_use = out.find("--anchor").unwrap();
    for explained in ["host is the program", "An anchor is"] {
        let at = out.find(explained).unwrap_or(usize::MAX);
        assert!(at < first_use, "{explained:?} comes too late:\n{out}");
    }
    // It ends by saying how to look at what it made, and that history is there.
    let ui = lines
        .iter()
        .find_map(|l| l.trim().strip_prefix("RETRACE_HOME="))
        .unwrap_or_else(|| panic!("no `retrace ui` line in:\n{out}"));
    let (home, rest) = ui.split_once(' ').unwrap();
    let project = rest.strip_prefix("retrace ui -C ").unwrap();
    let look = env
        .command(RETRACE, &["-C", project, "--session", "demo", "log"])
        .env("RETRACE_HOME", home)
        .output()
        .unwrap();
    assert!(
        stdout(&look).contains("fix the greeting"),
        "{}",
        stdout(&look)
    );
    let kept: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(kept.len(), 1, "the demo keeps one directory");
    assert!(out.contains("Remove it with: rm -rf "), "{out}");
}

#[test]
fn the_demo_refuses_a_workspace_directory_as_a_usage_error() {
    let env = Env::new();
    std::fs::create_dir(env.path("somewhere")).unwrap();
    let o = env.run(RETRACE, &["-C", "somewhere", "demo"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("temporary directory of its own"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_dir(env.path("somewhere")).unwrap().count(), 0);
}
