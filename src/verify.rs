//! Integrity checking (`retrace-dump verify`): every object re-hashed, every tree reference
//! checked, and every snapshot the history records name looked up, with the roots found by
//! the same enumeration garbage collection uses ([`crate::retention`]). Read-only.

use std::fmt;

use crate::error::StoreError;
use crate::history::db::SessionKey;
use crate::object::{EntryKind, ObjectId, ObjectKind};
use crate::retention::{Found, Holder, Root, Unreadable, history_roots};
use crate::store::{ReadOnlyStore, StoreReader};

/// One thing wrong with a store. `Display` gives the line `retrace-dump verify` prints.
#[derive(Debug)]
// Every field is for the caller (tests match on them); `Display` prints what a person needs.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub enum Fault {
    /// An object's index record does not decode.
    Record {
        /// The object.
        id: ObjectId,
        /// Why.
        error: StoreError,
    },
    /// An object's content cannot be read back, or does not hash to its id.
    Content {
        /// The object.
        id: ObjectId,
        /// Why.
        error: StoreError,
    },
    /// A tree entry points at an object of the wrong kind (a directory at a blob, a file
    /// at a tree).
    WrongKind {
        /// The tree.
        tree: ObjectId,
        /// The entry's name.
        name: Vec<u8>,
        /// The object it points at.
        id: ObjectId,
    },
    /// A tree entry points at an object that is missing or whose record does not decode.
    Entry {
        /// The tree.
        tree: ObjectId,
        /// The entry's name.
        name: Vec<u8>,
        /// The object it points at.
        id: ObjectId,
        /// Why.
        error: StoreError,
    },
    /// A parity frame read back only by rebuilding one damaged shard from its parity: its
    /// objects are whole, but a second damage would lose them.
    Rebuilt {
        /// The frame's offset in the pack log.
        offset: u64,
        /// The damaged shard.
        shard: usize,
        /// How many objects it holds.
        objects: usize,
    },
    /// A snapshot-log record whose root tree is missing or damaged.
    Snapshot {
        /// The snapshot's root.
        root: ObjectId,
        /// Why.
        error: StoreError,
    },
    /// The sessions table does not decode: no session could be checked.
    Sessions {
        /// Why.
        error: StoreError,
    },
    /// A session's records do not decode.
    Session {
        /// The session.
        session: SessionKey,
        /// Why.
        error: StoreError,
    },
    /// A turn's before- or after-snapshot is missing or damaged.
    Turn {
        /// The session.
        session: SessionKey,
        /// The turn's number.
        number: u64,
        /// The snapshot's root.
        snapshot: ObjectId,
        /// Why.
        error: StoreError,
    },
    /// A checkpoint's snapshot is missing or damaged.
    Checkpoint {
        /// The session.
        session: SessionKey,
        /// The checkpoint's number.
        number: u64,
        /// The snapshot's root.
        snapshot: ObjectId,
        /// Why.
        error: StoreError,
    },
}

/// The first 16 hex digits of a session key, as `retrace-dump sessions` prints it.
fn session_hex(key: &SessionKey) -> String {
    key.short()
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Record { error, .. }
            | Fault::Content { error, .. }
            | Fault::Sessions { error } => write!(f, "{error}"),
            Fault::Rebuilt {
                offset,
                shard,
                objects,
            } => write!(
                f,
                "the frame at offset {offset} of the pack log ({objects} objects) has a damaged \
                 shard ({shard}), rebuilt from its parity on every read; `retrace repair` \
                 writes it again before a second damage loses it"
            ),
            Fault::WrongKind { tree, name, .. } => write!(
                f,
                "tree {} entry {:?} points at the wrong kind of object",
                tree.short(),
                crate::object::show_path(name)
            ),
            Fault::Entry {
                tree, name, error, ..
            } => write!(
                f,
                "tree {} entry {:?}: {error}",
                tree.short(),
                crate::object::show_path(name)
            ),
            Fault::Snapshot { root, error } => write!(f, "snapshot {}: {error}", root.short()),
            Fault::Session { session, error } => {
                write!(f, "session {}: {error}", session_hex(session))
            }
            Fault::Turn {
                session,
                number,
                error,
                ..
            } => write!(f, "session {} turn {number}: {error}", session_hex(session)),
            Fault::Checkpoint {
                session,
                number,
                error,
                ..
            } => write!(
                f,
                "session {} checkpoint {number}: {error}",
                session_hex(session)
            ),
        }
    }
}

