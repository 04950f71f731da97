//! `retrace hook AGENT` (for adapters): one agent hook event, JSON on stdin.

use anyhow::Result;

use crate::Config;
use crate::cli::commands::Ctx;
use crate::cli::exit::OK;

/// Handle one agent hook event (JSON on stdin; for adapters)
///
/// Never fails the agent: errors are one line on stderr and exit 0.
#[derive(clap::Args)]
#[command(hide = true)]
pub struct HookArgs {
    /// The agent: `claude-code`, `codex`, `gemini`, `qwen`, `copilot` or `droid`.
    agent: String,
    /// Start the workspace's watcher (`retrace watch`) when none runs.
    #[arg(long)]
    watch: bool,
}

/// Runs `retrace hook`.
pub fn run(args: HookArgs, _: &Ctx) -> Result<u8> {
    Ok(hook(&args.agent, args.watch))
}

/// `retrace hook AGENT`: reads the event, prints the decision; any failure is one line on
/// stderr and exit 0, so a hook never blocks the user's prompt by accident.
pub fn hook(agent: &str, watch: bool) -> u8 {
    use crate::protocol::hooks::{self, Agent};
    use std::io::Read;
    let Some(agent) = Agent::from_name(agent) else {
        eprintln!(
            "retrace: unknown agent {agent:?} for hooks; supported: {}",
            Agent::names()
        );
        return OK;
    };
    let mut input = String::new();
    let event = std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&input).map_err(|e| format!("bad hook input: {e}")));
    let config = Config::from_env();
    if watch
        && let Ok(e) = &event
        && let Some(root) = hooks::event_root(agent, e, &config)
    {
        super::watch::ensure(&root);
    }
    match event.and_then(|e| hooks::handle(agent, &e, &config)) {
        Ok(out) => {
            if let Some(v) = out.stdout {
                println!("{v}");
            }
        }
        Err(e) => {
            eprintln!("retrace: {e}");
            if let Some(v) = agent.on_error().stdout {
                println!("{v}");
            }
        }
    }
    OK
}
