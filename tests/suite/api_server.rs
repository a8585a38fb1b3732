//! A scripted OpenAI-compatible server on `127.0.0.1:0` for tests: plain HTTP/1.1 written by hand
//! over `std::net`, one thread per connection, `Connection: close` on every answer, so tests
//! control the framing byte by byte (chunk boundaries, stalls, hang-ups).
//!
//! On a [`VirtualClock`] (the paused clock of the client's runtime, [`ScriptedServer::on_clock`])
//! the server's silences are virtual: a paused runtime that has nothing to do jumps its clock to
//! the next timer, also while a request is on the wire, so the server holds the clock (see
//! [`ClockHold`]) from the moment it takes a connection until it goes silent on purpose (a
//! stall, the pause between two chunks) or has answered. A client's timeout then fires only in
//! a silence the script asked for, whatever the machine's speed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

/// One request the server received.
#[derive(Clone, Debug)]
pub(super) struct RecordedRequest {
    /// `POST`, ...
    pub method: String,
    /// `/v1/chat/completions`, ...
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::Null` when empty or not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// The first header called `name` (case-insensitive).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The chat messages the request sent (none when it sent no `messages`).
    pub(super) fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The text of the request's last message.
    pub(super) fn last_text(&self) -> String {
        self.messages().last().map(text_of).unwrap_or_default()
    }
}

/// A chat message's text content (empty when it has none).
pub(super) fn text_of(message: &Value) -> String {
    message["content"].as_str().unwrap_or_default().to_owned()
}

/// How the server answers one request.
#[derive(Clone, Debug)]
pub(super) enum Reply {
    /// A JSON body with a Content-Length.
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
    /// `200` with `text/event-stream`, the body written in these chunks, then a hang-up.
    Sse {
        chunks: Vec<Vec<u8>>,
        delay_between: Duration,
    },
    /// Any status with a text body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Sends these raw bytes (maybe none), then nothing until the client hangs up.
    Stall { after: Vec<u8> },
    /// Hangs up without answering.
    Close,
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";

impl Reply {
    /// A streamed text reply: realistic `chat.completion.chunk` events (role, content pieces,
    /// `finish_reason: stop`, a usage chunk with empty `choices`, `[DONE]`) with CRLF line ends
    /// and a keep-alive comment, cut into `split_every`-byte chunks (so cuts fall inside UTF-8
    /// characters and `\r\n` pairs).
    pub(super) fn sse_text(text: &str, split_every: usize) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(3) {
            let piece: String = piece.iter().collect();
            events.push(chunk(json!({"content": piece}), None));
        }
        events.push(chunk(json!({}), Some("stop")));
        events.push(usage_chunk(7, chars.len() as u64));
        let mut body = String::from(": keep-alive\r\n\r\n");
        for event in &events {
            body.push_str(&format!("data: {event}\r\n\r\n"));
        }
        body.push_str("data: [DONE]\r\n\r\n");
        Reply::sse_bytes(body.as_bytes(), split_every)
    }

    /// A streamed reply calling tools `(id, name, arguments)`: each call's id and name first,
    /// then its arguments in pieces of 4 bytes; LF line ends; cut into 7-byte chunks.
    pub(super) fn sse_tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            for piece in arguments.as_bytes().chunks(4) {
                let piece = String::from_utf8_lossy(piece);
                events.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        events.push(chunk(json!({}), Some("tool_calls")));
        events.push(usage_chunk(11, 5));
        Reply::sse_events(&events, true, 7)
    }

    /// A stream of these `data:` payloads (LF line ends), `[DONE]` last if `done`, cut into
    /// `split_every`-byte chunks.
    pub(super) fn sse_events(events: &[Value], done: bool, split_every: usize) -> Reply {
        let mut body = String::new();
        for event in events {
            body.push_str(&format!("data: {event}\n\n"));
        }
        if done {
            body.push_str("data: [DONE]\n\n");
        }
        Reply::sse_bytes(body.as_bytes(), split_every)
    }

    /// A stream of exactly these body bytes, cut into `split_every`-byte chunks written 0.2 ms
    /// apart (so that most arrive as separate reads).
    pub(super) fn sse_bytes(body: &[u8], split_every: usize) -> Reply {
        Reply::Sse {
            chunks: body
                .chunks(split_every.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            delay_between: Duration::from_micros(200),
        }
    }

    /// SSE response headers and these events, then silence until the client hangs up.
    pub(super) fn sse_then_stall(events: &[Value]) -> Reply {
        let mut after = SSE_HEAD.as_bytes().to_vec();
        for event in events {
            after.extend_from_slice(format!("data: {event}\n\n").as_bytes());
        }
        Reply::Stall { after }
    }

    /// A whole `chat.completion` with text.
    pub(super) fn completion_text(text: &str) -> Reply {
        Reply::completion(json!({"role": "assistant", "content": text}), "stop")
    }

    /// A whole `chat.completion` calling tools `(id, name, arguments)`, with `content: null`.
    pub(super) fn completion_tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        Reply::completion(
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
            "tool_calls",
        )
    }

    fn completion(message: Value, finish_reason: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "test",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
            }),
        )
    }

    /// A JSON answer.
    pub(super) fn json(status: u16, body: Value) -> Reply {
        Reply::Json {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// An OpenAI-style error answer: `{"error": {"message": ..., "type": ...}}`.
    pub(super) fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": {"message": message, "type": "invalid_request_error", "code": null}}),
        )
    }

    /// A bare status with a short text body.
    pub(super) fn status(status: u16) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: format!("status {status}"),
        }
    }

    /// The same reply with one more header (for `Json` and `Status`).
    pub(super) fn with_header(mut self, name: &str, value: &str) -> Reply {
        match &mut self {
            Reply::Json { headers, .. } | Reply::Status { headers, .. } => {
                headers.push((name.to_owned(), value.to_owned()));
            }
            _ => panic!("with_header applies to Json and Status replies"),
        }
        self
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
}

fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test",
        "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion}})
}

/// The paused clock of a client's tokio runtime, as the server's threads see it.
#[derive(Clone, Debug)]
pub(super) struct VirtualClock {
    handle: tokio::runtime::Handle,
}

impl VirtualClock {
    /// A current-thread runtime (I/O and time on) whose clock starts paused, and its clock.
    pub(super) fn paused_runtime() -> (tokio::runtime::Runtime, VirtualClock) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let clock = VirtualClock {
            handle: runtime.handle().clone(),
        };
        (runtime, clock)
    }

    /// The runtime's time now (from any thread).
    pub(super) fn now(&self) -> tokio::time::Instant {
        let _context = self.handle.enter();
        tokio::time::Instant::now()
    }

    /// Stops the clock from jumping ahead until the hold is dropped or the runtime shuts down.
    /// (A blocking task of a current-thread runtime keeps its paused clock from auto-advancing
    /// while it runs; this one runs until either happens.)
    pub(super) fn hold(&self) -> ClockHold {
        let (signal, signalled) = mpsc::channel::<()>();
        let on_shutdown = Signal(signal.clone());
        let watch = self.handle.spawn(async move {
            let _on_shutdown = on_shutdown;
            std::future::pending::<()>().await
        });
        drop(self.handle.spawn_blocking(move || {
            let _ = signalled.recv();
        }));
        ClockHold {
            _release: Signal(signal),
            watch,
        }
    }

    /// Drops `hold`, lets `silence` pass on the clock, and holds it again at once; `None` when
    /// the runtime is gone (the client finished).
    fn keep_silent(&self, hold: ClockHold, silence: Duration) -> Option<ClockHold> {
        let (held, regained) = mpsc::channel();
        let clock = self.clone();
        // Spawned while still held, so the silence starts now; the new hold is taken on the
        // runtime's thread the moment the silence ends, before its clock can move on.
        drop(self.handle.spawn(async move {
            tokio::time::sleep(silence).await;
            let _ = held.send(clock.hold());
        }));
        drop(hold);
        regained.recv().ok()
    }
}

/// While alive, the client's paused clock stands still; virtual time passes only once every
/// hold is dropped and the runtime is idle.
#[derive(Debug)]
pub(super) struct ClockHold {
    _release: Signal,
    /// A task that ends the hold if the runtime shuts down first (dropping its tasks).
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for ClockHold {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// Sends once, when dropped.
#[derive(Debug)]
struct Signal(mpsc::Sender<()>);

impl Drop for Signal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

type Responder = dyn Fn(&RecordedRequest, usize) -> Reply + Send + Sync;

/// The running server; it stops accepting when dropped.
pub(super) struct ScriptedServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Starts a server; request number `index` (from 0) is answered by `respond(request, index)`.
    pub(super) fn start(
        respond: impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static,
    ) -> ScriptedServer {
        ScriptedServer::launch(None, Arc::new(respond))
    }

    /// A server that streams `replies[index]` as the text of request `index` (the last one
    /// again after that), seven bytes a chunk.
    pub(super) fn replying(replies: Vec<String>) -> ScriptedServer {
        ScriptedServer::start(move |_, index| {
            Reply::sse_text(&replies[index.min(replies.len() - 1)], 7)
        })
    }

    /// Like [`ScriptedServer::start`], for a client whose runtime runs on `clock`: the pauses
    /// between [`Reply::Sse`] chunks pass on `clock`, and the clock is held while the server
    /// works (from now, for the first connection, so the client cannot time out before it).
    pub(super) fn on_clock(
        clock: &VirtualClock,
        respond: impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static,
    ) -> ScriptedServer {
        ScriptedServer::launch(Some(clock.clone()), Arc::new(respond))
    }

    fn launch(clock: Option<VirtualClock>, respond: Arc<Responder>) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut first_hold = clock.as_ref().map(VirtualClock::hold);
        let acceptor = {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let hold = first_hold
                        .take()
                        .or_else(|| clock.as_ref().map(VirtualClock::hold));
                    let paced = clock.clone().zip(hold);
                    let requests = Arc::clone(&requests);
                    let respond = Arc::clone(&respond);
                    thread::spawn(move || serve(stream, &requests, &*respond, paced));
                }
            })
        };
        ScriptedServer {
            addr,
            requests,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// Always answers with `reply`.
    pub(super) fn always(reply: Reply) -> ScriptedServer {
        ScriptedServer::start(move |_, _| reply.clone())
    }

    /// Answers with `replies` in order, the last one repeated.
    pub(super) fn sequence(replies: Vec<Reply>) -> ScriptedServer {
        ScriptedServer::start(move |_, index| replies[index.min(replies.len() - 1)].clone())
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub(super) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests received so far, in order.
    pub(super) fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor so it sees the flag; connection threads end on their own.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// A server's clock and its hold on it while it works.
type Paced = Option<(VirtualClock, ClockHold)>;

fn serve(
    stream: TcpStream,
    requests: &Mutex<Vec<RecordedRequest>>,
    respond: &Responder,
    mut paced: Paced,
) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    stream.set_nodelay(true).ok();
    let Some(request) = read_request(&stream) else {
        return;
    };
    let index = {
        let mut requests = requests.lock().unwrap();
        requests.push(request.clone());
        requests.len() - 1
    };
    let reply = respond(&request, index);
    let _ = write_reply(stream, reply, &mut paced);
    // Only now, with the connection closed, may the client's clock move on.
    drop(paced);
}

fn read_request(stream: &TcpStream) -> Option<RecordedRequest> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        headers.push((name, value));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(RecordedRequest {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

/// Writes `reply` and closes the connection; a hold on the client's clock is let go while the
/// script is silent (and kept through the pauses between chunks).
fn write_reply(mut stream: TcpStream, reply: Reply, paced: &mut Paced) -> std::io::Result<()> {
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => write_whole(
            &mut stream,
            status,
            &headers,
            "application/json",
            &body.to_string(),
        ),
        Reply::Status {
            status,
            headers,
            body,
        } => write_whole(&mut stream, status, &headers, "text/plain", &body),
        Reply::Sse {
            chunks,
            delay_between,
        } => {
            stream.write_all(SSE_HEAD.as_bytes())?;
            stream.flush()?;
            for chunk in chunks {
                match paced.take() {
                    Some((clock, hold)) => match clock.keep_silent(hold, delay_between) {
                        Some(hold) => *paced = Some((clock, hold)),
                        None => return Ok(()),
                    },
                    None => thread::sleep(delay_between),
                }
                stream.write_all(&chunk)?;
                stream.flush()?;
            }
            Ok(())
        }
        Reply::Stall { after } => {
            stream.write_all(&after)?;
            stream.flush()?;
            drop(paced.take());
            // Waits for the client to hang up (read returns 0 or fails), 30 s at most.
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            Ok(())
        }
        Reply::Close => Ok(()),
    }
}

fn write_whole(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}
