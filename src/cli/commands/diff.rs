//! `retrace diff`: what changed between two snapshots, or since the last one.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::{OK, Usage};
use crate::cli::json;
use crate::cli::names::SnapshotNames;
use crate::cli::open::open_reading;
use crate::cli::text::counted;
use crate::object::terminal_line;
use crate::{ObjectId, Workspace};

/// Show what changed between two snapshots, or since the last one
///
/// Paths added, modified and deleted between two snapshots, or between a snapshot and
/// the disk (alone: the last snapshot and the disk, what `status` counts).
#[derive(clap::Args)]
pub struct DiffArgs {
    /// From this snapshot: id or unique prefix (8+ hex digits), label, or `turn:N`,
    /// `turn:N:before`, `checkpoint:N` of the session (default: the last snapshot, so
    /// the changes `status` counts).
    a: Option<String>,
    /// To this snapshot, named the same ways (default: the disk).
    b: Option<String>,
    /// Print unified diffs of the changed files (3 lines of context), as `git diff`.
    #[arg(short = 'p', long)]
    patch: bool,
    /// Print lines added and removed per file, as `git diff --stat`.
    #[arg(long, conflicts_with = "patch")]
    stat: bool,
    /// Print each changed path with A, M or D, sorted by path, as `git diff
    /// --name-status` (the default lists them grouped by kind).
    #[arg(long, conflicts_with_all = ["patch", "stat"])]
    name_status: bool,
    /// Colour the output: on a terminal (auto, unless `NO_COLOR` is set), always or never.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
    color: ColorArg,
    /// Only these files or directories (relative to the workspace root), after `--`.
    #[arg(last = true)]
    paths: Vec<String>,
}

/// Runs `retrace diff`.
pub fn run(args: DiffArgs, cx: &Ctx) -> Result<u8> {
    let DiffArgs {
        a,
        b,
        patch,
        stat,
        name_status,
        color,
        paths,
    } = args;
    let none_yet = |root: &Path| -> anyhow::Error {
        let what = a
            .as_ref()
            .map_or("to compare with".into(), |a| format!("{a:?}"));
        Usage(format!(
            "no snapshot {what}: {} has no snapshots yet (`retrace snapshot` takes one)",
            root.display()
        ))
        .into()
    };
    let ws = match open_reading(cx.dir())? {
        Ok(ws) => ws,
        Err(none) => return Err(none_yet(&none.root)),
    };
    // Without a snapshot named: the last one, against the disk.
    let a = match a.clone() {
        Some(a) => a,
        None => match ws.working_copy().store().reader()?.last_known()? {
            Some(id) => id.to_hex(),
            None => return Err(none_yet(ws.root())),
        },
    };
    let names = SnapshotNames::new(&ws, cx.sid());
    // A step alone names a change: from the workspace when it began to when it ended.
    let (a, b) = match (crate::history::step_name(&a), b) {
        (Some((n, k, false)), None) => (format!("turn:{n}.{k}:before"), Some(a)),
        (_, b) => (a, b),
    };
    let a = names.resolve(&a)?;
    let b = b.map(|b| names.resolve(&b)).transpose()?;
    let show = DiffShow {
        patch,
        stat,
        name_status,
        colour: color.colour(),
        json: cx.json,
    };
    diff(&ws, &a, b.as_ref(), &paths, show)
}

/// `retrace diff A [B]`: to the disk when `b` is absent.
/// How `retrace diff` shows its answer.
#[derive(Clone, Copy)]
#[allow(clippy::struct_excessive_bools)] // independent switches, as clap gives them
pub struct DiffShow {
    /// Unified diffs.
    pub patch: bool,
    /// Lines added and removed per file.
    pub stat: bool,
    /// The changed paths sorted by path, each with its A, M or D.
    pub name_status: bool,
    /// ANSI colours.
    pub colour: bool,
    /// One JSON object.
    pub json: bool,
}

