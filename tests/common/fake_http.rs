//! A fake model server for the end-to-end tests: HTTP/1.1 on 127.0.0.1, one request per
//! connection, every POST body recorded and answered with the server-sent events a closure
//! returns.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

type Respond = dyn Fn(&str, &Value) -> String + Send + Sync;

/// The server: its port and the JSON bodies it was sent.
pub struct FakeHttp {
    pub port: u16,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeHttp {
    /// Starts serving; `respond` turns a request body into the SSE text of the answer.
    pub fn start(respond: impl Fn(&Value) -> String + Send + Sync + 'static) -> FakeHttp {
        FakeHttp::start_with_path(move |_, request| respond(request))
    }

    /// Starts serving; `respond` turns a request path and body into the answer: SSE text, or
    /// a JSON document when it starts with `{`.
    pub fn start_with_path(
        respond: impl Fn(&str, &Value) -> String + Send + Sync + 'static,
    ) -> FakeHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let respond: Arc<Respond> = Arc::new(respond);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, respond) = (Arc::clone(&seen), Arc::clone(&respond));
                std::thread::spawn(move || {
                    let _ = serve(stream, &seen, &*respond);
                });
            }
        });
        FakeHttp { port, requests }
    }

    /// Every request body so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<Value>>, respond: &Respond) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    if method != "POST" {
        return out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let answer = respond(&path, &request);
    seen.lock().unwrap().push(request);
    let kind = if answer.starts_with('{') {
        "application/json"
    } else {
        "text/event-stream"
    };
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\nConnection: close\r\n\r\n",
        answer.len()
    )?;
    out.write_all(answer.as_bytes())?;
    out.flush()
}

/// The server-sent events of a streamed chat-completions answer for `model`: one tool call
/// (`name`, its JSON `args`, the call `id`), else the assistant's `text`.
pub fn chat_sse(model: &Value, call: Option<(&str, &Value, &str)>, text: &str) -> String {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut sse = String::new();
    if let Some((name, args, id)) = call {
        sse += &chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id,
                "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        );
        sse += &chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
            Value::Null,
        );
        sse += &chunk(json!({}), json!("tool_calls"));
    } else {
        sse += &chunk(json!({"role": "assistant", "content": text}), Value::Null);
        sse += &chunk(json!({}), json!("stop"));
    }
    sse + "data: [DONE]\n\n"
}

/// The text of a chat message's content: a string, or its text parts joined.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The tool call a scripted model makes next: the newest user message for which `plan`
/// gives calls, and the first of them not yet answered by a tool result after it; None when
/// no message has a plan or every planned call was answered (then the model says its text).
pub fn next_planned_call<T>(messages: &[Value], plan: impl Fn(&str) -> Vec<T>) -> Option<T> {
    let asked = messages
        .iter()
        .rposition(|m| m["role"] == "user" && !plan(&text_of(&m["content"])).is_empty())?;
    let done = messages[asked..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    plan(&text_of(&messages[asked]["content"]))
        .into_iter()
        .nth(done)
}
