//! Forgetting damaged objects. A capture decides "already stored" by looking an id up, so a
//! damaged object that stays indexed would be reused by every later snapshot although the
//! disk may still hold the good bytes. So a read that finds damage (an id that does not
//! match its bytes, a frame that does not decompress, a record that does not decode) makes
//! the store forget that object: its index record is removed (its bytes wait for GC), and
//! the next capture that meets the content stores it again. Snapshots that refer to it are
//! whole again as soon as that happens, since ids are content hashes.
//!
//! Forgetting also changes the store's stat cache key (`meta.forgotten`, see
//! [`StoreReader::cache_key`]): every stat cache written before names the old key and reads
//! as empty, so the next capture re-reads every file instead of trusting cached ids.
//!
//! A reader hands what it found to its store when dropped and forgets it then if no other
//! writer is busy (it never waits); otherwise the store keeps the list and the next capture
//! (or the store's own drop) forgets it first. Only a record still equal to the one found
//! damaged is removed, so an object stored again meanwhile by another process stays.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use redb::{ReadableTable, WriteTransaction};
use serde::Serialize;

use super::schema::{META, META_FORGOTTEN, META_FORGOTTEN_IDS, OBJECTS};
use super::{SharedDb, Store, StoreReader};
use crate::error::StoreError;
use crate::object::{ChunkList, ObjectId, ObjectKind, ObjectRecord};

/// Damaged objects waiting to be forgotten: id and the index record found with it.
#[derive(Default)]
pub(crate) struct Damage(Mutex<Vec<(ObjectId, Vec<u8>)>>);

impl Damage {
    fn add(&self, found: Vec<(ObjectId, Vec<u8>)>) {
        let mut d = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for f in found {
            if !d.iter().any(|(id, _)| *id == f.0) {
                d.push(f);
            }
        }
    }

    fn take(&self) -> Vec<(ObjectId, Vec<u8>)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What a reader of a read-write store needs to forget damage it finds.
pub(crate) struct Heal {
    pub(super) db: SharedDb,
    pub(super) damage: Arc<Damage>,
    pub(super) path: PathBuf,
}

/// What [`StoreReader::check_objects`] found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepairScan {
    /// Objects read.
    pub objects: u64,
    /// Objects found damaged (the store forgets them).
    pub damaged: Vec<ObjectId>,
    /// One line per fault.
    pub faults: Vec<String>,
}

/// Removes the records in `pending` that are unchanged and counts the forgetting in `meta`.
fn forget_in(
    tx: &WriteTransaction,
    pending: &[(ObjectId, Vec<u8>)],
    path: &Path,
) -> Result<Vec<ObjectId>, StoreError> {
    let e = |source: redb::Error| StoreError::Db {
        path: path.into(),
        source: source.into(),
    };
    let mut objects = tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
    let mut gone = Vec::new();
    for (id, raw) in pending {
        let same = objects
            .get(&id.0)
            .map_err(|x| e(x.into()))?
            .is_some_and(|g| g.value() == raw.as_slice());
        if same {
            objects.remove(&id.0).map_err(|x| e(x.into()))?;
            gone.push(*id);
        }
    }
    if !gone.is_empty() {
        let mut meta = tx.open_table(META).map_err(|x| e(x.into()))?;
        let n = meta
            .get(META_FORGOTTEN)
            .map_err(|x| e(x.into()))?
            .and_then(|g| g.value().try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0);
        meta.insert(META_FORGOTTEN, (n + 1).to_le_bytes().as_slice())
            .map_err(|x| e(x.into()))?;
        let mut ids = meta
            .get(META_FORGOTTEN_IDS)
            .map_err(|x| e(x.into()))?
            .map(|g| g.value().to_vec())
            .unwrap_or_default();
        for id in &gone {
            if !ids.chunks_exact(32).any(|c| c == id.0) {
                ids.extend_from_slice(&id.0);
            }
        }
        meta.insert(META_FORGOTTEN_IDS, ids.as_slice())
            .map_err(|x| e(x.into()))?;
    }
    Ok(gone)
}

