//! Sharing a session: exported to git, pushed, cloned and imported elsewhere; exported into
//! the workspace's own repository without touching anything else of it; bundles round
//! tripped and damaged ones refused with nothing written.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{Env, RETRACE, noise, stderr, stdout, succeeded};
use retrace::history::db;
use retrace::history::record::{CheckpointRecord, RevertRecord, TurnRecord};
use retrace::{ObjectId, OpOptions, Session, Workspace};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// `retrace import` of `reference` from `repo` into `env`, which must refuse it saying `why`
/// and record no session.
fn refused_import(env: &Env, reference: &str, repo: &Path, why: &str) {
    let o = env.run(
        RETRACE,
        &[
            "import",
            "--git-ref",
            reference,
            "--repo",
            repo.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success(), "{reference}");
    assert!(stderr(&o).contains(why), "{reference}: {}", stderr(&o));
    assert!(env.open().sessions().unwrap().is_empty(), "{reference}");
}

fn turn(s: &Session, prompt: &str, edit: impl FnOnce()) {
    let t = s.begin_turn(None, Some(prompt.to_string())).unwrap();
    t.wait_before(Duration::from_mins(1)).unwrap();
    edit();
    t.end(None).unwrap();
}

/// What a session's history says, as the store holds it.
#[derive(Debug, PartialEq, Eq)]
struct History {
    turns: Vec<TurnRecord>,
    checkpoints: Vec<CheckpointRecord>,
    reverts: Vec<RevertRecord>,
}

fn history(ws: &Workspace, name: &str) -> History {
    let tx = ws.working_copy().store().begin_read().unwrap();
    let l = db::load(&tx, &db::session_key(name)).unwrap();
    History {
        // The host's conversation ids stay on the machine they mean something on.
        turns: l
            .turns
            .into_iter()
            .map(|mut t| {
                t.anchor = None;
                t.leaf = None;
                t.rounds.clear();
                t
            })
            .collect(),
        checkpoints: l.checkpoints,
        reverts: l.reverts,
    }
}

fn write_bytes(env: &Env, name: &[u8], content: &[u8]) {
    std::fs::write(env.root().join(OsStr::from_bytes(name)), content).unwrap();
}

/// A 20-turn session with what git cannot hold (empty directories, a nested repository),
/// awkward names, a big file, a symlink, an executable, edits between turns, two
/// checkpoints and a revert.
fn twenty_turns(env: &Env) -> Workspace {
    let ws = env.open();
    let s = ws.session("shared");
    env.write("README.md", "hello\n");
    std::fs::create_dir_all(env.path("nested/.git")).unwrap();
    env.write("nested/.git/HEAD", "ref: refs/heads/main\n");
    for n in 1..=20u64 {
        turn(
            &s,
            &format!("turn {n}: change things\n\nwith a second paragraph"),
            || {
                env.write(
                    &format!("src/f{}.rs", n % 7),
                    format!("fn f() {{ {n} }}\n").repeat(40),
                );
                match n {
                    2 => std::fs::create_dir_all(env.path("empty/deeper")).unwrap(),
                    3 => env.write("big.bin", noise(3, 1_500_000)),
                    4 => {
                        write_bytes(env, b"sp ace \"quoted\"\nnewline", b"odd");
                        write_bytes(env, b"\xffnot-utf8", b"bytes");
                    }
                    6 => std::os::unix::fs::symlink("README.md", env.path("link")).unwrap(),
                    7 => {
                        env.write("run.sh", "#!/bin/sh\n");
                        let mut p = std::fs::metadata(env.path("run.sh")).unwrap().permissions();
                        std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
                        std::fs::set_permissions(env.path("run.sh"), p).unwrap();
                    }
                    9 => {
                        let mut big = noise(3, 1_500_000);
                        big[700_000..700_100].copy_from_slice(&[7; 100]);
                        env.write("big.bin", big);
                    }
                    11 => std::fs::remove_dir_all(env.path("empty")).unwrap(),
                    15 => env.write("only15.txt", "reverted later"),
                    _ => {}
                }
            },
        );
        if n == 5 || n == 12 {
            s.checkpoint(Some(format!("after {n}"))).unwrap();
        }
        if n == 8 {
            env.write("README.md", "hello, edited by the user between turns\n");
        }
    }
    let o = s.revert(15, OpOptions::default()).unwrap();
    assert!(matches!(o, retrace::Outcome::Restored { .. }), "{o:?}");
    ws
}

/// Every snapshot the session names, restored and listed (path → kind and content).
fn restored(
    ws: &Workspace,
    env: &Env,
    h: &History,
) -> BTreeMap<ObjectId, BTreeMap<PathBuf, crate::common::Node>> {
    let mut out = BTreeMap::new();
    let ids = h
        .turns
        .iter()
        .flat_map(|t| [t.before, t.after])
        .flatten()
        .chain(h.checkpoints.iter().map(|c| c.snapshot));
    for id in ids {
        ws.restore(
            &id,
            retrace::RestoreOptions {
                force: true,
                ..Default::default()
            },
        )
        .unwrap();
        let mut tree = crate::common::tree_of(env.root());
        tree.retain(|p, _| !p.starts_with(".git") && !p.starts_with("nested"));
        out.insert(id, tree);
    }
    out
}

#[test]
fn a_session_pushed_cloned_and_imported_elsewhere_is_the_same_session() {
    let env = Env::new();
    let ws = twenty_turns(&env);
    let original = history(&ws, "shared");
    assert_eq!(original.turns.len(), 21);
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "--bare", "--quiet"]);
    let remote_path = remote.path().to_str().unwrap();
    succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "shared",
                "export",
                "--git-ref",
                "refs/retrace/shared",
                "--push",
                remote_path,
            ],
        ),
        "export --push",
    );
    // Every commit is retrace's: no name from the session reaches a header line.
    let authors = git(
        remote.path(),
        &["log", "--format=%an <%ae>", "refs/retrace/shared"],
    );
    assert!(
        authors.lines().all(|a| a == "retrace <retrace@localhost>"),
        "{authors}"
    );
    // The remote's log shows each turn under its prompt.
    let log = git(
        remote.path(),
        &["log", "--format=%B", "refs/retrace/shared"],
    );
    for n in 1..=20 {
        assert!(
            log.contains(&format!("turn {n}: change things")),
            "turn {n} in:\n{log}"
        );
    }
    // A clone does not fetch side refs: fetched explicitly, as the import's error says.
    let elsewhere = tempfile::tempdir().unwrap();
    let clone = elsewhere.path().join("clone");
    git(
        elsewhere.path(),
        &["clone", "--quiet", remote_path, "clone"],
    );
    let env2 = Env::new();
    let o = env2.run(
        RETRACE,
        &[
            "import",
            "--git-ref",
            "refs/retrace/shared",
            "--repo",
            clone.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("git fetch origin refs/retrace/shared"),
        "{}",
        stderr(&o)
    );
    git(
        &clone,
        &[
            "fetch",
            "--quiet",
            "origin",
            "refs/retrace/shared:refs/retrace/shared",
        ],
    );
    let out = stdout(&succeeded(
        env2.run(
            RETRACE,
            &[
                "import",
                "--git-ref",
                "refs/retrace/shared",
                "--repo",
                clone.to_str().unwrap(),
            ],
        ),
        "import",
    ));
    assert!(out.contains("21 turn(s), 2 checkpoint(s) added"), "{out}");
    let ws2 = env2.open();
    let imported = history(&ws2, "shared");
    assert_eq!(
        imported, original,
        "every turn's record, before and after ids included"
    );
    // Byte for byte: every snapshot restores to the same files in both workspaces.
    let a = restored(&ws, &env, &original);
    let b = restored(&ws2, &env2, &imported);
    assert_eq!(a, b);
    // Blame gives the same turns on the same files.
    let last = original.turns.last().unwrap().after.unwrap();
    for (w, e) in [(&ws, &env), (&ws2, &env2)] {
        w.restore(
            &last,
            retrace::RestoreOptions {
                force: true,
                ..Default::default()
            },
        )
        .unwrap();
        let _ = e;
    }
    for path in ["src/f1.rs", "README.md"] {
        let x = ws.blame(path).unwrap().text();
        let y = ws2.blame(path).unwrap().text();
        assert_eq!(x, y, "{path}");
    }
    // Again: nothing added, nothing changed.
    let again = stdout(&succeeded(
        env2.run(
            RETRACE,
            &[
                "import",
                "--git-ref",
                "refs/retrace/shared",
                "--repo",
                clone.to_str().unwrap(),
            ],
        ),
        "import again",
    ));
    assert!(again.contains("nothing to import"), "{again}");
    assert_eq!(history(&ws2, "shared"), original);
    // More turns, exported again: only they are added to the ref, and imported.
    let s = ws.session("shared");
    turn(&s, "turn 22", || env.write("late.txt", "late"));
    let out = stdout(&succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "shared",
                "export",
                "--git-ref",
                "refs/retrace/shared",
                "--push",
                remote_path,
            ],
        ),
        "export again",
    ));
    assert!(out.contains("1 new commit(s)"), "{out}");
    git(
        &clone,
        &[
            "fetch",
            "--quiet",
            "origin",
            "+refs/retrace/shared:refs/retrace/shared",
        ],
    );
    let out = stdout(&succeeded(
        env2.run(
            RETRACE,
            &[
                "import",
                "--git-ref",
                "refs/retrace/shared",
                "--repo",
                clone.to_str().unwrap(),
            ],
        ),
        "import the new turn",
    ));
    assert!(
        out.contains("1 turn(s), 0 checkpoint(s) added (21 already here)"),
        "{out}"
    );
    assert_eq!(history(&ws2, "shared"), history(&ws, "shared"));
}

