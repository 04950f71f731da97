//! Storing objects that arrive from elsewhere (a git repository, a bundle): file contents
//! and trees, framed as a capture frames them (small objects together, big files in
//! chunks, a new version of a path as a delta against the one before it when that pays),
//! written in batches.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use crate::error::StoreError;
use crate::object::record::{FRAME_RAW_BYTES, SOLID_MAX_OBJECT, TREE_FRAME_RAW_BYTES};
use crate::object::{
    CHUNK_AVG, CHUNK_MAX, CHUNK_MIN, CHUNK_THRESHOLD, ChunkList, DeltaBase, NewFrame, ObjectId,
    ObjectKind, PendingObject, Tree,
};
use crate::store::{Store, StoreReader};

/// Queued bytes that make [`ObjectSink`] write a batch.
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Smaller contents are stored whole (as a capture does).
const DELTA_MIN_BYTES: usize = 256;

/// Objects on their way into a store.
pub struct ObjectSink<'a> {
    store: &'a Store,
    reader: StoreReader,
    queued: HashSet<ObjectId>,
    solid: Vec<PendingObject>,
    solid_bytes: usize,
    trees: Vec<PendingObject>,
    trees_bytes: usize,
    frames: Vec<NewFrame>,
    frame_bytes: usize,
    /// File contents queued since the last write, with their delta depth (0: whole): the
    /// next version of the same path is a delta against one before it is written.
    recent: HashMap<ObjectId, (Vec<u8>, u8)>,
    recent_bytes: usize,
    /// Objects written, and their bytes as stored.
    pub written: (u64, u64),
}

impl<'a> ObjectSink<'a> {
    /// A sink writing into `store`.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read.
    pub fn new(store: &'a Store) -> Result<ObjectSink<'a>, StoreError> {
        Ok(ObjectSink {
            store,
            reader: store.reader()?,
            queued: HashSet::new(),
            solid: Vec::new(),
            solid_bytes: 0,
            trees: Vec::new(),
            trees_bytes: 0,
            frames: Vec::new(),
            frame_bytes: 0,
            recent: HashMap::new(),
            recent_bytes: 0,
            written: (0, 0),
        })
    }

    /// Whether `id` is stored or queued.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub fn has(&self, id: &ObjectId) -> Result<bool, StoreError> {
        Ok(self.queued.contains(id) || self.reader.contains(id)?)
    }

    /// Stores a file's content (or a symlink's target), `previous` the version of the same
    /// path it replaces (its delta base, when that pays); returns its id.
    ///
    /// # Errors
    /// [`StoreError`] from a batch write.
    pub fn blob(
        &mut self,
        data: Vec<u8>,
        previous: Option<ObjectId>,
    ) -> Result<ObjectId, StoreError> {
        let id = ObjectId::of_blob(&data);
        if self.has(&id)? {
            return Ok(id);
        }
        if data.len() as u64 > CHUNK_THRESHOLD {
            let mut chunks = Vec::new();
            for c in fastcdc::v2020::FastCDC::new(&data, CHUNK_MIN, CHUNK_AVG, CHUNK_MAX) {
                let bytes = &data[c.offset..c.offset + c.length];
                let cid = ObjectId::of_blob(bytes);
                chunks.push((cid, u32::try_from(c.length).unwrap_or(u32::MAX)));
                if !self.has(&cid)? {
                    self.queue(PendingObject::whole(
                        cid,
                        ObjectKind::Blob,
                        bytes.len() as u64,
                        bytes.to_vec(),
                    ))?;
                }
            }
            let list = self.chunk_list(chunks)?;
            let size = data.len() as u64;
            self.queue(PendingObject::whole(id, ObjectKind::ChunkedBlob, size, list))?;
            return Ok(id);
        }
        let size = data.len() as u64;
        let delta = match previous.filter(|p| *p != id && data.len() >= DELTA_MIN_BYTES) {
            None => None,
            // Queued in this batch: a delta against it, unless its chain is as long as chains
            // go (then whole).
            Some(prev) if self.recent.contains_key(&prev) => {
                self.own_frame(&prev);
                self.recent
                    .get(&prev)
                .filter(|(_, depth)| *depth < crate::object::delta::MAX_DEPTH)
                .and_then(|(bytes, depth)| {
                    let delta = crate::object::delta::encode(bytes, &data).ok()?;
                    crate::object::delta::pays(delta.len(), &data).then_some((
                        DeltaBase {
                            base: prev,
                            depth: depth + 1,
                        },
                        delta,
                    ))
                    })
            }
            Some(prev) => self
                .reader
                .delta_base(&prev, ObjectKind::Blob)?
                .and_then(|(base, bytes)| {
                    let delta = crate::object::delta::encode(&bytes, &data).ok()?;
                    crate::object::delta::pays(delta.len(), &data).then_some((base, delta))
                }),
        };
        let depth = delta.as_ref().map_or(0, |(b, _)| b.depth);
        // What an entry costs besides its bytes (the maps' slots, the vector's header).
        self.recent_bytes += data.len() + 128;
        self.recent.insert(id, (data.clone(), depth));
        match delta {
            Some((base, payload)) => self.queue(PendingObject {
                id,
                kind: ObjectKind::Blob,
                size,
                payload,
                delta: Some(base),
            })?,
            None => self.queue(PendingObject::whole(id, ObjectKind::Blob, size, data))?,
        }
        Ok(id)
    }

