//! Model-based property test of sessions: random sequences of agent turns, manual edits,
//! undo in each mode, redo, navigation, checkpoints and restarts, checked step by step
//! against a small in-memory model of what the files, the cursor and the redo stack must be.
//! `PROPTEST_CASES` sets the number of sequences (default 64).

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use crate::common::{Env, assert_verified, regressions_beside_the_source};
use proptest::prelude::*;
use retrace::{Mode, Outcome, Session, Workspace};

/// Files the sequences touch; one lives in a directory that comes and goes.
const FILES: &[&str] = &["a.txt", "b.txt", "c.rs", "dir/d.txt", "dir/sub/e"];

type Files = BTreeMap<&'static str, u8>;

#[derive(Clone, Debug)]
enum Action {
    /// An agent turn: set (Some) or delete (None) some files.
    Turn(Vec<(usize, Option<u8>)>),
    /// The user edits a file between turns.
    UserEdit(usize, Option<u8>),
    Undo(Mode),
    Redo,
    /// Navigate (files and conversation) to the k-th anchor of those recorded so far.
    Navigate(usize),
    /// Navigate the conversation only.
    NavigateConversation(usize),
    Checkpoint,
    /// Drop every handle and open the workspace again, as a new process would.
    Restart,
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Both),
        Just(Mode::Files),
        Just(Mode::Conversation)
    ]
}

fn action() -> impl Strategy<Value = Action> {
    let edit = (0..FILES.len(), proptest::option::weighted(0.8, 0u8..4));
    prop_oneof![
        4 => proptest::collection::vec(edit.clone(), 1..4).prop_map(Action::Turn),
        2 => edit.prop_map(|(f, c)| Action::UserEdit(f, c)),
        3 => mode().prop_map(Action::Undo),
        2 => Just(Action::Redo),
        2 => (0usize..64).prop_map(Action::Navigate),
        1 => (0usize..64).prop_map(Action::NavigateConversation),
        1 => Just(Action::Checkpoint),
        1 => Just(Action::Restart),
    ]
}

struct ModelTurn {
    before: Files,
    after: Files,
    parent: Option<u64>,
}

/// What the session must look like.
#[derive(Default)]
struct Model {
    disk: Files,
    turns: Vec<ModelTurn>,
    cursor: Option<u64>,
    redo: Vec<(u64, Mode)>,
    last_known: Files,
    /// Anchors with the files and cursor they name.
    anchors: Vec<(String, Files, Option<u64>)>,
    checkpoints: u64,
}

fn write_disk(env: &Env, files: &Files) {
    for (i, name) in FILES.iter().enumerate() {
        let p = env.path(name);
        match files.get(name) {
            Some(c) => env.write(name, content(i, *c)),
            None => {
                // Deletes like an editor would, leaving no empty directories behind (the
                // model knows files only; an empty directory is part of a snapshot).
                if fs::remove_file(&p).is_ok() {
                    let mut dir = p.parent();
                    while let Some(d) = dir.filter(|d| *d != env.root()) {
                        if fs::remove_dir(d).is_err() {
                            break;
                        }
                        dir = d.parent();
                    }
                }
            }
        }
    }
}

fn content(file: usize, c: u8) -> String {
    format!("file {file} version {c}\n")
}

fn read_disk(env: &Env) -> Files {
    let mut out = Files::new();
    for (i, name) in FILES.iter().enumerate() {
        if let Ok(s) = fs::read_to_string(env.path(name)) {
            let c = (0..4u8)
                .find(|c| content(i, *c) == s)
                .unwrap_or_else(|| panic!("{name} holds unexpected content {s:?}"));
            out.insert(name, c);
        }
    }
    out
}

fn set(files: &mut Files, f: usize, c: Option<u8>) {
    match c {
        Some(c) => files.insert(FILES[f], c),
        None => files.remove(FILES[f]),
    };
}

/// Paths whose content differs between two file sets.
fn changed(a: &Files, b: &Files) -> Vec<&'static str> {
    FILES
        .iter()
        .copied()
        .filter(|f| a.get(f) != b.get(f))
        .collect()
}

