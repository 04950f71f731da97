//! The installers, run as the real `retrace install|uninstall <agent>`: the settings file
//! keeps its mode, owner and formatting, a read-only one is refused, and the hook command
//! survives any binary path (it is run through a real `sh`). `hooks.rs` covers the merges.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{Env, RETRACE, is_root, output_with_input, stderr, stdout, succeeded};
use serde_json::{Value, json};

fn run_in(env: &Env, bin: &str, args: &[&str]) -> Output {
    let root = env.root().display().to_string();
    let mut all = vec!["-C", root.as_str()];
    all.extend_from_slice(args);
    env.run(bin, &all)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every hook command in the settings file, event by event.
fn commands(path: &Path) -> Vec<(String, String)> {
    let v = read_json(path);
    let mut out = Vec::new();
    for (event, groups) in v["hooks"].as_object().into_iter().flatten() {
        for group in groups.as_array().into_iter().flatten() {
            for h in group["hooks"].as_array().into_iter().flatten() {
                if let Some(c) = h["command"].as_str() {
                    out.push((event.clone(), c.to_string()));
                }
            }
        }
    }
    out
}

fn settings_of(agent: &str) -> &'static str {
    match agent {
        "codex" => ".codex/hooks.json",
        "gemini" => ".gemini/settings.json",
        _ => ".claude/settings.json",
    }
}

fn events_of(agent: &str) -> &'static [&'static str] {
    match agent {
        "codex" => &["UserPromptSubmit", "Stop", "SessionStart"],
        "gemini" => &["BeforeAgent", "AfterAgent", "SessionStart", "SessionEnd"],
        _ => &["UserPromptSubmit", "Stop", "SessionStart", "SessionEnd"],
    }
}

// ---- item 11: mode, owner, links, read-only files ----

#[test]
fn install_and_uninstall_keep_the_settings_files_mode() {
    let env = Env::new();
    let settings = env.path(".claude/settings.json");
    env.write(
        ".claude/settings.json",
        "{\n  \"apiKey\": \"sk-secret\"\n}\n",
    );
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    assert!(!commands(&settings).is_empty());
    assert_eq!(mode(&settings), 0o600, "install changed the mode");
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    assert_eq!(mode(&settings), 0o600, "uninstall changed the mode");
    assert_eq!(
        env.read(".claude/settings.json"),
        "{\n  \"apiKey\": \"sk-secret\"\n}\n"
    );
    // Nothing is left beside it.
    let names: Vec<_> = std::fs::read_dir(env.path(".claude"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["settings.json"], "{names:?}");
}

#[test]
fn install_as_root_keeps_the_settings_files_owner() {
    if !is_root() {
        eprintln!("skipped: needs root to give the file another owner");
        return;
    }
    let env = Env::new();
    let settings = env.path(".gemini/settings.json");
    env.write(".gemini/settings.json", "{\"theme\": \"dark\"}\n");
    std::os::unix::fs::chown(&settings, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o640)).unwrap();
    for action in ["install", "uninstall"] {
        succeeded(run_in(&env, RETRACE, &[action, "gemini"]), action);
        let m = std::fs::metadata(&settings).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (65534, 65534),
            "{action} changed the owner"
        );
        assert_eq!(m.mode() & 0o7777, 0o640, "{action} changed the mode");
    }
    assert_eq!(env.read(".gemini/settings.json"), "{\"theme\": \"dark\"}\n");
}

#[test]
fn a_read_only_settings_file_is_refused_and_nothing_is_written() {
    let env = Env::new();
    // Directly, and through a link to a read-only file elsewhere.
    let elsewhere = env.path("dotfiles/codex-hooks.json");
    env.write("dotfiles/codex-hooks.json", "{}\n");
    std::fs::create_dir_all(env.path(".codex")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, env.path(".codex/hooks.json")).unwrap();
    env.write(".claude/settings.json", "{\n    \"model\": \"opus\"\n}\n");
    for (agent, file) in [
        ("claude-code", env.path(".claude/settings.json")),
        ("codex", elsewhere),
    ] {
        let before = std::fs::read(&file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        let o = run_in(&env, RETRACE, &["install", agent]);
        assert!(!o.status.success(), "{agent}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&file.display().to_string()) && err.contains("writable"),
            "{agent}: {err}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before, "{agent}");
        let m = std::fs::metadata(&file).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o444, "{agent}");
    }
    assert!(
        !env.path(".claude/commands").exists(),
        "command files were written"
    );
    assert!(
        env.path(".codex/hooks.json")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Made writable, it installs; made read-only again, uninstall is refused too.
    let settings = env.path(".claude/settings.json");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).unwrap();
    succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    let installed = std::fs::read(&settings).unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = run_in(&env, RETRACE, &["uninstall", "claude-code"]);
    assert!(
        !o.status.success() && stderr(&o).contains("writable"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&settings).unwrap(), installed);
}

// ---- item 12: the hook command, for any binary path ----

/// The retrace binary at a path with a space, quotes, `$`, a backtick and a backslash: a
/// hard link (`current_exe` resolves symlinks; a copy, still open for writing while another
/// test forks, could not be run: ETXTBSY).
fn odd_binary() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin_dir = dir.path().join("it's a \"q\" $HOME `x` \\n");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("retrace");
    std::fs::hard_link(RETRACE, &bin).unwrap();
    (dir, bin)
}

