//! The integration tests, compiled as one test binary (as jj does): one module per scenario
//! file beside this one, and the shared helpers of `common/` compiled once.
//! `cargo test --release --features fault-injection --test main hostile::` runs one file's
//! tests.

mod common;

mod aider_e2e;
mod background;
mod big_restore;
mod claude_code_e2e;
mod cli_session;
mod codex_e2e;
mod compat;
mod copilot_e2e;
mod corruption;
mod crash;
mod damaged;
mod deltas;
mod demo;
mod droid_e2e;
mod dump;
mod first_hour;
mod format_api;
mod format_reader;
mod full_disk;
mod fuzz_corpus;
mod gc;
mod gemini_e2e;
mod history;
mod history_model;
mod hooks;
mod hostile;
mod hostile_capture;
mod ignore;
mod incremental;
mod inspect;
mod install;
mod installer;
mod json_schema;
mod leases;
mod ledger_retention;
mod listing_model;
mod local_history;
mod mcp;
mod memory;
mod nested_capture;
mod npm_registry;
mod opencode_e2e;
mod ownership;
mod ownership_model;
mod patch;
mod pi_e2e;
mod policy;
mod processes;
mod property;
mod qwen_e2e;
mod race;
mod racy;
mod readme;
mod restore;
mod retention;
mod revert_model;
mod runtime_state;
mod secrets;
mod serve;
mod sessions;
mod share;
mod surgical;
mod surgical_hostile;
mod terminal_escapes;
#[cfg(feature = "ui")]
mod ui;
mod unstable;
mod vanish;
mod verify;
mod watch;
mod wrap;

/// With `autotests = false`, a file of `tests/` that no `mod` line above names is never
/// compiled: each must be named.
#[test]
fn every_file_of_tests_is_a_module_here() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|x| x == "rs") && stem != "main" {
            assert!(
                main.lines().any(|l| l == format!("mod {stem};")),
                "tests/{stem}.rs is not compiled: add `mod {stem};` to tests/main.rs"
            );
        }
    }
}
