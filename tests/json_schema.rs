//! `--json` answers scripts can trust (issue 40, point 21): every command that takes `--json`
//! prints one object with `version`, `result` and `ok`, on stdout alone, in the shape
//! `docs/json.md` gives its result kind, whichever command answers it. This runs each such
//! command through its successes, refusals and failures and checks every answer against the
//! schema fragments of that file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Env, LiveOwner, RETRACE, stderr, stdout};

/// The schema fragments of `docs/json.md` by name: the ```json block after each
/// "#### `name`" heading.
fn fragments(doc: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut name: Option<String> = None;
    let mut block: Option<String> = None;
    for line in doc.lines() {
        if let Some(text) = block.as_mut() {
            if line == "```" {
                let n = name
                    .take()
                    .expect("a json block follows a #### `name` heading");
                let v: Value = serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("docs/json.md: `{n}` is not JSON: {e}"));
                jsonschema::meta::validate(&v)
                    .unwrap_or_else(|e| panic!("docs/json.md: `{n}` is not a schema: {e}"));
                assert!(out.insert(n.clone(), v).is_none(), "`{n}` twice");
                block = None;
            } else {
                text.push_str(line);
                text.push('\n');
            }
        } else if let Some(h) = line.strip_prefix("#### `") {
            name = Some(h.trim_end_matches('`').to_string());
        } else if line == "```json" && name.is_some() {
            block = Some(String::new());
        }
    }
    out
}

/// The commands the table "Which command answers what" lists (`undo`, `step begin`, …).
fn documented_commands(doc: &str) -> BTreeSet<String> {
    let table = doc
        .split("## Which command answers what")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("docs/json.md has its command table");
    let mut out = BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap_or_default();
        for name in first.split('`').skip(1).step_by(2) {
            out.insert(name.to_string());
        }
    }
    out
}

struct Checker {
    defs: Value,
    /// The result kinds answered, and by which commands.
    seen: BTreeMap<String, BTreeSet<String>>,
    /// The commands run (`turn begin`, `undo`), without their arguments.
    commands: BTreeSet<String>,
}

impl Checker {
    fn new() -> Checker {
        let doc =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
                .unwrap();
        Checker {
            defs: Value::Object(fragments(&doc).into_iter().collect()),
            seen: BTreeMap::new(),
            commands: BTreeSet::new(),
        }
    }

    /// Whether `v` has the shape of the fragment `name`: the errors, if not.
    fn errors(&self, name: &str, v: &Value) -> Vec<String> {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": self.defs,
            "$ref": format!("#/$defs/{name}"),
        });
        let validator = jsonschema::draft202012::new(&schema).expect("the fragments compile");
        validator
            .iter_errors(v)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// Runs `retrace ARGS --json` in `env` (with `session` when given) and checks the answer:
    /// one object on one line of stdout, nothing on stderr, `version` 1, `ok` exactly when
    /// the exit code is 0, and the shape of its `result`'s fragment. Returns it.
    fn run(&mut self, env: &Env, session: Option<&str>, args: &[&str]) -> Value {
        let mut all: Vec<&str> = Vec::new();
        if let Some(s) = session {
            all.extend(["--session", s]);
        }
        // Before a `--` that ends the options.
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        all.extend_from_slice(&args[..at]);
        all.push("--json");
        all.extend_from_slice(&args[at..]);
        let o = env.run(RETRACE, &all);
        let (out, err) = (stdout(&o), stderr(&o));
        let shown = format!("retrace {}: {out}{err}", all.join(" "));
        assert_eq!(err, "", "{shown}: --json answers on stdout alone");
        assert_eq!(out.lines().count(), 1, "{shown}: one line");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(v["version"], 1, "{shown}");
        let result = v["result"]
            .as_str()
            .unwrap_or_else(|| panic!("{shown}: no result"));
        let code = o.status.code();
        assert_eq!(
            v["ok"].as_bool(),
            Some(code == Some(0)),
            "{shown}: ok and exit code"
        );
        assert!(
            self.defs.get(result).is_some(),
            "{shown}: result `{result}` is not in docs/json.md"
        );
        let errors = self.errors(result, &v);
        assert!(
            errors.is_empty(),
            "{shown}\ndoes not match `{result}`: {errors:#?}"
        );
        // A preview's refusal is the answer the command would give: of its kind's shape.
        if let Some(r) = v.get("refused").and_then(|r| r["result"].as_str()) {
            let errors = self.errors(r, &v["refused"]);
            assert!(
                errors.is_empty(),
                "{shown}\nrefused is no `{r}`: {errors:#?}"
            );
            self.note(r, &all);
        }
        self.note(result, &all);
        v
    }

    /// Notes that `args` (a call's arguments, `--json` and all) answered `result`.
    fn note(&mut self, result: &str, args: &[&str]) {
        let mut words = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if ["-C", "--session"].contains(a) {
                it.next();
            } else if !a.starts_with('-') {
                words.push(*a);
            }
        }
        let command = match words[..] {
            [c @ ("turn" | "step"), sub, ..] => format!("{c} {sub}"),
            [c, ..] => c.to_string(),
            [] => String::new(),
        };
        self.seen
            .entry(result.to_string())
            .or_default()
            .insert(command.clone());
        self.commands.insert(command);
    }
}

