//! Tree navigation: resolving an anchor to the exact snapshot recorded for it, and restoring
//! the workspace to it behind the unsaved-edits guard.

use super::db::Loaded;
use super::record::{CheckpointRecord, Mode, Op, TurnRecord, TurnState};
use super::revert::RevertPreview;
use super::{Begun, OpOptions, Outcome, Session, SessionOp, Stop};
use crate::error::Error;
use crate::object::ObjectId;
use crate::scan::Skipped;
use crate::working_copy::MAX_LISTED;
use crate::working_copy::journaled::JournaledRestore;
use crate::working_copy::partial::entries_at;

/// The snapshot and cursor an anchor names.
struct Target {
    snapshot: Option<ObjectId>,
    cursor: Option<u64>,
    reason: Option<String>,
    expired: bool,
    /// The host's conversation node there: the turn's start or end anchor, or the host
    /// anchor named (None at a checkpoint, or where the host gave none).
    host: Option<String>,
}

impl Session {
    fn resolve(l: &Loaded, anchor: &str) -> Result<Target, Error> {
        // `log` lists a revert as `revert:N`: the turn it is.
        let as_turn = revert_as_turn(anchor);
        let anchor = as_turn.as_deref().unwrap_or(anchor);
        let unknown = |reason: String| Error::Anchor {
            anchor: anchor.to_string(),
            reason,
        };
        let of_turn = |t: &TurnRecord, after: bool| {
            let snapshot = if after { t.after } else { t.before };
            let cursor = if after { Some(t.number) } else { t.parent };
            let usable = matches!(t.state, TurnState::Complete)
                || (t.state == TurnState::ConversationOnly && snapshot.is_some());
            Target {
                snapshot: snapshot.filter(|_| usable),
                cursor,
                reason: (!usable).then(|| {
                    t.reason
                        .clone()
                        .unwrap_or_else(|| format!("turn {} has no such snapshot", t.number))
                }),
                expired: t.state == TurnState::Expired,
                host: if after {
                    t.leaf.clone()
                } else {
                    t.anchor.clone()
                },
            }
        };
        let of_checkpoint = |c: &CheckpointRecord| Target {
            snapshot: Some(c.snapshot),
            cursor: c.cursor,
            reason: None,
            expired: false,
            host: None,
        };
        if let Some(rest) = anchor.strip_prefix("turn:") {
            let (num, after) = match rest.strip_suffix(":before") {
                Some(n) => (n, false),
                None => (rest, true),
            };
            let n: u64 = num
                .parse()
                .map_err(|_| unknown("write turn:N or turn:N:before".into()))?;
            let t = l.turn(n).ok_or_else(|| {
                unknown(if n == 0 || n >= l.state.next_turn {
                    format!("the session has no turn {n}")
                } else {
                    format!("turn {n} is no longer kept (retention or the turn cap removed it)")
                })
            })?;
            if t.state == TurnState::Pending {
                return Err(unknown(format!("turn {n} is still in progress")));
            }
            return Ok(of_turn(t, after));
        }
        if let Some(num) = anchor.strip_prefix("checkpoint:") {
            let n: u64 = num
                .parse()
                .map_err(|_| unknown("write checkpoint:N".into()))?;
            let c = l
                .checkpoints
                .iter()
                .find(|c| c.number == n)
                .ok_or_else(|| unknown(format!("checkpoint {n} is not kept")))?;
            return Ok(of_checkpoint(c));
        }
        // Host anchors: the newest record naming it wins (a turn's start anchor is usually
        // the previous turn's leaf, and the newer before-snapshot holds the edits made in
        // between).
        for t in l
            .turns
            .iter()
            .rev()
            .filter(|t| t.state != TurnState::Pending)
        {
            if t.anchor.as_deref() == Some(anchor) {
                return Ok(of_turn(t, false));
            }
            if t.leaf.as_deref() == Some(anchor) {
                return Ok(of_turn(t, true));
            }
        }
        if let Some(c) = l
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.label.as_deref() == Some(anchor))
        {
            return Ok(of_checkpoint(c));
        }
        if let Some(t) = l
            .turns
            .iter()
            .find(|t| t.rounds.iter().any(|r| r == anchor))
        {
            return Err(unknown(format!(
                "it lies inside turn {}, which has snapshots only at its start and end: \
                 navigate to turn:{}:before or turn:{}",
                t.number, t.number, t.number
            )));
        }
        Err(unknown(
            "no turn or checkpoint of this session names it (see `retrace log`)".into(),
        ))
    }

    /// The snapshot recorded at `anchor` (as [`Session::navigate`] names them, and a
    /// step's: `turn:N.K`, `turn:N.K:before`, see `step_name`), for commands that take a
    /// snapshot id (`retrace diff turn:1`).
    ///
    /// # Errors
    /// [`Error::Anchor`] when the anchor names no kept snapshot; [`Error::Store`].
    pub fn snapshot_at(&self, anchor: &str) -> Result<ObjectId, Error> {
        if let Some((turn, step, before)) = step_name(anchor) {
            return self.step_snapshot(anchor, turn, step, before);
        }
        let t = Session::resolve(&self.load()?, anchor)?;
        t.snapshot.ok_or_else(|| Error::Anchor {
            anchor: anchor.to_string(),
            reason: t
                .reason
                .unwrap_or_else(|| "it has no snapshot of the files".into()),
        })
    }

    /// Restores the workspace to the exact snapshot recorded at `anchor`: a host anchor of
    /// any turn's start or end, `turn:N` (after), `turn:N:before`, `checkpoint:N` or a
    /// checkpoint label. The disk must equal the last snapshot the session (or the
    /// workspace) knows of, else [`Outcome::Dirty`]. Clears redo unless nothing moves.
    ///
    /// # Errors
    /// [`Error::Anchor`] for an anchor naming no snapshot; store, capture or I/O failures.
    pub fn navigate(&self, anchor: &str, mode: Mode) -> Result<Outcome, Error> {
        self.navigate_with(anchor, mode, OpOptions::default())
    }

    /// [`Session::navigate`] with options; the result is also published for external clients
    /// (see `crate::history::runtime`).
    ///
    /// # Errors
    /// As [`Session::navigate`].
    pub fn navigate_with(
        &self,
        anchor: &str,
        mode: Mode,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Error> {
        let o = self.navigate_with_unpublished(anchor, mode, opts).or_else(Stop::answer)?;
        self.publish(Some(&o));
        Ok(o)
    }

    /// [`Session::navigate`] with options (force, progress).
    ///
    /// # Errors
    /// As [`Session::navigate`].
    fn navigate_with_unpublished(
        &self,
        anchor: &str,
        mode: Mode,
        opts: OpOptions<'_>,
    ) -> Result<Outcome, Stop> {
        let Begun { lock, loaded: l } = self.begin_op(opts.progress)?;
        let target = Self::resolve(&l, anchor)?;
        let host_anchor = target.host.clone().filter(|_| mode.conversation());
        let (Some(snapshot), true) = (target.snapshot, mode.files()) else {
            if target.cursor == l.state.cursor {
                // Files stay and the cursor does not move: nothing happens, redo is kept.
                return Ok(Outcome::ConversationOnly {
                    turn: target.cursor,
                    reason: "already there".into(),
                    anchor: host_anchor,
                    prompt: None,
                    checkpoint: None,
                });
            }
            let checkpoint = self.checkpoint_under(
                &lock,
                Some(format!("kept at conversation navigation to {anchor}")),
                opts.progress,
                Some(Op::Navigate {
                    to: target.cursor,
                    snapshot: None,
                }),
            )?;
            if target.expired {
                return Ok(Outcome::Expired {
                    turn: target.cursor,
                    anchor: host_anchor,
                    prompt: None,
                });
            }
            return Ok(Outcome::ConversationOnly {
                turn: target.cursor,
                reason: target
                    .reason
                    .unwrap_or_else(|| "files left as they are (conversation-only)".into()),
                anchor: host_anchor,
                prompt: None,
                checkpoint,
            });
        };
        // Stored, so the journal's source is a complete snapshot even with unsaved edits;
        // without a list of every path (a watcher then spares the walk): the trees say what
        // differs, and the disk is read from its snapshot where it does.
        let disk = lock.store_disk_unlisted(opts.progress)?;
        super::ledger::up_to(self.ws.store(), disk.id)?;
        if disk.id == snapshot && target.cursor == l.state.cursor {
            return Ok(Outcome::Restored {
                turn: target.cursor,
                mode,
                files_written: Vec::new(),
                files_deleted: Vec::new(),
                skipped: Vec::new(),
                anchor: host_anchor,
                prompt: None,
                snapshot: Some(snapshot),
                safety_snapshot: None,
                merged: Vec::new(),
                rewound: Vec::new(),
            });
        }
        // A reader that sees the disk's trees, stored just now.
        let reader = self.ws.store().reader()?;
        let mut safety = None;
        {
            let changed = unsaved(
                &reader,
                [l.state.last_known, reader.last_known()?],
                disk.id,
                snapshot,
            )?;
            if !changed.is_empty() {
                if !opts.force {
                    return Ok(Outcome::Dirty {
                        count: changed.len(),
                        paths: changed.into_iter().take(MAX_LISTED).collect(),
                    });
                }
                let label = format!("safety: before forced navigation to {anchor}");
                safety = Some(lock.record(Some(label), opts.progress)?.id);
            }
        }
        // Paths another session's running turn has changed so far are that turn's: a
        // navigation that would change them is a conflict (forced: saved first).
        let fresh = self.ws.store().reader()?;
        let change = crate::diff::changes(&fresh, &disk.id, &snapshot)?;
        {
            let clash: Vec<String> = self
                .open_clashes(&fresh, disk.id, &change)?
                .into_iter()
                .map(|s| s.path)
                .collect();
            if !clash.is_empty() {
                if !opts.force {
                    return Ok(Outcome::Conflict {
                        count: clash.len(),
                        paths: clash.into_iter().take(MAX_LISTED).collect(),
                    });
                }
                if safety.is_none() {
                    let label = format!("safety: before forced navigation to {anchor}");
                    safety = Some(lock.record(Some(label), opts.progress)?.id);
                }
            }
        }
        drop(fresh);
        // A navigation rewinds the whole workspace: it says whose work it rewinds.
        let rewound = self.rewound(change.iter().map(|c| &c.path))?;
        let on_disk = entries_at(&reader, &disk.id, change.iter().map(|c| &c.path))?;
        let target_entries = entries_at(&reader, &snapshot, change.iter().map(|c| &c.path))?;
        let fin = lock.journaled_apply(
            &reader,
            JournaledRestore {
                what: format!("navigation to {anchor}"),
                source: disk.id,
                target: snapshot,
                frames: Vec::new(),
                then: Some(SessionOp(
                    self.key,
                    Op::Navigate {
                        to: target.cursor,
                        snapshot: None,
                    },
                )),
                record: None,
            },
            &on_disk,
            &target_entries,
            opts.progress,
        )?;
        drop(reader);
        if let Err(e) = fin.recorded {
            return Ok(Outcome::PersistenceUncertain {
                detail: e.to_string(),
            });
        }
        let (applied, now) = (fin.applied, fin.snapshot);
        Ok(Outcome::Restored {
            turn: target.cursor,
            mode,
            files_written: applied.written,
            files_deleted: applied.deleted,
            skipped: applied.left_alone,
            anchor: host_anchor,
            prompt: None,
            snapshot: Some(now),
            safety_snapshot: safety,
            merged: Vec::new(),
            rewound,
        })
    }
}

