//! What an edit step sees of its own files. An edit tool names the files it writes, and no
//! capture brackets it (that is for shell tools), so two sessions' edits of one file between
//! two captures would reach the ledger as one change. At an edit step's begin and end, each
//! named regular file is read beneath the root, stored, and recorded in the ledger as the
//! version its writer left: at the begin, whoever could write it until then; at the end, the
//! step. An undo then takes back exactly what the step's session wrote there
//! ([`super::Session::own_changes`]). A file a snapshot would keep out by name (a secret, a
//! hard exclusion) or by content (a private key), or bigger than a mergeable file, or not
//! regular, is not read: the ledger's claim covers it.

use std::io::Read;

use rustix::fs::OFlags;

use crate::error::Error;
use crate::merge::MAX_MERGE_BYTES;
use crate::object::{EntryKind, NewFrame, ObjectId, ObjectKind, PendingObject, RelPath};
use crate::store::{Store, StoreReader};

/// A named file as read.
pub(super) struct Seen {
    /// The path.
    pub path: RelPath,
    /// Its version on disk (None: no file there).
    pub version: Option<(EntryKind, ObjectId)>,
    /// Its version in the last snapshot (None: it had none there, a new file).
    pub last: Option<(EntryKind, ObjectId)>,
}

/// The entry at `path` in snapshot `root`, if it is a regular file there.
pub(super) fn in_snapshot(
    reader: &StoreReader,
    root: &ObjectId,
    path: &[u8],
) -> Option<(EntryKind, ObjectId)> {
    let mut tree = reader.read_tree(root).ok()?;
    let mut parts = path.split(|&b| b == b'/').peekable();
    while let Some(name) = parts.next() {
        let e = tree.entry(name)?;
        if parts.peek().is_none() {
            return matches!(e.kind, EntryKind::File | EntryKind::Executable)
                .then_some((e.kind, e.id));
        }
        if e.kind != EntryKind::Dir {
            return None;
        }
        tree = reader.read_tree(&e.id).ok()?;
    }
    None
}

/// Reads `files` of the workspace at `root_dir` that the last snapshot holds as regular
/// files, storing each version it has not stored yet. A file that cannot be read as a
/// small regular file beneath the root is left out (the ledger's claim covers it).
///
/// # Errors
/// [`Error::Store`] when the store cannot be read or written.
pub(super) fn look(
    store: &Store,
    root_dir: &std::path::Path,
    files: &[Vec<u8>],
) -> Result<Vec<Seen>, Error> {
    let reader = store.reader()?;
    let Some(last) = reader.last_known()? else {
        return Ok(Vec::new());
    };
    let Ok(root) = crate::scan::beneath::Root::open(root_dir) else {
        return Ok(Vec::new());
    };
    let mut seen = Vec::new();
    let mut new = Vec::new();
    for f in files {
        let known = in_snapshot(&reader, &last, f);
        // A file the last snapshot lacks: kept out of the store when a snapshot would keep it
        // out by name (a secret, a hard exclusion); an ignored file is stored until a GC.
        let kept_out = f.split(|&b| b == b'/').any(|n| {
            crate::scan::exclude::is_hard_excluded(n) || crate::scan::exclude::is_secret_name(n)
        });
        if known.is_none() && kept_out {
            continue;
        }
        let (kind, bytes) = match read_small(&root, f) {
            Found::File(kind, bytes) => (kind, bytes),
            // Deleted since (by another writer, or before this step wrote it anew).
            Found::Absent => {
                seen.push(Seen {
                    path: RelPath::from(f.clone()),
                    version: None,
                    last: known,
                });
                continue;
            }
            Found::Unreadable => continue,
        };
        let head = &bytes[..bytes.len().min(4096)];
        if crate::scan::exclude::looks_like_private_key(head) {
            continue; // kept out of snapshots, so out of the store here too
        }
        let id = ObjectId::of_blob(&bytes);
        if !reader.contains(&id)? && !new.iter().any(|o: &PendingObject| o.id == id) {
            new.push(PendingObject::whole(
                id,
                ObjectKind::Blob,
                bytes.len() as u64,
                bytes,
            ));
        }
        seen.push(Seen {
            path: RelPath::from(f.clone()),
            version: Some((kind, id)),
            last: known,
        });
    }
    drop(reader);
    if !new.is_empty() {
        store.write(vec![NewFrame::pack(&new)], None, None)?;
    }
    Ok(seen)
}

/// What [`read_small`] found.
enum Found {
    /// A regular file of at most [`MAX_MERGE_BYTES`]: its kind and bytes.
    File(EntryKind, Vec<u8>),
    /// Nothing at the path (its directory included).
    Absent,
    /// Something else, or nothing that could be read.
    Unreadable,
}

/// The regular file of at most [`MAX_MERGE_BYTES`] at `rel` beneath `root`.
fn read_small(root: &crate::scan::beneath::Root, rel: &[u8]) -> Found {
    match root.open_at(rel, OFlags::RDONLY | OFlags::NOFOLLOW) {
        Ok(fd) => read_fd(fd).map_or(Found::Unreadable, |(kind, bytes)| Found::File(kind, bytes)),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Found::Absent,
        Err(_) => Found::Unreadable,
    }
}

/// The file `fd` when it is regular and at most [`MAX_MERGE_BYTES`]: its kind and bytes.
fn read_fd(fd: rustix::fd::OwnedFd) -> Option<(EntryKind, Vec<u8>)> {
    let st = rustix::fs::fstat(&fd).ok()?;
    let mode = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let size = u64::try_from(st.st_size).ok()?;
    if mode != rustix::fs::FileType::RegularFile || size > MAX_MERGE_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).ok()?);
    std::fs::File::from(fd)
        .take(MAX_MERGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_MERGE_BYTES {
        return None;
    }
    let kind = if st.st_mode & 0o111 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    Some((kind, bytes))
}
