//! Reading a transcript file into messages, one at a time.
//!
//! Three forms are accepted, told apart by the content, never by the file name:
//!
//! - **JSON Lines**: one message object per line (blank lines allowed). Read as a stream: memory
//!   holds one line at a time, however long the file.
//! - **a JSON array** of message objects;
//! - **an object** `{"messages": [...]}` (other keys ignored).
//!
//! The two whole-document forms are read into memory once; each message still carries the line
//! it starts on. A message is `{"role", "content", "tool_calls"?, "tool_call_id"?}`; `content` is
//! a string, null, or an array of parts whose `text` fields are joined with newlines.

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The role of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TranscriptRole {
    /// `system`
    System,
    /// `developer`
    Developer,
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `tool`
    Tool,
}

impl TranscriptRole {
    fn from_name(name: &str) -> Option<TranscriptRole> {
        match name {
            "system" => Some(TranscriptRole::System),
            "developer" => Some(TranscriptRole::Developer),
            "user" => Some(TranscriptRole::User),
            "assistant" => Some(TranscriptRole::Assistant),
            "tool" => Some(TranscriptRole::Tool),
            _ => None,
        }
    }
}

/// A native (API function-calling) tool call recorded on an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct TranscriptToolCall {
    /// The call id, answered by a `tool` message's `tool_call_id`.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called.
    pub function: NativeFunction,
}

/// The function part of a native tool call.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct NativeFunction {
    /// The tool name (`fs.read`, or `fs_read` where the API forbids dots).
    pub name: String,
    /// The arguments as a JSON text.
    #[serde(default)]
    pub arguments: String,
}

/// One message of a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TranscriptMessage {
    /// 0-based position in the transcript.
    pub index: usize,
    /// 1-based line the message starts on.
    pub line: usize,
    /// Who wrote it.
    pub role: TranscriptRole,
    /// Its text (parts joined), empty when there is none.
    pub text: String,
    /// Native tool calls (assistant messages in native mode).
    pub tool_calls: Vec<TranscriptToolCall>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
}

