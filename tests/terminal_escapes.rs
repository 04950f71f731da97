//! Prompts, labels and session names come from conversations, pasted text and injected
//! content: one holding `ESC]0;…BEL` (retitle the terminal), `ESC[2J` (clear it), a lone CR
//! (overwrite the line) or U+202E (reverse what follows) is printed escaped by every command
//! a person reads (`log`, `show`, `blame`, `undo`, `sessions`), and exact in `--json`.

use serde_json::Value;

use crate::common::{Env, RETRACE, stderr, stdout};

const PROMPT: &str = "retitle \x1b]0;pwned\x07 clear \x1b[2J\rover \u{202e}txt.exe\nsecond line";
/// The first line of [`PROMPT`] as a terminal is given it.
const SHOWN: &str = r"retitle \x1b]0;pwned\x07 clear \x1b[2J\rover \u{202e}txt.exe";
const NAME: &str = "evil\x1b]0;x\x07";
const LABEL: &str = "label \x1b[2J\u{202e}";

/// Runs `retrace` and returns its stdout, checked: success, and nothing on stdout or stderr
/// that a terminal would act on.
fn shown(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{args:?}: {out}{err}");
    for (what, text) in [("stdout", &out), ("stderr", &err)] {
        let raw: Vec<char> = text
            .chars()
            .filter(|c| {
                (c.is_control() && *c != '\n')
                    || ('\u{202a}'..='\u{202e}').contains(c)
                    || ('\u{2066}'..='\u{2069}').contains(c)
            })
            .collect();
        assert!(
            raw.is_empty(),
            "{args:?} printed {raw:?} raw on {what}:\n{text}"
        );
    }
    out
}

fn json(env: &Env, args: &[&str]) -> Value {
    let o = env.run(RETRACE, &[args, &["--json"]].concat());
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

#[test]
fn prompts_labels_and_names_reach_the_terminal_escaped_and_json_exact() {
    let env = Env::new();
    env.write("notes.txt", "one\n");
    let chat = ["--session", "chat"];
    shown(
        &env,
        &[&chat[..], &["turn", "begin", "--prompt", PROMPT]].concat(),
    );
    env.write("notes.txt", "one\ntwo\n");
    shown(&env, &[&chat[..], &["turn", "end"]].concat());

    // log: the first line, escaped; --json: the whole prompt.
    let out = shown(&env, &[&chat[..], &["log"]].concat());
    assert!(out.contains(SHOWN), "{out}");
    let v = json(&env, &[&chat[..], &["log"]].concat());
    assert_eq!(v["entries"][0]["text"], PROMPT);
    // log -- PATH: every session's entries that changed it.
    let out = shown(&env, &["log", "--", "notes.txt"]);
    assert!(out.contains(SHOWN), "{out}");

    // show: the prompt in full, line by line, escaped.
    let out = shown(&env, &[&chat[..], &["show", "turn:1"]].concat());
    assert!(
        out.contains(&format!("    {SHOWN}\n    second line\n")),
        "{out}"
    );
    let v = json(&env, &[&chat[..], &["show", "turn:1"]].concat());
    assert_eq!(v["text"], PROMPT);

    // blame: the line `two` came from the turn; its origin names the prompt, cut.
    let out = shown(&env, &[&chat[..], &["blame", "notes.txt"]].concat());
    let line = out.lines().find(|l| l.ends_with("| two")).unwrap();
    assert!(line.contains(r"retitle \x1b]0;pwned\x07 clear"), "{out}");
    let v = json(&env, &[&chat[..], &["blame", "notes.txt"]].concat());
    let turn = v["ranges"].as_array().unwrap().iter();
    let turn = turn.clone().find(|r| r["origin"]["kind"] == "turn");
    assert_eq!(
        turn.unwrap()["origin"]["prompt"],
        PROMPT.lines().next().unwrap(),
        "{v}"
    );

    // undo: the prompt it takes back, escaped; redone and undone again with --json: exact.
    let out = shown(&env, &[&chat[..], &["undo"]].concat());
    assert!(
        out.contains(&format!("prompt: {SHOWN}\nsecond line")),
        "{out}"
    );
    shown(&env, &[&chat[..], &["redo"]].concat());
    let v = json(&env, &[&chat[..], &["undo"]].concat());
    assert_eq!(v["prompt"], PROMPT);

    // A session's name and a checkpoint's label.
    let evil = ["--session", NAME];
    shown(&env, &[&evil[..], &["checkpoint", LABEL]].concat());
    let out = shown(&env, &["sessions"]);
    assert!(out.contains(r"evil\x1b]0;x\x07"), "{out}");
    let out = shown(&env, &[&evil[..], &["log"]].concat());
    assert!(out.contains(r"label \x1b[2J\u{202e}"), "{out}");
    let v = json(&env, &["sessions"]);
    let names: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(names.contains(&NAME), "{v}");
    let v = json(&env, &[&evil[..], &["log"]].concat());
    assert_eq!(v["entries"][0]["text"], LABEL);
}
