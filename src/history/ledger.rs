//! The ledger: per path, who last wrote it and the version they left there.
//!
//! Writers are the sessions' steps (tool calls) and turns, retrace's own operations (undo,
//! redo, revert, restore, navigate: of a session or of the user) and the user (anything
//! written while no tool call of any session ran). The ledger is brought up to date at
//! every point where the set of running writers changes (a turn's or a shell step's
//! capture, an operation's look at the disk) from the snapshot it was last brought up to
//! date with (`ledger_at`) to the disk now: each path that changed in between was written
//! by whoever could write it during that window (`attribute`); several sessions' tool
//! calls at once make it ambiguous ([`Writer::Several`]). An edit tool's step claims the
//! files it names at its end ([`claim`]) without a capture, and an operation claims the
//! paths it wrote in the commit that records it. A path whose disk version is the one the
//! ledger holds keeps its writer: the entry names a version, not a time.
//!
//! The ownership rule (`history::ownership`) reads it. It keeps an entry for every path
//! written since it began (deleted ones included: one small record each) until retention
//! finds no kept turn can read it (`history::ledger_prune`, docs/retention.md);
//! `docs/format.md` has the record.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::db::{STEP_MASK, SessionKey, step_row};
use super::record::{HISTORY_VERSION, StepRecord, TurnRecord, TurnState, decode, encode};
use crate::diff::Change;
use crate::error::StoreError;
use crate::object::record::DecodeError;
use crate::object::{EntryKind, ObjectId};
use super::tables::{LEDGER, LedgerMeta, SESSIONS, STEPS, SetLedgerMeta, TURNS};
use crate::store::{BytesEntries, WriteTx, now_ms};

/// Who wrote a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Writer {
    /// Written while no tool call of any session ran: the user (an editor, a terminal).
    User,
    /// A session's turn: one of its steps (`step`), or the turn as a whole (a turn whose
    /// agent reports no steps, or several of its own steps at once).
    Turn {
        /// The session's key.
        session: [u8; 32],
        /// The turn.
        turn: u64,
        /// The step, when exactly one ran.
        step: Option<u64>,
    },
    /// One of retrace's operations: of a session (`undo of turn 3`), or of the user (no
    /// session: `restore 3f2a9c1e -- src/app.rs`).
    Op {
        /// The session it was done for.
        session: Option<[u8; 32]>,
        /// What it was.
        what: String,
    },
    /// Tool calls of several sessions ran at once: any of them may have written it.
    Several(Vec<Writer>),
}

impl Writer {
    /// Whether session `key` is (one of) the writer(s) by itself: its turn or step, or an
    /// operation done for it.
    #[must_use]
    pub fn is_session(&self, key: &SessionKey) -> bool {
        match self {
            Writer::Turn { session, .. } => *session == key.0,
            Writer::Op { session, .. } => *session == Some(key.0),
            Writer::User | Writer::Several(_) => false,
        }
    }

    /// One line for messages: "session 3f2a9c1e, turn 4 step 3", "the user", "undo of turn
    /// 2 of session 3f2a9c1e", "ambiguous: ... at once". `name` names a session; `running`
    /// says whether a session's turn still runs (then said: "which is still running").
    #[must_use]
    pub fn describe(
        &self,
        name: &dyn Fn(&[u8; 32]) -> String,
        running: &dyn Fn(&[u8; 32], u64) -> bool,
    ) -> String {
        let still = |s: &[u8; 32], t: u64| {
            if running(s, t) {
                ", which is still running"
            } else {
                ""
            }
        };
        match self {
            Writer::User => "the user (outside every tool call)".into(),
            Writer::Turn {
                session,
                turn,
                step: Some(k),
            } => format!(
                "session {}, turn {turn} step {k}{}",
                name(session),
                still(session, *turn)
            ),
            Writer::Turn {
                session,
                turn,
                step: None,
            } => format!(
                "session {}, turn {turn}{}",
                name(session),
                still(session, *turn)
            ),
            Writer::Op {
                session: Some(s),
                what,
            } => format!("{what} of session {}", name(s)),
            Writer::Op {
                session: None,
                what,
            } => format!("{what} by the user"),
            Writer::Several(all) => {
                let names: Vec<String> = all.iter().map(|w| w.describe(name, running)).collect();
                format!(
                    "tool calls of several sessions at once ({})",
                    names.join("; ")
                )
            }
        }
    }
}

