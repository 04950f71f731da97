//! Model-based property test of `revert`: random turns over a few text files by
//! two sessions and edits by the user between them, then a revert of a random past turn
//! (forced or not). A small model computes the files the revert must leave (the turn's own
//! lines taken back, every later change kept, clean merges included, a file the disk holds
//! as the turn left it but another writer last wrote left alone: the ownership rule) or the
//! conflict that must leave every file as it was; undo of the revert must give back the disk exactly, and
//! redo the revert's result exactly. `PROPTEST_CASES` sets the number of cases (default
//! 250; `=5000` for a longer hunt).

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use crate::common::{Env, regressions_beside_the_source};
use proptest::prelude::*;
use retrace::{NoProgress, OpOptions, Outcome};

/// The files; one in a directory that comes and goes.
const FILES: &[&str] = &["a.txt", "b.txt", "dir/c.txt"];
/// Lines a file's content is made of, each its own slot (separated by fixed lines, so
/// changes to two slots never touch adjacent lines).
const SLOTS: usize = 4;

/// A file's content: one value per slot.
type Content = [u8; SLOTS];
type Files = BTreeMap<&'static str, Content>;

#[derive(Clone, Debug)]
enum Edit {
    /// Set one slot (creating the file, all slots 0, if absent).
    Slot(usize, u8),
    Delete,
}

#[derive(Clone, Debug)]
enum Step {
    /// A turn of session 0 or 1 making these edits.
    Turn(usize, Vec<(usize, Edit)>),
    /// The user edits a file between turns (no snapshot sees it until the next one).
    User(usize, Edit),
}

fn edit() -> impl Strategy<Value = (usize, Edit)> {
    (
        0..FILES.len(),
        prop_oneof![
            6 => (0..SLOTS, 1u8..4).prop_map(|(s, v)| Edit::Slot(s, v)),
            1 => Just(Edit::Delete),
        ],
    )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..2, proptest::collection::vec(edit(), 1..4)).prop_map(|(s, e)| Step::Turn(s, e)),
        2 => edit().prop_map(|(f, e)| Step::User(f, e)),
    ]
}

fn render(file: usize, c: &Content) -> String {
    (0..SLOTS)
        .map(|k| format!("{file} separator {k}\n{file} slot {k} = {}\n", c[k]))
        .collect()
}

fn apply(files: &mut Files, f: usize, e: &Edit) {
    match e {
        Edit::Slot(k, v) => files.entry(FILES[f]).or_insert([0; SLOTS])[*k] = *v,
        Edit::Delete => {
            files.remove(FILES[f]);
        }
    }
}

fn write_disk(env: &Env, files: &Files) {
    for (i, name) in FILES.iter().enumerate() {
        let p = env.path(name);
        match files.get(name) {
            Some(c) => {
                let text = render(i, c);
                if fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
                    env.write(name, text);
                }
            }
            None => {
                if fs::remove_file(&p).is_ok()
                    && let Some(d) = p.parent().filter(|d| *d != env.root())
                {
                    let _ = fs::remove_dir(d);
                }
            }
        }
    }
}

/// The files on disk, as the model spells them (a file of any other shape fails the test).
fn read_disk(env: &Env) -> Files {
    let mut out = Files::new();
    for (i, name) in FILES.iter().enumerate() {
        let Ok(text) = fs::read_to_string(env.path(name)) else {
            continue;
        };
        let mut c = [0; SLOTS];
        for (k, slot) in c.iter_mut().enumerate() {
            let prefix = format!("{i} slot {k} = ");
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("{name}: no slot {k} in {text:?}"));
            *slot = line.parse().unwrap();
        }
        assert_eq!(render(i, &c), text, "{name} holds lines of no model");
        out.insert(name, c);
    }
    out
}

/// Who last changed a file, as the ledger sees it: a session's turn, or the user (between
/// turns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    Session(usize),
    User,
}

/// Files whose content differs between `old` and `new`.
fn changed<'a>(old: &'a Files, new: &'a Files) -> impl Iterator<Item = &'static str> + 'a {
    FILES
        .iter()
        .copied()
        .filter(move |f| old.get(f) != new.get(f))
}