impl Session {
    /// What [`Session::navigate_with`] would do to the files (with `opts.force` as given):
    /// the paths it would write and delete, those another session's running turn holds
    /// (`conflicts`), and the refusal it would answer (changes in no snapshot, nothing to
    /// move). Writes no file (the disk's new contents are stored, as any capture stores them).
    ///
    /// # Errors
    /// As [`Session::navigate`].
    pub fn navigate_dry_run(
        &self,
        anchor: &str,
        mode: Mode,
        opts: OpOptions<'_>,
    ) -> Result<RevertPreview, Error> {
        let Begun { lock, loaded: l } = match self.begin_op(opts.progress) {
            Ok(begun) => begun,
            Err(stop) => return Ok(preview_refused(None, stop.answer()?)),
        };
        let target = Self::resolve(&l, anchor)?;
        let (Some(snapshot), true) = (target.snapshot, mode.files()) else {
            // The conversation alone moves: no file is written.
            return Ok(RevertPreview {
                turn: target.cursor.unwrap_or(0),
                ..RevertPreview::default()
            });
        };
        let disk = lock.store_disk_unlisted(opts.progress)?;
        super::ledger::up_to(self.ws.store(), disk.id)?;
        let reader = self.ws.store().reader()?;
        let change = crate::diff::changes(&reader, &disk.id, &snapshot)?;
        let mut p = RevertPreview {
            turn: target.cursor.unwrap_or(0),
            ..RevertPreview::default()
        };
        for c in &change {
            if c.new.is_some() {
                p.would_write.push(c.path.show());
            } else if c.old.is_some() {
                p.would_delete.push(c.path.show());
            }
        }
        p.conflicts = self.open_clashes(&reader, disk.id, &change)?;
        let changed = unsaved(
            &reader,
            [l.state.last_known, reader.last_known()?],
            disk.id,
            snapshot,
        )?;
        if !opts.force {
            if !changed.is_empty() {
                p.refused = Some(Outcome::Dirty {
                    count: changed.len(),
                    paths: changed.into_iter().take(MAX_LISTED).collect(),
                });
            } else if !p.conflicts.is_empty() {
                p.refused = Some(Outcome::Conflict {
                    count: p.conflicts.len(),
                    paths: p
                        .conflicts
                        .iter()
                        .take(MAX_LISTED)
                        .map(|c| c.path.clone())
                        .collect(),
                });
            }
        }
        Ok(p)
    }