/// The ledger's record of one path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The stored form it was read from: [`HISTORY_VERSION`] (as it is here) or
    /// [`PACKED_VERSION`] (written since 2026-12-05; what [`LedgerEntry::encode`] writes).
    pub version: u8,
    /// The version the writer left: kind and content id; None when it deleted the path.
    pub left: Option<(EntryKind, ObjectId)>,
    /// Who.
    pub writer: Writer,
    /// Unix milliseconds when the ledger learned of it.
    pub time_ms: u64,
    /// The versions written there before, newest first, with their writers (at most
    /// [`EARLIER`]): a writer whose version the path holds again still owns it.
    pub earlier: Vec<(Option<(EntryKind, ObjectId)>, Writer)>,
}

/// Earlier versions an entry keeps.
pub const EARLIER: usize = 16;

impl LedgerEntry {
    /// Whether session `key` left the version the path holds now: its last writer, or the
    /// writer of an earlier identical version.
    #[must_use]
    pub fn left_by(&self, key: &SessionKey) -> bool {
        self.writer.is_session(key)
            || self
                .earlier
                .iter()
                .any(|(left, w)| *left == self.left && w.is_session(key))
    }
}

/// The stored form's version since 2026-12-05 (each version and writer once, see
/// [`LedgerEntry::encode`]); version 1 ([`HISTORY_VERSION`]) was the entry as it is in
/// memory, and still reads.
pub const PACKED_VERSION: u8 = 2;

/// A version a writer left at a path (None: deleted).
type Left = Option<(EntryKind, ObjectId)>;

/// An entry as stored: each distinct version and writer once, and the path's history (the
/// last write first, then the earlier ones, newest first) as indexes into them. A path
/// written back and forth (a file deleted and restored again and again, a line toggled by
/// two sessions) repeats a few versions and writers many times: a whole restore of a
/// workspace read and writes every path's entry, so their size is its cost.
#[derive(Serialize, Deserialize)]
struct Packed {
    version: u8,
    time_ms: u64,
    versions: Vec<Left>,
    writers: Vec<Writer>,
    /// (version, writer) indexes; the first is the last write. Never empty.
    history: Vec<(u8, u8)>,
}

impl Packed {
    /// An entry of one write.
    fn first(left: Left, writer: &Writer) -> Packed {
        Packed {
            version: PACKED_VERSION,
            time_ms: now_ms(),
            versions: vec![left],
            writers: vec![writer.clone()],
            history: vec![(0, 0)],
        }
    }

    /// `e` packed: its last write and at most [`EARLIER`] earlier ones (an entry of the
    /// first form may hold more, which no update ever wrote).
    fn of(e: &LedgerEntry) -> Packed {
        let mut p = Packed::first(e.left, &e.writer);
        p.time_ms = e.time_ms;
        for (v, w) in e.earlier.iter().take(EARLIER) {
            let at = (p.version_at(*v), p.writer_at(w));
            p.history.push(at);
        }
        p
    }

    /// Reads an entry of either form, checked (every index names a version and a writer,
    /// and there is a last write); None for one that does not.
    fn read(bytes: &[u8]) -> Result<Packed, DecodeError> {
        if bytes.first() != Some(&PACKED_VERSION) {
            return decode::<LedgerEntry>(bytes).map(|e| Packed::of(&e));
        }
        let p: Packed =
            crate::object::record::decode_versioned(bytes, PACKED_VERSION, "ledger entry")?;
        let invalid = |detail: String| DecodeError::Fields {
            what: "ledger entry",
            detail,
        };
        if p.history.is_empty() {
            return Err(invalid("no write".into()));
        }
        if let Some((v, w)) = p.history.iter().find(|&&(v, w)| {
            usize::from(v) >= p.versions.len() || usize::from(w) >= p.writers.len()
        }) {
            return Err(invalid(format!("index ({v}, {w}) out of range")));
        }
        Ok(p)
    }

    /// The version the last writer left.
    fn left(&self) -> Left {
        self.history
            .first()
            .and_then(|&(v, _)| self.versions.get(usize::from(v)).copied())
            .flatten()
    }

    fn version_at(&mut self, v: Left) -> u8 {
        let i = self
            .versions
            .iter()
            .position(|x| *x == v)
            .unwrap_or_else(|| {
                self.versions.push(v);
                self.versions.len() - 1
            });
        // At most 2 + EARLIER distinct (before `compact`): far below 256.
        u8::try_from(i).unwrap_or(u8::MAX)
    }

