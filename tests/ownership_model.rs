//! A random model checker of the ownership rule (issue 38): three sessions driven through the
//! library in-process (turns that overlap in time, edit and shell steps, undo, redo, revert,
//! the model's undo of its running turn, navigation, restores made for a session; session C's
//! turns are owned by a process that may be killed mid-turn) and the user (edits outside
//! every step, restores of its own). Steps of different sessions never overlap, apart from
//! explicitly generated pairs of shell steps (their writes are then "several sessions").
//!
//! Each line a writer adds is unique and names its author, so the oracle reads ownership off
//! the content. After each operation of session X (undo, redo, revert, undo of its running
//! turn): every line it removed or added is X's own, one X's writes removed before, or one
//! X's operations put back (what X takes back or re-applies is X's alone), and no line two
//! sessions' steps at once wrote or removed, and nobody changed since, is touched. A restore
//! never changes a path another session's running turn changed so far (unless forced), and
//! a restore made for X never changes a path another session last wrote, unless the path
//! holds again a version X left there. A navigation (whole workspace by design) names in
//! `rewound` each path it changes that another writer last wrote. No operation returns an
//! error other than a documented refusal. At the end, every version a file held at a turn's
//! or a captured step's boundary is in some snapshot. The only shape the model steps around
//! is the one no ledger can tell: the user writing while a turn runs that has reported no
//! step yet (an agent without steps is the writer of whatever changes during its turn).
//!
//! `PROPTEST_CASES` sets the number of cases, of 50 operations on average: 60 by default
//! (about 3000 steps, seconds). The shortest violations the checker found are the plain
//! tests below. A fixed seed keeps CI on the same cases (`PROPTEST_RNG_SEED=random`
//! explores; 4000 random cases ran clean when this was written).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::time::Duration;

use crate::common::{Env, LiveOwner, regressions_beside_the_source};
use proptest::prelude::*;
use retrace::{
    Error, Mode, NoProgress, OpOptions, Outcome, RestoreError, RestoreOptions, Session, Workspace,
};

/// The files.
const FILES: &[&str] = &["f0.txt", "f1.txt", "f2.txt", "d/f3.txt", "f4.txt", "f5.txt"];
/// Session names; index 3 is the user.
const NAMES: &[&str] = &["A", "B", "C"];
const USER: usize = 3;

/// A file's content: its lines, each `<author><serial>`.
type Lines = Vec<String>;
type Disk = BTreeMap<usize, Lines>;
/// A version a file held and the actor that left it (None: two sessions' steps at once).
type Left = (Option<usize>, Option<Lines>);

#[derive(Clone, Copy, Debug)]
enum Write {
    /// Append a new line.
    Append,
    /// Replace the content by one new line.
    Rewrite,
    /// Delete the file (shell steps and the user only).
    Delete,
}

#[derive(Clone, Debug)]
enum Op {
    Begin(usize),
    End(usize),
    /// An edit tool's call of a session naming one file.
    Edit(usize, usize, Write),
    /// A shell tool's call of a session writing some files.
    Shell(usize, Vec<(usize, Write)>),
    /// Two sessions' shell steps at once, each writing some files.
    Overlap(usize, usize, Vec<(usize, Write)>, Vec<(usize, Write)>),
    /// The user, outside every step.
    User(usize, Write),
    Undo(usize),
    Redo(usize),
    Revert(usize, usize),
    UndoRunning(usize),
    Navigate(usize, usize, bool),
    /// A restore made for a session: of a snapshot (picked), one file or the whole workspace.
    Restore(usize, usize, Option<usize>),
    /// The user's restore: snapshot, file or whole, forced.
    UserRestore(usize, Option<usize>, bool),
    /// Session C's owner dies mid-turn.
    Kill,
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![4 => Just(Write::Append), 2 => Just(Write::Rewrite), 1 => Just(Write::Delete)]
}

fn edit_write() -> impl Strategy<Value = Write> {
    prop_oneof![2 => Just(Write::Append), 1 => Just(Write::Rewrite)]
}

fn writes() -> impl Strategy<Value = Vec<(usize, Write)>> {
    proptest::collection::vec((0..FILES.len(), write()), 1..3)
}

