//! Chat Completions answers turned into a [`Completion`]: a whole JSON body
//! ([`parse_completion`]), or the `data:` payloads of a stream fed one by one to a
//! [`StreamAssembler`]. Pure: no I/O, no printing; errors are returned as [`ReplyError`], which
//! the provider turns into a [`super::ClientError`] naming the endpoint.

use serde::Deserialize;
use serde_json::Value;

use super::{Completion, Usage};
use crate::message::NativeToolCall;

/// Why a body or a payload could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// Not JSON at all.
    NotJson(String),
    /// JSON, but not the expected shape.
    WrongShape(String),
    /// The server's own error object, with its message.
    Server(String),
    /// A streamed error event saying the server is busy rather than that the request is wrong
    /// (Anthropic `overloaded_error`, `rate_limit_error`, `api_error`), with its message: worth
    /// another try as long as nothing of the reply has been passed on.
    Transient(String),
}

/// What one stream payload meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamStep {
    /// A chunk, whose new text (possibly empty) is to be shown now.
    Text(String),
    /// `[DONE]`: the stream is over.
    Done,
}

/// Accumulates the chunks of a streamed completion.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    completion: Completion,
    /// The calls so far, with the `index` the server gave each.
    calls: Vec<(usize, NativeToolCall)>,
}

impl StreamAssembler {
    /// An empty reply.
    pub fn new() -> StreamAssembler {
        StreamAssembler::default()
    }

    /// Takes one `data:` payload: `[DONE]` or a `chat.completion.chunk` JSON object.
    pub fn push(&mut self, payload: &str) -> Result<StreamStep, ReplyError> {
        if payload.trim() == "[DONE]" {
            return Ok(StreamStep::Done);
        }
        let value: Value = serde_json::from_str(payload).map_err(|e| {
            ReplyError::NotJson(format!("{e} in data payload {}", excerpt(payload)))
        })?;
        if let Some(message) = error_message(&value) {
            return Err(ReplyError::Server(message));
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| {
            ReplyError::WrongShape(format!("{e} in chat.completion.chunk {}", excerpt(payload)))
        })?;
        if let Some(usage) = chunk.usage {
            self.completion.usage = Some(usage);
        }
        let mut text = String::new();
        if let Some(choice) = chunk
            .choices
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.delta {
                if let Some(content) = delta.content {
                    text = content;
                    self.completion.content.push_str(&text);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.push_tool_call(call);
                }
            }
            if choice.finish_reason.is_some() {
                self.completion.finish_reason = choice.finish_reason;
            }
        }
        Ok(StreamStep::Text(text))
    }

    fn push_tool_call(&mut self, delta: DeltaToolCall) {
        let calls = &mut self.calls;
        let position = match delta.index {
            Some(index) => calls.iter().position(|c| c.0 == index),
            // Servers that omit `index` send the id only with a call's first piece.
            None => match &delta.id {
                Some(id) => calls.iter().position(|c| c.1.id == *id),
                None => calls.len().checked_sub(1),
            },
        };
        let at = match position {
            Some(at) => at,
            None => {
                let index = delta.index.unwrap_or(calls.len());
                calls.push((index, NativeToolCall::function("", "", "")));
                calls.len() - 1
            }
        };
        let (_, call) = &mut calls[at];
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name {
                call.function.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.function.arguments.push_str(&arguments);
            }
        }
    }

    /// The bytes of the reply so far (text and tool calls), for the reply limit.
    pub fn reply_bytes(&self) -> usize {
        super::reply_bytes(
            &self.completion.content,
            self.calls.iter().map(|(_, call)| call),
        )
    }

    /// The reply text so far.
    pub fn content(&self) -> &str {
        &self.completion.content
    }

    /// Whether the server said why the model stopped.
    pub fn has_finish_reason(&self) -> bool {
        self.completion.finish_reason.is_some()
    }

    /// The whole reply; calls the server gave no id get `call_N`.
    pub fn finish(self) -> Completion {
        let mut completion = self.completion;
        // Calls without an id keep an empty one: the loop names them, unique across the run.
        completion.tool_calls = self.calls.into_iter().map(|(_, call)| call).collect();
        completion
    }
}

/// A whole `chat.completion` body.
pub fn parse_completion(body: &[u8]) -> Result<Completion, ReplyError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ReplyError::NotJson(format!(
            "{e} in body {}",
            excerpt(&String::from_utf8_lossy(body))
        ))
    })?;
    if let Some(message) = error_message(&value) {
        return Err(ReplyError::Server(message));
    }
    let whole: WholeCompletion = serde_json::from_value(value)
        .map_err(|e| ReplyError::WrongShape(format!("{e} in chat.completion body")))?;
    let Some(choice) = whole.choices.into_iter().next() else {
        return Err(ReplyError::WrongShape(
            "the answer has no choices".to_owned(),
        ));
    };
    let tool_calls: Vec<NativeToolCall> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| NativeToolCall::function(call.id, call.function.name, call.function.arguments))
        .collect();
    Ok(Completion {
        content: choice.message.content.unwrap_or_default(),
        tool_calls,
        finish_reason: choice.finish_reason,
        usage: whole.usage,
    })
}

