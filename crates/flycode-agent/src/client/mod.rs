//! The model client: one [`Provider`] call sends a conversation and returns the whole reply,
//! streaming text to a callback as it arrives. It owns HTTP, SSE, retries, timeouts and
//! cancellation; it must not judge or run the calls it returns (that is the loop's job).
//!
//! - [`openai`]: [`OpenAiProvider`], the HTTP exchange (retries, timeouts, cancellation) and
//!   the OpenAI Chat Completions wire; the same exchange carries the Anthropic wire;
//! - [`anthropic`]: the Anthropic Messages wire (request body, whole and streamed answers);
//! - [`wire`]: which wire a provider speaks, and its answers assembled either way;
//! - [`sse`]: the incremental Server-Sent Events decoder;
//! - [`retry`]: which failures are retried, and how long to wait;
//! - [`reply`]: response bodies and stream chunks assembled into a [`Completion`].
//!
//! Every wait (back-off, `Retry-After`, timeouts) is measured by the clock of the tokio runtime
//! the provider runs on, which [`OpenAiProvider::with_runtime`] lets a test supply with its clock
//! paused.

pub mod anthropic;
pub mod error;
pub mod openai;
pub mod repetition;
pub mod reply;
pub mod retry;
pub mod sse;
pub mod wire;

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Deserialize;

use crate::message::{Message, NativeToolCall};

pub use error::ClientError;
pub use openai::OpenAiProvider;

/// What the HTTP body may carry around a reply of `max_reply_bytes` (JSON escapes such as
/// `\u4e2d` for one CJK character, a stream's chunk envelopes around each few characters):
/// four times the reply, plus 64 KiB. A body past it is abandoned unread, so a runaway or hostile
/// server cannot exhaust memory (PROTOCOL.md §1 (Reading a reply: reply size limit)).
pub fn framing_allowance(max_reply_bytes: usize) -> usize {
    max_reply_bytes.saturating_mul(4).saturating_add(64 * 1024)
}

/// A model API: an OpenAI-compatible server or the Anthropic Messages API behind the same calls
/// ([`connect`] picks by [`ProviderKind`]); the loop never knows which it talks to.
///
/// Synchronous for the caller: an implementation runs its own async machinery inside.
pub trait Provider: Send {
    /// One completion: sends `request`, reports progress to `on_event` (text as it arrives,
    /// retries as they are scheduled), and returns the whole reply.
    ///
    /// The request is abandoned with [`ClientError::Cancelled`] soon after `cancel` becomes true,
    /// also while waiting to retry.
    fn complete(
        &mut self,
        request: &ChatRequest<'_>,
        on_event: &mut dyn FnMut(ClientEvent),
        cancel: &AtomicBool,
    ) -> Result<Completion, ClientError>;
}

/// What to ask the model.
#[derive(Clone, Copy, Debug)]
pub struct ChatRequest<'a> {
    /// The model name, e.g. `gpt-4.1` or whatever a local server calls its model.
    pub model: &'a str,
    /// The conversation, oldest first.
    pub messages: &'a [Message],
    /// OpenAI `tools` entries (`{"type": "function", "function": {...}}`); empty omits the field.
    pub tools: &'a [serde_json::Value],
    /// Whether to stream the reply (Server-Sent Events) rather than receive it whole.
    pub stream: bool,
    /// The most tokens the reply may have (`[agent] max_reply_tokens`), sent as the field the
    /// API expects (`max_tokens` for Chat Completions).
    pub max_tokens: u32,
}

/// Progress reported while a completion runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    /// More reply text, to print as it comes: pieces when streaming, the whole text otherwise.
    TextDelta(String),
    /// An attempt failed in a way worth another try, which starts after `delay`.
    Retrying {
        /// The retry about to happen: 1 for the first retry.
        attempt: u32,
        /// The wait before it.
        delay: Duration,
        /// Why the previous attempt failed, in words.
        reason: String,
    },
    /// Still no answer to the request: the model is reading the prompt. Reported every few
    /// seconds until the first event arrives.
    Waiting {
        /// Since the request was sent.
        elapsed: Duration,
    },
}

/// A reply cut by flycode, not by the model (PROTOCOL.md §13 (The API loop: bounded replies)),
/// as the [`Completion::finish_reason`] of the partial reply: the reply repeated itself.
pub const CUT_REPETITION: &str = "flycode:repetition";
/// A reply cut by flycode: the request took longer than `[agent] turn_timeout_ms`.
pub const CUT_TIME_LIMIT: &str = "flycode:time_limit";

/// The model's whole reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The reply text (empty when the model only called tools).
    pub content: String,
    /// The native tool calls, in the order the model made them.
    pub tool_calls: Vec<NativeToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, ...), when the server said.
    pub finish_reason: Option<String>,
    /// Token counts, when the server sent them.
    pub usage: Option<Usage>,
}

impl Completion {
    /// The bytes of the reply the loop will parse: its text and its tool calls (ids, names,
    /// arguments), compared with `max_reply_bytes`.
    pub fn reply_bytes(&self) -> usize {
        reply_bytes(&self.content, &self.tool_calls)
    }
}

/// The bytes of a reply's text and tool calls.
fn reply_bytes<'a>(content: &str, calls: impl IntoIterator<Item = &'a NativeToolCall>) -> usize {
    calls.into_iter().fold(content.len(), |total, call| {
        total
            .saturating_add(call.id.len())
            .saturating_add(call.function.name.len())
            .saturating_add(call.function.arguments.len())
    })
}

