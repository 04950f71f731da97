//! A snapshot's paths as one sorted list ([`FlatEntry`]): what capture reads back from the
//! last snapshot's trees and what diff compares, so it lives below both.

use super::{EntryKind, ObjectId, RelPath};

/// One path of a snapshot, flattened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatEntry {
    /// Path relative to the workspace root.
    pub path: RelPath,
    /// What it is.
    pub kind: EntryKind,
    /// Blob or tree id (zero for nested repositories).
    pub id: ObjectId,
    /// Size in bytes.
    pub size: u64,
}
