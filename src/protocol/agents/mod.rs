//! The agents whose hooks run `retrace hook <agent>`, as data: one [`AgentSpec`] per agent,
//! in a file of its own (`claude_code.rs`, `codex.rs`, `gemini.rs`, `qwen.rs`, `copilot.rs`, `droid.rs`), which install,
//! uninstall and the hooks read. Adding an agent is one new file with its spec and one line
//! in [`Agent::ALL`].

use serde_json::json;

use super::hooks::HookOutput;

mod claude_code;
mod codex;
mod copilot;
mod droid;
mod gemini;
mod qwen;

/// Everything retrace needs to know of one agent with hooks.
#[derive(Debug)]
pub struct AgentSpec {
    /// The name on the command line and in hook commands (`retrace hook <name>`).
    pub name: &'static str,
    /// Other names accepted on the command line.
    pub aliases: &'static [&'static str],
    /// Its configuration directory, in a project or in the user's home (`.claude`).
    pub config_dir: &'static str,
    /// Its configuration directory in the user's home, when that is not `config_dir`
    /// (Copilot: `.copilot/hooks`, its project one being `.github/hooks`).
    pub user_config_dir: Option<&'static str>,
    /// The environment variable by which the agent moves its user directory, if any.
    pub user_dir_env: Option<&'static str>,
    /// Where the hooks file is below the directory `user_dir_env` names (Copilot: `hooks`);
    /// empty: there.
    pub user_env_subdir: &'static str,
    /// The file of its configuration directory that holds hook entries.
    pub settings_file: &'static str,
    /// The text of the settings file when install creates it: `{}`, or what the agent
    /// requires in every hooks file (Copilot: `"version": 1`).
    pub new_settings: &'static str,
    /// Its personal, uncommitted settings file of a project, if it has one
    /// (`retrace install --local`).
    pub local_settings_file: Option<&'static str>,
    /// The events retrace's hook entries are installed for.
    pub events: &'static [&'static str],
    /// The event of a prompt submitted (a turn begins).
    pub prompt_event: &'static str,
    /// The field of an event that names the turn it belongs to, if the agent sends one
    /// (Codex's `turn_id`; Qwen Code's `prompt_id`, which it also sends with the prompt
    /// event it fires again, with an empty prompt, when a tool's result goes back to the
    /// model: the running turn goes on).
    pub turn_field: Option<&'static str>,
    /// Whether a turn goes on after its end under the same name (`turn_field`): Qwen Code
    /// retries a failed answer, or goes on for another Stop hook, naming the ended turn. A
    /// prompt event naming it then begins nothing, and the next stop extends it to what was
    /// done since. Elsewhere a repeated stop never claims edits made after the turn ended.
    pub turns_go_on: bool,
    /// The events of the agent's answer ended (the turn ends): its answer's end, then any
    /// event it sends instead when the answer failed (Qwen Code's `StopFailure`).
    pub stop_events: &'static [&'static str],
    /// The event before a tool call, and those after it: its end, then any event the agent
    /// sends instead when the call failed (Qwen Code's `PostToolUseFailure`).
    pub tool_events: (&'static str, &'static [&'static str]),
    /// The matcher of the tool events' entries: the agent's tools that can write in the
    /// workspace (in the agent's own matcher syntax).
    pub tool_matcher: &'static str,
    /// The `name` of a hook entry, where the agent shows it (`/hooks`).
    pub entry_name: Option<&'static str>,
    /// A hook entry's timeout, in the agent's unit (seconds or milliseconds): one minute.
    pub entry_timeout: u32,
    /// The key of a hook entry's timeout (`timeout`; Copilot: `timeoutSec`).
    pub timeout_key: &'static str,
    /// The `decision` that stops a prompt from reaching the model; `None`: the agent takes
    /// no decision there, but stops on `{"continue": false, "stopReason": …}` (Droid).
    pub block_decision: Option<&'static str>,
    /// Whether the agent parses a hook's stdout as JSON even when it has nothing to say.
    pub json_when_quiet: bool,
    /// What a block says after a files-only undo: how the conversation can follow.
    pub undo_note: &'static str,
    /// What the user does after installing: start a session, then what to type.
    pub next_step: &'static str,
    /// The slash-command file that routes a retrace command to the prompt hook, if the
    /// agent has such files: its path under the configuration directory and its text.
    pub command_file: Option<CommandFile>,
}

/// Writes a command's slash-command file: its path under the configuration directory and
/// its text.
pub type CommandFile = fn(&CommandDoc) -> (String, String);

/// A retrace command as a slash-command file describes it.
#[derive(Debug)]
pub struct CommandDoc {
    /// Its name (`undo`).
    pub name: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// Its argument, as a hint (`N`, `[label]`), or empty.
    pub hint: &'static str,
}

/// The commands retrace answers as prompts, for the agents' slash-command files.
pub const COMMANDS: [CommandDoc; 6] = [
    CommandDoc {
        name: "undo",
        what: "undo the last turn's file changes, shell edits included",
        hint: "",
    },
    CommandDoc {
        name: "redo",
        what: "re-apply the last undone turn's file changes",
        hint: "",
    },
    CommandDoc {
        name: "revert",
        what: "take back one earlier turn's file changes, keeping later ones",
        hint: "N",
    },
    CommandDoc {
        name: "diff",
        what: "list the files a turn changed (default: the last)",
        hint: "[N]",
    },
    CommandDoc {
        name: "checkpoint",
        what: "mark the workspace as it is now",
        hint: "[label]",
    },
    CommandDoc {
        name: "retrace-log",
        what: "list this session's turns and checkpoints",
        hint: "",
    },
];

/// The start of what a command file tells the model when the hook did not answer it.
pub(super) const NOT_RUN: &str = "The retrace hook answers this command before it reaches \
     the model, so retrace did not run. Tell the user to check that `retrace` is on PATH and \
     that `retrace install";

/// An agent with hooks: a handle on its [`AgentSpec`].
#[derive(Clone, Copy)]
pub struct Agent(&'static AgentSpec);

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Agent({})", self.0.name)
    }
}

