//! Progress reporting hooks for long captures and restores; binaries draw bars with them.

/// Receives progress of a long operation. Implementations must be cheap and thread-safe.
pub trait Progress: Sync {
    /// A phase begins; `total` units of work are expected.
    fn start(&self, phase: &str, total: u64);
    /// `n` more units are done.
    fn advance(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