/// Why a file is not a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnreadableTranscript {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// What is wrong and what to do.
    pub message: String,
    /// The message index the problem belongs to, when there is one.
    pub index: Option<usize>,
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    tool_calls: Option<Vec<TranscriptToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// Message content: a string, null, or text parts.
#[derive(Default)]
struct Content(String);

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Content, D::Error> {
        deserializer.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, null, or an array of {\"type\":\"text\",\"text\":...} parts")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
        Ok(Content(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
        Ok(Content(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let mut text = String::new();
        while let Some(part) = seq.next_element::<TranscriptPart>()? {
            if let Some(part_text) = part.text {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&part_text);
            }
        }
        Ok(Content(text))
    }
}

/// A content part; only its text matters (images and the like are skipped).
#[derive(Deserialize)]
struct TranscriptPart {
    #[serde(default)]
    text: Option<String>,
}

/// Turns one raw message into a [`TranscriptMessage`].
fn into_message(
    raw: RawMessage<'_>,
    index: usize,
    line: usize,
) -> Result<TranscriptMessage, UnreadableTranscript> {
    let role = TranscriptRole::from_name(&raw.role).ok_or_else(|| UnreadableTranscript {
        line,
        column: 0,
        message: format!(
            "message {index} has role {:?}; the roles are system, developer, user, assistant and tool",
            raw.role
        ),
        index: Some(index),
    })?;
    Ok(TranscriptMessage {
        index,
        line,
        role,
        text: raw.content.0,
        tool_calls: raw.tool_calls.unwrap_or_default(),
        tool_call_id: raw.tool_call_id,
    })
}

fn json_error(
    error: &serde_json::Error,
    line_offset: usize,
    what: &str,
    index: Option<usize>,
) -> UnreadableTranscript {
    let hint = if error.is_eof() {
        " (the file looks truncated)"
    } else {
        ""
    };
    let text = error.to_string();
    let text = text
        .rfind(" at line ")
        .map_or(text.as_str(), |at| &text[..at]);
    UnreadableTranscript {
        line: line_offset + error.line().max(1) - 1,
        column: error.column(),
        message: if error.is_data() && index.is_none() {
            format!("{what} has the wrong shape: {text}")
        } else if error.is_data() {
            format!("{what} is not a message object: {text}")
        } else {
            format!("{what} is not valid JSON: {text}{hint}")
        },
        index,
    }
}

/// A source of messages, in order; stops after the first unreadable point.
pub(crate) struct MessageReader<R> {
    source: TranscriptSource<R>,
    next_index: usize,
    failed: bool,
}

enum TranscriptSource<R> {
    Lines {
        reader: R,
        line: usize,
        buffer: Vec<u8>,
    },
    Document {
        messages: std::vec::IntoIter<Result<TranscriptMessage, UnreadableTranscript>>,
    },
}

impl<R: BufRead> MessageReader<R> {
    /// Detects the form of `reader`'s content and prepares to read it.
    pub(crate) fn open(mut reader: R) -> Result<MessageReader<R>, UnreadableTranscript> {
        let mut first_line = Vec::new();
        let mut skipped_lines = 0;
        loop {
            first_line.clear();
            let read = reader
                .read_until(b'\n', &mut first_line)
                .map_err(io_unreadable)?;
            // A byte-order mark at the very start is not content.
            if skipped_lines == 0 && first_line.starts_with(b"\xEF\xBB\xBF") {
                first_line.drain(..3);
            }
            if read == 0 || !first_line.trim_ascii().is_empty() {
                break;
            }
            skipped_lines += 1;
        }
        let trimmed = first_line.trim_ascii();
        // JSON Lines starts with a complete message object on its first line; anything else is
        // read as one document.
        let is_json_lines = trimmed.first() == Some(&b'{') && is_message_object(trimmed);
        let source = if is_json_lines {
            TranscriptSource::Lines {
                reader,
                line: skipped_lines,
                buffer: first_line,
            }
        } else {
            let mut document = first_line;
            reader.read_to_end(&mut document).map_err(io_unreadable)?;
            TranscriptSource::Document {
                messages: read_document(&document, skipped_lines).into_iter(),
            }
        };
        Ok(MessageReader {
            source,
            next_index: 0,
            failed: false,
        })
    }
}

fn is_message_object(object: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        role: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(object).is_ok_and(|probe| probe.role.is_some())
}

fn io_unreadable(error: std::io::Error) -> UnreadableTranscript {
    UnreadableTranscript {
        line: 1,
        column: 0,
        message: format!("cannot read the file: {error}"),
        index: None,
    }
}

/// Reads a whole-document transcript (an array, or an object with `"messages"`) element by
/// element, so that every message knows its line and a document broken halfway still yields the
/// messages before the break, followed by one [`UnreadableTranscript`] with the exact line and column.
fn read_document(
    document: &[u8],
    skipped_lines: usize,
) -> Vec<Result<TranscriptMessage, UnreadableTranscript>> {
    let mut walker = DocumentWalker {
        document,
        position: 0,
        line: 1 + skipped_lines,
        line_start: 0,
        counted_to: 0,
        messages: Vec::new(),
    };
    // `skipped_lines` blank lines were already consumed before `document` starts.
    if let Err(unreadable) = walker.walk() {
        walker.messages.push(Err(unreadable));
    }
    walker.messages
}

struct DocumentWalker<'d> {
    document: &'d [u8],
    position: usize,
    line: usize,
    line_start: usize,
    counted_to: usize,
    messages: Vec<Result<TranscriptMessage, UnreadableTranscript>>,
}

impl<'d> DocumentWalker<'d> {
    fn walk(&mut self) -> Result<(), UnreadableTranscript> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'[') => self.walk_messages()?,
            Some(b'{') => self.walk_wrapper()?,
            _ => {
                return Err(self.unreadable_here(
                    "not a transcript: expected a JSON array of messages, an object {\"messages\": [...]}, or JSON Lines with one message object per line".into(),
                ));
            }
        }
        self.skip_whitespace();
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unreadable_here("unexpected text after the transcript".into())),
        }
    }

    fn walk_wrapper(&mut self) -> Result<(), UnreadableTranscript> {
        self.position += 1;
        let mut found = false;
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b'}') && !found {
                return Err(self.unreadable_here(
                    "the transcript object has no \"messages\": [...] array".into(),
                ));
            }
            if self.peek() == Some(b'}') {
                self.position += 1;
                return Ok(());
            }
            let key: String = self.next_value("the transcript object", None)?;
            self.skip_whitespace();
            self.expect(b':', "a ':' after the key")?;
            self.skip_whitespace();
            if key == "messages" && !found {
                found = true;
                if self.peek() != Some(b'[') {
                    return Err(self.unreadable_here(
                        "\"messages\" must be an array of message objects".into(),
                    ));
                }
                self.walk_messages()?;
            } else {
                self.next_value::<serde::de::IgnoredAny>("the transcript object", None)?;
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') if found => {
                    self.position += 1;
                    return Ok(());
                }
                Some(b'}') => {}
                _ => {
                    return Err(
                        self.unreadable_here("expected ',' or '}' in the transcript object".into())
                    );
                }
            }
        }
    }

    fn walk_messages(&mut self) -> Result<(), UnreadableTranscript> {
        self.position += 1;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.position += 1;
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            self.count_lines();
            let index = self.messages.len();
            let (line, column) = (self.line, self.position - self.line_start + 1);
            let raw: &RawValue = self.next_value(&format!("message {index}"), Some(index))?;
            let message = serde_json::from_str::<RawMessage<'_>>(raw.get())
                .map_err(|e| {
                    let (error_line, error_column) = if e.line() <= 1 {
                        (line, column + e.column().saturating_sub(1))
                    } else {
                        (line + e.line() - 1, e.column())
                    };
                    let mut unreadable =
                        json_error(&e, 1, &format!("message {index}"), Some(index));
                    unreadable.line = error_line;
                    unreadable.column = error_column;
                    unreadable
                })
                .and_then(|m| into_message(m, index, line));
            let failed = message.is_err();
            self.messages.push(message);
            if failed {
                return Ok(());
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {
                    self.position += 1;
                    return Ok(());
                }
                None => {
                    return Err(self.unreadable_here(
                        "the transcript ends inside the message array (the file looks truncated)"
                            .into(),
                    ));
                }
                Some(_) => {
                    return Err(self.unreadable_here("expected ',' or ']' after a message".into()));
                }
            }
        }
    }

    /// Parses one JSON value at the current position and moves past it.
    fn next_value<T: serde::Deserialize<'d>>(
        &mut self,
        what: &str,
        index: Option<usize>,
    ) -> Result<T, UnreadableTranscript> {
        self.count_lines();
        let rest = &self.document[self.position..];
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
        match stream.next() {
            Some(Ok(value)) => {
                self.position += stream.byte_offset();
                Ok(value)
            }
            Some(Err(error)) => {
                let (line, column) = if error.line() <= 1 {
                    (self.line, self.position - self.line_start + error.column())
                } else {
                    (self.line + error.line() - 1, error.column())
                };
                let mut unreadable = json_error(&error, 1, what, index);
                unreadable.line = line;
                unreadable.column = column;
                Err(unreadable)
            }
            None => {
                Err(self.unreadable_here(format!("{what} ends early (the file looks truncated)")))
            }
        }
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), UnreadableTranscript> {
        if self.peek() == Some(byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.unreadable_here(format!("expected {what}")))
        }
    }

    fn peek(&self) -> Option<u8> {
        self.document.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.position += 1;
        }
    }

    /// Brings `line` and `line_start` up to `position`.
    fn count_lines(&mut self) {
        let end = self.position.min(self.document.len());
        for (offset, byte) in self.document[self.counted_to..end].iter().enumerate() {
            if *byte == b'\n' {
                self.line += 1;
                self.line_start = self.counted_to + offset + 1;
            }
        }
        self.counted_to = end;
    }

    fn unreadable_here(&mut self, message: String) -> UnreadableTranscript {
        self.count_lines();
        UnreadableTranscript {
            line: self.line,
            column: self.position - self.line_start + 1,
            message,
            index: None,
        }
    }
}

