//! Unit tests of `install/opencode.rs`.

use super::*;

/// A project with `config` as its `opencode.json` (`None`: none), and the target for it.
fn project(config: Option<&str>) -> (tempfile::TempDir, OpenCode) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    if let Some(text) = config {
        std::fs::write(project.join("opencode.json"), text).unwrap();
    }
    let target = OpenCode::new(&project, false, &dir.path().join("home"));
    (dir, target)
}

fn exe() -> PathBuf {
    PathBuf::from("/nonexistent/retrace")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn plain_blanks_comments_and_trailing_commas_byte_for_byte() {
    let text = "{\n  // a comment with \"quotes\" and é\n  \"a\": \"x // not a comment\", /* b */\n  \"b\": [1, 2,],\n}\n";
    let plain = plain(text);
    assert_eq!(plain.len(), text.len());
    let v: serde_json::Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"a": "x // not a comment", "b": [1, 2]})
    );
    assert_eq!(plain.find("\"a\""), text.find("\"a\""));
}

#[test]
fn install_into_a_new_project_creates_both_and_uninstall_removes_both() {
    let (_dir, target) = project(None);
    let changes = install(&target, &exe()).unwrap();
    assert_eq!(read(&target.plugin()), PLUGIN);
    let config: serde_json::Value = serde_json::from_str(&read(&target.config)).unwrap();
    assert_eq!(config, serde_json::json!({"snapshot": false}));
    assert!(
        changes.lines.iter().any(|l| l.contains("not on PATH")),
        "{changes:?}"
    );
    // Twice: nothing changes.
    let again = install(&target, &exe()).unwrap();
    assert!(
        again.lines.iter().all(|l| l.starts_with("note:")),
        "{again:?}"
    );
    uninstall(&target).unwrap();
    assert!(!target.plugin().exists());
    assert!(
        !target.config.exists(),
        "install created it: uninstall removes it"
    );
    assert!(
        !target.dir.exists(),
        "the .opencode directory install created goes too"
    );
    assert!(!target.record.exists(), "nothing is left in the record");
}

#[test]
fn an_existing_config_keeps_its_bytes_and_gets_its_value_back() {
    let original = "{\n    \"model\": \"x/y\",\n    \"snapshot\": true\n}\n";
    let (_dir, target) = project(Some(original));
    install(&target, &exe()).unwrap();
    assert_eq!(
        read(&target.config),
        "{\n    \"model\": \"x/y\",\n    \"snapshot\": false\n}\n"
    );
    install(&target, &exe()).unwrap();
    uninstall(&target).unwrap();
    assert_eq!(read(&target.config), original);
}

#[test]
fn an_absent_member_is_added_after_the_last_and_removed_exactly() {
    for original in [
        "{\n  \"model\": \"x/y\"\n}\n",
        "{\"model\": \"x/y\"}",
        "{}\n",
        "{\n}\n",
        "{\n  // settings\n  \"model\": \"x/y\", // mine\n}\n",
        "{ /* nothing yet */ }\n",
        "{}",
        "{ }\n",
        "{\r\n\t\"model\": \"x\"\r\n}\r\n",
    ] {
        let (_dir, target) = project(Some(original));
        install(&target, &exe()).unwrap();
        let text = read(&target.config);
        let v: serde_json::Value = serde_json::from_str(&plain(&text)).unwrap();
        assert_eq!(v["snapshot"], false, "{original:?} became {text:?}");
        for comment in ["// settings", "// mine", "/* nothing yet */"] {
            assert_eq!(
                original.contains(comment),
                text.contains(comment),
                "{text:?}"
            );
        }
        uninstall(&target).unwrap();
        let back = read(&target.config);
        let v: serde_json::Value = serde_json::from_str(&plain(&back)).unwrap();
        assert!(v.get("snapshot").is_none(), "{back:?}");
        assert_eq!(back, original, "uninstall gives the text back");
    }
}

#[test]
fn a_value_changed_since_install_is_left_alone() {
    let (_dir, target) = project(Some("{\"snapshot\": true}"));
    install(&target, &exe()).unwrap();
    std::fs::write(&target.config, "{\"snapshot\": \"mine\"}").unwrap();
    let changes = uninstall(&target).unwrap();
    assert_eq!(read(&target.config), "{\"snapshot\": \"mine\"}");
    assert!(
        changes
            .lines
            .iter()
            .any(|l| l.contains("left \"snapshot\" alone")),
        "{changes:?}"
    );
}

#[test]
fn a_config_already_off_is_not_changed_by_either() {
    let original = "{\"snapshot\": false}\n";
    let (_dir, target) = project(Some(original));
    install(&target, &exe()).unwrap();
    uninstall(&target).unwrap();
    assert_eq!(read(&target.config), original, "the user's own false stays");
}

#[test]
fn a_foreign_plugin_file_refuses_the_install_and_an_older_retrace_one_is_replaced() {
    let (_dir, target) = project(None);
    std::fs::create_dir_all(target.plugin().parent().unwrap()).unwrap();
    std::fs::write(target.plugin(), "export const Mine = async () => ({})\n").unwrap();
    let e = install(&target, &exe()).unwrap_err();
    assert!(e.contains("not retrace's plugin"), "{e}");
    assert!(!target.config.exists(), "nothing was changed");
    let older = format!("{MARKER} an older version */\n");
    std::fs::write(target.plugin(), &older).unwrap();
    let changes = install(&target, &exe()).unwrap();
    assert_eq!(read(&target.plugin()), PLUGIN);
    assert!(
        changes.lines.iter().any(|l| l.contains("updated")),
        "{changes:?}"
    );
}

