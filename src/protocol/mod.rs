//! Process interfaces for agents that do not link the crate: `retrace serve` (JSON-RPC over
//! stdio, specified in `docs/protocol.md`), MCP tools, and the hooks of Claude Code, Codex
//! CLI and Gemini CLI. The operations they share (open, a turn and its rounds and steps,
//! undo, redo, revert, checkpoint, navigate, restore of paths, status, log, diff, a file's
//! history, show, blame, shutdown) are defined once, as typed requests and responses, in
//! [`ops`].

pub mod agents;
pub mod hooks;
pub mod install;
pub mod mcp;
pub mod ops;
pub mod prompts;
pub mod serve;
pub mod wrap;
