//! Bursts of local history as history records them: a `bursts` row beside each snapshot-log
//! row that the watcher's recorder captured (`crate::local_history`), saying what it
//! changed. `docs/format.md` has the record.

use serde::{Deserialize, Serialize};

use super::record::Counts;
use crate::error::StoreError;
use crate::object::ObjectId;
use crate::store::{ReadTx, RowsTable};

/// The table of burst records: one row per snapshot-log row that is a burst, numbered as
/// that row, under the all-zero key (the workspace's own, not a session's).
pub const BURSTS: RowsTable = RowsTable::new("bursts");

/// The key every burst row is under.
pub(crate) const WORKSPACE: [u8; 32] = [0; 32];

/// The version [`BurstRecord`]s are written with.
pub const BURST_VERSION: u8 = 1;

/// Paths a burst record names; the rest are only counted.
pub const BURST_PATHS: usize = 8;

/// What a burst changed, recorded beside its snapshot-log row (`docs/format.md`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstRecord {
    /// [`BURST_VERSION`].
    pub version: u8,
    /// The snapshot's root: a row whose root differs is not this burst's.
    pub root: ObjectId,
    /// Files added, modified and deleted since the snapshot before it in the log.
    pub counts: Counts,
    /// The first [`BURST_PATHS`] of the paths it changed, sorted.
    pub paths: Vec<Vec<u8>>,
}

/// What a burst changed, as `retrace log` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BurstSummary {
    /// Files added, modified and deleted since the snapshot before it.
    pub counts: Counts,
    /// Some of the paths it changed (at most 8), sorted, shown lossily.
    pub paths: Vec<String>,
}

impl BurstSummary {
    /// Files it changed, in all.
    #[must_use]
    pub fn files(&self) -> u32 {
        self.counts.added + self.counts.modified + self.counts.deleted
    }

    /// The paths it names, comma-separated, with `, …` when it changed more; empty when
    /// it names none.
    #[must_use]
    pub fn listed(&self) -> String {
        let mut text = self.paths.join(", ");
        if !text.is_empty() && self.files() as usize > self.paths.len() {
            text.push_str(", …");
        }
        text
    }
}

impl BurstRecord {
    /// What `retrace log` shows of it.
    #[must_use]
    pub fn summary(&self) -> BurstSummary {
        BurstSummary {
            counts: self.counts,
            paths: self
                .paths
                .iter()
                .map(|p| crate::object::show_path(p))
                .collect(),
        }
    }
}


/// The burst records of the log, by row; a row that does not decode is left out (it is
/// then thinned as a dangling record, never read as a burst).
///
/// # Errors
/// [`StoreError::Db`].
pub(crate) fn bursts(tx: &ReadTx) -> Result<Vec<(u64, BurstRecord)>, StoreError> {
    let mut out = Vec::new();
    tx.each_row(BURSTS, &WORKSPACE, |n, v| {
        if let Ok(r) = crate::object::record::decode_versioned::<BurstRecord>(
            v,
            BURST_VERSION,
            "burst record",
        ) {
            out.push((n, r));
        }
        Ok(())
    })?;
    Ok(out)
}

/// What each snapshot-log row that is a burst changed, by row.
///
/// # Errors
/// [`StoreError::Db`].
pub(crate) fn summaries(
    tx: &ReadTx,
) -> Result<std::collections::HashMap<u64, (ObjectId, BurstSummary)>, StoreError> {
    Ok(bursts(tx)?
        .into_iter()
        .map(|(n, r)| (n, (r.root, r.summary())))
        .collect())
}

