//! `retrace man`: the man pages, generated from the clap definitions
//! ([`crate::cli::help::command`]) with the sections clap does not know of: exit status,
//! environment, files and examples.

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, Usage};

/// Print the man page of retrace or of one command
///
/// In roff: `retrace man | man -l -`, `retrace man undo | man -l -`; with `--dir`, every
/// page written there as retrace.1, retrace-undo.1, … (for packagers: `man -M`).
#[derive(clap::Args)]
pub struct ManArgs {
    /// The command whose page to print (default: retrace's own).
    command: Option<String>,
    /// Write every page into this directory instead.
    #[arg(long = "dir", value_name = "DIR", conflicts_with = "command")]
    out_dir: Option<PathBuf>,
}

/// Runs `retrace man`.
pub fn run(args: ManArgs, _: &Ctx) -> Result<u8> {
    man(args.command.as_deref(), args.out_dir.as_deref())
}

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap_mangen::roff::{Roff, bold, roman};

/// `retrace man [COMMAND]`, or every page into `dir`.
pub fn man(command: Option<&str>, dir: Option<&Path>) -> Result<u8> {
    let mut top = crate::cli::help::command().disable_help_subcommand(true);
    top.build();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut pages = vec![("retrace".to_string(), page(&top, true)?)];
        for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages.push((format!("retrace-{}", sub.get_name()), page(sub, false)?));
        }
        for (name, text) in &pages {
            let path = dir.join(format!("{name}.1"));
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{} man pages written to {}", pages.len(), dir.display());
        return Ok(OK);
    }
    let text = match command {
        None => page(&top, true)?,
        Some(name) => match top.find_subcommand(name) {
            Some(sub) => page(sub, false)?,
            None => {
                return Err(
                    Usage(format!("no command {name:?}; `retrace --help` lists them")).into(),
                );
            }
        },
    };
    print_all(&text)
}

/// The man page of `cmd` (retrace itself when `top`): clap's sections, then exit status,
/// environment, files and examples.
fn page(cmd: &clap::Command, top: bool) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("retrace {}", env!("CARGO_PKG_VERSION")))
        .manual("retrace manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut out)?;
    }
    let mut roff = Roff::new();
    section(&mut roff, "EXIT STATUS", EXIT_STATUS);
    if top {
        section(&mut roff, "ENVIRONMENT", ENVIRONMENT);
        section(&mut roff, "FILES", FILES);
    }
    let name = cmd.get_name().trim_start_matches("retrace-");
    let examples: Vec<&(&str, &str)> = EXAMPLES.iter().filter(|(c, _)| top || *c == name).collect();
    if !examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (_, line) in examples {
            let (command, what) = line.split_once(" # ").unwrap_or((line, ""));
            roff.control("TP", []);
            roff.text([bold(command.to_string())]);
            roff.text([roman(what.to_string())]);
        }
    }
    if !top {
        roff.control("SH", ["SEE ALSO"]);
        roff.text([bold("retrace"), roman("(1)")]);
    }
    roff.to_writer(&mut out)?;
    if cmd.get_version().is_some() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// A section of paragraphs, each `term: text` as a tagged paragraph.
fn section(roff: &mut Roff, title: &str, items: &[(&str, &str)]) {
    roff.control("SH", [title]);
    for (term, text) in items {
        roff.control("TP", []);
        roff.text([bold(term.to_string())]);
        roff.text([roman(text.to_string())]);
    }
}

const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "Success, an empty answer included (a log of a fresh project, a diff with no changes, a \
         dry run with nothing to do).",
    ),
    (
        "1",
        "Refused by a guard: a conflict, changes no snapshot holds, nothing to undo or redo; \
         nothing was written.",
    ),
    (
        "2",
        "A usage error (a malformed or unknown snapshot, anchor, session or agent; a missing \
         -C directory), or busy: another retrace process holds the workspace; try again.",
    ),
    (
        "3",
        "An error (I/O, a damaged store); the message names the path.",
    ),
    (
        "4",
        "repair left some snapshots broken (their files are gone from the workspace).",
    ),
    (
        "--json",
        "Whatever the exit status, one JSON object on stdout and nothing on stderr: its \
         \"version\", its \"result\" (the kind of answer, one shape per kind: restored, dirty, \
         preview, usage, ...) and \"ok\" (false exactly when the status is not 0); docs/json.md \
         in the source gives every kind's shape.",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "RETRACE_HOME",
        "Where the stores live (default $XDG_STATE_HOME/retrace, else \
         ~/.local/state/retrace).",
    ),
    (
        "RETRACE_SESSION",
        "The session to work on, as --session (which wins).",
    ),
    (
        "RETRACE_RETENTION_DAYS, RETRACE_MAX_STORE_BYTES, RETRACE_MAX_TOTAL_BYTES, …",
        "Most settings can be set in the environment as RETRACE_ and the name in capitals \
         (it wins over the files); `retrace config` lists every setting with its value and \
         where it came from.",
    ),
    (
        "RETRACE_TRACE",
        "Set to 1 to print where each operation spends its time, on stderr.",
    ),
    (
        "RETRACE_PAGER, PAGER",
        "The pager of log, diff, show and blame on a terminal (default less, with LESS=FRX \
         unless LESS is set); empty or cat: none.",
    ),
    (
        "NO_COLOR",
        "Set: diffs are never coloured (as --color=never).",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "$RETRACE_HOME/workspaces/<id>/store.redb",
        "A workspace's store: its snapshots, sessions and every file version (one per \
         workspace root; never inside the workspace).",
    ),
    (
        "~/.config/retrace/config.toml",
        "Your settings, for every workspace.",
    ),
    (
        ".retrace.toml",
        "A project's settings, at the workspace root (they win over yours).",
    ),
    (
        ".gitignore, .git/info/exclude",
        "What a snapshot leaves out, as git does (also without git).",
    ),
];

/// `(command, "example # what it does")`, shown on that command's page and on retrace's.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "demo",
        "retrace demo # a walkthrough in a temporary directory",
    ),
    (
        "install",
        "retrace install claude-code # hooks and /undo for Claude Code in this project",
    ),
    (
        "snapshot",
        "retrace snapshot before-refactor # a labelled snapshot",
    ),
    (
        "status",
        "retrace status # what changed since the last snapshot",
    ),
    ("log", "retrace log --session my-chat # a session's turns"),
    (
        "diff",
        "retrace diff turn:3 -p # what turn 3 changed, as a patch",
    ),
    ("undo", "retrace undo --dry-run # what an undo would write"),
    ("revert", "retrace revert turn:2 # take back turn 2 only"),
    (
        "restore",
        "retrace restore before-refactor -- src/ # bring back one folder",
    ),
    (
        "blame",
        "retrace blame src/main.rs # the turn that wrote each line",
    ),
];

/// Writes generated text to stdout; a reader that stopped early (`| head`) is no error.
pub fn print_all(text: &[u8]) -> Result<u8> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(OK),
    }
}