/// `retrace diff`: the changed paths (below `paths`, when given), with `-p` their unified
/// diffs, with `--stat` their line counts.
pub fn diff(
    ws: &Workspace,
    a: &ObjectId,
    b: Option<&ObjectId>,
    paths: &[String],
    show: DiffShow,
) -> Result<u8> {
    let d = ws.diff(a, b)?.restricted_to(paths);
    let patches = if show.patch || show.stat {
        Some(ws.patches(Some(a), b, paths)?)
    } else {
        None
    };
    if show.json {
        let mut v = serde_json::to_value(&d)?;
        if let Some(p) = &patches {
            v["patches"] = serde_json::to_value(p)?;
        }
        json::answer("diff", v)?;
    } else if let Some(p) = &patches {
        if show.patch {
            for f in p {
                print!("{}", patch_text(&f.text, show.colour));
            }
        } else {
            print!("{}", stat_text(p, show.colour));
        }
    } else {
        let mut lines: Vec<(char, &String)> =
            [('A', &d.added), ('M', &d.modified), ('D', &d.deleted)]
                .into_iter()
                .flat_map(|(mark, paths)| paths.iter().map(move |p| (mark, p)))
                .collect();
        if show.name_status {
            lines.sort_by(|x, y| x.1.cmp(y.1));
        }
        for (mark, p) in lines {
            println!("{}", change_line(mark, p, show.colour));
        }
    }
    // No differences is an answer, not a refusal.
    Ok(OK)
}

/// A patch's text, coloured as `git diff` colours it: headers bold, hunk heads cyan, added
/// lines green, removed lines red.
fn patch_text(text: &str, colour: bool) -> String {
    if !colour {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut in_hunk = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let code = if line.starts_with("@@") {
            in_hunk = true;
            "36"
        } else if line.starts_with("diff --git") {
            in_hunk = false;
            "1"
        } else if !in_hunk {
            "1"
        } else if line.starts_with('+') {
            "32"
        } else if line.starts_with('-') {
            "31"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(line);
        } else {
            let _ = writeln!(out, "\x1b[{code}m{body}\x1b[0m");
        }
    }
    out
}

/// `git diff --stat`'s table: each file with its changed lines and a bar of `+` and `-`,
/// then the totals.
fn stat_text(patches: &[crate::patch::FilePatch], colour: bool) -> String {
    const BAR: u64 = 40;
    if patches.is_empty() {
        return String::new();
    }
    let width = patches
        .iter()
        .map(|p| terminal_line(&p.path).chars().count())
        .max()
        .unwrap_or(0);
    let most = patches
        .iter()
        .map(|p| p.added + p.removed)
        .max()
        .unwrap_or(0)
        .max(1);
    let (green, red, end) = if colour {
        ("\x1b[32m", "\x1b[31m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    let mut out = String::new();
    for p in patches {
        let n = p.added + p.removed;
        let scale = |k: u64| {
            if most > BAR {
                (k * BAR).div_ceil(most)
            } else {
                k
            }
        };
        let bar = if p.binary {
            "Bin".to_string()
        } else {
            format!(
                "{n} {green}{}{end}{red}{}{end}",
                "+".repeat(usize::try_from(scale(p.added)).unwrap_or(0)),
                "-".repeat(usize::try_from(scale(p.removed)).unwrap_or(0))
            )
        };
        let _ = writeln!(out, " {:<width$} | {bar}", terminal_line(&p.path));
    }
    let (added, removed): (u64, u64) = patches
        .iter()
        .fold((0, 0), |(a, r), p| (a + p.added, r + p.removed));
    // As git words it: a zero part is left out unless both are zero.
    let _ = write!(out, " {} changed", counted(patches.len() as u64, "file"));
    if added > 0 || removed == 0 {
        let _ = write!(out, ", {}(+)", counted(added, "insertion"));
    }
    if removed > 0 || added == 0 {
        let _ = write!(out, ", {}(-)", counted(removed, "deletion"));
    }
    out.push('\n');
    out
}

/// Whether to colour output: on a terminal, unless `NO_COLOR` is set to anything non-empty
/// (<https://no-color.org>).
pub fn use_colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// One line of a diff: `A path`, green added, yellow modified, red deleted when `colour`.
fn change_line(mark: char, path: &str, colour: bool) -> String {
    let code = match mark {
        'A' => "32",
        'M' => "33",
        _ => "31",
    };
    let path = terminal_line(path);
    if colour {
        format!("\x1b[{code}m{mark}\x1b[0m {path}")
    } else {
        format!("{mark} {path}")
    }
}

/// `--color` of `diff`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ColorArg {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorArg {
    fn colour(self) -> bool {
        match self {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => use_colour(
                crate::cli::pager::stdout_is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_coloured_on_a_terminal_unless_no_color_is_set() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("".as_ref())));
        assert!(!use_colour(true, Some("1".as_ref())));
        assert!(!use_colour(false, None));
        assert_eq!(change_line('A', "a.rs", false), "A a.rs");
        assert_eq!(change_line('D', "a.rs", true), "\x1b[31mD\x1b[0m a.rs");
    }
}
