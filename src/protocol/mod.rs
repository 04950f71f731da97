//! Process interfaces for agents that do not link the crate: `retrace serve` (JSON-RPC over
//! stdio). `docs/protocol.md` specifies it.

pub mod serve;
