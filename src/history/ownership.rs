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
use super::db::{self, SessionKey};
use super::ledger::{LedgerEntry, Writer};
use super::tables::LEDGER;
use crate::object::FlatEntry;
use crate::error::{Error, StoreError};
use crate::object::{ObjectId, RelPath};
use crate::store::{ReadTx, Store, StoreReader};
use crate::working_copy::Holders;

/// What the disk holds at a path of an operation's change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holds {
    /// The version the operation would take back.
    pub taken_back: bool,
    /// The version the operation would write.
    pub written: bool,
    /// The change is this session's own writes there, as the ledger knows them
    /// ([`Session::own_changes`]): another writer's version equal to what it takes back is
    /// then a coincidence of content, not that writer's claim on it.
    pub own: bool,
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

/// Names sessions and says whether their turns still run, for messages, reading the store
/// once per session.
struct Names<'t> {
    tx: &'t ReadTx,
    known: std::cell::RefCell<HashMap<[u8; 32], String>>,
    open: std::cell::RefCell<HashMap<[u8; 32], Option<u64>>>,
}

impl<'t> Names<'t> {
    fn new(tx: &'t ReadTx) -> Names<'t> {
        Names {
            tx,
            known: std::cell::RefCell::default(),
            open: std::cell::RefCell::default(),
        }
    }

    fn name(&self, k: &[u8; 32]) -> String {
        self.known
            .borrow_mut()
            .entry(*k)
            .or_insert_with(|| {
                let key = SessionKey(*k);
                db::name(self.tx, &key)
                    .ok()
                    .flatten()
                    .map_or_else(|| key.short(), |n| n.name)
            })
            .clone()
    }

    fn running(&self, k: &[u8; 32], turn: u64) -> bool {
        *self.open.borrow_mut().entry(*k).or_insert_with(|| {
            db::load(self.tx, &SessionKey(*k))
                .ok()
                .and_then(|l| l.state.pending)
        }) == Some(turn)
    }

    fn describe(&self, w: &Writer) -> String {
        w.describe(&|k| self.name(k), &|k, t| self.running(k, t))
    }
}

/// The ownership rule as a restore asks it ([`Holders`]): the paths another session's
/// running turn has changed so far are that turn's; for a restore made for session `mine`,
/// also the paths another session (its turn, its step, an operation done for it, or tool
/// calls of several at once) wrote last, where the disk still holds what it left. What the
/// user wrote is the user's to restore over.
pub(crate) struct Held<'a> {
    /// The workspace's store.
    pub store: &'a Store,
    /// The session the restore is made for; None for the user's own restore.
    pub mine: Option<SessionKey>,
}

