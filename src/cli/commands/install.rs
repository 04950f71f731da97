//! `retrace install AGENT` and `retrace uninstall AGENT`: add retrace's hooks and commands to
//! an agent's settings, or remove exactly what was added.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, REFUSED, Usage};

/// Add retrace to an agent: its hooks and `/undo` commands
///
/// Adds retrace's hooks (and `/undo`-style command files) to the agent's settings:
/// idempotent, keeps every other hook.
#[derive(clap::Args)]
pub struct InstallArgs {
    /// The agent: `claude-code`, `codex`, `gemini`, `qwen`, `copilot`, `droid` or `opencode`
    /// (its plugin, and
    /// `"snapshot": false` in `opencode.json`).
    agent: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// The hooks also start the workspace's watcher (`retrace watch`) when none runs,
    /// so that captures look only at what changed (claude-code, codex, gemini, qwen,
    /// copilot, droid).
    #[arg(long)]
    watch: bool,
    /// opencode only: name the plugin's npm package (`"plugin": ["retrace-opencode@VERSION"]` in
    /// `opencode.json`), which OpenCode installs with the `retrace` binary it depends on,
    /// instead of copying the plugin file.
    #[arg(long)]
    npm: bool,
}

/// Runs `retrace install`.
pub fn run(args: InstallArgs, cx: &Ctx) -> Result<u8> {
    let scope = args.scope.scope();
    if args.npm && args.agent != "opencode" {
        return Err(Usage(format!(
            "--npm is for opencode (its plugin by package name); {} takes none",
            args.agent
        ))
        .into());
    }
    if args.agent == "opencode" {
        return install_opencode_in(cx.dir(), scope, true, args.npm, args.watch);
    }
    install(&args.agent, cx.dir(), scope, true, args.watch)
}

/// Runs `retrace uninstall`.
pub fn run_uninstall(args: UninstallArgs, cx: &Ctx) -> Result<u8> {
    let scope = args.scope.scope();
    install(&args.agent, cx.dir(), scope, false, false)
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
                 written. Install it with `pi install {path}` (Pi; or, from a released \
                 retrace, `pi install npm:retrace-pi`, which brings the binary) or `omp plugin \
                 install {path}` (Oh-My-Pi), then restart the agent and type /undo after a \
                 turn."
            );
        } else {
            println!(
                "Pi and Oh-My-Pi use retrace through an extension, not hooks; nothing was \
                 changed. Remove the extension with the agent's own package commands."
            );
        }
        return Ok(REFUSED);
    }
    // The workspace root, as every other command resolves it (not a subfolder of it).
    let project = || -> Result<PathBuf> {
        let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
        Ok(crate::home::resolve_root(&dir, &crate::home::default_home())?.path)
    };
    if agent == "opencode" {
        return install_opencode_in(dir, scope, add, false, watch);
    }
    let agent = Agent::from_name(agent).ok_or_else(|| {
        Usage(format!(
            "unknown agent {agent:?}; supported: {}, opencode (Pi and Oh-My-Pi: `retrace \
             install pi` says how to install their extension)",
            Agent::names()
        ))
    })?;
    let project = project()?;
    let mut target = Target::new(agent, &project, user);
    if scope == Scope::Local {
        target = target.local().map_err(Usage)?;
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

/// `retrace install|uninstall opencode` in the workspace holding `dir`.
fn install_opencode_in(
    dir: Option<&PathBuf>,
    scope: Scope,
    add: bool,
    npm: bool,
    watch: bool,
) -> Result<u8> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let project = || -> Result<PathBuf> {
        Ok(crate::home::resolve_root(&dir, &crate::home::default_home())?.path)
    };
    if scope == Scope::Local {
        return Err(Usage(
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
    install_opencode(&project()?, scope == Scope::User, add, npm)
}

/// `retrace install|uninstall opencode`: the plugin (a file, or with `npm` its package name)
/// and `"snapshot": false`.
fn install_opencode(project: &std::path::Path, user: bool, add: bool, npm: bool) -> Result<u8> {
    use crate::protocol::install::opencode::{self, OpenCode};
    let mut target = OpenCode::new(project, user, &crate::home::default_home());
    target.by_name = npm;
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

/// Remove exactly what `install` added
#[derive(clap::Args)]
pub struct UninstallArgs {
    /// The agent: `claude-code`, `codex`, `gemini`, `qwen`, `copilot`, `droid` or
    /// `opencode`.
    agent: String,
    #[command(flatten)]
    scope: ScopeArgs,
}

/// Which settings `install` and `uninstall` work on.
#[derive(clap::Args)]
struct ScopeArgs {
    /// The user's settings (`~/.claude`, `~/.codex`, `~/.gemini`, `~/.qwen`, `~/.copilot/hooks`, `~/.factory`,
    /// `~/.config/opencode`) instead of the project's.
    #[arg(long, conflicts_with_all = ["project", "local"])]
    user: bool,
    /// The project's settings (`.claude/settings.json`, `.codex/hooks.json`,
    /// `.gemini/settings.json`, `.qwen/settings.json`, `.github/hooks/retrace.json`, `.factory/settings.json`; the default), usually committed: shared with everyone who
    /// clones the project.
    #[arg(long, conflicts_with = "local")]
    project: bool,
    /// Claude Code only: your personal settings of the project
    /// (`.claude/settings.local.json`, kept out of git), not the shared ones.
    #[arg(long)]
    local: bool,
}

impl ScopeArgs {
    /// The scope the flags name (`--project` is the default, so it names nothing more).
    fn scope(&self) -> Scope {
        let _ = self.project;
        Scope::of(self.user, self.local)
    }
}
