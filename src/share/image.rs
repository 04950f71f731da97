//! A session's records as they travel: its turns (with what each reverted and its steps)
//! and checkpoints, read from one store ([`read`]) and written into another ([`install`]).
//! The objects its snapshots name travel beside it; `install` checks that they arrived.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ShareError, StoreError};
use crate::history::db::{self, SessionKey, Writer};
use crate::history::record::{
    CheckpointRecord, HISTORY_VERSION, Mode, Op, RevertRecord, SessionRecord, StepRecord,
    TurnRecord, TurnState, decode, encode,
};
use crate::history::tables::{CHECKPOINTS, SESSIONS, TURNS};
use crate::object::{ObjectId, ObjectKind};
use crate::working_copy::WorkingCopy;

/// One session's history, without the objects its snapshots hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionImage {
    /// The host's id of the session (its key is the hash of this), or the key's hex for a
    /// session recorded before names were kept.
    pub name: String,
    /// The agent that opened it, when it said.
    pub agent: Option<String>,
    /// Unix milliseconds when it was first seen.
    pub created_ms: u64,
    /// The applied turn (one of `turns`, or none).
    pub cursor: Option<u64>,
    /// Undone turns (of `turns`), most recent last, with the mode of their undo.
    pub redo: Vec<(u64, Mode)>,
    /// Its ended turns, by number.
    pub turns: Vec<TurnImage>,
    /// Its checkpoints, by number.
    pub checkpoints: Vec<CheckpointRecord>,
}

/// One turn as it travels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnImage {
    /// Its record.
    pub record: TurnRecord,
    /// What it reverted, when it is a revert (`retrace revert`).
    pub reverts: Option<RevertRecord>,
    /// Its tool calls.
    pub steps: Vec<StepRecord>,
}

impl SessionImage {
    /// Every snapshot the image names (turns' before and after, checkpoints, steps), each
    /// once, sorted.
    #[must_use]
    pub fn snapshots(&self) -> Vec<ObjectId> {
        let mut out = BTreeSet::new();
        for t in &self.turns {
            out.extend(t.record.before);
            out.extend(t.record.after);
            for s in &t.steps {
                out.extend(s.before);
                out.extend(s.after);
            }
        }
        out.extend(self.checkpoints.iter().map(|c| c.snapshot));
        out.into_iter().collect()
    }

    /// The key the session has in a store.
    #[must_use]
    pub fn key(&self) -> SessionKey {
        db::session_key(&self.name)
    }
}

/// What [`crate::Workspace::import_git`] and [`crate::Workspace::unbundle`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// The session's name in this workspace.
    pub session: String,
    /// Turns added.
    pub turns: u64,
    /// Checkpoints added.
    pub checkpoints: u64,
    /// Turns the session already held, identical.
    pub already: u64,
}

