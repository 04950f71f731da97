//! `retrace demo`: a self-contained walkthrough in a temporary directory.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use retrace::{Config, RestoreOptions, Workspace};

fn step(n: u32, text: &str) {
    println!("\n== {n}. {text}");
}

fn show(root: &Path) -> Result<()> {
    let mut paths = Vec::new();
    for e in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let e = e?;
        if e.file_type().is_file() {
            paths.push(e.path().strip_prefix(root)?.display().to_string());
        }
    }
    for p in paths {
        println!("   {p}");
    }
    Ok(())
}

pub fn run() -> Result<u8> {
    let base = std::env::temp_dir().join(format!("retrace-demo-{}", std::process::id()));
    let root = base.join("project");
    let home = base.join("home");
    fs::create_dir_all(root.join("src")).context("creating the demo directory")?;
    let result = walkthrough(&root, &home);
    let _ = fs::remove_dir_all(&base);
    result.map(|()| 0)
}

fn walkthrough(root: &Path, home: &Path) -> Result<()> {
    println!("retrace demo in {}", root.display());
    step(1, "a small project, with an ignored build directory");
    fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )?;
    fs::write(root.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }\n")?;
    fs::write(root.join("README.md"), "# demo\n")?;
    fs::write(root.join(".gitignore"), "target/\n")?;
    fs::create_dir_all(root.join("target"))?;
    fs::write(root.join("target/app.bin"), "build output, ignored\n")?;
    show(root)?;

    step(2, "snapshot before the agent's turn");
    let ws = Workspace::open(root, &Config::with_home(home))?;
    let before = ws.snapshot(Some("before the agent".into()))?;
    println!(
        "   snapshot {} ({} files, {} bytes, {} stored)",
        before.id.short(),
        before.files,
        before.bytes,
        before.new_bytes
    );

    step(
        3,
        "the \"agent\" edits a file, deletes one, adds one, and rebuilds",
    );
    fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    panic!(\"oops\");\n}\n",
    )?;
    fs::remove_file(root.join("src/lib.rs"))?;
    fs::write(root.join("notes.txt"), "scratch notes\n")?;
    fs::write(
        root.join("target/app.bin"),
        "new build output, still ignored\n",
    )?;
    let after = ws.snapshot(Some("after the agent".into()))?;
    println!(
        "   snapshot {} ({} new bytes stored: only what changed)",
        after.id.short(),
        after.new_bytes
    );
    let d = ws.diff(&before.id, Some(&after.id))?;
    for p in &d.added {
        println!("   A {p}");
    }
    for p in &d.modified {
        println!("   M {p}");
    }
    for p in &d.deleted {
        println!("   D {p}");
    }

    step(4, "restore the snapshot from before the turn");
    let r = ws.restore(&before.id, RestoreOptions::default())?;
    println!("   wrote {:?}, deleted {:?}", r.written, r.deleted);
    ensure!(r.verified, "restore did not verify");
    show(root)?;

    step(5, "the ignored build output was not touched");
    let kept = fs::read_to_string(root.join("target/app.bin"))?;
    println!("   target/app.bin: {}", kept.trim());
    ensure!(kept.contains("new build output"), "ignored file changed");
    ensure!(
        fs::read_to_string(root.join("src/main.rs"))?.contains("hello"),
        "main.rs not restored"
    );
    ensure!(
        root.join("src/lib.rs").exists() && !root.join("notes.txt").exists(),
        "restore incomplete"
    );

    step(6, "unsnapshotted work is protected");
    fs::write(root.join("README.md"), "# demo\nwork in progress\n")?;
    match ws.restore(&after.id, RestoreOptions::default()) {
        Err(e) => println!("   refused: {e}"),
        Ok(_) => anyhow::bail!("restore over unsnapshotted work should be refused"),
    }
    println!("\nall steps passed; the demo directory is removed.");
    Ok(())
}
