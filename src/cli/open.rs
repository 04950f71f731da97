//! Opening what a command works on: the workspace (for reading, for snapshotting), the
//! session a command names or the one history implies (the library's resolver,
//! [`Workspace::choose_session`], worded here), with the workspace's warnings said once.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::exit::{Refused, Usage};
use crate::cli::text::{format_time, shown_name};
use crate::object::{terminal_line, terminal_text};
use crate::{Choice, SessionRef};
use crate::{Config, Pick, Session, Workspace};

pub fn open(dir: Option<&PathBuf>) -> Result<Workspace> {
    open_with(dir, &Config::from_env(), false)
}

/// For the commands that only read (`status`, `log`, `diff`, `sessions`): they answer at
/// once while another process restores, saying so, instead of waiting for it; and asking
/// never creates a store: `Err(NoStore)` when the workspace has none yet.
pub fn open_reading(dir: Option<&PathBuf>) -> Result<Result<Workspace, NoStore>> {
    let config = Config::from_env().for_reading();
    let path = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let store = Workspace::locate_store(&path, &config)?;
    if !store.exists() {
        let root = crate::home::resolve_root(&path, config.home())?;
        return Ok(Err(NoStore {
            root: root.path,
            store,
            refused: root.refused,
        }));
    }
    open_with(dir, &config, true).map(Ok)
}

/// [`open_reading`] for `show` and `blame`, which need a history: none yet is a usage error.
pub fn reading_history(dir: Option<&PathBuf>) -> Result<Workspace> {
    match open_reading(dir)? {
        Ok(ws) => Ok(ws),
        Err(none) => Err(Usage(format!(
            "{} has no history yet: turns appear once an agent's hooks run (see `retrace \
             install`), snapshots with `retrace snapshot`",
            none.root.display()
        ))
        .into()),
    }
}

/// A workspace with no store yet: what a read-only command answers from.
pub struct NoStore {
    /// The workspace root.
    pub root: PathBuf,
    /// Where its store will be.
    pub store: PathBuf,
    /// Why files are never snapshotted there, if they are not.
    pub refused: Option<String>,
}

/// Opens the workspace and prints its warnings; with `says_refusal`, not the one that files
/// are never snapshotted here, which the command's own answer says (status, log, a refused
/// snapshot): once is enough.
pub fn open_with(dir: Option<&PathBuf>, config: &Config, says_refusal: bool) -> Result<Workspace> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let ws = Workspace::open(&dir, config)?;
    let refused = ws.conversation_only().map(|why| format!("{why}:"));
    for w in ws.warnings() {
        if !says_refusal || refused.as_ref().is_none_or(|r| !w.starts_with(r.as_str())) {
            eprintln!("retrace: warning: {}", terminal_text(&w));
        }
    }
    // What a background maintenance pass warned about since the last command: said once.
    for w in ws.take_deferred_warnings().unwrap_or_default() {
        eprintln!("retrace: warning: {}", terminal_text(&w));
    }
    Ok(ws)
}

pub fn session(dir: Option<&PathBuf>, id: Option<&str>, pick: Pick) -> Result<Session> {
    if pick != Pick::Create
        && let Err(none) = open_reading(dir)?
    {
        // No store, so no session with history: said without making one.
        return Err(match id {
            Some(id) => no_session_yet(id, &none.root),
            None => Refused(format!(
                "no session in {} has turns or checkpoints yet: nothing to do (an agent's \
                 turns appear here once its hooks run; see `retrace install`)",
                none.root.display()
            ))
            .into(),
        });
    }
    session_of(&open(dir)?, id, pick)
}

/// [`session`] for `log --session`, which only reads: a workspace with no store yet has
/// no session (and asking creates none).
pub fn session_reading(dir: Option<&PathBuf>, id: &str) -> Result<Session> {
    match open_reading(dir)? {
        Ok(ws) => session_of(&ws, Some(id), Pick::History),
        Err(none) => Err(no_session_yet(id, &none.root)),
    }
}

