//! Which wire a provider speaks, and its answers assembled the same way whichever it is: the
//! HTTP exchange ([`super::openai`]) asks this module for the endpoint, the headers, and a
//! [`Completion`] from a whole body or from stream payloads. Pure: no I/O.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::anthropic::{self, MessageAssembler};
use super::reply::{self, ReplyError, StreamAssembler, StreamStep};
use super::{ClientError, ClientSettings, Completion, ProviderKind};

/// The `anthropic-version` header sent with every Anthropic request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The endpoint of `settings`' provider.
pub fn endpoint(settings: &ClientSettings) -> String {
    match settings.provider {
        ProviderKind::OpenAi => super::chat_completions_url(&settings.base_url),
        ProviderKind::Anthropic => super::messages_url(&settings.base_url),
    }
}

/// The headers every request of `settings` carries: the key (`Authorization: Bearer` or
/// `x-api-key`), marked sensitive, and Anthropic's version.
pub fn headers(settings: &ClientSettings) -> Result<HeaderMap, ClientError> {
    let mut headers = HeaderMap::new();
    let unsendable = || ClientError::InvalidSettings {
        detail: "the API key holds characters that cannot be sent in an HTTP header".to_owned(),
    };
    if let Some(key) = &settings.api_key {
        let (name, text) = match settings.provider {
            ProviderKind::OpenAi => (
                reqwest::header::AUTHORIZATION,
                format!("Bearer {}", key.expose()),
            ),
            ProviderKind::Anthropic => (
                HeaderName::from_static("x-api-key"),
                key.expose().to_owned(),
            ),
        };
        let mut value = HeaderValue::from_str(&text).map_err(|_| unsendable())?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    if settings.provider == ProviderKind::Anthropic {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
    }
    Ok(headers)
}

/// A whole (not streamed) answer.
pub fn parse_whole(kind: ProviderKind, body: &[u8]) -> Result<Completion, ReplyError> {
    match kind {
        ProviderKind::OpenAi => reply::parse_completion(body),
        ProviderKind::Anthropic => anthropic::parse_message(body),
    }
}

/// A streamed answer being put together, on either wire.
#[derive(Debug)]
pub enum Assembler {
    /// Chat Completions chunks.
    OpenAi(StreamAssembler),
    /// Messages API events.
    Anthropic(MessageAssembler),
}

impl Assembler {
    /// An empty reply on `kind`'s wire.
    pub fn new(kind: ProviderKind) -> Assembler {
        match kind {
            ProviderKind::OpenAi => Assembler::OpenAi(StreamAssembler::new()),
            ProviderKind::Anthropic => Assembler::Anthropic(MessageAssembler::default()),
        }
    }

    /// Takes one `data:` payload.
    pub fn push(&mut self, payload: &str) -> Result<StreamStep, ReplyError> {
        match self {
            Assembler::OpenAi(inner) => inner.push(payload),
            Assembler::Anthropic(inner) => inner.push(payload),
        }
    }

    /// The bytes of the reply so far, for the reply limit.
    pub fn reply_bytes(&self) -> usize {
        match self {
            Assembler::OpenAi(inner) => inner.reply_bytes(),
            Assembler::Anthropic(inner) => inner.reply_bytes(),
        }
    }

    /// The reply text so far, for the repetition watch.
    pub fn content(&self) -> &str {
        match self {
            Assembler::OpenAi(inner) => inner.content(),
            Assembler::Anthropic(inner) => inner.content(),
        }
    }

    /// Whether the server said why the model stopped.
    pub fn has_finish_reason(&self) -> bool {
        match self {
            Assembler::OpenAi(inner) => inner.has_finish_reason(),
            Assembler::Anthropic(inner) => inner.has_finish_reason(),
        }
    }

    /// The whole reply.
    pub fn finish(self) -> Completion {
        match self {
            Assembler::OpenAi(inner) => inner.finish(),
            Assembler::Anthropic(inner) => inner.finish(),
        }
    }
}