    fn writer_at(&mut self, w: &Writer) -> u8 {
        let i = self.writers.iter().position(|x| x == w).unwrap_or_else(|| {
            self.writers.push(w.clone());
            self.writers.len() - 1
        });
        u8::try_from(i).unwrap_or(u8::MAX)
    }

    /// `writer` leaves `left` there: the last write, the one before it the newest earlier
    /// one, at most [`EARLIER`] of those kept; versions and writers no write names go.
    fn push(&mut self, left: Left, writer: &Writer) {
        let at = (self.version_at(left), self.writer_at(writer));
        self.history.insert(0, at);
        self.history.truncate(1 + EARLIER);
        self.time_ms = now_ms();
        let used = |n: usize, of: fn(&(u8, u8)) -> u8, h: &[(u8, u8)]| -> Vec<Option<u8>> {
            let mut map = vec![None; n];
            let mut next = 0u8;
            for x in h {
                let slot = &mut map[usize::from(of(x))];
                if slot.is_none() {
                    *slot = Some(next);
                    next += 1;
                }
            }
            map
        };
        let vmap = used(self.versions.len(), |x| x.0, &self.history);
        let wmap = used(self.writers.len(), |x| x.1, &self.history);
        if vmap.iter().all(Option::is_some) && wmap.iter().all(Option::is_some) {
            return;
        }
        let keep = |map: &[Option<u8>]| {
            let mut order: Vec<(u8, usize)> = map
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.map(|m| (m, i)))
                .collect();
            order.sort_unstable();
            order.into_iter().map(|(_, i)| i).collect::<Vec<usize>>()
        };
        self.versions = keep(&vmap).into_iter().map(|i| self.versions[i]).collect();
        let writers = std::mem::take(&mut self.writers);
        let mut writers: Vec<Option<Writer>> = writers.into_iter().map(Some).collect();
        self.writers = keep(&wmap)
            .into_iter()
            .filter_map(|i| writers[i].take())
            .collect();
        for (v, w) in &mut self.history {
            *v = vmap[usize::from(*v)].unwrap_or(0);
            *w = wmap[usize::from(*w)].unwrap_or(0);
        }
    }

    /// The entry as [`LedgerEntry`] holds it.
    fn expand(&self) -> LedgerEntry {
        let at = |&(v, w): &(u8, u8)| {
            (
                self.versions[usize::from(v)],
                self.writers[usize::from(w)].clone(),
            )
        };
        let (left, writer) = at(&self.history[0]);
        LedgerEntry {
            version: PACKED_VERSION,
            left,
            writer,
            time_ms: self.time_ms,
            earlier: self.history[1..].iter().map(at).collect(),
        }
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        encode(self)
    }
}

/// The entry `old` (read: none when absent or unreadable) becomes when `writer` leaves
/// `left` there.
fn pushed(old: Option<Packed>, left: Left, writer: &Writer) -> Packed {
    match old {
        Some(mut p) => {
            p.push(left, writer);
            p
        }
        None => Packed::first(left, writer),
    }
}

impl LedgerEntry {
    /// Decodes an entry, of either stored form.
    ///
    /// # Errors
    /// [`DecodeError`] for a record that does not decode.
    pub fn decode(bytes: &[u8]) -> Result<LedgerEntry, DecodeError> {
        if bytes.first() != Some(&PACKED_VERSION) {
            return decode(bytes);
        }
        Packed::read(bytes).map(|p| p.expand())
    }

    /// Encodes the entry in its stored form (each distinct version and writer once; at
    /// most [`EARLIER`] earlier writes).
    ///
    /// # Errors
    /// A message for an entry that does not encode.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        Packed::of(self).bytes()
    }
}

/// What the records, read at an update, say wrongly about the window since the last one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    /// The turn whose before-snapshot this is: recorded as running, it did not run yet.
    pub began: Option<(SessionKey, u64)>,
    /// A turn closed in the same commit (a newer turn superseded it) or reopened (a second
    /// stop extends it): it ran in the window.
    pub ran: Option<(SessionKey, u64)>,
    /// A turn whose agent is beginning a step: it reports its tool calls, so what was
    /// written before its first step is not the turn's as a whole (the user's, or another
    /// writer's).
    pub stepping: Option<(SessionKey, u64)>,
}

/// A writer that may be writing now, and where.
struct Running {
    writer: Writer,
    /// The paths it may write: None for any path.
    only: Option<HashSet<Vec<u8>>>,
}

/// The version an entry of a flat list stands for.
fn left_of(e: Option<&crate::object::FlatEntry>) -> Option<(EntryKind, ObjectId)> {
    e.filter(|e| e.kind != EntryKind::Dir)
        .map(|e| (e.kind, e.id))
}

