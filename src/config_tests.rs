//! Unit tests of `config.rs`.

use super::*;

#[test]
fn byte_settings_are_shown_in_units_that_read_back() {
    for n in [
        0,
        1,
        1000,
        1024,
        2 << 30,
        10 << 30,
        512 << 20,
        (2 << 30) + 1,
    ] {
        let text = bytes_text(n);
        assert_eq!(parse_bytes(&text), Some(n), "{text}");
    }
    assert_eq!(bytes_text(2 << 30), "2 GiB");
    let s = Settings::default();
    let row = s
        .rows()
        .into_iter()
        .find(|r| r.0 == "max_store_bytes")
        .unwrap();
    assert_eq!(row.1, "2 GiB");
}

#[test]
fn byte_counts_in_reports_are_rounded_to_one_decimal() {
    for (n, text) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (12_595, "12.3 KiB"),
        (1_048_524, "1023.9 KiB"),
        (1_048_575, "1 MiB"),
        (2 << 30, "2 GiB"),
        ((2 << 30) + 1, "2 GiB"),
        (u64::MAX, "16 EiB"),
    ] {
        assert_eq!(bytes_approx(n), text, "{n}");
    }
}

#[test]
fn values_parse_or_are_ignored_with_a_warning() {
    assert_eq!(parse_days("0.5"), Some(0.5));
    assert_eq!(parse_days("0"), Some(0.0));
    for bad in ["7days", "-1", "", "NaN", "inf"] {
        assert_eq!(parse_days(bad), None, "{bad}");
    }
    assert_eq!(parse_bytes("2GiB"), Some(2 << 30));
    assert_eq!(parse_bytes("500MB"), Some(500_000_000));
    assert_eq!(parse_bytes("1024"), Some(1024));
    assert_eq!(parse_bytes("12 parsecs"), None);
    let mut s = Settings::default();
    let mut w = Vec::new();
    assert!(s.set("retention_days", "7days", &Source::Env("X".into()), &mut w));
    assert!((s.retention_days.value - 7.0).abs() < f64::EPSILON);
    assert_eq!(s.retention_days.source, Source::Default);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("7days") && w[0].contains("$X"), "{w:?}");
    assert!(s.set("max_store_bytes", "1.5G", &Source::Env("Y".into()), &mut w));
    assert_eq!(s.max_store_bytes.value, 1_500_000_000);
    assert!(!s.set("colour", "blue", &Source::Default, &mut w));
}

#[test]
fn layers_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".retrace.toml"),
        "retention_days = 0.5\nmax_store_bytes = \"100MiB\"\nmax_turns = -3\n",
    )
    .unwrap();
    let mut s = Settings::default();
    let mut w = Vec::new();
    let f = dir.path().join(".retrace.toml");
    s.apply_file(&f, &Source::Project(f.clone()), &mut w);
    assert!((s.retention_days.value - 0.5).abs() < f64::EPSILON);
    assert_eq!(s.retention_days.source, Source::Project(f.clone()));
    assert_eq!(s.max_store_bytes.value, 100 << 20);
    assert_eq!(s.max_turns.value, 8000, "a bad value keeps the layer below");
    assert_eq!(w.len(), 1, "{w:?}");
    std::fs::write(&f, "retention_days = [").unwrap();
    let mut w = Vec::new();
    s.apply_file(&f, &Source::Project(f.clone()), &mut w);
    assert!(w[0].contains("not valid TOML"), "{w:?}");
}

#[test]
fn a_file_that_is_not_utf8_is_ignored_with_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(".retrace.toml");
    std::fs::write(&f, b"retention_days = 2\n# caf\xe9\n").unwrap();
    let mut s = Settings::default();
    let mut w = Vec::new();
    s.apply_file(&f, &Source::Project(f.clone()), &mut w);
    assert_eq!(s.retention_days.source, Source::Default);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains(&f.display().to_string()), "{w:?}");
    assert!(w[0].contains("not UTF-8"), "{w:?}");
    // An absent file is the usual case: no warning.
    let mut w = Vec::new();
    s.apply_file(&dir.path().join("none.toml"), &Source::Default, &mut w);
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn nested_repos_is_skip_or_capture_from_files_and_the_environment() {
    assert_eq!(Settings::default().nested_repos.value, NestedRepos::Skip);
    for (text, want) in [
        ("skip", Some(NestedRepos::Skip)),
        ("capture", Some(NestedRepos::Capture)),
        (" Capture ", Some(NestedRepos::Capture)),
        ("captured", None),
        ("", None),
        ("true", None),
    ] {
        assert_eq!(NestedRepos::parse(text), want, "{text:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(".retrace.toml");
    std::fs::write(&f, "nested_repos = \"capture\"\n").unwrap();
    let mut s = Settings::default();
    let mut w = Vec::new();
    s.apply_file(&f, &Source::Project(f.clone()), &mut w);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(s.nested_repos.value, NestedRepos::Capture);
    assert_eq!(s.nested_repos.source, Source::Project(f.clone()));
    let row = s
        .rows()
        .into_iter()
        .find(|r| r.0 == "nested_repos")
        .unwrap();
    assert_eq!(row.1, "\"capture\"");
    // A value that is neither is ignored with a warning saying what it must be; the layer
    // below (here the file's `capture`) stays.
    let env = Source::Env("RETRACE_NESTED_REPOS".into());
    assert!(s.set("nested_repos", "yes", &env, &mut w));
    assert_eq!(s.nested_repos.value, NestedRepos::Capture);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("\"yes\"")
            && w[0].contains("$RETRACE_NESTED_REPOS")
            && w[0].contains("\"skip\" or \"capture\"")
            && w[0].contains("using capture"),
        "{w:?}"
    );
    std::fs::write(&f, "nested_repos = true\n").unwrap();
    let mut s = Settings::default();
    let mut w = Vec::new();
    s.apply_file(&f, &Source::Project(f.clone()), &mut w);
    assert_eq!(s.nested_repos.value, NestedRepos::Skip);
    assert_eq!(w.len(), 1, "{w:?}");
}
