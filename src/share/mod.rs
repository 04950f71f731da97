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