/// The usage error for `--session ID` where no session began yet.
pub fn no_session_yet(id: &str, root: &Path) -> anyhow::Error {
    Usage(format!(
        "there is no session {id:?} in {}, nor any other yet (a session begins with its first \
         turn: an agent's hooks, or `retrace --session NAME turn begin`)",
        root.display()
    ))
    .into()
}

/// One line per session, for messages that list them.
pub fn session_lines(list: &[crate::SessionInfo]) -> String {
    use std::fmt::Write as _;
    list.iter().fold(String::new(), |mut out, s| {
        let _ = write!(
            out,
            "\n  {}  (key {}; {} turn{}, {} checkpoint{}, last active {}{})",
            shown_name(s),
            s.id,
            s.turns,
            if s.turns == 1 { "" } else { "s" },
            s.checkpoints,
            if s.checkpoints == 1 { "" } else { "s" },
            format_time(s.touched_ms),
            s.pending
                .map_or(String::new(), |n| format!(", turn {n} open"))
        );
        out
    })
}

/// The session `id` names (its host id or a unique key prefix) or, without one, the session
/// this workspace's history makes obvious, saying on stderr which it took.
pub fn session_of(ws: &Workspace, id: Option<&str>, pick: Pick) -> Result<Session> {
    let shown = ws.warnings().len();
    let s = choose(ws, id, pick)?;
    print_warnings_from(ws, shown);
    Ok(s)
}

pub fn choose(ws: &Workspace, id: Option<&str>, pick: Pick) -> Result<Session> {
    match ws.choose_session(id, pick)? {
        Choice::Session { id: chosen, guess } => {
            // Said only when it is a guess (the most recent of several): the only session
            // with history, or the one with a turn open, goes without saying.
            if let (Some(why), SessionRef::Listed(info)) = (guess, &chosen) {
                eprintln!("retrace: session {} ({why})", terminal_line(info.shown()));
            }
            Ok(ws.open_session(&chosen))
        }
        // Only `turn begin`, `checkpoint` and `mcp` start a session (Pick::Create): anywhere
        // else a name no session has is a mistake, told which ones exist.
        Choice::Unknown(all) => {
            let id = id.unwrap_or_default();
            if all.is_empty() {
                return Err(no_session_yet(id, ws.root()));
            }
            Err(Usage(format!(
                "there is no session {id:?} in {}; the sessions here (name one with \
                 --session: its name, or a unique prefix of its name or key):{}",
                ws.root().display(),
                session_lines(&all)
            ))
            .into())
        }
        Choice::Ambiguous(hits) => Err(Usage(format!(
            "{:?} is the start of several sessions' names or keys; give more of it:{}",
            id.unwrap_or_default(),
            session_lines(&hits)
        ))
        .into()),
        Choice::NoHistory => Err(Refused(format!(
            "no session in {} has turns or checkpoints yet: nothing to do (an agent's turns \
             appear here once its hooks run; see `retrace install`)",
            ws.root().display()
        ))
        .into()),
        Choice::Several(with) => Err(Usage(format!(
            "{} sessions have history in {}; choose one with --session NAME (or a unique \
             prefix of its key):{}",
            with.len(),
            ws.root().display(),
            session_lines(&with)
        ))
        .into()),
    }
}

/// A label as `snapshot` and `checkpoint` take it: empty means none; one that reads as a
/// session's snapshot name (`turn:3`) could never be named back, so it is refused.
pub fn label_of(label: Option<String>) -> Result<Option<String>> {
    match label {
        Some(l) if l.is_empty() => Ok(None),
        Some(l) if l.starts_with("turn:") || l.starts_with("checkpoint:") => Err(Usage(format!(
            "the label {l:?} reads as a session's snapshot name (turn:N, checkpoint:N); choose \
             another"
        ))
        .into()),
        l => Ok(l),
    }
}

/// Where files are never snapshotted (home, `/`, the temp directory), a snapshot or a
/// checkpoint is refused (exit 1), said once.
pub fn refuse_in_refused_place(ws: &Workspace) -> Result<()> {
    refused_place(ws.conversation_only())
}