/// Every file of `.git` but the objects and what the ref itself adds, with its content.
fn git_dir_state(git_dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(git_dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(git_dir).unwrap().to_path_buf())
        .filter(|p| {
            !p.starts_with("objects")
                && !p.starts_with("refs/retrace")
                && !p.starts_with("logs/refs/retrace")
        })
        .map(|p| {
            let c = std::fs::read(git_dir.join(&p)).unwrap();
            (p, c)
        })
        .collect()
}

#[test]
fn an_export_into_the_workspaces_own_repository_touches_nothing_but_its_ref() {
    let env = Env::new();
    let root = env.root();
    git(root, &["init", "--quiet", "-b", "main"]);
    env.write("a.txt", "one\n");
    env.write("b.txt", "two\n");
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "first"]);
    git(root, &["branch", "side"]);
    // Staged and unstaged changes, which must stay exactly as they are.
    env.write("a.txt", "one, staged\n");
    git(root, &["add", "a.txt"]);
    env.write("b.txt", "two, not staged\n");
    let ws = env.open();
    let s = ws.session("own");
    turn(&s, "agent edits", || env.write("c.txt", "agent\n"));
    turn(&s, "more edits", || env.write("b.txt", "agent again\n"));
    let status = git(root, &["status", "--porcelain=v2", "--branch"]);
    let head = git(root, &["rev-parse", "HEAD"]);
    let index = git(root, &["ls-files", "--stage"]);
    let refs = git(root, &["for-each-ref"]);
    let state = git_dir_state(&root.join(".git"));
    succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "own",
                "export",
                "--git-ref",
                "refs/retrace/own",
                "--repo",
                ".",
            ],
        ),
        "export --repo .",
    );
    assert_eq!(git(root, &["status", "--porcelain=v2", "--branch"]), status);
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(root, &["ls-files", "--stage"]), index);
    let after = git(root, &["for-each-ref"]);
    let added: Vec<&str> = after.lines().filter(|l| !refs.contains(l)).collect();
    assert_eq!(added.len(), 1, "{after}");
    assert!(added[0].ends_with("refs/retrace/own"), "{after}");
    assert_eq!(
        git_dir_state(&root.join(".git")),
        state,
        "nothing else of .git changed"
    );
    assert!(git(root, &["log", "--format=%s", "refs/retrace/own"]).contains("agent edits"));
    // The workspace's files, staged and not, are as they were.
    assert_eq!(env.read("a.txt"), "one, staged\n");
    assert_eq!(env.read("b.txt"), "agent again\n");
}

