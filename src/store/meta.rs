//! What the store records beside its objects: the meta values (the workspace, the store's
//! id, its last known state, maintenance and the warnings it defers) and the snapshot log.

use std::path::PathBuf;

use redb::ReadableTable;

use super::schema::{
    self, META, META_LAST_KNOWN, META_STORE_ID, META_WORKSPACE, SNAPSHOT_ADDED, SNAPSHOTS,
};
use super::{SNAPSHOT_VERSION, SnapshotRecord, Store, StoreReader, WriteTx};
use crate::error::StoreError;
use crate::object::ObjectId;

/// The lines of a [`schema::META_WARNINGS`] value.
fn warning_lines(value: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(value)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

impl Store {
    /// Records when maintenance last ran, and the packed bytes it could not go below when
    /// the byte budget could not be met (`over_budget`; 0 = it was met).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn set_maintained(&self, now_ms: u64, over_budget: u64) -> Result<(), StoreError> {
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            meta.insert(schema::META_MAINTAINED, now_ms.to_le_bytes().as_slice())
                .map_err(|x| e(x.into()))?;
            if over_budget == 0 {
                meta.remove(schema::META_OVER_BUDGET)
                    .map_err(|x| e(x.into()))?;
            } else {
                meta.insert(
                    schema::META_OVER_BUDGET,
                    over_budget.to_le_bytes().as_slice(),
                )
                .map_err(|x| e(x.into()))?;
            }
            Ok(())
        })
    }

    /// Adds `lines` to the warnings a background maintenance pass leaves for the next
    /// command to print ([`Store::take_deferred_warnings`]), after those already there.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn defer_warnings(&self, lines: &[String]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            let mut text = meta
                .get(schema::META_WARNINGS)
                .map_err(|x| e(x.into()))?
                .map(|g| String::from_utf8_lossy(g.value()).into_owned())
                .unwrap_or_default();
            for line in lines {
                // One warning per line: a line break inside one would make two.
                let line = line.replace(['\n', '\r'], " ");
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&line);
            }
            meta.insert(schema::META_WARNINGS, text.as_bytes())
                .map_err(|x| e(x.into()))?;
            Ok(())
        })
    }

    /// Takes the warnings background maintenance left ([`Store::defer_warnings`]): returns
    /// them and removes them in one transaction, so that each is said once. Reads first, and
    /// writes only when there are some.
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Busy`] when other writers hold the store.
    pub fn take_deferred_warnings(&self) -> Result<Vec<String>, StoreError> {
        if self.reader()?.deferred_warnings()?.is_empty() {
            return Ok(Vec::new());
        }
        let e = self.db_err();
        self.transact(|tx| {
            let mut meta = tx.tx.open_table(META).map_err(|x| e(x.into()))?;
            let taken = meta
                .remove(schema::META_WARNINGS)
                .map_err(|x| e(x.into()))?
                .map(|g| warning_lines(g.value()))
                .unwrap_or_default();
            Ok(taken)
        })
    }

    /// Deletes snapshot-log records older than `cutoff_ms` (they stop being GC roots),
    /// except the newest: the snapshot a command just printed is never taken from the log,
    /// whatever the age rule or the byte budget. Returns how many.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn prune_snapshots(&self, cutoff_ms: u64) -> Result<u64, StoreError> {
        let e = self.db_err();
        self.transact(|tx| {
            let rows: Vec<u64> = {
                let t = tx.tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
                let mut rows = Vec::new();
                for item in t.iter().map_err(|x| e(x.into()))? {
                    let (k, v) = item.map_err(|x| e(x.into()))?;
                    if postcard::from_bytes::<SnapshotRecord>(v.value())
                        .is_ok_and(|r| r.time_ms < cutoff_ms)
                    {
                        rows.push(k.value());
                    }
                }
                rows
            };
            tx.remove_snapshots(&rows)
        })
    }
}

impl WriteTx<'_> {
    /// Deletes the snapshot-log rows numbered `rows` (they stop being GC roots), except the
    /// newest row, which is never taken from the log (see [`Store::prune_snapshots`]).
    /// Returns how many went.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn remove_snapshots(&self, rows: &[u64]) -> Result<u64, StoreError> {
        let e = super::tx::db_error(self.path);
        let mut t = self.tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
        let newest = t.last().map_err(|x| e(x.into()))?.map(|(k, _)| k.value());
        let mut added = self
            .tx
            .open_table(SNAPSHOT_ADDED)
            .map_err(|x| e(x.into()))?;
        let mut removed = 0;
        for &n in rows {
            if Some(n) != newest && t.remove(n).map_err(|x| e(x.into()))?.is_some() {
                added.remove(n).map_err(|x| e(x.into()))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

impl StoreReader {
    /// The workspace root recorded when the store was created.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn workspace(&self) -> Result<Option<PathBuf>, StoreError> {
        Ok(self.meta_value(META_WORKSPACE)?.map(|b| {
            use std::os::unix::ffi::OsStringExt;
            PathBuf::from(std::ffi::OsString::from_vec(b))
        }))
    }

    /// The store's random id (see [`schema::META_STORE_ID`]).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn store_id(&self) -> Result<[u8; 16], StoreError> {
        Ok(self
            .meta_value(META_STORE_ID)?
            .and_then(|v| <[u8; 16]>::try_from(v.as_slice()).ok())
            .unwrap_or([0; 16]))
    }

    /// The root id of the workspace's last known state.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn last_known(&self) -> Result<Option<ObjectId>, StoreError> {
        Ok(self
            .meta_value(META_LAST_KNOWN)?
            .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok().map(ObjectId)))
    }

    /// Snapshots, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Corrupt`] for a record that does not decode.
    pub fn snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        Ok(self.snapshot_rows()?.into_iter().map(|(_, r)| r).collect())
    }

    /// The log's newest row and its number, if any.
    ///
    /// # Errors
    /// As [`StoreReader::snapshots`].
    pub fn newest_snapshot_row(&self) -> Result<Option<(u64, SnapshotRecord)>, StoreError> {
        let Some(t) = &self.snapshots else {
            return Ok(None);
        };
        let Some((k, v)) = t.last().map_err(|x| self.db_err(x))? else {
            return Ok(None);
        };
        let rec = postcard::from_bytes(v.value())
            .map_err(|x| self.corrupt(&ObjectId::ZERO, format!("snapshot record: {x}")))?;
        Ok(Some((k.value(), rec)))
    }

    /// Snapshots with their row numbers in the log (ascending), oldest first.
    ///
    /// # Errors
    /// As [`StoreReader::snapshots`].
    pub fn snapshot_rows(&self) -> Result<Vec<(u64, SnapshotRecord)>, StoreError> {
        let Some(t) = &self.snapshots else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (k, v) = item.map_err(|x| self.db_err(x))?;
            let bytes = v.value();
            if bytes.first() != Some(&SNAPSHOT_VERSION) {
                return Err(
                    self.corrupt(&ObjectId::ZERO, "snapshot record of unknown version".into())
                );
            }
            out.push((
                k.value(),
                postcard::from_bytes(bytes)
                    .map_err(|x| self.corrupt(&ObjectId::ZERO, format!("snapshot record: {x}")))?,
            ));
        }
        Ok(out)
    }

    /// What each `snapshots` row's operation added to the store, by row (see
    /// [`schema::SNAPSHOT_ADDED`]); rows written without the figure are absent.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn snapshot_added(&self) -> Result<std::collections::HashMap<u64, u64>, StoreError> {
        let Some(t) = super::open_opt(&self.tx, SNAPSHOT_ADDED).map_err(|x| self.db_err(x))?
        else {
            return Ok(std::collections::HashMap::new());
        };
        let mut out = std::collections::HashMap::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (k, v) = item.map_err(|x| self.db_err(x))?;
            if let Ok(b) = <[u8; 8]>::try_from(v.value()) {
                out.insert(k.value(), u64::from_le_bytes(b));
            }
        }
        Ok(out)
    }

    /// Resolves a snapshot id given in full or by a unique prefix of at least 8 hex digits.
    ///
    /// # Errors
    /// [`StoreError::BadSnapshotId`] when it matches nothing or several snapshots.
    pub fn resolve(&self, prefix: &str) -> Result<ObjectId, StoreError> {
        let p = prefix.to_ascii_lowercase();
        if p.len() < 8 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::BadSnapshotId(format!(
                "{prefix:?} is not a snapshot id: give at least 8 hex digits (see `retrace log`)"
            )));
        }
        let mut found: Vec<ObjectId> = Vec::new();
        for s in self.snapshots()? {
            if s.root.to_hex().starts_with(&p) && !found.contains(&s.root) {
                found.push(s.root);
            }
        }
        if let Some(full) = ObjectId::from_hex(&p)
            && found.is_empty()
            && self.contains(&full)?
        {
            return Ok(full);
        }
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(StoreError::BadSnapshotId(format!(
                "no snapshot starts with {prefix}; see `retrace log`"
            ))),
            _ => Err(StoreError::BadSnapshotId(format!(
                "{prefix} matches {} snapshots; give more digits",
                found.len()
            ))),
        }
    }

    /// Unix milliseconds of the last maintenance pass (0: never).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn maintained_ms(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(schema::META_MAINTAINED)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }

    /// The warnings background maintenance left for the next command to print (see
    /// [`Store::defer_warnings`]), oldest first.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn deferred_warnings(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .meta_value(schema::META_WARNINGS)?
            .map(|v| warning_lines(&v))
            .unwrap_or_default())
    }

    /// Packed bytes the last maintenance pass could not go below without evicting what is
    /// never evicted (0: it met the byte budget, or there is none).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn over_budget(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(schema::META_OVER_BUDGET)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }
}
