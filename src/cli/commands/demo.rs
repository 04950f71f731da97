//! `retrace demo`: a walkthrough in a temporary directory that runs the real CLI (this very
//! executable) and shows each command before its output, so it teaches the commands too.

use crate::cli::commands::Ctx;
use crate::cli::exit::Usage;

/// Walk through retrace in a temporary directory
#[derive(clap::Args)]
pub struct DemoArgs;

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// The demo's project and store, and the executable that plays `retrace`.
struct Demo {
    exe: PathBuf,
    root: PathBuf,
    home: PathBuf,
}

/// `out!` that fails instead of exiting on a closed pipe (`retrace demo | head`), so the
/// demo's directory is still removed.
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout(), $($arg)*).context("writing the demo's output")?
    };
}

fn step(n: u32, text: &str) -> Result<()> {
    out!("\n== {n}. {text}");
    Ok(())
}

/// Prose, indented like command output but without the `$`.
fn say(text: &str) -> Result<()> {
    for line in text.lines() {
        out!("  {line}");
    }
    Ok(())
}

/// An argument as a shell would need it typed.
fn quoted(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("\"{arg}\"")
    }
}

impl Demo {
    /// Runs `retrace ARGS` in the project, prints `$ retrace ARGS` and then its output
    /// indented; fails unless it exits with `expect` (1 for a step that shows a refusal).
    /// Returns its standard output.
    fn retrace(&self, args: &[&str], expect: i32) -> Result<String> {
        let shown: Vec<String> = args.iter().map(|a| quoted(a)).collect();
        let line = format!("retrace {}", shown.join(" "));
        out!("$ {line}");
        let out = Command::new(&self.exe)
            .arg("-C")
            .arg(&self.root)
            .args(args)
            .current_dir(&self.root)
            .env("RETRACE_HOME", &self.home)
            // The user's session would turn `log` into a session view; the demo names its own.
            .env_remove("RETRACE_SESSION")
            .output()
            .with_context(|| format!("running {}", self.exe.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        for l in stdout
            .lines()
            .chain(String::from_utf8_lossy(&out.stderr).lines())
        {
            out!("    {l}");
        }
        match out.status.code() {
            Some(c) if c == expect => Ok(stdout),
            Some(c) => bail!("the demo step `{line}` exited with {c} (expected {expect})"),
            None => bail!("the demo step `{line}` was killed by a signal"),
        }
    }

    /// The project's files (ignored ones included), one a line.
    fn files(&self) -> Result<()> {
        for e in walkdir::WalkDir::new(&self.root)
            .min_depth(1)
            .sort_by_file_name()
        {
            let e = e?;
            if e.file_type().is_file() {
                out!("    {}", e.path().strip_prefix(&self.root)?.display());
            }
        }
        Ok(())
    }

    fn write(&self, path: &str, text: &str) -> Result<()> {
        let p = self.root.join(path);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    }

    fn read(&self, path: &str) -> Result<String> {
        let p = self.root.join(path);
        fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    }

    fn exists(&self, path: &str) -> bool {
        self.root.join(path).exists()
    }
}

/// `retrace demo`. It always works in a directory of its own, so `-C` is refused.
pub fn run(_: DemoArgs, cx: &Ctx) -> Result<u8> {
    let dir = cx.dir();
    if let Some(d) = dir {
        bail!(Usage(format!(
            "the demo always runs in a temporary directory of its own and removes it; run \
             `retrace demo` without -C {}",
            d.display()
        )));
    }
    let base = std::env::temp_dir().join(format!("retrace-demo-{}", std::process::id()));
    let demo = Demo {
        exe: std::env::current_exe().context("finding the retrace executable")?,
        root: base.join("project"),
        home: base.join("home"),
    };
    fs::create_dir_all(&demo.root).context("creating the demo directory")?;
    let result = walkthrough(&demo);
    match result {
        Ok(()) => {}
        // Output closed early: exit as a process killed by SIGPIPE would, as other commands do.
        Err(e) if broken_pipe(&e) => {
            let _ = fs::remove_dir_all(&base);
            return Ok(141);
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&base);
            return Err(e);
        }
    }
    // The history stays, to be looked at; its home is the demo's own.
    out!("\nall steps passed. The history it made is kept for you to look at:");
    out!(
        "    RETRACE_HOME={} retrace ui -C {}",
        quoted(&demo.home.display().to_string()),
        quoted(&demo.root.display().to_string())
    );
    out!(
        "(sessions, turns, diffs; `?` lists the keys, `q` quits). Remove it with: rm -rf {}",
        quoted(&base.display().to_string())
    );
    Ok(0)
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn walkthrough(d: &Demo) -> Result<()> {
    out!("retrace demo: each `$ retrace …` line below is a real command, run in");
    out!("  {}", d.root.display());
    out!(
        "with its history kept in {} (RETRACE_HOME),",
        d.home.display()
    );
    out!("so your own projects and their history are not touched.");

    step(
        1,
        "a small project; .gitignore keeps its build directory out of history",
    )?;
    d.write("src/main.rs", "fn main() {\n    println!(\"helo\");\n}\n")?;
    d.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n")?;
    d.write("README.md", "# demo\n")?;
    d.write(".gitignore", "target/\n")?;
    d.write("target/app.bin", "build output\n")?;
    say("files:")?;
    d.files()?;

    step(
        2,
        "a first snapshot: retrace keeps a copy of every file not ignored",
    )?;
    let out = d.retrace(&["snapshot", "--label", "before the agent"], 0)?;
    let first = out
        .lines()
        .find_map(|l| l.strip_prefix("snapshot "))
        .and_then(|id| id.get(..12))
        .context("`retrace snapshot` printed no snapshot id")?
        .to_string();

    step(3, "an agent turn: a snapshot before the prompt, one after")?;
    say(
        "An agent's host is the program the agent runs in (Claude Code, Codex, Gemini CLI);\n\
         `retrace install` makes it call `retrace turn begin` and `turn end` around each\n\
         prompt. An anchor is the host's name for a point in its conversation (a message\n\
         id): undo hands it back so the host can rewind the chat along with the files.\n\
         Here we play the host by hand, in a session named demo.",
    )?;
    d.retrace(
        &[
            "turn",
            "begin",
            "--session",
            "demo",
            "--anchor",
            "msg-1",
            "--prompt",
            "fix the greeting",
        ],
        0,
    )?;
    say("the agent edits src/main.rs, deletes src/lib.rs, adds notes.txt, rebuilds target/")?;
    d.write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n")?;
    fs::remove_file(d.root.join("src/lib.rs")).context("deleting src/lib.rs")?;
    d.write("notes.txt", "the greeting had a typo\n")?;
    d.write("target/app.bin", "new build output\n")?;
    d.retrace(
        &["turn", "end", "--session", "demo", "--anchor", "msg-2"],
        0,
    )?;

    step(
        4,
        "what happened: the session's turns, the snapshots, and a diff",
    )?;
    d.retrace(&["log", "--session", "demo"], 0)?;
    d.retrace(&["log"], 0)?;
    say("what changed since the first snapshot (A added, M modified, D deleted):")?;
    d.retrace(&["diff", &first], 0)?;

    step(
        5,
        "undo the turn: its files come back, the ignored build output stays",
    )?;
    d.retrace(&["undo", "--session", "demo"], 0)?;
    say("files:")?;
    d.files()?;
    let build = d.read("target/app.bin")?;
    say(&format!("target/app.bin still holds: {}", build.trim()))?;
    ensure!(
        d.exists("src/lib.rs") && !d.exists("notes.txt"),
        "undo did not put the files back"
    );
    ensure!(
        build.contains("new build output"),
        "undo changed the ignored build output"
    );

    step(6, "redo the turn")?;
    d.retrace(&["redo", "--session", "demo"], 0)?;
    ensure!(
        d.exists("notes.txt") && d.read("src/main.rs")?.contains("hello"),
        "redo did not re-apply the turn"
    );

    step(
        7,
        "restore any snapshot by its id (a unique prefix is enough)",
    )?;
    d.retrace(&["restore", &first], 0)?;
    say("files:")?;
    d.files()?;
    ensure!(
        d.read("src/main.rs")?.contains("helo") && !d.exists("notes.txt"),
        "restore did not bring back the first snapshot"
    );

    step(8, "work that is in no snapshot is never overwritten")?;
    say("you edit README.md by hand, then try to restore:")?;
    d.write("README.md", "# demo\nwork in progress\n")?;
    d.retrace(&["restore", &first], 1)?;
    say("a checkpoint saves it, under a label you can navigate back to:")?;
    d.retrace(&["checkpoint", "--session", "demo", "wip readme"], 0)?;
    ensure!(
        d.read("README.md")?.contains("work in progress"),
        "the refused restore changed README.md"
    );
    Ok(())
}
