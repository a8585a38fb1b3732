//! [`ClientError`]: what can go wrong between flycode and the model server, each message saying
//! what happened and what to do. No message ever holds the API key.

use std::time::Duration;

/// A completion that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The settings cannot work (a malformed base URL or key, no TLS, no runtime).
    #[error("cannot set up the model client: {detail}")]
    InvalidSettings {
        /// What is wrong.
        detail: String,
    },
    /// No connection could be made.
    #[error(
        "could not connect to the server at {url}: {reason}; check --base-url and that the server is running"
    )]
    Connect {
        /// The endpoint.
        url: String,
        /// The underlying failure.
        reason: String,
    },
    /// The server stayed silent too long, while connecting or while answering.
    #[error("{}", timeout_message(url, *after, *connecting))]
    Timeout {
        /// The endpoint.
        url: String,
        /// The silence allowed.
        after: Duration,
        /// Whether it happened while connecting (rather than while waiting for the answer).
        connecting: bool,
    },
    /// The server sent nothing within the first-byte timeout: a local model may still be
    /// reading the prompt. Retried only when not even the response head came.
    #[error(
        "the server at {url} sent nothing within {} of the request (the first-byte timeout); a model on a CPU may need longer to read the prompt: raise --first-byte-timeout-ms, or try --prompt compact",
        human_duration(*after)
    )]
    FirstByteTimeout {
        /// The endpoint.
        url: String,
        /// The wait allowed.
        after: Duration,
    },
    /// The connection broke while sending the request or reading the answer.
    #[error("the connection to {url} broke: {reason}; try again")]
    Network {
        /// The endpoint.
        url: String,
        /// The underlying failure.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("the server at {url} answered HTTP {status}: {message}; {}", status_hint(*status))]
    Http {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message, or an excerpt of its body (at most about 500 characters).
        message: String,
    },
    /// The server reported an error object (`{"error": {...}}`) in a successful answer or stream.
    #[error("the server at {url} reported an error: {message}; try again, or check the request")]
    ServerError {
        /// The endpoint.
        url: String,
        /// The server's message.
        message: String,
    },
    /// Every attempt failed in a retryable way.
    #[error("{last} (gave up after {attempts} attempts)")]
    RetriesExhausted {
        /// How many requests were sent.
        attempts: u32,
        /// The last failure.
        last: Box<ClientError>,
    },
    /// The caller's cancel flag was set.
    #[error("the request to the model was cancelled")]
    Cancelled,
    /// A streamed event was not JSON, or not a chat completion chunk.
    #[error(
        "the server at {url} sent a malformed stream: {detail}; the reply was abandoned (not retried, as part of it may have been shown)"
    )]
    MalformedStream {
        /// The endpoint.
        url: String,
        /// What was wrong, naming the offending payload.
        detail: String,
    },
    /// The server reported that it is busy (an Anthropic `overloaded_error`, `rate_limit_error`
    /// or `api_error` event) after part of the reply had been passed on: not retried, as that
    /// part may have been shown (PROTOCOL.md §13 (Anthropic Messages API)).
    #[error(
        "the server at {url} broke off its reply with an error after part of it had arrived: {message}; the reply was abandoned (not retried, as part of it may have been shown); the transcript is kept: continue with `flycode run --resume`"
    )]
    BrokenOff {
        /// The endpoint.
        url: String,
        /// The server's message.
        message: String,
    },
    /// The stream ended before the reply was complete.
    #[error(
        "the stream from {url} ended before the reply was complete (no [DONE] and no finish_reason); try again"
    )]
    Truncated {
        /// The endpoint.
        url: String,
    },
    /// The reply grew past `max_reply_bytes` (or its body past the framing allowance): refused
    /// before it is parsed (PROTOCOL.md §1 (Reading a reply: reply size limit)), a runaway or hostile server, or a setting too low.
    #[error("{}", too_large_message(url, *limit, *framing))]
    TooLarge {
        /// The endpoint.
        url: String,
        /// `max_reply_bytes`.
        limit: usize,
        /// Whether the body around the reply (JSON, stream envelopes) passed its allowance,
        /// rather than the reply itself.
        framing: bool,
    },
    /// A whole (non-streamed) answer was not JSON, or not a chat completion.
    #[error(
        "the server at {url} sent an answer that is not a chat completion: {detail}; check that --base-url points at an OpenAI-compatible API"
    )]
    InvalidResponse {
        /// The endpoint.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

fn timeout_message(url: &str, after: Duration, connecting: bool) -> String {
    let after = human_duration(after);
    if connecting {
        format!(
            "the server at {url} did not accept a connection within {after}; check --base-url, or raise --connect-timeout-ms"
        )
    } else {
        format!(
            "the server at {url} sent nothing for {after}; it may be overloaded or stuck: try again, or raise --read-timeout-ms"
        )
    }
}

fn too_large_message(url: &str, limit: usize, framing: bool) -> String {
    let limit_text = format!(
        "the reply limit of {limit} bytes ({}, max_reply_bytes)",
        flycode_core::tools::fs::ls::human_size(limit as u64)
    );
    let what = if framing {
        format!(
            "the answer from {url} is too large (too_large): its body passed {} bytes, the most the JSON around a reply within {limit_text} may take",
            super::framing_allowance(limit)
        )
    } else {
        format!("the reply from {url} is too large (too_large): it passed {limit_text}")
    };
    format!(
        "{what}, and was abandoned unparsed; raise max_reply_bytes in flycode.toml (at most {}) if replies this large are expected, else check the server",
        crate::config::range::MAX_REPLY_BYTES.max
    )
}

fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => {
            "check the API key (FLYCODE_API_KEY, OPENAI_API_KEY or ANTHROPIC_API_KEY, or the variable api_key_env names) and that it may use this model"
        }
        404 => "check --base-url (it should end in /v1 or similar) and the model name",
        408 | 429 => "the server is busy or rate limiting: wait, then try again",
        500..=599 => "the server failed: try again later",
        _ => "the server rejected the request: check the model name and the settings",
    }
}