/// The session `key` of `wc`'s store: its ended turns (those numbered in `only`, when
/// given) and its checkpoints (those taken between the first and the last of these turns,
/// when `only` is given). `name` names a session recorded before names were kept.
///
/// # Errors
/// [`Error::Store`] when the store cannot be read; [`ShareError::Nothing`] when the session
/// has nothing to share.
pub fn read(
    wc: &WorkingCopy,
    key: &SessionKey,
    only: Option<&RangeInclusive<u64>>,
) -> Result<SessionImage, Error> {
    let tx = wc.store().begin_read()?;
    let loaded = db::load(&tx, key)?;
    let kept = db::name(&tx, key)?;
    let created_ms = db::sessions(&tx)?
        .into_iter()
        .find(|(k, _)| k == key)
        .map_or(0, |(_, r)| r.created_ms);
    let name = kept
        .as_ref()
        .map_or_else(|| ObjectId(key.0).to_hex(), |n| n.name.clone());
    let mut turns = Vec::new();
    for t in &loaded.turns {
        if t.state == TurnState::Pending || only.is_some_and(|r| !r.contains(&t.number)) {
            continue;
        }
        turns.push(TurnImage {
            record: t.clone(),
            reverts: loaded.reverts(t.number).cloned(),
            steps: db::steps(&tx, key, t.number)?,
        });
    }
    // With `only`, the checkpoints taken from the first of its turns to the last.
    let span = only.map(|_| match (turns.first(), turns.last()) {
        (Some(a), Some(b)) => Some(a.record.began_ms..=b.record.ended_ms.unwrap_or(u64::MAX)),
        _ => None,
    });
    // A checkpoint taken during a turn still running would come before that turn once it
    // ends: it waits for the turn, as the turn does.
    let running = loaded
        .state
        .pending
        .and_then(|n| loaded.turn(n))
        .map_or(u64::MAX, |t| t.began_ms);
    let checkpoints: Vec<CheckpointRecord> = loaded
        .checkpoints
        .iter()
        .filter(|c| c.time_ms < running)
        .filter(|c| match &span {
            None => true,
            Some(span) => span.as_ref().is_some_and(|s| s.contains(&c.time_ms)),
        })
        .cloned()
        .collect();
    if turns.is_empty() && checkpoints.is_empty() {
        return Err(ShareError::Nothing { session: name }.into());
    }
    let has = |n: u64| turns.iter().any(|t| t.record.number == n);
    let cursor = match loaded.state.cursor {
        Some(c) if has(c) => Some(c),
        // A range that leaves the cursor out: its newest turn is applied.
        _ if only.is_some() => turns.last().map(|t| t.record.number),
        other => other,
    };
    let redo = loaded
        .state
        .redo
        .iter()
        .copied()
        .filter(|(n, _)| has(*n))
        .collect();
    Ok(SessionImage {
        name,
        agent: kept.and_then(|n| n.agent),
        created_ms,
        cursor,
        redo,
        turns,
        checkpoints,
    })
}

/// Whether two records of one turn number are the same turn (what a person sees of it:
/// snapshots, prompt, time), whatever the conversation ids or counts beside them. A turn
/// whose snapshots retention removed on one side is the same turn by its prompt and time.
fn same_turn(a: &TurnRecord, b: &TurnRecord) -> bool {
    let expired = a.state == TurnState::Expired || b.state == TurnState::Expired;
    (expired || a.before == b.before && a.after == b.after)
        && a.prompt == b.prompt
        && a.began_ms == b.began_ms
}

/// Highest turn or checkpoint number an image may hold: a step's row puts its turn's number
/// above 20 bits, and the next number must not wrap.
const MAX_NUMBER: u64 = 1 << 43;

/// Whether `s` is a name or agent a person can be shown: not empty, no control characters.
fn plain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 4096 && !s.chars().any(char::is_control)
}

/// Whether `numbers` ascend strictly, from 1 to [`MAX_NUMBER`].
fn ascending(numbers: impl Iterator<Item = u64>) -> bool {
    let mut last = 0;
    for n in numbers {
        if n <= last || n > MAX_NUMBER {
            return false;
        }
        last = n;
    }
    true
}

/// Why `image` cannot be recorded as it stands, if it cannot: every number in range and
/// once, every record naming the turn it is filed under, no turn still running.
fn check(image: &SessionImage) -> Result<(), String> {
    if !plain(&image.name) {
        return Err("its session name is empty or holds control characters".into());
    }
    if image.agent.as_deref().is_some_and(|a| !plain(a)) {
        return Err("its agent name holds control characters".into());
    }
    if !ascending(image.turns.iter().map(|t| t.record.number)) {
        return Err(format!(
            "its turn numbers are not ascending from 1 to {MAX_NUMBER}, each once"
        ));
    }
    if !ascending(image.checkpoints.iter().map(|c| c.number)) {
        return Err("its checkpoint numbers are not ascending, each once".into());
    }
    for t in &image.turns {
        let (n, r) = (t.record.number, &t.record);
        let complete = r.state != TurnState::Complete || r.before.is_some() && r.after.is_some();
        if r.state == TurnState::Pending || !complete {
            return Err(format!("its turn {n} has not ended with both snapshots"));
        }
        if t.reverts.as_ref().is_some_and(|v| v.number != n)
            || t.steps.iter().any(|s| s.turn != n)
            || !ascending(t.steps.iter().map(|s| s.number))
            || t.steps.last().is_some_and(|s| s.number > crate::history::db::STEP_MASK)
        {
            return Err(format!("its turn {n} holds records of another turn"));
        }
    }
    Ok(())
}

