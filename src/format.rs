//! The on-disk format for programs that read a store without changing it: a backup tool, a
//! forensic script, a viewer. `docs/format.md` specifies every byte; this module gives the
//! same records as types, with the decoders retrace itself uses (each refuses unknown
//! versions, trailing bytes and impossible values), and [`StoreFile`], a read-only view
//! that needs no knowledge of redb.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let home = tempfile::tempdir()?;
//! use retrace::format::{EntryKind, StoreFile};
//! use retrace::{Config, Workspace};
//! std::fs::write(dir.path().join("notes.txt"), "hello")?;
//! let ws = Workspace::open(dir.path(), &Config::with_home(home.path()))?;
//! ws.snapshot(None)?;
//! let path = ws.store_path().to_path_buf();
//!
//! let store = StoreFile::open(&path)?;
//! let view = store.view()?;
//! let snap = &view.snapshots()?[0];
//! let root = view.tree(&snap.root)?;
//! let entry = root.entry(b"notes.txt").ok_or("notes.txt was not captured")?;
//! assert_eq!(entry.kind, EntryKind::File);
//! assert_eq!(view.file(&entry.id)?, b"hello");
//! # Ok(())
//! # }
//! ```
//!
//! Opening is read-only in redb's sense: the file is never written, not even to recover a
//! crashed writer (a store that needs that answers [`StoreError::NeedsRepair`]; any
//! `retrace` command repairs it). A store being written by a running `retrace` may be read
//! at the same time.

use std::path::Path;

use crate::error::StoreError;
use crate::history::db;
use crate::store::{ReadOnlyStore, ReadTx, Store, StoreReader};

pub use crate::history::record::{
    CheckpointRecord, HISTORY_VERSION, SessionName, SessionRecord, TurnRecord,
};
pub use crate::object::delta::MAX_DEPTH as MAX_DELTA_DEPTH;
pub use crate::object::record::{
    Codec, DELTA_RECORD_VERSION, MAX_FRAME_BYTES, RECORD_VERSION, RecordError,
};
pub use crate::object::tree::{TREE_VERSION, TreeError};
pub use crate::object::{
    ChunkList, DeltaBase, EntryKind, ObjectKind, ObjectRecord, Tree, TreeEntry,
};
pub use crate::store::SNAPSHOT_VERSION;
pub use crate::store::schema::{FORMAT_DELTAS, FORMAT_PARITY, FORMAT_VERSION};
use crate::{ObjectId, SessionKey, SnapshotRecord, StepRecord};

/// A store file opened read-only.
pub struct StoreFile {
    store: ReadOnlyStore,
}

impl StoreFile {
    /// Opens the store at `path` (a workspace's is [`crate::Workspace::store_path`], or found
    /// without opening the workspace by [`crate::Workspace::locate_store`]) and checks its
    /// format number.
    ///
    /// # Errors
    /// [`StoreError::UnknownFormat`] for a store a newer retrace wrote,
    /// [`StoreError::BeingCreated`] while its creator has not committed it yet,
    /// [`StoreError::NeedsRepair`] after a crashed writer, [`StoreError::Permission`] or
    /// [`StoreError::Open`] when the file cannot be read.
    pub fn open(path: &Path) -> Result<StoreFile, StoreError> {
        Ok(StoreFile {
            store: Store::open_read_only(path)?,
        })
    }

    /// The store file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// A view of the store as committed now; writers that commit later are not seen by it.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn view(&self) -> Result<StoreView, StoreError> {
        // History first: the object tables are then at least as new, so every object a
        // history record names (kept until no record names it) is found.
        let history = self.store.begin_read()?;
        let objects = self.store.reader()?;
        Ok(StoreView { history, objects })
    }
}

/// A consistent read-only view of a store: its snapshots, objects and sessions, decoded.
/// Every read verifies what it returns (file contents and trees hash to their ids).
pub struct StoreView {
    history: ReadTx,
    objects: StoreReader,
}

impl StoreView {
    /// Every snapshot in the workspace's log, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Db`], or [`StoreError::Corrupt`] for a record that does not decode.
    pub fn snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        self.objects.snapshots()
    }

    /// The index record of object `id`: what it is, and where its bytes are.
    ///
    /// # Errors
    /// [`StoreError::Missing`] when the store does not hold it, [`StoreError::Corrupt`] when
    /// its record does not decode.
    pub fn object(&self, id: &ObjectId) -> Result<ObjectRecord, StoreError> {
        self.objects.record(id)
    }

    /// Whether the store holds object `id`.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn contains(&self, id: &ObjectId) -> Result<bool, StoreError> {
        self.objects.contains(id)
    }

    /// The directory tree `id` (a snapshot's root, or a [`EntryKind::Dir`] entry's id),
    /// verified and validated as a restore would.
    ///
    /// # Errors
    /// [`StoreError::Missing`], or [`StoreError::Corrupt`] for bytes that do not hash to
    /// `id` or are not a valid tree.
    pub fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.objects.read_tree(id)
    }

    /// The content of a file or symlink entry (its [`TreeEntry::id`]), whole: deltas applied,
    /// chunks joined, verified against `id`.
    ///
    /// # Errors
    /// [`StoreError::Missing`], or [`StoreError::Corrupt`] when the bytes do not hash to `id`.
    pub fn file(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        self.objects.read_blob(id)
    }

    /// The chunks of a chunked file (an object of kind [`ObjectKind::ChunkedBlob`]).
    ///
    /// # Errors
    /// [`StoreError::Missing`], or [`StoreError::Corrupt`] when the object is not a chunk
    /// list.
    pub fn chunks(&self, id: &ObjectId) -> Result<ChunkList, StoreError> {
        self.objects.chunk_list(id)
    }

    /// Every agent session the store holds, with its record and the host's name for it (when
    /// kept).
    ///
    /// # Errors
    /// [`StoreError::Db`]; [`StoreError::History`] for a record that does not decode.
    pub fn sessions(&self) -> Result<Vec<SessionEntry>, StoreError> {
        db::sessions(&self.history)?
            .into_iter()
            .map(|(key, record)| {
                let name = db::name(&self.history, &key)?;
                Ok(SessionEntry { key, record, name })
            })
            .collect()
    }

    /// The turns of session `key` still kept, by number.
    ///
    /// # Errors
    /// As [`StoreView::sessions`].
    pub fn turns(&self, key: &SessionKey) -> Result<Vec<TurnRecord>, StoreError> {
        db::turns(&self.history, key)
    }

    /// The checkpoints of session `key`, by number.
    ///
    /// # Errors
    /// As [`StoreView::sessions`].
    pub fn checkpoints(&self, key: &SessionKey) -> Result<Vec<CheckpointRecord>, StoreError> {
        db::checkpoints(&self.history, key)
    }

    /// The steps (tool calls) of turn `turn` of session `key`, by number.
    ///
    /// # Errors
    /// As [`StoreView::sessions`].
    pub fn steps(&self, key: &SessionKey, turn: u64) -> Result<Vec<StepRecord>, StoreError> {
        db::steps(&self.history, key, turn)
    }
}

/// One session of [`StoreView::sessions`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SessionEntry {
    /// Its key: the blake3 hash of the host's session id.
    pub key: SessionKey,
    /// When it was created and last touched.
    pub record: SessionRecord,
    /// The host's session id and agent, when kept.
    pub name: Option<SessionName>,
}