/// `300 ms`, `10 s`, `1.5 s`.
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis} ms")
    } else if millis.is_multiple_of(1000) {
        format!("{} s", millis / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// A failure in a few words, for the retry notice.
pub fn short_reason(error: &ClientError) -> String {
    match error {
        ClientError::Http {
            status, message, ..
        } => format!("HTTP {status}: {message}"),
        ClientError::Timeout {
            after, connecting, ..
        } => {
            let what = if *connecting {
                "no connection"
            } else {
                "no answer"
            };
            format!("{what} within {}", human_duration(*after))
        }
        ClientError::Connect { reason, .. } => format!("could not connect: {reason}"),
        ClientError::Network { reason, .. } => format!("connection broke: {reason}"),
        other => other.to_string(),
    }
}

/// An error and its sources, joined with `: `, without repeats.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let timeout = ClientError::Timeout {
            url: "http://127.0.0.1:1234/v1/chat/completions".into(),
            after: Duration::from_secs(10),
            connecting: true,
        };
        assert_eq!(
            timeout.to_string(),
            "the server at http://127.0.0.1:1234/v1/chat/completions did not accept a connection \
             within 10 s; check --base-url, or raise --connect-timeout-ms"
        );
        let http = ClientError::Http {
            url: "u".into(),
            status: 401,
            message: "bad key".into(),
        };
        let exhausted = ClientError::RetriesExhausted {
            attempts: 5,
            last: Box::new(http),
        };
        assert_eq!(
            exhausted.to_string(),
            "the server at u answered HTTP 401: bad key; check the API key (FLYCODE_API_KEY, \
             OPENAI_API_KEY or ANTHROPIC_API_KEY, or the variable api_key_env names) and that it may use this model \
             (gave up after 5 attempts)"
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(300)), "300 ms");
        assert_eq!(human_duration(Duration::from_secs(120)), "120 s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    }
}
