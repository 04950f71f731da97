//! The guards a restore passes before it writes: paths another writer holds, and edits no
//! snapshot has (stored first as a safety snapshot when the restore is forced).

use super::{DirtyRefusal, Exclusive, MAX_LISTED, RestoreOptions, partial};
use crate::capture::Capture;
use crate::diff::flatten;
use crate::error::{RestoreError, StoreError};
use crate::object::{FlatEntry, ObjectId};
use crate::progress::Progress;

/// Who else holds paths of the workspace right now, asked by a restore before it writes: a
/// restore that would change a held path is refused unless forced. The history layer
/// answers with its ownership rule (`crate::history`'s `Held`).
pub(crate) trait Holders {
    /// The paths another writer holds, each with who: `disk` is the workspace as the
    /// restore found it (`stored`: its id, when it was stored).
    ///
    /// # Errors
    /// [`StoreError`].
    fn held(
        &self,
        reader: &crate::store::StoreReader,
        disk: &[FlatEntry],
        stored: Option<ObjectId>,
    ) -> Result<std::collections::BTreeMap<String, String>, StoreError>;
}

/// The guard of a restore against other writers: of `changed` (the paths it would
/// change), those `held` names. Unless `force`, that is [`RestoreError::Held`], or for a
/// dry run the refusal returned. Forced, the restore goes on: the disk it found is stored
/// (the last known snapshot, or the dirty guard's safety snapshot).
pub(crate) fn held_guard(
    held: &std::collections::BTreeMap<String, String>,
    changed: impl Iterator<Item = String>,
    opts: RestoreOptions,
) -> Result<Option<DirtyRefusal>, RestoreError> {
    if held.is_empty() || opts.force {
        return Ok(None);
    }
    let clash: Vec<crate::error::HeldPath> = changed
        .filter_map(|p| {
            held.get(&p).map(|w| crate::error::HeldPath {
                path: p,
                writer: w.clone(),
            })
        })
        .collect();
    if clash.is_empty() {
        return Ok(None);
    }
    let count = clash.len();
    let listed: Vec<_> = clash.into_iter().take(MAX_LISTED).collect();
    let paths = listed.iter().map(|h| h.path.clone()).collect();
    let e = RestoreError::Held { held: listed };
    if !opts.dry_run {
        return Err(e);
    }
    Ok(Some(DirtyRefusal {
        result: "held",
        message: e.to_string(),
        paths,
        count,
    }))
}

/// Of `changes` from the last known state to the disk, the paths that hold work no
/// snapshot has and that a restore to `target` would lose: every changed file, link or
/// nested repository, but a file the disk lacks that `target` holds exactly as the known
/// state did (deleted since: the restore brings it back, and nothing is lost).
///
/// # Errors
/// [`StoreError`] when a tree of `target` cannot be read.
pub(crate) fn unsaved(
    reader: &crate::store::StoreReader,
    changes: Vec<crate::diff::Change>,
    target: &ObjectId,
) -> Result<Vec<String>, StoreError> {
    let leaf = |e: &Option<FlatEntry>| {
        e.as_ref()
            .is_some_and(|e| e.kind != crate::object::EntryKind::Dir)
    };
    let changes: Vec<_> = changes
        .into_iter()
        .filter(|c| leaf(&c.old) || leaf(&c.new))
        .collect();
    let deleted: Vec<&crate::diff::Change> = changes
        .iter()
        .filter(|c| c.new.is_none() && leaf(&c.old))
        .collect();
    let there = partial::entries_at(reader, target, deleted.iter().map(|c| &c.path))?;
    let brought_back: std::collections::HashSet<&crate::object::RelPath> = deleted
        .iter()
        .filter(|c| {
            let was = c.old.as_ref().map(|e| (e.kind, e.id));
            there
                .binary_search_by(|e| e.path.cmp(&c.path))
                .is_ok_and(|i| Some((there[i].kind, there[i].id)) == was)
        })
        .map(|c| &c.path)
        .collect();
    Ok(changes
        .iter()
        .filter(|c| !brought_back.contains(&c.path))
        .map(|c| c.path.show())
        .collect())
}

/// The guard of a restore to `target` over the paths `only` (all when empty): where the
/// disk `current` differs from the last known state, a restore would lose edits no
/// snapshot has, but for files deleted since that `target` brings back exactly as they
/// were ([`unsaved`]). Without `force` that is [`RestoreError::Dirty`], or for a dry run
/// the refusal returned; with it and the lock, the disk is recorded first as a safety
/// snapshot (`current` becomes it; its id is returned second).
#[allow(clippy::too_many_arguments)] // the lock is a proof, not data
pub(crate) fn dirty_guard(
    reader: &crate::store::StoreReader,
    (current, target): (&mut Capture, &ObjectId),
    only: &[String],
    opts: RestoreOptions,
    lock: Option<&Exclusive<'_>>,
    label: String,
    progress: &dyn Progress,
) -> Result<(Option<DirtyRefusal>, Option<ObjectId>), RestoreError> {
    let last_known = reader.last_known()?;
    if last_known == Some(current.id) {
        return Ok((None, None));
    }
    let changed: Vec<String> = match last_known {
        // Stored (under the lock): the trees say what differs, read where they differ (by a
        // reader that sees the disk's trees, stored after `reader` was opened).
        Some(k) if let Some(ex) = lock => {
            let fresh = ex.store.reader()?;
            unsaved(
                &fresh,
                crate::diff::changes(&fresh, &k, &current.id)?,
                target,
            )?
        }
        Some(k) => {
            let changes = crate::diff::changes_of(&flatten(reader, &k)?, &current.entries);
            unsaved(reader, changes, target)?
        }
        // No known state: every path is unsaved work (stored without a list: read back).
        None if let Some(ex) = lock => flatten(&ex.store.reader()?, &current.id)?
            .iter()
            .map(|e| e.path.show())
            .collect(),
        None => current.entries.iter().map(|e| e.path.show()).collect(),
    }
    .into_iter()
    .filter(|p| crate::diff::selected(p, only))
    .collect();
    if changed.is_empty() {
        return Ok((None, None));
    }
    let mut refused = None;
    if !opts.force {
        let paths: Vec<String> = changed.iter().take(MAX_LISTED).cloned().collect();
        let count = changed.len();
        if !opts.dry_run {
            return Err(RestoreError::Dirty { paths, count });
        }
        // A dry run goes on to show what would happen, and that it would be refused.
        refused = Some(DirtyRefusal {
            result: "dirty",
            message: RestoreError::Dirty {
                paths: paths.clone(),
                count,
            }
            .to_string(),
            paths,
            count,
        });
    }
    let mut safety = None;
    if let Some(ex) = lock {
        *current = ex.record(Some(label), progress)?;
        safety = Some(current.id);
    }
    Ok((refused, safety))
}