/// What this workspace holds of the session an import names.
#[derive(Default)]
struct Here {
    turns: Vec<TurnRecord>,
    checkpoints: Vec<CheckpointRecord>,
    pending: Option<u64>,
}

/// What of `image` to add to the session as `here` holds it (the turns and checkpoints to
/// add, and how many of its turns it holds already), or why it cannot be added: a turn or
/// checkpoint of the same number that differs, a turn running here, or a turn or
/// checkpoint here that the image lacks (another conversation of the same name).
fn decide<'i>(
    image: &'i SessionImage,
    here: &Here,
) -> Result<(Vec<&'i TurnImage>, Vec<&'i CheckpointRecord>, u64), String> {
    let mut add = Vec::new();
    let mut already = 0;
    for t in &image.turns {
        match here.turns.iter().find(|h| h.number == t.record.number) {
            Some(have) if same_turn(have, &t.record) => already += 1,
            Some(_) => {
                return Err(format!(
                    "its turn {} is another turn than the one imported",
                    t.record.number
                ));
            }
            None => add.push(t),
        }
    }
    let mut checkpoints = Vec::new();
    for c in &image.checkpoints {
        match here.checkpoints.iter().find(|h| h.number == c.number) {
            Some(have) if have.snapshot == c.snapshot => {}
            Some(_) => {
                return Err(format!(
                    "its checkpoint {} holds another snapshot",
                    c.number
                ));
            }
            None => checkpoints.push(c),
        }
    }
    if add.is_empty() && checkpoints.is_empty() {
        return Ok((add, checkpoints, already));
    }
    if let Some(n) = here.pending {
        return Err(format!(
            "turn {n} is in progress here; import once it has ended"
        ));
    }
    // Added only to the same history: the session here holds no turn or checkpoint the
    // import lacks (else it is another conversation that happens to share the name).
    if let Some(t) = here
        .turns
        .iter()
        .find(|h| !image.turns.iter().any(|t| t.record.number == h.number))
    {
        return Err(format!("its turn {} is not in the import", t.number));
    }
    if let Some(c) = here
        .checkpoints
        .iter()
        .find(|h| !image.checkpoints.iter().any(|c| c.number == h.number))
    {
        return Err(format!("its checkpoint {} is not in the import", c.number));
    }
    Ok((add, checkpoints, already))
}

/// Whether [`install`] would refuse `image` (renamed `as_name`) as things stand: checked
/// before an import stores anything, so that a refusal writes nothing.
///
/// # Errors
/// As [`install`] refuses.
pub fn precheck(wc: &WorkingCopy, image: &SessionImage, as_name: Option<&str>) -> Result<(), Error> {
    let name = as_name.unwrap_or(&image.name);
    let mut renamed;
    let image = if as_name.is_some() {
        renamed = image.clone();
        renamed.name = name.to_string();
        &renamed
    } else {
        image
    };
    check(image).map_err(|detail| ShareError::Refused {
        what: format!("session {name}"),
        detail,
    })?;
    let tx = wc.store().begin_read()?;
    let loaded = db::load(&tx, &image.key())?;
    let here = Here {
        turns: loaded.turns,
        checkpoints: loaded.checkpoints,
        pending: loaded.state.pending,
    };
    decide(image, &here).map_err(|detail| ShareError::Conflict {
        session: name.to_string(),
        detail,
    })?;
    Ok(())
}