#[test]
fn a_ref_retrace_did_not_write_or_a_rewritten_one_is_refused() {
    let env = Env::new();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git(r, &["init", "--quiet"]);
    std::fs::write(r.join("f"), "x").unwrap();
    git(r, &["add", "-A"]);
    git(r, &["commit", "--quiet", "-m", "an ordinary commit"]);
    git(r, &["update-ref", "refs/retrace/plain", "HEAD"]);
    refused_import(
        &env,
        "refs/retrace/plain",
        r,
        "was not written by `retrace export`",
    );
    // A retrace commit whose tree was changed (its message kept): refused by its snapshot id.
    let ws = env.open();
    let s = ws.session("rw");
    turn(&s, "one", || env.write("g.txt", "g"));
    succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "rw",
                "export",
                "--git-ref",
                "refs/retrace/rw",
                "--repo",
                r.to_str().unwrap(),
            ],
        ),
        "export",
    );
    let msg = git(r, &["log", "-1", "--format=%B", "refs/retrace/rw"]);
    let parent = git(r, &["rev-parse", "refs/retrace/rw^"]);
    let other_tree = git(r, &["rev-parse", "HEAD^{tree}"]);
    let forged = git(
        r,
        &[
            "commit-tree",
            other_tree.trim(),
            "-p",
            parent.trim(),
            "-m",
            msg.trim_end(),
        ],
    );
    git(r, &["update-ref", "refs/retrace/forged", forged.trim()]);
    let env2 = Env::new();
    refused_import(
        &env2,
        "refs/retrace/forged",
        r,
        "do not rebuild the snapshot",
    );
}

