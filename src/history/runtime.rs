//! Action state published for external clients (an editor's undo button, a status bar):
//! while a process has a session open, `<runtime dir>/<pid>/<session key>.json` says whether
//! undo and redo are possible, the conversation leaf, a revision counter and the last
//! result. Written atomically, at most 64 KiB (larger states are skipped), directories 0700,
//! files 0600; removed when the process's last handle on the session goes; directories of
//! dead processes are removed by the next process that publishes.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::Ordering;

use super::{Outcome, Report, Session};

/// Largest state file written.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

static SWEPT: Once = Once::new();

/// The file in a process directory that holds the process's start time, so that a reused
/// pid is not taken for the process that wrote the directory.
const OWNER: &str = ".owner";

/// The start time held in a process directory's `.owner` file: the decimal number it
/// holds, surrounding whitespace allowed; None for anything else.
#[must_use]
pub fn parse_owner(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

/// Removes the directories of processes that are gone: their pid does not exist, or belongs
/// to a process started at another time than the one that wrote the directory.
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let recorded = std::fs::read(e.path().join(OWNER))
            .ok()
            .and_then(|t| parse_owner(&t));
        let gone = match crate::lease::start_time(pid) {
            None => i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .is_some_and(|p| {
                    matches!(
                        rustix::process::test_kill_process(p),
                        Err(rustix::io::Errno::SRCH)
                    )
                }),
            Some(now) => recorded.is_some_and(|r| r != now),
        };
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Session {
    /// Writes this session's state file (best effort: publication is observational).
    pub(crate) fn publish(&self, last: Option<&Outcome>) {
        if self.subagent {
            return;
        }
        let root = self.ws.runtime_dir();
        SWEPT.call_once(|| sweep(&root));
        let dir = root.join(std::process::id().to_string());
        if crate::home::create_private_dir(&dir).is_err() {
            return;
        }
        let owner = dir.join(OWNER);
        if !owner.exists()
            && let Some(start) = crate::lease::start_time(std::process::id())
        {
            let _ = crate::home::write_private(&owner, start.to_string().as_bytes());
        }
        let Ok(l) = self.load() else { return };
        let status = self.status_of(&l);
        let leaf = l
            .state
            .cursor
            .and_then(|n| l.turn(n))
            .and_then(|t| t.leaf.clone());
        let revision = self.rt.revision.fetch_add(1, Ordering::SeqCst) + 1;
        let state = serde_json::json!({
            "session": status.session,
            "workspace": self.ws.root().display().to_string(),
            "pid": std::process::id(),
            "can_undo": status.can_undo,
            "can_redo": status.can_redo,
            "cursor": status.cursor,
            "pending": status.pending,
            "leaf": leaf,
            "revision": revision,
            "last_result": last.map(Report::from),
            "updated_ms": crate::store::now_ms(),
        });
        let text = state.to_string();
        if text.len() > MAX_STATE_BYTES {
            return;
        }
        let file = dir.join(format!(
            "{}.json",
            &crate::object::ObjectId(self.key.0).to_hex()[..32]
        ));
        let tmp = dir.join(format!(".{}.tmp", std::process::id()));
        if crate::home::write_private(&tmp, text.as_bytes()).is_ok()
            && std::fs::rename(&tmp, &file).is_ok()
            && let Ok(mut p) = self.rt.published.lock()
        {
            *p = Some(file);
        }
    }
}

/// Removes a published state file and, if it was the last, its process directory.
pub(crate) fn unpublish(file: &PathBuf) {
    let _ = std::fs::remove_file(file);
    let Some(dir) = file.parent() else { return };
    let others = std::fs::read_dir(dir).map_or(1, |d| {
        d.flatten().filter(|e| e.file_name() != OWNER).count()
    });
    if others == 0 {
        let _ = std::fs::remove_file(dir.join(OWNER));
        let _ = std::fs::remove_dir(dir); // only when empty
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn owner_files_hold_one_number() {
        assert_eq!(super::parse_owner(b"12345\n"), Some(12345));
        assert_eq!(super::parse_owner(b"12 34"), None);
        assert_eq!(super::parse_owner(b"\xff"), None);
        assert_eq!(super::parse_owner(b""), None);
    }
}
