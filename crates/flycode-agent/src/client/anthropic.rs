//! The Anthropic Messages wire (`POST {base_url}/v1/messages`): flycode's conversation turned
//! into a Messages request, and a whole `message` body or the events of a stream turned into a
//! [`Completion`]. Pure: no I/O; the HTTP exchange, its retries (429, 529 `overloaded_error`,
//! `retry-after`) and timeouts are the shared ones of [`super::openai`].
//!
//! The mapping (PROTOCOL.md §13 (The API loop: providers)): system messages become the top-level
//! `system` blocks; an assistant message's native calls become `tool_use` blocks (their
//! arguments parsed into `input`); `tool` messages become `tool_result` blocks of a user message;
//! consecutive messages of one role are merged into one message, as the API wants strict
//! alternation, with the results first. Special messages stay user text blocks exactly where the
//! loop placed them, so seed 004's placement is the same on both APIs. Prompt caching marks the
//! last system block and the last block of the last message `cache_control: ephemeral`, so a long
//! run pays for its history once.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::reply::{ReplyError, StreamStep, error_message, excerpt};
use super::{ChatRequest, Completion, Usage};
use crate::message::{Message, NativeToolCall, Role};

/// The request body of `request`.
pub fn request_body(request: &ChatRequest<'_>, max_tokens: u32) -> Value {
    let system: Vec<Value> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| json!({"type": "text", "text": m.content}))
        .collect();
    let mut messages = conversation(request.messages);
    mark_last_block(messages.last_mut().and_then(|m| m.get_mut("content")));
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        let mut system = Value::Array(system);
        mark_last_block(Some(&mut system));
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().filter_map(tool_definition).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(request.stream));
    Value::Object(body)
}

/// The non-system messages as alternating `user` / `assistant` messages of content blocks.
fn conversation(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", text_block(&message.content).into_iter().collect()),
            Role::Tool => ("user", vec![tool_result_block(message)]),
            Role::Assistant => ("assistant", assistant_blocks(message)),
        };
        match out.last_mut() {
            Some((last, existing)) if *last == role => {
                // Results first: the API wants a user turn's tool_result blocks before its text.
                if message.role == Role::Tool {
                    let at = existing
                        .iter()
                        .position(|b| b["type"] != "tool_result")
                        .unwrap_or(existing.len());
                    existing.splice(at..at, blocks);
                } else {
                    existing.extend(blocks);
                }
            }
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            if blocks.is_empty() {
                // An empty reply (or message) still holds its place in the alternation.
                blocks.push(json!({"type": "text", "text": "(empty)"}));
            }
            json!({"role": role, "content": blocks})
        })
        .collect()
}

/// A text block, none for empty text (the API refuses empty text blocks).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn tool_result_block(message: &Message) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
        "content": message.content,
    })
}

fn assistant_blocks(message: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = text_block(&message.content).into_iter().collect();
    for call in &message.tool_calls {
        // `input` must be an object: arguments that are not one (a violation the loop already
        // answered) are kept as text so the model sees what it wrote.
        let input = match serde_json::from_str::<Value>(&call.function.arguments) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => json!({"arguments": call.function.arguments}),
        };
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.function.name,
            "input": input,
        }));
    }
    blocks
}

/// Marks the last block of `blocks` (an array) for prompt caching.
fn mark_last_block(blocks: Option<&mut Value>) {
    if let Some(Value::Object(block)) = blocks.and_then(|b| b.as_array_mut()?.last_mut()) {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// An OpenAI function definition as an Anthropic tool (`name`, `description`, `input_schema`).
fn tool_definition(tool: &Value) -> Option<Value> {
    let function = tool.get("function")?;
    Some(json!({
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "input_schema": function.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
    }))
}

/// Anthropic's `stop_reason` in the Chat Completions words the loop reads.
fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        "end_turn" | "stop_sequence" => "stop",
        other => other,
    }
    .to_owned()
}

/// Anthropic's usage object.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Later counts over earlier ones (`message_delta` repeats or updates `message_start`'s).
    fn merge(self, later: WireUsage) -> WireUsage {
        WireUsage {
            input_tokens: later.input_tokens.or(self.input_tokens),
            output_tokens: later.output_tokens.or(self.output_tokens),
            cache_read_input_tokens: later
                .cache_read_input_tokens
                .or(self.cache_read_input_tokens),
            cache_creation_input_tokens: later
                .cache_creation_input_tokens
                .or(self.cache_creation_input_tokens),
        }
    }

    /// The prompt counts every input token (new, written to the cache, read from it).
    fn into_usage(self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let prompt = self
            .input_tokens
            .unwrap_or(0)
            .saturating_add(read)
            .saturating_add(self.cache_creation_input_tokens.unwrap_or(0));
        let completion = self.output_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt.saturating_add(completion),
            cache_read_tokens: read,
        }
    }
}

