//! Undo and redo: the inverse (or the forward) of one turn's own change, applied only to
//! the paths it changed, refused on conflict unless forced.

use super::db;
use super::record::{Mode, Op, TurnRecord, TurnState};
use super::revert::RevertPreview;
use super::{Begun, OpOptions, Outcome, Session, SessionOp, Stop};
use crate::diff::changes;
use crate::error::Error;
use crate::inverse::{conflicts, find, is_nested, same, target_of};
use crate::object::{ObjectId, RelPath};
use crate::scan::Skipped;
use crate::store::{SnapshotRecord, now_ms};
use crate::working_copy::Exclusive;
use crate::working_copy::MAX_LISTED;
use crate::working_copy::journaled::{Finished, JournaledRestore, totals};
use crate::working_copy::partial::{entries_at, patched_root};

impl Session {
    /// Steps back over the newest applied turn (see the module docs). `Mode::Both` restores
    /// files and returns the anchor and prompt for the host; `Files` only files;
    /// `Conversation` leaves files as they are and checkpoints them.
    ///
    /// # Errors
    /// [`Error`] for store, capture or I/O failures; refusals are [`Outcome`]s.
    pub fn undo(&self, mode: Mode) -> Result<Outcome, Error> {
        self.undo_with(mode, OpOptions::default())
    }

