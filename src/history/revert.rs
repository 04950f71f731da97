//! Reverting one past turn, not only the newest, keeping every later change (the user's and
//! other turns'). Per path the turn changed: if the disk still holds the turn's
//! after-version, its before-version is written; if the disk already holds the
//! before-version, nothing is; otherwise a three-way text merge (base: the turn's
//! after-version, ours: the disk, theirs: the turn's before-version) is written when it is
//! clean ([`crate::merge`]), and anything else is a conflict: nothing is written for any
//! path unless forced (a safety snapshot first, then the before-version). The revert is a
//! turn of its own on top of the cursor ([`Op::Revert`]), so undo undoes it and redo redoes
//! it.

use serde::Serialize;

use super::db::Loaded;
use super::record::{Counts, HISTORY_VERSION, Mode, Op, RevertRecord, TurnRecord, TurnState};
use super::{Begun, OpOptions, Outcome, Session, Stop};
use crate::object::FlatEntry;
use crate::diff::{Change, below_any, changes};
use crate::error::{Error, StoreError};
use crate::inverse::{conflicts, find, is_nested, same};
use crate::merge::three_way;
use crate::object::{EntryKind, NewFrame, ObjectId, ObjectKind, PendingObject, RelPath};
use crate::scan::Skipped;
use crate::store::{StoreReader, now_ms};
use crate::working_copy::partial::entries_at;
use crate::working_copy::{Exclusive, MAX_LISTED};

/// What a revert would do (`retrace revert --dry-run`): nothing is written.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RevertPreview {
    /// The turn that would be reverted.
    pub turn: u64,
    /// The step of it, when one step alone would be (`revert turn:N.K`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Paths that would be written (created or replaced), merged ones included.
    pub would_write: Vec<String>,
    /// Paths that would be deleted.
    pub would_delete: Vec<String>,
    /// Paths that would be written as a clean three-way merge.
    pub merged: Vec<String>,
    /// Paths that conflict, with why: the revert would be refused (without `force`), or
    /// would take the turn's before-version there (with it).
    pub conflicts: Vec<Skipped>,
    /// Paths left as they are (another session's turn is changing them).
    pub skipped: Vec<Skipped>,
    /// Set when the revert would be refused for another reason (nothing to revert, busy):
    /// the outcome it would answer.
    pub refused: Option<Outcome>,
}

/// A revert planned against the disk.
struct Plan {
    /// Per path: the disk's entry (`old`) and what it becomes (`new`).
    change: Vec<Change>,
    /// Merged contents, to be stored before the restore.
    merged: Vec<(RelPath, Vec<u8>)>,
    /// Conflicting paths with why, and the change a forced revert makes there.
    conflicts: Vec<(Skipped, Change)>,
    /// Paths another session's running turn is changing.
    skipped: Vec<Skipped>,
}

/// The turn's before-version for a conflict of the disk entry `d`.
fn take_before(c: &Change, d: Option<&FlatEntry>) -> Change {
    Change {
        path: c.path.clone(),
        old: d.cloned(),
        new: c.old.clone(),
    }
}

/// Why the disk entry `d` conflicts with reverting change `c` (when it is not a merge).
fn why(c: &Change, d: Option<&FlatEntry>) -> &'static str {
    match (c.new.as_ref(), d) {
        (Some(_), None) => "deleted since the turn",
        (None, Some(_)) => "created again since the turn deleted it",
        _ => "changed since the turn",
    }
}

/// Whether an entry is a regular file (a merge candidate).
fn is_file(e: Option<&FlatEntry>) -> bool {
    e.is_some_and(|e| matches!(e.kind, EntryKind::File | EntryKind::Executable))
}

/// The executable bit of a merge: a side that changed it wins.
fn merged_kind(base: EntryKind, ours: EntryKind, theirs: EntryKind) -> EntryKind {
    if ours == base { theirs } else { ours }
}

