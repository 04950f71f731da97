//! What an install found and created, remembered under the retrace home so that uninstall
//! gives the project back as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[allow(clippy::wildcard_imports)] // one installer's parts share its private helpers
use super::*;

/// `path` with its links followed and `.`/`..` resolved, also when its last components do
/// not exist yet (the deepest existing ancestor is resolved, the rest kept), so that a path
/// remembered before a file was created names it as found after.
pub(super) fn canonical(path: &Path) -> PathBuf {
    for base in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(base) {
            return match path.strip_prefix(base) {
                Ok(rest) if !rest.as_os_str().is_empty() => real.join(rest),
                _ => real,
            };
        }
    }
    path.to_path_buf()
}

/// The key of a settings file in the record: its real path.
pub(super) fn record_key(settings: &Path) -> String {
    let real = follow_links(settings).unwrap_or_else(|_| settings.to_path_buf());
    canonical(&real).to_string_lossy().into_owned()
}

/// The record's name for a path install created; `None` when not UTF-8 (such a path is not
/// remembered, so uninstall leaves it).
pub(super) fn record_name(path: &Path) -> Option<String> {
    canonical(path).to_str().map(str::to_string)
}

/// What `installed.json` remembers of the installs into one settings file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Installed {
    /// The containers (`hooks`, or an event's name for `hooks.<event>`) that were the
    /// user's and empty when an install filled them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) kept: BTreeSet<String>,
    /// The paths an install created: the settings file (when missing), command files, and
    /// the directories made for them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) created: BTreeSet<String>,
    /// The settings file's text when it held only whitespace before the install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) blank: Option<String>,
    /// The top-level keys an install set, each with the text of its value before (`None`:
    /// the key was not there), for uninstall to put back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) set: BTreeMap<String, Option<String>>,
    /// The programs of the hook commands installs wrote (their first word, as `sh` reads
    /// it): an entry running one is retrace's whatever the binary is named.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) programs: BTreeSet<String>,
}

impl Installed {
    pub(super) fn created(&self, path: &Path) -> bool {
        record_name(path).is_some_and(|p| self.created.contains(&p))
    }

    /// Notes that an install creates `path`, and the directories above it that are missing.
    pub(super) fn create(&mut self, path: &Path) {
        let missing = path.ancestors().take_while(|p| {
            !p.as_os_str().is_empty()
                && matches!(p.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        });
        self.created.extend(missing.filter_map(record_name));
    }
}

/// What the record holds for the target's settings file (nothing without a record).
pub(super) fn recorded(target: &Target) -> Installed {
    match &target.record {
        Some(record) => recorded_at(record, &target.settings()),
        None => Installed::default(),
    }
}

/// What the record file `record` holds for the settings file `settings`.
pub(super) fn recorded_at(record: &Path, settings: &Path) -> Installed {
    let mut all: serde_json::Map<String, Value> = std::fs::read_to_string(record)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let Some(entry) = all.remove(&record_key(settings)) else {
        return Installed::default();
    };
    // Before `created`, an entry was the list `kept`.
    match serde_json::from_value::<BTreeSet<String>>(entry.clone()) {
        Ok(kept) => Installed {
            kept,
            ..Installed::default()
        },
        Err(_) => serde_json::from_value(entry).unwrap_or_default(),
    }
}

/// Records `installed` for the target's settings file (when it changed); the record file
/// goes once it holds nothing.
pub(super) fn remember(target: &Target, installed: &Installed) -> Result<(), String> {
    match &target.record {
        Some(record) => remember_at(record, &target.settings(), installed),
        None => Ok(()),
    }
}

/// Records `installed` for the settings file `settings` in the record file `record`.
pub(super) fn remember_at(record: &Path, settings: &Path, installed: &Installed) -> Result<(), String> {
    let mut all: serde_json::Map<String, Value> = std::fs::read_to_string(record)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let key = record_key(settings);
    let before = all.get(&key).cloned();
    if *installed == Installed::default() {
        all.remove(&key);
    } else {
        all.insert(
            key.clone(),
            serde_json::to_value(installed).map_err(|e| e.to_string())?,
        );
    }
    if all.get(&key) == before.as_ref() {
        return Ok(());
    }
    if all.is_empty() {
        return std::fs::remove_file(record)
            .map_err(|e| format!("cannot remove {}: {e}", record.display()));
    }
    if let Some(dir) = record.parent() {
        crate::home::create_private_dir(dir).map_err(|e| e.to_string())?;
    }
    let text = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())? + "\n";
    write_atomic(record, &text, true)
}

/// Whether `text` and `start` are the same JSON text but for white space (an install's
/// file as it created it).
pub(super) fn same_json(text: &str, start: &str) -> bool {
    let bare = |t: &str| -> String {
        t.chars()
            .filter(|c| !matches!(c, ' ' | '\t' | '\n' | '\r'))
            .collect()
    };
    bare(text) == bare(start)
}

/// Whether the settings text is an empty object: what an install into a missing file
/// starts from.
pub(super) fn is_empty_object(text: &str) -> bool {
    same_json(text, "{}")
}

/// The settings files under the workspace `root` that an install recorded in the retrace
/// home `home` and that no longer hold retrace's hooks, or whose command files are gone:
/// what a restore to a snapshot older than the install took back. Sorted.
#[must_use]
pub fn lost_installs(home: &Path, root: &Path) -> Vec<PathBuf> {
    let all: serde_json::Map<String, Value> = std::fs::read_to_string(home.join("installed.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut lost = Vec::new();
    for (key, entry) in all {
        let settings = PathBuf::from(&key);
        if !settings.starts_with(root) {
            continue;
        }
        let Ok(installed) = serde_json::from_value::<Installed>(entry) else {
            continue;
        };
        if installed.programs.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(&settings).unwrap_or_default();
        // A retrace hook command, however its program is quoted: `… hook <agent>`.
        let hooked = Agent::ALL
            .iter()
            .any(|a| text.contains(&format!(" hook {}", a.name())));
        // Command files (not the directories made for them, nor the settings file).
        let files_gone = installed.created.iter().any(|c| {
            let c = Path::new(c);
            c != settings && c.extension().is_some() && !c.exists()
        });
        if !hooked || files_gone {
            lost.push(settings);
        }
    }
    lost.sort();
    lost
}