/// The message of an `{"error": ...}` object (`error.message`, or the error itself as text).
pub fn error_message(value: &Value) -> Option<String> {
    let error = value.get("error").filter(|e| !e.is_null())?;
    Some(match error.get("message").and_then(Value::as_str) {
        Some(message) => message.to_owned(),
        None => match error.as_str() {
            Some(text) => text.to_owned(),
            None => excerpt(&error.to_string()),
        },
    })
}

/// At most about 500 characters of `text`, cut at a character boundary, marked when cut.
pub fn excerpt(text: &str) -> String {
    const LIMIT: usize = 500;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WholeCompletion {
    choices: Vec<WholeChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct WholeChoice {
    message: WholeMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WholeMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WholeToolCall>>,
}

#[derive(Deserialize)]
struct WholeToolCall {
    #[serde(default)]
    id: String,
    function: WholeFunction,
}

#[derive(Deserialize)]
struct WholeFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn push(assembler: &mut StreamAssembler, value: Value) -> StreamStep {
        assembler.push(&value.to_string()).unwrap()
    }

    #[test]
    fn assembles_text_finish_reason_and_late_usage() {
        let mut a = StreamAssembler::new();
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        );
        let step = push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        );
        assert_eq!(step, StreamStep::Text("Hel".into()));
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": null}]}),
        );
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        assert!(a.has_finish_reason());
        push(
            &mut a,
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        );
        assert_eq!(a.push("[DONE]").unwrap(), StreamStep::Done);
        let completion = a.finish();
        assert_eq!(completion.content, "Hello");
        assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
        assert_eq!(completion.usage.unwrap().total_tokens, 5);
    }

    #[test]
    fn assembles_tool_calls_by_index_from_pieces() {
        let mut a = StreamAssembler::new();
        let first = |i: usize, id: &str, name: &str| {
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            ]}}]})
        };
        let piece = |i: usize, args: &str| {
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "function": {"arguments": args}}
            ]}}]})
        };
        push(&mut a, first(0, "c1", "fs_read"));
        push(&mut a, piece(0, "{\"path\":"));
        push(&mut a, first(1, "c2", "fs_ls"));
        push(&mut a, piece(0, "\"/w/a\"}"));
        push(&mut a, piece(1, "{}"));
        push(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        );
        let completion = a.finish();
        assert_eq!(
            completion.tool_calls,
            vec![
                NativeToolCall::function("c1", "fs_read", "{\"path\":\"/w/a\"}"),
                NativeToolCall::function("c2", "fs_ls", "{}"),
            ]
        );
    }

    #[test]
    fn calls_without_index_or_id_are_still_assembled() {
        let mut a = StreamAssembler::new();
        push(
            &mut a,
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"name": "x", "arguments": "{"}}]}}]}),
        );
        push(
            &mut a,
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "}"}}]}}]}),
        );
        assert_eq!(
            a.finish().tool_calls,
            vec![NativeToolCall::function("", "x", "{}")]
        );
    }

    #[test]
    fn tells_not_json_from_wrong_shape_from_server_error() {
        let mut a = StreamAssembler::new();
        assert!(
            matches!(a.push("{not json"), Err(ReplyError::NotJson(m)) if m.contains("{not json"))
        );
        assert!(matches!(
            a.push(r#"{"choices": 3}"#),
            Err(ReplyError::WrongShape(_))
        ));
        assert_eq!(
            a.push(r#"{"error": {"message": "overloaded", "type": "server_error"}}"#),
            Err(ReplyError::Server("overloaded".into()))
        );
    }

    #[test]
    fn parses_whole_completions() {
        let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fs_read", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
        let completion = parse_completion(body.to_string().as_bytes()).unwrap();
        assert_eq!(completion.content, "");
        assert_eq!(
            completion.tool_calls,
            vec![NativeToolCall::function("c1", "fs_read", "{}")]
        );
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(completion.usage.unwrap().total_tokens, 2);
        assert!(matches!(
            parse_completion(b"<html>"),
            Err(ReplyError::NotJson(_))
        ));
        assert!(matches!(
            parse_completion(b"{\"choices\": []}"),
            Err(ReplyError::WrongShape(_))
        ));
    }

    #[test]
    fn excerpts_are_short_and_cut_on_characters() {
        let long = "\u{e9}".repeat(2000);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 503);
        assert_eq!(excerpt("short"), "short");
    }
}