/// What reverting session `session`'s change `before` → `after` over `disk` must give:
/// `Ok(files)`, or the conflicting paths (`force` then takes the before-version there). The
/// ownership rule: a file the disk holds as the turn left it, but in a version the session
/// never wrote there (another writer's), is left as it is.
fn model_revert(
    session: usize,
    writers: &BTreeMap<&'static str, Vec<(Option<Content>, Writer)>>,
    before: &Files,
    after: &Files,
    disk: &Files,
    force: bool,
) -> Result<Files, Vec<&'static str>> {
    let mut out = disk.clone();
    let mut conflicts = Vec::new();
    for name in FILES {
        let (b, a, d) = (before.get(name), after.get(name), disk.get(name));
        if b == a || d == b {
            continue;
        }
        let back = |out: &mut Files| match b {
            Some(c) => out.insert(name, *c),
            None => out.remove(name),
        };
        if d == a {
            // The ownership rule: taken back only where the session left this version.
            let left = writers.get(name).is_some_and(|h| {
                h.iter()
                    .any(|(c, w)| c.as_ref() == d && *w == Writer::Session(session))
            });
            if left {
                back(&mut out);
            }
            continue;
        }
        let (Some(b), Some(a), Some(d)) = (b, a, d) else {
            conflicts.push(*name);
            if force {
                back(&mut out);
            }
            continue;
        };
        let mut merged = *d;
        let mut clash = false;
        for k in 0..SLOTS {
            // base: the turn's after-version; ours: the disk; theirs: its before-version.
            if d[k] == a[k] {
                merged[k] = b[k];
            } else if b[k] != a[k] && d[k] != b[k] {
                clash = true;
            }
        }
        if clash {
            conflicts.push(*name);
            if force {
                out.insert(name, *b);
            }
        } else {
            out.insert(name, merged);
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    Ok(out)
}

fn run(steps: &[Step], pick: usize, force: bool) {
    let env = Env::new();
    let ws = env.open();
    let sessions = [ws.session("zero"), ws.session("one")];
    let mut disk = Files::new();
    // (session, turn number, before, after)
    let mut turns: Vec<(usize, u64, Files, Files)> = Vec::new();
    // The ledger's model: each file's versions with their writers, learned at each capture.
    let mut writers: BTreeMap<&'static str, Vec<(Option<Content>, Writer)>> = BTreeMap::new();
    let mut captured = Files::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Turn(s, edits) => {
                let t = sessions[*s]
                    .begin_turn(None, Some(format!("step {i}")))
                    .unwrap();
                t.wait_before(Duration::from_secs(60)).unwrap();
                for f in changed(&captured, &disk) {
                    writers
                        .entry(f)
                        .or_default()
                        .push((disk.get(f).copied(), Writer::User));
                }
                let n = t.number();
                let before = disk.clone();
                for (f, e) in edits {
                    apply(&mut disk, *f, e);
                }
                write_disk(&env, &disk);
                t.end(None).unwrap();
                for f in changed(&before, &disk) {
                    writers
                        .entry(f)
                        .or_default()
                        .push((disk.get(f).copied(), Writer::Session(*s)));
                }
                captured = disk.clone();
                turns.push((*s, n, before, disk.clone()));
            }
            Step::User(f, e) => {
                apply(&mut disk, *f, e);
                write_disk(&env, &disk);
            }
        }
    }
    if turns.is_empty() {
        return;
    }
    let (s, n, before, after) = &turns[pick % turns.len()];
    let session = &sessions[*s];
    let opts = OpOptions {
        force,
        progress: &NoProgress,
    };
    // The revert's own look at the disk: edits since the last turn are the user's.
    for f in changed(&captured, &disk) {
        writers
            .entry(f)
            .or_default()
            .push((disk.get(f).copied(), Writer::User));
    }
    let expected = model_revert(*s, &writers, before, after, &disk, force);
    let got = session.revert(*n, opts).unwrap();
    let ctx = format!("revert of turn {n} of session {s} (force {force}): {got:?}");
    match expected {
        Err(conflicts) => {
            let Outcome::Conflict { paths, .. } = &got else {
                panic!("{ctx}: expected a conflict on {conflicts:?}");
            };
            assert_eq!(paths, &conflicts, "{ctx}");
            assert_eq!(read_disk(&env), disk, "{ctx}: a conflict writes nothing");
        }
        Ok(result) if result == disk => {
            assert!(
                matches!(
                    got,
                    Outcome::NothingToUndo { .. }
                        | Outcome::Restored { .. }
                        | Outcome::NothingRestored { .. }
                ),
                "{ctx}: nothing to change"
            );
            assert_eq!(read_disk(&env), disk, "{ctx}");
        }
        Ok(result) => {
            assert!(matches!(got, Outcome::Restored { .. }), "{ctx}");
            assert_eq!(read_disk(&env), result, "{ctx}");
            // Undo takes it back exactly; redo redoes it exactly.
            let undone = session.undo(retrace::Mode::Both).unwrap();
            assert!(
                matches!(undone, Outcome::Restored { .. }),
                "{ctx}: undo {undone:?}"
            );
            assert_eq!(read_disk(&env), disk, "{ctx}: after undo");
            let redone = session.redo().unwrap();
            assert!(
                matches!(redone, Outcome::Restored { .. }),
                "{ctx}: redo {redone:?}"
            );
            assert_eq!(read_disk(&env), result, "{ctx}: after redo");
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: regressions_beside_the_source(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn revert_follows_the_model(
        steps in proptest::collection::vec(step(), 1..7),
        pick in 0usize..16,
        force in proptest::bool::weighted(0.3),
    ) {
        run(&steps, pick, force);
    }
}
