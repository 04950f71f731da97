//! `retrace serve`: the library over newline-delimited JSON-RPC 2.0 on stdin/stdout (the
//! LSP/MCP convention), for agents that are not written in Rust. `docs/protocol.md` is the
//! specification, with an example exchange.
//!
//! Requests are handled in order. One server holds any number of sessions, opened with
//! `open` and named by the handle it returns (the same handle when a session is opened
//! again, so its turn in progress is shared). Every request's parameters are checked against
//! the documented types, unknown names refused. Malformed input gets a JSON-RPC error and the
//! server keeps running; `shutdown` or end of input finishes pending work (running captures)
//! and returns.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::history::{Mode, OpOptions, Report, Session, Turn};
use crate::progress::Progress;
use crate::{Config, Error, Maintainer, Workspace};

/// JSON-RPC error codes used.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Missing or wrong parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The operation failed (the message says why and what to do).
    pub const FAILED: i64 = -32000;
}

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

fn send(out: &Out, v: &Value) {
    let mut o = out.lock().unwrap_or_else(PoisonError::into_inner);
    // A closed stdout means the client went away: nothing more to tell it.
    let _ = writeln!(o, "{v}").and_then(|()| o.flush());
}

/// Progress of a long operation as `$/progress` notifications, at most five a second.
struct Notifier {
    out: Out,
    session: String,
    state: Mutex<(String, u64, u64, Instant)>,
}

impl Notifier {
    fn emit(&self, force: bool) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !force && s.3.elapsed() < Duration::from_millis(200) {
            return;
        }
        s.3 = Instant::now();
        send(
            &self.out,
            &json!({"jsonrpc": "2.0", "method": "$/progress",
                "params": {"session": self.session, "phase": s.0, "done": s.1, "total": s.2}}),
        );
    }
}

impl Progress for Notifier {
    fn start(&self, phase: &str, total: u64) {
        if let Ok(mut s) = self.state.lock() {
            *s = (phase.to_string(), 0, total, Instant::now());
        }
    }
    fn advance(&self, n: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.1 += n;
        }
        self.emit(false);
    }
    fn finish(&self) {
        self.emit(true);
    }
}

struct Open {
    session: Session,
    turn: Option<Turn>,
}

/// The server's state: open workspaces and sessions.
pub struct Server {
    config: Config,
    out: Out,
    workspaces: HashMap<PathBuf, Workspace>,
    /// Maintenance on a timer while the server runs, one per workspace root.
    maintainers: HashMap<PathBuf, Maintainer>,
    sessions: HashMap<String, Open>,
    /// The handle of each open session, by workspace root, session id and subagent flag:
    /// opening a session again returns its handle, so its turn in progress is shared.
    handles: HashMap<(PathBuf, String, bool), String>,
    next: u64,
}

/// A handler's failure: a JSON-RPC error code and message, and the parameter at fault (the
/// error's `data.param`).
struct Failure {
    code: i64,
    message: String,
    param: Option<String>,
}

impl Failure {
    fn new(code: i64, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            param: None,
        }
    }

    /// -32602 naming the parameter `name`.
    fn param(name: &str, message: impl std::fmt::Display) -> Failure {
        Failure {
            code: code::INVALID_PARAMS,
            message: format!("invalid params: {message}"),
            param: Some(name.to_string()),
        }
    }
}

fn failed(e: &Error) -> Failure {
    Failure::new(code::FAILED, e.to_string())
}

/// The parameters each method takes (`docs/protocol.md`); None for an unknown method.
fn parameters(method: &str) -> Option<&'static [&'static str]> {
    Some(match method {
        "open" => &["workspace", "session", "subagent"],
        "begin_turn" => &["session", "anchor", "prompt"],
        "wait_before" => &["session", "timeout_ms"],
        "round" | "end_turn" => &["session", "anchor"],
        "undo" => &["session", "mode", "force"],
        "redo" => &["session", "force"],
        "checkpoint" => &["session", "label"],
        "navigate" => &["session", "anchor", "mode", "force"],
        "status" | "log" => &["session"],
        "diff" => &["session", "from", "to"],
        "shutdown" => &[],
        _ => return None,
    })
}

/// A value as an error message shows it: its JSON, cut at 60 characters.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A request's `params`, checked against its method's documented parameters: an object (or
/// absent, or null), no name the method does not take, every value of its type. A `null`
/// value is as absent.
struct Params<'a>(Option<&'a serde_json::Map<String, Value>>);

