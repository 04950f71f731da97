//! The command line as `--help`, the man pages and the completions show it: commands in
//! groups (as cargo and jj list theirs), one short line each, plumbing for adapters left
//! out of the list, and `--session` shown only where it changes anything.

use std::fmt::Write as _;

use clap::CommandFactory;

use crate::cli::Cli;

/// The groups of the top-level help, in order: a heading and its commands.
const GROUPS: &[(&str, &[&str])] = &[
    ("Get started", &["demo", "install", "uninstall", "status"]),
    (
        "Look at history",
        &["log", "show", "diff", "blame", "sessions", "ui"],
    ),
    (
        "Go back",
        &["undo", "redo", "revert", "navigate", "restore"],
    ),
    (
        "Record",
        &["snapshot", "checkpoint", "turn", "watch", "wrap"],
    ),
    ("Share", &["export", "import", "bundle", "unbundle"]),
    (
        "Maintain",
        &["gc", "repair", "config", "completions", "man"],
    ),
];

/// Commands for agent adapters, not people: hidden from the list, named once below it.
const PLUMBING: &[&str] = &["hook", "serve", "mcp", "step"];

/// Commands on which `--session` changes nothing: it is left out of their help.
const SESSIONLESS: &[&str] = &[
    "snapshot",
    "watch",
    "sessions",
    "import",
    "unbundle",
    "gc",
    "repair",
    "config",
    "install",
    "uninstall",
    "demo",
    "completions",
    "man",
    "serve",
    "hook",
];

/// The commands `-v` changes (they list the paths they write); left out of the others' help.
const VERBOSE: &[&str] = &["restore", "navigate", "undo", "redo", "revert"];

/// The commands with no JSON answer: `--json` is left out of their help (and refused).
pub const JSONLESS: &[&str] = &[
    "watch",
    "wrap",
    "ui",
    "turn round",
    "serve",
    "mcp",
    "hook",
    "install",
    "uninstall",
    "demo",
    "completions",
    "man",
    "maintain-due",
];

/// The commands whose output goes through a pager (`--no-pager`).
const PAGED: &[&str] = &["log", "show", "blame", "diff"];

/// The clap command with the grouped help.
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd.get_arguments().cloned().collect();
    // A subcommand's own argument of the global's id stands in for the global there (clap
    // does not propagate over it): the same option, hidden.
    let hidden = |id: &str| {
        globals
            .iter()
            .find(|a| a.get_id() == id)
            .map(|g| g.clone().global(false).hide(true))
    };
    let with_hidden = |mut c: clap::Command, ids: &[(&str, bool)]| {
        for (id, hide) in ids {
            if let (true, Some(arg)) = (hide, hidden(id)) {
                c = c.arg(arg);
            }
        }
        c
    };
    // In place, so that completions and man pages keep the commands' order.
    let cmd = cmd.mut_subcommands(|sub| {
        let name = sub.get_name().to_string();
        let sub = with_hidden(
            sub,
            &[
                ("session", SESSIONLESS.contains(&name.as_str())),
                ("verbose", !VERBOSE.contains(&name.as_str())),
                ("no_pager", !PAGED.contains(&name.as_str())),
                ("json", JSONLESS.contains(&name.as_str())),
            ],
        );
        sub.mut_subcommands(|inner| {
            let path = format!("{name} {}", inner.get_name());
            with_hidden(inner, &[("json", JSONLESS.contains(&path.as_str()))])
        })
    });
    let list = command_list(&cmd);
    cmd.help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{list}\nOptions:\n{{options}}{{after-help}}"
    ))
}

/// The terminal's width as clap finds it: the terminal's, else `COLUMNS`, else 100; at
/// most 100 (clap's own limit).
fn terminal_width() -> usize {
    let width = terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(100);
    width.clamp(40, 100)
}

/// `text` wrapped at word boundaries to lines of at most `width` characters, every line
/// after the first indented by `indent` spaces.
fn wrapped(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut column = indent;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if column > indent && column + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else if column > indent {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += len;
    }
    out
}

/// The grouped list of commands with their one-line summaries, and the plumbing line,
/// wrapped to the terminal.
fn command_list(cmd: &clap::Command) -> String {
    let name_width = GROUPS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    let width = terminal_width();
    let mut out = String::new();
    for (heading, names) in GROUPS {
        out.push_str(heading);
        out.push_str(":\n");
        for name in *names {
            let about = cmd
                .find_subcommand(name)
                .and_then(clap::Command::get_about)
                .map(ToString::to_string)
                .unwrap_or_default();
            let about = wrapped(&about, name_width + 4, width);
            let _ = writeln!(out, "  {name:<name_width$}  {about}");
        }
        out.push('\n');
    }
    let tail = format!(
        "For agent adapters: {} (`retrace help <command>`). See `retrace help <command>` \
         for more on each.",
        PLUMBING.join(", ")
    );
    out.push_str(&wrapped(&tail, 0, width));
    out.push('\n');
    out
}

#[cfg(test)]
#[path = "help_tests.rs"]
mod tests;
