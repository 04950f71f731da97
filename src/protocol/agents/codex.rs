//! The Codex CLI: hooks in `.codex/hooks.json` (the user directory moved by `CODEX_HOME`);
//! no command files, since its interface rejects unknown slash commands outright.

use super::{Agent, AgentSpec};

const SPEC: AgentSpec = AgentSpec {
    name: "codex",
    aliases: &[],
    config_dir: ".codex",
    user_config_dir: None,
    user_dir_env: Some("CODEX_HOME"),
    user_env_subdir: "",
    settings_file: "hooks.json",
    new_settings: "{}\n",
    local_settings_file: None,
    events: &[
        "UserPromptSubmit",
        "Stop",
        "SessionStart",
        "PreToolUse",
        "PostToolUse",
    ],
    turn_field: Some("turn_id"),
    turns_go_on: false,
    prompt_event: "UserPromptSubmit",
    stop_events: &["Stop"],
    tool_events: ("PreToolUse", &["PostToolUse"]),
    // Every shell tool is `Bash` to Codex's hooks, every edit `apply_patch`.
    tool_matcher: "Bash|apply_patch",
    entry_name: None,
    entry_timeout: 60,
    timeout_key: "timeout",
    block_decision: Some("block"),
    json_when_quiet: false,
    undo_note: "retrace restored the files (shell-made changes too); the conversation is \
                unchanged",
    next_step: "Next: start a new session with `codex`, type /hooks and trust retrace's hooks \
                (Codex runs a new or changed hook only once you trust it; non-interactive \
                `codex exec` skips untrusted hooks, and project hooks also need the project \
                trusted). After a turn, type `retrace undo` as the prompt to put the files \
                back as they were before it, and `retrace redo` to re-apply it: Codex rejects \
                slash commands it does not know.",
    command_file: None,
};

impl Agent {
    /// The Codex CLI.
    pub const CODEX: Agent = Agent(&SPEC);
}
