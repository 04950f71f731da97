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

/// Record version written today.
pub const RECORD_VERSION: u8 = 1;

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

/// How a frame is stored in the pack log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Codec {
    /// As is (compression did not pay).
    Raw,
    /// One zstd frame.
    Zstd,
    /// One zstd frame recompressed at [`DENSE_LEVEL`] by maintenance (read like `Zstd`; the
    /// codec says the frame needs no further recompression).
    ZstdDense,
}

/// Index entry of one object: which frame holds it, where, and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Always [`RECORD_VERSION`] when written by this retrace.
    pub version: u8,
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
    /// Length of this object's payload (differs from `size` for chunked blobs, whose
    /// payload is their chunk list).
    pub len: u32,
    /// Unix seconds when the object was written (GC grace period).
    pub written: u64,
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
    /// postcard encoding.
    ///
    /// # Errors
    /// As [`to_bytes`].
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        to_bytes(self)
    }

    /// Decodes a record, refusing unknown versions and payloads outside their frame.
    ///
    /// # Errors
    /// [`RecordError`] on bytes that are not a valid record of a known version.
    pub fn decode(bytes: &[u8]) -> Result<ObjectRecord, RecordError> {
        check_version(bytes)?;
        let r: ObjectRecord = strict(bytes)?;
        if u64::from(r.within) + u64::from(r.len) > u64::from(r.frame_len)
            || r.frame_len > MAX_FRAME_BYTES
        {
            return Err(RecordError::OutOfFrame);
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
    /// postcard encoding.
    ///
    /// # Errors
    /// As [`to_bytes`].
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        to_bytes(self)
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

/// One object waiting for a frame: id, kind, content size and payload bytes.
pub type PendingObject = (ObjectId, ObjectKind, u64, Vec<u8>);

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
            version: RECORD_VERSION,
            kind: member.kind,
            size: member.size,
            offset,
            stored_len,
            codec: self.codec,
            frame_len: self.raw_len,
            within: member.within,
            len: member.len,
            written,
        }
    }

    /// Compresses `objects` together into one frame. Payloads must total under 4 GiB.
    #[must_use]
    pub fn pack(objects: &[PendingObject]) -> NewFrame {
        let total: usize = objects.iter().map(|o| o.3.len()).sum();
        let mut raw = Vec::with_capacity(total);
        let mut members = Vec::with_capacity(objects.len());
        for (id, kind, size, payload) in objects {
            members.push(FrameMember {
                id: *id,
                kind: *kind,
                size: *size,
                within: u32::try_from(raw.len()).unwrap_or(u32::MAX),
                len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            });
            raw.extend_from_slice(payload);
        }
        let (codec, stored) = compress(&raw);
        NewFrame {
            codec,
            stored,
            raw_len: u32::try_from(raw.len()).unwrap_or(u32::MAX),
            members,
        }
    }
}

thread_local! {
    // Creating a zstd context per call cost 17% of a cold capture (measured with perf).
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

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
        if let Some(z) = z
            && z.len() + raw.len() / 32 < raw.len()
        {
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

/// Reverses [`compress`]; `raw_len` bounds the output so a hostile frame cannot balloon.
///
/// # Errors
/// A message when the frame is not valid zstd or does not have the recorded length.
pub fn decompress(codec: Codec, stored: &[u8], raw_len: u32) -> Result<Vec<u8>, String> {
    let out = match codec {
        Codec::Raw => stored.to_vec(),
        Codec::Zstd | Codec::ZstdDense => DECOMPRESSOR.with(|d| {
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

/// Decodes a versioned record strictly: its first byte must be `version`, and its fields
/// must use every byte (a record longer than its fields is damaged, not something to read
/// part of). `what` names the record in messages ("history record").
///
/// # Errors
/// A message saying what is wrong.
pub fn decode_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    version: u8,
    what: &str,
) -> Result<T, String> {
    match bytes.first() {
        Some(&v) if v == version => match postcard::take_from_bytes(bytes) {
            Ok((rec, [])) => Ok(rec),
            Ok((_, rest)) => Err(format!(
                "{what}: {} trailing bytes after its fields",
                rest.len()
            )),
            Err(e) => Err(format!("{what}: {e}")),
        },
        Some(v) => Err(format!(
            "{what} of version {v}; this retrace reads version {version}"
        )),
        None => Err(format!("empty {what}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_round_trips_and_skips_incompressible() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(100);
        let (c, z) = compress(&text);
        assert_eq!(c, Codec::Zstd);
        assert_eq!(
            decompress(c, &z, u32::try_from(text.len()).unwrap()).unwrap(),
            text
        );
        let mut noise = vec![0u8; 4096];
        blake3::Hasher::new()
            .update(b"seed")
            .finalize_xof()
            .fill(&mut noise);
        let (c, _) = compress(&noise);
        assert_eq!(c, Codec::Raw);
    }

    #[test]
    fn frames_place_members_end_to_end() {
        let a = (
            ObjectId::of_blob(b"aaa"),
            ObjectKind::Blob,
            3,
            b"aaa".to_vec(),
        );
        let b = (
            ObjectId::of_blob(b"bb"),
            ObjectKind::Blob,
            2,
            b"bb".to_vec(),
        );
        let f = NewFrame::pack(&[a, b]);
        assert_eq!(f.raw_len, 5);
        assert_eq!((f.members[1].within, f.members[1].len), (3, 2));
        let raw = decompress(f.codec, &f.stored, f.raw_len).unwrap();
        assert_eq!(&raw[3..5], b"bb");
    }

    #[test]
    fn records_refuse_future_versions_and_out_of_frame_payloads() {
        let mut r = ObjectRecord {
            version: RECORD_VERSION,
            kind: ObjectKind::Blob,
            size: 1,
            offset: 2,
            stored_len: 3,
            codec: Codec::Raw,
            frame_len: 10,
            within: 4,
            len: 6,
            written: 4,
        };
        assert_eq!(ObjectRecord::decode(&r.encode().unwrap()).unwrap(), r);
        r.len = 7;
        assert_eq!(
            ObjectRecord::decode(&r.encode().unwrap()),
            Err(RecordError::OutOfFrame)
        );
        r.len = 6;
        r.frame_len = MAX_FRAME_BYTES + 1;
        assert_eq!(
            ObjectRecord::decode(&r.encode().unwrap()),
            Err(RecordError::OutOfFrame)
        );
        r.frame_len = 10;
        r.version = 9;
        assert_eq!(
            ObjectRecord::decode(&r.encode().unwrap()),
            Err(RecordError::UnknownVersion(9))
        );
    }
}
