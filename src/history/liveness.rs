//! "In use" markers: while a process has a session open, the file
//! `<store dir>/active/<session key>` is refreshed every ten minutes; maintenance in any
//! process treats a session whose marker is younger than a day as in use and never expires
//! or removes it.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use super::Runtime;
use super::db::SessionKey;

/// How often an open session's marker is refreshed.
pub const REFRESH: Duration = Duration::from_mins(10);
/// How long a marker counts as "in use" after its last refresh.
pub const FRESH_MS: u64 = 24 * 3_600_000;

/// Markers this process refreshes, while their session's runtime lives.
static OPEN: Mutex<Vec<(PathBuf, Weak<Runtime>)>> = Mutex::new(Vec::new());
static REFRESHER: Once = Once::new();

/// The marker file of a session in a store directory.
#[must_use]
pub fn marker(store_dir: &Path, key: &SessionKey) -> PathBuf {
    store_dir
        .join("active")
        .join(&crate::object::ObjectId(key.0).to_hex()[..32])
}

fn touch(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        let _ = crate::home::create_private_dir(dir);
    }
    // Rewritten each time: the modification time is the heartbeat.
    let _ = std::fs::OpenOptions::new()
        .mode(0o600)
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| {
            use std::io::Write;
            write!(f, "{}", std::process::id())
        });
}

/// Marks the session in use now, and keeps refreshing the mark while `rt` lives.
pub fn open(store_dir: &Path, key: &SessionKey, rt: &std::sync::Arc<Runtime>) {
    let path = marker(store_dir, key);
    touch(&path);
    OPEN.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((path, std::sync::Arc::downgrade(rt)));
    REFRESHER.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("retrace-liveness".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(REFRESH);
                    let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
                    open.retain(|(_, rt)| rt.strong_count() > 0);
                    for (path, _) in open.iter() {
                        touch(path);
                    }
                }
            });
    });
}

/// Whether the session's marker was refreshed within [`FRESH_MS`] of `now_ms`.
#[must_use]
pub fn in_use(store_dir: &Path, key: &SessionKey, now_ms: u64) -> bool {
    std::fs::metadata(marker(store_dir, key))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .is_some_and(|t| now_ms.saturating_sub(t) < FRESH_MS && t <= now_ms + FRESH_MS)
}
