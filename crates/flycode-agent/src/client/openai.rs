//! [`OpenAiProvider`]: OpenAI Chat Completions (`POST {base_url}/chat/completions`) over HTTP
//! with reqwest and rustls, streamed or whole, with retries, timeouts and cancellation. It owns a
//! tokio current-thread runtime so that its callers stay synchronous. The same exchange carries
//! the Anthropic Messages wire when `settings.provider` says so ([`super::wire`] holds what
//! differs: endpoint, headers, body, answers).
//!
//! Time: the runtime's timer is the client's only clock. Every wait (the back-off before a retry,
//! a `Retry-After`, the connect and read timeouts, the poll of the cancel flag) is a
//! `tokio::time` sleep, timeout or instant, never `std::thread::sleep` or `std::time::Instant`.
//! [`OpenAiProvider::with_runtime`] takes the runtime from the caller, so a test can build one
//! whose clock starts paused (`Builder::start_paused`): then every wait passes in virtual time,
//! the clock jumping to the next timer whenever the runtime is idle. The wall clock
//! ([`SystemTime`]) is read only to turn a `Retry-After` date into a wait.
//!
//! Retry rule: an attempt is retried (429, 408, 5xx, connect failures, timeouts, broken
//! connections) only until a successful status arrives; once a stream has started, text may
//! already be on the screen, so any failure after that ends the completion. One exception: an
//! Anthropic `error` event saying the server is busy (`overloaded_error`, `rate_limit_error`,
//! `api_error`) before any text or tool call has been passed on is retried like a 529.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header;
use serde::Serialize;
use serde_json::Value;

use super::error::{error_chain, short_reason};
use super::repetition::RepetitionWatch;
use super::reply::{self, ReplyError, StreamStep};
use super::retry::{self, Jitter};
use super::sse::{SseDecoder, SseEvent};
use super::wire::{self, Assembler};
use super::{
    ChatRequest, ClientError, ClientEvent, ClientSettings, Completion, Provider, ProviderKind,
};
use crate::message::Message;

/// How often the terminal hears that the model is still reading the prompt.
const WAITING_TICK: Duration = Duration::from_secs(5);

/// How often the cancel flag is looked at.
const CANCEL_POLL: Duration = Duration::from_millis(25);

/// The most of an error body kept to find the server's message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The OpenAI Chat Completions provider.
#[derive(Debug)]
pub struct OpenAiProvider {
    settings: ClientSettings,
    url: String,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    jitter: Jitter,
}

impl OpenAiProvider {
    /// A provider for `settings` on a runtime of its own; fails on a base URL that is not
    /// `http(s)://...` or a key that cannot go in a header.
    pub fn new(settings: ClientSettings) -> Result<OpenAiProvider, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::InvalidSettings {
                detail: format!("the async runtime cannot start: {e}"),
            })?;
        OpenAiProvider::with_runtime(settings, runtime)
    }

    /// A provider for `settings` whose requests, and all their waits, run on `runtime`: a
    /// current-thread runtime with I/O and time enabled (`enable_all`). Its clock is the
    /// client's: one built with `start_paused(true)` makes back-off, `Retry-After` and timeouts
    /// pass in virtual time.
    pub fn with_runtime(
        settings: ClientSettings,
        runtime: tokio::runtime::Runtime,
    ) -> Result<OpenAiProvider, ClientError> {
        let url = wire::endpoint(&settings);
        let parsed = reqwest::Url::parse(&url).map_err(|e| ClientError::InvalidSettings {
            detail: format!(
                "the base URL {:?} is not a URL ({e}); give one like http://127.0.0.1:8080/v1",
                settings.base_url
            ),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidSettings {
                detail: format!(
                    "the base URL {:?} is not http:// or https://",
                    settings.base_url
                ),
            });
        }
        // Err means some provider is installed already, which is all reqwest needs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let headers = wire::headers(&settings)?;
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            // No read timeout of reqwest's: the exchange bounds every wait itself (the response
            // head and the first event by the first-byte timeout, then each piece by the read
            // timeout), each with its own error.
            .default_headers(headers)
            .user_agent(concat!("flycode/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::InvalidSettings {
                detail: format!("the HTTP client cannot start: {}", error_chain(&e)),
            })?;
        Ok(OpenAiProvider {
            settings,
            url,
            http,
            runtime,
            jitter: Jitter::from_clock(),
        })
    }

    /// The endpoint requests go to: `{base_url}/chat/completions`.
    pub fn endpoint(&self) -> &str {
        &self.url
    }
}