/// Token counts of one completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens in the reply.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Both.
    #[serde(default)]
    pub total_tokens: u64,
    /// Of `prompt_tokens`, those read from the server's prompt cache (Anthropic's
    /// `cache_read_input_tokens`); 0 when the server does not say.
    #[serde(default)]
    pub cache_read_tokens: u64,
}

/// An API key. Never printed: its `Debug` shows `ApiKey(***)` and it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the `Authorization` header and for scrubbing it out of server text.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// Which API a server speaks (PROTOCOL.md §13 (The API loop: providers)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (`POST {base_url}/chat/completions`), and every server that
    /// copies it (vLLM, llama.cpp, Ollama, LM Studio, ...).
    #[default]
    OpenAi,
    /// The Anthropic Messages API (`POST {base_url}/v1/messages`).
    Anthropic,
}

impl ProviderKind {
    /// The setting's spelling: `openai` or `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The provider spelled `name` (`openai`, `anthropic`), if any.
    pub fn from_name(name: &str) -> Option<ProviderKind> {
        match name.trim().to_ascii_lowercase().as_str() {
            "openai" => Some(ProviderKind::OpenAi),
            "anthropic" => Some(ProviderKind::Anthropic),
            _ => None,
        }
    }
}

/// The client of `settings.provider`: one [`Provider`] whatever the API.
pub fn connect(settings: &ClientSettings) -> Result<Box<dyn Provider>, ClientError> {
    // One HTTP exchange serves both wires: `settings.provider` picks the endpoint, headers, body
    // and answer format ([`wire`]).
    Ok(Box::new(OpenAiProvider::new(settings.clone())?))
}

/// Where and how to reach the server.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Which API the server speaks.
    pub provider: ProviderKind,
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer KEY` when set; local servers usually need none.
    pub api_key: Option<ApiKey>,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// The longest silence allowed between the events of a response.
    pub read_timeout: Duration,
    /// The longest wait for a response's first event (a local model reads the whole prompt
    /// before it sends anything).
    pub first_byte_timeout: Duration,
    /// The longest one completion may take, retries included; past it a streamed reply is cut
    /// ([`CUT_TIME_LIMIT`]).
    pub turn_timeout: Option<Duration>,
    /// How many times a failed attempt is retried (so at most `max_retries + 1` requests).
    pub max_retries: u32,
    /// The back-off before the first retry (doubling, capped at [`retry::BACKOFF_CAP`]).
    pub retry_base: Duration,
    /// The largest reply accepted (`max_reply_bytes`, PROTOCOL.md §1 (Reading a reply: reply size limit)): text and tool calls
    /// together; the body around them may take [`framing_allowance`]. Past either, the answer is
    /// abandoned as [`ClientError::TooLarge`], never retried.
    pub max_reply_bytes: usize,
}

impl ClientSettings {
    /// Default connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default read timeout.
    pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);
    /// Default retry budget.
    pub const DEFAULT_MAX_RETRIES: u32 = 4;
    /// Default first back-off.
    pub const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);

    /// Settings for `base_url` with no key and the default timeouts and retries.
    pub fn new(base_url: impl Into<String>) -> ClientSettings {
        ClientSettings {
            provider: ProviderKind::OpenAi,
            base_url: base_url.into(),
            api_key: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
            first_byte_timeout: Self::DEFAULT_READ_TIMEOUT,
            turn_timeout: None,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            retry_base: Self::DEFAULT_RETRY_BASE,
            max_reply_bytes: crate::config::reply_limit::DEFAULT_MAX_REPLY_BYTES,
        }
    }
}

/// `{base_url}/v1/messages` (or `{base_url}/messages` when the base already ends in `/v1`), with
/// exactly one slash between the parts: `ANTHROPIC_BASE_URL` is usually the bare host.
pub fn messages_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

/// `{base_url}/chat/completions`, with exactly one slash between them.
pub fn chat_completions_url(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_the_endpoint_without_doubling_slashes() {
        for base in ["http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"] {
            assert_eq!(
                chat_completions_url(base),
                "http://127.0.0.1:8080/v1/chat/completions"
            );
        }
    }

    #[test]
    fn the_provider_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<OpenAiProvider>();
        assert_send::<Box<dyn Provider>>();
    }

    #[test]
    fn the_reply_counts_text_and_tool_calls_and_the_body_may_carry_four_times_it() {
        let completion = Completion {
            content: "abc".into(),
            tool_calls: vec![NativeToolCall::function("c1", "fs_read", "{}")],
            ..Completion::default()
        };
        assert_eq!(completion.reply_bytes(), 3 + 2 + 7 + 2);
        assert_eq!(framing_allowance(1024), 4096 + 65536);
        assert_eq!(framing_allowance(usize::MAX), usize::MAX);
    }

    #[test]
    fn api_key_debug_hides_the_key() {
        let key = ApiKey::new("sk-secret");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        let mut settings = ClientSettings::new("http://x/v1");
        settings.api_key = Some(key.clone());
        assert!(!format!("{settings:?}").contains("sk-secret"));
        assert_eq!(key.redact("bad key sk-secret!"), "bad key ***!");
    }
}