/// Forgets what `damage` holds if a write transaction is free right now; else keeps it.
fn try_forget(db: &SharedDb, damage: &Damage, path: &Path) {
    let pending = damage.take();
    if pending.is_empty() {
        return;
    }
    let done = db.try_read().ok().is_some_and(|db| {
        db.as_ref()
            .and_then(|db| db.try_begin_write().ok())
            .is_some_and(|tx| forget_in(&tx, &pending, path).is_ok() && tx.commit().is_ok())
    });
    if !done {
        damage.add(pending);
    }
}

impl Store {
    /// Forgets every damaged object readers found (waiting for the write lock). Returns the
    /// objects removed from the index.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails; the objects stay on the list then.
    pub fn forget_damaged(&self) -> Result<Vec<ObjectId>, StoreError> {
        let pending = self.damage.take();
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.path.clone();
        self.transact(|tx| forget_in(tx.tx, &pending, &path))
            .inspect_err(|_| self.damage.add(pending.clone()))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        try_forget(&self.db, &self.damage, &self.path);
    }
}

impl Drop for StoreReader {
    fn drop(&mut self) {
        let found = std::mem::take(self.found.get_mut().unwrap_or_else(PoisonError::into_inner));
        if let (Some(heal), false) = (&self.heal, found.is_empty()) {
            heal.damage.add(found);
            try_forget(&heal.db, &heal.damage, &heal.path);
        }
    }
}

impl StoreReader {
    /// Whether the stored object `id` holds exactly `data` (a capture that just read `data`
    /// and found its id stored checks the copy it reuses). `false` when it does not: the
    /// damage (the object, or the delta of its chain that is damaged) is recorded, and
    /// [`StoreReader::forget_found`] forgets it so that the capture's copy replaces it.
    pub(crate) fn holds_exactly(&self, id: &ObjectId, data: &[u8]) -> bool {
        let Ok(rec) = self.record(id) else {
            return false;
        };
        match self.payload(id, &rec) {
            Ok(bytes) if bytes == data => true,
            Ok(_) => {
                let _ = self.content_damage(id, &rec, "content does not hash to its id".into());
                false
            }
            Err(_) => false,
        }
    }

    /// Forgets now (in a transaction of its own) the damage this reader found, as dropping
    /// it would: a capture that found a stored copy damaged then writes its own.
    pub(crate) fn forget_found(&self) {
        let found = std::mem::take(&mut *self.found.lock().unwrap_or_else(PoisonError::into_inner));
        if let (Some(heal), false) = (&self.heal, found.is_empty()) {
            heal.damage.add(found);
            try_forget(&heal.db, &heal.damage, &heal.path);
        }
    }

    /// Records `id` as damaged (the store forgets it) and returns the error to report.
    pub(super) fn damaged(&self, id: &ObjectId, detail: String) -> StoreError {
        let raw = self
            .objects
            .as_ref()
            .and_then(|t| t.get(&id.0).ok().flatten().map(|g| g.value().to_vec()));
        if let Some(raw) = raw {
            let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
            if !found.iter().any(|(f, _)| f == id) {
                found.push((*id, raw));
            }
        }
        self.corrupt(id, detail)
    }

    /// Records as damaged each chunk of `list` that does not hash to its id; returns how many.
    pub(super) fn damaged_chunks(&self, list: &ChunkList) -> usize {
        let mut bad = 0;
        for (chunk, _) in &list.chunks {
            let Ok(rec) = self.record(chunk) else {
                continue;
            };
            let whole = self
                .payload(chunk, &rec)
                .is_ok_and(|bytes| ObjectId::of_blob(&bytes) == *chunk);
            if !whole {
                let _ = self.content_damage(chunk, &rec, "chunk does not hash to its id".into());
                bad += 1;
            }
        }
        bad
    }