fn sh_with_payload(env: &Env, command: &str, payload: &Value) -> Output {
    env.run_with_input("sh", &["-c", command], payload.to_string().as_bytes())
}

#[test]
fn a_hook_command_from_a_binary_path_with_quotes_runs_in_sh_and_uninstalls() {
    let env = Env::new();
    let (_keep, bin) = odd_binary();
    let bin_s = bin.to_str().unwrap();
    let theirs = "{\n  \"model\": \"opus\"\n}\n";
    env.write(".claude/settings.json", theirs);
    succeeded(run_in(&env, bin_s, &["install", "claude-code"]), "install");
    let settings = env.path(".claude/settings.json");
    let cmds = commands(&settings);
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    for (event, command) in &cmds {
        let payload = json!({"session_id": "q1", "transcript_path": "/tmp/t.jsonl",
            "cwd": env.root(), "hook_event_name": event, "prompt": "hello",
            "source": "startup", "reason": "exit"});
        let o = sh_with_payload(&env, command, &payload);
        assert!(
            o.status.success(),
            "{event}: `{command}` failed in sh: {:?}\n{}",
            o.status,
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("not found") && !stderr(&o).contains("quote"),
            "{event}: {}",
            stderr(&o)
        );
    }
    // Installing again from the same path changes nothing.
    let o = succeeded(run_in(&env, bin_s, &["install", "claude-code"]), "again");
    assert!(stdout(&o).contains("nothing to change"), "{}", stdout(&o));
    // Another retrace binary recognises the entries as retrace's.
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    assert_eq!(env.read(".claude/settings.json"), theirs);
}

#[test]
fn retraces_entries_are_recognised_and_replaced_however_the_path_is_quoted() {
    let spellings = [
        r#""/opt/my tools/retrace" hook claude-code"#,
        r"/opt/my\ tools/retrace hook claude-code",
        r"'/opt/it'\''s/retrace' hook claude-code",
        r#""/opt/a \"b\" \$c/retrace" hook claude-code"#,
    ];
    let user = "notify-send 'retrace done' hook claude-code-ish";
    let settings_with = |spellings: &[&str]| {
        let mut hooks = serde_json::Map::new();
        for (event, command) in events_of("claude-code").iter().zip(spellings) {
            hooks.insert(
                (*event).to_string(),
                json!([{"hooks": [{"type": "command", "command": user}]},
                       {"hooks": [{"type": "command", "command": command, "timeout": 60}]}]),
            );
        }
        serde_json::to_string_pretty(&json!({"hooks": hooks})).unwrap()
    };
    // Uninstall removes each spelling, and only those.
    let env = Env::new();
    env.write(".claude/settings.json", settings_with(&spellings));
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    let left = commands(&env.path(".claude/settings.json"));
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(left.iter().all(|(_, c)| c == user), "{left:?}");
    // A reinstall replaces each of them with the one current entry.
    let env = Env::new();
    env.write(".claude/settings.json", settings_with(&spellings));
    let o = succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    assert!(stdout(&o).contains("added hooks for"), "{}", stdout(&o));
    let now = commands(&env.path(".claude/settings.json"));
    for event in events_of("claude-code") {
        let of: Vec<_> = now.iter().filter(|(e, _)| e == event).collect();
        assert_eq!(of.len(), 2, "{event}: {of:?}");
        assert_eq!(of[0].1, user);
        assert!(of[1].1.ends_with("/retrace' hook claude-code"), "{of:?}");
    }
}

