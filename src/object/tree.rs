//! Trees: one directory each, entries sorted by name bytes, encoded with postcard.
//!
//! Decoding validates everything a restore relies on: a name is never empty, `.`, `..`,
//! and never holds `/` or NUL, and names are strictly ascending (no duplicates). A tree that
//! fails any of these is corrupt or hostile and is refused before a single file is written.

use serde::{Deserialize, Serialize};

use super::ObjectId;

/// The tree encoding version written today.
pub const TREE_VERSION: u8 = 1;

/// What a tree entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// A regular file, not executable; `id` is its blob.
    File,
    /// A regular file with the owner's executable bit set.
    Executable,
    /// A symbolic link; `id` is a blob holding the link target bytes. Never followed.
    Symlink,
    /// A subdirectory; `id` is its tree.
    Dir,
    /// A directory holding its own `.git` (a nested repository or submodule). Its files are
    /// not captured and restore never touches it; `id` is [`ObjectId::ZERO`]. (With the
    /// `nested_repos` setting `capture`, such a directory is a [`EntryKind::Dir`] instead.)
    NestedRepo,
}

impl EntryKind {
    /// Whether the entry is content retrace captures and restores: a file, an executable or
    /// a symlink (not a directory, nor a nested repository, whose files are never touched).
    /// The one rule for counting files and bytes, and for what a restore writes.
    #[must_use]
    pub fn is_content(self) -> bool {
        matches!(
            self,
            EntryKind::File | EntryKind::Executable | EntryKind::Symlink
        )
    }
}

/// One entry of a tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// The file name bytes (Unix names are bytes, not necessarily UTF-8).
    pub name: Vec<u8>,
    /// What the entry is.
    pub kind: EntryKind,
    /// Blob id, tree id, or zero for a nested repository.
    pub id: ObjectId,
    /// File size in bytes; for a directory the total size of the files below it.
    pub size: u64,
}

/// One directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// Entries, strictly ascending by name bytes.
    pub entries: Vec<TreeEntry>,
}

/// The encoding, as decoded (and, in the tests, as postcard encodes it).
#[derive(Serialize, Deserialize)]
struct TreeRecord {
    version: u8,
    entries: Vec<TreeEntry>,
}

/// Why bytes are not a valid tree.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeError {
    /// postcard could not decode the bytes.
    #[error("tree does not decode: {0}")]
    Decode(String),
    /// A newer retrace wrote this tree.
    #[error("tree version {0} is newer than this retrace understands (1); upgrade retrace")]
    UnknownVersion(u8),
    /// A name that would escape its directory or cannot be a file name.
    #[error("tree holds an unsafe entry name {0:?}")]
    BadName(String),
    /// Names out of order or repeated.
    #[error("tree entries are not strictly sorted at {0:?}")]
    Unsorted(String),
}

/// Whether `name` is acceptable as a single path component we may create.
#[must_use]
pub fn is_safe_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.iter().any(|&b| b == b'/' || b == 0)
}

impl Tree {
    /// The entry named `name`, by binary search (entries are strictly sorted by name: a
    /// decoded tree is checked to be).
    #[must_use]
    pub fn entry(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Encodes the tree; entries must already be sorted (capture builds them sorted). The
    /// bytes are postcard's encoding of `{ version: u8, entries: [TreeEntry] }` (docs/format.md),
    /// written out here so that encoding cannot fail: the version byte, a varint count, then
    /// per entry a varint name length, the name, the kind's varint index, the 32 id bytes
    /// and the varint size.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        // Each byte is the value's low 7 bits, so the casts keep exactly what they mean to.
        #[allow(clippy::cast_possible_truncation)]
        fn varint(out: &mut Vec<u8>, mut v: u64) {
            while v >= 0x80 {
                out.push((v & 0x7f) as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        let mut out = Vec::with_capacity(2 + self.entries.len() * 56);
        out.push(TREE_VERSION);
        varint(&mut out, self.entries.len() as u64);
        for e in &self.entries {
            varint(&mut out, e.name.len() as u64);
            out.extend_from_slice(&e.name);
            varint(&mut out, e.kind as u64);
            out.extend_from_slice(&e.id.0);
            varint(&mut out, e.size);
        }
        out
    }

    /// The id of this tree's encoding.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests
    #[must_use]
    pub fn id(&self) -> ObjectId {
        ObjectId::of_tree(&self.encode())
    }

    /// Decodes and validates a tree.
    ///
    /// # Errors
    /// [`TreeError`] when the bytes are not a tree this retrace can safely restore.
    pub fn decode(bytes: &[u8]) -> Result<Tree, TreeError> {
        let version = *bytes
            .first()
            .ok_or_else(|| TreeError::Decode("empty".into()))?;
        if version != TREE_VERSION {
            return Err(TreeError::UnknownVersion(version));
        }
        let record: TreeRecord =
            postcard::from_bytes(bytes).map_err(|e| TreeError::Decode(e.to_string()))?;
        // One encoding per tree: trailing bytes or overlong varints would give one tree
        // several ids.
        let canonical =
            postcard::to_allocvec(&record).map_err(|e| TreeError::Decode(e.to_string()))?;
        if canonical != bytes {
            return Err(TreeError::Decode("not in canonical form".into()));
        }
        for (i, e) in record.entries.iter().enumerate() {
            if !is_safe_name(&e.name) {
                return Err(TreeError::BadName(crate::object::show_path(&e.name)));
            }
            if i > 0 && record.entries[i - 1].name >= e.name {
                return Err(TreeError::Unsorted(crate::object::show_path(&e.name)));
            }
        }
        Ok(Tree {
            entries: record.entries,
        })
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
