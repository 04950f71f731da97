//! Objects of the content-addressed store: ids, trees, index records and payload codecs;
//! and how paths and other text from outside are shown.

pub mod delta;
mod flat;
mod id;
pub mod parity;
mod path;
pub mod record;
mod terminal;
pub mod tree;

pub use flat::FlatEntry;
pub use id::ObjectId;
pub use path::RelPath;
pub use record::{
    ChunkList, DeltaBase, NewFrame, ObjectKind, ObjectRecord, PendingObject,
};
pub use terminal::{terminal_line, terminal_text};
pub use tree::{EntryKind, Tree, TreeEntry};

/// Files larger than this are split by FastCDC into chunk blobs.
pub const CHUNK_THRESHOLD: u64 = 1024 * 1024;
/// FastCDC minimum chunk size.
pub const CHUNK_MIN: usize = 64 * 1024;
/// FastCDC average chunk size.
pub const CHUNK_AVG: usize = 256 * 1024;
/// FastCDC maximum chunk size.
pub const CHUNK_MAX: usize = 1024 * 1024;

/// A hasher for keys that are already uniformly spread (an id's first bytes, a key built
/// from them): it hands back the `u64` it is given, so a set of a million such keys spends
/// nothing on hashing.
#[derive(Default)]
pub struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// How a workspace-relative path (stored as its bytes, `/`-separated) is shown in messages
/// and JSON: as UTF-8, invalid sequences replaced. The one rule every listing uses.
#[must_use]
pub fn show_path(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}