// ---- item 13: formatting ----

/// Files as users write them: retrace's install then uninstall gives back these bytes.
const CLAUDE_INPUTS: &[&str] = &[
    // 4-space indent, a number spelled 1.50, unsorted keys, a user hook on Stop.
    "{\n    \"model\": \"opus\",\n    \"temperature\": 1.50,\n    \"env\": {\"Z\": \"1\", \"A\": \"2\"},\n    \"hooks\": {\n        \"Stop\": [\n            {\n                \"hooks\": [\n                    {\n                        \"type\": \"command\",\n                        \"command\": \"notify-send done\"\n                    }\n                ]\n            }\n        ]\n    }\n}\n",
    // Tabs, an empty Stop list of the user's, no trailing newline.
    "{\n\t\"zeta\": 1.50,\n\t\"alpha\": true,\n\t\"hooks\": {\n\t\t\"Stop\": [],\n\t\t\"PreToolUse\": [\n\t\t\t{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"audit\"}]}\n\t\t]\n\t}\n}",
    // Compact, on one line.
    "{\"z\":1,\"a\":{\"b\":1.50},\"hooks\":{\"Stop\":[],\"UserPromptSubmit\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"log-prompt\"}]}]}}\n",
    // An empty hooks object of the user's, 2 spaces.
    "{\n  \"model\": \"sonnet\",\n  \"hooks\": {}\n}\n",
    // CRLF line ends.
    "{\r\n  \"b\": 2.0e1,\r\n  \"a\": [1, 2,   3]\r\n}\r\n",
    // Nothing but an empty object, and spacing inside it.
    "{}\n",
    "  {\n    \"x\" :  [ ]  }  \n",
];

fn assert_round_trip(agent: &str, input: &str) {
    let env = Env::new();
    let rel = settings_of(agent);
    let settings = env.path(rel);
    env.write(rel, input);
    let o = succeeded(run_in(&env, RETRACE, &["install", agent]), "install");
    let installed = env.read(rel);
    // Everything the user had is still there, spelled as it was.
    let before: Value = serde_json::from_str(input).unwrap();
    let after = read_json(&settings);
    for (k, v) in before.as_object().unwrap() {
        if k != "hooks" {
            assert_eq!(&after[k], v, "{agent} {input:?}: {installed}");
        }
    }
    if input.contains("1.50") {
        assert!(installed.contains("1.50"), "{installed}");
    }
    if input.trim_end().contains('\n') {
        let first = |s: &str| s.lines().next().unwrap_or("").to_string();
        assert_eq!(first(&installed), first(input), "{installed}");
    } else if input.trim() != "{}" {
        assert!(
            !installed.trim_end().contains('\n'),
            "one line: {installed}"
        );
    }
    // The added lines are indented as the file is.
    if input.contains("\n\t") {
        assert!(
            installed.lines().all(|l| !l.starts_with(' ')),
            "spaces in a tab-indented file: {installed}"
        );
    }
    if input.starts_with("{\n    \"") {
        assert!(
            installed
                .lines()
                .all(|l| (l.len() - l.trim_start().len()) % 4 == 0),
            "not 4-space: {installed}"
        );
    }
    if input.contains("\r\n") {
        assert_eq!(
            installed.matches('\n').count(),
            installed.matches("\r\n").count(),
            "{installed:?}"
        );
    }
    let cmds = commands(&settings);
    for event in events_of(agent) {
        assert!(
            cmds.iter()
                .any(|(e, c)| e == event && c.ends_with(&format!("hook {agent}"))),
            "{agent} {event}: {installed}"
        );
    }
    assert!(stdout(&o).contains("added hooks"), "{}", stdout(&o));
    // The user's empty containers that install filled are remembered, privately.
    let record = env.home.path().join("installed.json");
    if let Ok(m) = std::fs::metadata(&record) {
        assert_eq!(m.mode() & 0o777, 0o600);
    }
    let o = succeeded(run_in(&env, RETRACE, &["install", agent]), "again");
    assert!(stdout(&o).contains("nothing to change"), "{}", stdout(&o));
    assert_eq!(env.read(rel), installed);
    succeeded(run_in(&env, RETRACE, &["uninstall", agent]), "uninstall");
    assert_eq!(
        env.read(rel),
        input,
        "{agent}: uninstall did not give the bytes back; installed:\n{installed}"
    );
    // What install remembered is forgotten.
    assert!(
        !record.exists(),
        "{}",
        std::fs::read_to_string(&record).unwrap()
    );
}