impl<'a> Params<'a> {
    fn of(raw: Option<&'a Value>, method: &str, names: &[&str]) -> Result<Params<'a>, Failure> {
        let map = match raw {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(v) => {
                return Err(Failure::param(
                    "params",
                    format_args!("\"params\" must be an object (got {})", shown(v)),
                ));
            }
        };
        let unknown = map
            .into_iter()
            .flat_map(|m| m.keys())
            .find(|k| !names.contains(&k.as_str()));
        if let Some(k) = unknown {
            let takes = if names.is_empty() {
                "no parameters".to_string()
            } else {
                names.join(", ")
            };
            return Err(Failure::param(
                k,
                format_args!(
                    "unknown parameter {}: {method} takes {takes}",
                    shown(&Value::String(k.clone()))
                ),
            ));
        }
        Ok(Params(map))
    }

    /// The value of `name` as `get` reads it; None when absent or null, a -32602 naming it
    /// and `what` it must be when `get` cannot read it.
    fn typed<T>(
        &self,
        name: &str,
        what: &str,
        get: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, Failure> {
        match self.0.and_then(|m| m.get(name)).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => get(v).map(Some).ok_or_else(|| {
                Failure::param(
                    name,
                    format_args!("{name:?} must be {what} (got {})", shown(v)),
                )
            }),
        }
    }

    fn str(&self, name: &str) -> Result<Option<&'a str>, Failure> {
        self.typed(name, "a string", Value::as_str)
    }

    fn string(&self, name: &str) -> Result<Option<String>, Failure> {
        Ok(self.str(name)?.map(str::to_string))
    }

    /// A string that must be given; `what` says what it is.
    fn required(&self, name: &str, what: &str) -> Result<&'a str, Failure> {
        self.str(name)?
            .ok_or_else(|| Failure::param(name, format_args!("{name:?} is required ({what})")))
    }

    fn bool(&self, name: &str) -> Result<Option<bool>, Failure> {
        self.typed(name, "a boolean", Value::as_bool)
    }

    fn u64(&self, name: &str) -> Result<Option<u64>, Failure> {
        self.typed(name, "a non-negative integer", Value::as_u64)
    }

    /// `mode`, `both` when absent.
    fn mode(&self) -> Result<Mode, Failure> {
        let m = self.typed(
            "mode",
            "one of \"both\", \"files\", \"conversation\"",
            |v| v.as_str()?.parse().ok(),
        )?;
        Ok(m.unwrap_or(Mode::Both))
    }
}

impl Server {
    /// A server writing to `out` (stdout for `retrace serve`).
    #[must_use]
    pub fn new(config: Config, out: Box<dyn Write + Send>) -> Server {
        Server {
            config,
            out: Arc::new(Mutex::new(out)),
            workspaces: HashMap::new(),
            maintainers: HashMap::new(),
            sessions: HashMap::new(),
            handles: HashMap::new(),
            next: 1,
        }
    }

    /// Serves requests from `input` until `shutdown` or end of input, then finishes pending
    /// work (waits for running captures) and returns.
    pub fn run(&mut self, input: impl BufRead) {
        // Split on `\n` as bytes: a line that is not UTF-8 is one bad request, answered with a
        // parse error, not the end of the input (`BufRead::lines` would stop there).
        for line in input.split(b'\n') {
            let Ok(mut line) = line else { break };
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = match String::from_utf8(line) {
                Ok(l) => l,
                Err(e) => {
                    self.reply_error(
                        &Value::Null,
                        code::PARSE_ERROR,
                        &format!(
                            "parse error: the line is not UTF-8 (invalid byte at offset {})",
                            e.utf8_error().valid_up_to()
                        ),
                    );
                    continue;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            if !self.handle_line(&line) {
                break;
            }
        }
        self.finish();
    }

    fn finish(&mut self) {
        // A capture still running when the client leaves is let finish, so the store is
        // closed cleanly and the turn keeps its baseline.
        for (_, o) in self.sessions.drain() {
            if let Some(t) = o.turn {
                let _ = t.wait_before(Duration::from_hours(24));
            }
        }
        // Stops the maintenance threads, letting a pass in progress finish.
        self.maintainers.clear();
        self.workspaces.clear();
    }

    /// Handles one line; false after `shutdown`.
    fn handle_line(&mut self, line: &str) -> bool {
        let req: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.reply_error(
                    &Value::Null,
                    code::PARSE_ERROR,
                    &format!("parse error: {e}"),
                );
                return true;
            }
        };
        let id = req.get("id").cloned();
        let (Some(method), true) = (
            req.get("method").and_then(Value::as_str),
            req.get("jsonrpc").and_then(Value::as_str) == Some("2.0"),
        ) else {
            self.reply_error(
                &id.unwrap_or(Value::Null),
                code::INVALID_REQUEST,
                "not a JSON-RPC 2.0 request: needs \"jsonrpc\": \"2.0\" and a \"method\"",
            );
            return true;
        };
        let result = self.dispatch(method, req.get("params"));
        // A `shutdown` refused (bad params) is not one.
        let shutdown = method == "shutdown" && result.is_ok();
        // Notifications (no id) get no answer.
        if let Some(id) = id {
            match result {
                Ok(v) => send(&self.out, &json!({"jsonrpc": "2.0", "id": id, "result": v})),
                Err(f) => {
                    let mut error = json!({"code": f.code, "message": f.message});
                    if let Some(p) = f.param {
                        error["data"] = json!({ "param": p });
                    }
                    send(
                        &self.out,
                        &json!({"jsonrpc": "2.0", "id": id, "error": error}),
                    );
                }
            }
        }
        !shutdown
    }

