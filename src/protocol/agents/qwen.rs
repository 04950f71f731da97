//! Alibaba's Qwen Code: Claude Code's hook events and format in `.qwen/settings.json` (the
//! user directory moved by `QWEN_HOME`; timeouts in seconds, entries named), Gemini CLI's
//! TOML command files in `.qwen/commands/`.

use super::{Agent, AgentSpec, CommandDoc};

const SPEC: AgentSpec = AgentSpec {
    name: "qwen",
    aliases: &["qwen-code"],
    config_dir: ".qwen",
    user_config_dir: None,
    user_dir_env: Some("QWEN_HOME"),
    user_env_subdir: "",
    settings_file: "settings.json",
    new_settings: "{}\n",
    local_settings_file: None,
    events: &[
        "UserPromptSubmit",
        "Stop",
        "StopFailure",
        "SessionStart",
        "SessionEnd",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
    ],
    turn_field: Some("prompt_id"),
    turns_go_on: true,
    prompt_event: "UserPromptSubmit",
    // A turn that ends on an API error or a detected loop sends `StopFailure` instead.
    stop_events: &["Stop", "StopFailure"],
    // A tool call that fails sends `PostToolUseFailure` instead of `PostToolUse`.
    tool_events: ("PreToolUse", &["PostToolUse", "PostToolUseFailure"]),
    // A regular expression, unanchored unless anchored: anchored, so that an MCP tool whose
    // name contains `edit` is not one.
    tool_matcher: "^(run_shell_command|write_file|edit|notebook_edit)$",
    // What `/hooks` shows.
    entry_name: Some("retrace"),
    // Seconds (a value of 1000 or more is read as milliseconds).
    entry_timeout: 60,
    timeout_key: "timeout",
    block_decision: Some("block"),
    json_when_quiet: false,
    undo_note: "retrace restored the files (shell-made changes too); the conversation is \
                unchanged",
    next_step: "Next: start a new session with `qwen` (one already running does not load \
                the new hooks; with folder trust turned on, a project's hooks run only in a \
                folder you trust). After a turn, type /undo to put the files back as they \
                were before it, and /redo to re-apply it; Qwen Code's own /diff stays its \
                own: type /retrace-diff for retrace's.",
    command_file: Some(command_file),
};

/// Qwen Code sends a command file's prompt, which the prompt hook then answers. Its own
/// `/diff` keeps its name: retrace's is `/retrace-diff`.
fn command_file(c: &CommandDoc) -> (String, String) {
    let args = if c.hint.is_empty() { "" } else { " {{args}}" };
    let name = if c.name == "diff" { "retrace-diff" } else { c.name };
    let text = format!(
        "# Added by `retrace install qwen`: the retrace hook answers this prompt.\n\
         description = \"retrace: {}\"\nprompt = \"/{}{args}\"\n",
        c.what, c.name
    );
    (format!("commands/{name}.toml"), text)
}

impl Agent {
    /// Qwen Code.
    pub const QWEN: Agent = Agent(&SPEC);
}
