//! Restoring some paths of a snapshot ([`crate::working_copy`] does the work), reached from
//! the facade and from a session alike: its journal records a [`SessionOp`], as every
//! restore's does, so whichever process recovers an interrupted one reads it.

use super::db::SessionKey;
use super::{Held, Session, SessionOp};
use crate::error::RestoreError;
use crate::object::ObjectId;
use crate::progress::Progress;
use crate::restore::RestoreOutcome;
use crate::working_copy::{DryRun, RestoreOptions, WorkingCopy, normalize_paths};

/// Restores the files and directories `paths` of snapshot `id` in `wc`, or with
/// `opts.dry_run` plans it: the outcome and the refusal a real restore would meet (a real
/// restore answers its refusal as [`RestoreError::Dirty`]).
///
/// # Errors
/// As [`crate::Workspace::restore_paths`].
pub fn restore_paths(
    wc: &WorkingCopy,
    id: &ObjectId,
    paths: &[String],
    opts: RestoreOptions,
    mine: Option<SessionKey>,
    progress: &dyn Progress,
) -> Result<DryRun, RestoreError> {
    if paths.is_empty() {
        return Err(RestoreError::Path {
            path: String::new(),
            reason: "no paths given: name the files or directories to restore".into(),
        });
    }
    let only = normalize_paths(wc.root(), paths)?;
    let held = Held {
        store: wc.store(),
        mine,
    };
    let then = mine.map(SessionOp::restore);
    let (outcome, refused) = wc.restore_paths_or_plan(id, &only, opts, then, &held, progress)?;
    match refused {
        Some(r) if !opts.dry_run => Err(RestoreError::Dirty {
            paths: r.paths,
            count: r.count,
        }),
        refused => Ok(DryRun { outcome, refused }),
    }
}

/// The outcome of a restore [`restore_paths`] ran or planned; a refusal is an error, as a
/// restore answers it.
///
/// # Errors
/// [`RestoreError::Dirty`] when the plan says the restore would be refused.
pub fn outcome_of(d: DryRun) -> Result<RestoreOutcome, RestoreError> {
    match d.refused {
        Some(r) => Err(RestoreError::Dirty {
            paths: r.paths,
            count: r.count,
        }),
        None => Ok(d.outcome),
    }
}

impl Session {
    /// [`crate::Workspace::restore_paths`] from a session (`serve`'s `restore_paths`).
    ///
    /// # Errors
    /// As [`crate::Workspace::restore_paths`].
    pub fn restore_paths(
        &self,
        id: &ObjectId,
        paths: &[String],
        opts: RestoreOptions,
        progress: &dyn Progress,
    ) -> Result<RestoreOutcome, RestoreError> {
        restore_paths(&self.ws, id, paths, opts, Some(self.key), progress).and_then(outcome_of)
    }

    /// A restore made for this session: of `paths` of snapshot `id`, or of the whole
    /// workspace when `paths` is empty. As [`crate::Workspace::restore_paths`], and what
    /// another session wrote last is refused as its running turns' work is
    /// ([`crate::RestoreError::Held`]).
    ///
    /// # Errors
    /// As [`crate::Workspace::restore_paths`].
    pub fn restore(
        &self,
        id: &ObjectId,
        paths: &[String],
        opts: RestoreOptions,
        progress: &dyn Progress,
    ) -> Result<RestoreOutcome, RestoreError> {
        if !paths.is_empty() {
            return self.restore_paths(id, paths, opts, progress);
        }
        match self.restore_whole(id, opts, progress)? {
            (_, Some(r)) => Err(RestoreError::Dirty {
                paths: r.paths,
                count: r.count,
            }),
            (outcome, None) => Ok(outcome),
        }
    }

    /// A whole restore made for this session (its plan with `opts.dry_run`), the ownership
    /// rule's holders asked.
    fn restore_whole(
        &self,
        id: &ObjectId,
        opts: RestoreOptions,
        progress: &dyn Progress,
    ) -> Result<(RestoreOutcome, Option<crate::working_copy::DirtyRefusal>), RestoreError> {
        let held = Held {
            store: self.ws.store(),
            mine: Some(self.key),
        };
        let then = Some(SessionOp::restore(self.key));
        self.ws.restore_or_plan(id, opts, then, &held, progress)
    }

    /// [`Session::restore`]'s plan, and whether it would be refused. Writes nothing.
    ///
    /// # Errors
    /// As [`Session::restore`], apart from the refusal.
    pub fn restore_dry_run(
        &self,
        id: &ObjectId,
        paths: &[String],
        force: bool,
        progress: &dyn Progress,
    ) -> Result<DryRun, RestoreError> {
        if !paths.is_empty() {
            return self.restore_paths_dry_run(id, paths, force, progress);
        }
        let opts = RestoreOptions {
            force,
            dry_run: true,
        };
        let (outcome, refused) = self.restore_whole(id, opts, progress)?;
        Ok(DryRun { outcome, refused })
    }

    /// [`crate::Workspace::restore_paths_dry_run`] from a session.
    ///
    /// # Errors
    /// As [`crate::Workspace::restore_paths`], apart from the refusal.
    pub fn restore_paths_dry_run(
        &self,
        id: &ObjectId,
        paths: &[String],
        force: bool,
        progress: &dyn Progress,
    ) -> Result<DryRun, RestoreError> {
        let opts = RestoreOptions {
            force,
            dry_run: true,
        };
        restore_paths(&self.ws, id, paths, opts, Some(self.key), progress)
    }
}