/// The refusal of a command that snapshots files where files are never snapshotted (the
/// home directory or above, the temp directory): `why` says which.
pub fn refused_place(why: Option<&str>) -> Result<()> {
    match why {
        Some(why) => Err(Refused(format!(
            "{why}: retrace keeps conversation history here but never snapshots files; run it \
             in a project folder"
        ))
        .into()),
        None => Ok(()),
    }
}

/// [`open_with`] for a command that snapshots files: refused, before any store is made,
/// where files are never snapshotted.
pub fn open_to_snapshot(dir: Option<&PathBuf>) -> Result<Workspace> {
    let path = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    refused_place(
        crate::home::resolve_root(&path, &crate::home::default_home())?
            .refused
            .as_deref(),
    )?;
    let ws = open_with(dir, &Config::from_env(), true)?;
    refuse_in_refused_place(&ws)?;
    Ok(ws)
}

/// Once the command's work is recorded: starts due maintenance in a detached background
/// process and returns at once (see `crate::maintainer::maintain_later`); what that pass
/// warns about, the next command prints ([`open_with`]). With `RETRACE_MAINTAIN=inline` the
/// pass runs here, and its warnings are printed now.
pub fn maintain_later(ws: &crate::working_copy::WorkingCopy) {
    if let crate::maintainer::Later::Ran { warnings, .. } = crate::maintainer::maintain_later(ws) {
        for w in warnings {
            eprintln!("retrace: warning: {}", terminal_text(&w));
        }
    }
}

/// Prints the workspace's warnings, each one line on stderr.
pub fn print_warnings(ws: &Workspace) {
    print_warnings_from(ws, 0);
}

/// Prints the workspace's warnings from the `skip`th on, each one line on stderr.
pub fn print_warnings_from(ws: &Workspace, skip: usize) {
    for w in ws.warnings().iter().skip(skip) {
        eprintln!("retrace: warning: {}", terminal_text(w));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::list::{Implied, implied};

    fn info(name: &str, turns: usize, touched_ms: u64, pending: Option<u64>) -> crate::SessionInfo {
        let key = crate::history::db::SessionKey::of(name);
        crate::SessionInfo {
            key,
            id: key.short(),
            name: Some(name.into()),
            agent: None,
            turns,
            checkpoints: 0,
            pending,
            created_ms: 0,
            touched_ms,
        }
    }

    fn picked(all: &[crate::SessionInfo], pick: Pick) -> String {
        match implied(all, pick) {
            Implied::Default => "default".into(),
            Implied::One(s, _) => s.shown().into(),
            Implied::None => "none".into(),
            Implied::Several(v) => format!("several {}", v.len()),
        }
    }

    #[test]
    fn without_a_session_the_obvious_one_is_used_or_the_choice_refused() {
        let hour = crate::history::list::CLEARLY_NEWER_MS;
        let empty = info("empty", 0, 9 * hour, None);
        assert_eq!(picked(&[], Pick::History), "none");
        assert_eq!(picked(std::slice::from_ref(&empty), Pick::History), "none");
        assert_eq!(
            picked(std::slice::from_ref(&empty), Pick::Create),
            "default"
        );
        let a = info("a", 2, 5 * hour, None);
        assert_eq!(picked(&[empty.clone(), a.clone()], Pick::History), "a");
        // Two with history: the newest only when clearly newer.
        let b_close = info("b", 1, 5 * hour - 1, None);
        assert_eq!(
            picked(&[a.clone(), b_close.clone()], Pick::History),
            "several 2"
        );
        assert_eq!(
            picked(&[a.clone(), b_close.clone()], Pick::Create),
            "several 2"
        );
        let b_old = info("b", 1, 4 * hour, None);
        assert_eq!(picked(&[a.clone(), b_old], Pick::History), "a");
        // `turn end` takes the one with a turn open.
        let c_open = info("c", 1, 5 * hour - 2, Some(2));
        let all = [a, b_close, c_open];
        assert_eq!(picked(&all, Pick::Open), "c");
        assert_eq!(picked(&all, Pick::History), "several 3");
    }
}