fn op() -> impl Strategy<Value = Op> {
    let s = || 0..NAMES.len();
    let f = || 0..FILES.len();
    prop_oneof![
        6 => s().prop_map(Op::Begin),
        4 => s().prop_map(Op::End),
        10 => (s(), f(), edit_write()).prop_map(|(s, f, w)| Op::Edit(s, f, w)),
        4 => (s(), writes()).prop_map(|(s, w)| Op::Shell(s, w)),
        1 => (s(), s(), writes(), writes()).prop_map(|(a, b, x, y)| Op::Overlap(a, b, x, y)),
        5 => (f(), write()).prop_map(|(f, w)| Op::User(f, w)),
        4 => s().prop_map(Op::Undo),
        2 => s().prop_map(Op::Redo),
        2 => (s(), 0usize..8).prop_map(|(s, n)| Op::Revert(s, n)),
        1 => s().prop_map(Op::UndoRunning),
        1 => (s(), 0usize..8, any::<bool>()).prop_map(|(s, n, b)| Op::Navigate(s, n, b)),
        2 => (s(), 0usize..64, proptest::option::of(f())).prop_map(|(s, n, f)| Op::Restore(s, n, f)),
        2 => (0usize..64, proptest::option::of(f()), proptest::bool::weighted(0.3))
            .prop_map(|(n, f, force)| Op::UserRestore(n, f, force)),
        1 => Just(Op::Kill),
    ]
}

/// Who last wrote a file, as the model knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// A session's step (or the user, `USER`).
    Writer(usize),
    /// An operation of a session (or the user's).
    Op(usize),
    /// Two sessions' steps at once.
    Ambiguous,
}

impl Who {
    fn actor(self) -> Option<usize> {
        match self {
            Who::Writer(a) | Who::Op(a) => Some(a),
            Who::Ambiguous => None,
        }
    }
}

fn author(line: &str) -> usize {
    match line.as_bytes()[0] {
        b'A' => 0,
        b'B' => 1,
        b'C' => 2,
        b'U' => USER,
        _ => panic!("a line of no writer: {line:?}"),
    }
}

fn render(lines: &Lines) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn read_disk(env: &Env) -> Disk {
    let mut out = Disk::new();
    for (i, name) in FILES.iter().enumerate() {
        if let Ok(text) = fs::read_to_string(env.path(name)) {
            out.insert(i, text.lines().map(str::to_string).collect());
        }
    }
    out
}

struct Model<'e> {
    env: &'e Env,
    ws: Workspace,
    sessions: Vec<Session>,
    turns: Vec<Option<retrace::Turn>>,
    /// Whether a session's running turn has reported a step yet.
    stepped: [bool; 3],
    /// The disk at the start of each running turn (what a restore must hold for it).
    began: [Option<Disk>; 3],
    /// Each session's turn numbers (ended or killed), oldest first.
    numbers: [Vec<u64>; 3],
    /// C's owner while its turn runs.
    owner: Option<LiveOwner>,
    disk: Disk,
    who: HashMap<usize, Who>,
    /// Lines each actor's writes (steps and operations) removed.
    removed: [HashSet<String>; 4],
    /// Lines of others each actor's operations put back (a restore's, an undo's).
    put_back: [HashSet<String>; 4],
    /// Lines two sessions' steps at once added or removed, and no write changed since: no
    /// operation may change them.
    ambiguous: HashSet<String>,
    /// Each file's versions, newest last, with the actor that left each (None: two
    /// sessions' steps at once); as the ledger, a writer whose version the file holds again
    /// (among its last 17) still owns it.
    left: HashMap<usize, Vec<Left>>,
    /// Whether the writes being applied are two sessions' steps at once.
    at_once: bool,
    serial: u64,
    /// (file, content) at each turn's and captured step's boundaries.
    versions: BTreeSet<(usize, String)>,
    log: Vec<String>,
}