fn kind(o: &Outcome) -> &'static str {
    match o {
        Outcome::Restored { .. } => "restored",
        Outcome::ConversationOnly { .. } => "conversation_only",
        Outcome::NothingToUndo { .. } => "nothing_to_undo",
        Outcome::NothingToRedo => "nothing_to_redo",
        Outcome::Conflict { .. } => "conflict",
        Outcome::Dirty { .. } => "dirty",
        _ => "other",
    }
}

impl Model {
    fn undo(&mut self, mode: Mode) -> &'static str {
        let Some(n) = self.cursor else {
            return "nothing_to_undo";
        };
        let t = &self.turns[n as usize - 1];
        if mode == Mode::Conversation {
            // The files are kept as a numbered checkpoint taken before the cursor moves.
            self.checkpoints += 1;
            self.anchors.push((
                format!("checkpoint:{}", self.checkpoints),
                self.disk.clone(),
                self.cursor,
            ));
            self.cursor = t.parent;
            self.redo.push((n, mode));
            self.last_known = self.disk.clone();
            return "conversation_only";
        }
        let paths = changed(&t.before, &t.after);
        if paths.iter().any(|p| self.disk.get(p) != t.after.get(p)) {
            return "conflict";
        }
        for p in paths {
            match t.before.get(p) {
                Some(c) => self.disk.insert(p, *c),
                None => self.disk.remove(p),
            };
        }
        self.cursor = t.parent;
        self.redo.push((n, mode));
        self.last_known = self.disk.clone();
        "restored"
    }

    fn redo(&mut self) -> &'static str {
        let Some(&(n, mode)) = self.redo.last() else {
            return "nothing_to_redo";
        };
        let t = &self.turns[n as usize - 1];
        if mode == Mode::Conversation {
            self.cursor = Some(n);
            self.redo.pop();
            return "conversation_only";
        }
        let paths = changed(&t.before, &t.after);
        if paths.iter().any(|p| self.disk.get(p) != t.before.get(p)) {
            return "conflict";
        }
        for p in paths {
            match t.after.get(p) {
                Some(c) => self.disk.insert(p, *c),
                None => self.disk.remove(p),
            };
        }
        self.cursor = Some(n);
        self.redo.pop();
        self.last_known = self.disk.clone();
        "restored"
    }

    fn navigate_conversation(&mut self, k: usize) -> Option<(String, &'static str)> {
        if self.anchors.is_empty() {
            return None;
        }
        let (anchor, _, cursor) = self.anchors[k % self.anchors.len()].clone();
        if cursor == self.cursor {
            return Some((anchor, "conversation_only")); // a no-op: redo is kept
        }
        // The files are kept as a checkpoint taken before the cursor moves.
        self.checkpoints += 1;
        self.anchors.push((
            format!("checkpoint:{}", self.checkpoints),
            self.disk.clone(),
            self.cursor,
        ));
        self.cursor = cursor;
        self.redo.clear();
        self.last_known = self.disk.clone();
        Some((anchor, "conversation_only"))
    }

    fn navigate(&mut self, k: usize) -> Option<(String, &'static str)> {
        if self.anchors.is_empty() {
            return None;
        }
        let (anchor, files, cursor) = self.anchors[k % self.anchors.len()].clone();
        if files == self.disk && cursor == self.cursor {
            return Some((anchor, "restored")); // a no-op: redo is kept
        }
        // Unsaved work: what differs from the last known state, but for files deleted
        // since that the target brings back as they were (nothing of them is lost).
        let unsaved = self.disk.keys().chain(self.last_known.keys()).any(|p| {
            let (now, known) = (self.disk.get(p), self.last_known.get(p));
            now != known && !(now.is_none() && files.get(p) == known)
        });
        if unsaved {
            return Some((anchor, "dirty"));
        }
        self.disk = files;
        self.cursor = cursor;
        self.redo.clear();
        self.last_known = self.disk.clone();
        Some((anchor, "restored"))
    }
}

