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

/// Removes the directories of processes that are gone (their pid does not exist, or
/// belongs to a process started after the directory was written).
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let gone = rustix::process::Pid::from_raw(pid).is_some_and(|p| {
            matches!(
                rustix::process::test_kill_process(p),
                Err(rustix::io::Errno::SRCH)
            )
        });
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
            "workspace": self.ws.root.display().to_string(),
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
            &crate::object::ObjectId(self.key).to_hex()[..32]
        ));
        let tmp = dir.join(format!(".{}.tmp", std::process::id()));
        if write_private(&tmp, text.as_bytes()).is_ok()
            && std::fs::rename(&tmp, &file).is_ok()
            && let Ok(mut p) = self.rt.published.lock()
        {
            *p = Some(file);
        }
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .mode(0o600)
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(bytes)
}

/// Removes a published state file and, if it was the last, its process directory.
pub(crate) fn unpublish(file: &PathBuf) {
    let _ = std::fs::remove_file(file);
    if let Some(dir) = file.parent() {
        let _ = std::fs::remove_dir(dir); // only when empty
    }
}
