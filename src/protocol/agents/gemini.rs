//! Google's Gemini CLI: hooks in `.gemini/settings.json` (timeouts in milliseconds, entries
//! named, stdout always JSON), TOML command files in `.gemini/commands/`.

use super::{Agent, AgentSpec, CommandDoc};

const SPEC: AgentSpec = AgentSpec {
    name: "gemini",
    aliases: &[],
    config_dir: ".gemini",
    user_config_dir: None,
    user_dir_env: None,
    user_env_subdir: "",
    settings_file: "settings.json",
    new_settings: "{}\n",
    local_settings_file: None,
    events: &[
        "BeforeAgent",
        "AfterAgent",
        "SessionStart",
        "SessionEnd",
        "BeforeTool",
        "AfterTool",
    ],
    turn_field: None,
    turns_go_on: false,
    prompt_event: "BeforeAgent",
    stop_events: &["AfterAgent"],
    tool_events: ("BeforeTool", &["AfterTool"]),
    // An unanchored regular expression to Gemini CLI: anchored, so that an MCP tool whose
    // name contains `replace` is not one.
    tool_matcher: "^(run_shell_command|write_file|replace)$",
    // What `/hooks` shows.
    entry_name: Some("retrace"),
    entry_timeout: 60_000,
    timeout_key: "timeout",
    block_decision: Some("deny"),
    json_when_quiet: true,
    undo_note: "retrace restored the files (shell-made changes too); the conversation is \
                unchanged",
    next_step: "Next: start a new session with `gemini` (one already running does not load \
                the new hooks; a project's hooks run only in a folder you trust). After a \
                turn, type /undo to put the files back as they were before it, and /redo to \
                re-apply it.",
    command_file: Some(command_file),
};

/// Gemini CLI sends a command file's prompt, which the prompt hook then answers.
fn command_file(c: &CommandDoc) -> (String, String) {
    let args = if c.hint.is_empty() { "" } else { " {{args}}" };
    let text = format!(
        "# Added by `retrace install gemini`: the retrace hook answers this prompt.\n\
         description = \"retrace: {}\"\nprompt = \"/{}{args}\"\n",
        c.what, c.name
    );
    (format!("commands/{}.toml", c.name), text)
}

impl Agent {
    /// Gemini CLI.
    pub const GEMINI: Agent = Agent(&SPEC);
}
