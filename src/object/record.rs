//! The index record of a stored object, frames, and the payload encodings.
//!
//! Objects are stored in **frames**: a frame is one stored payload in the pack log holding
//! one or more objects' bytes end to end, compressed together. Small objects (under
//! [`SOLID_MAX_OBJECT`]) share frames of up to [`FRAME_RAW_BYTES`], so zstd sees the
//! redundancy *between* files (licence headers, imports, repeated lines) the way git's
//! delta packs do; measured on the benchmark workspace this stores 18% less than
//! compressing each file alone, and costs one frame decompression (about 1 ms) per read.
//! Bigger objects (FastCDC chunks, medium files) get a frame of their own.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use super::ObjectId;

/// Record version of objects stored whole (and of chunk lists).
pub const RECORD_VERSION: u8 = 1;

/// Record version of delta objects: version 1's fields, then the base id and the depth.
pub const DELTA_RECORD_VERSION: u8 = 2;

/// zstd level. Measured on source-like text (docs/benchmarks.md): level 3 compresses shared
/// frames within 10% of level 6 at a fifth of the time.
pub const ZSTD_LEVEL: i32 = 3;

/// The zstd level maintenance recompresses frames at, where the time is free (see
/// docs/benchmarks.md: a third smaller than level 3 on the benchmark's text, at 3× git gc's
/// speed).
pub const DENSE_LEVEL: i32 = 12;

/// Objects smaller than this share frames.
pub const SOLID_MAX_OBJECT: usize = 64 * 1024;

/// A shared frame is closed once it holds this many raw bytes.
pub const FRAME_RAW_BYTES: usize = 1024 * 1024;

/// Trees share frames of their own, closed at this many raw bytes: reading one directory's
/// tree (a capture that looks only where a watcher points, a diff, a restore) decompresses
/// at most this much, never a megabyte of file contents.
pub const TREE_FRAME_RAW_BYTES: usize = 64 * 1024;

/// No frame is larger than this once decompressed (the largest real ones are trees of
/// directories with hundreds of thousands of entries). A record claiming more is corrupt,
/// and refusing it keeps a damaged store from making a reader allocate gigabytes.
pub const MAX_FRAME_BYTES: u32 = 256 * 1024 * 1024;

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKind {
    /// File bytes (or a symlink target) stored whole.
    Blob,
    /// A big file stored as a list of chunk blobs; payload is a [`ChunkList`].
    ChunkedBlob,
    /// A directory; payload is an encoded [`super::Tree`].
    Tree,
}

/// How a frame is stored in the pack log. New formats may add codecs (format 3 added
/// `ZstdParity`), so a match needs a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Codec {
    /// As is (compression did not pay).
    Raw,
    /// One zstd frame.
    Zstd,
    /// One zstd frame recompressed at a higher level by maintenance (read like `Zstd`; the
    /// codec says the frame needs no further recompression).
    ZstdDense,
    /// One zstd frame written by maintenance in shards with checksums and a parity shard
    /// (`docs/format.md`, "Parity frames"): any one damaged shard is rebuilt. Format 3.
    ZstdParity,
}

/// What a delta object is against: the object whose payload its payload was compressed
/// against, and how many deltas lie between it and an object stored whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaBase {
    /// The base object (of the same kind).
    pub base: ObjectId,
    /// 1 when the base is stored whole, else the base's depth + 1; at most
    /// [`crate::format::MAX_DELTA_DEPTH`].
    pub depth: u8,
}

/// Index entry of one object: which frame holds it, where, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRecord {
    /// Blob, chunked blob or tree.
    pub kind: ObjectKind,
    /// Content size: the file size for blobs and chunked blobs, the encoding's length for
    /// trees.
    pub size: u64,
    /// Byte offset of the frame in the pack log.
    pub offset: u64,
    /// Stored length of the frame in the pack log.
    pub stored_len: u32,
    /// How the frame is stored.
    pub codec: Codec,
    /// Length of the frame once decompressed.
    pub frame_len: u32,
    /// Where this object's payload starts in the decompressed frame.
    pub within: u32,
    /// Length of this object's payload as stored (differs from `size` for chunked blobs,
    /// whose payload is their chunk list, and for deltas).
    pub len: u32,
    /// Unix seconds when the object was written (GC grace period).
    pub written: u64,
    /// `Some` for a delta object: its payload is a delta frame (`docs/format.md`, "Delta payloads") against this base
    /// (record version 2); `None`: the payload is the object itself (version 1).
    pub delta: Option<DeltaBase>,
}

