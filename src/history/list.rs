//! The sessions of a workspace, and finding one by the name or key prefix a person types
//! (`retrace sessions`, `--session`).

use serde::Serialize;

use super::db::{self, SessionKey};
use super::record::decode;
use super::tables::SESSIONS;
use crate::error::{Error, StoreError};
use crate::working_copy::WorkingCopy;

/// One session of a workspace, as `retrace sessions` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionInfo {
    /// Its key.
    #[serde(skip)]
    pub key: SessionKey,
    /// First 16 hex digits of the key (accepted back by `--session`, as any unique prefix).
    pub id: String,
    /// The host's id of the session; None for sessions recorded before names were kept.
    pub name: Option<String>,
    /// The agent that opened it, when it said.
    pub agent: Option<String>,
    /// Turns kept.
    pub turns: usize,
    /// Checkpoints kept.
    pub checkpoints: usize,
    /// A turn in progress.
    pub pending: Option<u64>,
    /// Unix milliseconds when first seen.
    pub created_ms: u64,
    /// Unix milliseconds of its last operation.
    pub touched_ms: u64,
}

impl SessionInfo {
    /// Whether it has anything to undo, redo or navigate to.
    #[must_use]
    pub fn has_history(&self) -> bool {
        self.turns + self.checkpoints > 0
    }