/// Every writer running now: per session, its pending turn's running steps, or the turn
/// itself while it has recorded no step yet.
fn running(tx: &WriteTx<'_>) -> Result<Vec<Running>, StoreError> {
    let bad = |e: DecodeError| StoreError::History {
        path: tx.path().into(),
        detail: e.to_string(),
    };
    let mut out = Vec::new();
    for (key, _) in tx.keyed_entries(SESSIONS)? {
        let Some((_, bytes)) = tx.last_row(TURNS, &key)? else {
            continue;
        };
        let t: TurnRecord = decode(&bytes).map_err(bad)?;
        if t.state != TurnState::Pending || t.ended_ms.is_some() {
            continue;
        }
        let mut steps: Vec<StepRecord> = Vec::new();
        let mut any = false;
        let (first, last) = (step_row(t.number, 0), step_row(t.number, STEP_MASK));
        tx.each_row_in(STEPS, &key, first, last, |_, v| {
            let s: StepRecord = decode(v).map_err(bad)?;
            any = true;
            if s.ended_ms.is_none() {
                steps.push(s);
            }
            Ok(())
        })?;
        if !any {
            out.push(Running {
                writer: Writer::Turn {
                    session: key,
                    turn: t.number,
                    step: None,
                },
                only: None,
            });
        }
        for s in steps {
            out.push(Running {
                writer: Writer::Turn {
                    session: key,
                    turn: t.number,
                    step: Some(s.number),
                },
                only: (!s.shell()).then(|| s.files.iter().cloned().collect()),
            });
        }
    }
    Ok(out)
}

/// Who wrote `path` in a window where `running` ran: the user when none could; one
/// session's turn (its step when exactly one step could); several sessions otherwise.
fn attribute(path: &[u8], running: &[Running]) -> Writer {
    let could: Vec<&Writer> = running
        .iter()
        .filter(|r| r.only.as_ref().is_none_or(|o| o.contains(path)))
        .map(|r| &r.writer)
        .collect();
    let Some(first) = could.first() else {
        return Writer::User;
    };
    let turn_of = |w: &Writer| match w {
        Writer::Turn { session, turn, .. } => Some((*session, *turn)),
        _ => None,
    };
    if could.len() == 1 {
        return (*first).clone();
    }
    if let Some((session, turn)) = turn_of(first)
        && could.iter().all(|w| turn_of(w) == Some((session, turn)))
    {
        // Several steps of one turn (parallel tool calls, a subagent's): the turn's.
        return Writer::Turn {
            session,
            turn,
            step: None,
        };
    }
    let mut sessions: Vec<Writer> = Vec::new();
    for w in could {
        let w = match turn_of(w) {
            Some((session, turn)) => Writer::Turn {
                session,
                turn,
                step: None,
            },
            None => w.clone(),
        };
        if !sessions.contains(&w) {
            sessions.push(w);
        }
    }
    Writer::Several(sessions)
}

/// The entry a path gets when `writer` leaves `left` there over `old`.
fn next(
    old: Option<LedgerEntry>,
    left: Option<(EntryKind, ObjectId)>,
    writer: Writer,
) -> LedgerEntry {
    let mut earlier = Vec::new();
    if let Some(old) = old {
        earlier.push((old.left, old.writer));
        earlier.extend(old.earlier);
        earlier.truncate(EARLIER);
    }
    LedgerEntry {
        version: PACKED_VERSION,
        left,
        writer,
        time_ms: now_ms(),
        earlier,
    }
}

fn store(rows: &mut BytesEntries<'_>, path: &[u8], rec: &LedgerEntry) -> Result<(), StoreError> {
    let bytes = rec.encode().map_err(|detail| StoreError::Encode {
        path: rows.path().into(),
        detail,
    })?;
    rows.put(path, &bytes)
}

fn put(
    rows: &mut BytesEntries<'_>,
    path: &[u8],
    old: Option<LedgerEntry>,
    left: Option<(EntryKind, ObjectId)>,
    writer: Writer,
) -> Result<(), StoreError> {
    store(rows, path, &next(old, left, writer))
}

/// The entry of `path`, if any (an entry that does not decode counts as none: the path is
/// then nobody's in particular).
fn entry(rows: &BytesEntries<'_>, path: &[u8]) -> Result<Option<LedgerEntry>, StoreError> {
    Ok(rows.get(path)?.and_then(|b| LedgerEntry::decode(&b).ok()))
}

