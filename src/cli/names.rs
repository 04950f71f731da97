//! How every command that takes a snapshot names it: an id or prefix, a label, or a
//! session's `turn:N`, `checkpoint:N` and anchors.

use anyhow::Result;

use crate::cli::exit::{Refused, Usage};
use crate::cli::open::choose;
use crate::history::list::{Implied, implied};
use crate::{Error, Pick, Session, Workspace};

/// Snapshots as every command that takes one names them: an id or a unique prefix (8+ hex
/// digits), a snapshot's label, or, in the session (`--session`, or the one [`choose`]
/// implies, chosen once per command), `turn:N`, `turn:N:before`, `checkpoint:N`, a
/// checkpoint label or a host anchor.
pub struct SnapshotNames<'a> {
    ws: &'a Workspace,
    sid: Option<&'a str>,
    session: std::cell::OnceCell<Session>,
}

impl<'a> SnapshotNames<'a> {
    pub fn new(ws: &'a Workspace, sid: Option<&'a str>) -> SnapshotNames<'a> {
        SnapshotNames {
            ws,
            sid,
            session: std::cell::OnceCell::new(),
        }
    }

    /// The session names are looked up in: the one `--session` names, or the one history
    /// implies (None when no single one is implied; then `Err` of `needed` says why).
    pub fn session(&self, needed: bool) -> Result<Option<&Session>> {
        if let Some(s) = self.session.get() {
            return Ok(Some(s));
        }
        let s = if self.sid.is_some() || needed {
            match choose(self.ws, self.sid, Pick::History) {
                Ok(s) => s,
                // Nothing to name a turn in: the name is the mistake (exit 2).
                Err(e) if e.downcast_ref::<Refused>().is_some() => {
                    return Err(Usage(e.to_string()).into());
                }
                Err(e) => return Err(e),
            }
        } else {
            let all = self.ws.sessions()?;
            match implied(&all, Pick::History) {
                Implied::One(info, _) => self.ws.session_of(info),
                _ => return Ok(None),
            }
        };
        Ok(Some(self.session.get_or_init(|| s)))
    }

    pub fn resolve(&self, name: &str) -> Result<crate::ObjectId> {
        let ws = self.ws;
        let hint = "a snapshot is named by its id (8 or more hex digits, see `retrace log \
                    --snapshots`), a label, or turn:N, turn:N:before, turn:N.K (a step), checkpoint:N of a session";
        let hex = name.len() >= 8 && name.bytes().all(|b| b.is_ascii_hexdigit());
        let by_id = if hex { Some(ws.resolve(name)) } else { None };
        if let Some(Ok(id)) = by_id {
            return Ok(id);
        }
        let of_session = ["turn:", "checkpoint:", "revert:"]
            .iter()
            .any(|p| name.starts_with(p));
        // The session's own names first (its turns, checkpoint labels, host anchors): the
        // hooks label every session's snapshots alike ("before turn 1").
        if !hex && let Some(session) = self.session(of_session)? {
            match session.snapshot_at(name) {
                Ok(id) => return Ok(id),
                Err(Error::Anchor { reason, .. }) if of_session => {
                    return Err(Usage(format!("no snapshot {name:?}: {reason}; {hint}")).into());
                }
                Err(Error::Anchor { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Then the workspace's snapshot labels: one snapshot, or the choice is refused.
        let mut roots: Vec<crate::ObjectId> = Vec::new();
        for s in ws.log()? {
            if s.label.as_deref() == Some(name) && !roots.contains(&s.root) {
                roots.push(s.root);
            }
        }
        match roots[..] {
            [one] => Ok(one),
            [] => match by_id {
                Some(Err(e)) => Err(e.into()),
                _ => Err(Usage(format!("no snapshot {name:?}: {hint}")).into()),
            },
            _ => Err(Usage(format!(
                "the label {name:?} names {} snapshots (newest first: {}); give the id, or \
                 --session to look in one session",
                roots.len(),
                roots
                    .iter()
                    .map(crate::ObjectId::short)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into()),
        }
    }
}