    /// Its name, or its short key when it has none.
    #[must_use]
    pub fn shown(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// What a name or key prefix found.
#[derive(Debug)]
pub enum Lookup {
    /// Exactly one session.
    Found(SessionInfo),
    /// A key prefix that several sessions share.
    Ambiguous(Vec<SessionInfo>),
    /// No session has that name or key prefix.
    Missing,
}

/// Every session of the workspace, most recently used first.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or a session record does not decode.
pub fn list(wc: &WorkingCopy) -> Result<Vec<SessionInfo>, Error> {
    let tx = wc.store().begin_read()?;
    let mut out = Vec::new();
    for (key, rec) in tx.keyed_entries(SESSIONS)? {
        let key = SessionKey(key);
        let rec: super::record::SessionRecord =
            decode(&rec).map_err(|detail| StoreError::History {
                path: tx.path().into(),
                detail: detail.to_string(),
            })?;
        let l = db::load(&tx, &key)?;
        let named = db::name(&tx, &key)?;
        out.push(SessionInfo {
            key,
            id: key.short(),
            name: named.as_ref().map(|n| n.name.clone()),
            agent: named.and_then(|n| n.agent),
            turns: l.turns.len(),
            checkpoints: l.checkpoints.len(),
            pending: l.state.pending,
            created_ms: rec.created_ms,
            touched_ms: rec.touched_ms,
        });
    }
    out.sort_by(|a, b| b.touched_ms.cmp(&a.touched_ms).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// The session named `query` (the host's id exactly), or else the one whose name, or whose
/// key's hex, starts with `query` (at least 4 characters; a Claude Code session's name is
/// its 36-character id, which `log` and `sessions` shorten).
///
/// # Errors
/// As [`list`].
pub fn find(wc: &WorkingCopy, query: &str) -> Result<Lookup, Error> {
    let all = list(wc)?;
    let by_name = SessionKey::of(query);
    if let Some(s) = all.iter().find(|s| s.key == by_name) {
        return Ok(Lookup::Found(s.clone()));
    }
    if query.chars().count() < 4 {
        return Ok(Lookup::Missing);
    }
    let hex = query.to_ascii_lowercase();
    let key_prefix = hex.bytes().all(|b| b.is_ascii_hexdigit());
    let mut hits: Vec<SessionInfo> = all
        .into_iter()
        .filter(|s| {
            s.name.as_deref().is_some_and(|n| n.starts_with(query))
                || (key_prefix && crate::object::ObjectId(s.key.0).to_hex().starts_with(&hex))
        })
        .collect();
    Ok(match hits.len() {
        0 => Lookup::Missing,
        1 => Lookup::Found(hits.remove(0)),
        _ => Lookup::Ambiguous(hits),
    })
}

/// How a front end reads a session's name, or picks one when it names none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Undo, redo, navigate, and the log or status of a named session: a session with
    /// history; an unknown name is [`Choice::Unknown`].
    History,
    /// Ending a turn: the one session with a turn open, else as [`Pick::History`].
    Open,
    /// Checkpoint, beginning a turn, MCP: as [`Pick::History`] without a name, but with no
    /// session yet [`DEFAULT_SESSION`]; a name is the session's exact name (a new one
    /// starts: a key prefix never matches, so a new session's turns never join another's).
    Create,
}

/// The session a command means when it names none and no session has history yet.
pub const DEFAULT_SESSION: &str = "default";

/// How much more recent (ms) the newest session must be than the next to be picked alone.
pub const CLEARLY_NEWER_MS: u64 = 3600 * 1000;

/// The session a command means ([`Workspace::choose_session`](crate::Workspace::choose_session)),
/// or why there is none.
#[derive(Debug)]
pub enum Choice {
    /// This session's id, to open with `Workspace::session`; `guess` says why, when it was
    /// a guess (the most recent of several with history).
    Session {
        /// The session's id (its host id, or its key for one found by prefix).
        id: SessionRef,
        /// Why it was taken, when it was a guess.
        guess: Option<String>,
    },
    /// The name is no session's: these are the sessions there are (none: none yet).
    Unknown(Vec<SessionInfo>),
    /// The name starts several sessions' names or keys: these.
    Ambiguous(Vec<SessionInfo>),
    /// No session has turns or checkpoints yet.
    NoHistory,
    /// Several sessions have history, none clearly the one: these.
    Several(Vec<SessionInfo>),
}

/// A session chosen: by the name it starts with, or as listed.
#[derive(Debug)]
pub enum SessionRef {
    /// A new or default session, by name.
    Named(String),
    /// A session as `retrace sessions` lists it.
    Listed(SessionInfo),
}

/// The one rule by which a front end chooses a session: `name` (a session's name, or a
/// unique prefix of its name or key) or, without one, the one the history makes obvious.
///
/// # Errors
/// [`Error`] when the sessions cannot be read.
pub(crate) fn choose(
    ws: &WorkingCopy,
    name: Option<&str>,
    pick: Pick,
) -> Result<Choice, Error> {
    if let Some(name) = name {
        if pick == Pick::Create {
            return Ok(Choice::Session {
                id: SessionRef::Named(name.to_string()),
                guess: None,
            });
        }
        return Ok(match find(ws, name)? {
            Lookup::Found(info) => Choice::Session {
                id: SessionRef::Listed(info),
                guess: None,
            },
            Lookup::Missing => Choice::Unknown(list(ws)?),
            Lookup::Ambiguous(hits) => Choice::Ambiguous(hits),
        });
    }
    let all = list(ws)?;
    Ok(match implied(&all, pick) {
        Implied::Default => Choice::Session {
            id: SessionRef::Named(DEFAULT_SESSION.to_string()),
            guess: None,
        },
        Implied::One(info, guess) => Choice::Session {
            id: SessionRef::Listed(info.clone()),
            guess,
        },
        Implied::None => Choice::NoHistory,
        Implied::Several(with) => Choice::Several(with),
    })
}

/// The session a command without a name works on, given the workspace's sessions (most
/// recently used first).
#[derive(Debug)]
pub(crate) enum Implied<'a> {
    /// The default session (no session has history; the command may start one).
    Default,
    /// This one; with why, when it is a guess (the most recent of several).
    One(&'a SessionInfo, Option<String>),
    /// No session has history.
    None,
    /// Several have, none clearly the one: these.
    Several(Vec<SessionInfo>),
}

/// The rule of [`choose`] without a name: the only session with history (with
/// [`Pick::Open`], the one with a turn open), or the clearly most recent; none, or several.
pub(crate) fn implied(all: &[SessionInfo], pick: Pick) -> Implied<'_> {
    let with: Vec<_> = all.iter().filter(|s| s.has_history()).collect();
    if pick == Pick::Open
        && let [one] = with
            .iter()
            .filter(|s| s.pending.is_some())
            .collect::<Vec<_>>()[..]
    {
        return Implied::One(one, None);
    }
    match with[..] {
        [] if pick == Pick::Create => Implied::Default,
        [] => Implied::None,
        [one] => Implied::One(one, None),
        [newest, next, ..] if newest.touched_ms >= next.touched_ms + CLEARLY_NEWER_MS => {
            Implied::One(
                newest,
                Some(format!(
                    "the most recent; `retrace sessions` lists the {} others",
                    with.len() - 1
                )),
            )
        }
        _ => Implied::Several(with.into_iter().cloned().collect()),
    }
}
