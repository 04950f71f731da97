//! The `--json` answers (`docs/json.md`): every command prints one JSON object with the
//! format's `version`, a `result` naming what kind of answer it is, and `ok`. A result kind
//! has one shape whichever command answers it: a restore by `undo` and by `restore` are both
//! `restored`, a refusal over unsaved work is `dirty` from every command, a dry run is a
//! `preview`.

use crate::history::RevertPreview;
use crate::{DirtyRefusal, DryRun, Outcome, Report, RestoreOutcome};
use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The version of the answers' format: raised when a field changes meaning or goes away (a
/// new field or result kind keeps it).
pub const VERSION: u64 = 1;

/// Prints `v` (an object with `result` and `ok`) on one line, with [`VERSION`].
pub fn print(mut v: Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), VERSION.into());
    }
    println!("{v}");
}

/// The object `body` serialises to (an empty one for a value that is not an object).
fn object(body: impl Serialize) -> Result<Map<String, Value>> {
    Ok(match serde_json::to_value(body)? {
        Value::Object(o) => o,
        _ => Map::new(),
    })
}

/// Prints a success of kind `result`: the fields of `body`, `result` and `ok: true`.
pub fn answer(result: &str, body: impl Serialize) -> Result<()> {
    let mut o = object(body)?;
    o.insert("result".into(), result.into());
    o.insert("ok".into(), true.into());
    print(Value::Object(o));
    Ok(())
}

/// An undo's, redo's, revert's, navigation's or checkpoint's answer (its `result` is the
/// outcome's kind), with `message` (`target` names a navigation's destination in it).
pub fn outcome(o: &Outcome, target: Option<&str>) -> Result<Value> {
    let mut r = Report::from(o);
    if target.is_some() {
        r.message = o.message_at(target);
    }
    Ok(serde_json::to_value(r)?)
}

/// A restore's answer: `restored`, in the fields an undo's restore has (`files_written`,
/// `files_deleted`, `skipped`, `snapshot`, `safety_snapshot`), with what only a restore
/// says (`requested_paths`, `removed_dirs`, `verified`, `verify_diff`). Not `ok` when paths
/// were left alone: the files are not all the snapshot's (exit 1).
pub fn restored(r: &RestoreOutcome) -> Value {
    let message = format!(
        "restored files ({} written, {} deleted{})",
        r.written.len(),
        r.deleted.len(),
        if r.left_alone.is_empty() {
            String::new()
        } else {
            format!(", {} left alone", r.left_alone.len())
        }
    );
    json!({
        "result": "restored", "ok": r.left_alone.is_empty(), "message": message,
        "files_written": r.written, "files_deleted": r.deleted, "skipped": r.left_alone,
        "snapshot": r.target, "safety_snapshot": r.safety_snapshot,
        "requested_paths": r.paths, "removed_dirs": r.removed_dirs,
        "verified": r.verified, "verify_diff": r.verify_diff,
    })
}

/// A refusal as its own answer would be (`dirty` or `held`, with `paths` and `count`).
fn refusal(r: &DirtyRefusal) -> Value {
    json!({"result": r.result, "ok": false, "message": r.message, "paths": r.paths,
        "count": r.count})
}

/// A restore's dry run: a `preview`, as an undo's; `ok` as the restore's would be.
pub fn restore_preview(d: &DryRun) -> Value {
    let r = &d.outcome;
    json!({
        "result": "preview", "ok": d.refused.is_none() && r.left_alone.is_empty(),
        "would_write": r.written, "would_delete": r.deleted, "merged": [], "conflicts": [],
        "skipped": r.left_alone, "refused": d.refused.as_ref().map(refusal),
        "snapshot": r.target, "requested_paths": r.paths, "would_remove_dirs": r.removed_dirs,
    })
}

/// An undo's, redo's, revert's or navigation's dry run: a `preview`; `refused` is the
/// answer the operation would give instead (with its `message`), or null.
pub fn preview(p: &RevertPreview) -> Result<Value> {
    let mut o = object(p)?;
    let refused = p
        .refused
        .as_ref()
        .map(|r| outcome(r, None))
        .transpose()?
        .unwrap_or(Value::Null);
    o.insert("ok".into(), p.refused.is_none().into());
    o.insert("refused".into(), refused);
    o.insert("result".into(), "preview".into());
    Ok(Value::Object(o))
}

/// The fields of `body` with `kind` set: a log entry or a shown entry of kind `kind`.
pub fn with_kind(kind: &str, body: impl Serialize) -> Result<Value> {
    let mut o = object(body)?;
    o.insert("kind".into(), kind.into());
    Ok(Value::Object(o))
}
