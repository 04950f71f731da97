//! Typed transactions over the history tables: the only way code outside `store/` reads or
//! writes sessions, turns, checkpoints, the op log, leases and the restore journal.
//!
//! A transaction carries the store path, so every error it returns names the store, and
//! converts redb's errors once, here. Values are the owning module's encoded records (the
//! history module decodes its own records); keys are typed.

use std::path::Path;

use redb::{ReadableTable, ReadableTableMetadata, TableDefinition, TableError};

use super::schema::{
    CHECKPOINTS, JOURNAL, LEASES, LEDGER, META, META_LEDGER_AT, META_LEDGER_CLAIMS,
    META_LEDGER_OBSERVED, OPLOG, REVERTS, SESSION_NAMES, SESSIONS, STEPS, TURNS,
};
use crate::error::StoreError;

/// A session's key in the store (see [`crate::history::db::SessionKey`]).
pub type Key = [u8; 32];

/// The history tables keyed by (session key, number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// `turns`: turn number → turn record.
    Turns,
    /// `checkpoints`: checkpoint number → checkpoint record.
    Checkpoints,
    /// `oplog`: sequence number → op record.
    Oplog,
    /// `leases`: turn number → lease record of a pending turn.
    Leases,
    /// `session_names`: 0 → the session's name record.
    Names,
    /// `reverts`: turn number → revert record of a turn that reverted another.
    Reverts,
    /// `steps`: turn number × 2²⁰ + step number → step record (one tool call of a turn).
    Steps,
}

type RowsDef = TableDefinition<'static, (&'static Key, u64), &'static [u8]>;

impl Rows {
    fn def(self) -> RowsDef {
        match self {
            Rows::Turns => TURNS,
            Rows::Checkpoints => CHECKPOINTS,
            Rows::Oplog => OPLOG,
            Rows::Leases => LEASES,
            Rows::Names => SESSION_NAMES,
            Rows::Reverts => REVERTS,
            Rows::Steps => STEPS,
        }
    }
}

/// The key of the journal's single entry.
const JOURNAL_KEY: &str = "restore";

pub(super) fn db_error(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |source| StoreError::Db {
        path: path.into(),
        source: source.into(),
    }
}

/// Opens a table for reading; a table that does not exist yet reads as empty.
macro_rules! open_read {
    ($tx:expr, $def:expr, $e:expr) => {
        match $tx.open_table($def) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Default::default()),
            Err(x) => return Err($e(x.into())),
        }
    };
}

