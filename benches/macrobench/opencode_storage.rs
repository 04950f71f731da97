//! `cargo bench --bench macrobench -- --profile opencode [--files N] [--turns N] [--dir PATH]`:
//! the same turns through the real OpenCode CLI twice, once with its own snapshots (a shadow
//! git repository under `$XDG_DATA_HOME/opencode/snapshot/`) and once with retrace's plugin
//! (`retrace install opencode`: snapshots off, retrace's store instead), and the bytes each
//! keeps afterwards, side by side.
//!
//! The workspace is the macro benchmark's (20k files by default), committed to a git
//! repository of its own as a user's project is (OpenCode snapshots only inside git
//! repositories). Each turn is one `opencode run` whose model (a fake OpenAI-compatible server
//! on 127.0.0.1) answers with one `bash` tool call that makes the benchmark's turn change (25
//! files: 10 modified, 10 added, 5 deleted) by running this benchmark binary with
//! `--apply-turn`. Needs `tests/e2e/install-clients.sh` to have installed OpenCode.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// Its `requests` are not read here.
#[allow(dead_code)]
#[path = "../../tests/common/fake_http.rs"]
mod fake_http;

fn opencode_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/e2e/opencode/node_modules/opencode-ai/bin/opencode.exe")
}

/// The fake model: a `bash` call running `turn_command(n)` for a prompt `TURN n`, a final
/// text after the tool result, a title for the title request.
fn answer(request: &Value, turn_command: &(dyn Fn(u64) -> String + Send + Sync)) -> String {
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let text = fake_http::text_of(&last["content"]);
    let turn = (last["role"] == "user" && request.get("tools").is_some())
        .then(|| text.split("TURN ").nth(1))
        .flatten()
        // `opencode run` quotes the prompt: `"TURN 1"`.
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|n| n.parse::<u64>().ok());
    match turn {
        Some(n) => {
            let args = json!({"command": turn_command(n), "description": "Make the turn's change"});
            let id = format!("call_{n}");
            fake_http::chat_sse(&request["model"], Some(("bash", &args, &id)), "")
        }
        None => fake_http::chat_sse(&request["model"], None, "Done."),
    }
}

/// Bytes of disk the files under `p` use.
fn size(p: &Path) -> u64 {
    super::dir_size(p)
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

struct Run {
    /// Wall time of each turn's whole `opencode run`.
    times: Vec<Duration>,
    /// What the snapshots take: OpenCode's snapshot directory, or retrace's home.
    kept: u64,
    /// OpenCode's snapshot directory (should be empty with retrace).
    opencode_snapshots: u64,
    /// The project's own `.git` (whose objects OpenCode's snapshot repository borrows
    /// through `objects/info/alternates`).
    project_git: u64,
}

fn run(base: &Path, files: usize, turns: u64, with_retrace: bool, port: u16) -> Run {
    let name = if with_retrace { "retrace" } else { "opencode" };
    let dir = base.join(name);
    let root = dir.join("ws");
    let home = dir.join("home");
    let retrace_home = dir.join("retrace-home");
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{name}: generating {files} files");
    super::generate(&root, files);
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&root)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b")
            .output()
            .expect("git runs");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "base"]);
    let provider = json!({"npm": "@ai-sdk/openai-compatible", "name": "Fake",
        "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "dummy"},
        "models": {"fake-model": {"name": "Fake", "tool_call": true}}});
    let config = json!({"model": "fake/fake-model", "small_model": "fake/fake-model",
        "autoupdate": false, "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"},
        "provider": {"fake": provider}});
    std::fs::write(root.join("opencode.json"), config.to_string()).unwrap();
    let retrace = PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    let env = |c: &mut Command| {
        c.current_dir(&root)
            .env("PWD", &root)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("RETRACE_HOME", &retrace_home)
            .env("RETRACE_BIN", &retrace);
    };
    if with_retrace {
        let mut c = Command::new(&retrace);
        env(&mut c);
        let o = c.args(["install", "opencode"]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let mut times = Vec::new();
    for n in 1..=turns {
        let mut c = Command::new(opencode_bin());
        env(&mut c);
        c.arg("run");
        if n > 1 {
            c.arg("--continue");
        }
        c.arg(format!("TURN {n}"));
        let t = Instant::now();
        let o = c.output().unwrap();
        times.push(t.elapsed());
        assert!(
            o.status.success(),
            "opencode run: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("{name}: turn {n} took {:.1?}", times.last().unwrap());
        if n == 1 {
            eprintln!("{}", String::from_utf8_lossy(&o.stdout));
        }
    }
    let snapshots = home.join(".local/share/opencode/snapshot");
    let opencode_snapshots = size(&snapshots);
    Run {
        kept: if with_retrace {
            size(&retrace_home)
        } else {
            opencode_snapshots
        },
        times,
        opencode_snapshots,
        project_git: size(&root.join(".git")),
    }
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let files: usize = arg("--files")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let turns: u64 = arg("--turns").and_then(|v| v.parse().ok()).unwrap_or(20);
    let base = arg("--dir").map_or_else(
        || std::env::temp_dir().join("retrace-bench-opencode"),
        PathBuf::from,
    );
    assert!(
        opencode_bin().exists(),
        "OpenCode is not installed: run tests/e2e/install-clients.sh"
    );
    let exe = std::env::current_exe().unwrap();
    let command = Arc::new(move |n: u64, root: &Path| {
        format!(
            "{} --apply-turn {n} --files {files} --dir {}",
            exe.display(),
            root.display()
        )
    });
    let mut results = Vec::new();
    for with_retrace in [false, true] {
        let name = if with_retrace { "retrace" } else { "opencode" };
        let root = base.join(name).join("ws");
        let make = Arc::clone(&command);
        let model = fake_http::FakeHttp::start(move |request| answer(request, &|n| make(n, &root)));
        results.push(run(&base, files, turns, with_retrace, model.port));
    }
    let median = |r: &Run| {
        let mut t = r.times.clone();
        t.sort();
        t[t.len() / 2]
    };
    let (oc, rt) = (&results[0], &results[1]);
    println!(
        "\nOpenCode 1.18 on the macro workspace ({files} files), {turns} turns of 25 changed files"
    );
    println!("| | OpenCode's snapshots | retrace plugin (snapshots off) | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| bytes kept after {turns} turns | {} | {} | {:.2}× |",
        mb(oc.kept),
        mb(rt.kept),
        oc.kept as f64 / rt.kept.max(1) as f64
    );
    println!(
        "| OpenCode snapshot directory | {} | {} | |",
        mb(oc.opencode_snapshots),
        mb(rt.opencode_snapshots)
    );
    println!(
        "| the project's own .git (OpenCode's snapshots borrow its objects) | {} | {} | |",
        mb(oc.project_git),
        mb(rt.project_git)
    );
    println!(
        "| first turn, whole `opencode run` | {:.1?} | {:.1?} | |",
        oc.times[0], rt.times[0]
    );
    println!(
        "| median turn, whole `opencode run` | {:.1?} | {:.1?} | |",
        median(oc),
        median(rt)
    );
}

/// `--apply-turn N --files F --dir ROOT`: the benchmark's turn N, as the model's shell
/// command runs it.
pub fn apply_turn(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let n: u64 = arg("--apply-turn").and_then(|v| v.parse().ok()).unwrap();
    let files: usize = arg("--files").and_then(|v| v.parse().ok()).unwrap();
    let root = PathBuf::from(arg("--dir").unwrap());
    super::turn(&root, files, n);
}