impl Provider for OpenAiProvider {
    fn complete(
        &mut self,
        request: &ChatRequest<'_>,
        on_event: &mut dyn FnMut(ClientEvent),
        cancel: &AtomicBool,
    ) -> Result<Completion, ClientError> {
        let body = match self.settings.provider {
            ProviderKind::OpenAi => serde_json::to_vec(&WireRequest::from(request)),
            ProviderKind::Anthropic => {
                serde_json::to_vec(&super::anthropic::request_body(request, request.max_tokens))
            }
        }
        .map_err(|e| ClientError::InvalidSettings {
            detail: format!("the request cannot be encoded as JSON: {e}"),
        })?;
        let exchange = Exchange {
            http: &self.http,
            settings: &self.settings,
            url: &self.url,
            body,
            stream: request.stream,
            cancel,
            started: tokio::time::Instant::now(),
        };
        let _entered = self.runtime.enter();
        let exchange = Exchange {
            started: tokio::time::Instant::now(),
            ..exchange
        };
        self.runtime
            .block_on(exchange.run(on_event, &mut self.jitter))
    }
}

/// The request body.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    tools: &'a [Value],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// The token limit of the reply: `max_tokens`, the field llama.cpp's server, Ollama, vLLM
    /// and OpenAI's non-reasoning models read (PROTOCOL.md §13 (The API loop: bounded replies)).
    max_tokens: u32,
}

