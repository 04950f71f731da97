//! Typed transactions over the tables of the layers above: the only way code outside
//! `store/` reads or writes them. A table is named by a handle its owner declares
//! ([`RowsTable`], [`KeyedTable`], [`BytesTable`], [`NamedTable`], see `table.rs`); the
//! owner's meta keys by a [`MetaKey`].
//!
//! A transaction carries the store path, so every error it returns names the store, and
//! converts redb's errors once, here. Values are the owning module's encoded records (the
//! owner decodes its own records); keys are typed.

use std::path::Path;

use redb::{ReadableTable, ReadableTableMetadata, TableError};

use super::schema::META;
use super::table::{BytesTable, Key, KeyedTable, MetaKey, NamedTable, RowsTable};
use crate::error::StoreError;

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
            table: RowsTable,
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
            table: RowsTable,
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
        pub fn row(&self, table: RowsTable, key: &Key, n: u64) -> Result<Option<Vec<u8>>, StoreError> {
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
            table: RowsTable,
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
        pub fn count_rows(&self, table: RowsTable, key: &Key) -> Result<u64, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let n = t
                .range((key, 0)..=(key, u64::MAX))
                .map_err(|x| e(x.into()))?
                .count();
            Ok(n as u64)
        }

        /// The value of `key` in `table`, if any.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn keyed(&self, table: KeyedTable, key: &Key) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let v = t.get(key).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// Every key of `table` with its value, in key order.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn keyed_entries(&self, table: KeyedTable) -> Result<Vec<(Key, Vec<u8>)>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let mut out = Vec::new();
            for item in t.iter().map_err(|x| e(x.into()))? {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                out.push((*k.value(), v.value().to_vec()));
            }
            Ok(out)
        }

        /// The value of byte string `key` in `table`, if any.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn bytes_entry(
            &self,
            table: BytesTable,
            key: &[u8],
        ) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let v = t.get(key).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// Every entry of `table`, in key (byte) order.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn bytes_entries(
            &self,
            table: BytesTable,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let mut out = Vec::new();
            for item in t.iter().map_err(|x| e(x.into()))? {
                let (k, v) = item.map_err(|x| e(x.into()))?;
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        }

        /// The value of name `key` in `table`, if any.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        #[allow(dead_code)] // generated for both transactions, used on one
        pub fn named(&self, table: NamedTable, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, table.def(), e);
            let v = t.get(key).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }

        /// The meta value of `key`, if set.
        ///
        /// # Errors
        /// [`StoreError::Db`].
        pub fn meta(&self, key: MetaKey) -> Result<Option<Vec<u8>>, StoreError> {
            let e = db_error(&self.path);
            let t = open_read!(self.tx, META, e);
            let v = t.get(key.name()).map_err(|x| e(x.into()))?;
            Ok(v.map(|v| v.value().to_vec()))
        }
    };
}

/// A read transaction: a consistent view of the tables of the layers above.
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
    pub fn put_row(&self, table: RowsTable, key: &Key, n: u64, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.insert((key, n), value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes row `n` of session `key` in `table`, if present.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_row(&self, table: RowsTable, key: &Key, n: u64) -> Result<(), StoreError> {
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
        table: RowsTable,
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
    pub fn remove_rows_through(&self, table: RowsTable, key: &Key, last: u64) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.retain_in((key, 0)..=(key, last), |_, _| false)
            .map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Writes (or replaces) the value of `key` in `table`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_keyed(&self, table: KeyedTable, key: &Key, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.insert(key, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes `key` from `table`, if present.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_keyed(&self, table: KeyedTable, key: &Key) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.remove(key).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// `table` open for a run of reads and writes (see [`BytesEntries`]).
    ///
    /// # Errors
    /// [`StoreError::Db`], also when `table` is open already in this transaction.
    pub fn open_bytes(&self, table: BytesTable) -> Result<BytesEntries<'_>, StoreError> {
        let e = db_error(self.path);
        let table = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        Ok(BytesEntries {
            table,
            path: self.path,
        })
    }

    /// Writes (or replaces) the value of byte string `key` in `table`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_bytes_entry(
        &self,
        table: BytesTable,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.insert(key, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes the entries of `table` for which `drop` answers true.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn retain_bytes_entries(
        &self,
        table: BytesTable,
        mut drop: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.retain(|k, v| !drop(k, v)).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Writes (or replaces) the value of name `key` in `table`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put_named(&self, table: NamedTable, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.insert(key, value).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Removes name `key` from `table`, if present.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_named(&self, table: NamedTable, key: &str) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(table.def()).map_err(|x| e(x.into()))?;
        t.remove(key).map_err(|x| e(x.into()))?;
        Ok(())
    }

    /// Sets the meta value of `key` (None: removes it).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_meta(&self, key: MetaKey, value: Option<&[u8]>) -> Result<(), StoreError> {
        let e = db_error(self.path);
        let mut t = self.tx.open_table(META).map_err(|x| e(x.into()))?;
        match value {
            Some(v) => t.insert(key.name(), v).map(|_| ()),
            None => t.remove(key.name()).map(|_| ()),
        }
        .map_err(|x| e(x.into()))
    }
}

/// A [`BytesTable`] held open by a write transaction: a whole restore reads and writes the
/// ledger's row for each of 100k paths, and opening the table for each was a third of its
/// cost. While it is held, the transaction's own reads and writes of that table fail (redb
/// opens a table once at a time): drop it first.
pub struct BytesEntries<'a> {
    table: redb::Table<'a, &'static [u8], &'static [u8]>,
    path: &'a Path,
}

impl BytesEntries<'_> {
    /// The store file (for messages).
    #[must_use]
    pub fn path(&self) -> &Path {
        self.path
    }

    /// The entry of `key`, if any.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self
            .table
            .get(key)
            .map_err(|x| db_error(self.path)(x.into()))?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    /// Whether `n` keys' entries are a large part of the table: then [`Self::get_sorted`]
    /// had better scan (a whole restore changes every path of the ledger: a scan reads each
    /// leaf once).
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

    /// The entries of `keys` (sorted, distinct), in their order: with `scan`, in one scan
    /// of the table from the first to the last (see [`Self::dense`]), else one lookup each.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn get_sorted(
        &self,
        keys: &[&[u8]],
        scan: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let e = db_error(self.path);
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(Vec::new());
        };
        if !scan {
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let mut out = vec![None; keys.len()];
        let mut i = 0;
        for row in self
            .table
            .range::<&[u8]>(*first..=*last)
            .map_err(|x| e(x.into()))?
        {
            let (k, v) = row.map_err(|x| e(x.into()))?;
            let k = k.value();
            while i < keys.len() && keys[i] < k {
                i += 1;
            }
            match keys.get(i) {
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

    /// Writes (or replaces) the entry of `key`.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.table
            .insert(key, value)
            .map_err(|x| db_error(self.path)(x.into()))?;
        Ok(())
    }
}
