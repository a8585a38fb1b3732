//! An incremental Server-Sent Events decoder: bytes in, events out, whatever the chunk boundaries
//! (inside a line, a UTF-8 character or a `\r\n`). It knows nothing of HTTP or of OpenAI's JSON.
//!
//! The grammar (WHATWG HTML, "event stream interpretation"), as far as a client of a chat API
//! needs it:
//!
//! - lines end with `\r\n`, `\n` or `\r`; a UTF-8 byte order mark at the very start is skipped;
//! - a line starting with `:` is a comment (`: keep-alive`) and is ignored;
//! - `field: value` or `field:value` (one leading space of the value is dropped) or a bare
//!   `field` (empty value); fields are `data` (appended, lines joined with `\n`), `event`, `id`
//!   and `retry`; unknown fields are ignored;
//! - an empty line dispatches the event if it has data, and resets the fields.
//!
//! Unlike the standard, [`SseDecoder::finish`] dispatches an event whose final blank line never
//! came (some servers close right after `data: [DONE]\n`): the caller decides whether a stream
//! that ended there is complete.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any (`None` means the default type, `message`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field seen, if any.
    pub id: Option<String>,
}

/// Decodes a byte stream into [`SseEvent`]s; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` opening the next one belongs to it.
    after_cr: bool,
    /// Whether any byte was seen (for the byte order mark).
    started: bool,
    /// The event being assembled.
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Decodes `bytes`, the next piece of the stream, and returns the events it completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => {
                    self.line.push(byte);
                    if !self.started && self.line.len() == BOM.len() && self.line == BOM {
                        self.line.clear();
                        self.started = true;
                    } else if !self.started && !BOM.starts_with(&self.line) {
                        self.started = true;
                    }
                }
            }
        }
        events
    }

    /// Ends the stream: processes an unterminated last line and returns the event still pending,
    /// if it has data.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events);
        }
        self.end_line(&mut events);
        events.pop()
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        self.started = true;
        let line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                events.push(event);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        Some(SseEvent {
            event,
            data,
            id: self.id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events: Vec<SseEvent> = chunks.iter().flat_map(|c| decoder.feed(c)).collect();
        events.extend(decoder.finish());
        events
    }

    fn data(text: &str) -> SseEvent {
        SseEvent {
            data: text.to_owned(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn decodes_data_events_with_any_line_end() {
        let input = b"data: one\n\ndata: two\r\n\r\ndata: three\r\rdata:four\n\n";
        assert_eq!(
            decode_all(&[input]),
            vec![data("one"), data("two"), data("three"), data("four")]
        );
    }

    #[test]
    fn joins_multi_line_data_with_newlines() {
        let input = b"data: {\"a\":\ndata:  1}\n\n";
        assert_eq!(decode_all(&[input]), vec![data("{\"a\":\n 1}")]);
    }

    #[test]
    fn ignores_comments_retry_and_unknown_fields() {
        let input = b": keep-alive\n\nretry: 3000\nfoo: bar\ndata: x\n\n: ping\n\n";
        assert_eq!(decode_all(&[input]), vec![data("x")]);
    }

    #[test]
    fn keeps_event_type_and_last_id() {
        let input = b"event: delta\nid: 7\ndata: a\n\ndata: b\n\n";
        let events = decode_all(&[input]);
        assert_eq!(events[0].event.as_deref(), Some("delta"));
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].event, None);
        assert_eq!(events[1].id.as_deref(), Some("7"));
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert_eq!(decode_all(&[b"event: ping\n\n"]), vec![]);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        let events = decode_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(events, vec![data("a"), data("b")]);
    }

    #[test]
    fn utf8_character_split_across_chunks_survives() {
        let input = "data: h\u{e9}\u{1F600}\n\n".as_bytes();
        let events = decode_all(&[&input[..8], &input[8..10], &input[10..]]);
        assert_eq!(events, vec![data("h\u{e9}\u{1F600}")]);
    }

    #[test]
    fn skips_a_leading_byte_order_mark_even_when_split() {
        let events = decode_all(&[b"\xEF", b"\xBB\xBFdata: x\n\n"]);
        assert_eq!(events, vec![data("x")]);
    }

    #[test]
    fn finish_dispatches_an_unterminated_last_event() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), vec![data("[DONE]")]);
        assert_eq!(decode_all(&[b"data: [DONE]\n"]), vec![data("[DONE]")]);
        assert_eq!(decode_all(&[b"data: x\n\n"]), vec![data("x")]);
    }

    const SAMPLE: &str = ": keep-alive\r\n\r\nevent: message\r\nid: 1\r\ndata: {\"text\":\"h\u{e9}llo \u{1F600}\"}\r\n\r\n\
        data: line one\ndata: line two\n\nretry: 10\rdata: cr\r\rdata: [DONE]\n\n";

    proptest! {
        #[test]
        fn splitting_the_input_anywhere_gives_the_same_events(
            cuts in proptest::collection::vec(0..SAMPLE.len(), 0..12)
        ) {
            let bytes = SAMPLE.as_bytes();
            let whole = decode_all(&[bytes]);
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut start = 0;
            for cut in cuts {
                chunks.push(&bytes[start..cut]);
                start = cut;
            }
            chunks.push(&bytes[start..]);
            prop_assert_eq!(decode_all(&chunks), whole);
        }

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_all(&[&bytes]);
        }
    }

    #[test]
    fn sample_decodes_as_expected() {
        let events = decode_all(&[SAMPLE.as_bytes()]);
        let datas: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(
            datas,
            [
                "{\"text\":\"h\u{e9}llo \u{1F600}\"}",
                "line one\nline two",
                "cr",
                "[DONE]"
            ]
        );
    }
}
