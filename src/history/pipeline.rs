//! The one way an operation that writes files begins and ends early.
//!
//! Undo, redo, navigate and revert each start the same way: quick refusals, the exclusive
//! lock (or busy), recovery of a restore a crash interrupted, the session re-read under the
//! lock, and a dead owner's turn closed: [`Session::begin_op`] does that once and hands the
//! operation a [`Begun`] to work on. Anything may end an operation early with an answer for
//! the caller (busy, a conflict, nothing to undo: an [`Outcome`]) or with a failure: a
//! [`Stop`], which `?` carries up through every step; the public entry point turns an
//! answer back into its result ([`Stop::answer`]).
//!
//! The journal's payload is fixed here too: a restore that history journals records a
//! [`SessionOp`] with its result, and [`recover_journal`], [`recover_journal_if_needed`]
//! and [`pending_journal`] name that type once for every recovery and reader of the journal.

use std::time::Duration;

use super::db::Loaded;
use super::{Outcome, Session, SessionOp};
use crate::error::{Error, RestoreError, StoreError};

use crate::progress::Progress;
use crate::restore::journal::JournalRecord;
use crate::store::ReadTx;
use crate::working_copy::{Exclusive, WorkingCopy};

/// Why an operation ends before its work is done.
#[derive(Debug)]
pub(crate) enum Stop {
    /// An answer for the caller: the operation's outcome (busy, refused, nothing to do).
    Answer(Box<Outcome>),
    /// A failure.
    Failed(Error),
}

impl<E: Into<Error>> From<E> for Stop {
    fn from(e: E) -> Stop {
        Stop::Failed(e.into())
    }
}

impl Stop {
    /// An operation that ends with `outcome`.
    pub(crate) fn with(outcome: Outcome) -> Stop {
        Stop::Answer(Box::new(outcome))
    }

    /// The operation's result: its answer, or its failure.
    ///
    /// # Errors
    /// The failure.
    pub(crate) fn answer(self) -> Result<Outcome, Error> {
        match self {
            Stop::Answer(o) => Ok(*o),
            Stop::Failed(e) => Err(e),
        }
    }
}

/// An operation begun: the exclusive lock held and the session as it stands under it.
pub(crate) struct Begun<'a> {
    /// The lock (proof of it, for what writes files).
    pub lock: Exclusive<'a>,
    /// The session, re-read under the lock.
    pub loaded: Loaded,
}

/// The journal of an interrupted restore, as history writes it: a restore's result
/// recorded with a [`SessionOp`].
pub(crate) type Journal = JournalRecord<SessionOp>;

/// Completes a restore a crash interrupted (under the lock `ex`), recording its history op;
/// the report to warn with, if there was one.
///
/// # Errors
/// [`RestoreError`] from the store or the files.
pub(crate) fn recover_journal(
    ex: &Exclusive<'_>,
    progress: &dyn Progress,
) -> Result<Option<String>, RestoreError> {
    ex.recover::<SessionOp>(progress)
}

/// Completes a restore a crash interrupted, if the journal holds one and the lock comes
/// within `wait`.
pub(crate) fn recover_journal_if_needed(wc: &WorkingCopy, wait: Duration) {
    wc.recover_if_needed::<SessionOp>(wait);
}

/// The journal of an interrupted restore, if there is one.
///
/// # Errors
/// [`StoreError`] when it cannot be read or decoded.
pub(crate) fn pending_journal(tx: &ReadTx) -> Result<Option<Journal>, StoreError> {
    crate::restore::journal::get::<SessionOp>(tx)
}

impl Session {
    /// The common start of an operation that writes files (undo, redo, navigate, revert):
    /// quick refusals, the exclusive lock, recovery of an interrupted restore, the session
    /// re-read under the lock, and a dead owner's turn closed.
    pub(crate) fn begin_op(&self, progress: &dyn Progress) -> Result<Begun<'_>, Stop> {
        if let Some(o) = self.refuse()? {
            return Err(Stop::with(o));
        }
        let lock = self.lock_or_busy()?;
        if let Some(report) = recover_journal(&lock, progress)? {
            self.ws.warn(report);
        }
        let loaded = self.load()?;
        if let Some(o) = self.pending_refusal(&loaded) {
            return Err(Stop::with(o));
        }
        let loaded = self.clean_dead_turn(&lock, loaded, progress)?;
        Ok(Begun { lock, loaded })
    }

    /// As [`Session::begin_op`] for an operation that runs inside the session's own turn
    /// (undo or revert of the running turn): the lock and recovery, the session re-read, a
    /// dead owner's turn closed, but a turn still running is no refusal.
    pub(crate) fn begin_op_in_turn(&self, progress: &dyn Progress) -> Result<Begun<'_>, Stop> {
        let lock = self.lock_or_busy()?;
        if let Some(report) = recover_journal(&lock, progress)? {
            self.ws.warn(report);
        }
        let loaded = self.load()?;
        // A turn whose owner is gone is not running: it is closed as any undo closes it.
        let loaded = if self.pending_refusal(&loaded).is_none() {
            self.clean_dead_turn(&lock, loaded, progress)?
        } else {
            loaded
        };
        Ok(Begun { lock, loaded })
    }

    /// Takes the exclusive lock, or says busy.
    fn lock_or_busy(&self) -> Result<Exclusive<'_>, Stop> {
        let ws: &WorkingCopy = &self.ws;
        match ws.lock_exclusive(ws.history_wait()) {
            Ok(l) => Ok(l),
            Err(StoreError::Busy { .. }) => Err(Stop::with(Outcome::Busy {
                detail: "another retrace process is restoring or capturing this workspace".into(),
            })),
            Err(e) => Err(Stop::Failed(e.into())),
        }
    }
}