impl PartialEq for Agent {
    fn eq(&self, other: &Agent) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Agent {}

impl Agent {
    /// Every supported agent: one line per agent.
    pub const ALL: [Agent; 6] = [
        Agent::CLAUDE_CODE,
        Agent::CODEX,
        Agent::GEMINI,
        Agent::QWEN,
        Agent::COPILOT,
        Agent::DROID,
    ];

    /// Its spec.
    #[must_use]
    pub fn spec(self) -> &'static AgentSpec {
        self.0
    }

    /// The agent named on the command line (its name or an alias).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL
            .into_iter()
            .find(|a| a.0.name == name || a.0.aliases.contains(&name))
    }

    /// The name used on the command line and in hook commands.
    #[must_use]
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The names of every supported agent, for messages.
    #[must_use]
    pub fn names() -> String {
        Agent::ALL.map(Agent::name).join(", ")
    }

    pub(super) fn turn_field(self) -> Option<&'static str> {
        self.0.turn_field
    }

    pub(super) fn turns_go_on(self) -> bool {
        self.0.turns_go_on
    }

    pub(super) fn prompt_event(self) -> &'static str {
        self.0.prompt_event
    }

    /// Whether `name` is one of this agent's events of a turn ended.
    pub(super) fn is_stop_event(self, name: &str) -> bool {
        self.0.stop_events.contains(&name)
    }

    /// The events retrace's hook entries are installed for.
    #[must_use]
    pub fn events(self) -> &'static [&'static str] {
        self.0.events
    }

    /// The matcher of the tool events' hook entries ([`AgentSpec::tool_matcher`]).
    #[must_use]
    pub fn tool_matcher(self) -> &'static str {
        self.0.tool_matcher
    }

    /// Whether `name` is this agent's event for the start (true) or the end (false) of a
    /// tool call.
    pub(crate) fn tool_event(self, name: &str) -> Option<bool> {
        let (start, ends) = self.0.tool_events;
        (name == start || ends.contains(&name)).then_some(name == start)
    }

    /// What a block says after a files-only undo or redo: how the conversation can follow.
    pub(super) fn conversation_note(self, redo: bool) -> &'static str {
        if redo {
            "retrace re-applied the files; the conversation is unchanged"
        } else {
            self.0.undo_note
        }
    }

    /// The answer that stops a prompt from reaching the model, with a one-line reason.
    pub(super) fn block(self, reason: &str) -> HookOutput {
        HookOutput {
            stdout: Some(match self.0.block_decision {
                Some(decision) => json!({"decision": decision, "reason": reason}),
                None => json!({"continue": false, "stopReason": reason}),
            }),
        }
    }

    /// The answer when the hook failed (the error goes to stderr): the same as having
    /// nothing to say, so that an agent that parses stdout as JSON still gets JSON.
    #[must_use]
    pub fn on_error(self) -> HookOutput {
        self.quiet()
    }

    /// The answer when the hook has nothing to say.
    pub(super) fn quiet(self) -> HookOutput {
        HookOutput {
            stdout: self.0.json_when_quiet.then(|| json!({})),
        }
    }
}
