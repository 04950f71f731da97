//! The state of `retrace ui` and what each key does to it: no terminal here, so tests drive
//! it with keys and look at what [`super::view`] draws.
//!
//! What the UI does on its own, without a key, reads on threads of its own: the reload when
//! another process records ([`App::start_reload`]) and the GC estimate. A read can wait on
//! another process's commit (the store's header lock), so the keys never wait for them:
//! [`App::poll`] takes in what they found when it is there.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, TryRecvError};

use crate::history::db::SessionKey;
use crate::history::inspect::{PathChange, Span};
use crate::history::timeline::{Moment, Timeline, TimelineEntry};
use crate::patch::FilePatch;
use crate::progress::NoProgress;
use crate::{Error, Mode, ObjectId, OpOptions, Outcome, RestoreOptions, SessionInfo, Workspace};

/// The pane that has the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    /// The workspace's sessions.
    Sessions,
    /// The selected session's timeline.
    Timeline,
    /// The selected entry's changed paths.
    Paths,
    /// The selected path's diff.
    Diff,
}

/// An action that changes the disk or the history, asked to be confirmed first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Undo the newest applied turn (named in words for the question).
    Undo(String),
    /// Redo the newest undone turn (named in words for the question).
    Redo(String),
    /// Revert one turn, keeping what came after.
    Revert(u64),
    /// Restore the workspace to an entry's snapshot (`turn:N`, `turn:N:before`,
    /// `checkpoint:N`).
    RestoreEntry(String),
    /// Restore the whole workspace to a snapshot of the local history (a burst).
    RestoreSnapshot(ObjectId),
    /// Restore one path as an entry's snapshot holds it.
    RestorePath(ObjectId, String),
    /// Take a checkpoint of the disk now.
    Checkpoint,
}

impl Action {
    /// The question asked before it runs.
    #[must_use]
    pub fn question(&self) -> String {
        match self {
            Action::Undo(what) => format!("Undo {what}?"),
            Action::Redo(what) => format!("Redo {what}?"),
            Action::Revert(n) => format!("Revert turn {n}, keeping every later change?"),
            Action::RestoreEntry(r) => format!("Restore the whole workspace to {r}?"),
            Action::RestoreSnapshot(id) => {
                format!("Restore the whole workspace to burst {}?", id.short())
            }
            Action::RestorePath(id, p) => format!("Restore {p} as snapshot {} has it?", id.short()),
            Action::Checkpoint => "Take a checkpoint of the workspace now?".into(),
        }
    }
}

/// What the keys are doing: moving around, answering a question, typing a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Moving around.
    Browse,
    /// The help screen.
    Help,
    /// A question before an action: `y` runs it, anything else does not.
    Confirm(Action),
    /// Typing the filter after `/`.
    Filter,
}

/// What the right side shows: the selected entry's change, or how the disk differs from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Showing {
    /// The paths the entry changed.
    Change,
    /// The paths where the disk differs from the entry's snapshot.
    AgainstDisk(ObjectId),
}

/// The result of the last action: one line, and the paths a refusal named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The line.
    pub line: String,
    /// Paths it names (dirty or conflicting ones), shown below it.
    pub paths: Vec<String>,
    /// Whether it is a refusal or an error (drawn as one).
    pub refused: bool,
}

/// The store's size and what it is allowed, for the footer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footer {
    /// Bytes the store takes on disk.
    pub store_bytes: u64,
    /// The byte budget (`max_store_bytes`).
    pub budget: u64,
    /// Stored bytes a GC would free now, when it could be worked out.
    pub gc_frees: Option<u64>,
}

/// Everything `retrace ui` shows and where the keys are.
pub struct App {
    ws: Workspace,
    /// The workspace's sessions, most recently used first.
    pub sessions: Vec<SessionInfo>,
    /// How many bursts the workspace's local history keeps: when any, a last row of the
    /// sessions pane selects it.
    pub bursts: usize,
    /// The selected session (index into [`App::sessions`]; its length: the local history).
    pub session: usize,
    /// Its timeline.
    pub timeline: Option<Timeline>,
    /// The selected row of the (filtered) timeline.
    pub entry: usize,
    /// What the right side shows.
    pub showing: Showing,
    /// The paths shown on the right.
    pub paths: Vec<PathChange>,
    /// The selected path.
    pub path: usize,
    /// The open diff of the selected path.
    pub diff: Option<Vec<FilePatch>>,
    /// Lines scrolled down in the diff.
    pub scroll: u16,
    /// The pane with the keys.
    pub focus: Pane,
    /// What the keys do.
    pub mode: Input,
    /// The filter: prompt text or a path (case-insensitive substring).
    pub filter: String,
    /// The last action's result.
    pub message: Option<Message>,
    /// The footer's figures.
    pub footer: Footer,
    /// Whether to colour (off with `NO_COLOR`).
    pub colour: bool,
    /// Set by `q` and Ctrl-C.
    pub quit: bool,
    /// What the sessions looked like when last loaded (a reload when it changes).
    stamp: Stamp,
    /// What a GC would free, being worked out.
    gc_job: Option<Receiver<Option<u64>>>,
    /// A reload being read (None in it: nothing had changed).
    reload_job: Option<Receiver<Option<Reloaded>>>,
    /// The paths (lower case) each change changed, by its span, read as the filter needs
    /// them; kept across reloads (a span's paths never change).
    paths_of: std::cell::RefCell<HashMap<Span, Vec<String>>>,
    /// Tests: the next reload's reading waits until this receives (or its sender is gone).
    #[cfg(test)]
    hold_reload: Option<Receiver<()>>,
}

