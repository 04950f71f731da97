//! Anthropic's Claude Code: hooks in `.claude/settings.json` (or the project's personal
//! `settings.local.json`), slash-command files in `.claude/commands/`.

use super::{Agent, AgentSpec, CommandDoc, NOT_RUN};

const SPEC: AgentSpec = AgentSpec {
    name: "claude-code",
    aliases: &["claude"],
    config_dir: ".claude",
    user_config_dir: None,
    user_dir_env: Some("CLAUDE_CONFIG_DIR"),
    user_env_subdir: "",
    settings_file: "settings.json",
    new_settings: "{}\n",
    local_settings_file: Some("settings.local.json"),
    events: &[
        "UserPromptSubmit",
        "Stop",
        "SessionStart",
        "SessionEnd",
        "PreToolUse",
        "PostToolUse",
    ],
    turn_field: None,
    turns_go_on: false,
    prompt_event: "UserPromptSubmit",
    stop_events: &["Stop"],
    tool_events: ("PreToolUse", &["PostToolUse"]),
    tool_matcher: "Bash|Edit|Write|MultiEdit|NotebookEdit",
    entry_name: None,
    entry_timeout: 60,
    timeout_key: "timeout",
    block_decision: Some("block"),
    json_when_quiet: false,
    undo_note: "retrace restored the files (shell-made changes too, which Claude Code's own \
                checkpoints miss); type /rewind to move the conversation back as well",
    next_step: "Next: start a new session with `claude` (one already running does not load \
                the new hooks). After a turn, type /undo to put the files back as they were \
                before it, and /redo to re-apply it.",
    command_file: Some(command_file),
};

/// Claude Code runs its own `/undo` and `/checkpoint`, and rejects unknown commands, unless
/// a command file of that name exists; its prompt hook then sees the typed text.
fn command_file(c: &CommandDoc) -> (String, String) {
    let hint = if c.hint.is_empty() {
        String::new()
    } else {
        format!("argument-hint: {}\n", c.hint)
    };
    let text = format!(
        "---\ndescription: retrace: {}\n{hint}disable-model-invocation: true\n---\n{NOT_RUN} \
         claude-code` was run, and do nothing else.\n",
        c.what
    );
    (format!("commands/{}.md", c.name), text)
}

impl Agent {
    /// Claude Code.
    pub const CLAUDE_CODE: Agent = Agent(&SPEC);
}
