//! The agent commands: `hook`, `install`, `uninstall`, `serve` and `mcp`.

use std::path::PathBuf;

use crate::{Config, Session};
use anyhow::Result;

use crate::cli::OK;

/// `retrace mcp`: the session's tools over MCP on stdio until the client goes.
pub fn mcp(session: Session) -> Result<u8> {
    crate::protocol::mcp::run(session).map_err(anyhow::Error::msg)?;
    Ok(OK)
}

/// `retrace serve`: JSON-RPC on stdin/stdout until stdin ends.
pub fn serve() -> u8 {
    let stdin = std::io::stdin();
    crate::protocol::serve::Server::new(Config::from_env(), Box::new(std::io::stdout()))
        .run(stdin.lock());
    OK
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

/// Which settings an install writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The project's shared settings (the default).
    Project,
    /// Claude Code's personal settings of the project (`--local`).
    Local,
    /// The user's settings, for every project (`--user`).
    User,
}

impl Scope {
    /// The scope the flags name.
    pub fn of(user: bool, local: bool) -> Scope {
        match (user, local) {
            (true, _) => Scope::User,
            (false, true) => Scope::Local,
            (false, false) => Scope::Project,
        }
    }
}

/// `retrace install|uninstall AGENT`.
pub fn install(
    agent: &str,
    dir: Option<&PathBuf>,
    scope: Scope,
    add: bool,
    watch: bool,
) -> Result<u8> {
    use crate::protocol::hooks::Agent;
    use crate::protocol::install::{self, Target};
    let user = scope == Scope::User;
    if matches!(agent, "pi" | "omp" | "oh-my-pi") {
        // Pi runs retrace through its extension, which its own package manager installs.
        let adapter = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/pi");
        let path = if adapter.is_dir() {
            adapter.display().to_string()
        } else {
            "<the retrace repository>/adapters/pi".to_string()
        };
        if add {
            println!(
                "Pi and Oh-My-Pi use retrace through an extension, not hooks; nothing was \
                 written. Install it with `pi install {path}` (Pi) or `omp plugin install \
                 {path}` (Oh-My-Pi), then restart the agent and type /undo after a turn."
            );
        } else {
            println!(
                "Pi and Oh-My-Pi use retrace through an extension, not hooks; nothing was \
                 changed. Remove the extension with the agent's own package commands."
            );
        }
        return Ok(crate::cli::REFUSED);
    }
    // The workspace root, as every other command resolves it (not a subfolder of it).
    let project = || -> Result<PathBuf> {
        let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
        Ok(crate::home::resolve_root(&dir, &crate::home::default_home())?.path)
    };
    if agent == "opencode" {
        if scope == Scope::Local {
            return Err(crate::cli::Usage(
                "--local is Claude Code's personal project settings; opencode has none: install \
                 into the project (opencode.json) or --user"
                    .into(),
            )
            .into());
        }
        if watch {
            println!(
                "retrace: opencode's plugin runs `retrace serve`, which watches the workspace \
                 already (--watch changes nothing)"
            );
        }
        return install_opencode(&project()?, user, add);
    }
    let agent = Agent::from_name(agent).ok_or_else(|| {
        crate::cli::Usage(format!(
            "unknown agent {agent:?}; supported: {}, opencode (Pi and Oh-My-Pi: `retrace \
             install pi` says how to install their extension)",
            Agent::names()
        ))
    })?;
    let project = project()?;
    let mut target = Target::new(agent, &project, user);
    if scope == Scope::Local {
        target = target.local().map_err(crate::cli::Usage)?;
    }
    let target = target.remembering_in(&crate::home::default_home());
    let changes = if add {
        let exe = std::env::current_exe()?;
        target
            .hook_command(&exe)
            .map(|c| if watch { format!("{c} --watch") } else { c })
            .and_then(|c| install::install(&target, &c))
    } else {
        install::uninstall(&target)
    }
    .map_err(anyhow::Error::msg)?;
    if changes.lines.is_empty() {
        println!("{}: nothing to change", target.settings().display());
    }
    for line in changes.lines {
        println!("{line}");
    }
    if add && agent.spec().local_settings_file.is_some() {
        println!(
            "{}",
            match scope {
                Scope::Project => {
                    "These are the project's shared settings (usually committed: whoever clones \
                     it gets the hooks); `--local` writes your personal \
                     .claude/settings.local.json instead."
                }
                Scope::Local => {
                    "These are your personal settings of this project \
                     (.claude/settings.local.json, which Claude Code keeps out of git)."
                }
                Scope::User => "These are your user settings: every project gets the hooks.",
            }
        );
    }
    if add {
        println!("{}", target.next_step());
    }
    Ok(OK)
}

/// `retrace install|uninstall opencode`: the plugin and `"snapshot": false`.
fn install_opencode(project: &std::path::Path, user: bool, add: bool) -> Result<u8> {
    use crate::protocol::install::opencode::{self, OpenCode};
    let target = OpenCode::new(project, user, &crate::home::default_home());
    let changes = if add {
        opencode::install(&target, &std::env::current_exe()?)
    } else {
        opencode::uninstall(&target)
    }
    .map_err(anyhow::Error::msg)?;
    if changes.lines.iter().all(|l| l.starts_with("note:")) {
        println!(
            "{} and {}: nothing to change",
            target.plugin().display(),
            target.config.display()
        );
    }
    for line in changes.lines {
        println!("{line}");
    }
    if add {
        println!("{}", target.next_step());
    }
    Ok(OK)
}