/// What names a timeline row across reloads.
type Identity = (Moment, Option<(&'static str, u64)>, u64);

fn identity(e: &TimelineEntry) -> Identity {
    (
        e.moment,
        e.entry.as_ref().map(|l| (l.kind, l.number)),
        e.time_ms,
    )
}

/// What is selected: the session, the row, what the right side shows of it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Selection {
    session: Option<SessionKey>,
    /// The local history is selected.
    local: bool,
    row: Option<Identity>,
    showing: Showing,
}

/// A reload as it is asked for, read on a thread ([`ReloadAsk::read`]).
struct ReloadAsk {
    ws: Workspace,
    /// The sessions' stamp at the last look: nothing is read beyond the sessions while it
    /// holds (empty: read whatever it is).
    stamp: Stamp,
    /// The selection when asked: the reload reads that session's timeline and that row's
    /// paths.
    at: Selection,
    /// With a filter typed: the spans whose paths are known (the others' are read).
    known: Option<HashSet<Span>>,
    #[cfg(test)]
    hold: Option<Receiver<()>>,
}

/// What a reload read: the sessions, and for the session that stays selected its timeline,
/// the paths of the row that stays selected and those the filter needs.
struct Reloaded {
    at: Selection,
    sessions: Vec<SessionInfo>,
    /// The local history, when it is selected (else its bursts are only counted).
    local: Vec<TimelineEntry>,
    bursts: usize,
    stamp: Stamp,
    /// Whose timeline it read (None: there are no sessions; the local history's, with
    /// `at.local`).
    timeline_of: Option<SessionKey>,
    timeline: Result<Option<Timeline>, String>,
    /// The paths of row `at.row` as `at.showing` shows them (None: the row is gone).
    detail: Option<Result<Vec<PathChange>, String>>,
    paths_of: Vec<(Span, Vec<String>)>,
}

impl ReloadAsk {
    /// Reads what a reload shows; None when nothing was recorded since the stamp (or the
    /// sessions cannot be read: the next look tries again).
    fn read(self) -> Option<Reloaded> {
        #[cfg(test)]
        if let Some(hold) = &self.hold {
            let _ = hold.recv();
        }
        let sessions = self.ws.sessions().ok()?;
        // The local history is read only when it changed; one that cannot be read is shown
        // as none (sessions still reload).
        let glance = crate::local_history::stamp(self.ws.working_copy()).unwrap_or_default();
        let stamp = stamp_of(&sessions, glance);
        if stamp == self.stamp {
            return None;
        }
        let local = if glance.0 > 0 {
            self.ws.local_history().unwrap_or_default()
        } else {
            Vec::new()
        };
        let on_local = self.at.local && !local.is_empty();
        // The selected session stays selected, else the first is.
        let info = self
            .at
            .session
            .and_then(|k| sessions.iter().find(|s| s.key == k))
            .or(sessions.first())
            .filter(|_| !on_local);
        let timeline = if on_local {
            Ok(Some(local_timeline(local.clone())))
        } else {
            info.map(|i| self.ws.session_of(i).timeline())
                .transpose()
                .map_err(|e| e.to_string())
        };
        let mut detail = None;
        let mut paths_of: Vec<(Span, Vec<String>)> = Vec::new();
        if let Ok(Some(t)) = &timeline {
            let row = self
                .at
                .row
                .and_then(|k| t.entries.iter().find(|e| identity(e) == k));
            detail = row.map(|e| {
                read_detail(&self.ws, e.span, &self.at.showing).map_err(|e| e.to_string())
            });
            if let Some(known) = &self.known {
                for e in &t.entries {
                    if !known.contains(&e.span) && !paths_of.iter().any(|(s, _)| *s == e.span) {
                        paths_of.push((e.span, lower_paths(&self.ws, e.span)));
                    }
                }
            }
        }
        let bursts = local.len();
        Some(Reloaded {
            at: self.at,
            timeline_of: info.map(|i| i.key),
            sessions,
            local: if on_local { local } else { Vec::new() },
            bursts,
            stamp,
            timeline,
            detail,
            paths_of,
        })
    }
}

/// The paths a change changed, lower case (for the filter; none when they cannot be read).
fn lower_paths(ws: &Workspace, span: Span) -> Vec<String> {
    crate::history::inspect::span_paths(ws.working_copy(), span)
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.to_lowercase())
        .collect()
}