    /// Objects this reader found damaged so far.
    #[must_use]
    pub fn damage_found(&self) -> Vec<ObjectId> {
        self.found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, _)| *id)
            .collect()
    }

    /// The objects ever forgotten as damaged ([`META_FORGOTTEN_IDS`]): a capture stores their
    /// content whole when it meets it again.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn forgotten_ids(&self) -> Result<std::collections::HashSet<ObjectId>, StoreError> {
        Ok(self
            .meta_value(META_FORGOTTEN_IDS)?
            .unwrap_or_default()
            .chunks_exact(32)
            .filter_map(|c| c.try_into().ok().map(ObjectId))
            .collect())
    }

    /// The 16 bytes a stat cache must name to be trusted: the store id while no object was
    /// ever forgotten, else `blake3(store_id ‖ forgotten as u64 le)`'s first 16 bytes, so
    /// forgetting invalidates every stat cache written before.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn cache_key(&self) -> Result<[u8; 16], StoreError> {
        let id = self.store_id()?;
        let n = self
            .meta_value(META_FORGOTTEN)?
            .and_then(|v| v.try_into().ok().map(u64::from_le_bytes))
            .unwrap_or(0);
        if n == 0 {
            return Ok(id);
        }
        let mut h = blake3::Hasher::new();
        h.update(&id);
        h.update(&n.to_le_bytes());
        let mut out = [0; 16];
        out.copy_from_slice(&h.finalize().as_bytes()[..16]);
        Ok(out)
    }

    /// Reads and verifies every object, in pack-log order (each shared frame is
    /// decompressed once); what is damaged is recorded, to be forgotten when the reader
    /// is dropped.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn check_objects(&self) -> Result<RepairScan, StoreError> {
        let mut objects = self.objects()?;
        objects.sort_by_key(|(_, rec)| rec.as_ref().map_or(0, |r| r.offset));
        let mut scan = RepairScan::default();
        for (id, rec) in &objects {
            scan.objects += 1;
            let checked = match rec {
                Err(_) => self.record(id).map(|_| ()),
                Ok(rec) => match rec.kind {
                    ObjectKind::Blob | ObjectKind::ChunkedBlob => {
                        self.read_blob_into(id, &mut std::io::sink()).map(|_| ())
                    }
                    ObjectKind::Tree => self.read_tree(id).map(|_| ()),
                },
            };
            if let Err(e) = checked {
                scan.faults.push(e.to_string());
            }
        }
        scan.damaged = self.damage_found();
        Ok(scan)
    }

    /// Whether the delta chain below `id` is indexed down to an object stored whole (a
    /// capture stores again, whole, an object whose chain is broken: see
    /// `Hasher::known`).
    pub(crate) fn bases_present(&self, id: &ObjectId) -> bool {
        let mut at = *id;
        for _ in 0..=crate::object::delta::MAX_DEPTH {
            match self.record(&at) {
                Ok(ObjectRecord { delta: None, .. }) => return true,
                Ok(ObjectRecord { delta: Some(d), .. }) => at = d.base,
                Err(_) => return false,
            }
        }
        false
    }

    /// Whether every object below `root` is present (trees verified as they are read).
    /// `memo` remembers the answer per tree and chunked blob across calls.
    #[must_use]
    pub fn is_whole(&self, root: &ObjectId, memo: &mut HashMap<ObjectId, bool>) -> bool {
        if let Some(w) = memo.get(root) {
            return *w;
        }
        let kind = self.record(root).map(|r| r.kind).ok();
        let whole = match kind {
            None => false,
            Some(kind) => match kind {
                ObjectKind::Blob => self.bases_present(root),
                ObjectKind::ChunkedBlob => self.chunk_list(root).is_ok_and(|l| {
                    l.chunks.iter().all(|(c, _)| {
                        self.record(c).is_ok_and(|r| r.kind == ObjectKind::Blob)
                            && self.bases_present(c)
                    })
                }),
                ObjectKind::Tree => self.read_tree(root).is_ok_and(|t| {
                    t.entries.iter().all(|e| {
                        e.kind == crate::object::EntryKind::NestedRepo || self.is_whole(&e.id, memo)
                    })
                }),
            },
        };
        // Blobs are not remembered: there are many and a lookup answers as fast.
        if kind != Some(ObjectKind::Blob) {
            memo.insert(*root, whole);
        }
        whole
    }
}