#[test]
fn install_then_uninstall_gives_back_the_users_bytes() {
    for input in CLAUDE_INPUTS {
        assert_round_trip("claude-code", input);
    }
    for input in [CLAUDE_INPUTS[0], CLAUDE_INPUTS[1], CLAUDE_INPUTS[2]] {
        assert_round_trip("codex", input);
    }
    let gemini = "{\n    \"theme\": \"dark\",\n    \"hooks\": {\n        \"AfterAgent\": [],\n        \"BeforeTool\": [{\"matcher\": \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint\"}]}]\n    },\n    \"ratio\": 1.50\n}\n";
    assert_round_trip("gemini", gemini);
}

#[test]
fn uninstall_removes_only_what_became_empty_because_of_it() {
    let env = Env::new();
    // Retrace's entries as an older installer wrote them, beside the user's own empty
    // list, empty group and a group holding a user hook next to retrace's.
    let text = "{\n    \"hooks\": {\n        \"Notification\": [],\n        \"Stop\": [\n            {\"hooks\": []},\n            {\"hooks\": [{\"type\": \"command\", \"command\": \"'/usr/bin/retrace' hook claude-code\", \"timeout\": 60}]}\n        ],\n        \"UserPromptSubmit\": [\n            {\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}, {\"type\": \"command\", \"command\": \"'/usr/bin/retrace' hook claude-code\"}]}\n        ],\n        \"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"retrace hook claude-code\"}]}]\n    },\n    \"version\": 1.50\n}\n";
    env.write(".claude/settings.json", text);
    let o = succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    assert!(stdout(&o).contains("removed hooks for"), "{}", stdout(&o));
    let expected = "{\n    \"hooks\": {\n        \"Notification\": [],\n        \"Stop\": [\n            {\"hooks\": []}\n        ],\n        \"UserPromptSubmit\": [\n            {\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}\n        ]\n    },\n    \"version\": 1.50\n}\n";
    assert_eq!(env.read(".claude/settings.json"), expected);
}

#[test]
fn installing_into_a_missing_or_empty_file_writes_two_space_json() {
    for existing in [None, Some(""), Some("\n  \n")] {
        let env = Env::new();
        let rel = ".claude/settings.json";
        if let Some(text) = existing {
            env.write(rel, text);
        }
        succeeded(
            run_in(&env, RETRACE, &["install", "claude-code"]),
            "install",
        );
        let text = env.read(rel);
        assert!(
            text.starts_with("{\n  \"hooks\": {\n    \"UserPromptSubmit\": [\n      {\n        \"hooks\": [\n          {\n"),
            "{text}"
        );
        assert!(text.ends_with("\n}\n"), "{text:?}");
        for line in text.lines() {
            let indent = line.len() - line.trim_start().len();
            assert!(indent % 2 == 0 && !line.starts_with('\t'), "{text}");
        }
        assert_eq!(commands(&env.path(rel)).len(), 6, "{text}");
    }
}

/// `install` from a subfolder of a repository writes into the workspace root, as every
/// other command resolves it, and prints the path it wrote; `uninstall` from there finds it.
#[test]
fn install_from_a_subfolder_writes_at_the_workspace_root() {
    let env = Env::new();
    std::fs::create_dir_all(env.path(".git")).unwrap();
    env.write("src/lib.rs", "fn f() {}");
    let sub = env.path("src").display().to_string();
    let o = succeeded(
        env.run(RETRACE, &["-C", sub.as_str(), "install", "gemini"]),
        "install",
    );
    let settings = env.path(".gemini/settings.json");
    assert!(settings.exists(), "{}", stdout(&o));
    assert!(
        !env.path("src/.gemini").exists(),
        "wrote into the subfolder"
    );
    let root = env.root().canonicalize().unwrap();
    assert!(
        stdout(&o).contains(&root.join(".gemini/settings.json").display().to_string()),
        "the path written is not printed: {}",
        stdout(&o)
    );
    succeeded(
        env.run(RETRACE, &["-C", sub.as_str(), "uninstall", "gemini"]),
        "uninstall",
    );
    assert!(!settings.exists() || commands(&settings).is_empty());
}