/// The paths shown for the row with `span`: its change, or how the disk differs from the
/// snapshot `showing` names.
fn read_detail(ws: &Workspace, span: Span, showing: &Showing) -> Result<Vec<PathChange>, Error> {
    match showing {
        Showing::Change => ws.span_changes(span),
        Showing::AgainstDisk(id) => {
            let d = ws.diff(id, None)?;
            let change = |path: &String, change| PathChange {
                path: path.clone(),
                change,
                added: 0,
                removed: 0,
                binary: false,
            };
            let mut paths: Vec<PathChange> = d
                .added
                .iter()
                .map(|p| change(p, "A"))
                .chain(d.modified.iter().map(|p| change(p, "M")))
                .chain(d.deleted.iter().map(|p| change(p, "D")))
                .collect();
            paths.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(paths)
        }
    }
}

/// What the sessions and the local history looked like: enough to see another process
/// recorded something.
type Stamp = Vec<(String, usize, usize, u64)>;

/// The stamp of `sessions` and of the local history (its `local_history::stamp`: burst
/// rows, the newest row).
fn stamp_of(sessions: &[SessionInfo], (bursts, newest): (usize, u64)) -> Stamp {
    let mut stamp: Stamp = sessions
        .iter()
        .map(|s| (s.id.clone(), s.turns, s.checkpoints, s.touched_ms))
        .collect();
    if bursts > 0 {
        stamp.push((String::new(), bursts, 0, newest));
    }
    stamp
}

/// The local history's bursts as a timeline: no session, so no cursor and nothing to
/// undo or redo.
fn local_timeline(entries: Vec<TimelineEntry>) -> Timeline {
    Timeline {
        status: crate::history::SessionStatus {
            session: String::new(),
            name: None,
            subagent: false,
            turns: 0,
            checkpoints: 0,
            cursor: None,
            can_undo: false,
            can_redo: false,
            redo_turn: None,
            pending: None,
            last_known: None,
        },
        entries,
    }
}

impl App {
    /// Opens the UI's state over `ws`, with the session `session` (a name or key prefix)
    /// selected, else the most recently used one.
    ///
    /// # Errors
    /// [`Error::Store`] when the store cannot be read; [`Error::Inspect`] for a `session`
    /// that names none.
    pub fn new(ws: Workspace, session: Option<&str>) -> Result<App, Error> {
        let sessions = ws.sessions()?;
        // A local history that cannot be read is shown as none: the sessions still open.
        let glance = crate::local_history::stamp(ws.working_copy()).unwrap_or_default();
        let local = if glance.0 > 0 {
            ws.local_history().unwrap_or_default()
        } else {
            Vec::new()
        };
        let selected = match session {
            None => 0,
            Some(q) => match ws.find_session(q)? {
                crate::Lookup::Found(info) => {
                    sessions.iter().position(|s| s.key == info.key).unwrap_or(0)
                }
                _ => {
                    return Err(Error::Inspect {
                        name: q.to_string(),
                        reason: "no session of this workspace has that name or key prefix \
                                 (see `retrace sessions`)"
                            .into(),
                    });
                }
            },
        };
        let mut app = App {
            ws,
            stamp: stamp_of(&sessions, glance),
            bursts: local.len(),
            sessions,
            session: selected,
            timeline: None,
            entry: 0,
            showing: Showing::Change,
            paths_of: std::cell::RefCell::default(),
            paths: Vec::new(),
            path: 0,
            diff: None,
            scroll: 0,
            focus: Pane::Timeline,
            mode: Input::Browse,
            filter: String::new(),
            message: None,
            footer: Footer::default(),
            colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            quit: false,
            gc_job: None,
            reload_job: None,
            #[cfg(test)]
            hold_reload: None,
        };
        app.load_timeline();
        // The newest turn is what a user opens the history for, not an undo or a restore
        // above it (whose right pane would say "select a turn").
        if let Some(i) = app
            .rows()
            .iter()
            .position(|e| matches!(e.moment, Moment::Turn | Moment::Revert))
            && i != app.entry
        {
            app.entry = i;
            app.load_detail();
        }
        app.load_footer();
        Ok(app)
    }

    /// The selected session (None: there are none, or the local history is selected).
    #[must_use]
    pub fn selected_session(&self) -> Option<&SessionInfo> {
        self.sessions.get(self.session)
    }

    /// Whether the local history is selected (the row after the sessions).
    #[must_use]
    pub fn on_local(&self) -> bool {
        self.bursts > 0 && self.session == self.sessions.len()
    }