/// The fields of a record as postcard writes them, in order (version 1; version 2 appends
/// the base id and the depth).
#[derive(Serialize, Deserialize)]
struct WireRecord {
    version: u8,
    kind: ObjectKind,
    size: u64,
    offset: u64,
    stored_len: u32,
    codec: Codec,
    frame_len: u32,
    within: u32,
    len: u32,
    written: u64,
}

/// Why a record does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// postcard could not decode the bytes.
    #[error("record does not decode: {0}")]
    Decode(String),
    /// A newer retrace wrote this record.
    #[error("record version {0} is newer than this retrace understands; upgrade retrace")]
    UnknownVersion(u8),
    /// A delta record whose depth, kind or size cannot be.
    #[error("delta record is impossible: {0}")]
    BadDelta(&'static str),
    /// The payload lies outside its frame, or the frame is impossibly large.
    #[error("record points outside its frame")]
    OutOfFrame,
}

fn check_version(bytes: &[u8]) -> Result<(), RecordError> {
    match bytes.first() {
        Some(&RECORD_VERSION) => Ok(()),
        Some(&v) => Err(RecordError::UnknownVersion(v)),
        None => Err(RecordError::Decode("empty".into())),
    }
}

/// Decodes a whole buffer: trailing bytes mean the record is not what it claims.
fn strict<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, RecordError> {
    match postcard::take_from_bytes(bytes) {
        Ok((value, [])) => Ok(value),
        Ok(_) => Err(RecordError::Decode("trailing bytes".into())),
        Err(e) => Err(RecordError::Decode(e.to_string())),
    }
}

/// The postcard bytes of a record. postcard fails only on what records never hold
/// (sequences of unknown length, a full fixed buffer); that is still an error, not a panic.
///
/// # Errors
/// postcard's message.
pub fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, String> {
    postcard::to_allocvec(value).map_err(|e| e.to_string())
}

impl ObjectRecord {
    fn wire(&self) -> WireRecord {
        WireRecord {
            version: if self.delta.is_some() {
                DELTA_RECORD_VERSION
            } else {
                RECORD_VERSION
            },
            kind: self.kind,
            size: self.size,
            offset: self.offset,
            stored_len: self.stored_len,
            codec: self.codec,
            frame_len: self.frame_len,
            within: self.within,
            len: self.len,
            written: self.written,
        }
    }

    internal! {
    /// postcard encoding: version 1 for objects stored whole (byte for byte what format 1
    /// wrote), version 2 for deltas.
    ///
    /// # Errors
    /// As [`to_bytes`].
    fn encode(&self) -> Result<Vec<u8>, String> {
        match self.delta {
            None => to_bytes(&self.wire()),
            Some(d) => to_bytes(&(self.wire(), d.base, d.depth)),
        }
    }
    }

    /// Decodes a record, refusing unknown versions, payloads outside their frame and
    /// impossible deltas.
    ///
    /// # Errors
    /// [`RecordError`] on bytes that are not a valid record of a known version.
    pub fn decode(bytes: &[u8]) -> Result<ObjectRecord, RecordError> {
        let (w, delta) = match bytes.first() {
            Some(&RECORD_VERSION) => (strict::<WireRecord>(bytes)?, None),
            Some(&DELTA_RECORD_VERSION) => {
                let (w, base, depth): (WireRecord, ObjectId, u8) = strict(bytes)?;
                (w, Some(DeltaBase { base, depth }))
            }
            Some(&v) => return Err(RecordError::UnknownVersion(v)),
            None => return Err(RecordError::Decode("empty".into())),
        };
        let r = ObjectRecord {
            kind: w.kind,
            size: w.size,
            offset: w.offset,
            stored_len: w.stored_len,
            codec: w.codec,
            frame_len: w.frame_len,
            within: w.within,
            len: w.len,
            written: w.written,
            delta,
        };
        if u64::from(r.within) + u64::from(r.len) > u64::from(r.frame_len)
            || r.frame_len > MAX_FRAME_BYTES
        {
            return Err(RecordError::OutOfFrame);
        }
        if let Some(d) = r.delta {
            if d.depth == 0 || d.depth > super::delta::MAX_DEPTH {
                return Err(RecordError::BadDelta("depth out of range"));
            }
            if r.kind == ObjectKind::ChunkedBlob {
                return Err(RecordError::BadDelta("chunk lists are never deltas"));
            }
            if r.size > u64::from(MAX_FRAME_BYTES) {
                return Err(RecordError::BadDelta("content too large"));
            }
            if d.base == ObjectId::ZERO {
                return Err(RecordError::BadDelta("no base"));
            }
        }
        Ok(r)
    }
}

