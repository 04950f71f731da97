//! What a store holds and takes: object, byte and snapshot counts, and the bytes of each
//! table (`retrace-dump stats`).

use redb::{ReadTransaction, ReadableTableMetadata};

use super::schema::{
    self, META, META_LOG_END, OBJECTS, PACKS, SNAPSHOT_ADDED, SNAPSHOTS, STAGED,
};
use super::{
    BytesTable, KeyKind, KeyedTable, NamedTable, RowsTable, StoreReader, StoreStats, Table,
    TableBytes, disk_bytes, open_opt,
};
use crate::error::StoreError;
use crate::object::ObjectKind;

impl StoreReader {
    /// Number of snapshots recorded.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn snapshot_count(&self) -> Result<u64, StoreError> {
        match &self.snapshots {
            Some(t) => t.len().map_err(|x| self.db_err(x)),
            None => Ok(0),
        }
    }

    /// Number of objects indexed.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn object_count(&self) -> Result<u64, StoreError> {
        match &self.objects {
            Some(t) => t.len().map_err(|x| self.db_err(x)),
            None => Ok(0),
        }
    }

    /// Bytes the pack log's values hold now (what a byte budget counts: compressed objects,
    /// independent of whether the file has been compacted yet).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn packed_bytes(&self) -> Result<u64, StoreError> {
        match &self.packs {
            Some(t) => Ok(t.len().map_err(|x| self.db_err(x))? * schema::PACK_BYTES),
            None => Ok(0),
        }
    }

    /// Length of the pack log in bytes.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn log_end(&self) -> Result<u64, StoreError> {
        Ok(self
            .meta_value(META_LOG_END)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0))
    }

    /// Object and byte counts.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut s = StoreStats::default();
        let mut frames = std::collections::HashSet::new();
        for (_, rec) in self.objects()? {
            let Ok(rec) = rec else { continue };
            if frames.insert(rec.offset) {
                s.frame_bytes += u64::from(rec.stored_len);
            }
            match rec.delta {
                Some(d) => {
                    s.deltas += 1;
                    *s.depths.entry(d.depth).or_default() += 1;
                    s.delta_saved_bytes += rec.size.saturating_sub(u64::from(rec.len));
                }
                None => s.whole += 1,
            }
            // This object's share of its frame's stored bytes.
            let share = u64::from(rec.stored_len) * u64::from(rec.len)
                / u64::from(rec.frame_len).max(1);
            let by = &mut s.stored_by_kind;
            *match (rec.delta, rec.kind) {
                (Some(_), _) => &mut by.deltas,
                (None, ObjectKind::Blob) => &mut by.contents,
                (None, ObjectKind::ChunkedBlob) => &mut by.chunk_lists,
                (None, ObjectKind::Tree) => &mut by.trees,
            } += share;
            match rec.kind {
                ObjectKind::Blob => {
                    s.blobs += 1;
                    s.logical_bytes += rec.size;
                }
                ObjectKind::ChunkedBlob => s.chunked += 1,
                ObjectKind::Tree => s.trees += 1,
            }
            s.payload_bytes += u64::from(rec.len);
        }
        s.log_bytes = self.log_end()?;
        s.packed_bytes = self.packed_bytes()?;
        s.file_bytes = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        s.disk_bytes = disk_bytes(&self.path);
        s.snapshots = self.snapshot_count()?;
        Ok(s)
    }
}

impl StoreReader {
    /// What each table of the store takes (see [`TableBytes`]): the store's own and
    /// `tables`, those of the layers above, in the order `retrace-dump stats` lists them (the
    /// store's `meta`, `objects`, `packs` and `snapshots`, then `tables`, then `staged`).
    /// A table the file does not have is left out.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn table_bytes(&self, tables: &[Table]) -> Result<Vec<TableBytes>, StoreError> {
        use redb::TableHandle;
        fn one<K: redb::Key + 'static>(
            tx: &ReadTransaction,
            def: redb::TableDefinition<K, &'static [u8]>,
        ) -> Result<Option<TableBytes>, redb::Error> {
            let Some(t) = open_opt(tx, def)? else {
                return Ok(None);
            };
            let st = t.stats()?;
            Ok(Some(TableBytes {
                table: def.name().to_string(),
                entries: t.len()?,
                stored: st.stored_bytes(),
                metadata: st.metadata_bytes(),
                fragmented: st.fragmented_bytes(),
            }))
        }
        let tx = &self.tx;
        let above = tables.iter().map(|t| match t.key() {
            KeyKind::Key => one(tx, KeyedTable::new(t.name()).def()),
            KeyKind::Rows => one(tx, RowsTable::new(t.name()).def()),
            KeyKind::Bytes => one(tx, BytesTable::new(t.name()).def()),
            KeyKind::Name => one(tx, NamedTable::new(t.name()).def()),
        });
        let all = [
            one(tx, META),
            one(tx, OBJECTS),
            one(tx, PACKS),
            one(tx, SNAPSHOTS),
            one(tx, SNAPSHOT_ADDED),
        ]
        .into_iter()
        .chain(above)
        .chain([one(tx, STAGED)]);
        let mut out = Vec::new();
        for t in all {
            out.extend(t.map_err(|x| self.db_err(x))?);
        }
        Ok(out)
    }
}