#[test]
fn a_jsonc_config_alone_is_the_one_edited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("opencode.jsonc"), "{\n  // mine\n}\n").unwrap();
    let target = OpenCode::new(dir.path(), false, &dir.path().join("home"));
    assert_eq!(target.config, dir.path().join("opencode.jsonc"));
    install(&target, &exe()).unwrap();
    let text = read(&target.config);
    assert!(
        text.contains("// mine") && text.contains("\"snapshot\": false"),
        "{text}"
    );
    assert!(!dir.path().join("opencode.json").exists());
}

#[test]
fn the_user_scope_follows_xdg_config_home() {
    let home = Some("/home/me".into());
    assert_eq!(
        config_home(Some("/x/cfg".into()), home.clone()),
        Path::new("/x/cfg")
    );
    assert_eq!(
        config_home(Some("relative".into()), home.clone()),
        Path::new("/home/me/.config")
    );
    assert_eq!(config_home(None, home), Path::new("/home/me/.config"));
}

#[test]
fn a_later_config_that_sets_snapshot_is_named() {
    let (_dir, target) = project(Some("{}\n"));
    std::fs::create_dir_all(&target.dir).unwrap();
    std::fs::write(target.dir.join("opencode.json"), "{\"snapshot\": true}").unwrap();
    let changes = install(&target, &exe()).unwrap();
    assert!(
        changes
            .lines
            .iter()
            .any(|l| l.contains(".opencode/opencode.json sets")),
        "{changes:?}"
    );
}

#[test]
fn uninstall_without_a_record_says_it_left_snapshot_off() {
    let (dir, target) = project(Some("{\"a\": 1}"));
    install(&target, &exe()).unwrap();
    let other = OpenCode::new(
        target.config.parent().unwrap(),
        false,
        &dir.path().join("other"),
    );
    let changes = uninstall(&other).unwrap();
    assert!(!target.plugin().exists());
    assert!(
        changes.lines.iter().any(|l| l.contains("no record")),
        "{changes:?}"
    );
}

#[test]
fn by_name_the_package_is_named_instead_of_the_file_copied_and_taken_back_exactly() {
    // No config: both members added, no plugin file, no PATH note (npm brings the binary).
    let (_dir, mut target) = project(None);
    target.by_name = true;
    let changes = install(&target, &exe()).unwrap();
    assert!(!target.plugin().exists());
    let config: serde_json::Value = serde_json::from_str(&read(&target.config)).unwrap();
    assert_eq!(
        config,
        serde_json::json!({"snapshot": false, "plugin": [pinned()]})
    );
    assert!(
        !changes.lines.iter().any(|l| l.contains("not on PATH")),
        "{changes:?}"
    );
    let again = install(&target, &exe()).unwrap();
    assert!(
        again.lines.iter().all(|l| l.starts_with("note:")),
        "{again:?}"
    );
    uninstall(&target).unwrap();
    assert!(!target.config.exists(), "install created it");

    // A list of the user's own, with comments: appended to, and given back byte for byte.
    let original = "{\n  // mine\n  \"plugin\": [\"opencode-wakatime\"],\n  \"snapshot\": true\n}\n";
    let (_dir, mut target) = project(Some(original));
    target.by_name = true;
    install(&target, &exe()).unwrap();
    let text = read(&target.config);
    assert!(
        text.contains(&format!("[\"opencode-wakatime\",\"{}\"]", pinned()))
            && text.contains("// mine"),
        "{text}"
    );
    uninstall(&target).unwrap();
    assert_eq!(read(&target.config), original);

    // Named already by the user (with a version): nothing added, and uninstall leaves the
    // user's entry (it removes what install added, nothing else).
    let named = "{\"snapshot\": false, \"plugin\": [\"a\", \"retrace-opencode@0.1.0\"]}\n";
    let (_dir, mut target) = project(Some(named));
    target.by_name = true;
    install(&target, &exe()).unwrap();
    assert_eq!(read(&target.config), named);
    uninstall(&target).unwrap();
    assert!(read(&target.config).contains("retrace-opencode@0.1.0"));

    // Not a list: refused, nothing changed.
    let odd = "{\"plugin\": \"retrace-opencode\"}\n";
    let (_dir, mut target) = project(Some(odd));
    target.by_name = true;
    let err = install(&target, &exe()).unwrap_err();
    assert!(err.contains("not a list"), "{err}");
    assert_eq!(read(&target.config), odd);
}

#[test]
fn by_name_after_a_copy_the_copied_file_goes() {
    let (_dir, mut target) = project(None);
    install(&target, &exe()).unwrap();
    assert!(target.plugin().exists());
    target.by_name = true;
    let changes = install(&target, &exe()).unwrap();
    assert!(!target.plugin().exists(), "{changes:?}");
    let config: serde_json::Value = serde_json::from_str(&read(&target.config)).unwrap();
    assert_eq!(config["plugin"], serde_json::json!([pinned()]));
}

#[test]
fn a_copy_after_the_package_name_drops_the_name() {
    let original = "{\n  \"plugin\": [\"a\"]\n}\n";
    let (_dir, mut target) = project(Some(original));
    target.by_name = true;
    install(&target, &exe()).unwrap();
    target.by_name = false;
    install(&target, &exe()).unwrap();
    assert!(target.plugin().exists());
    let text = read(&target.config);
    assert!(!text.contains("retrace-opencode"), "{text}");
    assert!(text.contains("\"a\""), "{text}");
    uninstall(&target).unwrap();
    assert_eq!(read(&target.config), original);
}
