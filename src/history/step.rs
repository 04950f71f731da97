//! Steps: every tool call of an agent's turn. The adapters report each call's start and end
//! ([`Session::begin_step`], [`Session::end_step`]); an edit tool names its files, a shell
//! tool is bracketed by captures (the `step_captures` setting says when), so that the ledger
//! ([`super::ledger`]) can tell the agent's writes from the user's and other sessions', and
//! whatever a shell command destroys was in a snapshot just before it ran.

use serde::Serialize;

use super::db::{self, Writer};
use super::ledger;
use super::record::{HISTORY_VERSION, StepRecord, TurnState, truncate};
use super::Session;
use crate::config::StepCaptures;
use crate::error::{Error, StoreError};
use crate::object::{ObjectId, RelPath};
use crate::progress::NoProgress;
use crate::store::now_ms;

/// Bytes of a step's summary kept.
pub const MAX_SUMMARY_BYTES: usize = 200;

/// A step as reported back to the adapter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepInfo {
    /// The turn.
    pub turn: u64,
    /// The step's number within it (`turn:N.K`).
    pub step: u64,
    /// The snapshot taken (before it, for a begin; after it, for an end), if one was.
    pub snapshot: Option<ObjectId>,
}

/// One step of a turn as `retrace log --steps` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepLog {
    /// Its number within the turn (`turn:N.K`).
    pub number: u64,
    /// The tool.
    pub tool: String,
    /// One line of its input (the command, the file).
    pub summary: String,
    /// The files an edit tool named (empty for a shell tool).
    pub files: Vec<String>,
    /// Unix milliseconds.
    pub began_ms: u64,
    /// Unix milliseconds; None while it runs (or when its end never came).
    pub ended_ms: Option<u64>,
    /// The workspace when it began (`turn:N.K:before`), when it was captured.
    pub before: Option<ObjectId>,
    /// The workspace when it ended (`turn:N.K`), when it was captured.
    pub after: Option<ObjectId>,
    /// Paths it added, modified and deleted, from its two snapshots; None when it took none
    /// (an edit step: see `files`).
    pub counts: Option<super::record::Counts>,
}

/// Whether a shell command can destroy work in the checkout (the `auto` and `destructive`
/// policies capture around these): version-control commands that rewrite files, removal,
/// moves, in-place edits and redirections that truncate.
#[must_use]
pub fn can_destroy(command: &str) -> bool {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect();
    let git = words.windows(2).any(|w| {
        w[0] == "git"
            && matches!(
                w[1],
                "checkout"
                    | "restore"
                    | "reset"
                    | "stash"
                    | "clean"
                    | "switch"
                    | "rm"
                    | "mv"
                    | "apply"
                    | "am"
                    | "merge"
                    | "rebase"
                    | "pull"
                    | "cherry-pick"
                    | "revert"
            )
    });
    let tool = words.iter().any(|w| {
        matches!(
            *w,
            "rm" | "rmdir" | "mv" | "truncate" | "shred" | "unlink" | "dd" | "rsync" | "cp"
        )
    });
    let in_place = words.windows(2).any(|w| {
        matches!(w[0], "sed" | "perl" | "gsed")
            && words
                .iter()
                .any(|a| a.starts_with("-i") || *a == "--in-place")
    });
    let truncating = command.contains('>') && !command.contains(">>")
        || command.contains(">|")
        || words.iter().any(|w| w.ends_with('>') && !w.ends_with(">>"));
    git || tool || in_place || truncating
}

impl Session {
    /// Whether a shell step with this command is bracketed by captures, by the
    /// `step_captures` setting (`auto`: always while a watcher serves the workspace, which
    /// makes a capture milliseconds; otherwise only around commands that can destroy).
    fn captures_step(&self, summary: &str) -> bool {
        match self.ws.settings().step_captures.value {
            StepCaptures::Always => true,
            StepCaptures::Off => false,
            StepCaptures::Destructive => can_destroy(summary),
            StepCaptures::Auto => {
                can_destroy(summary)
                    || crate::watch::socket_path(&self.ws.runtime_dir(), self.ws.root()).exists()
            }
        }
    }