    /// The timeline rows the filter keeps.
    #[must_use]
    pub fn rows(&self) -> Vec<&TimelineEntry> {
        let Some(t) = &self.timeline else {
            return Vec::new();
        };
        let needle = self.filter.to_lowercase();
        t.entries
            .iter()
            .filter(|e| needle.is_empty() || self.matches(e, &needle))
            .collect()
    }

    /// Whether entry `e`'s prompt, or a path it changed, holds `needle` (lower case).
    fn matches(&self, e: &TimelineEntry, needle: &str) -> bool {
        let text = match (&e.entry, &e.burst) {
            (Some(entry), _) => entry.text.as_deref(),
            (None, Some(_)) => None,
            (None, None) => return false,
        };
        if text.is_some_and(|t| t.to_lowercase().contains(needle)) {
            return true;
        }
        let mut known = self.paths_of.borrow_mut();
        let paths = known
            .entry(e.span)
            .or_insert_with(|| lower_paths(&self.ws, e.span));
        paths.iter().any(|p| p.contains(needle))
    }

    /// The selected timeline row.
    #[must_use]
    pub fn selected_entry(&self) -> Option<&TimelineEntry> {
        self.rows().get(self.entry).copied()
    }

    /// The store's size now; what a GC would free is worked out on a thread of its own (it
    /// reads every tree the history keeps) and shown when [`App::poll`] sees it.
    fn load_footer(&mut self) {
        let settings = self.ws.settings();
        let grace = settings.gc_grace_secs.value;
        self.footer.store_bytes = crate::store::disk_bytes(self.ws.working_copy().store().path());
        self.footer.budget = settings.max_store_bytes.value;
        if self.gc_job.is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            let ws = self.ws.clone();
            let started = std::thread::Builder::new()
                .name("retrace-ui-gc-estimate".into())
                .spawn(move || {
                    let _ = tx.send(ws.gc_estimate(grace).ok());
                });
            if started.is_ok() {
                self.gc_job = Some(rx);
            }
        }
    }

    /// Takes in what background work found (a reload, the GC estimate), never waiting for
    /// it; returns whether anything changed.
    pub fn poll(&mut self) -> bool {
        let mut changed = false;
        if let Some(rx) = &self.reload_job {
            match rx.try_recv() {
                Ok(read) => {
                    self.reload_job = None;
                    changed = read.is_some_and(|r| self.take_reload(r));
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.reload_job = None,
            }
        }
        if let Some(rx) = &self.gc_job {
            match rx.try_recv() {
                Ok(frees) => {
                    self.footer.gc_frees = frees;
                    self.gc_job = None;
                    changed = true;
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.gc_job = None,
            }
        }
        changed
    }

    /// Waits for background work to finish and takes it in (tests draw what it found).
    #[cfg(test)]
    pub fn settle(&mut self) {
        if let Some(rx) = self.reload_job.take()
            && let Ok(Some(r)) = rx.recv()
        {
            self.take_reload(r);
        }
        if let Some(rx) = self.gc_job.take()
            && let Ok(frees) = rx.recv()
        {
            self.footer.gc_frees = frees;
        }
    }

    /// Whether a reload is still being read.
    pub(super) fn reloading(&self) -> bool {
        self.reload_job.is_some()
    }

    /// Whether the GC estimate is still being worked out.
    #[must_use]
    pub fn estimating(&self) -> bool {
        self.gc_job.is_some()
    }

    /// The selected session's timeline (or the local history's), read now.
    fn read_timeline(&self) -> Result<Option<Timeline>, String> {
        if self.on_local() {
            return match self.ws.local_history() {
                Ok(local) => Ok(Some(local_timeline(local))),
                Err(e) => Err(e.to_string()),
            };
        }
        self.selected_session()
            .map(|s| self.ws.session_of(s).timeline())
            .transpose()
            .map_err(|e| e.to_string())
    }

    fn load_timeline(&mut self) {
        let read = self.read_timeline();
        self.set_timeline(read);
        self.load_detail();
    }

    /// Takes a timeline as read (or why it could not be); the selected row stays in range.
    fn set_timeline(&mut self, read: Result<Option<Timeline>, String>) {
        self.timeline = match read {
            Ok(t) => t,
            Err(e) => {
                self.message = Some(Message {
                    line: format!("cannot read the session: {e}"),
                    paths: Vec::new(),
                    refused: true,
                });
                None
            }
        };
        self.entry = self.entry.min(self.rows().len().saturating_sub(1));
    }

    /// Loads the selected entry's paths (its change, or how the disk differs from it);
    /// false when they could not be read (the message says why).
    fn load_detail(&mut self) -> bool {
        let read = self
            .selected_entry()
            .map(|e| read_detail(&self.ws, e.span, &self.showing).map_err(|e| e.to_string()));
        self.set_detail(read)
    }

    /// Takes the selected entry's paths as read (None: no entry to read them of), closing
    /// the diff; false when they could not be read (the message says why).
    fn set_detail(&mut self, read: Option<Result<Vec<PathChange>, String>>) -> bool {
        self.paths.clear();
        self.diff = None;
        self.scroll = 0;
        let ok = match read {
            None => return true,
            Some(Ok(paths)) => {
                self.paths = paths;
                true
            }
            Some(Err(line)) => {
                self.say_refused(&line);
                false
            }
        };
        self.path = self.path.min(self.paths.len().saturating_sub(1));
        ok
    }

    /// The two sides the selected path's diff lies between.
    fn sides(&self) -> Option<(Option<ObjectId>, Option<ObjectId>)> {
        match &self.showing {
            Showing::Change => self
                .selected_entry()
                .and_then(|e| e.span)
                .map(|(a, b)| (a, Some(b))),
            Showing::AgainstDisk(id) => Some((Some(*id), None)),
        }
    }

    /// Opens the selected path's diff.
    fn open_diff(&mut self) {
        let Some(p) = self.paths.get(self.path).map(|p| p.path.clone()) else {
            return;
        };
        let Some((a, b)) = self.sides() else {
            return;
        };
        match self
            .ws
            .working_copy()
            .patches(a.as_ref(), b.as_ref(), std::slice::from_ref(&p))
        {
            Ok(patches) => {
                self.diff = Some(patches);
                self.scroll = 0;
                self.focus = Pane::Diff;
            }
            Err(e) => self.fail(&e),
        }
    }

    fn fail(&mut self, e: &Error) {
        self.message = Some(Message {
            line: e.to_string(),
            paths: Vec::new(),
            refused: true,
        });
    }

    /// Reloads now when another process recorded something since the last look; returns
    /// whether it did. The terminal's loop reloads on a thread instead
    /// ([`App::start_reload`]).
    pub fn refresh(&mut self) -> bool {
        // A reload under way read what this one reads again, or less.
        self.reload_job = None;
        let ask = self.ask_reload();
        ask.read().is_some_and(|r| self.take_reload(r))
    }

    /// Starts reading on a thread what other processes recorded since the last look;
    /// [`App::poll`] takes it in. One at a time; `again` (the `r` key) drops the one under
    /// way and reads whatever the sessions' stamp says.
    pub fn start_reload(&mut self, again: bool) {
        if again {
            self.stamp.clear();
            self.reload_job = None;
        }
        if self.reload_job.is_some() {
            return;
        }
        let ask = self.ask_reload();
        let (tx, rx) = std::sync::mpsc::channel();
        let started = std::thread::Builder::new()
            .name("retrace-ui-reload".into())
            .spawn(move || {
                let _ = tx.send(ask.read());
            });
        if started.is_ok() {
            self.reload_job = Some(rx);
        }
    }

    /// Tests: the next reload's reading waits until `release` receives or its sender is
    /// dropped.
    #[cfg(test)]
    pub(super) fn hold_next_reload(&mut self, release: Receiver<()>) {
        self.hold_reload = Some(release);
    }

    fn selection(&self) -> Selection {
        Selection {
            session: self.selected_session().map(|s| s.key),
            local: self.on_local(),
            row: self.selected_entry().map(identity),
            showing: self.showing.clone(),
        }
    }

    fn ask_reload(&mut self) -> ReloadAsk {
        ReloadAsk {
            ws: self.ws.clone(),
            stamp: self.stamp.clone(),
            at: self.selection(),
            known: (!self.filter.is_empty())
                .then(|| self.paths_of.borrow().keys().copied().collect()),
            #[cfg(test)]
            hold: self.hold_reload.take(),
        }
    }

    /// Takes in what a reload read: the same session, row and view stay selected (a new
    /// turn comes in above the row), reading again only what the selection moved to since.
    fn take_reload(&mut self, r: Reloaded) -> bool {
        let at = self.selection();
        self.bursts = r.bursts;
        self.session = if at.local && r.bursts > 0 {
            r.sessions.len()
        } else {
            at.session
                .and_then(|k| r.sessions.iter().position(|s| s.key == k))
                .unwrap_or(0)
        };
        self.sessions = r.sessions;
        self.stamp = r.stamp;
        self.paths_of.borrow_mut().extend(r.paths_of);
        let (path, focus) = (self.path, self.focus);
        let read_here = if self.on_local() {
            r.at.local && !r.local.is_empty()
        } else {
            !r.at.local && self.selected_session().map(|s| s.key) == r.timeline_of
        };
        let timeline = if read_here {
            r.timeline
        } else {
            self.read_timeline()
        };
        self.set_timeline(timeline);
        let found = at
            .row
            .and_then(|k| self.rows().iter().position(|e| identity(e) == k));
        if let Some(i) = found {
            self.entry = i;
            self.showing = at.showing.clone();
        } else {
            self.showing = Showing::Change;
        }
        match r.detail {
            Some(detail) if read_here && found.is_some() && r.at == at => {
                self.set_detail(Some(detail));
            }
            _ => {
                self.load_detail();
            }
        }
        self.path = path.min(self.paths.len().saturating_sub(1));
        self.focus = if focus == Pane::Diff {
            Pane::Paths
        } else {
            focus
        };
        self.load_footer();
        true
    }

    /// Selects timeline row `at`, showing its change.
    fn select_row(&mut self, at: usize) {
        self.entry = at;
        self.showing = Showing::Change;
        self.load_detail();
        if self.focus == Pane::Diff {
            self.focus = Pane::Paths;
        }
    }

    /// Moves the selection of the focused pane by `by` rows.
    fn step(&mut self, by: isize) {
        let moved = |at: usize, len: usize| -> usize {
            at.saturating_add_signed(by).min(len.saturating_sub(1))
        };
        match self.focus {
            Pane::Sessions => {
                let rows = self.sessions.len() + usize::from(self.bursts > 0);
                let at = moved(self.session, rows);
                if at != self.session {
                    self.session = at;
                    self.entry = 0;
                    self.showing = Showing::Change;
                    self.load_timeline();
                }
            }
            Pane::Timeline => {
                let at = moved(self.entry, self.rows().len());
                if at != self.entry {
                    self.select_row(at);
                }
            }
            Pane::Paths => {
                let at = moved(self.path, self.paths.len());
                if at != self.path {
                    self.path = at;
                    if self.diff.is_some() {
                        self.open_diff();
                        self.focus = Pane::Paths;
                    }
                }
            }
            Pane::Diff => {
                let lines: usize = self
                    .diff
                    .iter()
                    .flatten()
                    .map(|p| p.text.lines().count())
                    .sum();
                let at = usize::from(self.scroll)
                    .saturating_add_signed(by)
                    .min(lines.saturating_sub(1));
                self.scroll = u16::try_from(at).unwrap_or(u16::MAX);
            }
        }
    }

    /// What a key does. `code` is the key; `ctrl` whether Control was held.
    pub fn key(&mut self, code: Key, ctrl: bool) {
        if ctrl {
            // Ctrl-C quits; other chords (Ctrl-U, Ctrl-D of other tools) do nothing here.
            self.quit |= code == Key::Char('c');
            return;
        }
        match self.mode.clone() {
            Input::Help => self.mode = Input::Browse,
            Input::Confirm(action) => {
                self.mode = Input::Browse;
                if code == Key::Char('y') || code == Key::Char('Y') {
                    self.run(&action);
                } else {
                    self.message = Some(Message {
                        line: "nothing done".into(),
                        ..Message::default()
                    });
                }
            }
            Input::Filter => match code {
                Key::Enter => self.mode = Input::Browse,
                Key::Esc => {
                    self.filter.clear();
                    self.mode = Input::Browse;
                    self.select_row(0);
                }
                Key::Backspace => {
                    self.filter.pop();
                    self.select_row(0);
                }
                Key::Char(c) => {
                    self.filter.push(c);
                    self.select_row(0);
                }
                _ => {}
            },
            Input::Browse => self.browse(code),
        }
    }

    fn browse(&mut self, code: Key) {
        // A line that only informs (a diff's summary, "nothing done") goes at the next key;
        // a refusal naming paths stays until it is read and dismissed (Esc) or replaced.
        if self
            .message
            .as_ref()
            .is_some_and(|m| !m.refused && m.paths.is_empty())
        {
            self.message = None;
        }
        let page = 10;
        match code {
            Key::Char('q') => self.quit = true,
            Key::Char('?') => self.mode = Input::Help,
            Key::Char('/') => {
                self.mode = Input::Filter;
                self.focus = Pane::Timeline;
            }
            Key::Up | Key::Char('k') => self.step(-1),
            Key::Down | Key::Char('j') => self.step(1),
            Key::PageUp => self.step(-page),
            Key::PageDown => self.step(page),
            Key::Home | Key::Char('g') => self.step(isize::MIN / 2),
            Key::End | Key::Char('G') => self.step(isize::MAX / 2),
            Key::Tab => {
                self.focus = match self.focus {
                    Pane::Sessions => Pane::Timeline,
                    Pane::Timeline => Pane::Paths,
                    Pane::Paths if self.diff.is_some() => Pane::Diff,
                    Pane::Paths | Pane::Diff => Pane::Sessions,
                };
            }
            Key::BackTab => {
                self.focus = match self.focus {
                    Pane::Sessions if self.diff.is_some() => Pane::Diff,
                    Pane::Sessions | Pane::Diff => Pane::Paths,
                    Pane::Timeline => Pane::Sessions,
                    Pane::Paths => Pane::Timeline,
                };
            }
            Key::Enter => match self.focus {
                Pane::Sessions => self.focus = Pane::Timeline,
                Pane::Timeline => self.focus = Pane::Paths,
                Pane::Paths => self.open_diff(),
                Pane::Diff => {}
            },
            Key::Esc => {
                if self.diff.take().is_some() {
                    self.focus = Pane::Paths;
                } else if self.showing != Showing::Change {
                    self.showing = Showing::Change;
                    self.load_detail();
                } else {
                    self.message = None;
                }
            }
            Key::Char('u' | 'U' | 'v' | 'c') if self.on_local() => self.say_refused(
                "the local history has no turns: s restores the workspace to the selected \
                 burst, p one path of it",
            ),
            // Asked only when there is something to do, naming the turn.
            Key::Char('u') => match self.status().and_then(|st| st.cursor) {
                Some(n) => {
                    let what = self.turn_words(n);
                    self.ask(Action::Undo(what));
                }
                None => self.say_refused("nothing to undo: no turn of this session is applied"),
            },
            Key::Char('U') => match self.status().and_then(|st| st.redo_turn) {
                Some((n, _)) => {
                    let what = self.turn_words(n);
                    self.ask(Action::Redo(what));
                }
                None => self.say_refused("nothing to redo"),
            },
            Key::Char('v') => match self.selected_entry() {
                Some(TimelineEntry {
                    moment: Moment::Turn | Moment::Revert,
                    entry: Some(e),
                    ..
                }) => {
                    let n = e.number;
                    self.ask(Action::Revert(n));
                }
                _ => self.say_refused("select a turn to revert"),
            },
            Key::Char('s') => match (self.restore_target(), self.selected_entry()) {
                (Some(r), _) => self.ask(Action::RestoreEntry(r)),
                (
                    None,
                    Some(TimelineEntry {
                        moment: Moment::Burst,
                        snapshot: Some(id),
                        ..
                    }),
                ) => {
                    let id = *id;
                    self.ask(Action::RestoreSnapshot(id));
                }
                _ => self.say_refused("this entry has no snapshot of the files to restore"),
            },
            Key::Char('p') => {
                let target = self.entry_snapshot();
                match (target, self.paths.get(self.path)) {
                    (Some(id), Some(p)) => {
                        let p = p.path.clone();
                        self.ask(Action::RestorePath(id, p));
                    }
                    _ => self.say_refused("select a path of an entry with a snapshot"),
                }
            }
            Key::Char('c') => self.ask(Action::Checkpoint),
            Key::Char('d') => match self.entry_snapshot() {
                Some(id) => {
                    self.showing = Showing::AgainstDisk(id);
                    if !self.load_detail() {
                        self.showing = Showing::Change;
                        return;
                    }
                    self.focus = Pane::Paths;
                    self.message = Some(Message {
                        line: format!(
                            "{} path(s) on disk differ from {} (Esc: back to its change)",
                            self.paths.len(),
                            id.short()
                        ),
                        ..Message::default()
                    });
                }
                None => self.say_refused("this entry has no snapshot to compare the disk with"),
            },
            Key::Char('r') => self.start_reload(true),
            _ => {}
        }
    }

    /// The anchor a whole restore of the selected entry goes to: the state it left.
    fn restore_target(&self) -> Option<String> {
        let e = self.selected_entry()?;
        match (e.moment, e.entry.as_ref()) {
            (Moment::Checkpoint, Some(l)) => Some(format!("checkpoint:{}", l.number)),
            (Moment::Undo, Some(l)) => Some(format!("turn:{}:before", l.number)),
            (Moment::Navigate, _) => e.to.map(|n| format!("turn:{n}")),
            (Moment::Burst, _) => None,
            (_, Some(l)) if l.after.is_some() => Some(format!("turn:{}", l.number)),
            _ => None,
        }
    }

    /// The snapshot the selected entry left the disk at.
    fn entry_snapshot(&self) -> Option<ObjectId> {
        let e = self.selected_entry()?;
        e.snapshot.or_else(|| {
            let log = e.entry.as_ref()?;
            match e.moment {
                Moment::Checkpoint => log.before,
                _ => log.after,
            }
        })
    }

    /// The selected session's status (None without one, or when it cannot be read).
    fn status(&self) -> Option<crate::history::SessionStatus> {
        let info = self.selected_session()?;
        self.ws.session_of(info).status().ok()
    }

    /// Turn `n` in words for a question: its number, its prompt's first line, how many
    /// files it changed ("turn 3 'add notes' (2 files)").
    fn turn_words(&self, n: u64) -> String {
        let entry = self.timeline.as_ref().and_then(|t| {
            t.entries.iter().find_map(|e| {
                e.entry
                    .as_ref()
                    .filter(|l| matches!(e.moment, Moment::Turn | Moment::Revert) && l.number == n)
            })
        });
        let Some(l) = entry else {
            return format!("turn {n}");
        };
        let prompt = l
            .text
            .as_deref()
            .map(|t| format!(" '{}'", crate::history::inspect::first_line(t, 40)))
            .unwrap_or_default();
        let files =
            u64::from(l.counts.added) + u64::from(l.counts.modified) + u64::from(l.counts.deleted);
        format!(
            "turn {n}{prompt} ({files} file{})",
            if files == 1 { "" } else { "s" }
        )
    }

    fn ask(&mut self, action: Action) {
        self.mode = Input::Confirm(action);
    }

    fn say_refused(&mut self, line: &str) {
        self.message = Some(Message {
            line: line.into(),
            paths: Vec::new(),
            refused: true,
        });
    }

    /// Runs a confirmed action with the CLI's guards (no `--force`) and says what came of it.
    fn run(&mut self, action: &Action) {
        let restored = |p: Option<&str>, o: &crate::RestoreOutcome| Message {
            line: format!(
                "restored {}: {} written, {} deleted",
                p.unwrap_or("the workspace"),
                o.written.len(),
                o.deleted.len()
            ),
            ..Message::default()
        };
        match action {
            // A burst is in no session: the restore is the workspace's, as `retrace restore
            // ID` (refused over unsaved work or another writer's, a safety snapshot first).
            Action::RestoreSnapshot(id) => {
                let done = self.ws.restore(id, RestoreOptions::default());
                self.message = Some(match done {
                    Ok(o) => restored(None, &o),
                    Err(e) => refusal_of(&e.into()),
                });
                self.after_action();
                return;
            }
            Action::RestorePath(id, p) => {
                let done = self.ws.restore_paths(
                    id,
                    std::slice::from_ref(p),
                    RestoreOptions::default(),
                    &NoProgress,
                );
                self.message = Some(match done {
                    Ok(o) => restored(Some(p), &o),
                    Err(e) => refusal_of(&e.into()),
                });
                self.after_action();
                return;
            }
            _ => {}
        }
        let Some(info) = self.selected_session().cloned() else {
            self.say_refused("no session to act on");
            return;
        };
        let session = self.ws.session_of(&info);
        let opts = OpOptions::default();
        let outcome = match action {
            Action::Undo(_) => session.undo_with(Mode::Files, opts),
            Action::Redo(_) => session.redo_with(opts),
            Action::Revert(n) => session.revert(*n, opts),
            Action::RestoreEntry(r) => session.navigate_with(r, Mode::Files, opts),
            Action::Checkpoint => session.checkpoint(None),
            Action::RestoreSnapshot(_) | Action::RestorePath(..) => return,
        };
        self.message = Some(match outcome {
            Ok(o) => message_of(&o),
            Err(e) => refusal_of(&e),
        });
        self.after_action();
    }

    fn after_action(&mut self) {
        self.stamp.clear();
        let message = self.message.take();
        self.refresh();
        self.message = message;
    }
}

/// The one-line result of an outcome, with the paths a refusal names.
fn message_of(o: &Outcome) -> Message {
    match o {
        Outcome::Conflict { paths, count } => Message {
            line: format!(
                "conflict: {count} path(s) changed since; nothing written (the CLI's --force \
                 overwrites them, keeping a safety snapshot)"
            ),
            paths: paths.clone(),
            refused: true,
        },
        Outcome::Dirty { paths, count } => Message {
            line: format!(
                "{} (c takes a checkpoint)",
                crate::error::dirty_refusal(*count)
            ),
            paths: paths.clone(),
            refused: true,
        },
        // What was left alone is listed, each path with why (whose it is).
        Outcome::Restored { skipped, .. } => Message {
            line: o.message_at(None),
            paths: skipped
                .iter()
                .map(|s| format!("{} ({})", s.path, s.reason))
                .collect(),
            refused: false,
        },
        _ => Message {
            line: o.message_at(None),
            paths: Vec::new(),
            refused: !o.is_success(),
        },
    }
}

/// An error as a refusal: its line, and the paths a dirty-workspace refusal names.
fn refusal_of(e: &Error) -> Message {
    let paths = match e {
        Error::Restore(r) => match r.as_ref() {
            crate::RestoreError::Dirty { paths, .. } => paths.clone(),
            crate::RestoreError::Held { held } => held
                .iter()
                .map(|h| format!("{} ({})", h.path, h.writer))
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    Message {
        line: e.to_string(),
        paths,
        refused: true,
    }
}

/// A key, as the UI reads it (the terminal's events map onto these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A character.
    Char(char),
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
    /// Tab.
    Tab,
    /// Shift-Tab.
    BackTab,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Home.
    Home,
    /// End.
    End,
}