/// Brings the ledger up to date with snapshot `root`, given `changes` from the snapshot it
/// was last brought up to date with (`from`, see [`from`], read with `reader`): each changed path whose version
/// is not the one its entry names was written by whoever could write it meanwhile (the
/// writers running now, as `window` corrects them).
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn bring_up_to_date(
    tx: &WriteTx<'_>,
    (reader, from): (&crate::store::StoreReader, ObjectId),
    changes: &[Change],
    root: ObjectId,
    window: Window,
) -> Result<(), StoreError> {
    update(tx, (reader, from), (changes, root), window, None)
}

/// [`bring_up_to_date`] with `changes` up to snapshot `between` (the disk an operation
/// found), then [`claim_changes`] of `then` (what the operation wrote, up to `root`) by
/// `writer`, in one pass: a path in both gets both entries, read and written once (a whole
/// restore into an emptied workspace changes every path twice).
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn bring_up_to_date_and_claim(
    tx: &WriteTx<'_>,
    (reader, from): (&crate::store::StoreReader, ObjectId),
    (changes, between): (&[Change], ObjectId),
    (then, writer): (&[Change], &Writer),
    root: ObjectId,
) -> Result<(), StoreError> {
    update(
        tx,
        (reader, from),
        (changes, between),
        Window::default(),
        Some((then, writer, root)),
    )
}

/// The body of [`bring_up_to_date`] and [`bring_up_to_date_and_claim`].
fn update(
    tx: &WriteTx<'_>,
    (reader, from): (&crate::store::StoreReader, ObjectId),
    (changes, root): (&[Change], ObjectId),
    window: Window,
    then: Option<(&[Change], &Writer, ObjectId)>,
) -> Result<(), StoreError> {
    let claimed = claims(tx);
    if !claimed.is_empty() {
        tx.set_ledger_claims(None)?;
    }
    // A claim of the empty path: a shell step that ran with no capture around it may have
    // written anything in this window.
    let (anywhere, claimed): (Vec<_>, Vec<_>) =
        claimed.into_iter().partition(|(p, _)| p.is_empty());
    let claimed: std::collections::HashMap<Vec<u8>, Writer> = claimed.into_iter().collect();
    let observed = observed(tx);
    if !observed.is_empty() {
        tx.set_ledger_observed(None)?;
    }
    if claimed.is_empty() && observed.is_empty() && changes.is_empty() {
        return match then {
            None => tx.set_ledger_at(root),
            Some((then, writer, root)) => claim_all(tx, then, writer, root, &[]),
        };
    }
    let mut running = running(tx)?;
    // A turn whose before-snapshot this is did not run in the window before it.
    if let Some((key, turn)) = window.began {
        running.retain(|r| {
            !matches!(r.writer, Writer::Turn { session, turn: t, .. } if session == key.0 && t == turn)
        });
    }
    if let Some((key, turn)) = window.stepping {
        running.retain(|r| !is_whole_turn(&r.writer, key, turn));
    }
    running.extend(
        anywhere
            .into_iter()
            .map(|(_, writer)| Running { writer, only: None }),
    );
    if let Some((key, turn)) = window.ran {
        running.push(Running {
            writer: Writer::Turn {
                session: key.0,
                turn,
                step: None,
            },
            only: None,
        });
    }
    let unchanged = |path: &[u8]| {
        changes
            .binary_search_by(|c| c.path.as_bytes().cmp(path))
            .is_err()
    };
    let mut rows = tx.open_bytes(LEDGER)?;
    // Claimed paths that did not change keep their version, now the claimer's.
    for (path, writer) in &claimed {
        if unchanged(path)
            && let Some(e) = entry(&rows, path)?
        {
            let left = e.left;
            put(&mut rows, path, Some(e), left, writer.clone())?;
        }
    }
    // Paths an edit step read that did not change between the snapshots: the version both
    // hold there, when it is not the one read (written since, deleted since).
    for path in observed
        .iter()
        .filter(|p| unchanged(p) && !claimed.contains_key(*p))
    {
        let (Some(e), Ok(now)) = (entry(&rows, path)?, version_at(reader, &from, path)) else {
            continue; // no entry, or unreadable: as it is
        };
        if e.left != now {
            put(&mut rows, path, Some(e), now, attribute(path, &running))?;
        }
    }
    // What the operation then wrote at a path: its entry on top of this update's.
    let then_at = |path: &[u8]| {
        then.and_then(|(then, writer, _)| {
            then.binary_search_by(|c| c.path.as_bytes().cmp(path))
                .ok()
                .filter(|&i| !then[i].dirs_only())
                .map(|i| (left_of(then[i].new.as_ref()), writer))
        })
    };
    // Every changed path's entry: read in one pass, worked out on every core (a whole
    // restore changes every path of the workspace), written in order.
    let work: Vec<&Change> = changes.iter().filter(|c| !c.dirs_only()).collect();
    let scan = rows.dense(work.len())?;
    let mut both = Vec::new();
    for work in work.chunks(CHUNK) {
        let paths: Vec<&[u8]> = work.iter().map(|c| c.path.as_bytes()).collect();
        let olds = rows.get_sorted(&paths, scan)?;
        let new = map_all(work.iter().zip(olds).collect(), |(c, old)| {
            let old = old.and_then(|b| Packed::read(&b).ok());
            let left = left_of(c.new.as_ref());
            let (updated, changed) = if let Some(writer) = claimed.get(c.path.as_bytes()) {
                (Some(pushed(old, left, writer)), true)
            } else if old.as_ref().is_some_and(|e| e.left() == left) {
                (old, false)
            } else {
                (Some(pushed(old, left, &attribute(&c.path, &running))), true)
            };
            let then = then_at(&c.path);
            let updated = match then {
                Some((left, writer)) => Some(pushed(updated, left, writer)),
                None if changed => updated,
                None => None,
            };
            Ok((updated.map(|p| p.bytes()).transpose()?, then.is_some()))
        })
        .map_err(|detail| StoreError::Encode {
            path: rows.path().into(),
            detail,
        })?;
        for (c, (bytes, then)) in work.iter().zip(new) {
            if let Some(bytes) = bytes {
                rows.put(&c.path, &bytes)?;
            }
            if then {
                both.push(c.path.as_bytes());
            }
        }
    }
    drop(rows);
    match then {
        None => tx.set_ledger_at(root),
        Some((then, writer, root)) => claim_all(tx, then, writer, root, &both),
    }
}

