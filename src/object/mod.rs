//! Objects of the content-addressed store: ids, trees, index records and payload codecs.

pub mod delta;
mod id;
mod path;
pub mod record;
pub mod tree;

pub use id::ObjectId;
pub use path::RelPath;
pub use record::{
    ChunkList, Codec, DeltaBase, FrameMember, NewFrame, ObjectKind, ObjectRecord, PendingObject,
};
pub use tree::{EntryKind, Tree, TreeEntry};

/// Files larger than this are split by FastCDC into chunk blobs.
pub const CHUNK_THRESHOLD: u64 = 1024 * 1024;
/// FastCDC minimum chunk size.
pub const CHUNK_MIN: usize = 64 * 1024;
/// FastCDC average chunk size.
pub const CHUNK_AVG: usize = 256 * 1024;
/// FastCDC maximum chunk size.
pub const CHUNK_MAX: usize = 1024 * 1024;

/// How a workspace-relative path (stored as its bytes, `/`-separated) is shown in messages
/// and JSON: as UTF-8, invalid sequences replaced. The one rule every listing uses.
#[must_use]
pub fn show_path(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}