    /// [`Session::undo`] with options; the result is also published for external clients
    /// (see `crate::history::runtime`).
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn undo_with(&self, mode: Mode, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        let o = self.undo_with_unpublished(mode, opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// [`Session::undo`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::undo`].
    fn undo_with_unpublished(&self, mode: Mode, opts: OpOptions<'_>) -> Result<Outcome, Stop> {
        let Begun { lock, loaded: l } = self.begin_op(opts.progress)?;
        let Some(n) = l.state.cursor else {
            return Ok(Outcome::NothingToUndo {
                detail: "no turn of this session is applied".into(),
            });
        };
        let Some(t) = l.turn(n).cloned() else {
            return Ok(Outcome::NothingToUndo {
                detail: format!(
                    "older turns were dropped (a session keeps {})",
                    self.ws.max_turns()
                ),
            });
        };
        let files = mode.files() && t.state == TurnState::Complete;
        if !files {
            // Files only, but the turn has no file history: it is stepped over (there are no
            // files of it to restore), so that the next undo reaches the turn before; a hook,
            // which cannot choose a mode, never meets a dead end. The host's conversation
            // does not move.
            let conversation = mode.conversation();
            let reason = match t.state {
                _ if !conversation => format!(
                    "it has no file snapshots ({}), so no files were restored; it is skipped, \
                     and the next undo reaches the turn before it",
                    t.reason
                        .as_deref()
                        .unwrap_or(if t.state == TurnState::Expired {
                            "its file history expired"
                        } else {
                            "conversation only"
                        })
                ),
                TurnState::Complete | TurnState::Pending => {
                    "files left as they are (conversation-only undo)".to_string()
                }
                TurnState::Expired => "its file history expired".into(),
                TurnState::ConversationOnly => format!(
                    "files were not restored: {}",
                    t.reason
                        .as_deref()
                        .unwrap_or("the turn has no before-snapshot")
                ),
            };
            let cp = self.checkpoint_under(
                &lock,
                Some(format!("kept at conversation undo of turn {n}")),
                opts.progress,
                Some(Op::Undo {
                    turn: n,
                    to: t.parent,
                    mode: Mode::Conversation,
                    snapshot: None,
                }),
            );
            // Files are untouched here: a failure is an error, not an uncertain result.
            let checkpoint = cp?;
            return Ok(if t.state == TurnState::Expired && conversation {
                Outcome::Expired {
                    turn: Some(n),
                    anchor: t.anchor.clone(),
                    prompt: t.prompt.clone(),
                }
            } else {
                Outcome::ConversationOnly {
                    turn: Some(n),
                    reason,
                    anchor: t.anchor.clone().filter(|_| conversation),
                    prompt: t.prompt.clone().filter(|_| conversation),
                    checkpoint,
                }
            });
        }
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Ok(Outcome::NothingToUndo {
                detail: format!("turn {n} has no snapshots"),
            });
        };
        let op = Op::Undo {
            turn: n,
            to: t.parent,
            mode,
            snapshot: None,
        };
        let applied = self.reverse(&lock, &t, Some(after), before, "undo", op, opts)?;
        Ok(Outcome::Restored {
            turn: Some(n),
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.skipped,
            anchor: if mode.conversation() { t.anchor } else { None },
            prompt: if mode.conversation() { t.prompt } else { None },
            snapshot: Some(applied.snapshot),
            safety_snapshot: applied.safety,
            merged: applied.merged,
            rewound: Vec::new(),
        })
    }

    /// The model's undo during its own turn (MCP's `undo` tool is called while the turn
    /// runs): puts back the files the running turn has changed so far, as its
    /// before-snapshot holds them, and the turn goes on (it ends as usual; what was put back
    /// is no longer its change). Paths of other sessions' turns are left, as for any undo;
    /// the disk as it was is kept first as a safety snapshot, so nothing is lost. The
    /// conversation cannot move from inside a turn: mode `conversation` is refused; `both`
    /// restores files only. With no turn running this is [`Session::undo_with`].
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn undo_running_turn(&self, mode: Mode, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        let o = self.undo_running_turn_unpublished(mode, opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    fn undo_running_turn_unpublished(
        &self,
        mode: Mode,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Stop> {
        if self.subagent {
            return Ok(Outcome::Subagent);
        }
        let Begun { lock, loaded: l } = self.begin_op_in_turn(opts.progress)?;
        let Some(n) = l.state.pending else {
            drop(lock);
            return self.undo_with_unpublished(mode, opts);
        };
        if !mode.files() {
            return Ok(Outcome::Busy {
                detail: format!(
                    "turn {n} is running: the conversation cannot be moved from inside it \
                     (undo in mode files puts back the files it changed so far)"
                ),
            });
        }
        let Some(t) = l.turn(n).cloned() else {
            return Ok(Outcome::NothingToUndo {
                detail: format!("turn {n} has no record"),
            });
        };
        let Some(before) = t.before.filter(|_| t.state == TurnState::Pending) else {
            return Ok(Outcome::NothingToUndo {
                detail: format!(
                    "turn {n} is running without a before-snapshot ({}): its files cannot be \
                     put back",
                    t.reason.as_deref().unwrap_or("it is not taken yet")
                ),
            });
        };
        // Kept first: the undo of a running turn has no redo.
        let safety = lock
            .record(
                Some(format!("safety: before undo of running turn {n}")),
                opts.progress,
            )?
            .id;
        let op = Op::Navigate {
            to: l.state.cursor,
            snapshot: None,
        };
        let applied = self.reverse(&lock, &t, None, before, "undo of running", op, opts)?;
        Ok(Outcome::Restored {
            turn: Some(n),
            mode: Mode::Files,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.skipped,
            anchor: None,
            prompt: None,
            snapshot: Some(applied.snapshot),
            safety_snapshot: Some(safety),
            merged: applied.merged,
            rewound: Vec::new(),
        })
    }

    /// Re-applies the most recently undone turn in the mode its undo used.
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn redo(&self) -> Result<Outcome, Error> {
        self.redo_with(OpOptions::default())
    }

    /// [`Session::redo`] with options; the result is also published for external clients
    /// (see `crate::history::runtime`).
    ///
    /// # Errors
    /// As [`Session::redo`].
    pub fn redo_with(&self, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        let o = self.redo_with_unpublished(opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// [`Session::redo`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::undo`].
    fn redo_with_unpublished(&self, opts: OpOptions<'_>) -> Result<Outcome, Stop> {
        let Begun { lock, loaded: l } = self.begin_op(opts.progress)?;
        let Some(&(n, mode)) = l.state.redo.last() else {
            return Ok(Outcome::NothingToRedo);
        };
        let Some(t) = l.turn(n).cloned() else {
            return Ok(Outcome::NothingToRedo);
        };
        let files = mode.files() && t.state == TurnState::Complete;
        if !files {
            let snapshot = l.state.last_known;
            if let Err(e) = self.write(|w, _| {
                w.op(Op::Redo {
                    turn: n,
                    mode,
                    snapshot,
                })
            }) {
                return Ok(Outcome::PersistenceUncertain {
                    detail: e.to_string(),
                });
            }
            return Ok(Outcome::ConversationOnly {
                turn: Some(n),
                reason: "files left as they are (the undo was conversation-only)".into(),
                anchor: t.leaf.clone(),
                prompt: None,
                checkpoint: None,
            });
        }
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Ok(Outcome::NothingToRedo);
        };
        let op = Op::Redo {
            turn: n,
            mode,
            snapshot: None,
        };
        let applied = self.reverse(&lock, &t, Some(before), after, "redo", op, opts)?;
        Ok(Outcome::Restored {
            turn: Some(n),
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.skipped,
            anchor: if mode.conversation() { t.leaf } else { None },
            prompt: None,
            snapshot: Some(applied.snapshot),
            safety_snapshot: applied.safety,
            merged: applied.merged,
            rewound: Vec::new(),
        })
    }

    /// The plan of [`Session::reverse`]: the disk stored, the change from `from` (None:
    /// the disk) to `to` at the paths it names, narrowed by the ownership rule and merged
    /// out of others' later writes; or the outcome when nothing of it is this session's.
    fn plan_reverse(
        &self,
        ex: &Exclusive<'_>,
        t: &TurnRecord,
        (from, to): (Option<ObjectId>, ObjectId),
        verb: &str,
        opts: OpOptions<'_>,
    ) -> Result<Reversal, Stop> {
        // Stored, not just scanned: the result is recorded from this list, so edits made
        // since the last snapshot must have their blobs in the store (and the trees, which
        // other sessions' open turns are compared with; so the reader is opened after).
        let mut phases = crate::trace::Phases::new(verb_phase(verb));
        let disk = ex.store_disk_unlisted(opts.progress)?;
        phases.mark("capture");
        // The ledger learns what changed until now (and who could have written it).
        super::ledger::up_to(self.ws.store(), disk.id)?;
        phases.mark("ledger");
        let reader = self.ws.store().reader()?;
        let mut change = changes(&reader, &from.unwrap_or(disk.id), &to)?;
        // The disk at the change's paths (and on the way to them): all the operation reads
        // of it, whatever the size of the workspace.
        let on_disk = entries_at(&reader, &disk.id, change.iter().map(|c| &c.path))?;
        phases.mark("change and the disk there");
        // What this session's own writes in the turn did, where the ledger knows them.
        let (own, not_ours) =
            self.own_changes(&reader, (t.number, None), &mut change, Some(to) == t.before)?;
        // The ownership rule: paths whose last writer is not this session are left alone.
        let (mut theirs, unknown) = self.not_mine(change.iter().map(|c| {
            let d = find(&on_disk, &c.path);
            let holds = super::ownership::Holds {
                taken_back: same(d, c.old.as_ref()),
                written: same(d, c.new.as_ref()),
                own: own.contains(&c.path),
            };
            (c, holds)
        }))?;
        if !unknown.is_empty() {
            // Paths the ledger never saw written: the time-window rules. Paths another
            // session's concurrent turn changed are that turn's, and so are those a turn of
            // another session still running has changed so far (a turn still running spans
            // from its start to now).
            let unknown: std::collections::HashSet<RelPath> = unknown.into_iter().collect();
            let mut span = t.clone();
            if span.ended_ms.is_none() {
                span.after = Some(disk.id);
                span.ended_ms = Some(now_ms());
            }
            let legacy = self
                .concurrent_paths(&span, &reader)?
                .into_iter()
                .chain(self.open_turn_paths(&reader, &disk.id)?);
            for (path, why) in legacy {
                if unknown.contains(&path) {
                    theirs.entry(path).or_insert(why);
                }
            }
        }
        theirs.extend(not_ours);
        change.retain(|c| !theirs.contains_key(&c.path));
        phases.mark("ownership");
        // Where another session changed a path since (it appended to the file, say), the
        // turn's change is merged out of the disk's version when a three-way merge is
        // clean, keeping theirs; else the path is theirs: left as it is, named.
        let merged = self.merge_others(&reader, &on_disk, &mut change, &mut theirs)?;
        phases.mark("merges");
        if !theirs.is_empty() && change.iter().all(is_nested) {
            // Nothing of the turn is ours to restore: say so, and leave the cursor.
            let count = theirs.len();
            return Err(Stop::with(Outcome::NothingRestored {
                turn: t.number,
                paths: theirs
                    .into_iter()
                    .take(MAX_LISTED)
                    .map(|(path, reason)| Skipped {
                        path: path.show(),
                        reason,
                    })
                    .collect(),
                count,
            }));
        }
        let clash = conflicts(&on_disk, &change);
        Ok(Reversal {
            disk,
            reader,
            on_disk,
            change,
            theirs,
            merged,
            clash,
        })
    }

    /// What [`Session::undo_with`] would do to the files (with `opts.force` as given);
    /// writes no file (the disk's new contents are stored, as any capture stores them). A
    /// turn with no file snapshots (an undo steps over it) is answered as refused with
    /// [`Outcome::NothingToUndo`].
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn undo_dry_run(&self, opts: OpOptions<'_>) -> Result<RevertPreview, Error> {
        let Begun { lock, loaded: l } = match self.begin_op(opts.progress) {
            Ok(begun) => begun,
            Err(stop) => return Ok(refused(0, stop.answer()?)),
        };
        let nothing = |n: u64, detail: String| refused(n, Outcome::NothingToUndo { detail });
        let Some(n) = l.state.cursor else {
            return Ok(nothing(0, "no turn of this session is applied".into()));
        };
        let Some(t) = l.turn(n).cloned() else {
            return Ok(nothing(n, "older turns were dropped".into()));
        };
        match (t.state, t.before, t.after) {
            (TurnState::Complete, Some(before), Some(after)) => {
                self.preview_reverse(&lock, &t, (Some(after), before), "undo", opts)
            }
            (TurnState::Complete, _, _) => Ok(nothing(n, format!("turn {n} has no snapshots"))),
            // No file history: an undo steps over it and writes nothing.
            _ => Ok(RevertPreview {
                turn: n,
                ..RevertPreview::default()
            }),
        }
    }

    /// What [`Session::redo_with`] would do to the files, as [`Session::undo_dry_run`].
    ///
    /// # Errors
    /// As [`Session::undo`].
    pub fn redo_dry_run(&self, opts: OpOptions<'_>) -> Result<RevertPreview, Error> {
        let Begun { lock, loaded: l } = match self.begin_op(opts.progress) {
            Ok(begun) => begun,
            Err(stop) => return Ok(refused(0, stop.answer()?)),
        };
        let Some((t, mode)) = l
            .state
            .redo
            .last()
            .and_then(|&(n, mode)| Some((l.turn(n)?.clone(), mode)))
        else {
            return Ok(refused(0, Outcome::NothingToRedo));
        };
        match (t.state, t.before, t.after) {
            (TurnState::Complete, Some(before), Some(after)) if mode.files() => {
                self.preview_reverse(&lock, &t, (Some(before), after), "redo", opts)
            }
            (TurnState::Complete, None, _) | (TurnState::Complete, _, None) if mode.files() => {
                Ok(refused(t.number, Outcome::NothingToRedo))
            }
            // The undo moved the conversation alone, or the turn has no file history: a
            // redo writes nothing.
            _ => Ok(RevertPreview {
                turn: t.number,
                ..RevertPreview::default()
            }),
        }
    }

    /// The preview of [`Session::reverse`] of turn `t` from `from` to `to`.
    fn preview_reverse(
        &self,
        ex: &Exclusive<'_>,
        t: &TurnRecord,
        sides: (Option<ObjectId>, ObjectId),
        verb: &str,
        opts: OpOptions<'_>,
    ) -> Result<RevertPreview, Error> {
        let r = match self.plan_reverse(ex, t, sides, verb, opts) {
            Ok(r) => r,
            Err(stop) => return Ok(refused(t.number, stop.answer()?)),
        };
        let mut p = RevertPreview {
            turn: t.number,
            ..RevertPreview::default()
        };
        for c in r.change.iter().filter(|c| !is_nested(c) && !c.dirs_only()) {
            match c.new {
                None => p.would_delete.push(c.path.show()),
                Some(_) => p.would_write.push(c.path.show()),
            }
        }
        p.merged = r.merged.iter().map(|(path, _)| path.show()).collect();
        p.conflicts = r
            .clash
            .iter()
            .map(|path| Skipped {
                path: path.clone(),
                reason: format!("changed since the turn; the {verb} would write over it"),
            })
            .collect();
        p.skipped = r
            .theirs
            .into_iter()
            .map(|(path, reason)| Skipped {
                path: path.show(),
                reason,
            })
            .collect();
        if !r.clash.is_empty() && !opts.force {
            p.refused = Some(Outcome::Conflict {
                count: r.clash.len(),
                paths: r.clash.into_iter().take(MAX_LISTED).collect(),
            });
        }
        Ok(p)
    }

    /// Applies the change from snapshot `from` (None: the disk now) to snapshot `to` to the paths it names,
    /// refusing (as an outcome) when the disk no longer holds `from` there, and records `op`
    /// with the result, under the exclusive lock `ex`. Journaled: see
    /// [`Exclusive::journaled_apply`]. A store failure after the files were written is
    /// [`Outcome::PersistenceUncertain`] (the journal stays, and the next operation completes
    /// the record).
    #[allow(clippy::too_many_arguments)] // `ex` is the proof of the lock, not data
    fn reverse(
        &self,
        ex: &Exclusive<'_>,
        t: &TurnRecord,
        from: Option<ObjectId>,
        to: ObjectId,
        verb: &str,
        op: Op,
        opts: OpOptions<'_>,
    ) -> Result<Reversed, Stop> {
        let Reversal {
            disk,
            reader,
            on_disk,
            change,
            theirs,
            merged,
            clash,
        } = self.plan_reverse(ex, t, (from, to), verb, opts)?;
        let mut phases = crate::trace::Phases::new(verb_phase(verb));
        let mut safety = None;
        if !clash.is_empty() {
            if !opts.force {
                return Err(Stop::with(Outcome::Conflict {
                    count: clash.len(),
                    paths: clash.into_iter().take(MAX_LISTED).collect(),
                }));
            }
            let label = format!("safety: before forced {verb} of turn {}", t.number);
            safety = Some(ex.record(Some(label), opts.progress)?.id);
        }
        let reader = if merged.is_empty() {
            reader
        } else {
            // Merged contents are stored first; a reader opened after sees them.
            self.store_merged(&merged)?;
            drop(reader);
            self.ws.store().reader()?
        };
        let what = format!("{verb} of turn {}", t.number);
        let (target, fin) =
            self.apply_change(ex, &reader, (&disk, &on_disk), &change, what, op, opts)?;
        phases.mark("applied and recorded");
        let mut skipped = fin.applied.left_alone;
        skipped.extend(theirs.into_iter().map(|(path, reason)| Skipped {
            path: path.show(),
            reason,
        }));
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        if let Some(after) = &fin.capture {
            // Re-read what the change names: anything not as planned is reported, not hidden.
            for c in change.iter().filter(|c| !is_nested(c)) {
                let now = find(&after.entries, &c.path);
                let planned = find(&target, &c.path);
                if !same(now, planned) && !skipped.iter().any(|s| s.path.as_bytes() == c.path) {
                    skipped.push(Skipped {
                        path: c.path.show(),
                        reason: "changed while it was being restored".into(),
                    });
                }
            }
        }
        Ok(Reversed {
            written: fin.applied.written,
            deleted: fin.applied.deleted,
            skipped,
            snapshot: fin.snapshot,
            safety,
            merged: merged.iter().map(|(p, _)| p.show()).collect(),
        })
    }

    /// Of `change` (per path: what the operation takes back, `old`, and writes, `new`), the
    /// paths where the disk holds neither and another session wrote last by the ledger: a
    /// clean three-way merge takes the change out of the disk's version (the path's change
    /// becomes the merge; its bytes are returned, to be stored), and otherwise the path
    /// moves to `theirs`, named with its writer. Paths this session or the user wrote, or
    /// the ledger never saw, stay for the conflict check.
    fn merge_others(
        &self,
        reader: &crate::store::StoreReader,
        disk: &[crate::object::FlatEntry],
        change: &mut Vec<crate::diff::Change>,
        theirs: &mut std::collections::BTreeMap<RelPath, String>,
    ) -> Result<Vec<(RelPath, Vec<u8>)>, Error> {
        use super::ownership::Owner;
        use super::revert::{MergedOut, merge_out};
        let changed_since = |c: &crate::diff::Change| {
            let d = find(disk, &c.path);
            !is_nested(c) && !same(d, c.old.as_ref()) && !same(d, c.new.as_ref())
        };
        if !change.iter().any(changed_since) {
            return Ok(Vec::new());
        }
        let owners = self.owners(change.iter().filter(|c| changed_since(c)).map(|c| &c.path))?;
        let mut merged = Vec::new();
        let mut kept = Vec::with_capacity(change.len());
        for c in change.drain(..) {
            let who = match owners.get(&c.path) {
                Some(Owner::Other(who)) if changed_since(&c) => who,
                _ => {
                    kept.push(c);
                    continue;
                }
            };
            // Taking back is a change from what the operation takes back to what it writes.
            let back = crate::diff::Change {
                path: c.path.clone(),
                old: c.new.clone(),
                new: c.old.clone(),
            };
            match merge_out(reader, &back, find(disk, &c.path), true)? {
                MergedOut::Already => {}
                MergedOut::Written(m, bytes) => {
                    merged.push((c.path.clone(), bytes));
                    kept.push(m);
                }
                MergedOut::Not(why) => {
                    theirs.insert(
                        c.path.clone(),
                        format!("last written by {who} ({why}); left as it is"),
                    );
                }
            }
        }
        *change = kept;
        Ok(merged)
    }
}

/// A preview that says only how the operation would be refused.
fn refused(turn: u64, o: Outcome) -> RevertPreview {
    RevertPreview {
        turn,
        refused: Some(o),
        ..RevertPreview::default()
    }
}

/// An undo's or redo's plan ([`Session::plan_reverse`]).
struct Reversal {
    /// The disk, stored.
    disk: crate::capture::Capture,
    /// A reader that sees the disk's trees.
    reader: crate::store::StoreReader,
    /// The disk's entries at the change's paths and on the way to them.
    on_disk: Vec<crate::object::FlatEntry>,
    /// Per path: what the operation takes back (`old`) and writes (`new`).
    change: Vec<crate::diff::Change>,
    /// Paths left as they are, with why.
    theirs: std::collections::BTreeMap<RelPath, String>,
    /// Paths written as a three-way merge, with their contents.
    merged: Vec<(RelPath, Vec<u8>)>,
    /// Paths changed since, where the operation would write over another version.
    clash: Vec<String>,
}

impl Session {
    /// Applies `change` (per path: the disk's entry and what it becomes) over the stored
    /// disk `disk` (`on_disk`: its entries at the change's paths and on the way to them, as
    /// [`entries_at`] gives them, or all of them), journaled as `what`, recording `op` with
    /// the result; returns the target list (over the same paths) and what the restore did,
    /// or [`Outcome::PersistenceUncertain`] when the files were written but the record could
    /// not be confirmed (the journal stays, and the next operation completes it).
    #[allow(clippy::too_many_arguments)] // `ex` is the proof of the lock, not data
    pub(super) fn apply_change(
        &self,
        ex: &Exclusive<'_>,
        reader: &crate::store::StoreReader,
        (disk, on_disk): (&crate::capture::Capture, &[crate::object::FlatEntry]),
        change: &[crate::diff::Change],
        what: String,
        op: Op,
        opts: OpOptions<'_>,
    ) -> Result<(Vec<crate::object::FlatEntry>, Finished), Stop> {
        let target = target_of(on_disk, change);
        // The result is known before a file is written: its trees go into the store with
        // the journal, so an interrupted restore can always be completed.
        let (root, frames) = patched_root(reader, &disk.id, on_disk, &target)?;
        crate::trace::note("the target's trees patched in");
        let (files, bytes) = {
            let (was_files, was_bytes) = totals(on_disk);
            let (now_files, now_bytes) = totals(&target);
            (
                (disk.files + now_files).saturating_sub(was_files),
                (disk.bytes + now_bytes).saturating_sub(was_bytes),
            )
        };
        let fin = ex.journaled_apply(
            reader,
            JournaledRestore {
                what: what.clone(),
                source: disk.id,
                target: root,
                frames,
                then: Some(SessionOp(self.key, op)),
                record: Some(SnapshotRecord::now(root, Some(what), files, bytes)),
            },
            on_disk,
            &target,
            opts.progress,
        )?;
        if let Err(e) = &fin.recorded {
            return Err(Stop::with(Outcome::PersistenceUncertain {
                detail: e.to_string(),
            }));
        }
        Ok((target, fin))
    }
}

impl Session {
    /// Paths of turn `t`'s change that another session also changed while `t` ran, with the
    /// reason. Whole-workspace snapshots cannot tell who wrote a file, so the rule is
    /// conservative: a path changed by another session's turn that overlapped `t` in time,
    /// or by another session's undo or redo done during `t`, is not `t`'s to revert; it is
    /// left as it is and reported.
    fn concurrent_paths(
        &self,
        t: &TurnRecord,
        reader: &crate::store::StoreReader,
    ) -> Result<std::collections::BTreeMap<RelPath, String>, Error> {
        use crate::history::record::Op;
        let mut out = std::collections::BTreeMap::new();
        let (Some(tb), Some(ta), Some(t_end)) = (t.before, t.after, t.ended_ms) else {
            return Ok(out);
        };
        let tx = self.ws.store().begin_read()?;
        let mut ours: Option<std::collections::HashSet<RelPath>> = None;
        for (key, _) in db::sessions(&tx)? {
            if key == self.key {
                continue;
            }
            let session = &key.short();
            let turns = db::turns(&tx, &key)?;
            // Turns of that session whose change counts: those running at the same time,
            // and those it undid or redid meanwhile.
            let mut suspects: Vec<(u64, &'static str)> = turns
                .iter()
                .filter(|u| {
                    u.ended_ms
                        .is_some_and(|end| u.began_ms < t_end && end > t.began_ms)
                })
                .map(|u| (u.number, "ran at the same time"))
                .collect();
            for op in db::ops(&tx, &key)? {
                if op.time_ms < t.began_ms || op.time_ms > t_end {
                    continue;
                }
                match op.op {
                    Op::Undo { turn, .. } => suspects.push((turn, "was undone meanwhile")),
                    Op::Redo { turn, .. } => suspects.push((turn, "was redone meanwhile")),
                    _ => {}
                }
            }
            for (n, why) in suspects {
                let Some(u) = turns.iter().find(|u| u.number == n) else {
                    continue;
                };
                let (Some(ub), Some(ua)) = (u.before, u.after) else {
                    continue;
                };
                let ours = match &ours {
                    Some(o) => o,
                    None => ours.insert(
                        changes(reader, &tb, &ta)?
                            .into_iter()
                            .map(|c| c.path)
                            .collect(),
                    ),
                };
                for c in changes(reader, &ub, &ua)? {
                    if ours.contains(&c.path) {
                        out.entry(c.path).or_insert_with(|| {
                            format!(
                                "also changed by turn {n} of session {session}, which {why}; \
                                 left as it is"
                            )
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

impl Session {
    /// Paths that another session's turn still in progress has changed so far (from its
    /// before-snapshot to the disk now, stored as `disk`), with the reason. They are that
    /// turn's until it ends: never this session's to undo, redo or navigate over. Whole-
    /// workspace snapshots cannot tell who wrote a file, so a path this session's agent
    /// wrote while the other turn ran counts too (conservative, as for ended turns).
    pub(crate) fn open_turn_paths(
        &self,
        reader: &crate::store::StoreReader,
        disk: &ObjectId,
    ) -> Result<std::collections::BTreeMap<RelPath, String>, Error> {
        let mut out = std::collections::BTreeMap::new();
        let tx = self.ws.store().begin_read()?;
        for (key, _) in db::sessions(&tx)? {
            if key == self.key {
                continue;
            }
            let session = &key.short();
            for u in db::turns(&tx, &key)? {
                let Some(ub) = u.before.filter(|_| u.ended_ms.is_none()) else {
                    continue;
                };
                for c in changes(reader, &ub, disk)? {
                    out.entry(c.path).or_insert_with(|| {
                        format!(
                            "being changed by turn {} of session {session}, which is still \
                             running; left as it is",
                            u.number
                        )
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The name of an operation's phases in the trace (`RETRACE_TRACE=1`).
fn verb_phase(verb: &str) -> &'static str {
    match verb {
        "undo" => "undo",
        "redo" => "redo",
        _ => "undo of running",
    }
}

struct Reversed {
    written: Vec<String>,
    deleted: Vec<String>,
    skipped: Vec<Skipped>,
    snapshot: ObjectId,
    safety: Option<ObjectId>,
    /// Paths written as a three-way merge (another session's change since kept).
    merged: Vec<String>,
}
