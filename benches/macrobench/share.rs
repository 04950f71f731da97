//! `--profile share` (issue 45): a session exported to git, imported elsewhere, bundled and
//! unbundled, each a whole command with its peak RSS, beside git moving the same history
//! (the shadow repository committing each turn's after-state).
//!
//! `cargo bench --bench macrobench -- --profile share [--files N] [--turns N] [--dir PATH]`
//! generates the macro workspace (20k files by default) and runs `--turns` turns (default
//! 20) of 25 files through the CLI, git committing each after-state; or, with
//! `--from PATH --session NAME`, takes the workspace, home and shadow repository an earlier
//! profile left there (`--profile long-session --dir PATH`, session `long`).
//!
//! Measured, retrace beside git:
//! - export to a fresh bare repository (`retrace export --repo`) / `git push` of the shadow
//!   history to a fresh bare repository;
//! - export again, nothing new / `git push` again;
//! - import into an empty workspace (`retrace import --repo`) / `git fetch` into a fresh bare
//!   repository;
//! - bundle / `git bundle create`; unbundle into an empty workspace / `git clone` of it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Ran, Tools, dir_size, run};

const SESSION: &str = "share";
const REF: &str = "refs/retrace/bench";

fn git(dir: &Path, args: &[&str]) -> Ran {
    let mut c = Command::new("git");
    c.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args(["-c", "gc.auto=0", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir);
    run(c)
}

fn fresh_bare(p: &Path) {
    let _ = fs::remove_dir_all(p);
    let ok = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(p)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git init --bare {}", p.display());
}

fn fresh_dir(p: &Path) {
    let _ = fs::remove_dir_all(p);
    fs::create_dir_all(p).unwrap();
}

fn row(what: &str, r: &Ran, g: &Ran) {
    println!(
        "| {what:<36} | {:>9.0} ms | {:>7.1} MB | {:>9.0} ms | {:>7.1} MB | {:>5.2}x |",
        r.time.as_secs_f64() * 1e3,
        r.rss as f64 / 1e6,
        g.time.as_secs_f64() * 1e3,
        g.rss as f64 / 1e6,
        r.time.as_secs_f64() / g.time.as_secs_f64().max(1e-9),
    );
}

pub fn main(args: &[String]) {
    let arg = |name: &str| super::arg(args, name);
    let retrace = PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    let (base, t) = if let Some(from) = arg("--from") {
        let session: &'static str = Box::leak(
            arg("--session")
                .expect("--from needs --session")
                .into_boxed_str(),
        );
        let base = PathBuf::from(from);
        let t = Tools::under(&base, retrace.clone(), session);
        (base, t)
    } else {
        let files: usize = arg("--files")
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        let turns: u64 = arg("--turns").and_then(|v| v.parse().ok()).unwrap_or(20);
        let base = arg("--dir").map_or_else(
            || std::env::temp_dir().join(format!("retrace-bench-share-{files}")),
            PathBuf::from,
        );
        let t = Tools::under(&base, retrace.clone(), SESSION);
        for d in [&t.root, &t.home, &t.git_dir] {
            let _ = fs::remove_dir_all(d);
        }
        eprintln!("generating {files} files in {} ...", t.root.display());
        super::generate(&t.root, files);
        fresh_bare(&t.git_dir);
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "--no-verify", "-m", "cold"]);
        eprintln!("{turns} turns ...");
        for n in 1..=turns {
            t.session(&["turn", "begin", "--prompt", &format!("prompt {n}")]);
            super::turn(&t.root, files, n);
            t.session(&["turn", "end"]);
            t.git(&["add", "-A"]);
            t.git(&["commit", "-q", "--no-verify", "-m", &format!("turn {n}")]);
        }
        (base, t)
    };
    let work = base.join("share-bench");
    fresh_dir(&work);
    let logical = dir_size(&t.root);

    // Export, beside a push of the shadow history.
    let exported = work.join("export.git");
    let pushed = work.join("push.git");
    fresh_bare(&exported);
    fresh_bare(&pushed);
    let shadow = t.git_dir.to_str().unwrap();
    let export = || {
        t.session(&[
            "export",
            "--git-ref",
            REF,
            "--repo",
            exported.to_str().unwrap(),
        ])
    };
    let push_all = || {
        let to = pushed.to_str().unwrap();
        git(
            &work,
            &[
                "--git-dir",
                shadow,
                "push",
                "-q",
                to,
                "HEAD:refs/heads/main",
            ],
        )
    };
    let (ex, push) = (export(), push_all());
    let (ex_again, push_again) = (export(), push_all());

    // Import into an empty workspace, beside a fetch into a fresh repository.
    let imp = Tools::under(&work.join("import"), retrace.clone(), t.session);
    fresh_dir(&imp.root);
    fresh_dir(&imp.home);
    let im = imp.retrace(&[
        "import",
        "--git-ref",
        REF,
        "--repo",
        exported.to_str().unwrap(),
    ]);
    let fetched = work.join("fetch.git");
    fresh_bare(&fetched);
    let fetch = git(
        &work,
        &[
            "--git-dir",
            fetched.to_str().unwrap(),
            "fetch",
            "-q",
            pushed.to_str().unwrap(),
            "refs/heads/main:refs/heads/main",
        ],
    );

    // Bundles.
    let rb = work.join("session.rtb");
    let gb = work.join("history.bundle");
    let bundle = t.session(&["bundle", "-o", rb.to_str().unwrap()]);
    let git_bundle = git(
        &work,
        &[
            "--git-dir",
            shadow,
            "bundle",
            "create",
            "-q",
            gb.to_str().unwrap(),
            "HEAD",
        ],
    );
    let unb = Tools::under(&work.join("unbundle"), retrace, t.session);
    fresh_dir(&unb.root);
    fresh_dir(&unb.home);
    let unbundle = unb.retrace(&["unbundle", rb.to_str().unwrap()]);
    let cloned = work.join("clone.git");
    let _ = fs::remove_dir_all(&cloned);
    let clone = git(
        &work,
        &[
            "clone",
            "-q",
            "--bare",
            gb.to_str().unwrap(),
            cloned.to_str().unwrap(),
        ],
    );

    println!(
        "\nsharing session `{}` of {} ({:.0} MB on disk): {}",
        t.session,
        t.root.display(),
        logical as f64 / 1e6,
        im.stdout.lines().next().unwrap_or("")
    );
    println!(
        "| {:<36} | {:>12} | {:>10} | {:>12} | {:>10} | {:>6} |",
        "measurement (retrace / git)", "retrace", "peak RSS", "git", "peak RSS", "ratio"
    );
    println!(
        "|{:-<38}|{:-<14}|{:-<12}|{:-<14}|{:-<12}|{:-<8}|",
        "", "", "", "", "", ""
    );
    row("export / push to a fresh repository", &ex, &push);
    row("export again, nothing new / push", &ex_again, &push_again);
    row("import into an empty workspace / fetch", &im, &fetch);
    row("bundle / git bundle create", &bundle, &git_bundle);
    row("unbundle / git clone of the bundle", &unbundle, &clone);
    let size = |p: &Path| dir_size(p) as f64 / 1e6;
    println!(
        "\nsizes: export repository {:.1} MB (git's push {:.1} MB); bundle {:.1} MB (git's {:.1} MB); \
         store after import {:.1} MB, after unbundle {:.1} MB",
        size(&exported),
        size(&pushed),
        fs::metadata(&rb).map_or(0, |m| m.len()) as f64 / 1e6,
        fs::metadata(&gb).map_or(0, |m| m.len()) as f64 / 1e6,
        size(&imp.home),
        size(&unb.home),
    );
}