/// Every fault of the store, in this order: objects (in pack-log order) whose record does
/// not decode, whose content does not read back or hash to its id, trees whose entries
/// point at missing objects or the wrong kind; then the roots the records name that are
/// missing or damaged: snapshot-log records, then each session (records that do not decode,
/// turns, checkpoints). Empty for a whole store. The last known states, the restore
/// journal and the stat cache are roots for garbage collection only; they are not checked
/// here.
///
/// # Errors
/// [`StoreError`] when the store cannot be read at all (redb fails, the snapshot log does
/// not decode).
pub fn verify(store: &ReadOnlyStore) -> Result<Vec<Fault>, StoreError> {
    let reader = store.reader()?;
    let mut faults = objects(&reader)?;
    faults.extend(reader.rebuilt_frames()?.into_iter().map(|r| Fault::Rebuilt {
        offset: r.offset,
        shard: r.shard,
        objects: r.objects,
    }));
    let tx = store.begin_read()?;
    for found in history_roots(&reader, &tx)? {
        let root = match found {
            Found::Root(root) => root,
            Found::Unreadable(Unreadable::Sessions(error)) => {
                faults.push(Fault::Sessions { error });
                continue;
            }
            Found::Unreadable(Unreadable::Session(session, error)) => {
                faults.push(Fault::Session { session, error });
                continue;
            }
            Found::Unreadable(Unreadable::Journal(_)) => continue,
        };
        if let Err(error) = reader.record(&root.id) {
            faults.extend(root_fault(root, error));
        }
    }
    Ok(faults)
}

/// The fault of a missing or damaged root; `None` for the roots only garbage collection
/// keeps (last known states, the restore journal).
fn root_fault(root: Root, error: StoreError) -> Option<Fault> {
    let snapshot = root.id;
    match root.holder {
        Holder::Log => Some(Fault::Snapshot {
            root: snapshot,
            error,
        }),
        Holder::Turn { session, number } => Some(Fault::Turn {
            session,
            number,
            snapshot,
            error,
        }),
        Holder::Checkpoint { session, number } => Some(Fault::Checkpoint {
            session,
            number,
            snapshot,
            error,
        }),
        Holder::LastKnown | Holder::SessionState { .. } | Holder::Journal => None,
    }
}

/// The object part of [`verify`].
fn objects(r: &StoreReader) -> Result<Vec<Fault>, StoreError> {
    let mut faults = Vec::new();
    let mut objects = r.objects()?;
    // In pack-log order, so each shared frame is decompressed once (the reader caches it).
    objects.sort_by_key(|(_, rec)| rec.as_ref().map_or(0, |r| r.offset));
    for (id, rec) in objects {
        let rec = match rec {
            Ok(rec) => rec,
            Err(error) => {
                faults.push(Fault::Record { id, error });
                continue;
            }
        };
        let checked = match rec.kind {
            ObjectKind::Blob | ObjectKind::ChunkedBlob => r.read_blob(&id).map(|_| ()),
            ObjectKind::Tree => r.read_tree(&id).map(|tree| {
                for e in tree.entries {
                    let want = match e.kind {
                        EntryKind::NestedRepo => continue,
                        EntryKind::Dir => &[ObjectKind::Tree][..],
                        _ => &[ObjectKind::Blob, ObjectKind::ChunkedBlob][..],
                    };
                    match r.record(&e.id) {
                        Ok(child) if want.contains(&child.kind) => {}
                        Ok(_) => faults.push(Fault::WrongKind {
                            tree: id,
                            name: e.name,
                            id: e.id,
                        }),
                        Err(error) => faults.push(Fault::Entry {
                            tree: id,
                            name: e.name,
                            id: e.id,
                            error,
                        }),
                    }
                }
            }),
        };
        if let Err(error) = checked {
            faults.push(Fault::Content { id, error });
        }
    }
    Ok(faults)
}
