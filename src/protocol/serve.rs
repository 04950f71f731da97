//! `retrace serve`: the library over newline-delimited JSON-RPC 2.0 on stdin/stdout (the
//! LSP/MCP convention), for agents that are not written in Rust. `docs/protocol.md` is the
//! specification, with an example exchange.
//!
//! Requests are handled in order. One server holds any number of sessions, opened with
//! `open` and named by the handle it returns. Malformed input gets a JSON-RPC error and the
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
    next: u64,
}

/// A handler's failure: a JSON-RPC error code and message.
type Failure = (i64, String);

fn failed(e: &Error) -> Failure {
    (code::FAILED, e.to_string())
}

fn param<'a>(p: &'a Value, name: &str) -> Option<&'a str> {
    p.get(name).and_then(Value::as_str)
}

fn mode(p: &Value) -> Result<Mode, Failure> {
    match param(p, "mode") {
        None => Ok(Mode::Both),
        Some(m) => m.parse().map_err(|e| (code::INVALID_PARAMS, e)),
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
        let params = req.get("params").cloned().unwrap_or_else(|| json!({}));
        let result = self.dispatch(method, &params);
        let shutdown = method == "shutdown";
        // Notifications (no id) get no answer.
        if let Some(id) = id {
            match result {
                Ok(v) => send(&self.out, &json!({"jsonrpc": "2.0", "id": id, "result": v})),
                Err((c, m)) => self.reply_error(&id, c, &m),
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

    fn session(&mut self, p: &Value) -> Result<&mut Open, Failure> {
        let handle = match param(p, "session") {
            Some(h) => h.to_string(),
            None if self.sessions.len() == 1 => {
                self.sessions.keys().next().cloned().unwrap_or_default()
            }
            None => {
                return Err((
                    code::INVALID_PARAMS,
                    "give \"session\": the handle `open` returned".into(),
                ));
            }
        };
        self.sessions.get_mut(&handle).ok_or((
            code::INVALID_PARAMS,
            format!("no open session {handle:?}; call `open` first"),
        ))
    }

    fn notifier(&self, p: &Value) -> Notifier {
        Notifier {
            out: Arc::clone(&self.out),
            session: param(p, "session")
                .map(str::to_string)
                .or_else(|| {
                    (self.sessions.len() == 1)
                        .then(|| self.sessions.keys().next().cloned())
                        .flatten()
                })
                .unwrap_or_default(),
            state: Mutex::new((String::new(), 0, 0, Instant::now())),
        }
    }

    fn dispatch(&mut self, method: &str, p: &Value) -> Result<Value, Failure> {
        let json_of = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| (code::FAILED, format!("cannot encode the result: {e}")))
        };
        match method {
            "open" => self.open(p),
            "begin_turn" => {
                let (anchor, prompt) = (
                    param(p, "anchor").map(str::to_string),
                    param(p, "prompt").map(str::to_string),
                );
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
                let ms = p
                    .get("timeout_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(60_000);
                let o = self.session(p)?;
                let Some(turn) = o.turn.as_ref() else {
                    return Err((code::INVALID_PARAMS, "no turn in progress".into()));
                };
                let b = turn
                    .wait_before(Duration::from_millis(ms))
                    .map_err(|e| failed(&e))?;
                json_of(serde_json::to_value(b))
            }
            "round" => {
                let anchor = param(p, "anchor")
                    .ok_or((code::INVALID_PARAMS, "round needs \"anchor\"".to_string()))?
                    .to_string();
                let o = self.session(p)?;
                let Some(turn) = o.turn.as_ref() else {
                    return Err((code::INVALID_PARAMS, "no turn in progress".into()));
                };
                turn.round(anchor).map_err(|e| failed(&e))?;
                Ok(json!({"ok": true}))
            }
            "end_turn" => {
                let anchor = param(p, "anchor").map(str::to_string);
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
                    None => Err((code::INVALID_PARAMS, "no turn in progress".into())),
                }
            }
            "undo" | "redo" | "navigate" | "checkpoint" => {
                let progress = self.notifier(p);
                let force = p.get("force").and_then(Value::as_bool).unwrap_or(false);
                let m = mode(p)?;
                let anchor = param(p, "anchor").map(str::to_string);
                let label = param(p, "label").map(str::to_string);
                let o = self.session(p)?;
                let opts = OpOptions {
                    force,
                    progress: &progress,
                };
                let outcome = match method {
                    "undo" => o.session.undo_with(m, opts),
                    "redo" => o.session.redo_with(opts),
                    "checkpoint" => o.session.checkpoint_with(label, &progress),
                    _ => {
                        let a = anchor.ok_or((
                            code::INVALID_PARAMS,
                            "navigate needs \"anchor\"".to_string(),
                        ))?;
                        o.session.navigate_with(&a, m, opts)
                    }
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
                let (from, to) = (param(p, "from"), param(p, "to"));
                let o = self.session(p)?;
                let ws = o.session.workspace();
                let from = match from {
                    Some(f) => ws.resolve(f).map_err(|e| failed(&e))?,
                    None => o
                        .session
                        .status()
                        .map_err(|e| failed(&e))?
                        .last_known
                        .ok_or((code::FAILED, "no snapshot to compare with yet".to_string()))?,
                };
                let to = to
                    .map(|t| ws.resolve(t))
                    .transpose()
                    .map_err(|e| failed(&e))?;
                json_of(serde_json::to_value(
                    ws.diff(&from, to.as_ref()).map_err(|e| failed(&e))?,
                ))
            }
            "shutdown" => Ok(json!({"ok": true})),
            other => Err((
                code::METHOD_NOT_FOUND,
                format!("no method {other:?}; see docs/protocol.md"),
            )),
        }
    }

    fn open(&mut self, p: &Value) -> Result<Value, Failure> {
        let dir = PathBuf::from(param(p, "workspace").ok_or((
            code::INVALID_PARAMS,
            "open needs \"workspace\" (a directory)".to_string(),
        ))?);
        let id = param(p, "session").ok_or((
            code::INVALID_PARAMS,
            "open needs \"session\" (the agent's session id)".to_string(),
        ))?;
        let subagent = p.get("subagent").and_then(Value::as_bool).unwrap_or(false);
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
        let session = if subagent {
            ws.subagent_session(id)
        } else {
            ws.session(id)
        };
        let handle = format!("s{}", self.next);
        self.next += 1;
        let status = session.status().map_err(|e| failed(&e))?;
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