/// Reads shared by both kinds of transaction.
macro_rules! reads {
    () => {
        /// The store file (for messages).
        #[must_use]
        pub fn path(&self) -> &Path {
            &self.path
        }

        /// Calls `f` with each row of session `key` in `table`, in number order.
        ///
        /// # Errors
        /// [`StoreError::Db`], or `f`'s error.
        pub fn each_row(
            &self,
            table: Rows,
            key: &Key,
            mut f: impl FnMut(u64, &[u8]) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            for item in t
                .range((key, 0)..=(key, u64::MAX))
                .map_err(|x| e(x.into()))?
            {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                f(k.value().1, v.value())?;
            }
            Ok(())
        }

        /// Calls `f` with each row of session `key` in `table` numbered `first..=last`, in
        /// number order.
        ///
        /// # Errors
        /// [`StoreError::Db`], or `f`'s error.
        pub fn each_row_in(
            &self,
            table: Rows,
            key: &Key,
            first: u64,
            last: u64,
            mut f: impl FnMut(u64, &[u8]) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            for item in t
                .range((key, first)..=(key, last))
                .map_err(|x| e(x.into()))?
            {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                f(k.value().1, v.value())?;
            }
            Ok(())
        }

        /// Row `n` of session `key` in `table`.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn row(&self, table: Rows, key: &Key, n: u64) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let v = t.get((key, n)).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// The newest row of session `key` in `table`, with its number.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn last_row(
            &self,
            table: Rows,
            key: &Key,
        ) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let last = t
                .range((key, 0)..=(key, u64::MAX))
                .map_err(|x| e(x.into()))?
                .next_back()
                .transpose()
                .map_err(|x| e(x.into()))?;
            Ok(last.map(|(k, v)| (k.value().1, v.value().to_vec())))
        }

        /// How many rows session `key` has in `table`.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn count_rows(&self, table: Rows, key: &Key) -> Result<u64, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let n = t
                .range((key, 0)..=(key, u64::MAX))
                .map_err(|x| e(x.into()))?
                .count();
            Ok(n as u64)
        }

        /// The session record of `key`, if the session exists.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn session(&self, key: &Key) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, SESSIONS, e);
            let v = t.get(key).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// Every session key with its record, in key order.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn sessions(&self) -> Result<Vec<(Key, Vec<u8>)>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, SESSIONS, e);
            let mut out = Vec::new();
            for item in t.iter().map_err(|x| e(x.into()))? {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                out.push((*k.value(), v.value().to_vec()));
            }
            Ok(out)
        }

        /// The ledger entry of `path` (who last wrote it), if any.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn ledger(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, LEDGER, e);
            let v = t.get(path).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// Every ledger entry, in path order.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn ledger_entries(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, LEDGER, e);
            let mut out = Vec::new();
            for item in t.iter().map_err(|x| e(x.into()))? {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        }

        /// The snapshot the ledger was last brought up to date with.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn ledger_at(&self) -> Result<Option<crate::object::ObjectId>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, META, e);
            let v = t.get(META_LEDGER_AT).map_err(|x| e(x.into()))?;
            Ok(v.and_then(|v| {
                <[u8; 32]>::try_from(v.value())
                    .ok()
                    .map(crate::object::ObjectId)
            }))
        }

        /// The claims waiting for the ledger's next update (encoded by the history).
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn ledger_claims(&self) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, META, e);
            let v = t.get(META_LEDGER_CLAIMS).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// The paths edit steps read since the ledger's last update (encoded by the history).
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn ledger_observed(&self) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, META, e);
            let v = t.get(META_LEDGER_OBSERVED).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// The restore journal's record, if a restore is in progress or was interrupted.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn journal(&self) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, JOURNAL, e);
            let v = t.get(JOURNAL_KEY).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }
    };
}

/// A read transaction: a consistent view of the history tables.
pub struct ReadTx {
    pub(super) tx: redb::ReadTransaction,
    pub(super) path: std::path::PathBuf,
}

impl ReadTx {
    reads!();
}

/// A write transaction in progress; its caller ([`super::Store::transact`],
/// [`super::Store::write_with`]) commits it.
pub struct WriteTx<'a> {
    pub(super) tx: &'a redb::WriteTransaction,
    pub(super) path: &'a Path,
}

