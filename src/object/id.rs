//! Object identifiers: 32-byte blake3 digests, shown as 64 lowercase hex digits.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Key for `blake3::derive_key` over an encoded tree, so a tree id never equals a blob id.
pub(crate) const TREE_KEY_CONTEXT: &str = "retrace tree v1";

/// The id of a stored object: `blake3(content)` for blobs (the same digest `b3sum` prints),
/// `blake3::derive_key("retrace tree v1", encoded_tree)` for trees.
///
/// Serialized as 32 raw bytes in binary formats (postcard: the store) and as 64 hex digits
/// in human-readable ones (JSON output).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(pub [u8; 32]);

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            self.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            ObjectId::from_hex(&s).ok_or_else(|| serde::de::Error::custom("not 64 hex digits"))
        } else {
            <[u8; 32]>::deserialize(d).map(ObjectId)
        }
    }
}

impl ObjectId {
    /// The all-zero id, used for entries that carry no content (nested repositories).
    pub const ZERO: ObjectId = ObjectId([0; 32]);

    /// The id of a blob holding `content`.
    #[must_use]
    pub fn of_blob(content: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(content).as_bytes())
    }

    /// The id of an encoded tree.
    #[must_use]
    pub fn of_tree(encoded: &[u8]) -> ObjectId {
        ObjectId(blake3::derive_key(TREE_KEY_CONTEXT, encoded))
    }

    /// Lowercase hex, 64 digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }

    /// Parses exactly 64 hex digits.
    #[must_use]
    pub fn from_hex(s: &str) -> Option<ObjectId> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            out[i] = (hex_val(pair[0])? << 4) | hex_val(pair[1])?;
        }
        Some(ObjectId(out))
    }

    /// The first 12 hex digits, for human output.
    #[must_use]
    pub fn short(&self) -> String {
        self.to_hex()[..12].to_string()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short())
    }
}

#[cfg(test)]
#[path = "id_tests.rs"]
mod tests;
