//! What a watcher vouches for, in the words the walk and the stat cache share: a [`Token`]
//! (a position in one watcher's event history, recorded with a capture's cache) and the
//! [`Changes`] since one (the directories a capture must look at again). The watcher
//! (`crate::watch`) issues them; the walk (`crate::scan`) and the stat cache
//! (`crate::statcache`) consume them, so they live below all three.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// A position in one watcher's event history: `epoch` names the watcher instance (a new
/// crawl, after a start, an overflow or a lost watch, is a new epoch), `seq` the batch of
/// events that began when the token was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// The watcher instance (never 0).
    pub epoch: u64,
    /// The first batch not yet reported to the holder.
    pub seq: u64,
}

/// What changed since a token: directories to look at again, and directories (with
/// everything below them) to walk as if the watcher did not exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Directories (workspace-relative, empty for the root) whose entries or own metadata
    /// changed.
    pub dirty: HashSet<Vec<u8>>,
    /// Directories created, moved in or not watched: walked whole.
    pub subtree: HashSet<Vec<u8>>,
}

impl Changes {
    /// Whether nothing changed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty() && self.subtree.is_empty()
    }
}