/// Paths whose entries an update reads, works out and writes at a time (memory stays
/// bounded whatever the change).
const CHUNK: usize = 8192;

/// `f` over `items`, on every core when they are many (a whole restore's paths), in order.
fn map_all<T: Send, U: Send, E: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> Result<U, E> + Sync + Send,
) -> Result<Vec<U>, E> {
    use rayon::prelude::*;
    if items.len() < 1024 {
        items.into_iter().map(f).collect()
    } else {
        items.into_par_iter().with_min_len(256).map(f).collect()
    }
}

/// The version at `path` in snapshot `root` (None: no entry there, or a directory).
fn version_at(
    reader: &crate::store::StoreReader,
    root: &ObjectId,
    path: &[u8],
) -> Result<Option<(EntryKind, ObjectId)>, StoreError> {
    let mut tree = reader.read_tree(root)?;
    let mut parts = path.split(|&b| b == b'/').peekable();
    while let Some(name) = parts.next() {
        let Some(e) = tree.entry(name) else {
            return Ok(None);
        };
        if parts.peek().is_none() {
            return Ok((e.kind != EntryKind::Dir).then_some((e.kind, e.id)));
        }
        if e.kind != EntryKind::Dir {
            return Ok(None);
        }
        tree = reader.read_tree(&e.id)?;
    }
    Ok(None)
}

/// Where the ledger stood as a capture began to look at the disk ([`looking`]). Captures
/// run side by side (under the shared lock), so one that began looking first may commit
/// after another that recorded a newer state of some paths: its view of those paths is
/// older than the ledger's, not a write (a file another session's whole turn created
/// meanwhile would read as deleted, then as created again by whoever runs at the next
/// update).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Looked(Option<ObjectId>);

/// [`Looked`] now: call it before the capture begins to look. A store that cannot be read
/// now counts as a ledger not begun yet: the capture then takes in no path's change (and
/// its own commit is likely to fail as well).
#[must_use]
pub fn looking(store: &crate::store::Store) -> Looked {
    Looked(
        store
            .begin_read()
            .and_then(|tx| tx.ledger_at())
            .ok()
            .flatten(),
    )
}

