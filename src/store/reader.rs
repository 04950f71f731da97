//! Reading objects: a store's read view, its records and payloads (through a small cache of
//! decompressed frames), delta chains rebuilt and their damage found, and verified blobs
//! and trees.

use std::path::Path;
use std::sync::{Arc, Mutex};

use redb::{ReadableDatabase, ReadableTable};

use super::schema::{META, OBJECTS, PACKS, SNAPSHOTS};
use super::{ObjectListing, ReadTx, Store, StoreReader, heal, open_opt, pack};
use crate::error::StoreError;
use crate::object::record::{Codec, decompress_prefix};
use crate::object::{ChunkList, ObjectId, ObjectKind, ObjectRecord, Tree};

/// Decompressed frames a reader keeps (each at most about 1 MiB).
const FRAME_CACHE: usize = 8;

/// A version in a shared frame larger than this is not used as a delta base (see
/// [`StoreReader::delta_base`]).
pub(super) const MAX_SHARED_BASE_FRAME: u32 = 256 * 1024;

/// Rebuilt delta payloads a reader keeps, and the largest it keeps.
const REBUILT_CACHE: usize = 8;
const REBUILT_MAX_BYTES: usize = 4 << 20;

/// Where a delta chain's rebuilding starts.
enum Start {
    /// From an object stored whole.
    Whole(ObjectId, ObjectRecord),
    /// From a payload rebuilt recently.
    Cached(Arc<Vec<u8>>),
}

/// Whether `bytes` are the payload of object `id` of `kind` (a chunk list's id is its
/// file's, so it cannot be checked alone; chunk lists are never deltas or bases).
pub(super) fn hashes_to(kind: ObjectKind, bytes: &[u8], id: &ObjectId) -> bool {
    match kind {
        ObjectKind::Blob => ObjectId::of_blob(bytes) == *id,
        ObjectKind::Tree => ObjectId::of_tree(bytes) == *id,
        ObjectKind::ChunkedBlob => false,
    }
}

impl Store {
    /// A read transaction over the tables of the layers above.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn begin_read(&self) -> Result<ReadTx, StoreError> {
        let tx = self.with_db(|db| db.begin_read().map_err(|x| self.db_err()(x.into())))?;
        Ok(ReadTx {
            tx,
            path: self.path.clone(),
        })
    }

    /// A consistent read view of the store.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        let mut r = self.with_db(|db| StoreReader::new(db, &self.path))?;
        r.heal = Some(heal::Heal {
            db: Arc::clone(&self.db),
            damage: Arc::clone(&self.damage),
            path: self.path.clone(),
        });
        Ok(r)
    }
}

impl StoreReader {
    pub(super) fn new(db: &impl ReadableDatabase, path: &Path) -> Result<StoreReader, StoreError> {
        let e = |source: redb::Error| StoreError::Db {
            path: path.into(),
            source: source.into(),
        };
        let tx = db.begin_read().map_err(|x| e(x.into()))?;
        Ok(StoreReader {
            path: path.into(),
            meta: open_opt(&tx, META).map_err(e)?,
            objects: open_opt(&tx, OBJECTS).map_err(e)?,
            packs: open_opt(&tx, PACKS).map_err(e)?,
            snapshots: open_opt(&tx, SNAPSHOTS).map_err(e)?,
            frames: Mutex::new(Vec::with_capacity(FRAME_CACHE)),
            decompressed: Default::default(),
            rebuilt: Mutex::new(Vec::with_capacity(REBUILT_CACHE)),
            found: Mutex::new(Vec::new()),
            heal: None,
            tx,
        })
    }

