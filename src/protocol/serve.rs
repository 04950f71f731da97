//! `retrace serve`: the library over newline-delimited JSON-RPC 2.0 on stdin/stdout (the
//! LSP/MCP convention), for agents that are not written in Rust. `docs/protocol.md` is the
//! specification, with an example exchange.
//!
//! Requests are handled in order. One server holds any number of sessions, opened with
//! `open` and named by the handle it returns (the same handle when a session is opened
//! again, so its turn in progress is shared). Each method but `open` and `shutdown` is an
//! operation of [`super::ops`], registered in one table (`METHODS`): its parameters are
//! read with serde into the operation's request struct (the `session` handle taken out
//! first), checked against the documented types with unknown names refused, and its response
//! is the result. Malformed input gets a JSON-RPC error and the server keeps running;
//! `shutdown` or end of input finishes pending work (running captures) and returns.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;
use serde::de::{self, DeserializeOwned};
use serde_json::{Map, Value, json};

use super::ops::{self, Context, OpError, Operation};
use crate::history::{Session, Turn};
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
    /// The watcher of each workspace opened, unless another process runs one.
    watchers: HashMap<PathBuf, crate::watch::Watcher>,
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

/// An operation's failure as an error answer.
fn failure(e: &OpError) -> Failure {
    match e {
        OpError::NoTurn | OpError::InvalidParams(_) => {
            Failure::new(code::INVALID_PARAMS, e.to_string())
        }
        OpError::Failed(_) | OpError::NoSnapshot => Failure::new(code::FAILED, e.to_string()),
    }
}

/// An operation's response as the result, or its failure as the error.
fn answer<T: Serialize>(r: Result<T, OpError>) -> Result<Value, Failure> {
    let response = r.map_err(|e| failure(&e))?;
    serde_json::to_value(response)
        .map_err(|e| Failure::new(code::FAILED, format!("cannot encode the result: {e}")))
}

/// A method's handler: reads its `params`, runs it and answers its result.
type Handler = fn(&mut Server, Option<&Value>) -> Result<Value, Failure>;

/// Operation `O` of [`ops`] as a method: its name, and [`Server::call`] runs it on the
/// session the request names.
const fn method<O: Operation>() -> (&'static str, Handler) {
    (O::METHOD, Server::call::<O>)
}

/// Every method (`docs/protocol.md`) and its handler. An operation of [`ops`] is one line,
/// `method::<ops::TheRequest>()`.
const METHODS: &[(&str, Handler)] = &[
    (ops::OpenRequest::METHOD, Server::open),
    method::<ops::BeginTurnRequest>(),
    method::<ops::WaitBeforeRequest>(),
    method::<ops::RoundRequest>(),
    (ops::EndTurnRequest::METHOD, Server::end_turn),
    method::<ops::BeginStepRequest>(),
    method::<ops::EndStepRequest>(),
    method::<ops::UndoRequest>(),
    method::<ops::RedoRequest>(),
    method::<ops::CheckpointRequest>(),
    method::<ops::NavigateRequest>(),
    method::<ops::RevertRequest>(),
    method::<ops::RestorePathsRequest>(),
    method::<ops::StatusRequest>(),
    method::<ops::LogRequest>(),
    method::<ops::DiffRequest>(),
    method::<ops::FileHistoryRequest>(),
    method::<ops::ShowRequest>(),
    method::<ops::BlameRequest>(),
    (ops::ShutdownRequest::METHOD, Server::shutdown),
];

/// The parameter a method's request names its session by (every method but `open` and
/// `shutdown`); the session's operation does not see it.
const SESSION: &[&str] = &["session"];

/// A value as an error message shows it: its JSON, cut at 60 characters.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A request's `params`, read with serde as the method's request `R`: an object (or absent,
/// or null), no name the method does not take, every value of its parameter's type, every
/// required one given. A `null` value is as absent. The names in `envelope` (the `session`
/// handle) are the server's and taken out first. Every refusal is a -32602 naming the
/// parameter, with a message saying what it must be (from `R`'s JSON schema).
struct Params<R> {
    /// The `session` handle, when the envelope has it and it is given.
    session: Option<String>,
    /// The operation's request.
    request: R,
}