/// [`bring_up_to_date`] in a capture's commit, from what the capture saw (`seen`, its root
/// `root`), over `window`; `looked` says where the ledger stood as the capture began to
/// look: the paths an update committed since then changed are left as the ledger has them
/// (the capture may have looked at them before that update's capture did; a later update
/// takes in whatever changed there since). A ledger snapshot that can no longer be read
/// (collected, damaged) restarts the ledger here rather than fail a capture.
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn in_capture(
    tx: &WriteTx<'_>,
    reader: &crate::store::StoreReader,
    (seen, root): (&crate::capture::Captured<'_>, ObjectId),
    window: Window,
    looked: Looked,
) -> Result<(), StoreError> {
    match from(tx)? {
        // No change between the snapshots: claims and what edit steps read are still due.
        Some(at) if at == root => bring_up_to_date(tx, (reader, at), &[], root, window),
        Some(at) => match seen.changes_from(reader, &at, &root) {
            Ok(mut changes) => {
                if looked.0 != Some(at) {
                    let newer = looked.0.map(|l| crate::diff::changes(reader, &l, &at));
                    match newer {
                        Some(Ok(newer)) => {
                            let newer: HashSet<&[u8]> =
                                newer.iter().map(|c| c.path.as_bytes()).collect();
                            changes.retain(|c| !newer.contains(c.path.as_bytes()));
                        }
                        // The ledger began, or its snapshot went, since: no path is sure.
                        _ => changes.clear(),
                    }
                }
                bring_up_to_date(tx, (reader, at), &changes, root, window)
            }
            Err(_) => tx.set_ledger_at(root),
        },
        None => tx.set_ledger_at(root),
    }
}

/// [`bring_up_to_date`] with stored snapshot `root` (the disk an operation found), in its
/// own commit; none when the ledger is up to date with `root` already and no claim or read
/// of an edit step waits (the update would write nothing, and its commit would only sync).
///
/// # Errors
/// [`StoreError`] from the store.
pub fn up_to(store: &crate::store::Store, root: ObjectId) -> Result<(), StoreError> {
    if up_to_date(&store.begin_read()?, root)? {
        return Ok(());
    }
    let reader = store.reader()?;
    store.write_with(Vec::new(), None, None, crate::store::WriteStats::default(), |tx| match from(tx)? {
        Some(at) if at == root => bring_up_to_date(tx, (&reader, at), &[], root, Window::default()),
        Some(at) => match crate::diff::changes(&reader, &at, &root) {
            Ok(changes) => bring_up_to_date(tx, (&reader, at), &changes, root, Window::default()),
            Err(_) => tx.set_ledger_at(root),
        },
        None => tx.set_ledger_at(root),
    })?;
    Ok(())
}

/// Whether the ledger stands at `root` with nothing waiting for its next update: no claim,
/// no path an edit step read (a waiting value, even one that reads as empty, counts).
fn up_to_date(tx: &crate::store::ReadTx, root: ObjectId) -> Result<bool, StoreError> {
    Ok(tx.ledger_at()? == Some(root)
        && tx.ledger_claims()?.is_none()
        && tx.ledger_observed()?.is_none())
}

/// The snapshot the ledger was last brought up to date with; None for a ledger that never
/// was (it then starts at the next snapshot: what was there before has no known writer).
///
/// # Errors
/// [`StoreError::Db`].
pub fn from(tx: &WriteTx<'_>) -> Result<Option<ObjectId>, StoreError> {
    tx.ledger_at()
}

/// Records `writer` as the last writer of each path of `changes` (their `new` side is what
/// it left), and the ledger as up to date with `root`: an operation's own writes, in the
/// commit that records it. Paths that changed otherwise between the ledger's snapshot and
/// `root` are brought up to date first.
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn claim_changes(
    tx: &WriteTx<'_>,
    reader: &crate::store::StoreReader,
    writer: &Writer,
    root: ObjectId,
) -> Result<(), StoreError> {
    let Some(at) = from(tx)? else {
        return tx.set_ledger_at(root);
    };
    let Ok(changes) = crate::diff::changes(reader, &at, &root) else {
        return tx.set_ledger_at(root);
    };
    claim_all(tx, &changes, writer, root, &[])
}

/// Records `writer` as the last writer of each path of `changes` but those in `done`
/// (sorted), and the ledger as up to date with `root`.
fn claim_all(
    tx: &WriteTx<'_>,
    changes: &[Change],
    writer: &Writer,
    root: ObjectId,
    done: &[&[u8]],
) -> Result<(), StoreError> {
    let mut rows = tx.open_bytes(LEDGER)?;
    // Both sorted: one walk skips the paths done.
    let mut done = done.iter().peekable();
    let work: Vec<&Change> = changes
        .iter()
        .filter(|c| {
            while done.next_if(|d| **d < c.path.as_bytes()).is_some() {}
            !c.dirs_only() && done.next_if(|d| **d == c.path.as_bytes()).is_none()
        })
        .collect();
    let scan = rows.dense(work.len())?;
    for work in work.chunks(CHUNK) {
        let paths: Vec<&[u8]> = work.iter().map(|c| c.path.as_bytes()).collect();
        let olds = rows.get_sorted(&paths, scan)?;
        let new = map_all(work.iter().zip(olds).collect(), |(c, old)| {
            let old = old.and_then(|b| Packed::read(&b).ok());
            pushed(old, left_of(c.new.as_ref()), writer).bytes()
        })
        .map_err(|detail| StoreError::Encode {
            path: rows.path().into(),
            detail,
        })?;
        for (c, bytes) in work.iter().zip(new) {
            rows.put(&c.path, &bytes)?;
        }
    }
    drop(rows);
    tx.set_ledger_at(root)
}

/// Records `writer` as the last writer of `paths` (an edit tool's files at its step's end)
/// without looking at them: the ledger's next update gives each the version it then finds
/// (the one it holds when the path did not change). The empty path claims the whole window
/// (a shell step that ran without captures): the next update counts `writer` among those
/// who could write any path.
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn claim(tx: &WriteTx<'_>, paths: &[Vec<u8>], writer: &Writer) -> Result<(), StoreError> {
    let mut claims = claims(tx);
    claims.extend(paths.iter().map(|p| (p.clone(), writer.clone())));
    let bytes = encode(&(HISTORY_VERSION, claims)).map_err(|detail| StoreError::Encode {
        path: tx.path().into(),
        detail,
    })?;
    tx.set_ledger_claims(Some(&bytes))
}

/// Records what an edit step read in one of its files (`version`; `last`: the version the
/// last snapshot holds there): when that is not the version the path's entry names (or,
/// without an entry, the last snapshot's), it was written by `writer` (a step's end), or
/// at a step's begin (`Err` naming the stepping turn) by whoever could write it until now,
/// as an update attributes a change, the stepping turn as a whole excepted (the user's
/// edit saved a moment before the tool ran).
///
/// # Errors
/// [`StoreError`] from the tables.
pub fn observe(
    tx: &WriteTx<'_>,
    path: &[u8],
    version: Option<(EntryKind, ObjectId)>,
    last: Option<(EntryKind, ObjectId)>,
    writer: Result<&Writer, (SessionKey, u64)>,
) -> Result<(), StoreError> {
    let old = entry(&tx.open_bytes(LEDGER)?, path)?;
    let known = old.as_ref().map_or(last, |e| e.left);
    if known == version {
        return Ok(());
    }
    let mut paths = observed(tx);
    if !paths.iter().any(|p| p.as_slice() == path) {
        paths.push(path.to_vec());
        let bytes = encode(&(HISTORY_VERSION, paths)).map_err(|detail| StoreError::Encode {
            path: tx.path().into(),
            detail,
        })?;
        tx.set_ledger_observed(Some(&bytes))?;
    }
    let writer = match writer {
        Ok(w) => w.clone(),
        // The stepping turn reports its tool calls: not a writer as a whole.
        Err((key, turn)) => {
            let mut running = running(tx)?;
            running.retain(|r| !is_whole_turn(&r.writer, key, turn));
            attribute(path, &running)
        }
    };
    put(&mut tx.open_bytes(LEDGER)?, path, old, version, writer)
}

/// Whether `w` is turn `turn` of session `key` as a whole (no step).
fn is_whole_turn(w: &Writer, key: SessionKey, turn: u64) -> bool {
    matches!(w, Writer::Turn { session, turn: t, step: None } if *session == key.0 && *t == turn)
}

/// The paths edit steps read since the last update (an unreadable list counts as none).
fn observed(tx: &WriteTx<'_>) -> Vec<Vec<u8>> {
    tx.ledger_observed()
        .ok()
        .flatten()
        .and_then(|b| decode::<(u8, Vec<Vec<u8>>)>(&b).ok())
        .map(|(_, p)| p)
        .unwrap_or_default()
}

/// The claims waiting for the next update (unreadable ones count as none).
fn claims(tx: &WriteTx<'_>) -> Vec<(Vec<u8>, Writer)> {
    tx.ledger_claims()
        .ok()
        .flatten()
        .and_then(|b| decode::<(u8, Vec<(Vec<u8>, Writer)>)>(&b).ok())
        .map(|(_, c)| c)
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