    fn reply_error(&self, id: &Value, code: i64, message: &str) {
        send(
            &self.out,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// The handle `session` names, or the only one open when it is left out.
    fn handle(&self, p: &Params) -> Result<String, Failure> {
        match p.str("session")? {
            Some(h) if self.sessions.contains_key(h) => Ok(h.to_string()),
            Some(h) => Err(Failure::param(
                "session",
                format_args!("no open session {h:?}; call `open` first"),
            )),
            None if self.sessions.len() == 1 => {
                Ok(self.sessions.keys().next().cloned().unwrap_or_default())
            }
            None if self.sessions.is_empty() => Err(Failure::param(
                "session",
                "no session is open; call `open` first",
            )),
            None => Err(Failure::param(
                "session",
                "\"session\" is required (the handle `open` returned): more than one \
                 session is open",
            )),
        }
    }

    fn session(&mut self, p: &Params) -> Result<&mut Open, Failure> {
        let h = self.handle(p)?;
        self.sessions
            .get_mut(&h)
            .ok_or_else(|| Failure::param("session", format_args!("no open session {h:?}")))
    }

    fn notifier(&self, session: String) -> Notifier {
        Notifier {
            out: Arc::clone(&self.out),
            session,
            state: Mutex::new((String::new(), 0, 0, Instant::now())),
        }
    }

    fn dispatch(&mut self, method: &str, raw: Option<&Value>) -> Result<Value, Failure> {
        let Some(names) = parameters(method) else {
            return Err(Failure::new(
                code::METHOD_NOT_FOUND,
                format!("no method {method:?}; see docs/protocol.md"),
            ));
        };
        let p = &Params::of(raw, method, names)?;
        let json_of = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| Failure::new(code::FAILED, format!("cannot encode the result: {e}")))
        };
        let no_turn = || Failure::new(code::INVALID_PARAMS, "no turn in progress");
        match method {
            "open" => self.open(p),
            "begin_turn" => {
                let (anchor, prompt) = (p.string("anchor")?, p.string("prompt")?);
                let o = self.session(p)?;
                let turn = o
                    .session
                    .begin_turn(anchor, prompt)
                    .map_err(|e| failed(&e))?;
                let n = turn.number();
                o.turn = Some(turn);
                Ok(json!({"turn": n}))
            }
            "wait_before" => {
                let ms = p.u64("timeout_ms")?.unwrap_or(60_000);
                let o = self.session(p)?;
                let Some(turn) = o.turn.as_ref() else {
                    return Err(no_turn());
                };
                let b = turn
                    .wait_before(Duration::from_millis(ms))
                    .map_err(|e| failed(&e))?;
                json_of(serde_json::to_value(b))
            }
            "round" => {
                let anchor = p
                    .required("anchor", "a conversation node inside the turn")?
                    .to_string();
                let o = self.session(p)?;
                let Some(turn) = o.turn.as_ref() else {
                    return Err(no_turn());
                };
                turn.round(anchor).map_err(|e| failed(&e))?;
                Ok(json!({"ok": true}))
            }
            "end_turn" => {
                let anchor = p.string("anchor")?;
                let o = self.session(p)?;
                let summary = match o.turn.take() {
                    Some(t) => Some(t.end(anchor).map_err(|e| failed(&e))?),
                    None => o.session.end_turn(anchor).map_err(|e| failed(&e))?,
                };
                // Due maintenance runs beside, after the turn is recorded: never delays it.
                let root = o.session.workspace().root().to_path_buf();
                if let Some(m) = self.maintainers.get(&root) {
                    m.nudge();
                }
                match summary {
                    Some(s) => json_of(serde_json::to_value(s)),
                    None => Err(no_turn()),
                }
            }
            "undo" | "redo" | "navigate" | "checkpoint" => {
                let force = p.bool("force")?.unwrap_or(false);
                let m = p.mode()?;
                let anchor = p.string("anchor")?;
                let label = p.string("label")?;
                if method == "navigate" && anchor.is_none() {
                    return Err(Failure::param(
                        "anchor",
                        "\"anchor\" is required (a host anchor, turn:N, turn:N:before, \
                         checkpoint:N or a label)",
                    ));
                }
                let progress = self.notifier(self.handle(p)?);
                let o = self.session(p)?;
                let opts = OpOptions {
                    force,
                    progress: &progress,
                };
                let outcome = match method {
                    "undo" => o.session.undo_with(m, opts),
                    "redo" => o.session.redo_with(opts),
                    "checkpoint" => o.session.checkpoint_with(label, &progress),
                    _ => o
                        .session
                        .navigate_with(&anchor.unwrap_or_default(), m, opts),
                }
                .map_err(|e| failed(&e))?;
                json_of(serde_json::to_value(Report::from(&outcome)))
            }
            "status" => {
                let o = self.session(p)?;
                json_of(serde_json::to_value(
                    o.session.status().map_err(|e| failed(&e))?,
                ))
            }
            "log" => {
                let o = self.session(p)?;
                json_of(serde_json::to_value(
                    o.session.log().map_err(|e| failed(&e))?,
                ))
            }
            "diff" => {
                let (from, to) = (p.str("from")?, p.str("to")?);
                let o = self.session(p)?;
                let ws = o.session.workspace();
                let from = match from {
                    Some(f) => crate::retention::resolve_snapshot(ws, f).map_err(|e| failed(&e))?,
                    None => o
                        .session
                        .status()
                        .map_err(|e| failed(&e))?
                        .last_known
                        .ok_or_else(|| {
                            Failure::new(code::FAILED, "no snapshot to compare with yet")
                        })?,
                };
                let to = to
                    .map(|t| crate::retention::resolve_snapshot(ws, t))
                    .transpose()
                    .map_err(|e| failed(&e))?;
                json_of(serde_json::to_value(
                    ws.diff(&from, to.as_ref()).map_err(|e| failed(&e))?,
                ))
            }
            // `shutdown`: `parameters` knows no other method.
            _ => Ok(json!({"ok": true})),
        }
    }

