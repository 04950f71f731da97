//! The workspace commands: `snapshot`, `log`, `diff`, `restore` and `status` (without a
//! session). Paths and labels are printed for a terminal escaped ([`terminal_line`]), exact
//! in `--json`; a patch (`diff -p`) is printed as it is, as `git diff` prints one.

use crate::config::bytes_approx;
use crate::object::terminal_line;
use crate::{ObjectId, RestoreOptions, Session, Workspace};
use std::fmt::Write as _;

use anyhow::Result;

use super::format_time;
use crate::cli::json;
use crate::cli::progress::Bar;
use crate::cli::{NoStore, OK, REFUSED, maintain_later};

/// `retrace snapshot`.
pub fn snapshot(ws: &Workspace, label: Option<String>, json: bool, rescan: bool) -> Result<u8> {
    let bar = Bar::new();
    let last = ws.log()?.into_iter().next().map(|s| s.root);
    let c = if rescan {
        ws.snapshot_rescan(label, &bar)?
    } else {
        ws.snapshot_summary(label, &bar)?
    };
    drop(bar);
    maintain_later(ws.working_copy());
    // The figure `log` shows for this snapshot (file contents, as stored; `new_bytes` also
    // counts the directory listings).
    let added = if last == Some(c.id) {
        0
    } else {
        ws.bytes_added(last, c.id)?
    };
    if json {
        json::answer(
            "snapshot",
            serde_json::json!({
                "id": c.id.to_hex(), "files": c.files, "bytes": c.bytes, "bytes_added": added,
                "new_objects": c.new_objects, "new_bytes": c.new_bytes, "hashed": c.hashed,
                "skipped": c.skipped, "nested_repos": c.nested_repos, "secrets": c.secrets,
                "captured_repos": c.captured_repos, "walked_because": c.walked_because,
            }),
        )?;
    } else {
        println!("snapshot {}", c.id);
        if last == Some(c.id) {
            // The same files as the last snapshot: its row, with the label if one was given.
            println!(
                "no change since {} ({}, {})",
                c.id.short(),
                counted(c.files, "file"),
                bytes_approx(c.bytes)
            );
        } else {
            println!(
                "{}, {}; {} added to the store ({} read)",
                counted(c.files, "file"),
                bytes_approx(c.bytes),
                bytes_approx(added),
                counted(c.hashed, "file")
            );
        }
        for n in &c.nested_repos {
            println!("nested repository left alone: {}", terminal_line(n));
        }
        for n in &c.captured_repos {
            println!("nested repository captured: {}", terminal_line(n));
        }
        for s in &c.skipped {
            println!(
                "skipped {}: {}",
                terminal_line(&s.path),
                terminal_line(&s.reason)
            );
        }
        for s in &c.secrets {
            println!(
                "secret left out: {} (allow it with the allow_secrets setting)",
                terminal_line(s)
            );
        }
    }
    Ok(OK)
}

