//! Factory's Droid: Claude Code's hook format in `.factory/settings.json` (the project's
//! hooks run without a trust step; the user's in `~/.factory/settings.json`); a prompt is
//! stopped with `{"continue": false}` (Droid reads no `decision` there); no command files:
//! retrace's commands are typed as prompts, as in Codex.

use super::{Agent, AgentSpec};

const SPEC: AgentSpec = AgentSpec {
    name: "droid",
    aliases: &["factory"],
    config_dir: ".factory",
    user_config_dir: None,
    user_dir_env: None,
    user_env_subdir: "",
    settings_file: "settings.json",
    new_settings: "{}\n",
    local_settings_file: None,
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
    tool_matcher: "Execute|Create|Edit|ApplyPatch",
    entry_name: None,
    entry_timeout: 60,
    timeout_key: "timeout",
    block_decision: None,
    json_when_quiet: false,
    undo_note: "retrace restored the files (shell-made changes too); the conversation is \
                unchanged",
    next_step: "Next: start a new session with `droid` (one already running does not load \
                the new hooks). After a turn, type `retrace undo` as the prompt to put the \
                files back as they were before it, and `retrace redo` to re-apply it.",
    command_file: None,
};

impl Agent {
    /// Factory's Droid.
    pub const DROID: Agent = Agent(&SPEC);
}