impl Holders for Held<'_> {
    fn held(
        &self,
        reader: &StoreReader,
        disk: &[FlatEntry],
        stored: Option<ObjectId>,
    ) -> Result<BTreeMap<String, String>, StoreError> {
        if let (Some(_), Some(root)) = (self.mine, stored) {
            super::ledger::up_to(self.store, root)?;
        }
        // The disk was stored after the restore's reader was opened (and a forced restore
        // records a safety snapshot after that): a reader of now sees its trees.
        let fresh;
        let reader = if stored.is_some() {
            fresh = self.store.reader()?;
            &fresh
        } else {
            reader
        };
        let tx = self.store.begin_read()?;
        let names = Names::new(&tx);
        let mut out = BTreeMap::new();
        for (key, _) in db::sessions(&tx)? {
            if Some(key) == self.mine {
                continue;
            }
            for u in db::turns(&tx, &key)? {
                let Some(before) = u.before.filter(|_| u.ended_ms.is_none()) else {
                    continue;
                };
                let changed = if let Some(root) = stored {
                    crate::diff::changes(reader, &before, &root)?
                        .into_iter()
                        .map(|c| c.path.show())
                        .collect()
                } else {
                    let (old, same) = crate::diff::flatten_changed(reader, &before, disk)?;
                    let now: Vec<FlatEntry> = disk
                        .iter()
                        .filter(|e| !crate::diff::below_any(&e.path, &same))
                        .cloned()
                        .collect();
                    crate::diff::diff(&old, &now).paths()
                };
                for path in changed {
                    out.entry(path).or_insert_with(|| {
                        format!(
                            "being changed by turn {} of session {}, which is still running",
                            u.number,
                            names.name(&key.0)
                        )
                    });
                }
            }
        }
        let Some(mine) = self.mine else {
            return Ok(out);
        };
        for (path, bytes) in tx.bytes_entries(LEDGER)? {
            let Ok(e) = LedgerEntry::decode(&bytes) else {
                continue;
            };
            let theirs = match &e.writer {
                Writer::User | Writer::Op { session: None, .. } => false,
                _ => !e.left_by(&mine),
            };
            let on_disk = disk
                .binary_search_by(|d| d.path.as_bytes().cmp(path.as_slice()))
                .ok()
                .map(|i| (disk[i].kind, disk[i].id));
            if theirs && on_disk == e.left {
                let shown = crate::object::show_path(&path);
                out.entry(shown)
                    .or_insert_with(|| format!("last written by {}", names.describe(&e.writer)));
            }
        }
        Ok(out)
    }
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
        let names = Names::new(&tx);
        let mut out = HashMap::new();
        for p in paths {
            let Some(e) = tx
                .bytes_entry(LEDGER, p.as_bytes())?
                .and_then(|b| LedgerEntry::decode(&b).ok())
            else {
                continue;
            };
            let owner = match &e.writer {
                _ if e.left_by(&self.key) => Owner::Mine,
                Writer::User => Owner::User,
                w => Owner::Other(names.describe(w)),
            };
            out.insert(p.clone(), owner);
        }
        Ok(out)
    }

    /// Narrows `change` (a turn's change, per path: what the operation takes back, `old`, and
    /// writes, `new`) to what this session's own writes in turn `turn` (in its step `step`
    /// alone, when given) did there, by the
    /// ledger: from the version its first write there replaced to the version its last write
    /// left, when those writes form one run in the path's history (no other writer's in
    /// between) that the ledger still holds. Then an undo (`undo`; else a redo) takes back
    /// this session's part alone: another session's write before or after it in the same
    /// turn's window stays, merged when the disk holds it. Where the ledger cannot say, the
    /// path keeps the turn's change; where this session's writes left the path as they found
    /// it, the path leaves the change.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn own_changes(
        &self,
        reader: &StoreReader,
        (turn, step): (u64, Option<u64>),
        change: &mut Vec<crate::diff::Change>,
        undo: bool,
    ) -> Result<
        (
            std::collections::HashSet<RelPath>,
            BTreeMap<RelPath, String>,
        ),
        Error,
    > {
        type Version = Option<(crate::object::EntryKind, ObjectId)>;
        let tx = self.ws.store().begin_read()?;
        // The turn's writes: its steps', its own as a whole, and (as a ledger written before
        // they were the turn's recorded them) a revert that is this turn.
        let revert_that_is = format!("(turn {turn})");
        let mine = |w: &Writer| match w {
            Writer::Turn {
                session,
                turn: t,
                step: k,
            } => *session == self.key.0 && *t == turn && (step.is_none() || *k == step),
            Writer::Op {
                session: Some(k),
                what,
            } => *k == self.key.0 && what.ends_with(&revert_that_is),
            _ => false,
        };
        let entry_of = |v: Version, c: &crate::diff::Change| -> Result<Option<FlatEntry>, Error> {
            let Some((kind, id)) = v else {
                return Ok(None);
            };
            let size = [c.old.as_ref(), c.new.as_ref()]
                .into_iter()
                .flatten()
                .find(|e| e.id == id)
                .map_or_else(|| reader.record(&id).map(|r| r.size), |e| Ok(e.size))?;
            Ok(Some(FlatEntry {
                path: c.path.clone(),
                kind,
                id,
                size,
            }))
        };
        let mut out = Vec::with_capacity(change.len());
        let mut own = std::collections::HashSet::new();
        let mut theirs = BTreeMap::new();
        let names = Names::new(&tx);
        for c in change.drain(..) {
            let Some(e) = (!c.dirs_only())
                .then(|| tx.bytes_entry(LEDGER, c.path.as_bytes()))
                .transpose()?
                .flatten()
                .and_then(|b| LedgerEntry::decode(&b).ok())
            else {
                out.push(c);
                continue;
            };
            let truncated = e.earlier.len() >= super::ledger::EARLIER;
            let history: Vec<(Version, &Writer)> = std::iter::once((e.left, &e.writer))
                .chain(e.earlier.iter().map(|(v, w)| (*v, w)))
                .collect();
            let Some(first) = history.iter().position(|(_, w)| mine(w)) else {
                // Only this session's operations ever wrote there by the ledger, or an undo or redo of
                // this turn rewrote the path since any other session's last write, or a
                // history cut short: the turn's change decides, as the disk must still hold
                // it. A navigation or a restore, or an undo or redo of another turn, is no
                // part of this one.
                let (undone, redone) = (
                    format!("undo of turn {turn}"),
                    format!("redo of turn {turn}"),
                );
                let about_this_turn = |what: &str| what == undone || what == redone;
                let op_of = |w: &Writer| matches!(w, Writer::Op { session: Some(k), .. } if *k == self.key.0);
                let op_of_mine = |w: &Writer| matches!(w, Writer::Op { what, .. } if op_of(w) && about_this_turn(what));
                let other_session = |w: &Writer| match w {
                    Writer::Turn { session, .. } => *session != self.key.0,
                    Writer::Op { session, .. } => session.is_some_and(|k| k != self.key.0),
                    Writer::Several(_) => true,
                    Writer::User => false,
                };
                let since = history.iter().take_while(|(_, w)| !other_session(w));
                let only_mine = history.iter().all(|(_, w)| op_of(w));
                if truncated || only_mine || since.clone().any(|(_, w)| op_of_mine(w)) {
                    out.push(c);
                } else {
                    // The ledger saw every write there since, and none was the turn's: the
                    // turn's change at this path is someone else's (or a later operation's).
                    let reason = if e.writer.is_session(&self.key) {
                        format!(
                            "not written by the {}: last written by {}; left as it is",
                            if step.is_some() { "step" } else { "turn" },
                            names.describe(&e.writer)
                        )
                    } else {
                        format!(
                            "written during the turn by {}, not by this session; left as it is",
                            names.describe(&e.writer)
                        )
                    };
                    theirs.insert(c.path.clone(), reason);
                }
                continue;
            };
            // This session's newest run of writes there. Where another writer's version lies
            // between it and an older one of this turn, only the newest run is taken back:
            // the older one was built upon (or undone) by that writer.
            let run = history[first..].iter().take_while(|(_, w)| mine(w)).count();
            let beyond = first + run;
            let left = history[first].0;
            let replaced = match history.get(beyond) {
                Some((v, _)) => *v,
                None if truncated => {
                    out.push(c);
                    continue;
                }
                // The ledger knew no version before this session's: the turn's before-version.
                None => {
                    let before = if undo { &c.new } else { &c.old };
                    before.as_ref().map(|b| (b.kind, b.id))
                }
            };
            if left == replaced {
                continue;
            }
            // A version only an edit step's look stored may have been collected since.
            let stored = |v: Version| v.is_none_or(|(_, id)| reader.contains(&id).unwrap_or(false));
            if !stored(left) || !stored(replaced) {
                out.push(c);
                continue;
            }
            let (old, new) = if undo {
                (left, replaced)
            } else {
                (replaced, left)
            };
            let narrowed = crate::diff::Change {
                path: c.path.clone(),
                old: entry_of(old, &c)?,
                new: entry_of(new, &c)?,
            };
            own.insert(c.path.clone());
            out.push(narrowed);
        }
        *change = out;
        Ok((own, theirs))
    }

    /// What edit step `k` of turn `n` did to its `files`, by the ledger (read forwards: `old`
    /// the version it replaced, `new` the one it left): per file, the step's newest version
    /// there and the one before it (none before: the version of the turn's before-snapshot
    /// `turn_before`). A file whose versions the ledger no longer keeps (or whose blobs
    /// were collected) is left out.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn edit_step_change(
        &self,
        reader: &StoreReader,
        (n, k): (u64, u64),
        turn_before: &ObjectId,
        files: &[Vec<u8>],
    ) -> Result<Vec<crate::diff::Change>, Error> {
        let tx = self.ws.store().begin_read()?;
        let by_step = |w: &Writer| matches!(w, Writer::Turn { session, turn, step: Some(s) } if *session == self.key.0 && *turn == n && *s == k);
        let mut out = Vec::new();
        for f in files {
            let Some(e) = tx.bytes_entry(LEDGER, f)?.and_then(|b| LedgerEntry::decode(&b).ok()) else {
                continue;
            };
            let history: Vec<_> = std::iter::once((e.left, &e.writer))
                .chain(e.earlier.iter().map(|(v, w)| (*v, w)))
                .collect();
            let Some(i) = history.iter().position(|(_, w)| by_step(w)) else {
                continue;
            };
            let replaced = match history.get(i + 1) {
                Some(&(v, _)) => v,
                // Fallen out of the ledger.
                None if e.earlier.len() >= super::ledger::EARLIER => continue,
                // No write there was seen before the step's: the turn's before-version.
                None => super::observed::in_snapshot(reader, turn_before, f),
            };
            let left = history[i].0;
            // A version only the step's look stored may have been collected since.
            let stored = |v: Option<(crate::object::EntryKind, ObjectId)>| {
                v.is_none_or(|(_, id)| reader.contains(&id).unwrap_or(false))
            };
            if !stored(replaced) || !stored(left) {
                continue;
            }
            let path = RelPath::from(f.clone());
            let entry = |v: Option<(crate::object::EntryKind, ObjectId)>| -> Result<Option<FlatEntry>, Error> {
                let Some((kind, id)) = v else {
                    return Ok(None);
                };
                Ok(Some(FlatEntry {
                    path: path.clone(),
                    kind,
                    id,
                    size: reader.record(&id)?.size,
                }))
            };
            let (old, new) = (entry(replaced)?, entry(left)?);
            if old != new {
                out.push(crate::diff::Change { path, old, new });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Of `paths`, those another writer (the user included) wrote last by the ledger, each
    /// with that writer: what a whole-workspace navigation rewinds of others' work.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn rewound<'a>(
        &self,
        paths: impl Iterator<Item = &'a RelPath>,
    ) -> Result<Vec<crate::scan::Skipped>, Error> {
        let mut out: Vec<crate::scan::Skipped> = self
            .owners(paths)?
            .into_iter()
            .filter_map(|(path, owner)| {
                let who = match owner {
                    Owner::Mine => return None,
                    Owner::User => "the user (outside every tool call)".to_string(),
                    Owner::Other(who) => who,
                };
                Some(crate::scan::Skipped {
                    path: path.show(),
                    reason: format!("last written by {who}"),
                })
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// The paths of an operation's change that are not this session's to change, with the
    /// reason: `change` lists each path with what the disk holds there ([`Holds`]). A path
    /// the user last wrote is left when the disk holds what the operation would take back
    /// (the user's version inside the change); one another writer last wrote, also when it
    /// holds what the operation would write. Otherwise the operation's conflict check
    /// decides. Paths the ledger does not know are returned apart (the caller's older
    /// rules decide them), and so are directories made or removed: the ledger keeps no
    /// entry for them (an entry an older ledger kept is not read), and a directory that
    /// still holds a path left alone stays.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) fn not_mine<'a>(
        &self,
        change: impl Iterator<Item = (&'a crate::diff::Change, Holds)>,
    ) -> Result<(BTreeMap<RelPath, String>, Vec<RelPath>), Error> {
        let (files, dirs): (Vec<_>, Vec<_>) = change.partition(|(c, _)| !c.dirs_only());
        let owners = self.owners(files.iter().map(|(c, _)| &c.path))?;
        let mut theirs = BTreeMap::new();
        let mut unknown: Vec<RelPath> = dirs.into_iter().map(|(c, _)| c.path.clone()).collect();
        for (c, holds) in files {
            let path = &c.path;
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
                Some(Owner::Other(who)) if (holds.taken_back && !holds.own) || holds.written => {
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
