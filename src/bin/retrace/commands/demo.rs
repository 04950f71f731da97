//! `retrace demo`: a self-contained walkthrough in a temporary directory.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use retrace::{Config, Mode, Outcome, RestoreOptions, Workspace};

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
    agent_session(root, &ws)?;
    println!("\nall steps passed; the demo directory is removed.");
    Ok(())
}

/// Steps 7 to 10: what an agent adapter does around each prompt, and undo/redo.
fn agent_session(root: &Path, ws: &Workspace) -> Result<()> {
    step(
        7,
        "an agent session: checkpoint the work in progress, then one turn",
    );
    let session = ws.session("demo-chat");
    println!(
        "   {}",
        session.checkpoint(Some("wip readme".into()))?.message()
    );
    let turn = session.begin_turn(Some("msg-1".into()), Some("add a test".into()))?;
    turn.wait_before(std::time::Duration::from_secs(60))?;
    fs::create_dir_all(root.join("tests"))?;
    fs::write(root.join("tests/answer.rs"), "#[test] fn t() {}\n")?;
    fs::write(root.join("src/lib.rs"), "pub fn answer() -> u32 { 41 }\n")?;
    let sum = turn.end(Some("msg-2".into()))?;
    println!(
        "   turn {} recorded: +{} ~{} -{}",
        sum.turn, sum.added, sum.modified, sum.deleted
    );
    fs::write(
        root.join("README.md"),
        "# demo\nedited by the user after the turn\n",
    )?;

    step(
        8,
        "undo the turn: only its paths go back, the user's README edit stays",
    );
    let undone = session.undo(Mode::Both)?;
    println!("   {}", undone.message());
    if let Outcome::Restored { anchor, prompt, .. } = &undone {
        println!(
            "   the host moves its conversation to {} and puts back the prompt {:?}",
            anchor.as_deref().unwrap_or("?"),
            prompt.as_deref().unwrap_or("")
        );
    }
    ensure!(
        !root.join("tests/answer.rs").exists(),
        "undo left the new test"
    );
    ensure!(
        fs::read_to_string(root.join("README.md"))?.contains("edited by the user"),
        "undo touched the user's edit"
    );

    step(9, "redo the turn");
    println!("   {}", session.redo()?.message());
    ensure!(
        root.join("tests/answer.rs").exists(),
        "redo did not restore the test"
    );

    step(
        10,
        "a path edited after the turn is a conflict: nothing is written",
    );
    fs::write(root.join("tests/answer.rs"), "// hand-edited\n")?;
    let refused = session.undo(Mode::Both)?;
    println!("   {}", refused.message());
    ensure!(
        matches!(refused, Outcome::Conflict { .. }),
        "undo over an edited path should be refused"
    );
    Ok(())
}