    /// Stores a file's content of `len` bytes read from `r` (a big one chunk by chunk, never
    /// whole in memory), `previous` as for [`ObjectSink::blob`]; returns its id, or an error
    /// when `r` ends before `len` bytes or holds more.
    ///
    /// # Errors
    /// [`std::io::Error`] from `r` (the caller names the source); [`StoreError`] from a batch
    /// write.
    pub fn blob_from(
        &mut self,
        r: &mut dyn Read,
        len: u64,
        previous: Option<ObjectId>,
    ) -> Result<Result<ObjectId, std::io::Error>, StoreError> {
        let short = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "ends early");
        if len <= CHUNK_THRESHOLD {
            let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            if let Err(e) = r.take(len).read_to_end(&mut data) {
                return Ok(Err(e));
            }
            if data.len() as u64 != len {
                return Ok(Err(short()));
            }
            return self.blob(data, previous).map(Ok);
        }
        let mut whole = blake3::Hasher::new();
        let mut chunks = Vec::new();
        let mut total = 0u64;
        for chunk in fastcdc::v2020::StreamCDC::new(r.take(len), CHUNK_MIN, CHUNK_AVG, CHUNK_MAX) {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return Ok(Err(std::io::Error::other(e))),
            };
            whole.update(&chunk.data);
            total += chunk.data.len() as u64;
            let cid = ObjectId::of_blob(&chunk.data);
            chunks.push((cid, u32::try_from(chunk.data.len()).unwrap_or(u32::MAX)));
            if !self.has(&cid)? {
                let size = chunk.data.len() as u64;
                self.queue(PendingObject::whole(cid, ObjectKind::Blob, size, chunk.data))?;
            }
        }
        if total != len {
            return Ok(Err(short()));
        }
        let id = ObjectId(*whole.finalize().as_bytes());
        if !self.has(&id)? {
            let list = self.chunk_list(chunks)?;
            self.queue(PendingObject::whole(id, ObjectKind::ChunkedBlob, len, list))?;
        }
        Ok(Ok(id))
    }

    fn chunk_list(&self, chunks: Vec<(ObjectId, u32)>) -> Result<Vec<u8>, StoreError> {
        ChunkList {
            version: crate::object::record::RECORD_VERSION,
            chunks,
        }
        .encode()
        .map_err(|detail| StoreError::Encode {
            path: self.store.path().to_path_buf(),
            detail,
        })
    }

    /// Stores a tree; returns its id.
    ///
    /// # Errors
    /// [`StoreError`] from a batch write.
    pub fn tree(&mut self, tree: &Tree) -> Result<ObjectId, StoreError> {
        let bytes = tree.encode();
        let id = ObjectId::of_tree(&bytes);
        if !self.has(&id)? {
            let size = bytes.len() as u64;
            self.queue(PendingObject::whole(id, ObjectKind::Tree, size, bytes))?;
        }
        Ok(id)
    }

    fn queue(&mut self, o: PendingObject) -> Result<(), StoreError> {
        self.queued.insert(o.id);
        if o.delta.is_some() {
            self.push(NewFrame::raw(&[o]));
        } else if o.payload.len() >= SOLID_MAX_OBJECT {
            self.push(NewFrame::pack(&[o]));
        } else if o.kind == ObjectKind::Tree {
            self.trees_bytes += o.payload.len();
            self.trees.push(o);
            if self.trees_bytes >= TREE_FRAME_RAW_BYTES {
                self.trees_bytes = 0;
                let full = std::mem::take(&mut self.trees);
                self.push(NewFrame::pack(&full));
            }
        } else {
            self.solid_bytes += o.payload.len();
            self.solid.push(o);
            if self.solid_bytes >= FRAME_RAW_BYTES {
                self.solid_bytes = 0;
                let full = std::mem::take(&mut self.solid);
                self.push(NewFrame::pack(&full));
            }
        }
        if self.frame_bytes >= BATCH_BYTES || self.recent_bytes >= 4 * BATCH_BYTES {
            self.write()?;
        }
        Ok(())
    }

    /// Moves `id`, when it waits whole in the shared frame being filled, into a frame of its
    /// own: it is about to be a delta base, and a base in a shared frame costs every read of
    /// a later version that whole frame's decompression (the rule `delta_base` keeps).
    fn own_frame(&mut self, id: &ObjectId) {
        if let Some(i) = self.solid.iter().position(|o| o.id == *id) {
            let o = self.solid.swap_remove(i);
            self.solid_bytes -= o.payload.len();
            self.push(NewFrame::pack(&[o]));
        }
    }

    fn push(&mut self, frame: NewFrame) {
        self.frame_bytes += frame.stored.len();
        self.frames.push(frame);
    }

    /// Writes everything queued, the partly filled frames too: a delta is never written
    /// before its base (both in one transaction at the latest).
    fn write(&mut self) -> Result<(), StoreError> {
        if !self.solid.is_empty() {
            let full = std::mem::take(&mut self.solid);
            self.push(NewFrame::pack(&full));
        }
        if !self.trees.is_empty() {
            let full = std::mem::take(&mut self.trees);
            for f in NewFrame::pack_trees(&full) {
                self.push(f);
            }
        }
        self.solid_bytes = 0;
        self.trees_bytes = 0;
        self.recent.clear();
        self.recent_bytes = 0;
        if self.frames.is_empty() {
            return Ok(());
        }
        let frames = std::mem::take(&mut self.frames);
        self.frame_bytes = 0;
        let stats = self.store.write(frames, None, None)?;
        crate::fault::reached(crate::fault::Point::Stored);
        self.written.0 += stats.objects;
        self.written.1 += stats.stored_bytes;
        // What a later object is checked against, or a delta taken against, is stored now.
        self.queued.clear();
        self.reader = self.store.reader()?;
        Ok(())
    }

    /// Writes everything queued: from now on the store holds every object given.
    ///
    /// # Errors
    /// [`StoreError`] from the write.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        self.write()
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