fn id_of(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap().to_string()
}

/// Every command with `--json`, through successes, refusals and failures: each answer in
/// the shape docs/json.md gives its result kind.
#[test]
fn every_json_answer_has_the_documented_shape_of_its_result() {
    let mut c = Checker::new();
    let env = Env::new();
    let empty = Env::new();
    let in_empty = ["-C", empty.root().to_str().unwrap()];
    // Before anything exists (answered without creating a store).
    for args in [&["status"][..], &["log"], &["sessions"], &["undo"]] {
        c.run(&env, None, &[&in_empty[..], args].concat());
    }
    env.write("a.txt", "a1\n");
    env.write("d/x.txt", "x\n");
    let first = id_of(&c.run(&env, None, &["snapshot"]), "id");
    c.run(&env, None, &["snapshot", "again"]);
    c.run(&env, None, &["config"]);
    env.write("a.txt", "a2\n");
    c.run(&env, None, &["diff"]);
    c.run(&env, None, &["diff", "-p"]);
    c.run(&env, None, &["diff", "--stat", &first]);
    // A turn with a step.
    c.run(&env, Some("s1"), &["turn", "begin"]);
    c.run(
        &env,
        Some("s1"),
        &["step", "begin", "--tool", "Write", "--file", "a.txt"],
    );
    env.write("a.txt", "a3\n");
    env.write("b.txt", "b\n");
    c.run(&env, Some("s1"), &["step", "end"]);
    c.run(&env, Some("s1"), &["turn", "end"]);
    c.run(&env, Some("s1"), &["turn", "end"]);
    c.run(&env, Some("s1"), &["step", "end"]);
    // Every form of log, show and blame.
    let log = c.run(&env, None, &["log"]);
    assert_eq!(log["session"], Value::Null);
    assert_eq!(log["entries"][0]["kind"], "snapshot");
    c.run(&env, None, &["log", "--", "a.txt"]);
    c.run(&env, None, &["log", "--snapshots", "--", "a.txt"]);
    let log = c.run(&env, Some("s1"), &["log"]);
    assert_eq!(
        log["session"]["name"], "s1",
        "a session's log is the same object"
    );
    assert_eq!(log["entries"][0]["kind"], "turn");
    c.run(&env, Some("s1"), &["log", "--steps"]);
    c.run(&env, Some("s1"), &["log", "--", "a.txt"]);
    c.run(&env, Some("s1"), &["log", "--snapshots"]);
    c.run(&env, Some("s1"), &["show", "turn:1"]);
    c.run(&env, Some("s1"), &["checkpoint", "cp1"]);
    c.run(&env, Some("s1"), &["show", "checkpoint:1"]);
    c.run(&env, None, &["show", &first]);
    c.run(&env, None, &["blame", "a.txt"]);
    c.run(&env, Some("s1"), &["blame", "a.txt"]);
    c.run(&env, None, &["sessions"]);
    c.run(&env, None, &["status"]);
    c.run(&env, Some("s1"), &["status"]);
    // Undo, redo, revert and navigate, with their dry runs, their refusals and their ends.
    c.run(&env, Some("s1"), &["undo", "--dry-run"]);
    c.run(&env, Some("s1"), &["undo"]);
    c.run(&env, Some("s1"), &["undo"]);
    c.run(&env, Some("s1"), &["redo", "--dry-run"]);
    c.run(&env, Some("s1"), &["redo"]);
    c.run(&env, Some("s1"), &["redo"]);
    c.run(&env, Some("s1"), &["revert", "turn:1", "--dry-run"]);
    c.run(&env, Some("s1"), &["navigate", "checkpoint:1", "--dry-run"]);
    c.run(&env, Some("s1"), &["navigate", "checkpoint:1"]);
    env.write("a.txt", "unsaved\n");
    c.run(&env, Some("s1"), &["undo"]);
    c.run(&env, Some("s1"), &["undo", "--dry-run"]);
    c.run(&env, Some("s1"), &["navigate", "turn:1"]);
    // A restore: the same `dirty` as the session commands', and the same `restored`.
    c.run(&env, None, &["restore", &first, "--dry-run"]);
    let dirty = c.run(&env, None, &["restore", &first, "--", "a.txt"]);
    assert_eq!(dirty["result"], "dirty");
    assert_eq!(dirty["paths"], json!(["a.txt"]));
    let restored = c.run(&env, Some("s1"), &["restore", "turn:1:before", "--force"]);
    assert_eq!(restored["files_written"], json!(["a.txt"]), "{restored}");
    assert!(restored["safety_snapshot"].is_string(), "{restored}");
    // What turn 1 changed is now as before it, but for b.txt, the user's: nothing restored.
    c.run(&env, Some("s1"), &["revert", "turn:1"]);
    // Another session's running turn: `held` by a restore, `busy` for its own undo.
    let owner = LiveOwner::start();
    c.run(
        &env,
        Some("s2"),
        &["turn", "begin", "--owner-pid", &owner.pid()],
    );
    c.run(
        &env,
        Some("s2"),
        &["step", "begin", "--tool", "Write", "--file", "d/x.txt"],
    );
    env.write("d/x.txt", "x by s2\n");
    c.run(&env, Some("s2"), &["step", "end"]);
    c.run(&env, Some("s1"), &["checkpoint", "before restoring"]);
    let held = c.run(&env, None, &["restore", &first, "--", "d/x.txt"]);
    assert_eq!(held["result"], "held", "{held}");
    c.run(
        &env,
        None,
        &["restore", &first, "--dry-run", "--", "d/x.txt"],
    );
    c.run(&env, Some("s2"), &["undo"]);
    c.run(&env, Some("s2"), &["turn", "end"]);
    drop(owner);
    // Calls that go wrong.
    c.run(&env, None, &["show", "nosuchthing"]);
    c.run(&env, None, &["log", "-n", "x"]);
    c.run(&env, None, &["bogus"]);
    c.run(&env, Some("nobody"), &["undo"]);
    // Maintenance.
    c.run(&env, None, &["gc", "--dry-run"]);
    c.run(&env, None, &["gc"]);
    c.run(&env, None, &["repair"]);
    // Sharing, last: the sessions it adds change what the calls above would pick.
    let shared = tempfile::tempdir().unwrap();
    let bundle = shared.path().join("s1.bundle");
    let bundle = bundle.to_str().unwrap();
    c.run(&env, Some("s1"), &["bundle", "-o", bundle]);
    c.run(&env, None, &["unbundle", bundle, "--as", "s1-copy"]);
    c.run(&env, None, &["unbundle", bundle, "--as", "s1-copy"]);
    std::fs::write(shared.path().join("bad.bundle"), "not a bundle").unwrap();
    let bad = shared.path().join("bad.bundle");
    let refused = c.run(&env, None, &["unbundle", bad.to_str().unwrap()]);
    assert_eq!(refused["result"], "refused", "{refused}");
    let exported = c.run(
        &env,
        Some("s1"),
        &["export", "--git-ref", "refs/retrace/s1"],
    );
    assert_eq!(exported["result"], "exported", "{exported}");
    c.run(
        &env,
        None,
        &["import", "--git-ref", "refs/retrace/s1", "--as", "s1-git"],
    );
    c.run(
        &env,
        Some("s1"),
        &["export", "--git-ref", "refs/heads/main"],
    );
    c.run(
        &env,
        Some("s1"),
        &["export", "1..x", "--git-ref", "refs/retrace/x"],
    );

    // Every kind that can be brought about here was, and by the commands expected.
    let reached: BTreeSet<&str> = c.seen.keys().map(String::as_str).collect();
    for kind in [
        "begun",
        "blame",
        "bundled",
        "busy",
        "checkpointed",
        "config",
        "conflict",
        "diff",
        "dirty",
        "ended",
        "gc",
        "exported",
        "held",
        "imported",
        "log",
        "no_pending_turn",
        "no_step",
        "nothing_restored",
        "nothing_to_redo",
        "nothing_to_undo",
        "preview",
        "refused",
        "repair",
        "restored",
        "sessions",
        "show",
        "snapshot",
        "status",
        "step",
        "usage",
    ] {
        assert!(
            reached.contains(kind),
            "no answer was `{kind}`: {:?}",
            c.seen
        );
    }
    assert!(c.seen["dirty"].contains("restore") && c.seen["dirty"].contains("navigate"));
    assert!(c.seen["restored"].contains("restore") && c.seen["restored"].contains("undo"));
    // Every command docs/json.md lists was run, and every command with --json is listed.
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
        .unwrap();
    let listed = documented_commands(&doc);
    for command in &listed {
        assert!(
            c.commands.contains(command),
            "`{command}` --json was never run"
        );
    }
    for command in commands_with_json(&env) {
        assert!(
            listed.contains(&command),
            "`{command}` takes --json; docs/json.md omits it"
        );
    }
}

/// The commands (`undo`, `turn begin`) whose help offers `--json`.
fn commands_with_json(env: &Env) -> Vec<String> {
    let help = |args: &[&str]| stdout(&env.run(RETRACE, &[&["help"][..], args].concat()));
    // The command list: indented `name  summary` lines between "Usage:" and "Options:".
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Usage:"))
            .take_while(|l| !l.starts_with("Options:"))
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| !l.starts_with(' '))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.chars().all(|c| c.is_ascii_lowercase()) && *n != "help")
            .map(str::to_string)
            .collect()
    };
    let mut out = Vec::new();
    let top = help(&[]);
    let mut all = names(&top);
    all.extend(["hook", "serve", "mcp", "step"].map(str::to_string));
    assert!(all.contains(&"undo".to_string()), "{top}");
    for name in all {
        let text = help(&[&name]);
        let subs = if text.contains("\nCommands:") {
            names(&text)
        } else {
            Vec::new()
        };
        if subs.is_empty() {
            if text.contains("--json") {
                out.push(name);
            }
            continue;
        }
        for sub in subs {
            if help(&[&name, &sub]).contains("--json") {
                out.push(format!("{name} {sub}"));
            }
        }
    }
    out
}