impl Model<'_> {
    fn fail(&self, what: String) -> ! {
        panic!(
            "{what}\nsequence so far:\n  {}\ndisk: {:?}\nwriters: {:?}",
            self.log.join("\n  "),
            self.disk,
            self.who
        )
    }

    fn line(&mut self, actor: usize) -> String {
        self.serial += 1;
        format!("{}{}", ["A", "B", "C", "U"][actor], self.serial)
    }

    fn put(&self, f: usize, lines: Option<&Lines>) {
        let p = self.env.path(FILES[f]);
        match lines {
            Some(l) => self.env.write(FILES[f], render(l)),
            None => {
                let _ = fs::remove_file(&p);
            }
        }
    }

    /// `actor` writes file `f` (in a step, or as the user); returns whether it changed (a
    /// deletion of no file is no write).
    fn apply(&mut self, actor: usize, f: usize, w: Write) -> bool {
        let old = self.disk.get(&f).cloned();
        let new = match w {
            Write::Append => {
                let mut l = old.clone().unwrap_or_default();
                l.push(self.line(actor));
                Some(l)
            }
            Write::Rewrite => Some(vec![self.line(actor)]),
            Write::Delete => None,
        };
        if let Some(old) = &old {
            let keep: HashSet<&String> = new.iter().flatten().collect();
            for l in old.iter().filter(|l| !keep.contains(l)) {
                self.removed[actor].insert(l.clone());
                self.ambiguous.remove(l);
            }
        }
        if old.is_none() && new.is_none() {
            return false;
        }
        self.put(f, new.as_ref());
        let who = (!self.at_once).then_some(actor);
        self.left.entry(f).or_default().push((who, new.clone()));
        match new {
            Some(l) => self.disk.insert(f, l),
            None => self.disk.remove(&f),
        };
        true
    }

    /// Whether `actor` left `now` at file `f`, by the last 17 versions there.
    fn left_by(&self, actor: usize, f: usize, now: Option<&Lines>) -> bool {
        let versions = self.left.get(&f).map_or(&[][..], Vec::as_slice);
        let recent = &versions[versions.len().saturating_sub(17)..];
        recent
            .iter()
            .any(|(w, v)| *w == Some(actor) && v.as_ref() == now)
    }

    fn record_versions(&mut self) {
        for (f, l) in &self.disk {
            self.versions.insert((*f, render(l)));
        }
    }

    fn running(&self, s: usize) -> bool {
        self.turns[s].is_some()
    }

    fn opts(force: bool) -> OpOptions<'static> {
        OpOptions {
            force,
            progress: &NoProgress,
        }
    }

    /// Runs one operation; returns a line for the log, or None when it does not apply.
    fn step(&mut self, op: &Op) {
        let said = match op {
            Op::Begin(s) => {
                if self.running(*s) {
                    return;
                }
                let s = *s;
                if s == 2 {
                    let owner = LiveOwner::start();
                    let pid: u32 = owner.pid().parse().unwrap();
                    self.sessions[2] = self.ws.session(NAMES[2]).owned_by(pid);
                    self.owner = Some(owner);
                }
                let t = self.sessions[s]
                    .begin_turn(None, Some(format!("op {}", self.log.len())))
                    .unwrap_or_else(|e| self.fail(format!("begin {}: {e}", NAMES[s])));
                t.wait_before(Duration::from_secs(120))
                    .unwrap_or_else(|e| self.fail(format!("wait_before {}: {e}", NAMES[s])));
                self.numbers[s].push(t.number());
                self.turns[s] = Some(t);
                self.stepped[s] = false;
                self.began[s] = Some(self.disk.clone());
                self.record_versions();
                format!(
                    "{} begins turn {}",
                    NAMES[s],
                    self.numbers[s].last().unwrap()
                )
            }
            Op::End(s) => {
                let Some(t) = self.turns[*s].take() else {
                    return;
                };
                t.end(None)
                    .unwrap_or_else(|e| self.fail(format!("end {}: {e}", NAMES[*s])));
                self.began[*s] = None;
                if *s == 2 {
                    self.owner = None;
                }
                self.record_versions();
                format!("{} ends its turn", NAMES[*s])
            }
            Op::Kill => {
                let Some(t) = self.turns[2].take() else {
                    return;
                };
                drop(t);
                self.owner = None; // killed
                self.began[2] = None;
                "C's owner is killed mid-turn".to_string()
            }
            Op::Edit(s, f, w) => {
                if !self.running(*s) {
                    return;
                }
                let (s, f, w) = (*s, *f, *w);
                let sess = self.sessions[s].clone();
                sess.begin_step("", "Write", FILES[f], &[FILES[f].to_string()])
                    .unwrap_or_else(|e| self.fail(format!("begin_step: {e}")));
                let _ = self.apply(s, f, w);
                sess.end_step("")
                    .unwrap_or_else(|e| self.fail(format!("end_step: {e}")));
                self.stepped[s] = true;
                self.who.insert(f, Who::Writer(s));
                format!("{} edit step: {w:?} {}", NAMES[s], FILES[f])
            }
            Op::Shell(s, ws) => {
                if !self.running(*s) {
                    return;
                }
                let s = *s;
                let sess = self.sessions[s].clone();
                sess.begin_step("", "Bash", "rm -f x; sed -i s/a/b/ y", &[])
                    .unwrap_or_else(|e| self.fail(format!("begin_step: {e}")));
                self.record_versions();
                for (f, w) in ws {
                    if self.apply(s, *f, *w) {
                        self.who.insert(*f, Who::Writer(s));
                    }
                }
                sess.end_step("")
                    .unwrap_or_else(|e| self.fail(format!("end_step: {e}")));
                self.record_versions();
                self.stepped[s] = true;
                format!("{} shell step: {ws:?}", NAMES[s])
            }
            Op::Overlap(a, b, wa, wb) => {
                if a == b || !self.running(*a) || !self.running(*b) {
                    return;
                }
                let (a, b) = (*a, *b);
                let (sa, sb) = (self.sessions[a].clone(), self.sessions[b].clone());
                sa.begin_step("", "Bash", "rm -f x", &[])
                    .unwrap_or_else(|e| self.fail(format!("begin_step: {e}")));
                sb.begin_step("", "Bash", "rm -f y", &[])
                    .unwrap_or_else(|e| self.fail(format!("begin_step: {e}")));
                self.record_versions();
                let before = self.disk.clone();
                self.at_once = true;
                for (f, w) in wa {
                    if self.apply(a, *f, *w) {
                        self.who.insert(*f, Who::Ambiguous);
                    }
                }
                for (f, w) in wb {
                    if self.apply(b, *f, *w) {
                        self.who.insert(*f, Who::Ambiguous);
                    }
                }
                self.at_once = false;
                for f in 0..FILES.len() {
                    let (was, is) = (before.get(&f), self.disk.get(&f));
                    let was: HashSet<&String> = was.into_iter().flatten().collect();
                    let is: HashSet<&String> = is.into_iter().flatten().collect();
                    self.ambiguous
                        .extend(was.symmetric_difference(&is).map(|l| (*l).clone()));
                }
                sa.end_step("")
                    .unwrap_or_else(|e| self.fail(format!("end_step: {e}")));
                sb.end_step("")
                    .unwrap_or_else(|e| self.fail(format!("end_step: {e}")));
                self.record_versions();
                self.stepped[a] = true;
                self.stepped[b] = true;
                format!(
                    "{} and {} shell steps at once: {wa:?} / {wb:?}",
                    NAMES[a], NAMES[b]
                )
            }
            Op::User(f, w) => {
                // A running turn that reported no step yet is the writer of whatever changes
                // (an agent without steps): the user waits for its first step.
                if (0..3).any(|s| self.running(s) && !self.stepped[s]) {
                    return;
                }
                if !self.apply(USER, *f, *w) {
                    return;
                }
                self.who.insert(*f, Who::Writer(USER));
                format!("user: {w:?} {}", FILES[*f])
            }
            Op::Undo(s) => self.operate(*s, "undo", |m| {
                m.sessions[*s].undo_with(Mode::Both, Self::opts(false))
            }),
            Op::Redo(s) => {
                self.operate(*s, "redo", |m| m.sessions[*s].redo_with(Self::opts(false)))
            }
            Op::Revert(s, n) => {
                let Some(&turn) = self.numbers[*s].get(*n % self.numbers[*s].len().max(1)) else {
                    return;
                };
                self.operate(*s, &format!("revert turn:{turn}"), |m| {
                    m.sessions[*s].revert(turn, Self::opts(false))
                })
            }
            Op::UndoRunning(s) => self.operate(*s, "undo of its running turn", |m| {
                m.sessions[*s].undo_running_turn(Mode::Files, Self::opts(false))
            }),
            Op::Navigate(s, n, before) => self.navigate(*s, *n, *before),
            Op::Restore(s, n, f) => self.restore(Some(*s), *n, *f, false),
            Op::UserRestore(n, f, force) => self.restore(None, *n, *f, *force),
        };
        self.log.push(said);
    }

    /// An undo, redo or revert of session `s`: checked against the ownership oracle.
    fn operate(
        &mut self,
        s: usize,
        what: &str,
        run: impl FnOnce(&Self) -> Result<Outcome, Error>,
    ) -> String {
        let before = self.disk.clone();
        let got = run(self);
        let said = format!("{} {what}: {}", NAMES[s], brief(&got));
        self.log.push(said.clone());
        let got = got.unwrap_or_else(|e| self.fail(format!("{} {what}: error {e}", NAMES[s])));
        let after = read_disk(self.env);
        let mut violations = Vec::new();
        for (f, name) in FILES.iter().enumerate() {
            let (b, a) = (before.get(&f), after.get(&f));
            if b == a {
                continue;
            }
            let bl: HashSet<&String> = b.into_iter().flatten().collect();
            let al: HashSet<&String> = a.into_iter().flatten().collect();
            let frozen: Vec<&&String> = bl
                .symmetric_difference(&al)
                .filter(|l| self.ambiguous.contains(**l))
                .collect();
            if !frozen.is_empty() {
                violations.push(format!(
                    "{name}: changed lines two sessions' steps at once wrote or removed \
                     {frozen:?}: {b:?} -> {a:?}"
                ));
                continue;
            }
            let foreign = |l: &&&String| {
                author(l) != s && !self.removed[s].contains(**l) && !self.put_back[s].contains(**l)
            };
            let gone: Vec<&&String> = bl.difference(&al).filter(foreign).collect();
            let came: Vec<&&String> = al.difference(&bl).filter(foreign).collect();
            if !gone.is_empty() || !came.is_empty() {
                violations.push(format!(
                    "{} (last written by {:?}): {b:?} -> {a:?}; removed others' lines {gone:?}, \
                     added lines that are neither {}'s nor taken out by {} {came:?}",
                    name,
                    self.who.get(&f),
                    NAMES[s],
                    NAMES[s]
                ));
            }
        }
        if !violations.is_empty() {
            self.log.pop();
            self.log.push(format!("{said}   <-- VIOLATION"));
            self.fail(format!(
                "{} {what} changed what is not its own: {}\noutcome: {got:?}",
                NAMES[s],
                violations.join("; ")
            ));
        }
        self.took(s, &before, after);
        self.log.pop();
        said
    }

    /// The model takes in what operation of `actor` left on disk.
    fn took(&mut self, actor: usize, before: &Disk, after: Disk) {
        for f in 0..FILES.len() {
            let (b, a) = (before.get(&f), after.get(&f));
            if b == a {
                continue;
            }
            let keep: HashSet<&String> = a.into_iter().flatten().collect();
            for l in b.into_iter().flatten().filter(|l| !keep.contains(l)) {
                self.removed[actor].insert(l.clone());
                self.ambiguous.remove(l);
            }
            let had: HashSet<&String> = b.into_iter().flatten().collect();
            for l in a.into_iter().flatten().filter(|l| !had.contains(l)) {
                self.ambiguous.remove(l);
                self.put_back[actor].insert(l.clone());
            }
            self.who.insert(f, Who::Op(actor));
            self.left
                .entry(f)
                .or_default()
                .push((Some(actor), a.cloned()));
        }
        self.disk = after;
    }

    fn navigate(&mut self, s: usize, n: usize, before_side: bool) -> String {
        let Some(&turn) = self.numbers[s].get(n % self.numbers[s].len().max(1)) else {
            return format!("{} navigate: no turn", NAMES[s]);
        };
        let anchor = if before_side {
            format!("turn:{turn}:before")
        } else {
            format!("turn:{turn}")
        };
        let before = self.disk.clone();
        let got = self.sessions[s].navigate_with(&anchor, Mode::Files, Self::opts(false));
        let said = format!("{} navigate {anchor}: {}", NAMES[s], brief(&got));
        self.log.push(said.clone());
        let got = match got {
            Ok(o) => o,
            Err(Error::Anchor { .. }) => {
                self.log.pop();
                return said;
            }
            Err(e) => self.fail(format!("navigate: error {e}")),
        };
        let after = read_disk(self.env);
        if let Outcome::Restored { rewound, .. } = &got {
            let named: HashSet<&str> = rewound.iter().map(|r| r.path.as_str()).collect();
            let missing: Vec<_> = (0..FILES.len())
                .filter(|f| before.get(f) != after.get(f) && before.contains_key(f))
                .filter(|f| self.who.get(f).is_some_and(|w| w.actor() != Some(s)))
                // The disk holding what `s` left there is `s`'s.
                .filter(|f| !self.left_by(s, *f, before.get(f)))
                .filter(|f| !named.contains(FILES[*f]))
                .map(|f| (FILES[f], self.who.get(&f)))
                .collect();
            if !missing.is_empty() {
                self.fail(format!(
                    "navigation rewound other writers' paths without naming them: {missing:?}\n\
                     outcome: {got:?}"
                ));
            }
        }
        self.took(s, &before, after);
        self.log.pop();
        said
    }

    fn restore(&mut self, s: Option<usize>, n: usize, f: Option<usize>, force: bool) -> String {
        let snaps = self.snapshots();
        if snaps.is_empty() {
            return "restore: no snapshot".into();
        }
        let id = snaps[n % snaps.len()];
        let paths: Vec<String> = f.map(|f| FILES[f].to_string()).into_iter().collect();
        let opts = RestoreOptions {
            force,
            dry_run: false,
        };
        let before = self.disk.clone();
        let got = match s {
            Some(s) => self.sessions[s].restore(&id, &paths, opts, &NoProgress),
            None => self.ws.restore_paths(&id, &paths, opts, &NoProgress),
        };
        let who = s.map_or("user", |s| NAMES[s]);
        let said = format!(
            "{who} restore snapshot #{} {paths:?}{}: {}",
            n % snaps.len(),
            if force { " --force" } else { "" },
            match &got {
                Ok(_) => "restored".to_string(),
                Err(e) => format!("refused ({e})"),
            }
        );
        self.log.push(said.clone());
        match got {
            Ok(_) => {}
            Err(
                RestoreError::Dirty { .. } | RestoreError::Held { .. } | RestoreError::Path { .. },
            ) => {}
            Err(e) => self.fail(format!("restore: error {e}")),
        }
        let after = read_disk(self.env);
        if !force {
            let mut violations = Vec::new();
            for f in (0..FILES.len()).filter(|f| before.get(f) != after.get(f)) {
                for (t, began) in self.began.iter().enumerate() {
                    if Some(t) == s {
                        continue;
                    }
                    if let Some(began) = began
                        && began.get(&f) != before.get(&f)
                    {
                        violations.push(format!(
                            "{}: changed by {}'s running turn, restored over",
                            FILES[f], NAMES[t]
                        ));
                    }
                }
                if let (Some(s), Some(Who::Writer(w) | Who::Op(w))) = (s, self.who.get(&f))
                    && *w != s
                    && *w != USER
                    && !self.left_by(s, f, before.get(&f))
                {
                    violations.push(format!(
                        "{}: last written by {}, restored over for {}",
                        FILES[f], NAMES[*w], NAMES[s]
                    ));
                }
                if let (Some(_), Some(Who::Ambiguous)) = (s, self.who.get(&f)) {
                    violations.push(format!(
                        "{}: last written by two sessions at once, restored over",
                        FILES[f]
                    ));
                }
            }
            if !violations.is_empty() {
                self.fail(format!("{said}: {}", violations.join("; ")));
            }
        }
        self.took(s.unwrap_or(USER), &before, after);
        self.log.pop();
        said
    }

    fn snapshots(&self) -> Vec<retrace::ObjectId> {
        let reader = self.ws.working_copy().store().reader().unwrap();
        let mut ids: Vec<_> = reader
            .snapshots()
            .unwrap()
            .into_iter()
            .map(|s| s.root)
            .collect();
        ids.dedup();
        ids
    }

    /// Every version recorded at a boundary is in some snapshot.
    fn check_versions(&self) {
        let reader = self.ws.working_copy().store().reader().unwrap();
        let mut held: HashSet<(usize, String)> = HashSet::new();
        let mut read: HashMap<retrace::ObjectId, String> = HashMap::new();
        for s in reader.snapshots().unwrap() {
            for e in retrace::diff::flatten(&reader, &s.root).unwrap() {
                let Some(f) = FILES.iter().position(|n| e.path.show() == *n) else {
                    continue;
                };
                let text = read
                    .entry(e.id)
                    .or_insert_with(|| String::from_utf8(reader.read_blob(&e.id).unwrap()).unwrap())
                    .clone();
                held.insert((f, text));
            }
        }
        let lost: Vec<_> = self.versions.iter().filter(|v| !held.contains(v)).collect();
        if !lost.is_empty() {
            self.fail(format!("versions at a boundary in no snapshot: {lost:?}"));
        }
    }
}