/// Payload of a chunked blob: its chunks in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkList {
    /// Always [`RECORD_VERSION`].
    pub version: u8,
    /// Chunk blob ids and lengths, in file order.
    pub chunks: Vec<(ObjectId, u32)>,
}

impl ChunkList {
    internal! {
    /// postcard encoding.
    ///
    /// # Errors
    /// As [`to_bytes`].
    fn encode(&self) -> Result<Vec<u8>, String> {
        to_bytes(self)
    }
    }

    /// Decodes a chunk list, refusing unknown versions.
    ///
    /// # Errors
    /// [`RecordError`] on bytes that are not a chunk list of a known version.
    pub fn decode(bytes: &[u8]) -> Result<ChunkList, RecordError> {
        check_version(bytes)?;
        strict(bytes)
    }
}

/// One object inside a [`NewFrame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameMember {
    /// Its id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// Content size (see [`ObjectRecord::size`]).
    pub size: u64,
    /// Start of its payload in the decompressed frame.
    pub within: u32,
    /// Payload length.
    pub len: u32,
    /// Its base when the payload is a delta.
    pub delta: Option<DeltaBase>,
}

impl FrameMember {
    /// The object `id` recorded as `rec`, at the same place in a frame of the same bytes
    /// (a frame moved or recompressed whole).
    #[must_use]
    pub fn same_place(id: ObjectId, rec: &ObjectRecord) -> FrameMember {
        FrameMember {
            id,
            kind: rec.kind,
            size: rec.size,
            within: rec.within,
            len: rec.len,
            delta: rec.delta,
        }
    }
}

/// A frame ready to be appended to the pack log.
#[derive(Clone, Debug)]
pub struct NewFrame {
    /// How `stored` is encoded.
    pub codec: Codec,
    /// The stored bytes.
    pub stored: Vec<u8>,
    /// Decompressed length.
    pub raw_len: u32,
    /// The objects it holds.
    pub members: Vec<FrameMember>,
}

/// One object waiting for a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingObject {
    /// Its id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// Content size (see [`ObjectRecord::size`]).
    pub size: u64,
    /// The payload to store: the object's bytes, or a delta against `delta`'s base.
    pub payload: Vec<u8>,
    /// Its base when `payload` is a delta.
    pub delta: Option<DeltaBase>,
}

impl PendingObject {
    /// An object stored whole.
    #[must_use]
    pub fn whole(id: ObjectId, kind: ObjectKind, size: u64, payload: Vec<u8>) -> PendingObject {
        PendingObject {
            id,
            kind,
            size,
            payload,
            delta: None,
        }
    }
}

impl NewFrame {
    /// The index record of `member` once this frame sits at `offset` in the pack log,
    /// `stored_len` bytes long.
    #[must_use]
    pub fn record(
        &self,
        member: &FrameMember,
        offset: u64,
        stored_len: u32,
        written: u64,
    ) -> ObjectRecord {
        ObjectRecord {
            kind: member.kind,
            size: member.size,
            offset,
            stored_len,
            codec: self.codec,
            frame_len: self.raw_len,
            within: member.within,
            len: member.len,
            written,
            delta: member.delta,
        }
    }

    /// Compresses `objects` together into one frame. Payloads must total under 4 GiB.
    #[must_use]
    pub fn pack(objects: &[PendingObject]) -> NewFrame {
        let (raw, members) = NewFrame::join(objects);
        let (codec, stored) = compress(&raw);
        NewFrame {
            codec,
            stored,
            raw_len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
            members,
        }
    }