impl WriteTx<'_> {
    reads!();

    /// Writes (or replaces) row `n` of session `key` in `table`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_row(&self, table: Rows, key: &Key, n: u64, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.insert((key, n), value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes row `n` of session `key` in `table`, if present.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_row(&self, table: Rows, key: &Key, n: u64) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.remove((key, n)).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the rows of session `key` in `table` numbered `first..=last`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_rows_between(
        &self,
        table: Rows,
        key: &Key,
        first: u64,
        last: u64,
    ) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.retain_in((key, first)..=(key, last), |_, _| false)
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the rows of session `key` in `table` numbered `..=last` (all of them when
    /// `last` is `u64::MAX`).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_rows_through(&self, table: Rows, key: &Key, last: u64) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.retain_in((key, 0)..=(key, last), |_, _| false)
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Writes the session record of `key`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_session(&self, key: &Key, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(SESSIONS).map_err(|x| e(x.into()))?;
        t.insert(key, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the session record of `key`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_session(&self, key: &Key) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(SESSIONS).map_err(|x| e(x.into()))?;
        t.remove(key).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// The ledger table open for a run of reads and writes (see [`LedgerRows`]).
    ///
    /// # Errors
    /// [`StoreError::Db`], also when the ledger is open already in this transaction.
    pub fn ledger_rows(&self) -> Result<LedgerRows<'_>, StoreError> {
        let e = db_error(self.path);
        let table = self.tx.open_table(LEDGER).map_err(|x| e(x.into()))?;
        Ok(LedgerRows {
            table,
            path: self.path,
        })
    }

    /// Writes (or replaces) the ledger entry of `path`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_ledger(&self, path: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(LEDGER).map_err(|x| e(x.into()))?;
        t.insert(path, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the ledger entries for which `drop` answers true.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn retain_ledger(
        &self,
        mut drop: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(LEDGER).map_err(|x| e(x.into()))?;
        t.retain(|k, v| !drop(k, v)).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Records the snapshot the ledger is now up to date with.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_ledger_at(&self, root: crate::object::ObjectId) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(META).map_err(|x| e(x.into()))?;
        t.insert(META_LEDGER_AT, root.0.as_slice())
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Replaces the claims waiting for the ledger's next update (None: there are none).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_ledger_claims(&self, value: Option<&[u8]>) -> Result<(), StoreError> {
        self.set_meta_or_remove(META_LEDGER_CLAIMS, value)
    }

    /// Replaces the paths edit steps read since the ledger's last update (None: none).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_ledger_observed(&self, value: Option<&[u8]>) -> Result<(), StoreError> {
        self.set_meta_or_remove(META_LEDGER_OBSERVED, value)
    }

    fn set_meta_or_remove(&self, key: &str, value: Option<&[u8]>) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(META).map_err(|x| e(x.into()))?;
        match value {
            Some(v) => t.insert(key, v).map(|_| ()),
            None => t.remove(key).map(|_| ()),
        }
        .map_err(|x| e(x.into()))
    }

    /// Writes the restore journal's record.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_journal(&self, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(JOURNAL).map_err(|x| e(x.into()))?;
        t.insert(JOURNAL_KEY, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the restore journal.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn clear_journal(&self) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(JOURNAL).map_err(|x| e(x.into()))?;
        t.remove(JOURNAL_KEY).map_err(|x| e(x.into()))?;
        Ok(())
    }
}

/// The ledger table held open by a write transaction: a whole restore reads and writes a
/// row for each of 100k paths, and opening the table for each was a third of its cost.
/// While it is held, [`WriteTx::ledger`] and [`WriteTx::put_ledger`] fail (redb opens a
/// table once at a time): drop it first.
pub struct LedgerRows<'a> {
    table: redb::Table<'a, &'static [u8], &'static [u8]>,
    path: &'a Path,
}

impl LedgerRows<'_> {
    /// The store file (for messages).
    #[must_use]
    pub fn path(&self) -> &Path {
        self.path
    }

    /// The entry of `path`, if any.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn get(&self, path: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self
            .table
            .get(path)
            .map_err(|x| db_error(self.path)(x.into()))?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    /// Whether `n` paths' entries are a large part of the table: then [`Self::get_sorted`]
    /// had better scan (a whole restore changes every path: a scan reads each leaf once).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn dense(&self, n: usize) -> Result<bool, StoreError> {
        let entries = self
            .table
            .len()
            .map_err(|x| db_error(self.path)(x.into()))?;
        Ok(n >= 1024 && n as u64 >= entries / 4)
    }

    /// The entries of `paths` (sorted, distinct), in their order: with `scan`, in one scan
    /// of the table from the first to the last (see [`Self::dense`]), else one lookup each.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn get_sorted(
        &self,
        paths: &[&[u8]],
        scan: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let e = db_error(self.path);
        let (Some(first), Some(last)) = (paths.first(), paths.last()) else {
            return Ok(Vec::new());
        };
        if !scan {
            return paths.iter().map(|p| self.get(p)).collect();
        }
        let mut out = vec![None; paths.len()];
        let mut i = 0;
        for row in self
            .table
            .range::<&[u8]>(*first..=*last)
            .map_err(|x| e(x.into()))?
        {
            let (k, v) = row.map_err(|x| e(x.into()))?;
            let k = k.value();
            while i < paths.len() && paths[i] < k {
                i += 1;
            }
            match paths.get(i) {
                None => break,
                Some(p) if *p == k => {
                    out[i] = Some(v.value().to_vec());
                    i += 1;
                }
                Some(_) => {}
            }
        }
        Ok(out)
    }

    /// Writes (or replaces) the entry of `path`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put(&mut self, path: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.table
            .insert(path, value)
            .map_err(|x| db_error(self.path)(x.into()))?;
        Ok(())
    }
}