#[derive(Deserialize)]
struct MessageBody {
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// A whole `message` body.
pub fn parse_message(body: &[u8]) -> Result<Completion, ReplyError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ReplyError::NotJson(format!(
            "{e} in body {}",
            excerpt(&String::from_utf8_lossy(body))
        ))
    })?;
    if let Some(message) = error_message(&value) {
        return Err(ReplyError::Server(message));
    }
    let whole: MessageBody = serde_json::from_value(value)
        .map_err(|e| ReplyError::WrongShape(format!("{e} in message body")))?;
    let mut completion = Completion {
        finish_reason: whole.stop_reason.as_deref().map(finish_reason),
        usage: whole.usage.map(WireUsage::into_usage),
        ..Completion::default()
    };
    for block in whole.content {
        match block["type"].as_str() {
            Some("text") => completion
                .content
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => completion.tool_calls.push(NativeToolCall::function(
                block["id"].as_str().unwrap_or_default(),
                block["name"].as_str().unwrap_or_default(),
                block.get("input").map_or("{}".to_owned(), Value::to_string),
            )),
            // Thinking and other blocks carry nothing the loop reads.
            _ => {}
        }
    }
    Ok(completion)
}

/// One content block of a stream being received.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        call: NativeToolCall,
        /// The `input` of `content_block_start`, used when no `input_json_delta` follows.
        start_input: String,
    },
    Other,
}

/// The `error.type`s of an `error` event that say the server is busy, not that the request is
/// wrong: retried like a 529 while nothing has been passed on (PROTOCOL.md §13 (Anthropic
/// Messages API)).
const TRANSIENT_ERRORS: [&str; 3] = ["overloaded_error", "rate_limit_error", "api_error"];

/// Whether an `error` event is one of [`TRANSIENT_ERRORS`].
fn is_transient(value: &Value) -> bool {
    value["type"] == "error"
        && value["error"]["type"]
            .as_str()
            .is_some_and(|kind| TRANSIENT_ERRORS.contains(&kind))
}

/// Accumulates the events of a streamed message (`message_start`, `content_block_start`,
/// `content_block_delta` with `text_delta` / `input_json_delta`, `content_block_stop`,
/// `message_delta`, `message_stop`, `ping`, `error`).
#[derive(Debug, Default)]
pub struct MessageAssembler {
    content: String,
    blocks: Vec<(u64, Block)>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
}