    /// Trees compressed together into frames of up to [`TREE_FRAME_RAW_BYTES`] each.
    #[must_use]
    pub fn pack_trees(trees: &[PendingObject]) -> Vec<NewFrame> {
        let mut frames = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, t) in trees.iter().enumerate() {
            bytes += t.payload.len();
            if bytes >= TREE_FRAME_RAW_BYTES {
                frames.push(NewFrame::pack(&trees[start..=i]));
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < trees.len() {
            frames.push(NewFrame::pack(&trees[start..]));
        }
        frames
    }

    /// `objects` end to end in one frame stored as is: delta payloads, which are zstd
    /// frames already (compressing them again gains nothing, and a shared compressed
    /// frame would cost a decompression per step of a chain read).
    #[must_use]
    pub fn raw(objects: &[PendingObject]) -> NewFrame {
        let (raw, members) = NewFrame::join(objects);
        NewFrame {
            codec: Codec::Raw,
            raw_len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
            stored: raw,
            members,
        }
    }

    fn join(objects: &[PendingObject]) -> (Vec<u8>, Vec<FrameMember>) {
        let total: usize = objects.iter().map(|o| o.payload.len()).sum();
        let mut raw = Vec::with_capacity(total);
        let mut members = Vec::with_capacity(objects.len());
        for o in objects {
            members.push(FrameMember {
                id: o.id,
                kind: o.kind,
                size: o.size,
                within: u32::try_from(raw.len()).unwrap_or(u32::MAX),
                len: u32::try_from(o.payload.len()).unwrap_or(u32::MAX),
                delta: o.delta,
            });
            raw.extend_from_slice(&o.payload);
        }
        // A frame of empty objects only (empty files) still takes a byte of the log: frames
        // are known by their offset (the readers' cache, maintenance, GC), and an empty one
        // would share its offset with the next frame.
        if raw.is_empty() {
            raw.push(0);
        }
        (raw, members)
    }
}

thread_local! {
    // Creating a zstd context per call cost 17% of a cold capture (measured with perf).
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    // Kept per thread too: its window buffer is allocated once, not per frame.
    static STREAM: RefCell<Option<zstd::stream::raw::Decoder<'static>>> = const { RefCell::new(None) };
}

/// The size of a zstd block: a prefix of a frame is decompressed block by block, so a
/// prefix is asked for in whole blocks.
const ZSTD_BLOCK: usize = 128 * 1024;

/// Frames up to this size are decompressed only as far as needed ([`decompress_prefix`]);
/// bigger ones whole. The streaming decoder keeps a window as large as the frame for the
/// thread's life, so it serves the 1 MiB frames of small files, not a big file's.
const PREFIX_MAX_FRAME: u32 = 4 * 1024 * 1024;

/// Compresses `raw` with zstd, or keeps it raw when compression saves less than 1/32.
#[must_use]
pub fn compress(raw: &[u8]) -> (Codec, Vec<u8>) {
    if raw.len() >= 64 {
        let z = COMPRESSOR.with(|c| {
            let mut c = c.borrow_mut();
            if c.is_none() {
                *c = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
            }
            c.as_mut().and_then(|c| c.compress(raw).ok())
        });
        if let Some(mut z) = z
            && z.len() + raw.len() / 32 < raw.len()
        {
            // The buffer was sized for the worst case (more than the input): frames queue
            // up to a batch before they are written, and that slack would be most of a cold
            // capture's memory.
            z.shrink_to_fit();
            return (Codec::Zstd, z);
        }
    }
    (Codec::Raw, raw.to_vec())
}

/// `raw` compressed at [`DENSE_LEVEL`], or `None` when zstd fails.
#[must_use]
pub fn compress_dense(raw: &[u8]) -> Option<Vec<u8>> {
    zstd::bulk::Compressor::new(DENSE_LEVEL)
        .ok()?
        .compress(raw)
        .ok()
}

/// `raw` compressed at zstd level `level` and wrapped in shards with a parity shard (codec
/// [`Codec::ZstdParity`]), or `None` when zstd fails.
#[must_use]
pub fn compress_protected(raw: &[u8], level: i32) -> Option<Vec<u8>> {
    let zstd = zstd::bulk::Compressor::new(level).ok()?.compress(raw).ok()?;
    super::parity::protect(&zstd)
}

/// The stored bytes of a frame without its parity wrapping (codec [`Codec::ZstdParity`]:
/// checked, a damaged shard rebuilt); other codecs' as they are.
fn unwrapped(codec: Codec, stored: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if codec == Codec::ZstdParity {
        Ok(super::parity::unprotect(stored)?.0)
    } else {
        Ok(std::borrow::Cow::Borrowed(stored))
    }
}

/// Reverses [`compress`]; `raw_len` bounds the output so a hostile frame cannot balloon.
///
/// # Errors
/// A message when the frame is not valid zstd or does not have the recorded length.
pub fn decompress(codec: Codec, stored: &[u8], raw_len: u32) -> Result<Vec<u8>, String> {
    let stored = &*unwrapped(codec, stored)?;
    let out = match codec {
        Codec::Raw => stored.to_vec(),
        Codec::Zstd | Codec::ZstdDense | Codec::ZstdParity => DECOMPRESSOR.with(|d| {
            let mut d = d.borrow_mut();
            if d.is_none() {
                *d = zstd::bulk::Decompressor::new().ok();
            }
            match d.as_mut() {
                Some(d) => d
                    .decompress(stored, raw_len as usize)
                    .map_err(|e| e.to_string()),
                None => Err("cannot create a zstd decompressor".to_string()),
            }
        })?,
    };
    if out.len() != raw_len as usize {
        return Err(format!(
            "frame length {} differs from recorded {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}

/// The first bytes of a frame [`compress`] made, at least `upto` of them (rounded up to a
/// whole zstd block, at most `raw_len`): decompressing stops there, where [`decompress`]
/// would decompress the whole frame to read one object near its start. Asking for the whole
/// frame (`upto >= raw_len`), or a frame over 4 MiB, is [`decompress`], length check
/// included; a prefix cannot be checked against the frame's length, so its callers verify
/// what they cut from it (every object read from the store is checked against its id).
///
/// # Errors
/// A message when the frame is not valid zstd or ends before `upto` bytes.
pub fn decompress_prefix(
    codec: Codec,
    stored: &[u8],
    raw_len: u32,
    upto: usize,
) -> Result<Vec<u8>, String> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let want = upto.next_multiple_of(ZSTD_BLOCK);
    if want >= raw_len as usize || raw_len > PREFIX_MAX_FRAME || codec == Codec::Raw {
        return decompress(codec, stored, raw_len);
    }
    // A parity frame is checked (and a damaged shard rebuilt) whole, then cut as any frame:
    // a root near the start of a frame of roots costs a block or two as well.
    let stored = &*unwrapped(codec, stored)?;
    STREAM.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = zstd::stream::raw::Decoder::new().ok();
        }
        let Some(d) = d.as_mut() else {
            return Err("cannot create a zstd decompressor".to_string());
        };
        // A frame an earlier call left unfinished is forgotten.
        d.reinit().map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(want);
        let mut input = InBuffer::around(stored);
        {
            let mut output = OutBuffer::around(&mut out);
            loop {
                let (was_in, was_out) = (input.pos(), output.pos());
                let more = d.run(&mut input, &mut output).map_err(|e| e.to_string())?;
                let stuck = input.pos() == was_in && output.pos() == was_out;
                if output.pos() >= want || more == 0 || stuck {
                    break;
                }
            }
        }
        if out.len() < upto {
            return Err(format!(
                "frame ends after {} bytes, before byte {upto}",
                out.len()
            ));
        }
        Ok(out)
    })
}

/// A stored record (history, journal, ledger entry) that does not decode, and what is wrong
/// with it. Internal: the store's errors carry its message
/// (`crate::StoreError::History`'s `detail`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// No bytes at all.
    #[error("empty {what}")]
    Empty {
        /// The record ("history record").
        what: &'static str,
    },
    /// A version this build does not read (a newer retrace wrote it, or damage).
    #[error("{what} of version {found}; this retrace reads version {expected}")]
    Version {
        /// The record.
        what: &'static str,
        /// The version byte found.
        found: u8,
        /// The version this build reads.
        expected: u8,
    },
    /// Bytes left over after the record's fields: damaged, not something to read part of.
    #[error("{what}: {trailing} trailing bytes after its fields")]
    Trailing {
        /// The record.
        what: &'static str,
        /// How many bytes are left.
        trailing: usize,
    },
    /// The fields do not decode (postcard's message), or decode to something inconsistent.
    #[error("{what}: {detail}")]
    Fields {
        /// The record.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
}

/// Decodes a versioned record strictly: its first byte must be `version`, and its fields
/// must use every byte (a record longer than its fields is damaged, not something to read
/// part of). `what` names the record in messages ("history record").
///
/// # Errors
/// [`DecodeError`] saying what is wrong.
pub fn decode_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    version: u8,
    what: &'static str,
) -> Result<T, DecodeError> {
    match bytes.first() {
        Some(&v) if v == version => match postcard::take_from_bytes(bytes) {
            Ok((rec, [])) => Ok(rec),
            Ok((_, rest)) => Err(DecodeError::Trailing {
                what,
                trailing: rest.len(),
            }),
            Err(e) => Err(DecodeError::Fields {
                what,
                detail: e.to_string(),
            }),
        },
        Some(&found) => Err(DecodeError::Version {
            what,
            found,
            expected: version,
        }),
        None => Err(DecodeError::Empty { what }),
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