impl<R: DeserializeOwned + JsonSchema> Params<R> {
    fn of(raw: Option<&Value>, method: &str, envelope: &[&str]) -> Result<Params<R>, Failure> {
        let empty = serde_json::Map::new();
        let map = match raw {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(v) => {
                return Err(Failure::param(
                    "params",
                    format_args!("\"params\" must be an object (got {})", shown(v)),
                ));
            }
        };
        let request = R::deserialize(Fields { map, envelope })
            .map_err(|r| Self::refused(r, map, method, envelope))?;
        let session = match map.get("session").filter(|_| envelope.contains(&"session")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                return Err(Failure::param(
                    "session",
                    format_args!("\"session\" must be a string (got {})", shown(v)),
                ));
            }
        };
        Ok(Params { session, request })
    }

    /// The -32602 answer to `r`.
    fn refused(r: Refusal, map: &Map<String, Value>, method: &str, envelope: &[&str]) -> Failure {
        let schema = schemars::schema_for!(R);
        let property = |name: &str| schema.as_value()["properties"][name].clone();
        match r {
            Refusal::Unknown { name, takes } => {
                let names: Vec<&str> = envelope.iter().chain(takes).copied().collect();
                let takes = if names.is_empty() {
                    "no parameters".to_string()
                } else {
                    names.join(", ")
                };
                Failure::param(
                    &name,
                    format_args!(
                        "unknown parameter {}: {method} takes {takes}",
                        shown(&Value::String(name.clone()))
                    ),
                )
            }
            Refusal::Missing(name) => Failure::param(
                name,
                format_args!("{name:?} is required ({})", summary(&property(name))),
            ),
            Refusal::Invalid(name) => Failure::param(
                &name,
                format_args!(
                    "{name:?} must be {} (got {})",
                    kind(&property(&name)),
                    map.get(&name).map(shown).unwrap_or_default()
                ),
            ),
            Refusal::Other(m) => Failure::new(code::INVALID_PARAMS, format!("invalid params: {m}")),
        }
    }
}

/// What a value of a parameter with JSON schema `p` must be, in words: `a boolean`, `one of
/// "both", "files", "conversation"`…
fn kind(p: &Value) -> String {
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("one of {}", names.join(", "));
    }
    let types: Vec<&str> = match p.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let non_negative = p.get("minimum").and_then(Value::as_f64) == Some(0.0);
    match types.into_iter().find(|t| *t != "null") {
        Some("boolean") => "a boolean",
        Some("string") => "a string",
        Some("integer") if non_negative => "a non-negative integer",
        Some("integer") => "an integer",
        Some("number") => "a number",
        Some("array") => "an array",
        Some("object") => "an object",
        _ => "of its documented type",
    }
    .to_string()
}

/// What a required parameter with JSON schema `p` is, in words: the first sentence of its
/// description (its doc comment), or its [`kind`].
fn summary(p: &Value) -> String {
    let description = p
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .replace('\n', " ");
    let first = description.split(". ").next().unwrap_or_default();
    let mut chars = first.trim_end_matches('.').chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => kind(p),
    }
}