    /// Whether the object is present.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn contains(&self, id: &ObjectId) -> Result<bool, StoreError> {
        let Some(t) = &self.objects else {
            return Ok(false);
        };
        Ok(t.get(&id.0).map_err(|x| self.db_err(x))?.is_some())
    }

    /// The index record of an object.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`].
    pub fn record(&self, id: &ObjectId) -> Result<ObjectRecord, StoreError> {
        let missing = || StoreError::Missing {
            path: self.path.clone(),
            id: *id,
        };
        let t = self.objects.as_ref().ok_or_else(missing)?;
        let g = t
            .get(&id.0)
            .map_err(|x| self.db_err(x))?
            .ok_or_else(missing)?;
        ObjectRecord::decode(g.value()).map_err(|x| self.damaged(id, x.to_string()))
    }

    /// The payload of an object as stored in its frame (unverified; a delta's is its delta
    /// frame), through a small cache of decompressed frames: neighbours in a restore or a
    /// tree walk usually share a frame.
    fn stored_payload(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Vec<u8>, StoreError> {
        self.stored_slice(id, rec, <[u8]>::to_vec)
    }

    /// `f` of the payload as stored, borrowed from its frame.
    fn stored_slice<R>(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StoreError> {
        let start = rec.within as usize;
        // Decompressed only as far as the object: an object near the start of a 1 MiB frame
        // costs a block or two, not the whole frame.
        let frame = self.frame_upto(id, rec, start.saturating_add(rec.len as usize))?;
        frame
            .get(start..start + rec.len as usize)
            .map(f)
            .ok_or_else(|| self.damaged(id, "payload outside its frame".into()))
    }

    /// `f` of the payload of an object (unverified), borrowed from its decompressed frame when
    /// it is stored whole: a restore writes 1 GB of files, which a copy each would double.
    fn with_payload<R>(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, StoreError> {
        if rec.delta.is_some() {
            return Ok(f(&self.payload(id, rec)?));
        }
        self.stored_slice(id, rec, f)
    }

    /// The payload of an object (unverified): for a delta, rebuilt from its chain of bases.
    /// Callers verify the result's id; on a mismatch [`StoreReader::chain_damage`] names the
    /// object in the chain that is damaged.
    pub(super) fn payload(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Vec<u8>, StoreError> {
        if rec.delta.is_none() {
            return self.stored_payload(id, rec);
        }
        if let Some(bytes) = self.rebuilt(id) {
            return Ok(bytes.as_ref().clone());
        }
        let (start, chain) = self.chain(id, rec)?;
        let mut bytes = match start {
            Start::Cached(bytes) => bytes.as_ref().clone(),
            Start::Whole(root, root_rec) => self.stored_payload(&root, &root_rec)?,
        };
        for (step, step_rec) in chain.iter().rev() {
            let delta = self.stored_payload(step, step_rec)?;
            let size = usize::try_from(step_rec.size).unwrap_or(usize::MAX);
            bytes = crate::object::delta::decode(&bytes, &delta, size)
                .map_err(|x| self.damaged(step, x))?;
            self.remember_rebuilt(step, &bytes);
        }
        Ok(bytes)
    }

    /// The deltas from `id` down to the first object stored whole (or rebuilt recently),
    /// newest first, checking that each step can be: bases of the same kind and strictly
    /// smaller depth, so a damaged record can never make a loop.
    fn chain(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
    ) -> Result<(Start, Vec<(ObjectId, ObjectRecord)>), StoreError> {
        let mut chain = vec![(*id, rec.clone())];
        loop {
            let (top, top_rec) = &chain[chain.len() - 1];
            let Some(d) = top_rec.delta else {
                let (root, root_rec) = chain
                    .pop()
                    .ok_or_else(|| self.corrupt(id, "empty chain".into()))?;
                return Ok((Start::Whole(root, root_rec), chain));
            };
            if let Some(bytes) = self.rebuilt(&d.base) {
                return Ok((Start::Cached(bytes), chain));
            }
            let base_rec = match self.record(&d.base) {
                Ok(r) => r,
                // Not damage of the delta itself: it is kept, and reads again once its base
                // is stored again (a capture or `retrace repair` that meets the base's
                // content); a capture that meets the delta's own content stores it whole.
                Err(StoreError::Missing { .. }) => {
                    return Err(self.corrupt(
                        top,
                        format!(
                            "its delta base {} is missing (capture the file again, or run \
                             `retrace repair`)",
                            d.base.to_hex()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            };
            let base_depth = base_rec.delta.map_or(0, |b| b.depth);
            if base_rec.kind != top_rec.kind || base_depth >= d.depth {
                return Err(self.damaged(
                    top,
                    format!("its delta base {} cannot be its base", d.base.to_hex()),
                ));
            }
            chain.push((d.base, base_rec));
        }
    }

    fn rebuilt(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        let cache = self.rebuilt.lock().ok()?;
        cache
            .iter()
            .find(|(o, _)| o == id)
            .map(|(_, b)| Arc::clone(b))
    }

    /// Keeps a rebuilt payload for the next delta against it (versions of one file are
    /// often read in a row: verification, a walk of every snapshot, a capture's base).
    fn remember_rebuilt(&self, id: &ObjectId, bytes: &[u8]) {
        if bytes.len() > REBUILT_MAX_BYTES {
            return;
        }
        if let Ok(mut cache) = self.rebuilt.lock() {
            if cache.iter().any(|(o, _)| o == id) {
                return;
            }
            if cache.len() >= REBUILT_CACHE {
                cache.remove(0);
            }
            cache.push((*id, Arc::new(bytes.to_vec())));
        }
    }

    /// What a new version of object `previous` (of `kind`) can be stored as a delta against,
    /// with that base's payload (verified): `previous` itself, or, when its chain is at
    /// [`MAX_DEPTH`](crate::object::delta::MAX_DEPTH), the object its chain starts from.
    /// `None` when `previous` is not stored, not of `kind`, a chunk list, or damaged (the
    /// damage is recorded, and the new version is stored whole).
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn delta_base(
        &self,
        previous: &ObjectId,
        kind: ObjectKind,
    ) -> Result<Option<(crate::object::DeltaBase, Vec<u8>)>, StoreError> {
        let rec = match self.record(previous) {
            Ok(rec) => rec,
            Err(StoreError::Db { path, source }) => return Err(StoreError::Db { path, source }),
            Err(_) => return Ok(None),
        };
        if rec.kind != kind || kind == ObjectKind::ChunkedBlob {
            return Ok(None);
        }
        let (mut base, mut base_rec) = (*previous, rec);
        // A version sharing a big frame with others (a cold capture packs small files into
        // 1 MiB frames) costs that whole frame's decompression to read: about 1.5 ms for a
        // few KB of base, per changed file of every turn. Its next version is stored whole
        // (in the turn's own small frame), and the versions after it are deltas. A frame of
        // roots maintenance packed (`parity_groups.rs`) is read for its roots: it holds the
        // bases of the files edited again and again, so a turn reads few of them, once each.
        let roots_frame = base_rec.codec == Codec::ZstdParity
            && base_rec.frame_len as usize <= super::parity_groups::ROOT_FRAME_RAW_BYTES;
        if base_rec.len < base_rec.frame_len
            && base_rec.frame_len > MAX_SHARED_BASE_FRAME
            && !roots_frame
        {
            return Ok(None);
        }
        if base_rec
            .delta
            .is_some_and(|d| d.depth >= crate::object::delta::MAX_DEPTH)
        {
            // Re-base on the chain's root: depth 1 again, and reads stay bounded.
            while let Some(d) = base_rec.delta {
                match self.record(&d.base) {
                    Ok(r) if r.delta.map_or(0, |b| b.depth) < d.depth => {
                        (base, base_rec) = (d.base, r);
                    }
                    _ => return Ok(None),
                }
            }
        }
        let Ok(bytes) = self.payload(&base, &base_rec) else {
            return Ok(None);
        };
        if !hashes_to(kind, &bytes, &base) {
            let _ = self.content_damage(&base, &base_rec, "content does not hash to its id".into());
            return Ok(None);
        }
        let depth = base_rec.delta.map_or(0, |d| d.depth) + 1;
        Ok(Some((crate::object::DeltaBase { base, depth }, bytes)))
    }

    /// The error for object `id` whose payload does not hash to it: the object is damaged,
    /// or (a delta) the object of its chain that [`StoreReader::chain_damage`] finds.
    pub(super) fn content_damage(&self, id: &ObjectId, rec: &ObjectRecord, detail: String) -> StoreError {
        if rec.delta.is_none() {
            return self.damaged(id, detail);
        }
        match self.chain_damage(id, rec) {
            Some(bad) if bad != *id => self.corrupt(
                id,
                format!("{detail}: its delta base {} is damaged", bad.to_hex()),
            ),
            Some(_) => self.corrupt(id, detail),
            None => self.damaged(id, detail),
        }
    }

    /// After a delta object failed verification: walks its chain from the whole root up,
    /// verifying each step, and records the first that does not hash to its id as damaged
    /// (everything above it depends on it and is forgotten with it). Returns that object.
    fn chain_damage(&self, id: &ObjectId, rec: &ObjectRecord) -> Option<ObjectId> {
        if let Ok(mut cache) = self.rebuilt.lock() {
            cache.clear();
        }
        let Ok((Start::Whole(root, root_rec), chain)) = self.chain(id, rec) else {
            return None;
        };
        let mut bytes = self.stored_payload(&root, &root_rec).ok()?;
        if !hashes_to(root_rec.kind, &bytes, &root) {
            let _ = self.damaged(&root, "content does not hash to its id".into());
            return Some(root);
        }
        for (step, step_rec) in chain.iter().rev() {
            let size = usize::try_from(step_rec.size).unwrap_or(usize::MAX);
            let next = self
                .stored_payload(step, step_rec)
                .ok()
                .and_then(|delta| crate::object::delta::decode(&bytes, &delta, size).ok());
            match next {
                Some(b) if hashes_to(step_rec.kind, &b, step) => bytes = b,
                _ => {
                    let _ = self.damaged(step, "delta does not rebuild its content".into());
                    return Some(*step);
                }
            }
        }
        None
    }

    pub(super) fn frame(&self, id: &ObjectId, rec: &ObjectRecord) -> Result<Arc<Vec<u8>>, StoreError> {
        self.frame_upto(id, rec, rec.frame_len as usize)
    }

    /// The frame holding `id` (record `rec`), decompressed at least up to byte `end`
    /// ([`decompress_prefix`]; the whole frame, length checked, when `end` reaches its
    /// length). The cache keeps the longest prefix of each frame read.
    fn frame_upto(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        end: usize,
    ) -> Result<Arc<Vec<u8>>, StoreError> {
        let whole = rec.frame_len as usize;
        let mut end = end;
        if let Ok(cache) = self.frames.lock() {
            match cache.iter().find(|(o, _)| *o == rec.offset) {
                Some((_, f)) if f.len() >= end.min(whole) => return Ok(Arc::clone(f)),
                // A shorter prefix was read: this frame is being read on (a restore writes a
                // frame's objects in the order they lie), so all of it now, not prefix after
                // growing prefix from its start.
                Some(_) => end = whole,
                None => {}
            }
        }
        let packs = self
            .packs
            .as_ref()
            .ok_or_else(|| self.damaged(id, "no pack log".into()))?;
        let stored = pack::read(packs, rec.offset, rec.stored_len)
            .map_err(|x| self.db_err(x))?
            .ok_or_else(|| self.damaged(id, "frame outside the pack log".into()))?;
        let frame = Arc::new(
            decompress_prefix(rec.codec, &stored, rec.frame_len, end)
                .map_err(|x| self.damaged(id, x))?,
        );
        self.decompressed[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.decompressed[1].fetch_add(frame.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut cache) = self.frames.lock() {
            // A shorter prefix of the same frame gives way to this one.
            cache.retain(|(o, f)| *o != rec.offset || f.len() > frame.len());
            if cache.iter().all(|(o, _)| *o != rec.offset) {
                if cache.len() >= FRAME_CACHE {
                    cache.remove(0);
                }
                cache.push((rec.offset, Arc::clone(&frame)));
            }
        }
        Ok(frame)
    }

    /// How many frames this reader decompressed so far, and their bytes (a frame read again
    /// after it left the reader's small cache counts again).
    #[must_use]
    pub fn frames_decompressed(&self) -> (u64, u64) {
        let n = |i: usize| self.decompressed[i].load(std::sync::atomic::Ordering::Relaxed);
        (n(0), n(1))
    }

    /// The payload of an object as stored (unverified: the collector moves bytes it does not
    /// interpret, deltas as deltas; readers verify on use).
    pub(crate) fn payload_of(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
    ) -> Result<Vec<u8>, StoreError> {
        self.stored_payload(id, rec)
    }

    /// The verified content of a blob or chunked blob.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`] (the bytes do not hash to `id`).
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let rec = self.record(id)?;
        // Only a hint: a corrupt size must not make us allocate it.
        let mut out = Vec::with_capacity(usize::try_from(rec.size).unwrap_or(0).min(64 << 20));
        self.blob_into(id, &rec, &mut out)
            .map_err(|e| e.unwrap_or_else(|io| self.corrupt(id, io.to_string())))?;
        Ok(out)
    }

    /// Streams the content of a blob or chunked blob into `out`, chunk by chunk, so a big
    /// file never sits whole in memory. The content is verified as it streams; on
    /// [`StoreError::Corrupt`] `out` has received unverified bytes and must be discarded
    /// (restore writes to a temp file and renames only on success).
    ///
    /// # Errors
    /// The outer error is the store's (missing, corrupt); the inner one, a failure to write
    /// to `out`.
    pub fn read_blob_into(
        &self,
        id: &ObjectId,
        out: &mut dyn std::io::Write,
    ) -> Result<Result<(), std::io::Error>, StoreError> {
        let rec = self.record(id)?;
        match self.blob_into(id, &rec, out) {
            Ok(()) => Ok(Ok(())),
            Err(Ok(store)) => Err(store),
            Err(Err(io)) => Ok(Err(io)),
        }
    }

    /// The shared body of [`StoreReader::read_blob`] and [`StoreReader::read_blob_into`]:
    /// `Err(Ok(_))` is a store fault, `Err(Err(_))` a failure of `out`.
    fn blob_into(
        &self,
        id: &ObjectId,
        rec: &ObjectRecord,
        out: &mut dyn std::io::Write,
    ) -> Result<(), Result<StoreError, std::io::Error>> {
        let mut hasher = blake3::Hasher::new();
        let mut chunks = None;
        let mut emit = |bytes: &[u8]| {
            hasher.update(bytes);
            out.write_all(bytes).map_err(Err)
        };
        match rec.kind {
            ObjectKind::Blob => self.with_payload(id, rec, &mut emit).map_err(Ok)??,
            ObjectKind::ChunkedBlob => {
                let list = ChunkList::decode(&self.payload(id, rec).map_err(Ok)?)
                    .map_err(|x| Ok(self.damaged(id, x.to_string())))?;
                for (chunk, _) in &list.chunks {
                    let crec = self.record(chunk).map_err(Ok)?;
                    if crec.kind != ObjectKind::Blob {
                        return Err(Ok(self.damaged(id, "chunk is not a blob".into())));
                    }
                    self.with_payload(chunk, &crec, &mut emit).map_err(Ok)??;
                }
                chunks = Some(list);
            }
            ObjectKind::Tree => {
                return Err(Ok(self.corrupt(id, "expected a blob, found a tree".into())));
            }
        }
        if ObjectId(*hasher.finalize().as_bytes()) != *id {
            // Forget what is damaged: the chunks that do not hash to their ids, else the
            // chunk list (or the blob, or the object of its delta chain that is) itself.
            let bad_chunks = chunks.map_or(0, |list| self.damaged_chunks(&list));
            let detail = "content does not hash to its id".to_string();
            if bad_chunks > 0 {
                return Err(Ok(
                    self.corrupt(id, format!("{detail}: {bad_chunks} chunk(s) damaged"))
                ));
            }
            return Err(Ok(self.content_damage(id, rec, detail)));
        }
        Ok(())
    }

    /// The chunk list of a chunked blob (for verification and stats).
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`].
    pub fn chunk_list(&self, id: &ObjectId) -> Result<ChunkList, StoreError> {
        let rec = self.record(id)?;
        if rec.kind != ObjectKind::ChunkedBlob {
            return Err(self.corrupt(id, "not a chunked blob".into()));
        }
        ChunkList::decode(&self.payload(id, &rec)?).map_err(|x| self.damaged(id, x.to_string()))
    }

    /// A verified, validated tree.
    ///
    /// # Errors
    /// [`StoreError::Missing`] or [`StoreError::Corrupt`] (bad id, hostile names, bad order).
    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        let rec = self.record(id)?;
        if rec.kind != ObjectKind::Tree {
            return Err(self.corrupt(id, "expected a tree".into()));
        }
        let bytes = self.payload(id, &rec)?;
        if ObjectId::of_tree(&bytes) != *id {
            return Err(self.content_damage(id, &rec, "tree does not hash to its id".into()));
        }
        Tree::decode(&bytes).map_err(|x| self.corrupt(id, x.to_string()))
    }

    /// Every object id with its record, in id order. Records that do not decode are
    /// returned as errors in place.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn objects(&self) -> Result<Vec<ObjectListing>, StoreError> {
        let Some(t) = &self.objects else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|x| self.db_err(x))? {
            let (k, v) = item.map_err(|x| self.db_err(x))?;
            let id = ObjectId(*k.value());
            out.push((
                id,
                ObjectRecord::decode(v.value()).map_err(|x| self.corrupt(&id, x.to_string())),
            ));
        }
        Ok(out)
    }
}
