//! Process interfaces for agents that do not link the crate: `retrace serve` (JSON-RPC over
//! stdio, specified in `docs/protocol.md`) and Claude Code's hooks.

pub mod claude_code;
pub mod mcp;
pub mod serve;
