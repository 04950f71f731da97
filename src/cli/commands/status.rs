//! `retrace status`: the workspace, its store, its watcher and what no snapshot holds yet;
//! with a session, its cursor, undo and redo.

use std::fmt::Write as _;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::cli::open::{NoStore, no_session_yet, open_reading, session_of};
use crate::cli::text::format_time;
use crate::config::bytes_approx;
use crate::object::terminal_line;
use crate::{Pick, Session, Workspace};

/// Show the workspace, its store and what no snapshot holds yet
///
/// Workspace root, store, snapshot count, exclusions and unsnapshotted changes; with
/// `--session`, that session's cursor, undo and redo first.
#[derive(clap::Args)]
pub struct StatusArgs {}

/// Runs `retrace status`.
pub fn run(_: StatusArgs, cx: &Ctx) -> Result<u8> {
    match (open_reading(cx.dir())?, cx.sid()) {
        (Ok(ws), Some(id)) => {
            session_status(&ws, &session_of(&ws, Some(id), Pick::History)?, cx.json)
        }
        // No store, so no session: said as for any unknown one.
        (Err(none), Some(id)) => Err(no_session_yet(id, &none.root)),
        (ws, None) => status(ws.as_ref(), cx.json),
    }
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

/// `retrace status --session`: the session, then the workspace (`"workspace"` in JSON).
pub fn session_status(ws: &crate::Workspace, s: &Session, json: bool) -> Result<u8> {
    let st = s.status()?;
    if json {
        json::answer(
            "status",
            serde_json::json!({"session": st, "workspace": ws.status()?}),
        )?;
    } else {
        println!(
            "session    {}{}",
            st.name.as_ref().map_or(st.session.clone(), |n| format!(
                "{} ({})",
                terminal_line(n),
                st.session
            )),
            if st.subagent { " (subagent)" } else { "" }
        );
        println!(
            "turns      {} ({} checkpoint{})",
            st.turns,
            st.checkpoints,
            if st.checkpoints == 1 { "" } else { "s" }
        );
        match st.cursor {
            Some(c) => println!("cursor     turn:{c}"),
            None => println!("cursor     before the first turn"),
        }
        if let Some(p) = st.pending {
            println!("pending    turn:{p} is in progress");
        }
        println!("can undo   {}", if st.can_undo { "yes" } else { "no" });
        match st.redo_turn {
            Some((t, m)) if st.can_redo => {
                println!(
                    "can redo   yes (turn:{t}, {})",
                    serde_json::to_value(m)?.as_str().unwrap_or("")
                );
            }
            _ => println!("can redo   no"),
        }
        println!();
        status(Ok(ws), false)?;
    }
    Ok(OK)
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
}