#[test]
fn a_bundle_round_trips_exactly_and_a_damaged_one_writes_nothing() {
    let env = Env::new();
    let ws = twenty_turns(&env);
    let original = history(&ws, "shared");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.bundle");
    let s = ws.session("shared");
    // Undone: the cursor and the redo stack travel too.
    assert!(matches!(
        s.undo(retrace::Mode::Both).unwrap(),
        retrace::Outcome::Restored { .. }
    ));
    // A file beside the bundle that looks like a temporary one is left alone.
    std::fs::write(dir.path().join("s.partial"), "mine").unwrap();
    let b = ws.bundle(&s, None, &file).unwrap();
    assert_eq!((b.turns, b.checkpoints), (21, 2));
    assert_eq!(
        std::fs::read(dir.path().join("s.partial")).unwrap(),
        b"mine"
    );
    let bytes = std::fs::read(&file).unwrap();

    let env2 = Env::new();
    let ws2 = env2.open();
    let objects = |w: &Workspace| {
        w.working_copy()
            .store()
            .reader()
            .unwrap()
            .objects()
            .unwrap()
            .len()
    };
    let refused = |name: &str, data: &[u8], why: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        let e = ws2.unbundle(&p, None).unwrap_err().to_string();
        assert!(
            e.contains(why) && e.contains("nothing was written"),
            "{name}: {e}"
        );
        assert!(ws2.sessions().unwrap().is_empty(), "{name}");
        assert_eq!(objects(&ws2), 0, "{name}");
    };
    // Truncated anywhere.
    for cut in (0..bytes.len())
        .step_by(bytes.len() / 97 + 1)
        .chain([bytes.len() - 1, bytes.len() - 40])
    {
        refused("cut.bundle", &bytes[..cut], "");
    }
    // One flipped bit anywhere.
    for at in (0..bytes.len())
        .step_by(bytes.len() / 89 + 1)
        .chain([9, bytes.len() - 1])
    {
        let mut d = bytes.clone();
        d[at] ^= 0x10;
        refused("flip.bundle", &d, "");
    }
    let mut future = bytes.clone();
    future[8] = 2;
    refused(
        "future.bundle",
        &future,
        "bundle format 2, this retrace reads format 1; upgrade retrace",
    );
    refused(
        "other.bundle",
        b"not a bundle at all, just text",
        "not a retrace bundle",
    );

    let got = ws2.unbundle(&file, None).unwrap();
    assert_eq!((got.turns, got.checkpoints), (21, 2));
    let state = |w: &Workspace| {
        let tx = w.working_copy().store().begin_read().unwrap();
        let l = db::load(&tx, &db::session_key("shared")).unwrap();
        (l.state.cursor, l.state.redo)
    };
    assert_eq!(state(&ws2), state(&ws));
    assert_eq!(state(&ws2).1.len(), 1);
    let imported = history(&ws2, "shared");
    assert_eq!(imported.checkpoints, original.checkpoints);
    assert_eq!(imported.reverts, original.reverts);
    assert_eq!(imported.turns, original.turns);
    assert_eq!(
        restored(&ws, &env, &original),
        restored(&ws2, &env2, &imported)
    );
    // Twice: nothing added.
    let again = ws2.unbundle(&file, None).unwrap();
    assert_eq!((again.turns, again.checkpoints, again.already), (0, 0, 21));
    // Under another name, beside it.
    let renamed = ws2.unbundle(&file, Some("copy")).unwrap();
    assert_eq!(renamed.turns, 21);
    assert_eq!(history(&ws2, "copy").turns, original.turns);
}