/// A message as the API takes it: without flycode's own notes ([`Message::note`]), which some
/// servers would refuse as an unknown field.
#[derive(Serialize)]
struct WireMessage<'a> {
    role: crate::message::Role,
    content: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: &'a [crate::message::NativeToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> WireMessage<'a> {
        WireMessage {
            role: message.role,
            content: &message.content,
            tool_calls: &message.tool_calls,
            tool_call_id: message.tool_call_id.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> From<&ChatRequest<'a>> for WireRequest<'a> {
    fn from(request: &ChatRequest<'a>) -> WireRequest<'a> {
        WireRequest {
            model: request.model,
            messages: request.messages.iter().map(WireMessage::from).collect(),
            tools: request.tools,
            stream: request.stream,
            stream_options: request.stream.then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: request.max_tokens,
        }
    }
}

/// How an attempt failed.
enum AttemptFailure {
    /// Worth another try, after `retry_after` if the server asked.
    Retryable {
        error: ClientError,
        retry_after: Option<Duration>,
    },
    /// The end of this completion.
    Final(ClientError),
}

impl From<ClientError> for AttemptFailure {
    fn from(error: ClientError) -> AttemptFailure {
        AttemptFailure::Final(error)
    }
}

impl AttemptFailure {
    fn retry(error: ClientError) -> AttemptFailure {
        AttemptFailure::Retryable {
            error,
            retry_after: None,
        }
    }
}

/// How much of a body is read.
#[derive(Clone, Copy)]
enum BodyLimit {
    /// Keep this many bytes and stop reading (an error body: only its message matters).
    CutAt(usize),
    /// Past this many bytes the answer is too large (a completion).
    RefusePast(usize),
}

/// What stopped a guarded wait.
enum Interrupt {
    Cancelled,
    TimedOut,
}

/// One completion in flight: everything its attempts share.
struct Exchange<'a> {
    http: &'a reqwest::Client,
    settings: &'a ClientSettings,
    url: &'a str,
    body: Vec<u8>,
    stream: bool,
    cancel: &'a AtomicBool,
    /// When the completion began: the turn time limit counts from here.
    started: tokio::time::Instant,
}

impl Exchange<'_> {
    async fn run(
        &self,
        on_event: &mut dyn FnMut(ClientEvent),
        jitter: &mut Jitter,
    ) -> Result<Completion, ClientError> {
        let mut retries = 0;
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(ClientError::Cancelled);
            }
            let (error, retry_after) = match self.attempt(on_event).await {
                Ok(completion) => return Ok(completion),
                Err(AttemptFailure::Final(error)) => return Err(error),
                Err(AttemptFailure::Retryable { error, retry_after }) => (error, retry_after),
            };
            if retries >= self.settings.max_retries {
                return Err(ClientError::RetriesExhausted {
                    attempts: retries + 1,
                    last: Box::new(error),
                });
            }
            let delay = retry::backoff_delay(
                self.settings.retry_base,
                retries,
                retry_after,
                jitter.next_unit(),
            );
            retries += 1;
            on_event(ClientEvent::Retrying {
                attempt: retries,
                delay,
                reason: short_reason(&error),
            });
            if let Err(Interrupt::Cancelled) = self.guard(tokio::time::sleep(delay), None).await {
                return Err(ClientError::Cancelled);
            }
        }
    }

    /// Runs `future` until it ends, the cancel flag is set, or `limit` passes (all measured by
    /// the runtime's clock).
    async fn guard<T>(
        &self,
        future: impl Future<Output = T>,
        limit: Option<Duration>,
    ) -> Result<T, Interrupt> {
        let cancel = self.cancel;
        let watch_cancel = async move {
            while !cancel.load(Ordering::Relaxed) {
                tokio::time::sleep(CANCEL_POLL).await;
            }
        };
        let bounded = async move {
            match limit {
                Some(limit) => tokio::time::timeout(limit, future)
                    .await
                    .map_err(|_| Interrupt::TimedOut),
                None => Ok(future.await),
            }
        };
        tokio::select! {
            biased;
            () = watch_cancel => Err(Interrupt::Cancelled),
            out = bounded => out,
        }
    }

    async fn attempt(
        &self,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<Completion, AttemptFailure> {
        let accept = if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let send = self
            .http
            .post(self.url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(self.body.clone())
            .send();
        let sent = tokio::time::Instant::now();
        let patience = self.settings.connect_timeout + self.settings.first_byte_timeout;
        let response = match self.patiently(send, patience, sent, on_event).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) if error.is_builder() => {
                return Err(AttemptFailure::Final(ClientError::InvalidSettings {
                    detail: format!("the request cannot be built: {}", error_chain(&error)),
                }));
            }
            Ok(Err(error)) => return Err(AttemptFailure::retry(self.transport_error(&error))),
            Err(Interrupt::Cancelled) => return Err(AttemptFailure::Final(ClientError::Cancelled)),
            // No response head at all: retried like any timeout before the response starts. (A
            // stream whose head came but whose first event did not is not: the server is
            // still reading the prompt of this very request.)
            Err(Interrupt::TimedOut) => {
                return Err(AttemptFailure::retry(self.first_byte_timeout()));
            }
        };
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_failure(response).await);
        }
        let is_event_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if is_event_stream {
            self.read_stream(response, sent, on_event).await
        } else {
            let allowance = super::framing_allowance(self.settings.max_reply_bytes);
            let body = self
                .read_body(response, BodyLimit::RefusePast(allowance))
                .await
                .map_err(|e| match e {
                    ClientError::TooLarge { .. } => AttemptFailure::Final(e),
                    ClientError::Cancelled => AttemptFailure::Final(e),
                    other => AttemptFailure::retry(other),
                })?;
            let completion = wire::parse_whole(self.settings.provider, &body).map_err(|e| {
                AttemptFailure::Final(match e {
                    ReplyError::Server(message) | ReplyError::Transient(message) => {
                        self.server_error(&message)
                    }
                    ReplyError::NotJson(detail) => {
                        self.invalid_response(format!("not JSON: {detail}"))
                    }
                    ReplyError::WrongShape(detail) => self.invalid_response(detail),
                })
            })?;
            if completion.reply_bytes() > self.settings.max_reply_bytes {
                return Err(AttemptFailure::Final(self.too_large(false)));
            }
            if !completion.content.is_empty() {
                on_event(ClientEvent::TextDelta(completion.content.clone()));
            }
            let mut completion = completion;
            if super::repetition::find(&completion.content).is_some() {
                completion.finish_reason = Some(super::CUT_REPETITION.to_owned());
            }
            Ok(completion)
        }
    }

    /// The failure for a non-success status: retryable for 408, 429 and 5xx.
    async fn status_failure(&self, response: reqwest::Response) -> AttemptFailure {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry::parse_retry_after(v, SystemTime::now()));
        let body = match self
            .read_body(response, BodyLimit::CutAt(ERROR_BODY_LIMIT))
            .await
        {
            Ok(body) => body,
            Err(ClientError::Cancelled) => return AttemptFailure::Final(ClientError::Cancelled),
            Err(_) => Vec::new(),
        };
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|value| reply::error_message(&value))
            .unwrap_or_else(|| reply::excerpt(text.trim()));
        let message = if message.is_empty() {
            status.canonical_reason().unwrap_or("no message").to_owned()
        } else {
            reply::excerpt(&self.redact(&message))
        };
        let error = ClientError::Http {
            url: self.url.to_owned(),
            status: status.as_u16(),
            message,
        };
        if retry::is_retryable_status(status.as_u16()) {
            AttemptFailure::Retryable { error, retry_after }
        } else {
            AttemptFailure::Final(error)
        }
    }

    /// Reads a whole body, each piece within the read timeout: an error body cut where `limit`
    /// says (only its message matters), a success body refused past it, so at most that much is
    /// ever held.
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: BodyLimit,
    ) -> Result<Vec<u8>, ClientError> {
        let expected = response.content_length().unwrap_or(0);
        let bound = match limit {
            BodyLimit::CutAt(bound) => bound,
            BodyLimit::RefusePast(bound) => {
                if expected > bound as u64 {
                    return Err(self.too_large(true));
                }
                bound
            }
        };
        let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0).min(bound));
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            body.extend_from_slice(&chunk);
            if body.len() > bound {
                match limit {
                    BodyLimit::CutAt(_) => {
                        body.truncate(bound);
                        break;
                    }
                    BodyLimit::RefusePast(_) => return Err(self.too_large(true)),
                }
            }
        }
        Ok(body)
    }

    async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Option<bytes::Bytes>, ClientError> {
        match self
            .guard(response.chunk(), Some(self.settings.read_timeout))
            .await
        {
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(error)) => Err(self.transport_error(&error)),
            Err(Interrupt::Cancelled) => Err(ClientError::Cancelled),
            Err(Interrupt::TimedOut) => Err(self.read_timeout()),
        }
    }

    /// Runs `future` (the request, or the wait for a response's first event) for at most
    /// `limit` since `sent`, telling `on_event` every few seconds that the model is still
    /// reading the prompt.
    async fn patiently<T>(
        &self,
        future: impl Future<Output = T>,
        limit: Duration,
        sent: tokio::time::Instant,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<T, Interrupt> {
        let mut future = std::pin::pin!(future);
        loop {
            let left = limit.saturating_sub(sent.elapsed());
            if left.is_zero() {
                return Err(Interrupt::TimedOut);
            }
            match self
                .guard(future.as_mut(), Some(left.min(WAITING_TICK)))
                .await
            {
                Err(Interrupt::TimedOut) if sent.elapsed() < limit => {
                    on_event(ClientEvent::Waiting {
                        elapsed: sent.elapsed(),
                    });
                }
                other => return other,
            }
        }
    }

    /// The next piece of a stream: before its first event within the first-byte timeout (the
    /// model reads the prompt), after it within the read timeout.
    async fn next_stream_chunk(
        &self,
        response: &mut reqwest::Response,
        first: Option<tokio::time::Instant>,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<Option<bytes::Bytes>, ClientError> {
        let Some(sent) = first else {
            return self.next_chunk(response).await;
        };
        match self
            .patiently(
                response.chunk(),
                self.settings.first_byte_timeout,
                sent,
                on_event,
            )
            .await
        {
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(error)) => Err(self.transport_error(&error)),
            Err(Interrupt::Cancelled) => Err(ClientError::Cancelled),
            Err(Interrupt::TimedOut) => Err(self.first_byte_timeout()),
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        sent: tokio::time::Instant,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<Completion, AttemptFailure> {
        let mut decoder = SseDecoder::new();
        let mut assembler = Assembler::new(self.settings.provider);
        let mut watch = RepetitionWatch::new();
        let mut received = 0usize;
        let allowance = super::framing_allowance(self.settings.max_reply_bytes);
        // Only events count as life: a server sending nothing but keep-alive comments is silent.
        let mut last_event: Option<tokio::time::Instant> = None;
        loop {
            let first = last_event.is_none().then_some(sent);
            let Some(chunk) = self
                .next_stream_chunk(&mut response, first, on_event)
                .await?
            else {
                break;
            };
            received = received.saturating_add(chunk.len());
            if received > allowance {
                return Err(self.too_large(true).into());
            }
            let events = decoder.feed(&chunk);
            match last_event {
                _ if !events.is_empty() => last_event = Some(tokio::time::Instant::now()),
                Some(at) if at.elapsed() > self.settings.read_timeout => {
                    return Err(self.read_timeout().into());
                }
                None if sent.elapsed() > self.settings.first_byte_timeout => {
                    return Err(self.first_byte_timeout().into());
                }
                _ => {}
            }
            for event in events {
                if self.take_event(&event, &mut assembler, on_event)? == StreamStep::Done {
                    return Ok(assembler.finish());
                }
                if assembler.reply_bytes() > self.settings.max_reply_bytes {
                    return Err(self.too_large(false).into());
                }
            }
            if let Some(reason) = self.cut_reason(&assembler, &mut watch) {
                let mut completion = assembler.finish();
                completion.finish_reason = Some(reason.to_owned());
                return Ok(completion);
            }
        }
        if let Some(event) = decoder.finish()
            && self.take_event(&event, &mut assembler, on_event)? == StreamStep::Done
        {
            return Ok(assembler.finish());
        }
        if assembler.has_finish_reason() {
            Ok(assembler.finish())
        } else {
            Err(AttemptFailure::Final(ClientError::Truncated {
                url: self.url.to_owned(),
            }))
        }
    }

    /// Why a stream is cut here, if it is: its text repeats itself, or the completion has taken
    /// longer than the turn time limit.
    fn cut_reason(
        &self,
        assembler: &Assembler,
        watch: &mut RepetitionWatch,
    ) -> Option<&'static str> {
        if watch.look(assembler.content()).is_some() {
            return Some(super::CUT_REPETITION);
        }
        self.settings
            .turn_timeout
            .is_some_and(|limit| self.started.elapsed() > limit)
            .then_some(super::CUT_TIME_LIMIT)
    }

    fn take_event(
        &self,
        event: &SseEvent,
        assembler: &mut Assembler,
        on_event: &mut dyn FnMut(ClientEvent),
    ) -> Result<StreamStep, AttemptFailure> {
        let failure = match assembler.push(&event.data) {
            Ok(StreamStep::Text(text)) => {
                if !text.is_empty() {
                    on_event(ClientEvent::TextDelta(text));
                }
                return Ok(StreamStep::Text(String::new()));
            }
            Ok(StreamStep::Done) => return Ok(StreamStep::Done),
            // A busy server before anything was passed on: retried like a 529; after, the
            // reply is broken off (PROTOCOL.md §13 (Anthropic Messages API)).
            Err(ReplyError::Transient(message)) if assembler.reply_bytes() == 0 => {
                return Err(AttemptFailure::retry(self.server_error(&message)));
            }
            Err(ReplyError::Transient(message)) => ClientError::BrokenOff {
                url: self.url.to_owned(),
                message: reply::excerpt(&self.redact(&message)),
            },
            Err(ReplyError::Server(message)) => self.server_error(&message),
            Err(ReplyError::NotJson(detail)) => self.malformed(format!("not JSON: {detail}")),
            Err(ReplyError::WrongShape(detail)) => self.malformed(format!(
                "JSON that is not a chat completion chunk: {detail}"
            )),
        };
        Err(AttemptFailure::Final(failure))
    }

    fn transport_error(&self, error: &reqwest::Error) -> ClientError {
        let url = self.url.to_owned();
        if error.is_connect() && error.is_timeout() {
            ClientError::Timeout {
                url,
                after: self.settings.connect_timeout,
                connecting: true,
            }
        } else if error.is_connect() {
            ClientError::Connect {
                url,
                reason: self.redact(&error_chain(error)),
            }
        } else if error.is_timeout() {
            self.read_timeout()
        } else {
            ClientError::Network {
                url,
                reason: self.redact(&error_chain(error)),
            }
        }
    }

    fn too_large(&self, framing: bool) -> ClientError {
        ClientError::TooLarge {
            url: self.url.to_owned(),
            limit: self.settings.max_reply_bytes,
            framing,
        }
    }

    fn read_timeout(&self) -> ClientError {
        ClientError::Timeout {
            url: self.url.to_owned(),
            after: self.settings.read_timeout,
            connecting: false,
        }
    }

    fn first_byte_timeout(&self) -> ClientError {
        ClientError::FirstByteTimeout {
            url: self.url.to_owned(),
            after: self.settings.first_byte_timeout,
        }
    }

    fn server_error(&self, message: &str) -> ClientError {
        ClientError::ServerError {
            url: self.url.to_owned(),
            message: reply::excerpt(&self.redact(message)),
        }
    }

    fn malformed(&self, detail: String) -> ClientError {
        ClientError::MalformedStream {
            url: self.url.to_owned(),
            detail: self.redact(&detail),
        }
    }

    fn invalid_response(&self, detail: String) -> ClientError {
        ClientError::InvalidResponse {
            url: self.url.to_owned(),
            detail: self.redact(&detail),
        }
    }

    fn redact(&self, text: &str) -> String {
        match &self.settings.api_key {
            Some(key) => key.redact(text),
            None => text.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    /// A provider on a runtime whose clock starts paused (no server: its waits are tested alone).
    fn paused_provider() -> OpenAiProvider {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        OpenAiProvider::with_runtime(ClientSettings::new("http://127.0.0.1:9/v1"), runtime).unwrap()
    }

    fn exchange<'a>(provider: &'a OpenAiProvider, cancel: &'a AtomicBool) -> Exchange<'a> {
        Exchange {
            http: &provider.http,
            settings: &provider.settings,
            url: &provider.url,
            body: Vec::new(),
            stream: false,
            cancel,
            started: tokio::time::Instant::now(),
        }
    }

    const LONG: Duration = Duration::from_secs(100);

    #[test]
    fn a_wait_passes_in_the_runtimes_virtual_time() {
        let provider = paused_provider();
        let cancel = AtomicBool::new(false);
        let exchange = exchange(&provider, &cancel);
        let (finished, waited) = provider.runtime.block_on(async {
            let started = tokio::time::Instant::now();
            let outcome = exchange.guard(tokio::time::sleep(LONG), None).await;
            (outcome.is_ok(), started.elapsed())
        });
        assert!(finished);
        // The cancel poll ticks along: the wait ends at the first tick at or after its end.
        assert!(waited >= LONG && waited <= LONG + CANCEL_POLL, "{waited:?}");
    }

    #[test]
    fn the_cancel_flag_cuts_a_wait_short() {
        let provider = paused_provider();
        let cancel = Arc::new(AtomicBool::new(false));
        let exchange = exchange(&provider, &cancel);
        let set_after = Duration::from_secs(10);
        let (cancelled, waited) = provider.runtime.block_on(async {
            let setter = Arc::clone(&cancel);
            tokio::spawn(async move {
                tokio::time::sleep(set_after).await;
                setter.store(true, Ordering::Relaxed);
            });
            let started = tokio::time::Instant::now();
            let outcome = exchange.guard(tokio::time::sleep(LONG), None).await;
            (
                matches!(outcome, Err(Interrupt::Cancelled)),
                started.elapsed(),
            )
        });
        assert!(cancelled);
        assert!(waited >= set_after && waited < LONG, "{waited:?}");
    }

    #[test]
    fn a_limit_ends_a_silent_wait_as_timed_out() {
        let provider = paused_provider();
        let cancel = AtomicBool::new(false);
        let exchange = exchange(&provider, &cancel);
        let limit = Duration::from_secs(30);
        let (timed_out, waited) = provider.runtime.block_on(async {
            let started = tokio::time::Instant::now();
            let outcome = exchange
                .guard(std::future::pending::<()>(), Some(limit))
                .await;
            (
                matches!(outcome, Err(Interrupt::TimedOut)),
                started.elapsed(),
            )
        });
        assert!(timed_out);
        assert!(
            waited >= limit && waited <= limit + CANCEL_POLL,
            "{waited:?}"
        );
    }

    fn event(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_owned(),
            id: None,
        }
    }

    #[test]
    fn a_busy_error_event_is_retried_only_before_anything_was_passed_on() {
        let provider = paused_provider();
        let cancel = AtomicBool::new(false);
        let exchange = exchange(&provider, &cancel);
        let busy =
            event(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        let mut shown = Vec::new();
        let mut on_event = |e: ClientEvent| shown.push(format!("{e:?}"));
        let mut assembler = Assembler::new(ProviderKind::Anthropic);
        let early = exchange.take_event(&busy, &mut assembler, &mut on_event);
        assert!(
            matches!(early, Err(AttemptFailure::Retryable { .. })),
            "nothing shown yet: retried"
        );
        let mut assembler = Assembler::new(ProviderKind::Anthropic);
        for data in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
        ] {
            assert!(
                exchange
                    .take_event(&event(data), &mut assembler, &mut on_event)
                    .is_ok()
            );
        }
        let late = exchange.take_event(&busy, &mut assembler, &mut on_event);
        let Err(AttemptFailure::Final(error)) = late else {
            panic!("text was shown: not retried");
        };
        assert!(matches!(error, ClientError::BrokenOff { .. }), "{error}");
        assert!(
            error.to_string().contains("flycode run --resume"),
            "{error}"
        );
        let refused =
            event(r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#);
        let mut assembler = Assembler::new(ProviderKind::Anthropic);
        assert!(matches!(
            exchange.take_event(&refused, &mut assembler, &mut on_event),
            Err(AttemptFailure::Final(ClientError::ServerError { .. }))
        ));
    }

    #[test]
    fn builds_an_https_client_with_rustls_and_ring() {
        let provider = OpenAiProvider::new(ClientSettings::new("https://api.openai.com/v1/"));
        assert_eq!(
            provider.unwrap().endpoint(),
            "https://api.openai.com/v1/chat/completions"
        );
    }

    #[test]
    fn streaming_requests_ask_for_usage_and_empty_tools_are_omitted() {
        let messages = [Message::user("hi")];
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            stream: true,
            max_tokens: 100,
        };
        assert_eq!(
            serde_json::to_value(WireRequest::from(&request)).unwrap(),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true,
                "stream_options": {"include_usage": true}, "max_tokens": 100})
        );
    }
}
