//! Test hooks that stop a capture at exact points, compiled in only with the cargo feature
//! `fault-injection` (the binaries users build have none of this and read no variable).
//! With it, `RETRACE_FAULT_PAUSE` (the variable the restore's hooks read too, see
//! `restore::fault`) may name, besides the restore's points:
//!
//! - `listed:<N>:<file>`: the walk has just listed its N-th directory (the root is the first);
//! - `read:<N>:<file>`: the capture is about to read its N-th file or symlink;
//! - `stored:<N>:<file>`: an import (`retrace import`, `unbundle`) has just written its N-th
//!   batch of objects, before its session is recorded.
//!
//! At that point the process creates `<file>` and waits until it is removed, so that a test
//! can change the workspace at that exact moment. Tests run such captures with
//! `RAYON_NUM_THREADS=1`, which makes the points exact. Counts are per process.

/// A point of a capture where a hook can stop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The walk listed a directory.
    Listed,
    /// The capture is about to read a file or symlink.
    Read,
    /// An import wrote a batch of objects.
    Stored,
}

#[cfg(feature = "fault-injection")]
mod hooks {
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::Point;

    static PAUSES: OnceLock<Vec<(Point, usize, PathBuf)>> = OnceLock::new();
    static LISTED: AtomicUsize = AtomicUsize::new(0);
    static READ: AtomicUsize = AtomicUsize::new(0);
    static STORED: AtomicUsize = AtomicUsize::new(0);

    pub fn reached(point: Point) {
        let pauses = PAUSES.get_or_init(|| {
            let var = std::env::var("RETRACE_FAULT_PAUSE").unwrap_or_default();
            var.split(',')
                .filter_map(|spec| {
                    let mut it = spec.splitn(3, ':');
                    let point = match it.next()? {
                        "listed" => Point::Listed,
                        "read" => Point::Read,
                        "stored" => Point::Stored,
                        _ => return None,
                    };
                    let n = it.next()?.parse().ok()?;
                    Some((point, n, PathBuf::from(it.next()?)))
                })
                .collect()
        });
        if pauses.is_empty() {
            return;
        }
        let counter = match point {
            Point::Listed => &LISTED,
            Point::Read => &READ,
            Point::Stored => &STORED,
        };
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        for (_, _, file) in pauses.iter().filter(|(p, at, _)| *p == point && *at == n) {
            hold(file);
        }
    }

    pub fn hold(file: &Path) {
        if std::fs::write(file, b"paused").is_ok() {
            while file.exists() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Marks that the capture reached `point` once more, and pauses there when asked.
#[cfg(feature = "fault-injection")]
pub fn reached(point: Point) {
    hooks::reached(point);
}

/// Creates `file` and waits until a test removes it.
#[cfg(feature = "fault-injection")]
pub fn hold(file: &std::path::Path) {
    hooks::hold(file);
}

/// Does nothing: no hooks without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
#[inline]
pub fn reached(_point: Point) {}
