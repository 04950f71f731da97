//! The sessions of a workspace, and finding one by the name or key prefix a person types
//! (`retrace sessions`, `--session`).

use serde::Serialize;

use super::db::{self, SessionKey};
use super::record::decode;
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
    for (key, rec) in tx.sessions()? {
        let key = SessionKey(key);
        let rec: super::record::SessionRecord =
            decode(&rec).map_err(|detail| StoreError::History {
                path: tx.path().into(),
                detail,
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
