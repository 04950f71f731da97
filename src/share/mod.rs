//! Sharing a session beyond this machine: its turns exported as git commits on a side ref
//! and imported back from them ([`git`]), or packed into one self-contained bundle file
//! ([`bundle`]). Both carry a [`image::SessionImage`] (the session's records) and the
//! objects its snapshots hold; both import through [`image::install`], which stores the
//! objects first ([`sink::ObjectSink`]) and then writes the session's records in one
//! transaction. `docs/sharing.md` says what each carries and what it leaves behind.

pub mod bundle;
pub mod git;
pub mod image;
pub mod sink;

pub use bundle::Bundled;
pub use git::export::Exported;
pub use image::Imported;

use crate::error::{Error, ShareError};

/// Runs `f` on a thread with a stack deep enough for the deepest tree an import or export
/// walks ([`MAX_DEPTH`] levels, each a frame of a recursive walk).
///
/// # Errors
/// `f`'s; [`ShareError::Io`] when the thread cannot be started.
pub fn on_big_stack<T: Send>(
    f: impl FnOnce() -> Result<T, Error> + Send,
) -> Result<T, Error> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("retrace-share".into())
            .stack_size(256 << 20)
            .spawn_scoped(s, f)
            .map_err(|source| ShareError::Io {
                path: "(a thread for the walk)".into(),
                source,
            })?;
        handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Deepest directory nesting an import accepts (git's own limit, `core.maxTreeDepth`).
pub const MAX_DEPTH: usize = 4096;
