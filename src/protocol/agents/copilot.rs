//! GitHub's Copilot CLI: a hooks file of retrace's own, `.github/hooks/retrace.json` in a
//! project (loaded only in a folder the user trusts) or `~/.copilot/hooks/retrace.json`
//! (the directory moved by `COPILOT_HOME`), under the capitalised event names, which give
//! Claude Code's payloads (`hook_event_name`, `session_id`, `tool_name`, `tool_input`);
//! no command files: retrace's commands are typed as prompts, as in Codex.

use super::{Agent, AgentSpec};

const SPEC: AgentSpec = AgentSpec {
    name: "copilot",
    aliases: &["copilot-cli"],
    config_dir: ".github/hooks",
    user_config_dir: Some(".copilot/hooks"),
    user_dir_env: Some("COPILOT_HOME"),
    user_env_subdir: "hooks",
    settings_file: "retrace.json",
    // Every hooks file of Copilot says its format's version.
    new_settings: "{\n  \"version\": 1\n}\n",
    local_settings_file: None,
    events: &[
        "UserPromptSubmit",
        "Stop",
        "SessionStart",
        "SessionEnd",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
    ],
    turn_field: None,
    turns_go_on: false,
    prompt_event: "UserPromptSubmit",
    stop_events: &["Stop"],
    // A failed tool call sends `PostToolUseFailure` instead of `PostToolUse`.
    tool_events: ("PreToolUse", &["PostToolUse", "PostToolUseFailure"]),
    // Anchored by Copilot (`^(?:…)$`); the capitalised names of its `bash`, `create` and
    // `edit` tools, which hooks under capitalised events see.
    tool_matcher: "Bash|Write|Edit",
    entry_name: None,
    entry_timeout: 60,
    timeout_key: "timeoutSec",
    block_decision: Some("block"),
    json_when_quiet: false,
    undo_note: "retrace restored the files (shell-made changes too); the conversation is \
                unchanged",
    next_step: "Next: start a new session with `copilot` in this folder and trust it when \
                asked (Copilot loads a project's hooks only in a trusted folder; a session \
                already running does not load new hooks). After a turn, type `retrace undo` \
                as the prompt to put the files back as they were before it, and `retrace \
                redo` to re-apply it.",
    command_file: None,
};

impl Agent {
    /// GitHub Copilot CLI.
    pub const COPILOT: Agent = Agent(&SPEC);
}
