//! The chat messages of an API conversation, shaped as OpenAI Chat Completions messages, with what
//! flycode needs to know about each that the wire form does not say (whether it carries a result).

use serde::{Deserialize, Serialize};

/// Who speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The system prompt.
    System,
    /// The user: the task, results in text mode, special messages.
    User,
    /// The model.
    Assistant,
    /// A native tool result.
    Tool,
}

impl Role {
    /// `system`, `user`, `assistant` or `tool`, as the wire spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// What a message is to flycode; never sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageKind {
    /// Anything else: the system prompt, the task, a reply.
    #[default]
    Plain,
    /// A tool result: a `tool` message (native mode) or a user message holding a
    /// `flycode-result` block (text mode), violations included.
    Result,
    /// A special user message (role definition, TODO list, useful information, folder notes),
    /// rebuilt for every request and never stored in the history.
    Special,
    /// The summary of older turns that compaction put in their place (PROTOCOL.md §13 (The API
    /// loop: compaction)).
    Summary,
}

/// A function call the model made through the API's native tool calling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeToolCall {
    /// The API's call id, echoed by the `tool` message that answers it.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// The function part of a [`NativeToolCall`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The function name, e.g. `fs_read`.
    pub name: String,
    /// The arguments as the model wrote them: a JSON text, not yet validated.
    pub arguments: String,
}

impl NativeToolCall {
    /// A `function` call.
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        NativeToolCall {
            id: id.into(),
            kind: "function".to_owned(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text; empty for an assistant message that only calls tools.
    pub content: String,
    /// The native calls of an assistant message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<NativeToolCall>,
    /// The call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// What the message is to flycode.
    #[serde(skip)]
    pub kind: MessageKind,
    /// What flycode knows about a reply that its text does not say (a partial reply, a call
    /// recovered from text): recorded in transcripts as `"flycode": {...}`, never sent to the
    /// API (PROTOCOL.md §13 (The API loop: transcript)).
    #[serde(rename = "flycode", skip_serializing_if = "Option::is_none")]
    pub note: Option<ReplyNote>,
}

/// What flycode records about a reply beside its text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyNote {
    /// The reply is partial, and why: `cancelled` (Ctrl-C), `failed` (the stream broke),
    /// `repetition` (flycode cut a degenerate reply), `time_limit` (the turn time limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// The reply's native call was recovered from a call the model wrote as text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered_from_text: bool,
}

impl Message {
    /// Masks flycode's secrets in the message: its text, its calls' ids and arguments, and the
    /// id it answers (the same id masked the same way on both sides, so they still pair).
    pub fn mask(&mut self, secrets: &flycode_core::tools::secrets::Secrets) {
        if secrets.is_empty() {
            return;
        }
        secrets.mask_string(&mut self.content);
        for call in &mut self.tool_calls {
            secrets.mask_string(&mut call.id);
            secrets.mask_string(&mut call.function.name);
            secrets.mask_string(&mut call.function.arguments);
        }
        if let Some(id) = &mut self.tool_call_id {
            secrets.mask_string(id);
        }
    }

    fn new(role: Role, content: impl Into<String>, kind: MessageKind) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            kind,
            note: None,
        }
    }

    /// The system prompt.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content, MessageKind::Plain)
    }

    /// A user message: the task.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content, MessageKind::Plain)
    }

    /// A user message carrying a `flycode-result` block (text mode).
    pub fn user_result(content: impl Into<String>) -> Message {
        Message::new(Role::User, content, MessageKind::Result)
    }

    /// A special user message.
    pub fn special(content: impl Into<String>) -> Message {
        Message::new(Role::User, content, MessageKind::Special)
    }

    /// The user message holding a compaction's summary.
    pub fn summary(content: impl Into<String>) -> Message {
        Message::new(Role::User, content, MessageKind::Summary)
    }

    /// A message of `role` and `kind` as read back from a transcript.
    pub fn stored(
        role: Role,
        content: String,
        tool_calls: Vec<NativeToolCall>,
        tool_call_id: Option<String>,
        kind: MessageKind,
    ) -> Message {
        Message {
            role,
            content,
            tool_calls,
            tool_call_id,
            kind,
            note: None,
        }
    }

    /// A model reply, with its native calls if any.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<NativeToolCall>) -> Message {
        Message {
            tool_calls,
            ..Message::new(Role::Assistant, content, MessageKind::Plain)
        }
    }

    /// A reply cut short, for the record: `reason` as in [`ReplyNote::partial`].
    pub fn partial_reply(content: impl Into<String>, reason: &str) -> Message {
        Message {
            note: Some(ReplyNote {
                partial: Some(reason.to_owned()),
                recovered_from_text: false,
            }),
            ..Message::assistant(content, Vec::new())
        }
    }

    /// A `tool` message answering the native call `tool_call_id` (native mode).
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            ..Message::new(Role::Tool, content, MessageKind::Result)
        }
    }

    /// Whether the message carries a tool result.
    pub fn is_result(&self) -> bool {
        self.kind == MessageKind::Result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialize_as_chat_completions_messages() {
        let call = NativeToolCall::function("c1", "fs_read", r#"{"path":"/w/a"}"#);
        let reply = Message::assistant("", vec![call]);
        assert_eq!(
            serde_json::to_value(&reply).unwrap(),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "fs_read", "arguments": "{\"path\":\"/w/a\"}"}}
            ]})
        );
        assert_eq!(
            serde_json::to_value(Message::tool_result("c1", "ok")).unwrap(),
            json!({"role": "tool", "content": "ok", "tool_call_id": "c1"})
        );
        assert_eq!(
            serde_json::to_value(Message::special("# TODO")).unwrap(),
            json!({"role": "user", "content": "# TODO"})
        );
    }

    #[test]
    fn results_are_known_by_kind_not_by_role() {
        assert!(Message::tool_result("c1", "x").is_result());
        assert!(Message::user_result("```flycode-result\n```").is_result());
        assert!(!Message::user("task").is_result());
        assert!(!Message::special("notes").is_result());
    }
}