fn brief(o: &Result<Outcome, Error>) -> String {
    match o {
        Ok(Outcome::Restored {
            files_written,
            files_deleted,
            skipped,
            merged,
            ..
        }) => format!(
            "restored (written {files_written:?}, deleted {files_deleted:?}, merged {merged:?}, \
             skipped {:?})",
            skipped.iter().map(|s| &s.path).collect::<Vec<_>>()
        ),
        Ok(Outcome::NothingRestored { paths, .. }) => format!(
            "nothing restored ({:?})",
            paths.iter().map(|s| &s.path).collect::<Vec<_>>()
        ),
        Ok(Outcome::Conflict { paths, .. }) => format!("conflict {paths:?}"),
        Ok(Outcome::Dirty { paths, .. }) => format!("dirty {paths:?}"),
        Ok(Outcome::Busy { .. }) => "busy".into(),
        Ok(Outcome::NothingToUndo { .. }) => "nothing to undo".into(),
        Ok(Outcome::NothingToRedo) => "nothing to redo".into(),
        Ok(Outcome::ConversationOnly { reason, .. }) => format!("conversation only ({reason})"),
        Ok(o) => format!("{o:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Runs `ops` on a fresh workspace, and ends every turn still running.
fn run(ops: &[Op]) {
    let env = Env::new();
    let ws = env.open();
    let sessions = NAMES.iter().map(|n| ws.session(n)).collect();
    let mut m = Model {
        env: &env,
        ws,
        sessions,
        turns: vec![None, None, None],
        stepped: [false; 3],
        began: [None, None, None],
        numbers: Default::default(),
        owner: None,
        disk: Disk::new(),
        who: HashMap::new(),
        removed: Default::default(),
        put_back: Default::default(),
        ambiguous: HashSet::new(),
        left: HashMap::new(),
        at_once: false,
        serial: 0,
        versions: BTreeSet::new(),
        log: Vec::new(),
    };
    for op in ops {
        m.step(op);
    }
    for s in 0..3 {
        m.step(&Op::End(s));
    }
    m.check_versions();
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

fn rng_seed() -> proptest::test_runner::RngSeed {
    match std::env::var("PROPTEST_RNG_SEED").ok().as_deref() {
        Some("random") => proptest::test_runner::RngSeed::Random,
        Some(n) => proptest::test_runner::RngSeed::Fixed(n.parse().unwrap_or(38)),
        None => proptest::test_runner::RngSeed::Fixed(38),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: regressions_beside_the_source(),
        max_shrink_iters: 2000,
        // Fixed, so that CI runs the same cases each time (`PROPTEST_RNG_SEED=random`
        // explores).
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_operation_changes_only_its_sessions_own_writes(
        ops in proptest::collection::vec(op(), 1..=100),
    ) {
        run(&ops);
    }
}

/// A user's edit saved during A's turn (outside its tool calls), to a file A's turn created:
/// the model's undo of its running turn (MCP `undo`) deletes the file, the user's line with
/// it (it is in the safety snapshot only). The rule: a path the user wrote last is left.
#[test]
fn an_undo_of_a_running_turn_leaves_what_the_user_wrote_during_it() {
    run(&[
        Op::Begin(0),
        Op::Edit(0, 2, Write::Append),
        Op::User(2, Write::Append),
        Op::UndoRunning(0),
    ]);
}

/// A forced restore (the user's, whole workspace) while A's turn runs, over a file A's shell
/// step wrote and the user then appended to: it failed with "object ... is missing from
/// store" (the store is then reported damaged). Expected: the workspace restored to the
/// snapshot (A's work kept in the safety snapshot), or a documented refusal.
#[test]
fn a_forced_restore_during_a_turn_finds_its_objects() {
    run(&[
        Op::Begin(0),
        Op::Shell(0, vec![(0, Write::Append)]),
        Op::User(0, Write::Append),
        Op::UserRestore(0, None, true),
    ]);
}

/// B's shell step appends to f0.txt while A's turn runs without having reported a step; A's
/// turn writes nothing. After both, A's undo merges f0.txt and takes out B's line (the
/// change made while A's turn ran). Expected: A's undo leaves f0.txt alone (B's step wrote
/// it; at most the ledger can call it "several sessions", which is left alone too).
#[test]
fn a_turn_without_steps_takes_back_another_sessions_step() {
    run(&[
        Op::Begin(1),
        Op::Shell(1, vec![(0, Write::Append)]),
        Op::Begin(0),
        Op::Shell(1, vec![(0, Write::Append)]),
        Op::End(0),
        Op::Edit(1, 0, Write::Append),
        Op::Undo(0),
    ]);
}

/// The user creates f1.txt during A's turn, outside its tool calls (A's turn has reported a
/// shell step first); A's turn writes f0.txt by an edit step. A's undo leaves f1.txt, "last
/// written by the user". With shell steps captured (`step_captures = "always"`, or `auto`
/// with a watcher): without a capture after `ls`, what changes until the next capture may
/// be the command's, and is taken back with the turn (the documented cost of the `auto`
/// policy without a watcher).
#[test]
fn an_undo_leaves_what_the_user_wrote_during_the_turn() {
    let env = Env::new();
    let config = retrace::Config::with_home(env.home.path())
        .configure(|s| s.step_captures.value = retrace::config::StepCaptures::Always);
    let ws = retrace::Workspace::open(env.root(), &config).unwrap();
    let a = ws.session("A");
    let t = a.begin_turn(None, None).unwrap();
    t.wait_before(Duration::from_secs(120)).unwrap();
    a.begin_step("", "Bash", "ls", &[]).unwrap();
    a.end_step("").unwrap();
    env.write("f1.txt", "the user's\n");
    a.begin_step("", "Write", "f0.txt", &["f0.txt".into()])
        .unwrap();
    env.write("f0.txt", "A's\n");
    a.end_step("").unwrap();
    t.end(None).unwrap();
    let o = a.undo(Mode::Both).unwrap();
    assert!(!env.path("f0.txt").exists(), "{o:?}");
    assert_eq!(
        fs::read_to_string(env.path("f1.txt")).ok().as_deref(),
        Some("the user's\n"),
        "{o:?}"
    );
}

/// B's and C's shell steps run at once (B rewrites f5.txt, C's line in it gone: the ledger
/// says "several sessions"); then C's own shell step appends to f5.txt while B's turn still
/// runs, and A appends after. B's undo merges f5.txt and takes out C's later line (and puts
/// back C's first). Expected: f5.txt left as it is (its last writers are C and A; B's part
/// is ambiguous).
#[test]
fn an_undo_after_overlapping_steps_leaves_a_later_step_alone() {
    run(&[
        Op::Begin(2),
        Op::Edit(2, 5, Write::Append),
        Op::Begin(1),
        Op::Overlap(1, 2, vec![(5, Write::Rewrite)], vec![(1, Write::Append)]),
        Op::Shell(2, vec![(5, Write::Append)]),
        Op::End(1),
        Op::Begin(0),
        Op::Edit(0, 5, Write::Append),
        Op::Undo(1),
    ]);
}

/// The user deletes f1.txt, which C's edit step created, while A's and C's turns run; A's
/// shell step then creates it anew. A's undo put C's version back (the user's deletion was
/// in no ledger entry). Expected: f1.txt deleted, as the user left it.
#[test]
fn an_undo_puts_back_what_the_user_left_before_its_step() {
    run(&[
        Op::Begin(0),
        Op::Shell(0, vec![(0, Write::Delete)]),
        Op::Begin(2),
        Op::Edit(2, 1, Write::Append),
        Op::Undo(0),
        Op::User(1, Write::Delete),
        Op::Shell(0, vec![(1, Write::Append)]),
        Op::End(0),
        Op::Undo(0),
    ]);
}

/// B's restore (made for B) puts f0.txt back; C's restore then wrote over it: B's restore
/// was recorded as the user's. Expected: a restore made for a session is that session's
/// write, which another session's restore leaves alone.
#[test]
fn a_restore_made_for_a_session_is_that_sessions_write() {
    run(&[
        Op::Begin(1),
        Op::Shell(1, vec![(0, Write::Append)]),
        Op::UndoRunning(1),
        Op::Begin(2),
        Op::Edit(2, 0, Write::Append),
        Op::End(1),
        Op::UndoRunning(2),
        Op::Restore(1, 38, None),
        Op::Restore(2, 4, None),
    ]);
}

/// The user creates f1.txt during A's turn; A's shell step appends to it. A's revert of the
/// turn deleted f1.txt, the user's line with it (a revert took back the turn's whole change
/// where an undo took back A's own writes). Expected: f1.txt holds the user's line again.
#[test]
fn a_revert_takes_back_only_the_sessions_own_writes() {
    run(&[
        Op::Begin(0),
        Op::Edit(0, 0, Write::Append),
        Op::User(1, Write::Append),
        Op::Shell(0, vec![(1, Write::Append)]),
        Op::End(0),
        Op::Revert(0, 0),
    ]);
}

/// C's edit step writes f1.txt while B's turn 1 runs; B's turn 2 appends to it and B undoes
/// turn 2. B's revert of turn 1 deleted f1.txt (C's file), since an undo of B's had written
/// there. Expected: left alone, written during turn 1 by C.
#[test]
fn a_revert_leaves_what_another_session_wrote_during_the_turn() {
    run(&[
        Op::Begin(2),
        Op::Begin(1),
        Op::Edit(2, 1, Write::Append),
        Op::End(1),
        Op::Begin(1),
        Op::Edit(1, 1, Write::Append),
        Op::End(1),
        Op::Undo(1),
        Op::Revert(1, 6),
    ]);
}

/// The user deletes f4.txt (A's) before B's edit step creates it anew: the step's begin read
/// no file, and the ledger kept A's version as the one B's write replaced, so B's undo put
/// A's line back. Expected: f4.txt deleted, as the user left it.
#[test]
fn an_edit_step_reads_a_deleted_file_as_deleted() {
    run(&[
        Op::Begin(0),
        Op::Edit(0, 4, Write::Append),
        Op::Begin(1),
        Op::Edit(1, 0, Write::Append),
        Op::User(4, Write::Delete),
        Op::Edit(1, 4, Write::Append),
        Op::End(1),
        Op::End(0),
        Op::Undo(1),
    ]);
}