/// An unknown agent is a usage error (exit 2) naming the supported ones; `install pi` and
/// `install omp` say how to install the Pi extension and write nothing.
#[test]
fn unknown_agents_are_usage_errors_and_pi_gets_directions() {
    let env = Env::new();
    let o = run_in(&env, RETRACE, &["install", "vim"]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("claude-code"), "{}", stderr(&o));
    for agent in ["pi", "omp"] {
        let o = run_in(&env, RETRACE, &["install", agent]);
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("pi install "), "{}", stdout(&o));
        assert!(stdout(&o).contains("omp plugin install "), "{}", stdout(&o));
    }
    let names: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "something was written: {names:?}");
}

// ---- issue 15: the first hour ----

/// `retrace ARGS` in the project with `PATH` set to `path`, and no agent override of the
/// user directories (so `--user` writes under the isolated `HOME`).
fn run_with_path(env: &Env, bin: &str, path: &OsStr, args: &[&str]) -> Output {
    let root = env.root().display().to_string();
    let mut all = vec!["-C", root.as_str()];
    all.extend_from_slice(args);
    env.command(bin, &all)
        .env("PATH", path)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .unwrap()
}

/// A directory holding `retrace` as a package manager puts one on PATH (a symlink to the
/// built binary), and the PATH that finds it first.
fn path_with_retrace() -> (tempfile::TempDir, OsString) {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(RETRACE, dir.path().join("retrace")).unwrap();
    let path = std::env::join_paths([dir.path(), Path::new("/usr/bin"), Path::new("/bin")]);
    (dir, path.unwrap())
}

fn path_without_retrace() -> OsString {
    OsString::from("/usr/bin:/bin")
}

#[test]
fn a_project_install_names_plain_retrace_when_path_finds_this_binary() {
    let env = Env::new();
    let (_keep, path) = path_with_retrace();
    let theirs = "{\n  \"model\": \"opus\"\n}\n";
    env.write(".claude/settings.json", theirs);
    let settings = env.path(".claude/settings.json");
    succeeded(
        run_with_path(&env, RETRACE, &path, &["install", "claude-code"]),
        "install",
    );
    let cmds = commands(&settings);
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    assert!(
        cmds.iter().all(|(_, c)| c == "retrace hook claude-code"),
        "{cmds:?}"
    );
    // The committed command runs through sh on that PATH.
    let payload = json!({"session_id": "p1", "cwd": env.root(),
        "hook_event_name": "SessionStart", "source": "startup"});
    let mut sh = env.command("sh", &["-c", "retrace hook claude-code"]);
    sh.env("PATH", &path);
    let o = output_with_input(&mut sh, payload.to_string().as_bytes());
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    // Without retrace on PATH the path goes in, replacing the plain entries; and back.
    let o = succeeded(
        run_with_path(
            &env,
            RETRACE,
            &path_without_retrace(),
            &["install", "claude-code"],
        ),
        "install without PATH",
    );
    assert!(stdout(&o).contains("added hooks for"), "{}", stdout(&o));
    let exe = Path::new(RETRACE).canonicalize().unwrap();
    let quoted = format!("'{}' hook claude-code", exe.display());
    let cmds = commands(&settings);
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    assert!(cmds.iter().all(|(_, c)| *c == quoted), "{cmds:?}");
    succeeded(
        run_with_path(&env, RETRACE, &path, &["install", "claude-code"]),
        "install again",
    );
    let cmds = commands(&settings);
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    assert!(
        cmds.iter().all(|(_, c)| c == "retrace hook claude-code"),
        "{cmds:?}"
    );
    succeeded(
        run_with_path(&env, RETRACE, &path, &["uninstall", "claude-code"]),
        "uninstall",
    );
    assert_eq!(env.read(".claude/settings.json"), theirs);
}