/// Writes `image` into `wc`'s store as the session `image.name` (which `as_name`, when
/// given, replaces): a new session, or the turns and checkpoints an existing session of
/// that name lacks when the ones it holds are the image's. Importing the same image twice
/// adds nothing. Every snapshot the image names must be stored already (the objects travel
/// first).
///
/// # Errors
/// [`ShareError::Missing`] for a snapshot not stored; [`ShareError::Conflict`] when the
/// session exists here with other turns of the same numbers, or a turn in progress;
/// [`Error::Store`].
pub fn install(
    wc: &WorkingCopy,
    mut image: SessionImage,
    as_name: Option<&str>,
) -> Result<Imported, Error> {
    if let Some(n) = as_name {
        image.name = n.to_string();
    }
    check(&image).map_err(|detail| ShareError::Refused {
        what: format!("session {}", image.name),
        detail,
    })?;
    let reader = wc.store().reader()?;
    for id in image.snapshots() {
        let tree = match reader.record(&id) {
            Ok(r) => r.kind == ObjectKind::Tree,
            Err(StoreError::Missing { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        if !tree {
            return Err(ShareError::Missing {
                what: format!("snapshot {} (a tree)", id.to_hex()),
            }
            .into());
        }
    }
    drop(reader);
    let key = image.key();
    let path = wc.store().path().to_path_buf();
    let conflict = |detail: String| ShareError::Conflict {
        session: image.name.clone(),
        detail,
    };
    let enc = |detail: String| StoreError::Encode {
        path: path.clone(),
        detail,
    };
    let bad = |e: crate::object::record::DecodeError| StoreError::History {
        path: path.clone(),
        detail: e.to_string(),
    };
    let out = wc.store().transact(|tx| {
        let fresh = tx.keyed(SESSIONS, &key.0)?.is_none();
        // Read without touching the session: an import that adds nothing changes nothing.
        let state = Writer::open(tx, key).state()?;
        let mut here = Here {
            pending: state.pending,
            ..Here::default()
        };
        tx.each_row(TURNS, &key.0, |_, v| {
            here.turns.push(decode(v).map_err(&bad)?);
            Ok(())
        })?;
        tx.each_row(CHECKPOINTS, &key.0, |_, v| {
            here.checkpoints.push(decode(v).map_err(&bad)?);
            Ok(())
        })?;
        let (add, checkpoints, already) = match decide(&image, &here) {
            Ok(d) => d,
            Err(why) => return Ok(Err(conflict(why))),
        };
        let mut out = Imported {
            session: image.name.clone(),
            already,
            ..Imported::default()
        };
        if add.is_empty() && checkpoints.is_empty() {
            return Ok(Ok(out));
        }
        let w = Writer::new(tx, key)?;
        w.name(&image.name, image.agent.as_deref())?;
        if fresh {
            let rec = SessionRecord {
                version: HISTORY_VERSION,
                created_ms: image.created_ms,
                touched_ms: crate::store::now_ms(),
            };
            tx.put_keyed(SESSIONS, &key.0, &encode(&rec).map_err(&enc)?)?;
        }
        let known = |n: u64| image.turns.iter().any(|t| t.record.number == n);
        for t in &add {
            let mut record = t.record.clone();
            // A turn range leaves out the turns before it: their numbers name nothing here.
            record.parent = record.parent.filter(|p| known(*p));
            w.turn(&record)?;
            if let Some(r) = &t.reverts {
                w.revert(r)?;
            }
            for s in &t.steps {
                w.step(s)?;
            }
        }
        for c in &checkpoints {
            w.checkpoint(c)?;
        }
        let last_turn = image.turns.iter().map(|t| t.record.number).max();
        let last_checkpoint = image.checkpoints.iter().map(|c| c.number).max();
        let cursor = image.cursor.filter(|c| known(*c));
        let redo = image.redo.iter().copied().filter(|(n, _)| known(*n)).collect();
        w.op(Op::Base {
            cursor: if add.is_empty() { state.cursor } else { cursor },
            redo: match (add.is_empty(), fresh) {
                (true, _) => state.redo,
                (false, true) => redo,
                (false, false) => Vec::new(),
            },
            last_known: state.last_known,
            pending: None,
            next_turn: state.next_turn.max(last_turn.map_or(1, |n| n + 1)),
            next_checkpoint: state
                .next_checkpoint
                .max(last_checkpoint.map_or(1, |n| n + 1)),
        })?;
        out.turns = add.len() as u64;
        out.checkpoints = checkpoints.len() as u64;
        Ok(Ok(out))
    })?;
    Ok(out?)
}
