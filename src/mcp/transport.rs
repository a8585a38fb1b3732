//! `flycode mcp`'s framing on standard input and output: newline-delimited JSON-RPC, as rmcp's
//! own stdio transport frames it, with one difference that matters for speed.
//!
//! rmcp reads every message through serde's buffered untagged and flattened deserialisation, which
//! copies each string of a message several times: a 1 MB `fs_write` spent about 3 ms there, more
//! than writing and flushing the file. A `tools/call` request in its plain form (`jsonrpc`, `id`,
//! `method`, and `params` holding only `name`, `arguments` and `_meta`) is therefore read here
//! directly into rmcp's types, each string parsed once. Every other line (a call with input
//! responses or request state, and every other message) goes through rmcp's own deserialisation,
//! so its meaning is rmcp's; tests check that both paths read a plain call alike.
//!
//! What the transport does with lines that are not messages follows rmcp's stdio transport: an
//! empty line is skipped, a leading byte-order mark and a trailing carriage return are ignored, a
//! line that is not JSON is ignored (answering it could start an error storm), and a line longer
//! than [`MAX_LINE`] is dropped without being kept. Unlike rmcp, a dropped line that is a request
//! is answered (PROTOCOL.md §14, Framing): its first [`HEAD_SCAN`] bytes are kept and scanned for
//! a top-level `id` ([`over_long_request_id`]), and an `id` found there gets a `-32600` error
//! saying how large the line was and what to send instead, so the client's call fails rather than
//! waits forever; the next line is read as usual. Also unlike rmcp, well-formed JSON that is not a valid request is
//! answered with `Invalid Request` under the request's own `id` (so the client's call fails
//! rather than waits); an invalid notification is not answered (JSON-RPC forbids replying to a
//! notification), nor is an invalid answer (its `id` is one of the server's own requests). At
//! most [`ANSWERS_IN_FLIGHT`] such answers are written at once, and reading waits for a place,
//! so a client that sends bad lines and reads nothing cannot make them pile up. Each is noted on
//! stderr, up to [`NOTES`] notes.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientRequest, ErrorData, JsonObject,
    JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0, Request, RequestId, RequestMetaObject,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest line read (rmcp's limit too); a longer one is dropped.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// How much of the start of an over-long line is kept to find its `id`: enough for the
/// `jsonrpc`, `id` and `method` members a client writes before `params`, small enough that a
/// dropped line costs nothing.
pub(crate) const HEAD_SCAN: usize = 4096;

const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// Newline-delimited JSON-RPC over a reader and a writer (standard input and output).
pub(crate) struct LineTransport<R, W> {
    reader: BufReader<R>,
    /// The line being read: kept across cancelled reads, cleared once a whole line was handled.
    line: Vec<u8>,
    /// Whether the rest of an over-long line is being skipped.
    discarding: bool,
    /// The first [`HEAD_SCAN`] bytes of the over-long line being skipped.
    discarded_head: Vec<u8>,
    /// The length of the over-long line being skipped, so far.
    discarded_len: u64,
    writer: Arc<tokio::sync::Mutex<W>>,
    /// The answer to an invalid request, waiting for a place among [`ANSWERS_IN_FLIGHT`].
    pending_answer: Option<TxJsonRpcMessage<RoleServer>>,
    answers_in_flight: Arc<tokio::sync::Semaphore>,
    /// Notes written about lines that are not messages; past [`NOTES`] they are not written.
    notes: u32,
}

/// Answers to invalid requests being written at once: past this, reading waits, so a client that
/// sends bad lines and never reads its answers cannot make them pile up.
pub(crate) const ANSWERS_IN_FLIGHT: usize = 16;

/// Notes about lines that are not messages written to standard error at most: a client that
/// floods bad lines must not stall the server on a standard error nobody reads.
pub(crate) const NOTES: u32 = 100;

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading `reader` and writing `writer`.
    pub(crate) fn new(reader: R, writer: W) -> LineTransport<R, W> {
        LineTransport {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            discarding: false,
            discarded_head: Vec::new(),
            discarded_len: 0,
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            pending_answer: None,
            answers_in_flight: Arc::new(tokio::sync::Semaphore::new(ANSWERS_IN_FLIGHT)),
            notes: 0,
        }
    }

    /// Writes a note about a line to standard error, up to [`NOTES`] of them.
    fn note(&mut self, text: std::fmt::Arguments<'_>) {
        self.notes = self.notes.saturating_add(1);
        match self.notes.cmp(&NOTES) {
            std::cmp::Ordering::Less => eprintln!("flycode mcp: {text}"),
            std::cmp::Ordering::Equal => eprintln!(
                "flycode mcp: {text} (further notes about lines that are not messages are not shown)"
            ),
            std::cmp::Ordering::Greater => {}
        }
    }

    /// Reads up to the end of the next line into `self.line`. Cancel-safe: bytes are consumed from
    /// the reader only once they are in `self.line` (or skipped), with no await in between.
    async fn read_line(&mut self) -> std::io::Result<LineEnd> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(LineEnd::EndOfInput);
            }
            let (take, complete) = match memchr_newline(available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            if self.discarding {
                self.discarded_len = self.discarded_len.saturating_add(take as u64);
            } else if self.line.len().saturating_add(take - usize::from(complete)) > MAX_LINE {
                // The limit is on the line without its newline: a line of exactly MAX_LINE
                // bytes is read.
                self.discarding = true;
                self.discarded_len = (self.line.len() + take) as u64;
                self.line
                    .extend_from_slice(&available[..take.min(HEAD_SCAN)]);
                self.line.truncate(HEAD_SCAN);
                // Only the head is kept: the buffer that held up to 16 MiB is let go.
                self.discarded_head = self.line.clone();
                self.line = Vec::new();
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.reader.consume(take);
            if complete {
                if std::mem::take(&mut self.discarding) {
                    // Without its newline.
                    let size = self.discarded_len.saturating_sub(1);
                    let head = std::mem::take(&mut self.discarded_head);
                    return Ok(LineEnd::Dropped { head, size });
                }
                return Ok(LineEnd::Line);
            }
        }
    }

    /// Answers a dropped over-long line under its `id` when its start shows one, else notes it.
    fn answer_dropped(&mut self, head: &[u8], size: u64) {
        let limit_mib = MAX_LINE / (1024 * 1024);
        match over_long_request_id(head) {
            Some(id) => {
                self.note(format_args!(
                    "answered a request of {size} bytes, over the {limit_mib} MiB limit"
                ));
                let message = format!(
                    "request too large: {size} bytes, {} bytes over the {limit_mib} MiB limit; it was not read. Send smaller content, e.g. fs_write in parts with mode \"append\"",
                    size.saturating_sub(MAX_LINE as u64)
                );
                let data = serde_json::json!({"size": size, "limit": MAX_LINE});
                self.pending_answer = Some(JsonRpcMessage::error(
                    ErrorData::invalid_request(message, Some(data)),
                    Some(id),
                ));
            }
            None => self.note(format_args!(
                "dropped a message of {size} bytes, longer than {limit_mib} MiB, with no request id at its start to answer under"
            )),
        }
    }

    /// Sends the pending answer to an invalid request once fewer than [`ANSWERS_IN_FLIGHT`] are
    /// being written. Cancel-safe: the answer stays pending until it has a place.
    async fn send_pending_answer(&mut self) {
        if self.pending_answer.is_none() {
            return;
        }
        let Ok(place) = Arc::clone(&self.answers_in_flight).acquire_owned().await else {
            return;
        };
        let Some(answer) = self.pending_answer.take() else {
            return;
        };
        let writing = self.send_message(&answer);
        tokio::spawn(async move {
            if let Err(error) = writing.await {
                eprintln!("flycode mcp: could not answer an invalid request: {error}");
            }
            drop(place);
        });
    }

    /// The message as one line, written whole under the writer's lock.
    fn send_message(
        &self,
        item: &TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static + use<R, W> {
        let writer = Arc::clone(&self.writer);
        let line = serde_json::to_vec(item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let mut writer = writer.lock().await;
            writer.write_all(&line).await?;
            writer.flush().await
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.send_message(&item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            self.send_pending_answer().await;
            match self.read_line().await {
                Ok(LineEnd::Line) => {}
                Ok(LineEnd::Dropped { head, size }) => {
                    self.answer_dropped(&head, size);
                    continue;
                }
                // The end of the input: a last line without its newline is not a message.
                Ok(LineEnd::EndOfInput) => return None,
                Err(error) => {
                    eprintln!("flycode mcp: cannot read standard input: {error}");
                    return None;
                }
            }
            let read = read_message(&self.line);
            self.line.clear();
            match read {
                LineRead::Message(message) => return Some(*message),
                LineRead::Nothing => {}
                LineRead::NotJson(error) => {
                    self.note(format_args!("ignored a line that is not JSON ({error})"));
                }
                LineRead::InvalidNotification(error) => {
                    self.note(format_args!("ignored an invalid notification ({error})"));
                }
                LineRead::InvalidResponse(error) => {
                    self.note(format_args!("ignored an invalid response ({error})"));
                }
                LineRead::InvalidRequest(id, error) => {
                    self.note(format_args!("answered an invalid request ({error})"));
                    self.pending_answer = Some(JsonRpcMessage::error(
                        ErrorData::invalid_request(format!("Invalid request: {error}"), None),
                        id,
                    ));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// How [`LineTransport::read_line`] ended.
enum LineEnd {
    /// A whole line is in `line`.
    Line,
    /// A line over [`MAX_LINE`] was skipped: its first [`HEAD_SCAN`] bytes and its length.
    Dropped { head: Vec<u8>, size: u64 },
    /// The input ended.
    EndOfInput,
}

/// The `id` of a request whose line was too long to read, from the line's first bytes: the
/// top-level members before the scan runs out are read one by one (nested values skipped, never
/// parsed), and an `id` that is a string or an integer is returned when the line is a request: a
/// `method` or `params` member was seen, and no `result` or `error` (an answer's `id` is one of
/// the server's own, never answered).
pub(crate) fn over_long_request_id(head: &[u8]) -> Option<RequestId> {
    let head = head.strip_prefix(BYTE_ORDER_MARK).unwrap_or(head);
    let mut scan = HeadScan { bytes: head, at: 0 };
    scan.expect(b'{')?;
    let (mut id, mut is_request) = (None, false);
    loop {
        let key = scan.string()?;
        scan.expect(b':')?;
        scan.skip_space();
        let start = scan.at;
        let complete = scan.skip_value().is_some();
        match key.as_str() {
            "id" if complete => {
                id = serde_json::from_slice::<RequestId>(&head[start..scan.at]).ok();
            }
            "method" | "params" => is_request = true,
            "result" | "error" => return None,
            _ => {}
        }
        if id.is_some() && is_request {
            return id;
        }
        if !complete || scan.expect(b',').is_none() {
            return None;
        }
    }
}

/// A cursor over the start of a JSON text, for [`over_long_request_id`].
struct HeadScan<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl HeadScan<'_> {
    fn skip_space(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string (its JSON text decoded), the cursor after it.
    fn string(&mut self) -> Option<String> {
        self.skip_space();
        let start = self.at;
        self.skip_string()?;
        serde_json::from_slice(&self.bytes[start..self.at]).ok()
    }

    fn skip_string(&mut self) -> Option<()> {
        (self.bytes.get(self.at) == Some(&b'"')).then_some(())?;
        self.at += 1;
        loop {
            match self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    /// Skips one value, nested ones by counting brackets outside strings; `None` when the scan
    /// ends inside it.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => self.skip_string()?,
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' if depth > 0 => {
                    depth -= 1;
                    self.at += 1;
                }
                b',' | b'}' | b']' if depth == 0 => return Some(()),
                _ => self.at += 1,
            }
            if depth == 0 && self.at > 0 && matches!(self.bytes[self.at - 1], b'"' | b'}' | b']') {
                return Some(());
            }
        }
    }
}

/// What one line holds.
#[derive(Debug)]
pub(crate) enum LineRead {
    /// A message for the server.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// An empty line.
    Nothing,
    /// Not JSON: ignored.
    NotJson(serde_json::Error),
    /// JSON with a `method` and no `id`, but not a notification the server reads: ignored
    /// (JSON-RPC forbids answering a notification).
    InvalidNotification(serde_json::Error),
    /// JSON shaped like an answer (`result` or `error`, or no `method`), but not one the server
    /// reads: ignored (its `id` is one of the server's own requests, not the client's).
    InvalidResponse(serde_json::Error),
    /// Any other JSON that is not a request the server reads: answered under its `id` where it
    /// has a usable one, else under `null`.
    InvalidRequest(Option<RequestId>, serde_json::Error),
}

/// Reads one line (with or without its newline).
pub(crate) fn read_message(line: &[u8]) -> LineRead {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(BYTE_ORDER_MARK).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return LineRead::Nothing;
    }
    if let Ok(call) = serde_json::from_slice::<PlainToolCall>(line) {
        return LineRead::Message(Box::new(call.into_message()));
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => LineRead::Message(Box::new(message)),
        Err(error) if error.is_syntax() || error.is_eof() => LineRead::NotJson(error),
        Err(error) => {
            let Ok(Value::Object(members)) = serde_json::from_slice::<Value>(line) else {
                return LineRead::InvalidRequest(None, error);
            };
            let answer_shaped = members.contains_key("result") || members.contains_key("error");
            match (members.get("method"), members.get("id")) {
                (None, _) => LineRead::InvalidResponse(error),
                (Some(_), _) if answer_shaped => LineRead::InvalidResponse(error),
                (Some(_), None) => LineRead::InvalidNotification(error),
                (Some(_), Some(id)) => {
                    let id = serde_json::from_value::<RequestId>(id.clone()).ok();
                    LineRead::InvalidRequest(id, error)
                }
            }
        }
    }
}

/// A `tools/call` request in its plain form: `name`, `arguments` and `_meta`. Anything more
/// (`inputResponses`, `requestState`, another member) makes it fail, and the line is read by rmcp
/// instead.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainToolCall {
    #[allow(dead_code)] // read to check it is "2.0"
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[allow(dead_code)] // read to check it is "tools/call"
    method: CallToolRequestMethod,
    params: PlainToolCallParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainToolCallParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    /// The request's metadata (a progress token; in the 2026-07-28 era, every request's protocol
    /// version and client), kept where rmcp keeps it: in the request's extensions.
    #[serde(rename = "_meta", default)]
    meta: Option<JsonObject>,
}

impl PlainToolCall {
    fn into_message(self) -> RxJsonRpcMessage<RoleServer> {
        let mut params = CallToolRequestParams::new(self.params.name);
        if let Some(arguments) = self.params.arguments {
            params = params.with_arguments(arguments);
        }
        let mut request = Request::new(params);
        if let Some(meta) = self.params.meta {
            request.extensions.insert(RequestMetaObject::from(meta));
        }
        JsonRpcMessage::Request(JsonRpcRequest::new(
            self.id,
            ClientRequest::CallToolRequest(request),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn through_rmcp(line: &str) -> Value {
        let message: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).unwrap();
        serde_json::to_value(message).unwrap()
    }

    fn through_here(line: &str) -> Value {
        match read_message(line.as_bytes()) {
            LineRead::Message(message) => serde_json::to_value(*message).unwrap(),
            other => panic!("not a message: {other:?}"),
        }
    }

    /// Whether both paths read `line` as a `tools/call` request (not a custom request).
    fn both_read_a_tool_call(line: &str) -> bool {
        let is_tool_call = |message: &RxJsonRpcMessage<RoleServer>| {
            matches!(
                message,
                JsonRpcMessage::Request(JsonRpcRequest {
                    request: ClientRequest::CallToolRequest(_),
                    ..
                })
            )
        };
        let here = match read_message(line.as_bytes()) {
            LineRead::Message(message) => is_tool_call(&message),
            _ => false,
        };
        here && is_tool_call(&serde_json::from_str(line).unwrap())
    }

    fn is_plain(line: &str) -> bool {
        serde_json::from_str::<PlainToolCall>(line).is_ok()
    }

    #[test]
    fn a_plain_tool_call_is_read_as_rmcp_reads_it() {
        let line = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "fs_write", "arguments": {"path": "/w/a", "content": "x\ny\u{e9}\"\\"}}
        })
        .to_string();
        assert!(is_plain(&line));
        assert!(both_read_a_tool_call(&line));
        assert_eq!(through_here(&line), through_rmcp(&line));
        let without_arguments =
            r#"{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"fs_ls"}}"#;
        assert!(is_plain(without_arguments));
        assert_eq!(
            through_here(without_arguments),
            through_rmcp(without_arguments)
        );
    }

    #[test]
    fn a_call_with_retry_state_and_every_other_message_is_read_by_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs_write","arguments":{},"requestState":"abc"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#,
        ] {
            assert!(!is_plain(line), "{line}");
            assert_eq!(through_here(line), through_rmcp(line), "{line}");
        }
    }

    #[test]
    fn a_calls_metadata_lands_where_rmcp_puts_it() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"process_run","arguments":{"program":"sleep"},"_meta":{"progressToken":3,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(is_plain(line));
        assert!(both_read_a_tool_call(line));
        assert_eq!(through_here(line), through_rmcp(line));
        let meta = |message: RxJsonRpcMessage<RoleServer>| match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(request),
                ..
            }) => request.extensions.get::<RequestMetaObject>().cloned(),
            _ => None,
        };
        let here = match read_message(line.as_bytes()) {
            LineRead::Message(message) => meta(*message),
            _ => None,
        };
        let rmcp = meta(serde_json::from_str(line).unwrap());
        assert!(here.is_some());
        assert_eq!(here, rmcp);
        assert_eq!(
            here.unwrap().get_progress_token(),
            Some(rmcp::model::ProgressToken(
                rmcp::model::NumberOrString::Number(3)
            ))
        );
        let null_meta = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs_ls","_meta":null}}"#;
        assert!(is_plain(null_meta));
        assert_eq!(through_here(null_meta), through_rmcp(null_meta));
    }

    #[test]
    fn lines_that_are_not_requests_are_ignored_or_answered_under_their_id() {
        assert!(matches!(read_message(b"\n"), LineRead::Nothing));
        assert!(matches!(read_message(b"{not json\n"), LineRead::NotJson(_)));
        assert!(matches!(
            read_message(br#"{"jsonrpc":"2.0","id":9,"method":5}"#),
            LineRead::InvalidRequest(Some(RequestId::Number(9)), _)
        ));
        assert!(matches!(
            read_message(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":5}"#),
            LineRead::InvalidNotification(_)
        ));
        // An answer's id is one of the server's own requests: never answered under it.
        for answer in [
            br#"{"jsonrpc":"2.0","id":5,"result":{},"error":{}}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":5}"#,
            br#"{"jsonrpc":"2.0","id":5,"method":"ping","result":{}}"#,
        ] {
            assert!(
                matches!(read_message(answer), LineRead::InvalidResponse(_)),
                "{}",
                String::from_utf8_lossy(answer)
            );
        }
        assert!(matches!(
            read_message(br#"{"jsonrpc":"2.0","id":null,"method":5}"#),
            LineRead::InvalidRequest(None, _)
        ));
        assert!(matches!(
            read_message(br#"[1, 2]"#),
            LineRead::InvalidRequest(None, _)
        ));
        let marked = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r\n";
        assert!(matches!(
            read_message(marked.as_bytes()),
            LineRead::Message(_)
        ));
    }

    #[tokio::test]
    async fn lines_are_framed_across_reads_and_an_over_long_line_is_dropped() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(server);
        let mut transport = LineTransport::new(reader, writer);
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"fs_write\",\"arguments\":{{\"content\":\"{}\"}}}}}}\n",
            "x".repeat(MAX_LINE)
        );
        let long_size = long.len() - 1;
        let sending = tokio::spawn(async move {
            client.write_all(long.as_bytes()).await.unwrap();
            client
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
                .await
                .unwrap();
            client
        });
        let message = transport.receive().await.unwrap();
        let value = serde_json::to_value(message).unwrap();
        assert_eq!(
            value["id"], 2,
            "the over-long call is dropped, the ping read"
        );
        assert!(
            transport.line.capacity() <= 64 * 1024,
            "nothing of it was kept"
        );
        let mut client = sending.await.unwrap();
        let mut answer = vec![0; 1024];
        let read = tokio::io::AsyncReadExt::read(&mut client, &mut answer)
            .await
            .unwrap();
        let answer: Value = serde_json::from_slice(&answer[..read]).unwrap();
        assert_eq!(answer["id"], 1, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert_eq!(answer["error"]["data"]["size"], long_size);
        drop(client);
        assert!(transport.receive().await.is_none());
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_read() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(server);
        let mut transport = LineTransport::new(reader, writer);
        let head = r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"pad":""#;
        let tail = "\"}}}";
        let pad = "x".repeat(MAX_LINE - head.len() - tail.len());
        let line = format!("{head}{pad}{tail}\n");
        assert_eq!(line.len(), MAX_LINE + 1);
        let sending = tokio::spawn(async move {
            client.write_all(line.as_bytes()).await.unwrap();
            client
        });
        let message = transport.receive().await.unwrap();
        let value = serde_json::to_value(message).unwrap();
        assert_eq!(value["id"], 3, "the line at the limit is read, not dropped");
        drop(sending.await.unwrap());
    }

    #[test]
    fn the_id_of_an_over_long_request_is_read_from_its_start_only_when_it_is_a_request() {
        let id = |head: &str| over_long_request_id(head.as_bytes());
        let cut = |line: &str, at: usize| over_long_request_id(&line.as_bytes()[..at]);
        assert_eq!(
            id(
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_write","arguments":{"content":"xxx"#
            ),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            id(
                r#" { "method" : "tools/call" , "meta": {"a": ["}", "\"{"]}, "id" : "s-\"1" , "params": {"#
            ),
            Some(RequestId::String("s-\"1".into()))
        );
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","params":{"a":1},"id":3,"x"#),
            Some(RequestId::Number(3))
        );
        // No id before the scan ends, an answer, a notification, an id cut off: nothing to answer.
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"content":"xx"#),
            None
        );
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":4,"result":{"content":"xx"#),
            None
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":4,"error":{"#), None);
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"#),
            None
        );
        assert_eq!(cut(r#"{"method":"m","id":12345,"params":{}}"#, 21), None);
        assert_eq!(id(r#"{"id":null,"method":"m","params":{"#), None);
        assert_eq!(id("[1,2,3"), None);
        assert_eq!(id(""), None);
    }

    #[tokio::test]
    async fn a_client_that_never_reads_its_answers_holds_up_reading_instead_of_piling_them_up() {
        let (client, server) = tokio::io::duplex(256);
        let (mut client_output, mut client_input) = tokio::io::split(client);
        let (reader, writer) = tokio::io::split(server);
        let mut transport = LineTransport::new(reader, writer);
        tokio::spawn(async move {
            for id in 0..40 {
                let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":5}}\n");
                client_input.write_all(line.as_bytes()).await.unwrap();
            }
            client_input
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}\n")
                .await
                .unwrap();
            client_input
        });
        let blocked =
            tokio::time::timeout(std::time::Duration::from_millis(300), transport.receive()).await;
        assert!(
            blocked.is_err(),
            "the ping cannot be reached while answers wait"
        );
        assert_eq!(transport.answers_in_flight.available_permits(), 0);
        // Once the client reads, every answer is written and the ping is read.
        let reading = tokio::spawn(async move {
            let mut answers = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut client_output, &mut answers)
                .await
                .unwrap();
            answers
        });
        let message = transport.receive().await.unwrap();
        assert_eq!(serde_json::to_value(message).unwrap()["id"], "last");
        drop(transport);
        let answers = String::from_utf8(reading.await.unwrap()).unwrap();
        assert_eq!(answers.lines().count(), 40, "{answers}");
        assert!(answers.lines().all(|line| line.contains("-32600")));
    }

    proptest! {
        #[test]
        fn any_plain_tool_call_reads_as_rmcp_reads_it(
            id in prop_oneof![any::<i64>().prop_map(Value::from), "[a-z0-9-]{1,12}".prop_map(Value::from)],
            name in "[a-z_]{1,20}",
            text in any::<String>(),
            number in any::<i32>(),
            flag in any::<bool>(),
        ) {
            let line = json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": {"path": text, "n": number, "f": flag, "list": [text, null]}}
            })
            .to_string();
            prop_assert!(is_plain(&line));
            prop_assert!(both_read_a_tool_call(&line));
            prop_assert_eq!(through_here(&line), through_rmcp(&line));
        }
    }
}