#[test]
fn the_binarys_path_goes_in_for_user_installs_and_when_path_finds_another_retrace() {
    let (_keep, path) = path_with_retrace();
    let exe = Path::new(RETRACE).canonicalize().unwrap();
    let quoted = format!("'{}' hook gemini", exe.display());
    // --user: the user's settings are not committed, and the agent's PATH may differ.
    let env = Env::new();
    succeeded(
        run_with_path(&env, RETRACE, &path, &["install", "gemini", "--user"]),
        "install --user",
    );
    let cmds = commands(&env.home.path().join(".gemini/settings.json"));
    assert!(
        !cmds.is_empty() && cmds.iter().all(|(_, c)| *c == quoted),
        "{cmds:?}"
    );
    // Another program called retrace comes first on PATH.
    let env = Env::new();
    let other = tempfile::tempdir().unwrap();
    let fake = other.path().join("retrace");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut dirs = vec![other.path().to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(dirs).unwrap();
    succeeded(
        run_with_path(&env, RETRACE, &path, &["install", "gemini"]),
        "install",
    );
    let cmds = commands(&env.path(".gemini/settings.json"));
    assert!(
        !cmds.is_empty() && cmds.iter().all(|(_, c)| *c == quoted),
        "{cmds:?}"
    );
    // A hard link of the same binary is the same binary.
    let env = Env::new();
    let (_keep, bin) = odd_binary();
    let (_keep2, path) = path_with_retrace();
    succeeded(
        run_with_path(&env, bin.to_str().unwrap(), &path, &["install", "codex"]),
        "install from a hard link",
    );
    let cmds = commands(&env.path(".codex/hooks.json"));
    assert!(
        !cmds.is_empty() && cmds.iter().all(|(_, c)| c == "retrace hook codex"),
        "{cmds:?}"
    );
}

/// Every path under `root` (the root itself left out): its mode, and a file's bytes or a
/// link's target.
fn project_tree(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let meta = e.path().symlink_metadata().unwrap();
        let bytes = if meta.file_type().is_symlink() {
            std::fs::read_link(e.path())
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else if meta.is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
        out.insert(rel, (meta.mode(), bytes));
    }
    out
}

fn config_dir_of(agent: &str) -> &'static str {
    match agent {
        "codex" => ".codex",
        "gemini" => ".gemini",
        _ => ".claude",
    }
}

