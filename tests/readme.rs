//! The README's CLI tour is executable documentation: every `console` block of README.md
//! runs, in order, with `trycmd` in one fresh project, and its output must match what the
//! README shows (`[..]` for what changes from run to run). A change that breaks the tour
//! fails here.

use crate::common::RETRACE;

#[test]
fn the_readme_tour_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("README.md");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"), &case).unwrap();
    // The project the tour starts from (trycmd copies `README.in/` into a sandbox, since
    // `README.out/` exists, and runs every command there).
    let project = dir.path().join("README.in");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::create_dir_all(project.join("target")).unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(project.join(".gitignore"), "target/\n").unwrap();
    std::fs::write(project.join("target/app"), "build output\n").unwrap();
    let out = dir.path().join("README.out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(".keep"), "").unwrap();
    let home = dir.path().join("home");
    let config = dir.path().join("config");
    trycmd::TestCases::new()
        .register_bin("retrace", std::path::Path::new(RETRACE))
        .register_bin("sh", std::path::Path::new("/bin/sh"))
        .env("RETRACE_HOME", home.display().to_string())
        .env("HOME", home.display().to_string())
        .env("XDG_CONFIG_HOME", config.display().to_string())
        .env("XDG_STATE_HOME", "")
        // Empty means unset: a developer's own session does not leak into the tour.
        .env("RETRACE_SESSION", "")
        .env("NO_COLOR", "1")
        .case(&case)
        .run();
}