/// `retrace log` (`--snapshots`): with `paths`, only the snapshots that changed them.
pub fn log(
    ws: Result<&Workspace, &NoStore>,
    paths: &[String],
    max: Option<usize>,
    json: bool,
) -> Result<u8> {
    let mut log = match ws {
        Ok(ws) => ws.snapshot_log(paths)?,
        Err(_) => Vec::new(),
    };
    let empty = log.is_empty();
    log.truncate(max.unwrap_or(usize::MAX));
    if json {
        let rows: Vec<_> = log
            .iter()
            .map(|e| {
                let s = &e.snapshot;
                let mut v = serde_json::json!({"kind": "snapshot", "id": s.root.to_hex(), "time_ms": s.time_ms,
                "label": s.label, "labels": e.labels, "files": s.files, "bytes": s.bytes,
                "bytes_added": e.bytes_added});
                if !paths.is_empty() {
                    v["paths"] = serde_json::to_value(&e.paths).unwrap_or_default();
                }
                v
            })
            .collect();
        json::answer("log", serde_json::json!({"session": null, "entries": rows}))?;
    } else if empty && !paths.is_empty() {
        println!("no snapshot changed {}", terminal_line(&paths.join(", ")));
    } else if empty {
        // An empty answer is a success (as `--json`'s empty `entries` is). Where files are
        // never snapshotted, no snapshot command is suggested.
        let refused = match ws {
            Ok(ws) => ws.conversation_only().map(str::to_string),
            Err(none) => none.refused.clone(),
        };
        match refused {
            Some(why) => println!(
                "no snapshots: {}, so files are never snapshotted here",
                terminal_line(&why)
            ),
            None => println!("no snapshots yet; take one with `retrace snapshot`"),
        }
    } else {
        let added: Vec<String> = log.iter().map(|e| bytes_approx(e.bytes_added)).collect();
        let width = added.iter().map(String::len).max().unwrap_or(0);
        for (e, bytes) in log.iter().zip(&added) {
            let s = &e.snapshot;
            let lines = if paths.is_empty() {
                String::new()
            } else {
                let (a, r) = e
                    .paths
                    .iter()
                    .fold((0, 0), |(a, r), p| (a + p.added, r + p.removed));
                format!("+{a} -{r}  ")
            };
            let files = format!(
                "{:>6} {}",
                s.files,
                if s.files == 1 { "file " } else { "files" }
            );
            println!(
                "{}  {}  {files}  {bytes:>width$} added  {lines}{}",
                s.root.short(),
                format_time(s.time_ms),
                terminal_line(&e.labels.join(", "))
            );
        }
    }
    Ok(OK)
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

/// `n` and `noun`, plural unless `n` is 1: "1 file", "3 files".
fn counted(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `retrace restore`.
pub fn restore(
    ws: &Workspace,
    session: Option<&Session>,
    id: &ObjectId,
    paths: &[String],
    force: bool,
    dry_run: bool,
    json: bool,
) -> Result<u8> {
    let bar = Bar::new();
    // A dry run shows the plan even when the restore would be refused, and says so.
    let (r, refused, v) = if dry_run {
        let d = match session {
            Some(s) => s.restore_dry_run(id, paths, force, &bar)?,
            None => ws.restore_paths_dry_run(id, paths, force, &bar)?,
        };
        let v = json::restore_preview(&d);
        (d.outcome, d.refused, v)
    } else {
        let opts = RestoreOptions {
            force,
            dry_run: false,
        };
        let r = match session {
            Some(s) => s.restore(id, paths, opts, &bar)?,
            None => ws.restore_paths(id, paths, opts, &bar)?,
        };
        let v = json::restored(&r);
        if paths.is_empty() {
            super::warn_lost_installs(ws.working_copy().home(), ws.root());
        }
        (r, None, v)
    };
    drop(bar);
    if json {
        json::print(v);
    } else {
        let (write, delete) = if dry_run {
            ("would write", "would delete")
        } else {
            ("wrote", "deleted")
        };
        // What was left alone first: it is what the user must look at.
        let lines: Vec<String> = r
            .left_alone
            .iter()
            .map(|s| {
                format!(
                    "left alone {}: {}",
                    terminal_line(&s.path),
                    terminal_line(&s.reason)
                )
            })
            .chain(
                r.written
                    .iter()
                    .map(|p| format!("{write} {}", terminal_line(p))),
            )
            .chain(
                r.deleted
                    .iter()
                    .map(|p| format!("{delete} {}", terminal_line(p))),
            )
            .collect();
        super::print_listed(&lines, "");
        if let Some(s) = r.safety_snapshot {
            println!(
                "your unsnapshotted changes were saved first as snapshot {}",
                s.short()
            );
        }
        if !r.verified {
            println!(
                "warning: these paths changed during the restore: {}",
                terminal_line(&r.verify_diff.join(", "))
            );
        }
        let named = terminal_line(&r.paths.join(", ")).into_owned();
        let what = match (dry_run, r.paths.is_empty()) {
            (true, true) => "dry run of restore to".to_string(),
            (false, true) => "restored".to_string(),
            (true, false) => format!("dry run of restore of {named} from"),
            (false, false) => format!("restored {named} from"),
        };
        println!(
            "{what} {}: {} written, {} deleted",
            id.short(),
            r.written.len(),
            r.deleted.len()
        );
        if let Some(f) = &refused {
            // The paths once, one per line (the message names some inline).
            if f.result == "held" {
                println!(
                    "the restore would be refused: {} path(s) hold another writer's work; \
                     leave them out, wait until that turn ends, or pass --force:",
                    f.count
                );
            } else {
                println!(
                    "the restore would be refused: {}:",
                    crate::error::dirty_refusal(f.count)
                );
            }
            for p in &f.paths {
                println!("  {}", terminal_line(p));
            }
            if f.count > f.paths.len() {
                println!("  ... and {} more", f.count - f.paths.len());
            }
        }
    }
    // Nothing to write is an answer (the files already equal the snapshot), not a refusal;
    // a path left alone (someone's edit, a file in the way) is: the disk is not the target.
    Ok(if refused.is_some() || !r.left_alone.is_empty() {
        REFUSED
    } else {
        OK
    })
}

/// `retrace status`.
pub fn status(ws: Result<&Workspace, &NoStore>, json: bool) -> Result<u8> {
    let ws = match ws {
        Ok(ws) => ws,
        Err(none) => return status_of_none(none, json),
    };
    let s = ws.status()?;
    if json {
        json::answer(
            "status",
            serde_json::json!({"session": null, "workspace": s}),
        )?;
    } else {
        println!("workspace  {}", shown_path(&s.root));
        println!(
            "store      {} ({})",
            shown_path(&s.store),
            bytes_approx(s.store_bytes)
        );
        println!("snapshots  {}", s.snapshots);
        // retrace's own temp files are no concern of the reader's (`--json` lists them).
        let shown: Vec<&str> = s
            .exclusions
            .iter()
            .map(String::as_str)
            .filter(|e| !e.contains("retrace-tmp"))
            .collect();
        println!(
            "excluded   {} (always, whatever .gitignore says)",
            terminal_line(&shown.join(", "))
        );
        println!(
            "nested     {}",
            nested_line(s.nested_repos_mode, &s.nested_repos, &s.captured_repos)
        );
        if let Some(why) = &s.conversation_only {
            println!(
                "policy     {}: conversation history only, files never snapshotted",
                terminal_line(why)
            );
        }
        if let Some(p) = &s.pending_recovery {
            println!(
                "recovery   pending: {}; the next retrace command completes it",
                terminal_line(p)
            );
        }
        println!(
            "watcher    {}",
            terminal_line(&watcher_line(
                s.watcher.as_ref(),
                s.walked_because.as_deref()
            ))
        );
        match s.last_known {
            None => println!("state      no snapshot yet"),
            Some(_) if s.changed_count == 0 => {
                println!("state      clean (matches the last known state)");
            }
            Some(k) => {
                println!(
                    "state      {} path(s) changed since {}:",
                    s.changed_count,
                    k.short()
                );
                for p in &s.changed {
                    println!("  {}", terminal_line(p));
                }
            }
        }
    }
    Ok(OK)
}

/// The `watcher` line of `retrace status`: who serves the workspace, since when, what it
/// saw, and why the last capture walked.
fn watcher_line(w: Option<&crate::watch::WatchStatus>, walked: Option<&str>) -> String {
    let Some(w) = w else {
        return "none (captures walk the workspace; `retrace watch --detach` starts one)".into();
    };
    let mut line = format!(
        "pid {} since {}, {} directories watched, {} events; {} snapshots taken from its \
         events, {} by walking the workspace",
        w.pid,
        format_time(w.started_ms),
        w.watches,
        w.events,
        w.vouched,
        w.walks
    );
    if !w.ready {
        line.push_str(" (still starting)");
    }
    if let Some(b) = &w.last_break {
        let _ = write!(line, "; it last lost track because {}", walk_reason(b));
    }
    if let Some(why) = walked.or(w.last_fallback.as_deref()) {
        let _ = write!(line, "; the last walk: {}", walk_reason(why));
    }
    line
}

/// A watcher's reason code (why a capture walked, why its view broke) in plain words.
fn walk_reason(code: &str) -> String {
    match code {
        "no_token" => "the first snapshot since the watcher started".into(),
        "epoch" => "the watcher restarted since the last snapshot".into(),
        "starting" => "the watcher had not finished its first look".into(),
        "cookie_failed" | "cookie_timeout" => {
            "the watcher could not confirm it was up to date".into()
        }
        "too_many_changes" => "too many directories changed at once".into(),
        "sweep" => "a periodic full check".into(),
        "overflow" => "the kernel dropped events (too many at once)".into(),
        "watch_limit" => "the system's limit of watched directories was reached \
                          (fs.inotify.max_user_watches)"
            .into(),
        "unmount" => "a file system under the workspace went away".into(),
        "inconsistent" => "its view of the tree went out of step".into(),
        "root_gone" => "the workspace folder went away".into(),
        other => other.into(),
    }
}

/// `retrace status` of a workspace with no store yet: said without creating one.
fn status_of_none(none: &NoStore, json: bool) -> Result<u8> {
    if json {
        let workspace = serde_json::json!({
            "root": none.root, "store": none.store, "store_bytes": 0, "snapshots": 0,
            "exclusions": [], "last_known": null, "changed": [], "changed_count": 0,
            "nested_repos": [], "pending_recovery": null, "conversation_only": none.refused,
            "nested_repos_mode": nested_mode(&none.root), "captured_repos": [],
        });
        json::answer(
            "status",
            serde_json::json!({"session": null, "workspace": workspace}),
        )?;
        return Ok(OK);
    }
    println!("workspace  {}", shown_path(&none.root));
    match &none.refused {
        Some(why) => {
            println!(
                "policy     {}: conversation history only, files never snapshotted",
                terminal_line(why)
            );
        }
        None => println!(
            "store      none yet: the first snapshot or turn creates {}",
            shown_path(&none.store)
        ),
    }
    println!("state      no snapshot yet");
    Ok(OK)
}

/// A path of the machine (the workspace root, the store) for the terminal.
fn shown_path(path: &std::path::Path) -> String {
    terminal_line(&path.to_string_lossy()).into_owned()
}

/// The `nested_repos` setting of a workspace with no store yet.
fn nested_mode(root: &std::path::Path) -> crate::config::NestedRepos {
    crate::config::Settings::load(Some(root))
        .0
        .nested_repos
        .value
}

/// `retrace status`'s line about nested repositories: the mode and the repositories, as
/// `captured (2): api, app` or `skipped (1): vendor/lib (left alone; ...)`.
fn nested_line(
    mode: crate::config::NestedRepos,
    skipped: &[String],
    captured: &[String],
) -> String {
    use crate::config::NestedRepos;
    let (word, repos) = match mode {
        NestedRepos::Skip => ("skipped", skipped),
        NestedRepos::Capture => ("captured", captured),
    };
    match (mode, repos.is_empty()) {
        (_, true) => format!("none found (nested_repos = \"{mode}\")"),
        (NestedRepos::Skip, false) => format!(
            "{word} ({}): {} (left alone; nested_repos = \"capture\" captures their files)",
            repos.len(),
            terminal_line(&repos.join(", "))
        ),
        (NestedRepos::Capture, false) => {
            format!(
                "{word} ({}): {}",
                repos.len(),
                terminal_line(&repos.join(", "))
            )
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchers_reasons_are_said_in_words() {
        for code in [
            "no_token",
            "epoch",
            "starting",
            "cookie_failed",
            "cookie_timeout",
            "too_many_changes",
            "sweep",
            "overflow",
            "watch_limit",
            "unmount",
            "inconsistent",
            "root_gone",
        ] {
            let said = walk_reason(code);
            assert!(said.contains(' ') && !said.contains(code), "{code}: {said}");
        }
        // An unknown code is shown as it is rather than hidden.
        assert_eq!(walk_reason("new_reason"), "new_reason");
    }

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