/// The projects of the round trip: none of the agent's configuration; a settings file of
/// the user's (tabs, keys out of order, a hook of theirs) beside a `commands/undo` of their
/// own, in a 0750 directory; and one indented by four spaces.
fn round_trip_projects(agent: &str) -> Vec<(&'static str, Env)> {
    let dir = config_dir_of(agent);
    let event = if agent == "gemini" {
        "AfterAgent"
    } else {
        "Stop"
    };
    let none = Env::new();
    none.write("src/main.rs", "fn main() {}\n");
    let tabs = Env::new();
    tabs.write("src/main.rs", "fn main() {}\n");
    tabs.write(
        settings_of(agent),
        format!(
            "{{\n\t\"zeta\": 1.50,\n\t\"model\": \"opus\",\n\t\"env\": {{\"Z\": \"1\", \"A\": \"2\"}},\n\t\"hooks\": {{\n\t\t\"{event}\": [\n\t\t\t{{\"hooks\": [{{\"type\": \"command\", \"command\": \"notify-send done\"}}]}}\n\t\t]\n\t}}\n}}\n"
        ),
    );
    let own = if agent == "gemini" {
        "undo.toml"
    } else {
        "undo.md"
    };
    tabs.write(&format!("{dir}/commands/{own}"), "my own undo\n");
    std::fs::set_permissions(
        tabs.path(settings_of(agent)),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::set_permissions(tabs.path(dir), std::fs::Permissions::from_mode(0o750)).unwrap();
    let spaces = Env::new();
    spaces.write(
        settings_of(agent),
        "{\n    \"b\": true,\n    \"a\": [1, 2],\n    \"hooks\": {}\n}",
    );
    vec![("no config", none), ("tabs", tabs), ("four spaces", spaces)]
}

#[test]
fn install_then_uninstall_gives_back_the_whole_project_tree() {
    for agent in ["claude-code", "codex", "gemini"] {
        for (case, env) in round_trip_projects(agent) {
            let before = project_tree(env.root());
            for installs in [1, 2] {
                for _ in 0..installs {
                    succeeded(run_in(&env, RETRACE, &["install", agent]), "install");
                }
                assert!(
                    !commands(&env.path(settings_of(agent))).is_empty(),
                    "{agent}, {case}"
                );
                let o = succeeded(run_in(&env, RETRACE, &["uninstall", agent]), "uninstall");
                assert_eq!(
                    project_tree(env.root()),
                    before,
                    "{agent}, {case}, installed {installs}x: {}",
                    stdout(&o)
                );
            }
        }
    }
}

#[test]
fn uninstall_keeps_the_directories_and_files_the_user_had() {
    // The user's empty .claude/commands/ stays, and so does their own `{}` settings file.
    let env = Env::new();
    std::fs::create_dir_all(env.path(".claude/commands")).unwrap();
    env.write(".claude/settings.json", "{}");
    succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    assert!(
        env.path(".claude/commands").is_dir(),
        "the user's directory went"
    );
    assert_eq!(env.read(".claude/settings.json"), "{}");
    // A blank settings file of the user's gets its blank text back.
    let env = Env::new();
    env.write(".codex/hooks.json", "\n  \n");
    succeeded(run_in(&env, RETRACE, &["install", "codex"]), "install");
    succeeded(run_in(&env, RETRACE, &["uninstall", "codex"]), "uninstall");
    assert_eq!(env.read(".codex/hooks.json"), "\n  \n");
    // A file install created stays once the user added to it, and so does its directory.
    let env = Env::new();
    succeeded(run_in(&env, RETRACE, &["install", "gemini"]), "install");
    let settings = env.path(".gemini/settings.json");
    let mut v = read_json(&settings);
    v["theme"] = json!("dark");
    std::fs::write(&settings, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    env.write(".gemini/commands/mine.toml", "prompt = \"hi\"\n");
    succeeded(run_in(&env, RETRACE, &["uninstall", "gemini"]), "uninstall");
    assert_eq!(read_json(&settings), json!({"theme": "dark"}));
    assert_eq!(env.read(".gemini/commands/mine.toml"), "prompt = \"hi\"\n");
    assert!(!env.path(".gemini/commands/undo.toml").exists());
}

#[test]
fn uninstall_says_changed_only_of_command_files_retrace_installed() {
    let env = Env::new();
    env.write(".claude/commands/undo.md", "my own undo\n");
    let o = succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    assert!(
        stdout(&o).contains("undo.md: left alone: it exists and is not retrace's"),
        "{}",
        stdout(&o)
    );
    env.write(".claude/commands/redo.md", "retrace's redo, edited\n");
    let o = succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    let out = stdout(&o);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.contains(&format!("commands/{name}.md:")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("undo").ends_with("left alone: not retrace's"), "{out}");
    assert!(
        line("redo").ends_with("left alone: changed since it was installed"),
        "{out}"
    );
    assert!(line("checkpoint").ends_with("removed"), "{out}");
    assert_eq!(env.read(".claude/commands/undo.md"), "my own undo\n");
}

#[test]
fn every_install_ends_with_what_to_do_next() {
    for agent in ["claude-code", "gemini", "codex"] {
        let env = Env::new();
        for round in ["first", "again"] {
            let o = succeeded(run_in(&env, RETRACE, &["install", agent]), round);
            let out = stdout(&o);
            let last = out.lines().last().unwrap_or_default();
            assert!(last.contains("new session"), "{agent} {round}: {out}");
            if agent == "codex" {
                assert!(last.contains("/hooks"), "the trust step: {out}");
                assert!(last.contains("`retrace undo`"), "{agent} {round}: {out}");
            } else {
                assert!(
                    last.contains("type /undo") && last.contains("/redo"),
                    "{agent} {round}: {out}"
                );
            }
        }
        let o = succeeded(run_in(&env, RETRACE, &["uninstall", agent]), "uninstall");
        assert!(!stdout(&o).contains("new session"), "{}", stdout(&o));
    }
}

// ---- issue 37: a binary not named `retrace` ----

/// retrace installed under another name (`rt`, a hard link of it): its entries are
/// retrace's because install recorded their program, so uninstalling with `rt` or with
/// `retrace` takes them out and a reinstall from either replaces them. Without the record
/// (another `RETRACE_HOME`, say) uninstall cannot tell, and says what it left.
#[test]
fn entries_of_a_binary_named_otherwise_are_recognised_by_what_install_recorded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rt = dir.path().join("rt");
    std::fs::hard_link(RETRACE, &rt).unwrap();
    let rt = rt.to_str().unwrap();
    let path = path_without_retrace();
    let run = |env: &Env, bin: &str, args: &[&str]| {
        succeeded(run_with_path(env, bin, &path, args), &args.join(" "))
    };
    let theirs = "{\n  \"model\": \"opus\"\n}\n";
    let all = "UserPromptSubmit, Stop, SessionStart, SessionEnd, PreToolUse, PostToolUse";
    for uninstaller in [rt, RETRACE] {
        let env = Env::new();
        env.write(".claude/settings.json", theirs);
        run(&env, rt, &["install", "claude-code"]);
        let cmds = commands(&env.path(".claude/settings.json"));
        assert_eq!(cmds.len(), 6, "{cmds:?}");
        assert!(
            cmds.iter()
                .all(|(_, c)| c.ends_with("/rt' hook claude-code")),
            "{cmds:?}"
        );
        let o = run(&env, uninstaller, &["uninstall", "claude-code"]);
        assert!(
            stdout(&o).contains(&format!("removed hooks for {all}")),
            "{uninstaller}: {}",
            stdout(&o)
        );
        assert_eq!(env.read(".claude/settings.json"), theirs, "{uninstaller}");
        assert!(!env.path(".claude/commands").exists(), "{uninstaller}");
    }
    // A reinstall from `retrace` replaces rt's entries instead of adding its own beside them.
    let env = Env::new();
    run(&env, rt, &["install", "claude-code"]);
    run(&env, RETRACE, &["install", "claude-code"]);
    let cmds = commands(&env.path(".claude/settings.json"));
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    assert!(
        cmds.iter()
            .all(|(_, c)| c.ends_with("/retrace' hook claude-code")),
        "{cmds:?}"
    );
    // No record: the entries stay, and uninstall names them.
    let env = Env::new();
    env.write(".claude/settings.json", theirs);
    run(&env, rt, &["install", "claude-code"]);
    std::fs::remove_file(env.home.path().join("installed.json")).unwrap();
    let o = run(&env, RETRACE, &["uninstall", "claude-code"]);
    let said = stdout(&o);
    assert!(
        said.contains(&format!(
            "left hooks for {all} running `'{rt}' hook claude-code`"
        )),
        "{said}"
    );
    assert_eq!(commands(&env.path(".claude/settings.json")).len(), 6);
}

/// `install claude-code --local` writes Claude Code's personal settings of the project
/// (`.claude/settings.local.json`), leaves the shared `settings.json` alone, says which file
/// each choice writes, and uninstalls from the same file; other agents refuse `--local`.
#[test]
fn install_local_writes_claude_codes_personal_settings() {
    let env = Env::new();
    std::fs::create_dir_all(env.path(".claude")).unwrap();
    env.write(".claude/settings.json", "{\n  \"model\": \"x\"\n}\n");
    let o = succeeded(
        run_in(&env, RETRACE, &["install", "claude-code", "--local"]),
        "install --local",
    );
    let local = env.path(".claude/settings.local.json");
    assert!(
        commands(&local)
            .iter()
            .any(|(_, c)| c.contains("hook claude-code")),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        env.read(".claude/settings.json"),
        "{\n  \"model\": \"x\"\n}\n",
        "the shared settings were changed"
    );
    assert!(stdout(&o).contains("personal settings"), "{}", stdout(&o));
    let o = succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    assert!(stdout(&o).contains("`--local` writes"), "{}", stdout(&o));
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code"]),
        "uninstall",
    );
    succeeded(
        run_in(&env, RETRACE, &["uninstall", "claude-code", "--local"]),
        "uninstall --local",
    );
    assert!(!local.exists() || commands(&local).is_empty());
    for agent in ["codex", "gemini", "opencode"] {
        let o = run_in(&env, RETRACE, &["install", agent, "--local"]);
        assert_eq!(o.status.code(), Some(2), "{agent}: {}", stderr(&o));
        assert!(stderr(&o).contains("--local"), "{agent}: {}", stderr(&o));
    }
}

/// A whole restore to a snapshot older than the install takes the hooks back with the
/// files: it says so, and how to put them back.
#[test]
fn a_restore_older_than_the_install_warns_that_the_hooks_are_gone() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    succeeded(
        run_in(&env, RETRACE, &["snapshot", "--label", "before"]),
        "snapshot",
    );
    succeeded(
        run_in(&env, RETRACE, &["install", "claude-code"]),
        "install",
    );
    succeeded(
        run_in(&env, RETRACE, &["snapshot", "--label", "after"]),
        "snapshot",
    );
    // A restore that keeps them: no warning.
    let o = succeeded(run_in(&env, RETRACE, &["restore", "after"]), "restore");
    assert!(!stderr(&o).contains("hooks"), "{}", stderr(&o));
    let o = succeeded(run_in(&env, RETRACE, &["restore", "before"]), "restore");
    assert!(
        stderr(&o).contains("took back retrace's hooks in .claude/settings.json"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("`retrace install`"), "{}", stderr(&o));
}