/// A change made to a session image before it is bundled.
type Shape = Box<dyn FnOnce(&mut retrace::share::image::SessionImage)>;

/// A bundle of one session over a one-file snapshot, its image shaped by `shape`.
fn tiny_bundle(shape: impl FnOnce(&mut retrace::share::image::SessionImage)) -> Vec<u8> {
    use retrace::history::record::{Counts, HISTORY_VERSION, TurnState};
    use retrace::object::{EntryKind, Tree, TreeEntry};
    use retrace::share::image::{SessionImage, TurnImage};
    let blob = b"hello\n".to_vec();
    let tree = Tree {
        entries: vec![TreeEntry {
            name: b"a.txt".to_vec(),
            kind: EntryKind::File,
            id: ObjectId::of_blob(&blob),
            size: 6,
        }],
    };
    let turn = |number: u64| TurnImage {
        record: TurnRecord {
            version: HISTORY_VERSION,
            number,
            parent: number.checked_sub(1).filter(|p| *p > 0),
            anchor: None,
            leaf: None,
            rounds: Vec::new(),
            prompt: Some(format!("prompt {number}")),
            began_ms: number * 1000,
            ended_ms: Some(number * 1000 + 1),
            before: Some(tree.id()),
            after: Some(tree.id()),
            state: TurnState::Complete,
            reason: None,
            counts: Counts::default(),
        },
        reverts: None,
        steps: Vec::new(),
    };
    let mut image = SessionImage {
        name: "tiny".into(),
        agent: None,
        created_ms: 1,
        cursor: Some(2),
        redo: Vec::new(),
        turns: vec![turn(1), turn(2)],
        checkpoints: Vec::new(),
    };
    shape(&mut image);
    retrace::share::bundle::encode(&image, &[tree], &[blob]).unwrap()
}

