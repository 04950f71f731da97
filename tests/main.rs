//! The integration tests, compiled as one test binary (as jj does): one module per scenario
//! file beside this one, and the shared helpers of `common/` compiled once.
//! `cargo test --release --features fault-injection --test main hostile::` runs one file's
//! tests.

mod common;

mod claude_code_e2e;
mod cli_session;
mod codex_e2e;
mod compat;
mod corruption;
mod crash;
mod damaged;
mod full_disk;
mod fuzz_corpus;
mod gc;
mod gemini_e2e;
mod history;
mod history_model;
mod hooks;
mod hostile;
mod ignore;
mod incremental;
mod install;
mod leases;
mod mcp;
mod memory;
mod pi_e2e;
mod policy;
mod processes;
mod property;
mod race;
mod racy;
mod restore;
mod retention;
mod runtime_state;
mod secrets;
mod serve;
mod unstable;
mod vanish;