    /// The paths of `change` (from the disk `disk`) that another session's running turn
    /// has changed so far, with why.
    fn open_clashes(
        &self,
        reader: &crate::store::StoreReader,
        disk: ObjectId,
        change: &[crate::diff::Change],
    ) -> Result<Vec<Skipped>, Error> {
        let open = self.open_turn_paths(reader, &disk)?;
        if open.is_empty() {
            return Ok(Vec::new());
        }
        Ok(change
            .iter()
            .filter_map(|c| {
                open.get(&c.path).map(|why| Skipped {
                    path: c.path.show(),
                    reason: why.clone(),
                })
            })
            .collect())
    }
}

/// A navigation's preview answering `o` instead.
fn preview_refused(turn: Option<u64>, o: Outcome) -> RevertPreview {
    RevertPreview {
        turn: turn.unwrap_or(0),
        refused: Some(o),
        ..RevertPreview::default()
    }
}

/// What the disk `disk` holds that no snapshot does, as paths: the changes since the nearer
/// of the `known` states (the session's last known snapshot, and the workspace's, which a
/// restore or another session's capture may have moved), so that paths a snapshot holds
/// are never named; a file deleted since that `target` brings back as it was is no loss.
/// With no known state, every path of the disk.
fn unsaved(
    reader: &crate::store::StoreReader,
    known: [Option<ObjectId>; 2],
    disk: ObjectId,
    target: ObjectId,
) -> Result<Vec<String>, Error> {
    if known.contains(&Some(disk)) {
        return Ok(Vec::new());
    }
    let mut changed: Option<Vec<String>> = None;
    for k in known.iter().flatten() {
        let paths =
            crate::working_copy::unsaved(reader, crate::diff::changes(reader, k, &disk)?, &target)?;
        if changed.as_ref().is_none_or(|c| paths.len() < c.len()) {
            changed = Some(paths);
        }
    }
    Ok(match changed {
        Some(c) => c,
        None => crate::diff::flatten(reader, &disk)?
            .iter()
            .map(|e| e.path.show())
            .collect(),
    })
}

/// `revert:N` (and `revert:N:before`), as `log` lists a revert, named as the turn it is:
/// `turn:N` (`turn:N:before`).
#[must_use]
pub fn revert_as_turn(name: &str) -> Option<String> {
    name.strip_prefix("revert:")
        .map(|rest| format!("turn:{rest}"))
}

/// `turn:N.K` (after step K of turn N) or `turn:N.K:before`: `(N, K, before)`.
#[must_use]
pub fn step_name(anchor: &str) -> Option<(u64, u64, bool)> {
    let rest = anchor.strip_prefix("turn:")?;
    let (rest, before) = match rest.strip_suffix(":before") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    let (n, k) = rest.split_once('.')?;
    Some((n.parse().ok()?, k.parse().ok()?, before))
}
