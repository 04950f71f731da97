//! Unit tests of `install.rs`.

use super::*;
use serde_json::Value;

#[test]
fn a_symlinked_settings_file_is_edited_through_the_link_and_stays_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let dotfiles = dir.path().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    for agent in Agent::ALL {
        let target = Target::new(agent, &dir.path().join(agent.name()), false);
        let real = dotfiles.join(format!("{}.json", agent.name()));
        std::fs::write(&real, r#"{"model": "mine"}"#).unwrap();
        std::fs::create_dir_all(&target.dir).unwrap();
        // A relative link, as dotfiles managers make them.
        let link = target.settings();
        let up = Path::new(agent.spec().config_dir).components().count() + 1;
        let rel = PathBuf::from("../".repeat(up))
            .join("dotfiles")
            .join(real.file_name().unwrap());
        std::os::unix::fs::symlink(&rel, &link).unwrap();
        install(&target, &format!("retrace hook {}", agent.name())).unwrap();
        let is_link = |p: &Path| p.symlink_metadata().unwrap().file_type().is_symlink();
        assert!(is_link(&link), "{agent:?}: the link was replaced");
        assert_eq!(std::fs::read_link(&link).unwrap(), rel);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
        assert_eq!(v["model"], "mine", "{agent:?}");
        assert!(v["hooks"].is_object(), "{agent:?}: {v}");
        uninstall(&target).unwrap();
        assert!(is_link(&link), "{agent:?}: uninstall replaced the link");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
        assert_eq!(v, serde_json::json!({"model": "mine"}), "{agent:?}");
    }
}

#[test]
fn a_record_written_before_created_paths_reads_as_the_kept_containers() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::new(Agent::CLAUDE_CODE, dir.path(), false).remembering_in(dir.path());
    let mut all = serde_json::Map::new();
    all.insert(
        record_key(&target.settings()),
        serde_json::json!(["hooks", "Stop"]),
    );
    std::fs::write(
        dir.path().join("installed.json"),
        Value::from(all).to_string(),
    )
    .unwrap();
    let record = recorded(&target);
    assert_eq!(record.kept, BTreeSet::from(["Stop".into(), "hooks".into()]));
    assert!(record.created.is_empty() && record.blank.is_none());
}

#[test]
fn retraces_own_hook_commands_are_recognised_wherever_the_binary_lives() {
    for c in [
        "'/usr/local/bin/retrace' hook codex",
        "'/home/me/my tools/retrace' hook codex",
        "\"/opt/x y/retrace\" hook codex",
        "retrace hook codex",
        r"/home/me/my\ tools/retrace hook codex",
        r"'/opt/it'\''s/retrace' hook codex",
        r#""/opt/a \"b\" \$c/retrace" hook codex"#,
        r#"/opt/mixed' 'dir"/x"/retrace hook codex"#,
    ] {
        assert!(is_ours(c, Agent::CODEX, &BTreeSet::new()), "{c}");
    }
    for c in [
        "'/usr/local/bin/retrace' hook gemini",
        "notify-send done",
        "'/my tools/other' hook codex",
        "'/opt/retrace/bin/notify' hook codex",
        "'/unterminated/retrace hook codex",
        "",
    ] {
        assert!(!is_ours(c, Agent::CODEX, &BTreeSet::new()), "{c}");
    }
}

#[test]
fn a_binary_named_otherwise_is_retraces_when_an_install_recorded_it() {
    let recorded = BTreeSet::from(["/opt/my tools/rt".to_string()]);
    for c in [
        "'/opt/my tools/rt' hook codex",
        "\"/opt/my tools/rt\" hook codex --watch",
    ] {
        assert!(is_ours(c, Agent::CODEX, &recorded), "{c}");
        assert!(!is_ours(c, Agent::CODEX, &BTreeSet::new()), "{c}");
    }
    for c in [
        "'/opt/my tools/rt' hook gemini",
        "'/opt/my tools/rt' status",
        "'/opt/rt' hook codex",
    ] {
        assert!(!is_ours(c, Agent::CODEX, &recorded), "{c}");
    }
}

#[test]
fn hook_commands_quote_any_path_for_sh() {
    for dir in [
        "/opt/plain",
        "/home/me/my tools",
        "/tmp/it's",
        "/tmp/a \"b\"",
        "/tmp/$HOME and `id`",
        "/tmp/back\\slash\\n",
        "/tmp/'''",
    ] {
        let exe = Path::new(dir).join("retrace");
        let command = hook_command(&exe, Agent::GEMINI).unwrap();
        let none = BTreeSet::new();
        assert!(is_ours(&command, Agent::GEMINI, &none), "{command}");
        assert!(!is_ours(&command, Agent::CODEX, &none), "{command}");
        assert_eq!(
            first_word(&command).map(|(w, _)| w),
            Some(exe.display().to_string())
        );
        // sh reads the program word back as the path.
        let program = command.strip_suffix(" hook gemini").unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {program}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            exe.display().to_string()
        );
    }
}

#[test]
fn an_append_is_undone_by_removing_the_last_item() {
    for text in [
        "{}",
        "{\n    \"a\": [1.50]\n}\n",
        "{\"a\":1}",
        "{\r\n\t\"a\": { \"b\" : [ ] }\r\n}",
        " [ 1 ,\n  2 ] ",
        "[]",
    ] {
        let root = Scanner { text, at: 0 }.value().unwrap();
        let style = Style::of(text, &root);
        let key = matches!(root.items, Items::Object(_)).then_some("k");
        let added = append(text, &root, key, &[1, 2], &style).unwrap();
        assert!(serde_json::from_str::<Value>(&added).is_ok(), "{added}");
        let again = Scanner {
            text: &added,
            at: 0,
        }
        .value()
        .unwrap();
        let back = remove(&added, &again, again.len() - 1);
        if root.len() == 0 {
            assert_eq!(back, text.replace(char::is_whitespace, ""), "{added}");
        } else {
            assert_eq!(back, text, "{added}");
        }
    }
}

#[test]
fn an_empty_copilot_hooks_file_gets_the_version_copilot_requires() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::new(Agent::COPILOT, dir.path(), false);
    std::fs::create_dir_all(&target.dir).unwrap();
    std::fs::write(target.settings(), "{}").unwrap();
    install(&target, "retrace hook copilot").unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(target.settings()).unwrap())
        .unwrap();
    assert_eq!(v["version"], 1, "{v}");
    assert!(v["hooks"]["PreToolUse"].is_array(), "{v}");
    // Another agent's `{}` stays as written, byte for byte, once uninstalled.
    let claude = Target::new(Agent::CLAUDE_CODE, dir.path(), false);
    std::fs::create_dir_all(&claude.dir).unwrap();
    std::fs::write(claude.settings(), "{}").unwrap();
    install(&claude, "retrace hook claude-code").unwrap();
    uninstall(&claude).unwrap();
    assert_eq!(std::fs::read_to_string(claude.settings()).unwrap(), "{}");
}