#[test]
fn an_import_that_would_rewrite_history_or_reach_outside_is_refused() {
    let env = Env::new();
    let ws = env.open();
    let dir = tempfile::tempdir().unwrap();
    let unbundle = |name: &str, bytes: Vec<u8>| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        ws.unbundle(&p, None).map_err(|e| e.to_string())
    };
    // Records that name another turn, numbers out of range or repeated, a turn running,
    // names a command line or a fast-import stream would take for more than a name.
    let bad: Vec<(&str, Shape)> = vec![
        (
            "agent",
            Box::new(|i| i.agent = Some("x\ncommit refs/heads/main".into())),
        ),
        ("name", Box::new(|i| i.name = "a\nb".into())),
        ("max", Box::new(|i| i.turns[1].record.number = u64::MAX)),
        ("zero", Box::new(|i| i.turns[0].record.number = 0)),
        ("twice", Box::new(|i| i.turns[1].record.number = 1)),
        (
            "pending",
            Box::new(|i| i.turns[1].record.state = retrace::TurnState::Pending),
        ),
        (
            "revert",
            Box::new(|i| {
                i.turns[1].reverts = Some(RevertRecord {
                    version: 1,
                    number: 1,
                    reverts: 99,
                    merged: Vec::new(),
                });
            }),
        ),
    ];
    for (what, shape) in bad {
        let e = unbundle(what, tiny_bundle(shape)).unwrap_err();
        assert!(e.contains("cannot be imported"), "{what}: {e}");
        assert!(ws.sessions().unwrap().is_empty(), "{what}");
    }
    // A snapshot that is a file, not a tree.
    let e = unbundle(
        "blob",
        tiny_bundle(|i| i.turns[1].record.after = Some(ObjectId::of_blob(b"hello\n"))),
    )
    .unwrap_err();
    assert!(e.contains("lacks the tree"), "{e}");
    // Another conversation of the same name: refused, not merged into this one.
    unbundle("mine", tiny_bundle(|_| {})).unwrap();
    let theirs = tiny_bundle(|i| {
        let mut t = i.turns[1].clone();
        t.record.number = 3;
        t.record.parent = Some(2);
        i.turns = vec![t];
        i.cursor = Some(3);
    });
    let e = unbundle("theirs", theirs).unwrap_err();
    assert!(
        e.contains("another history") && e.contains("its turn 1 is not in the import"),
        "{e}"
    );
    assert_eq!(history(&ws, "tiny").turns.len(), 2);
    // Options passed as a repository never reach git.
    let marker = dir.path().join("ran");
    let o = env.run(
        RETRACE,
        &[
            "import",
            "--git-ref",
            "refs/retrace/x",
            &format!("--repo=--upload-pack=touch {}", marker.display()),
        ],
    );
    assert!(!o.status.success());
    assert!(!marker.exists(), "{}", stderr(&o));
}

#[test]
fn a_hostile_git_tree_is_refused_before_anything_is_recorded() {
    let env = Env::new();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git(r, &["init", "--quiet", "--bare"]);
    let blob = {
        let o = Command::new("git")
            .current_dir(r)
            .args(["hash-object", "-w", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        o.stdin
            .as_ref()
            .unwrap()
            .write_all(b"#!/bin/sh\necho pwned\n")
            .unwrap();
        stdout(&o.wait_with_output().unwrap()).trim().to_string()
    };
    let mktree = |listing: String| {
        let mut c = Command::new("git")
            .current_dir(r)
            .args(["mktree"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin
            .take()
            .unwrap()
            .write_all(listing.as_bytes())
            .unwrap();
        stdout(&c.wait_with_output().unwrap()).trim().to_string()
    };
    let hooks = mktree(format!("100755 blob {blob}\tpost-checkout\n"));
    let dotgit = mktree(format!("040000 tree {hooks}\thooks\n"));
    for name in [".GIT", ".git", "node_modules"] {
        let root = mktree(format!("040000 tree {dotgit}\t{name}\n"));
        let msg = format!(
            "p\n\nRetrace-Format: 1\nRetrace-Session: evil\nRetrace-Kind: checkpoint\n\
             Retrace-Checkpoint: 1\nRetrace-Snapshot: {}\n",
            "ab".repeat(32)
        );
        let c = git(r, &["commit-tree", &root, "-m", &msg]);
        git(r, &["update-ref", "refs/retrace/evil", c.trim()]);
        refused_import(&env, "refs/retrace/evil", r, "unsafe name");
    }
}

#[test]
fn a_checkpoint_taken_during_a_turn_waits_for_it_and_exports_stay_incremental() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("mid");
    turn(&s, "first", || env.write("a.txt", "1"));
    let t = s.begin_turn(None, Some("second".into())).unwrap();
    t.wait_before(Duration::from_mins(1)).unwrap();
    env.write("a.txt", "2");
    s.checkpoint(Some("mid-turn".into())).unwrap();
    let first = stdout(&succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "mid",
                "export",
                "--git-ref",
                "refs/retrace/mid",
            ],
        ),
        "export during the turn",
    ));
    assert!(first.contains("1 turn(s), 0 checkpoint(s)"), "{first}");
    env.write("a.txt", "3");
    t.end(None).unwrap();
    let second = stdout(&succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "mid",
                "export",
                "--git-ref",
                "refs/retrace/mid",
            ],
        ),
        "export after it",
    ));
    assert!(second.contains("2 turn(s), 1 checkpoint(s)"), "{second}");
    // An import by URL into this workspace (the same session: nothing to add) leaves the
    // ref its exports write where it was.
    let share = ws.share_repo();
    let tip = git(&share, &["rev-parse", "refs/retrace/mid"]);
    let url = format!("file://{}", share.display());
    let again = stdout(&succeeded(
        env.run(
            RETRACE,
            &["import", "--git-ref", "refs/retrace/mid", "--repo", &url],
        ),
        "import by URL",
    ));
    assert!(again.contains("nothing to import"), "{again}");
    assert_eq!(git(&share, &["rev-parse", "refs/retrace/mid"]), tip);
}