/// What a three-way merge makes of taking change `c` (`old` to `new`) back out of the disk
/// entry `d`, which holds neither side.
pub(super) enum MergedOut {
    /// The disk already holds the merge: nothing to write.
    Already,
    /// The disk's entry becomes the merge (`old`: the disk's entry), and these bytes.
    Written(Change, Vec<u8>),
    /// No clean merge: why.
    Not(&'static str),
}

/// Takes `c` back out of the disk entry `d` by a three-way text merge (base: `c.new`, what
/// the change left; ours: the disk; theirs: `c.old`, what it replaced), as [`crate::merge`]
/// does it: clean or not at all (`touching`: changes that only touch merge too, see
/// [`crate::merge::three_way_touching`]).
///
/// # Errors
/// [`Error::Store`] when a side cannot be read.
pub(super) fn merge_out(
    reader: &StoreReader,
    c: &Change,
    d: Option<&FlatEntry>,
    touching: bool,
) -> Result<MergedOut, Error> {
    let (Some(base), Some(ours), Some(back)) = (c.new.as_ref(), d, c.old.as_ref()) else {
        return Ok(MergedOut::Not(why(c, d)));
    };
    if !is_file(Some(base)) || !is_file(Some(ours)) || !is_file(Some(back)) {
        return Ok(MergedOut::Not(why(c, d)));
    }
    let read = |id: &ObjectId| reader.read_blob(id);
    let merge = if touching {
        crate::merge::three_way_touching
    } else {
        three_way
    };
    match merge(&read(&base.id)?, &read(&ours.id)?, &read(&back.id)?) {
        Ok(bytes) => {
            let kind = merged_kind(base.kind, ours.kind, back.kind);
            let id = ObjectId::of_blob(&bytes);
            if id == ours.id && kind == ours.kind {
                return Ok(MergedOut::Already);
            }
            let change = Change {
                path: c.path.clone(),
                old: Some(ours.clone()),
                new: Some(FlatEntry {
                    path: c.path.clone(),
                    kind,
                    id,
                    size: bytes.len() as u64,
                }),
            };
            Ok(MergedOut::Written(change, bytes))
        }
        Err(u) => Ok(MergedOut::Not(u.reason())),
    }
}

pub(super) fn counts_of(change: &[Change]) -> Counts {
    Counts::of(change)
}

/// Writes the turn record and revert record of [`Op::Revert`] `op`, then the op itself
/// with its turn number: the session's next (so a turn begun meanwhile never shares it).
/// An [`Op::RevertStep`] is written as an ordinary turn whose prompt names the step (no
/// revert record: the turn it reverted a step of is not reverted), logged as `Revert`.
pub(super) fn record(w: &super::db::Writer<'_>, op: Op) -> Result<(), StoreError> {
    let (turn, before, began_ms, counts, merged, snapshot, prompt) = match op {
        Op::Revert {
            turn,
            before,
            began_ms,
            counts,
            merged,
            snapshot,
            ..
        } => (turn, before, began_ms, counts, merged, snapshot, None),
        Op::RevertStep {
            turn,
            step,
            what,
            before,
            began_ms,
            counts,
            merged,
            snapshot,
        } => (
            turn,
            before,
            began_ms,
            counts,
            merged,
            snapshot,
            Some(format!("revert of turn {turn} step {step}: {what}")),
        ),
        op => return w.op(op),
    };
    let step = prompt.is_some();
    let s = w.state()?;
    let as_turn = s.next_turn;
    w.turn(&TurnRecord {
        version: HISTORY_VERSION,
        number: as_turn,
        parent: s.cursor,
        anchor: None,
        leaf: None,
        rounds: Vec::new(),
        prompt,
        began_ms,
        ended_ms: Some(now_ms()),
        before: Some(before),
        after: snapshot,
        state: TurnState::Complete,
        reason: None,
        counts,
    })?;
    if !step {
        w.revert(&RevertRecord {
            version: HISTORY_VERSION,
            number: as_turn,
            reverts: turn,
            merged: merged.clone(),
        })?;
    }
    w.op(Op::Revert {
        turn,
        as_turn,
        before,
        began_ms,
        counts,
        merged,
        snapshot,
    })
}

impl Session {
    /// Reverts turn `n` of this session (see the module docs). `opts.force` takes the
    /// turn's before-version where a path conflicts, after a safety snapshot. The result is
    /// [`Outcome::Restored`] (its `merged` lists the merged paths), a refusal
    /// ([`Outcome::Conflict`], [`Outcome::NothingToUndo`] for a turn that is not applied or
    /// has no file snapshots, …), and is published for external clients.
    ///
    /// # Errors
    /// [`Error`] for store, capture or I/O failures.
    pub fn revert(&self, n: u64, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        let o = self.revert_unpublished(n, None, opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// Reverts step `k` of turn `n` alone (`retrace revert turn:N.K`), as
    /// [`Session::revert`] reverts a turn: what that one tool call changed (a shell step's
    /// captures around it; an edit step's files, from the versions the ledger kept of
    /// them). A shell step the `step_captures` setting took no captures around, or an edit
    /// step whose versions the ledger no longer keeps, is refused
    /// ([`Outcome::NothingToUndo`], naming the way out).
    ///
    /// # Errors
    /// As [`Session::revert`].
    pub fn revert_step(&self, n: u64, k: u64, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        let o = self.revert_unpublished(n, Some(k), opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// What [`Session::revert_step`] would do; writes no file.
    ///
    /// # Errors
    /// As [`Session::revert`].
    pub fn revert_step_dry_run(
        &self,
        n: u64,
        k: u64,
        opts: OpOptions<'_>,
    ) -> Result<RevertPreview, Error> {
        self.preview(n, Some(k), opts)
    }

    /// What [`Session::revert`] would do; writes no file (the disk's new contents are
    /// stored, as any capture stores them).
    ///
    /// # Errors
    /// As [`Session::revert`].
    pub fn revert_dry_run(&self, n: u64, opts: OpOptions<'_>) -> Result<RevertPreview, Error> {
        self.preview(n, None, opts)
    }

    fn preview(
        &self,
        n: u64,
        step: Option<u64>,
        opts: OpOptions<'_>,
    ) -> Result<RevertPreview, Error> {
        let mut preview = RevertPreview {
            turn: n,
            step,
            ..RevertPreview::default()
        };
        let Begun { lock, loaded: l } = match self.begin_op(opts.progress) {
            Ok(begun) => begun,
            Err(stop) => {
                preview.refused = Some(stop.answer()?);
                return Ok(preview);
            }
        };
        let sides = match Self::revertible(&l, n) {
            Ok(sides) => sides,
            Err(refusal) => {
                preview.refused = Some(*refusal);
                return Ok(preview);
            }
        };
        let disk = lock.store_disk_unlisted(opts.progress)?;
        super::ledger::up_to(self.ws.store(), disk.id)?;
        let reader = self.ws.store().reader()?;
        let turn = match self.change_of(&reader, n, step, sides) {
            Ok(c) => c,
            Err(stop) => {
                preview.refused = Some(stop.answer()?);
                return Ok(preview);
            }
        };
        let on_disk = entries_at(&reader, &disk.id, turn.iter().map(|c| &c.path))?;
        let plan = self.plan(&reader, &on_disk, &disk.id, (n, step), turn)?;
        let mut change = plan.change;
        if opts.force {
            change.extend(plan.conflicts.iter().map(|(_, c)| c.clone()));
        } else if !plan.conflicts.is_empty() {
            preview.refused = Some(Outcome::Conflict {
                count: plan.conflicts.len(),
                paths: plan
                    .conflicts
                    .iter()
                    .take(MAX_LISTED)
                    .map(|(s, _)| s.path.clone())
                    .collect(),
            });
        }
        for c in &change {
            if c.new.as_ref().is_some_and(|e| e.kind.is_content()) {
                preview.would_write.push(c.path.show());
            } else if c.old.as_ref().is_some_and(|e| e.kind.is_content()) {
                preview.would_delete.push(c.path.show());
            }
        }
        preview.merged = plan.merged.iter().map(|(p, _)| p.show()).collect();
        preview.conflicts = plan.conflicts.into_iter().map(|(s, _)| s).collect();
        preview.skipped = plan.skipped;
        Ok(preview)
    }

    /// Turn `n`'s before and after snapshots, or why it cannot be reverted.
    fn revertible(l: &Loaded, n: u64) -> Result<(ObjectId, ObjectId), Box<Outcome>> {
        let nothing = |detail: String| Box::new(Outcome::NothingToUndo { detail });
        let Some(t) = l.turn(n) else {
            return Err(nothing(format!(
                "turn {n} is not in this session's history (see `retrace log`)"
            )));
        };
        let (Some(before), Some(after)) = (t.before, t.after) else {
            return Err(nothing(format!("turn {n} has no file snapshots")));
        };
        if t.state != TurnState::Complete {
            return Err(nothing(format!(
                "turn {n} has no file history ({}): there are no files of it to revert",
                t.reason.as_deref().unwrap_or(t.state.name())
            )));
        }
        let applied = l.applied();
        if !applied.contains(&n) {
            return Err(nothing(format!(
                "turn {n} is not applied (it was undone, or lies on another branch): its \
                 changes are not in the workspace; `retrace redo` or `retrace navigate` bring \
                 them back"
            )));
        }
        if let Some(r) = l
            .reverts
            .iter()
            .find(|r| r.reverts == n && applied.contains(&r.number))
        {
            return Err(nothing(format!(
                "turn {n} is already reverted (by turn {}); `retrace undo` takes the revert \
                 back",
                r.number
            )));
        }
        Ok((before, after))
    }

    /// The change reverting turn `n` (`sides`: its before and after snapshots), or its
    /// step `step`, takes back (read forwards: `old` before, `new` after), or why it cannot.
    fn change_of(
        &self,
        reader: &StoreReader,
        n: u64,
        step: Option<u64>,
        (before, after): (ObjectId, ObjectId),
    ) -> Result<Vec<Change>, Stop> {
        let Some(k) = step else {
            return Ok(changes(reader, &before, &after)?);
        };
        let nothing = |detail: String| Err(Stop::with(Outcome::NothingToUndo { detail }));
        let steps = self.steps(n)?;
        let Some(s) = steps.iter().find(|s| s.number == k) else {
            return nothing(if steps.is_empty() {
                format!(
                    "turn {n} has no steps (its agent reports none): `retrace revert turn:{n}` reverts it whole"
                )
            } else {
                format!(
                    "turn {n} has steps 1 to {} (`retrace log --steps`)",
                    steps.len()
                )
            });
        };
        if s.ended_ms.is_none() {
            return nothing(format!("step {k} of turn {n} has not ended"));
        }
        if s.shell() {
            return match (s.before, s.after) {
                (Some(b), Some(a)) => Ok(changes(reader, &b, &a)?),
                _ => nothing(format!(
                    "step {k} of turn {n} ({} {}) took no snapshots (the step_captures setting \
                     left them out), so what it changed alone is not known: revert the whole \
                     turn (`retrace revert turn:{n}`) or restore its files from a snapshot",
                    s.tool, s.summary
                )),
            };
        }
        let change = self.edit_step_change(reader, (n, k), &before, &s.files)?;
        if change.is_empty() {
            return nothing(format!(
                "the ledger no longer keeps the versions step {k} of turn {n} ({} {}) wrote: \
                 revert the whole turn (`retrace revert turn:{n}`) or restore its files from a \
                 snapshot",
                s.tool, s.summary
            ));
        }
        Ok(change)
    }

    /// Plans reverting turn `n`'s change `turn` (or that of its step: `(n, step)`) over the
    /// disk `disk` (stored as `disk_id`).
    fn plan(
        &self,
        reader: &StoreReader,
        disk: &[FlatEntry],
        disk_id: &ObjectId,
        (n, step): (u64, Option<u64>),
        mut turn: Vec<Change>,
    ) -> Result<Plan, Error> {
        // A nested repository's own entry, and paths below what is one on either side or on
        // disk (the `nested_repos` setting changed meanwhile), are never a turn's to take back.
        let mut nested: Vec<RelPath> = turn
            .iter()
            .filter(|c| is_nested(c))
            .map(|c| c.path.clone())
            .chain(
                disk.iter()
                    .filter(|e| e.kind == EntryKind::NestedRepo)
                    .map(|e| e.path.clone()),
            )
            .collect();
        nested.sort_unstable();
        turn.retain(|c| !is_nested(c) && !below_any(&c.path, &nested));
        // What this session's own writes in the turn did, where the ledger knows them (as an
        // undo takes them back: the turn's change read forwards, as a redo reads it).
        let (own, not_ours) = self.own_changes(reader, (n, step), &mut turn, false)?;
        // The ownership rule: paths whose last writer is not this session are left alone;
        // those the ledger never saw written, when a running turn of another session
        // changed them.
        let (mut theirs, unknown) = self.not_mine(turn.iter().map(|c| {
            let d = find(disk, &c.path);
            let holds = super::ownership::Holds {
                taken_back: same(d, c.new.as_ref()),
                written: same(d, c.old.as_ref()),
                own: own.contains(&c.path),
            };
            (c, holds)
        }))?;
        if !unknown.is_empty() {
            let unknown: std::collections::HashSet<RelPath> = unknown.into_iter().collect();
            for (path, why) in self.open_turn_paths(reader, disk_id)? {
                if unknown.contains(&path) {
                    theirs.entry(path).or_insert(why);
                }
            }
        }
        let mut plan = Plan {
            change: Vec::new(),
            merged: Vec::new(),
            conflicts: Vec::new(),
            skipped: not_ours
                .into_iter()
                .map(|(path, reason)| Skipped {
                    path: path.show(),
                    reason,
                })
                .collect(),
        };
        for c in &turn {
            if let Some(reason) = theirs.get(&c.path) {
                plan.skipped.push(Skipped {
                    path: c.path.show(),
                    reason: reason.clone(),
                });
                continue;
            }
            let d = find(disk, &c.path);
            if same(d, c.new.as_ref()) {
                if !same(d, c.old.as_ref()) {
                    plan.change.push(take_before(c, d));
                }
                continue;
            }
            if same(d, c.old.as_ref()) {
                continue; // already as before the turn
            }
            let conflict = |reason: &str| {
                (
                    Skipped {
                        path: c.path.show(),
                        reason: reason.to_string(),
                    },
                    take_before(c, d),
                )
            };
            match merge_out(reader, c, d, true)? {
                MergedOut::Already => {}
                MergedOut::Written(change, bytes) => {
                    plan.merged.push((c.path.clone(), bytes));
                    plan.change.push(change);
                }
                MergedOut::Not(reason) => plan.conflicts.push(conflict(reason)),
            }
        }
        // A path that becomes a file where the disk's directory holds paths the turn never
        // knew would lose them: a conflict too.
        for path in conflicts(disk, &plan.change) {
            if let Some(i) = plan.change.iter().position(|c| c.path.show() == path) {
                let c = plan.change.remove(i);
                plan.conflicts.push((
                    Skipped {
                        path,
                        reason: "a directory holding files the turn did not create".into(),
                    },
                    c,
                ));
            }
        }
        Ok(plan)
    }

    /// [`Session::revert`] as the model asks for it during its own turn (MCP's `revert`
    /// tool is called while the turn runs): the revert's changes become part of the running
    /// turn (undoing that turn undoes them too) instead of a turn of their own. With no turn
    /// of this session running it is [`Session::revert`].
    ///
    /// # Errors
    /// As [`Session::revert`].
    pub fn revert_in_running_turn(&self, n: u64, opts: OpOptions<'_>) -> Result<Outcome, Error> {
        self.revert_as_part_of_turn((n, None), opts)
    }

    /// [`Session::revert_step`] as the model asks for it during its own turn, as
    /// [`Session::revert_in_running_turn`] reverts a turn.
    ///
    /// # Errors
    /// As [`Session::revert`].
    pub fn revert_step_in_running_turn(
        &self,
        n: u64,
        k: u64,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Error> {
        self.revert_as_part_of_turn((n, Some(k)), opts)
    }

    fn revert_as_part_of_turn(
        &self,
        (n, step): (u64, Option<u64>),
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Error> {
        if self.subagent {
            return Ok(Outcome::Subagent);
        }
        let o = self.revert_in_turn_unpublished((n, step), opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    fn revert_in_turn_unpublished(
        &self,
        (n, step): (u64, Option<u64>),
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Stop> {
        let Begun { lock, loaded: l } = self.begin_op_in_turn(opts.progress)?;
        if l.state.pending.is_none() {
            drop(lock);
            return self.revert_unpublished(n, step, opts);
        }
        self.revert_locked(&lock, &l, (n, step), opts, true)
    }

    fn revert_unpublished(
        &self,
        n: u64,
        step: Option<u64>,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Stop> {
        let Begun { lock, loaded: l } = self.begin_op(opts.progress)?;
        self.revert_locked(&lock, &l, (n, step), opts, false)
    }

    /// The revert of turn `n` (or of its step `step`) under the exclusive lock, the session
    /// loaded; `in_turn`: as part of the running turn.
    fn revert_locked(
        &self,
        lock: &Exclusive<'_>,
        l: &Loaded,
        (n, step): (u64, Option<u64>),
        opts: OpOptions<'_>,
        in_turn: bool,
    ) -> Result<Outcome, Stop> {
        let sides = match Self::revertible(l, n) {
            Ok(sides) => sides,
            Err(refusal) => return Ok(*refusal),
        };
        let mut disk = lock.store_disk_unlisted(opts.progress)?;
        super::ledger::up_to(self.ws.store(), disk.id)?;
        let reader = self.ws.store().reader()?;
        let turn = self.change_of(&reader, n, step, sides)?;
        // The disk at the turn's paths (and on the way to them): all the revert reads of it.
        let on_disk = entries_at(&reader, &disk.id, turn.iter().map(|c| &c.path))?;
        let plan = self.plan(&reader, &on_disk, &disk.id, (n, step), turn)?;
        let mut change = plan.change;
        let mut safety = None;
        if !plan.conflicts.is_empty() {
            if !opts.force {
                return Ok(Outcome::Conflict {
                    count: plan.conflicts.len(),
                    paths: plan
                        .conflicts
                        .into_iter()
                        .take(MAX_LISTED)
                        .map(|(s, _)| s.path)
                        .collect(),
                });
            }
            let label = format!("safety: before forced revert of turn {n}");
            disk = lock.record(Some(label), opts.progress)?;
            safety = Some(disk.id);
            change.extend(plan.conflicts.into_iter().map(|(_, c)| c));
            change.sort_by(|a, b| a.path.cmp(&b.path));
        }
        if change.is_empty() {
            if !plan.skipped.is_empty() {
                return Ok(Outcome::NothingRestored {
                    turn: n,
                    count: plan.skipped.len(),
                    paths: plan.skipped.into_iter().take(MAX_LISTED).collect(),
                });
            }
            return Ok(Outcome::NothingToUndo {
                detail: format!(
                    "the workspace already holds none of turn {n}'s changes: nothing to revert"
                ),
            });
        }
        self.store_merged(&plan.merged)?;
        drop(reader);
        let reader = self.ws.store().reader()?;
        let op = if in_turn {
            // Part of the running turn: the cursor stays; the turn's end records the result.
            Op::Navigate {
                to: l.state.cursor,
                snapshot: None,
            }
        } else if let Some(k) = step {
            let what = self
                .steps(n)?
                .into_iter()
                .find(|s| s.number == k)
                .map(|s| format!("{} {}", s.tool, s.summary).trim_end().to_string())
                .unwrap_or_default();
            Op::RevertStep {
                turn: n,
                step: k,
                what,
                before: disk.id,
                began_ms: now_ms(),
                counts: counts_of(&change),
                merged: plan.merged.iter().map(|(p, _)| p.show()).collect(),
                snapshot: None,
            }
        } else {
            Op::Revert {
                turn: n,
                as_turn: 0,
                before: disk.id,
                began_ms: now_ms(),
                counts: counts_of(&change),
                merged: plan.merged.iter().map(|(p, _)| p.show()).collect(),
                snapshot: None,
            }
        };
        let mut o = self.apply_revert(lock, &reader, (&disk, &on_disk), &change, n, op, opts)?;
        if let Outcome::Restored {
            skipped,
            safety_snapshot,
            merged,
            ..
        } = &mut o
        {
            skipped.extend(plan.skipped);
            skipped.sort_by(|a, b| a.path.cmp(&b.path));
            *safety_snapshot = safety;
            *merged = plan.merged.iter().map(|(p, _)| p.show()).collect();
        }
        Ok(o)
    }

    /// Stores merged contents as blobs, so the restore can write them.
    pub(super) fn store_merged(&self, merged: &[(RelPath, Vec<u8>)]) -> Result<(), Error> {
        if merged.is_empty() {
            return Ok(());
        }
        let objects: Vec<PendingObject> = merged
            .iter()
            .map(|(_, bytes)| {
                PendingObject::whole(
                    ObjectId::of_blob(bytes),
                    ObjectKind::Blob,
                    bytes.len() as u64,
                    bytes.clone(),
                )
            })
            .collect();
        self.ws
            .store()
            .write(vec![NewFrame::pack(&objects)], None, None)?;
        Ok(())
    }

    /// Journals and applies `change` over the stored disk `disk` (`on_disk`: its entries at
    /// the change's paths, see [`Session::apply_change`]), recording `op`.
    #[allow(clippy::too_many_arguments)] // `ex` is the proof of the lock, not data
    fn apply_revert(
        &self,
        ex: &Exclusive<'_>,
        reader: &StoreReader,
        disk: (&crate::capture::Capture, &[FlatEntry]),
        change: &[Change],
        n: u64,
        op: Op,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Stop> {
        let what = format!("revert of turn {n}");
        let (target, fin) = self.apply_change(ex, reader, disk, change, what, op, opts)?;
        let mut skipped = fin.applied.left_alone;
        if let Some(after) = &fin.capture {
            for c in change {
                if !same(find(&after.entries, &c.path), find(&target, &c.path))
                    && !skipped
                        .iter()
                        .any(|s| s.path.as_bytes() == c.path.as_bytes())
                {
                    skipped.push(Skipped {
                        path: c.path.show(),
                        reason: "changed while it was being reverted".into(),
                    });
                }
            }
        }
        Ok(Outcome::Restored {
            turn: Some(n),
            mode: Mode::Files,
            files_written: fin.applied.written,
            files_deleted: fin.applied.deleted,
            skipped,
            anchor: None,
            prompt: None,
            snapshot: Some(fin.snapshot),
            safety_snapshot: None,
            merged: Vec::new(),
            rewound: Vec::new(),
        })
    }
}