/// Why serde could not read a request from its parameters, naming the parameter.
#[derive(Debug)]
enum Refusal {
    /// A name the method does not take; `takes` are the request's own.
    Unknown {
        name: String,
        takes: &'static [&'static str],
    },
    /// A required parameter left out (or null).
    Missing(&'static str),
    /// A value not of its parameter's type.
    Invalid(String),
    /// Anything else.
    Other(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unknown { name, .. } => write!(f, "unknown parameter {name:?}"),
            Refusal::Missing(name) => write!(f, "{name:?} is required"),
            Refusal::Invalid(name) => write!(f, "{name:?} is of the wrong type"),
            Refusal::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Refusal {}

impl de::Error for Refusal {
    fn custom<T: std::fmt::Display>(msg: T) -> Refusal {
        Refusal::Other(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Refusal {
        Refusal::Unknown {
            name: field.to_string(),
            takes: expected,
        }
    }

    fn missing_field(field: &'static str) -> Refusal {
        Refusal::Missing(field)
    }
}

/// A `params` object as a serde deserializer of a request struct: names neither the
/// struct's fields nor in `envelope` are refused before any value is read, the values are
/// read in the order of the struct's fields (the `envelope` names and `null` values left
/// out), and each error is a [`Refusal`] naming its parameter.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    envelope: &'a [&'a str],
}

impl<'de> Fields<'de> {
    /// The entries named `names`, in that order, that are given and not null.
    fn entries(&self, names: impl Iterator<Item = &'de str>) -> Entries<'de> {
        let given: Vec<_> = names
            .filter(|k| !self.envelope.contains(k))
            .filter_map(|k| self.map.get_key_value(k))
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        Entries {
            given: given.into_iter(),
            value: None,
        }
    }
}

impl<'de> de::Deserializer<'de> for Fields<'de> {
    type Error = Refusal;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_map(self.entries(self.map.keys().map(String::as_str)))
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        let known = |k: &str| fields.contains(&k) || self.envelope.contains(&k);
        if let Some(k) = self.map.keys().find(|k| !known(k)) {
            return Err(de::Error::unknown_field(k, fields));
        }
        // In the request's order: the first parameter of the wrong type is the one named.
        visitor.visit_map(self.entries(fields.iter().copied()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The parameters given, by name.
struct Entries<'a> {
    given: std::vec::IntoIter<(&'a str, &'a Value)>,
    /// The entry whose name was just read.
    value: Option<(&'a str, &'a Value)>,
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = Refusal;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refusal> {
        let Some((name, value)) = self.given.next() else {
            return Ok(None);
        };
        self.value = Some((name, value));
        seed.deserialize(de::value::BorrowedStrDeserializer::new(name))
            .map(Some)
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Refusal> {
        let (name, value) = self
            .value
            .take()
            .ok_or_else(|| Refusal::Other("a value read before its name".into()))?;
        seed.deserialize(value)
            .map_err(|_| Refusal::Invalid(name.to_string()))
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
            watchers: HashMap::new(),
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
        let shutdown = method == ops::ShutdownRequest::METHOD && result.is_ok();
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
    fn handle(&self, session: Option<&str>) -> Result<String, Failure> {
        match session {
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

    fn notifier(&self, session: String) -> Notifier {
        Notifier {
            out: Arc::clone(&self.out),
            session,
            state: Mutex::new((String::new(), 0, 0, Instant::now())),
        }
    }

    fn dispatch(&mut self, method: &str, raw: Option<&Value>) -> Result<Value, Failure> {
        let Some((_, handler)) = METHODS.iter().find(|(name, _)| *name == method) else {
            return Err(Failure::new(
                code::METHOD_NOT_FOUND,
                format!("no method {method:?}; see docs/protocol.md"),
            ));
        };
        handler(self, raw)
    }

    /// Runs operation `O` on the session the request names (its progress as
    /// notifications), answering its response.
    fn call<O: Operation>(&mut self, raw: Option<&Value>) -> Result<Value, Failure> {
        answer(self.run_op::<O>(raw)?.1)
    }

    /// Reads the request of `O` and runs it on the session it names: that session's handle
    /// and the operation's result.
    fn run_op<O: Operation>(
        &mut self,
        raw: Option<&Value>,
    ) -> Result<(String, Result<O::Response, OpError>), Failure> {
        let p = Params::<O>::of(raw, O::METHOD, SESSION)?;
        let handle = self.handle(p.session.as_deref())?;
        let progress = self.notifier(handle.clone());
        let o = self
            .sessions
            .get_mut(&handle)
            .ok_or_else(|| Failure::param("session", format_args!("no open session {handle:?}")))?;
        let mut cx = Context::new(&o.session, &mut o.turn).with_progress(&progress);
        let result = p.request.run(&mut cx);
        Ok((handle, result))
    }

    /// `end_turn`, then a nudge to the workspace's maintenance.
    fn end_turn(&mut self, raw: Option<&Value>) -> Result<Value, Failure> {
        let (handle, result) = self.run_op::<ops::EndTurnRequest>(raw)?;
        // Due maintenance runs beside, after the turn is recorded: never delays it.
        if !matches!(result, Err(OpError::Failed(_))) {
            let root = self
                .sessions
                .get(&handle)
                .map(|o| o.session.workspace().root());
            if let Some(m) = root.and_then(|r| self.maintainers.get(r)) {
                m.nudge();
            }
        }
        answer(result)
    }

    /// `shutdown`: answered here; [`Server::handle_line`] then stops reading.
    fn shutdown(_: &mut Server, raw: Option<&Value>) -> Result<Value, Failure> {
        Params::<ops::ShutdownRequest>::of(raw, ops::ShutdownRequest::METHOD, &[])?;
        answer(Ok(ops::Acknowledged::OK))
    }

    fn open(&mut self, raw: Option<&Value>) -> Result<Value, Failure> {
        let ops::OpenRequest {
            workspace,
            session: id,
            subagent,
            agent,
        } = Params::<ops::OpenRequest>::of(raw, ops::OpenRequest::METHOD, &[])?.request;
        let dir = PathBuf::from(workspace);
        let subagent = subagent.unwrap_or(false);
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let ws = if let Some(ws) = self.workspaces.get(&key) {
            ws.clone()
        } else {
            let ws = Workspace::open(&dir, &self.config).map_err(|e| failed(&e.into()))?;
            self.maintainers
                .entry(ws.root().to_path_buf())
                .or_insert_with(|| ws.maintainer(None));
            if !self.watchers.contains_key(ws.root())
                && let Some(w) = crate::watch::host(ws.watch_spec())
            {
                self.watchers.insert(ws.root().to_path_buf(), w);
            }
            self.workspaces.insert(key, ws.clone());
            ws
        };
        let opened = |handle: &str, status| {
            answer(Ok(ops::Opened {
                session: handle.to_string(),
                root: ws.root().display().to_string(),
                status,
                warnings: ws.warnings(),
            }))
        };
        let key = (ws.root().to_path_buf(), id.clone(), subagent);
        // Opened already: the same handle, so both openers share its turn in progress.
        if let Some(handle) = self.handles.get(&key)
            && let Some(o) = self.sessions.get(handle)
        {
            let status = o.session.status().map_err(|e| failed(&e))?;
            return opened(handle, status);
        }
        let session = if subagent {
            ws.subagent_session(&id)
        } else {
            match agent.as_deref() {
                Some(agent) => ws.session(&id).for_agent(agent),
                None => ws.session(&id),
            }
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
        opened(&handle, status)
    }
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