#[test]
fn an_import_killed_midway_records_nothing_and_runs_again_whole() {
    let env = Env::new();
    let ws = twenty_turns(&env);
    succeeded(
        env.run(
            RETRACE,
            &[
                "--session",
                "shared",
                "export",
                "--git-ref",
                "refs/retrace/k",
            ],
        ),
        "export",
    );
    let share = ws.share_repo();
    let env2 = Env::new();
    let pause = env2.root().join("paused");
    let args = [
        "import",
        "--git-ref",
        "refs/retrace/k",
        "--repo",
        share.to_str().unwrap(),
    ];
    // Stopped once its objects are stored, before the session is recorded, then killed.
    let mut child = crate::common::spawn_paused(&env2, &args, Some(("stored", 1, &pause)));
    assert!(
        crate::common::wait_paused(&mut child, &pause),
        "it reached the point"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&pause);
    let ws2 = env2.open();
    assert!(ws2.sessions().unwrap().is_empty(), "no half session");
    crate::common::assert_verified(&env2);
    let out = stdout(&succeeded(env2.run(RETRACE, &args), "import again"));
    assert!(out.contains("21 turn(s), 2 checkpoint(s) added"), "{out}");
    assert_eq!(history(&ws2, "shared"), history(&ws, "shared"));
}

#[test]
fn turns_expired_since_the_last_export_do_not_stop_the_next() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("exp");
    for n in 1..=3 {
        turn(&s, &format!("turn {n}"), || {
            env.write(&format!("f{n}.txt"), format!("{n}"))
        });
    }
    let export = || {
        stdout(&succeeded(
            env.run(
                RETRACE,
                &[
                    "--session",
                    "exp",
                    "export",
                    "--git-ref",
                    "refs/retrace/exp",
                ],
            ),
            "export",
        ))
    };
    assert!(export().contains("3 turn(s)"));
    // Retention takes the snapshots of the first two turns here (the byte budget would).
    ws.working_copy()
        .store()
        .transact(|tx| db::Writer::open(tx, db::session_key("exp")).expire(Some(&[1, 2])))
        .unwrap();
    turn(&s, "turn 4", || env.write("f4.txt", "4"));
    let out = export();
    assert!(
        out.contains("4 turn(s)") && out.contains("1 new commit(s)"),
        "{out}"
    );
    // The ref holds every turn as it was exported: the first two whole, from before.
    let env2 = Env::new();
    let share = ws.share_repo();
    succeeded(
        env2.run(
            RETRACE,
            &[
                "import",
                "--git-ref",
                "refs/retrace/exp",
                "--repo",
                share.to_str().unwrap(),
            ],
        ),
        "import",
    );
    let turns = history(&env2.open(), "exp").turns;
    assert_eq!(turns.len(), 4);
    assert!(
        turns
            .iter()
            .all(|t| t.after.is_some() && t.state == retrace::TurnState::Complete)
    );
    assert_eq!(turns[3].prompt.as_deref(), Some("turn 4"));
}