    /// Begins a step of the running turn: tool call `call` (the host's id, to match its end;
    /// may be empty) of `tool`, with `summary` (the command, the file; cut to 200 bytes).
    /// `files`: the files an edit tool writes (workspace-relative); empty for a shell tool,
    /// which is captured before it runs when the `step_captures` setting says so. Returns
    /// None when no turn of this session runs (the call belongs to no turn) or for a
    /// subagent's session (its tool calls are its parent's).
    ///
    /// # Errors
    /// [`Error`] when the store or the capture fails.
    pub fn begin_step(
        &self,
        call: &str,
        tool: &str,
        summary: &str,
        files: &[String],
    ) -> Result<Option<StepInfo>, Error> {
        if self.subagent {
            return Ok(None);
        }
        let named = !files.is_empty();
        let files = self.workspace_files(files);
        if named && files.is_empty() {
            // An edit tool whose files all lie outside the workspace writes nothing here.
            return Ok(None);
        }
        let Some(turn) = self.running_turn()? else {
            return Ok(None);
        };
        // An edit tool's summary is its files when the host gave none.
        let shown: String;
        let summary = if summary.trim().is_empty() && !files.is_empty() {
            shown = files
                .iter()
                .map(RelPath::show)
                .collect::<Vec<_>>()
                .join(", ");
            shown.as_str()
        } else {
            summary
        };
        let rec = |number: u64, before: Option<ObjectId>| StepRecord {
            version: HISTORY_VERSION,
            turn,
            number,
            call: truncate(call.to_string(), MAX_SUMMARY_BYTES),
            tool: truncate(tool.to_string(), MAX_SUMMARY_BYTES),
            summary: truncate(one_line(summary), MAX_SUMMARY_BYTES),
            files: files.iter().map(|f| f.as_bytes().to_vec()).collect(),
            began_ms: now_ms(),
            ended_ms: None,
            before,
            after: None,
        };
        let number = std::cell::Cell::new(None);
        // An edit tool's files as they are before it runs (an edit saved a moment ago).
        let named_bytes: Vec<Vec<u8>> = files.iter().map(|f| f.as_bytes().to_vec()).collect();
        let seen = if named {
            super::observed::look(self.ws.store(), self.ws.root(), &named_bytes)?
        } else {
            Vec::new()
        };
        // The step's record is written in the same commit as the capture before it, after
        // the ledger took in what changed until then (not the step's).
        let write = |tx: &crate::store::WriteTx<'_>, before| -> Result<(), StoreError> {
            let w = Writer::new(tx, self.key)?;
            if w.state()?.pending != Some(turn) {
                return Ok(());
            }
            for s in &seen {
                ledger::observe(
                    tx,
                    s.path.as_bytes(),
                    s.version,
                    s.last,
                    Err((self.key, turn)),
                )?;
            }
            let n = w.steps_of(turn)?.len() as u64 + 1;
            w.step(&rec(n, before))?;
            number.set(Some(n));
            Ok(())
        };
        if named || !self.captures_step(summary) {
            self.ws.store().transact(|tx| write(tx, None))?;
            return Ok(number.get().map(|step| StepInfo {
                turn,
                step,
                snapshot: None,
            }));
        }
        let id = self.step_capture(
            turn,
            format!("before turn {turn}, {}", one_line(tool)),
            &|tx, root| write(tx, Some(root)),
        )?;
        Ok(number.get().map(|step| StepInfo {
            turn,
            step,
            snapshot: Some(id),
        }))
    }

    /// Ends the running step `call` (empty: the newest step still running) of the running
    /// turn: a shell step is captured after it (when its start was), an edit step claims
    /// its files in the ledger. Returns None when no such step runs.
    ///
    /// # Errors
    /// [`Error`] when the store or the capture fails.
    pub fn end_step(&self, call: &str) -> Result<Option<StepInfo>, Error> {
        if self.subagent {
            return Ok(None);
        }
        let Some(turn) = self.running_turn()? else {
            return Ok(None);
        };
        let tx = self.ws.store().begin_read()?;
        let open = db::steps(&tx, &self.key, turn)?
            .into_iter()
            .rev()
            .find(|s| s.ended_ms.is_none() && (call.is_empty() || s.call == call));
        drop(tx);
        let Some(step) = open else {
            return Ok(None);
        };
        let number = step.number;
        // An edit tool's files as it left them.
        // A file missing at the end is claimed instead (the tool may write it a moment
        // after it reports its end): the next update gives the step what it then finds.
        let seen = if step.shell() {
            Vec::new()
        } else {
            let mut seen = super::observed::look(self.ws.store(), self.ws.root(), &step.files)?;
            seen.retain(|s| s.version.is_some());
            seen
        };
        let writer = ledger::Writer::Turn {
            session: self.key.0,
            turn,
            step: Some(number),
        };
        let close =
            |tx: &crate::store::WriteTx<'_>, after: Option<ObjectId>| -> Result<(), StoreError> {
                let w = Writer::new(tx, self.key)?;
                let Some(mut s) = w
                    .steps_of(turn)?
                    .into_iter()
                    .find(|s| s.number == number && s.ended_ms.is_none())
                else {
                    return Ok(());
                };
                if !s.shell() {
                    for seen in &seen {
                        ledger::observe(
                            tx,
                            seen.path.as_bytes(),
                            seen.version,
                            seen.last,
                            Ok(&writer),
                        )?;
                    }
                    let unseen: Vec<Vec<u8>> = s
                        .files
                        .iter()
                        .filter(|f| !seen.iter().any(|o| o.path.as_bytes() == f.as_slice()))
                        .cloned()
                        .collect();
                    ledger::claim(tx, &unseen, &writer)?;
                } else if after.is_none() {
                    // Ran without captures: anything that changed until the next one may be its.
                    ledger::claim(tx, &[Vec::new()], &writer)?;
                }
                s.ended_ms = Some(now_ms());
                s.after = after;
                w.step(&s)
            };
        if step.before.is_none() {
            self.ws.store().transact(|tx| close(tx, None))?;
            return Ok(Some(StepInfo {
                turn,
                step: number,
                snapshot: None,
            }));
        }
        // While the step still runs: what changed meanwhile is its.
        let id = self.step_capture(
            turn,
            format!("after turn {turn} step {number}"),
            &|tx, root| close(tx, Some(root)),
        )?;
        Ok(Some(StepInfo {
            turn,
            step: number,
            snapshot: Some(id),
        }))
    }

    /// Captures the disk for a step, labelled `label`: the ledger takes in what changed
    /// until now (the writers running now wrote it), then `then` records the step in the
    /// same commit. Returns the snapshot.
    fn step_capture(
        &self,
        turn: u64,
        label: String,
        then: &dyn Fn(&crate::store::WriteTx<'_>, ObjectId) -> Result<(), StoreError>,
    ) -> Result<ObjectId, Error> {
        super::recover_journal_if_needed(&self.ws, self.ws.history_wait());
        let lock = self.ws.lock_shared(crate::store::LOCK_WAIT)?;
        let looked = ledger::looking(self.ws.store());
        let also = |tx: &crate::store::WriteTx<'_>,
                    root: ObjectId,
                    seen: &crate::capture::Captured<'_>|
         -> Result<(), StoreError> {
            let reader = self.ws.store().reader()?;
            let window = ledger::Window {
                stepping: Some((self.key, turn)),
                ..ledger::Window::default()
            };
            ledger::in_capture(tx, &reader, (seen, root), window, looked)?;
            then(tx, root)
        };
        Ok(lock.record_with(Some(label), &NoProgress, &also)?.id)
    }

    /// The steps of turn `turn`.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub fn steps(&self, turn: u64) -> Result<Vec<StepRecord>, Error> {
        let tx = self.ws.store().begin_read()?;
        Ok(db::steps(&tx, &self.key, turn)?)
    }

    /// The steps of turn `turn` as `log --steps` shows them, oldest first.
    ///
    /// # Errors
    /// [`Error::Store`] (a step snapshot that cannot be read leaves its counts out).
    pub fn step_log(&self, turn: u64) -> Result<Vec<StepLog>, Error> {
        let steps = self.steps(turn)?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let reader = self.ws.store().reader()?;
        Ok(steps
            .into_iter()
            .map(|s| {
                let counts = match (s.before, s.after) {
                    (Some(b), Some(a)) => crate::diff::changes(&reader, &b, &a)
                        .ok()
                        .map(|c| super::revert::counts_of(&c)),
                    _ => None,
                };
                StepLog {
                    number: s.number,
                    tool: s.tool,
                    summary: s.summary,
                    files: s
                        .files
                        .iter()
                        .map(|f| crate::object::show_path(f))
                        .collect(),
                    began_ms: s.began_ms,
                    ended_ms: s.ended_ms,
                    before: s.before,
                    after: s.after,
                    counts,
                }
            })
            .collect())
    }

    /// The snapshot a step name gives: `N.K` (after step K of turn N) or with `before`, the
    /// workspace when it began. Only a shell step bracketed by captures has them.
    ///
    /// # Errors
    /// [`Error::Anchor`] naming what is missing; [`Error::Store`].
    pub(crate) fn step_snapshot(
        &self,
        anchor: &str,
        turn: u64,
        step: u64,
        before: bool,
    ) -> Result<ObjectId, Error> {
        let unknown = |reason: String| Error::Anchor {
            anchor: anchor.to_string(),
            reason,
        };
        let steps = self.steps(turn)?;
        let Some(s) = steps.iter().find(|s| s.number == step) else {
            return Err(unknown(if steps.is_empty() {
                format!("turn {turn} has no steps (its agent reports none, or it is not kept)")
            } else {
                format!("turn {turn} has steps 1 to {}", steps.len())
            }));
        };
        let id = if before { s.before } else { s.after };
        id.ok_or_else(|| {
            unknown(format!(
                "step {step} of turn {turn} ({} {}) took no snapshot{}; name turn:{turn}:before \
                 or turn:{turn}, or a snapshot of `retrace log --snapshots`",
                s.tool,
                s.summary,
                if s.shell() {
                    " (the step_captures setting left it out)"
                } else {
                    " (an edit step names its files instead)"
                }
            ))
        })
    }

    /// `files` as workspace-relative paths: absolute ones inside the workspace made
    /// relative, relative ones taken from the root; those outside (or with `..`) dropped.
    fn workspace_files(&self, files: &[String]) -> Vec<RelPath> {
        let root = self.ws.root();
        files
            .iter()
            .filter_map(|f| {
                let p = std::path::Path::new(f);
                let rel: std::path::PathBuf = if p.is_absolute() {
                    if let Ok(r) = p.strip_prefix(root) {
                        r.to_path_buf()
                    } else {
                        // The host may name the workspace by another path to it.
                        let canon = std::fs::canonicalize(p.parent()?).ok()?;
                        canon.strip_prefix(root).ok()?.join(p.file_name()?)
                    }
                } else {
                    p.to_path_buf()
                };
                let parts: Vec<&std::ffi::OsStr> = rel
                    .components()
                    .filter_map(|c| match c {
                        std::path::Component::Normal(n) => Some(Some(n)),
                        std::path::Component::CurDir => None,
                        _ => Some(None),
                    })
                    .collect::<Option<Vec<_>>>()?;
                if parts.is_empty() {
                    return None;
                }
                let mut bytes = Vec::new();
                for (i, n) in parts.iter().enumerate() {
                    if i > 0 {
                        bytes.push(b'/');
                    }
                    bytes.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(*n));
                }
                Some(RelPath::from(bytes))
            })
            .collect()
    }

    /// The turn of this session that runs now, if any.
    fn running_turn(&self) -> Result<Option<u64>, Error> {
        let l = self.load()?;
        Ok(l.state
            .pending
            .filter(|n| l.turn(*n).is_some_and(|t| t.state == TurnState::Pending)))
    }
}

/// The first line of `text`, control characters replaced.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.lines().nth(1).is_some() {
        out.push_str(" …");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::can_destroy;

    #[test]
    fn destructive_commands_are_told_from_harmless_ones() {
        for c in [
            "git checkout -- .",
            "git stash",
            "cd x && git reset --hard",
            "rm -rf build",
            "mv a b",
            "sed -i 's/a/b/' f.txt",
            "echo hi > notes.txt",
            "git clean -fdx",
            "true; git switch main",
        ] {
            assert!(can_destroy(c), "{c}");
        }
        for c in [
            "ls -la",
            "cargo test",
            "grep -r foo src",
            "echo hi >> log.txt",
            "git status",
            "git diff HEAD",
            "sed 's/a/b/' f.txt",
        ] {
            assert!(!can_destroy(c), "{c}");
        }
    }
}