    fn open(&mut self, p: &Params) -> Result<Value, Failure> {
        let dir = PathBuf::from(p.required("workspace", "a directory")?);
        let id = p.required("session", "the agent's session id")?;
        let subagent = p.bool("subagent")?.unwrap_or(false);
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let ws = if let Some(ws) = self.workspaces.get(&key) {
            ws.clone()
        } else {
            let ws = Workspace::open(&dir, &self.config).map_err(|e| failed(&e))?;
            self.maintainers
                .entry(ws.root().to_path_buf())
                .or_insert_with(|| ws.maintainer(None));
            self.workspaces.insert(key, ws.clone());
            ws
        };
        let key = (ws.root().to_path_buf(), id.to_string(), subagent);
        // Opened already: the same handle, so both openers share its turn in progress.
        if let Some(handle) = self.handles.get(&key)
            && let Some(o) = self.sessions.get(handle)
        {
            let status = o.session.status().map_err(|e| failed(&e))?;
            return Ok(json!({
                "session": handle,
                "root": ws.root().display().to_string(),
                "status": status,
                "warnings": ws.warnings(),
            }));
        }
        let session = if subagent {
            ws.subagent_session(id)
        } else {
            ws.session(id)
        };
        let handle = format!("s{}", self.next);
        self.next += 1;
        let status = session.status().map_err(|e| failed(&e))?;
        self.handles.insert(key, handle.clone());
        self.sessions.insert(
            handle.clone(),
            Open {
                session,
                turn: None,
            },
        );
        Ok(json!({
            "session": handle,
            "root": ws.root().display().to_string(),
            "status": status,
            "warnings": ws.warnings(),
        }))
    }
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