impl MessageAssembler {
    /// Takes one event's `data:` payload (its `type` says which event it is).
    pub fn push(&mut self, payload: &str) -> Result<StreamStep, ReplyError> {
        let value: Value = serde_json::from_str(payload).map_err(|e| {
            ReplyError::NotJson(format!("{e} in data payload {}", excerpt(payload)))
        })?;
        if let Some(message) = error_message(&value) {
            return Err(if is_transient(&value) {
                ReplyError::Transient(message)
            } else {
                ReplyError::Server(message)
            });
        }
        let index = value["index"].as_u64().unwrap_or(0);
        match value["type"].as_str() {
            Some("message_start") => self.take_usage(&value["message"]["usage"])?,
            Some("content_block_start") => self.start_block(index, &value["content_block"]),
            Some("content_block_delta") => return Ok(self.delta(index, &value["delta"])),
            Some("message_delta") => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.take_usage(&value["usage"])?;
            }
            Some("message_stop") => return Ok(StreamStep::Done),
            Some(_) => {} // ping, content_block_stop, events added later
            None => {
                return Err(ReplyError::WrongShape(format!(
                    "an event without a type: {}",
                    excerpt(payload)
                )));
            }
        }
        Ok(StreamStep::Text(String::new()))
    }

    fn take_usage(&mut self, usage: &Value) -> Result<(), ReplyError> {
        if usage.is_null() {
            return Ok(());
        }
        let usage: WireUsage = serde_json::from_value(usage.clone())
            .map_err(|e| ReplyError::WrongShape(format!("{e} in usage")))?;
        self.usage = Some(self.usage.unwrap_or_default().merge(usage));
        Ok(())
    }

    fn start_block(&mut self, index: u64, block: &Value) {
        let block = match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                self.content.push_str(text);
                Block::Text
            }
            Some("tool_use") => Block::ToolUse {
                call: NativeToolCall::function(
                    block["id"].as_str().unwrap_or_default(),
                    block["name"].as_str().unwrap_or_default(),
                    "",
                ),
                start_input: block.get("input").map_or("{}".to_owned(), Value::to_string),
            },
            _ => Block::Other,
        };
        self.blocks.push((index, block));
    }

    fn delta(&mut self, index: u64, delta: &Value) -> StreamStep {
        let block = self
            .blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b);
        match (delta["type"].as_str(), block) {
            (Some("text_delta"), _) => {
                let text = delta["text"].as_str().unwrap_or_default().to_owned();
                self.content.push_str(&text);
                StreamStep::Text(text)
            }
            (Some("input_json_delta"), Some(Block::ToolUse { call, .. })) => {
                let piece = delta["partial_json"].as_str().unwrap_or_default();
                call.function.arguments.push_str(piece);
                StreamStep::Text(String::new())
            }
            _ => StreamStep::Text(String::new()),
        }
    }

    fn calls(&self) -> impl Iterator<Item = &NativeToolCall> {
        self.blocks.iter().filter_map(|(_, block)| match block {
            Block::ToolUse { call, .. } => Some(call),
            _ => None,
        })
    }

    /// The bytes of the reply so far (text and tool calls), for the reply limit.
    pub fn reply_bytes(&self) -> usize {
        super::reply_bytes(&self.content, self.calls())
    }

    /// The reply text so far, for the repetition watch.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// Whether the server said why the model stopped.
    pub fn has_finish_reason(&self) -> bool {
        self.stop_reason.is_some()
    }

    /// The whole reply.
    pub fn finish(self) -> Completion {
        let tool_calls = self
            .blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                Block::ToolUse {
                    mut call,
                    start_input,
                } => {
                    if call.function.arguments.trim().is_empty() {
                        call.function.arguments = start_input;
                    }
                    Some(call)
                }
                _ => None,
            })
            .collect();
        Completion {
            content: self.content,
            tool_calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.map(WireUsage::into_usage),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_has_system_blocks_alternating_turns_and_cache_marks() {
        let messages = [
            Message::system("sys"),
            Message::user("task"),
            Message::assistant(
                "",
                vec![
                    NativeToolCall::function("a", "fs_read", r#"{"path":"/x"}"#),
                    NativeToolCall::function("b", "fs_ls", "not json"),
                ],
            ),
            Message::tool_result("a", "ra"),
            Message::special("# TODO"),
            Message::tool_result("b", "rb"),
        ];
        let tools = [json!({"type": "function", "function": {"name": "fs_read",
            "description": "d", "parameters": {"type": "object"}}})];
        let body = request_body(
            &ChatRequest {
                model: "claude",
                messages: &messages,
                tools: &tools,
                stream: true,
                max_tokens: 8192,
            },
            8192,
        );
        assert_eq!(body["max_tokens"], 8192);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[1]["content"][0]["input"], json!({"path": "/x"}));
        assert_eq!(
            turns[1]["content"][1]["input"],
            json!({"arguments": "not json"})
        );
        let last: Vec<&str> = turns[2]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(last, ["tool_result", "tool_result", "text"]);
        assert_eq!(
            turns[2]["content"][2]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }

    #[test]
    fn a_stream_assembles_text_parallel_tool_uses_and_usage() {
        let mut assembler = MessageAssembler::default();
        let events = [
            r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"fs_read","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"/a\"}"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t2","name":"fs_ls","input":{}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#,
        ];
        for event in events {
            assembler.push(event).unwrap();
        }
        assert_eq!(
            assembler.push(r#"{"type":"message_stop"}"#).unwrap(),
            StreamStep::Done
        );
        let completion = assembler.finish();
        assert_eq!(completion.content, "Hi");
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            completion.tool_calls[0].function.arguments,
            r#"{"path":"/a"}"#
        );
        assert_eq!(completion.tool_calls[1].function.arguments, "{}");
        let usage = completion.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (100, 20));
        assert_eq!(usage.cache_read_tokens, 90);
    }

    #[test]
    fn an_error_event_and_an_error_body_carry_the_servers_message() {
        let error =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            MessageAssembler::default().push(error),
            Err(ReplyError::Transient("Overloaded".into()))
        );
        for kind in ["rate_limit_error", "api_error"] {
            let event = format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"m"}}}}"#);
            assert_eq!(
                MessageAssembler::default().push(&event),
                Err(ReplyError::Transient("m".into())),
                "{kind}"
            );
        }
        let refused =
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#;
        assert_eq!(
            MessageAssembler::default().push(refused),
            Err(ReplyError::Server("bad".into()))
        );
        assert_eq!(
            parse_message(error.as_bytes()),
            Err(ReplyError::Server("Overloaded".into()))
        );
    }

    #[test]
    fn a_whole_message_maps_stop_reasons_and_tool_uses() {
        let body = br#"{"type":"message","content":[{"type":"text","text":"ok"},
            {"type":"tool_use","id":"t","name":"fs_read","input":{"path":"/a"}}],
            "stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":7}}"#;
        let completion = parse_message(body).unwrap();
        assert_eq!(completion.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            completion.tool_calls[0].function.arguments,
            r#"{"path":"/a"}"#
        );
        assert_eq!(completion.usage.unwrap().total_tokens, 12);
    }
}