impl<R: BufRead> Iterator for MessageReader<R> {
    type Item = Result<TranscriptMessage, UnreadableTranscript>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match &mut self.source {
            TranscriptSource::Document { messages } => messages.next(),
            TranscriptSource::Lines {
                reader,
                line,
                buffer,
            } => loop {
                if buffer.is_empty() {
                    match reader.read_until(b'\n', buffer) {
                        Ok(0) => break None,
                        Ok(_) => {}
                        Err(error) => break Some(Err(io_unreadable(error))),
                    }
                }
                *line += 1;
                let trimmed = buffer.trim_ascii();
                if trimmed.is_empty() {
                    buffer.clear();
                    continue;
                }
                let index = self.next_index;
                let indent = buffer.len() - buffer.trim_ascii_start().len();
                let parsed = serde_json::from_slice::<RawMessage<'_>>(trimmed)
                    .map_err(|e| {
                        let what = format!("line {line}", line = *line);
                        let mut unreadable = json_error(&e, *line, &what, Some(index));
                        if e.line() <= 1 {
                            unreadable.column += indent;
                        }
                        unreadable
                    })
                    .and_then(|m| {
                        into_message(m, index, *line).map_err(|mut unreadable| {
                            unreadable.column = indent + 1;
                            unreadable
                        })
                    });
                buffer.clear();
                break Some(parsed);
            },
        };
        if let Some(result) = &item {
            self.next_index += 1;
            self.failed = result.is_err();
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<TranscriptMessage, UnreadableTranscript>> {
        match MessageReader::open(text.as_bytes()) {
            Ok(reader) => reader.collect(),
            Err(error) => vec![Err(error)],
        }
    }

    fn lines_and_roles(text: &str) -> Vec<(usize, TranscriptRole, String)> {
        read(text)
            .into_iter()
            .map(|m| m.map(|m| (m.line, m.role, m.text)).unwrap())
            .collect()
    }

    #[test]
    fn reads_json_lines_with_line_numbers() {
        let text = "\n{\"role\":\"user\",\"content\":\"hi\"}\n\n{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"b\"}]}\n";
        assert_eq!(
            lines_and_roles(text),
            vec![
                (2, TranscriptRole::User, "hi".into()),
                (4, TranscriptRole::Assistant, "a\nb".into())
            ]
        );
    }

    #[test]
    fn reads_arrays_and_wrapped_objects_with_line_numbers() {
        let array = "[\n  {\"role\": \"system\", \"content\": null},\n  {\"role\": \"user\",\n   \"content\": \"x\"}\n]";
        assert_eq!(
            lines_and_roles(array),
            vec![
                (2, TranscriptRole::System, String::new()),
                (3, TranscriptRole::User, "x".into())
            ]
        );
        let object = "{\"model\": \"m\",\n \"messages\": [\n {\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c1\"}]}";
        let messages: Vec<TranscriptMessage> =
            read(object).into_iter().map(Result::unwrap).collect();
        assert_eq!(messages[0].line, 3);
        assert_eq!(messages[0].tool_call_id.as_deref(), Some("c1"));
        let one_line = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
        assert_eq!(
            lines_and_roles(one_line),
            vec![(1, TranscriptRole::User, "x".into())]
        );
    }

    #[test]
    fn a_bad_line_is_unreadable_with_line_and_column_and_stops_the_file() {
        let text = "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"user\",\"content\":\"b\"\n{\"role\":\"user\",\"content\":\"c\"}\n";
        let items = read(text);
        assert_eq!(items.len(), 2);
        let error = items[1].clone().unwrap_err();
        assert_eq!((error.line, error.index), (2, Some(1)));
        assert!(error.column > 0);
        assert!(
            error.message.contains("line 2 is not valid JSON"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_broken_document_keeps_the_messages_before_the_break() {
        let items = read(
            "[{\"role\":\"user\",\"content\":\"a\"},\n {\"role\":\"assistant\",\"content\":\"b\"},\n {\"role\":",
        );
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_ok());
        let error = items[2].clone().unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.message.contains("truncated"), "{}", error.message);
    }

    #[test]
    fn columns_point_at_the_offending_byte() {
        let error = read("[\n  {\"role\":\"user\",\"content\":5}]")
            .remove(0)
            .unwrap_err();
        assert_eq!((error.line, error.column), (2, 28));
        let text = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":7}]}";
        let items = read(text);
        let error = items[1].clone().unwrap_err();
        assert_eq!((error.line, error.column), (1, 69));
        let error =
            read("{\"role\":\"user\",\"content\":\"a\"}\n   {\"role\":\"user\",\"content\":7}")
                .remove(1)
                .unwrap_err();
        assert_eq!((error.line, error.column), (2, 29));
    }

    #[test]
    fn a_byte_order_mark_is_not_content() {
        assert_eq!(
            lines_and_roles("\u{FEFF}{\"role\":\"user\",\"content\":\"x\"}\n"),
            vec![(1, TranscriptRole::User, "x".into())]
        );
        assert_eq!(
            lines_and_roles("\u{FEFF}[{\"role\":\"user\",\"content\":\"x\"}]"),
            vec![(1, TranscriptRole::User, "x".into())]
        );
    }

    #[test]
    fn unknown_roles_and_non_transcripts_are_unreadable() {
        let error = read("{\"role\":\"robot\",\"content\":\"a\"}")
            .remove(0)
            .unwrap_err();
        assert!(
            error.message.contains("role \"robot\""),
            "{}",
            error.message
        );
        let error = read("hello world").remove(0).unwrap_err();
        assert!(
            error.message.starts_with("not a transcript"),
            "{}",
            error.message
        );
        let error = read("[{\"role\":\"user\",").remove(0).unwrap_err();
        assert!(error.message.contains("truncated"), "{}", error.message);
        let error = read("\u{0}\u{1}binary").remove(0).unwrap_err();
        assert_eq!(error.line, 1);
    }
}