/// A restore records the state it wrote (without scanning again): it must be exactly what
/// a capture of the disk finds.
fn recorded_exactly(ws: &Workspace, o: &Outcome, ctx: &str) {
    if let Outcome::Restored {
        snapshot: Some(id), ..
    } = o
    {
        let disk = ws
            .working_copy()
            .scan_disk(&retrace::NoProgress)
            .unwrap()
            .id;
        assert_eq!(disk, *id, "{ctx}: recorded snapshot differs from the disk");
    }
}

fn open(env: &Env) -> (Workspace, Session) {
    let ws = env.open();
    let s = ws.session("model");
    (ws, s)
}

fn run(actions: &[Action]) {
    let env = Env::new();
    let mut m = Model::default();
    write_disk(&env, &m.disk);
    let (mut _ws, mut s) = open(&env);
    for (step, a) in actions.iter().enumerate() {
        let ctx = format!("step {step}: {a:?}");
        match a {
            Action::Turn(edits) => {
                let t = s.begin_turn(None, Some(format!("step {step}"))).unwrap();
                t.wait_before(Duration::from_secs(60)).unwrap();
                let n = t.number();
                let before = m.disk.clone();
                for (f, c) in edits {
                    set(&mut m.disk, *f, *c);
                }
                write_disk(&env, &m.disk);
                t.end(None).unwrap();
                assert_eq!(n, m.turns.len() as u64 + 1, "{ctx}");
                m.turns.push(ModelTurn {
                    before: before.clone(),
                    after: m.disk.clone(),
                    parent: m.cursor,
                });
                m.anchors
                    .push((format!("turn:{n}:before"), before, m.cursor));
                m.anchors
                    .push((format!("turn:{n}"), m.disk.clone(), Some(n)));
                m.cursor = Some(n);
                m.redo.clear();
                m.last_known = m.disk.clone();
            }
            Action::UserEdit(f, c) => {
                set(&mut m.disk, *f, *c);
                write_disk(&env, &m.disk);
            }
            Action::Undo(mode) => {
                let got = s.undo(*mode).unwrap();
                assert_eq!(kind(&got), m.undo(*mode), "{ctx}: {got:?}");
                recorded_exactly(&_ws, &got, &ctx);
            }
            Action::Redo => {
                let got = s.redo().unwrap();
                assert_eq!(kind(&got), m.redo(), "{ctx}: {got:?}");
                recorded_exactly(&_ws, &got, &ctx);
            }
            Action::Navigate(k) => {
                if let Some((anchor, want)) = m.navigate(*k) {
                    let got = s.navigate(&anchor, Mode::Both).unwrap();
                    assert_eq!(kind(&got), want, "{ctx} to {anchor}: {got:?}");
                    recorded_exactly(&_ws, &got, &ctx);
                }
            }
            Action::NavigateConversation(k) => {
                if let Some((anchor, want)) = m.navigate_conversation(*k) {
                    let got = s.navigate(&anchor, Mode::Conversation).unwrap();
                    assert_eq!(kind(&got), want, "{ctx} to {anchor}: {got:?}");
                }
            }
            Action::Checkpoint => {
                let got = s.checkpoint(None).unwrap();
                assert!(matches!(got, Outcome::Checkpointed { .. }), "{ctx}");
                m.checkpoints += 1;
                m.anchors.push((
                    format!("checkpoint:{}", m.checkpoints),
                    m.disk.clone(),
                    m.cursor,
                ));
                m.last_known = m.disk.clone();
            }
            Action::Restart => {
                drop(s);
                (_ws, s) = open(&env);
            }
        }
        assert_eq!(read_disk(&env), m.disk, "{ctx}: files");
        let st = s.status().unwrap();
        assert_eq!(st.cursor, m.cursor, "{ctx}: cursor");
        assert_eq!(st.redo_turn, m.redo.last().copied(), "{ctx}: redo");
        assert_eq!(st.can_redo, !m.redo.is_empty(), "{ctx}: can redo");
    }
    assert_verified(&env);
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: regressions_beside_the_source(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sessions_follow_the_model(actions in proptest::collection::vec(action(), 1..28)) {
        run(&actions);
    }
}
