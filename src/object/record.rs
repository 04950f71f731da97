//! The index record of a stored object and the payload encodings (compression, chunk lists).

use serde::{Deserialize, Serialize};

use super::ObjectId;

/// Record version written today.
pub const RECORD_VERSION: u8 = 1;

/// zstd level for blobs and trees. Measured on source-like text (docs/benchmarks.md): level 3
/// compresses within a few percent of level 9 at several times the speed.
pub const ZSTD_LEVEL: i32 = 3;

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

/// How a payload is stored in the pack log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Codec {
    /// As is (compression did not pay).
    Raw,
    /// zstd frame.
    Zstd,
}

/// Index entry of one object: where its payload lives in the pack log and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Always [`RECORD_VERSION`] when written by this retrace.
    pub version: u8,
    /// Blob, chunked blob or tree.
    pub kind: ObjectKind,
    /// Length of the object's content: the file size for blobs and chunked blobs, the
    /// encoded tree length for trees.
    pub raw_len: u64,
    /// Byte offset of the stored payload in the pack log.
    pub offset: u64,
    /// Stored payload length in the pack log.
    pub stored_len: u32,
    /// How the payload is stored.
    pub codec: Codec,
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
}

impl ObjectRecord {
    /// postcard encoding.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("encoding plain data into a Vec cannot fail")
    }

    /// Decodes a record, refusing unknown versions.
    ///
    /// # Errors
    /// [`RecordError`] on bytes that are not a record of a known version.
    pub fn decode(bytes: &[u8]) -> Result<ObjectRecord, RecordError> {
        match bytes.first() {
            Some(&RECORD_VERSION) => {}
            Some(&v) => return Err(RecordError::UnknownVersion(v)),
            None => return Err(RecordError::Decode("empty".into())),
        }
        postcard::from_bytes(bytes).map_err(|e| RecordError::Decode(e.to_string()))
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
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("encoding plain data into a Vec cannot fail")
    }

    /// Decodes a chunk list, refusing unknown versions.
    ///
    /// # Errors
    /// [`RecordError`] on bytes that are not a chunk list of a known version.
    pub fn decode(bytes: &[u8]) -> Result<ChunkList, RecordError> {
        match bytes.first() {
            Some(&RECORD_VERSION) => {}
            Some(&v) => return Err(RecordError::UnknownVersion(v)),
            None => return Err(RecordError::Decode("empty".into())),
        }
        postcard::from_bytes(bytes).map_err(|e| RecordError::Decode(e.to_string()))
    }
}

/// Compresses `raw` with zstd, or keeps it raw when compression saves less than 1/32.
#[must_use]
pub fn compress(raw: &[u8]) -> (Codec, Vec<u8>) {
    if raw.len() >= 64
        && let Ok(z) = zstd::bulk::compress(raw, ZSTD_LEVEL)
        && z.len() + raw.len() / 32 < raw.len()
    {
        return (Codec::Zstd, z);
    }
    (Codec::Raw, raw.to_vec())
}

/// Reverses [`compress`]; `raw_len` bounds the output so a hostile frame cannot balloon.
///
/// # Errors
/// A message when the frame is not valid zstd or does not have the recorded length.
pub fn decompress(codec: Codec, stored: &[u8], raw_len: u64) -> Result<Vec<u8>, String> {
    let out = match codec {
        Codec::Raw => stored.to_vec(),
        Codec::Zstd => {
            let cap = usize::try_from(raw_len).map_err(|_| "object too large".to_string())?;
            zstd::bulk::decompress(stored, cap).map_err(|e| e.to_string())?
        }
    };
    if out.len() as u64 != raw_len {
        return Err(format!(
            "length {} differs from recorded {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_round_trips_and_skips_incompressible() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(100);
        let (c, z) = compress(&text);
        assert_eq!(c, Codec::Zstd);
        assert_eq!(decompress(c, &z, text.len() as u64).unwrap(), text);
        let mut noise = vec![0u8; 4096];
        blake3::Hasher::new()
            .update(b"seed")
            .finalize_xof()
            .fill(&mut noise);
        let (c, _) = compress(&noise);
        assert_eq!(c, Codec::Raw);
    }

    #[test]
    fn records_refuse_future_versions() {
        let mut r = ObjectRecord {
            version: RECORD_VERSION,
            kind: ObjectKind::Blob,
            raw_len: 1,
            offset: 2,
            stored_len: 3,
            codec: Codec::Raw,
            written: 4,
        };
        assert_eq!(ObjectRecord::decode(&r.encode()).unwrap(), r);
        r.version = 9;
        assert_eq!(
            ObjectRecord::decode(&r.encode()),
            Err(RecordError::UnknownVersion(9))
        );
    }
}
