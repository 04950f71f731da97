//! The ownership rule, in one place: an operation of session X (undo, redo, revert) takes
//! back the version a path holds only where X left that version by the ledger
//! ([`super::ledger`]): X's turn or step, or an operation done for X, wrote it last, or wrote
//! the same version there before (the disk still holds what X left). Where the disk holds
//! exactly what the operation would take back but someone else wrote it (the user outside
//! every tool call, another session's tool call, an operation of another session or of the
//! user, or tool calls of several sessions at once), the path is left as it is and listed
//! with its writer. Where the disk changed since, the operation's own check decides: undo
//! and redo refuse (unless forced, a safety snapshot first), revert merges cleanly or
//! refuses. A path the ledger knows nothing of (written before the ledger began) falls back
//! to the time-window rules of undo and revert.

use std::collections::{BTreeMap, HashMap};

use super::Session;
use super::db::SessionKey;
use super::ledger::{LedgerEntry, Writer};
use crate::error::Error;
use crate::object::RelPath;

/// What the disk holds at a path of an operation's change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holds {
    /// The version the operation would take back.
    pub taken_back: bool,
    /// The version the operation would write.
    pub written: bool,
}

/// Who the ledger says last wrote a path, as the rule sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// This session (its turn, its step, an operation done for it).
    Mine,
    /// The user, outside every tool call.
    User,
    /// Someone else: described for the message.
    Other(String),
}

impl Session {
    /// What the ledger says of each of `paths` (absent: the ledger has no entry).
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn owners<'a>(
        &self,
        paths: impl Iterator<Item = &'a RelPath>,
    ) -> Result<HashMap<RelPath, Owner>, Error> {
        let tx = self.ws.store().begin_read()?;
        let names: std::cell::RefCell<HashMap<[u8; 32], String>> = std::cell::RefCell::default();
        let name = |k: &[u8; 32]| -> String {
            names
                .borrow_mut()
                .entry(*k)
                .or_insert_with(|| {
                    let key = SessionKey(*k);
                    super::db::name(&tx, &key)
                        .ok()
                        .flatten()
                        .map_or_else(|| key.short(), |n| n.name)
                })
                .clone()
        };
        let open: std::cell::RefCell<HashMap<[u8; 32], Option<u64>>> =
            std::cell::RefCell::default();
        let running = |k: &[u8; 32], turn: u64| {
            *open.borrow_mut().entry(*k).or_insert_with(|| {
                super::db::load(&tx, &SessionKey(*k))
                    .ok()
                    .and_then(|l| l.state.pending)
            }) == Some(turn)
        };
        let mut out = HashMap::new();
        for p in paths {
            let Some(e) = tx
                .ledger(p.as_bytes())?
                .and_then(|b| LedgerEntry::decode(&b).ok())
            else {
                continue;
            };
            let owner = match &e.writer {
                _ if e.left_by(&self.key) => Owner::Mine,
                Writer::User => Owner::User,
                w => Owner::Other(w.describe(&name, &running)),
            };
            out.insert(p.clone(), owner);
        }
        Ok(out)
    }

    /// The paths of an operation's change that are not this session's to change, with the
    /// reason: `change` lists each path with what the disk holds there ([`Holds`]). A path
    /// the user last wrote is left when the disk holds what the operation would take back
    /// (the user's version inside the change); one another writer last wrote, also when it
    /// holds what the operation would write. Otherwise the operation's conflict check
    /// decides. Paths the ledger does not know are not listed (the caller's
    /// older rules decide them).
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn not_mine<'a>(
        &self,
        change: impl Iterator<Item = (&'a RelPath, Holds)> + Clone,
    ) -> Result<(BTreeMap<RelPath, String>, Vec<RelPath>), Error> {
        let owners = self.owners(change.clone().map(|(p, _)| p))?;
        let mut theirs = BTreeMap::new();
        let mut unknown = Vec::new();
        for (path, holds) in change {
            match owners.get(path) {
                None => unknown.push(path.clone()),
                Some(Owner::User) if holds.taken_back => {
                    theirs.insert(
                        path.clone(),
                        "last written by the user while the turn ran (outside its tool calls); \
                         left as it is"
                            .to_string(),
                    );
                }
                Some(Owner::Other(who)) if holds.taken_back || holds.written => {
                    theirs.insert(
                        path.clone(),
                        format!("last written by {who}; left as it is"),
                    );
                }
                // Mine; or changed since: the operation's conflict check (or merge) decides.
                Some(Owner::Mine | Owner::User | Owner::Other(_)) => {}
            }
        }
        Ok((theirs, unknown))
    }
}
