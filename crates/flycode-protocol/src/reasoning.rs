//! Reasoning in a reply (PROTOCOL.md §1 (Reading a reply)): what a reasoning model drafts
//! before it answers never runs, wherever it stands and in either dialect. A reasoning element
//! is `<think>…</think>` or `<thinking>…</thinking>` (tags in any ASCII case) opened outside
//! code; it ends at its own closing tag outside code, or runs to the end of the reply when it
//! never closes. A closing tag with no opening tag before it (chat templates that put `<think>`
//! in the prompt) makes everything before it reasoning. Inside reasoning every other tag is text.
//!
//! "Outside code" is read as each dialect reads code: the flycode dialect's fenced code blocks
//! come from CommonMark's block structure ([`super::blocks::fence_spans`]); the tag reader skips
//! its own fences and tag bodies and calls [`reasoning_tag_at`] itself. Inline code spans
//! ([`super::inline_code`]) are code in both. Pure text work, linear in the text.

use std::borrow::Cow;
use std::ops::Range;

use super::inline_code::CodeSpans;

/// A reasoning tag as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningTag {
    /// `<think>` or `<thinking>`: the element's name.
    Open(&'static str),
    /// `</think>` or `</thinking>`: the element's name.
    Close(&'static str),
}

/// The element names, longest first (so `<thinking>` is not read as `<think` plus text).
const NAMES: [&str; 2] = ["thinking", "think"];

/// The reasoning tag at the start of `rest`, with its length in bytes.
pub fn reasoning_tag_at(rest: &str) -> Option<(ReasoningTag, usize)> {
    let bytes = rest.as_bytes();
    if bytes.first() != Some(&b'<') {
        return None;
    }
    let closing = bytes.get(1) == Some(&b'/');
    let name_start = if closing { 2 } else { 1 };
    NAMES.into_iter().find_map(|name| {
        let end = name_start + name.len();
        let matches = bytes
            .get(name_start..end)
            .is_some_and(|written| written.eq_ignore_ascii_case(name.as_bytes()))
            && bytes.get(end) == Some(&b'>');
        matches.then(|| {
            let tag = if closing {
                ReasoningTag::Close(name)
            } else {
                ReasoningTag::Open(name)
            };
            (tag, end + 1)
        })
    })
}

/// Whether `text` may hold a reasoning tag at all: the quick test that spares a reply without
/// one the second look.
pub fn may_hold_reasoning(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b'<', bytes).any(|at| {
        let after = &bytes[at + 1..];
        let after = after.strip_prefix(b"/").unwrap_or(after);
        after
            .get(..5)
            .is_some_and(|name| name.eq_ignore_ascii_case(b"think"))
    })
}

/// The reasoning tags' state while a text is read, and the spans found.
#[derive(Debug, Default)]
struct ReasoningSpans {
    spans: Vec<Range<usize>>,
    /// The open element: where it started and its name.
    open: Option<(usize, &'static str)>,
}

impl ReasoningSpans {
    /// Takes `tag`, written at `start..end`. A closing tag with no opening tag before it makes
    /// everything up to `end` reasoning.
    fn take(&mut self, tag: ReasoningTag, start: usize, end: usize) {
        match (self.open, tag) {
            (None, ReasoningTag::Open(name)) => self.open = Some((start, name)),
            (None, ReasoningTag::Close(_)) => {
                self.spans.clear();
                self.spans.push(0..end);
            }
            (Some((from, open)), ReasoningTag::Close(name)) if open == name => {
                self.spans.push(from..end);
                self.open = None;
            }
            // Inside reasoning, any other tag is text.
            (Some(_), _) => {}
        }
    }

    /// The spans, in order and disjoint; an element still open runs to `len`.
    fn finish(mut self, len: usize) -> Vec<Range<usize>> {
        if let Some((from, _)) = self.open {
            self.spans.push(from..len);
        }
        self.spans
    }

    /// Reads the prose `text[start..end]` (no fenced block in it) for reasoning tags, skipping
    /// inline code.
    fn read_prose(&mut self, text: &str, start: usize, end: usize) {
        let prose = &text[start..end];
        let bytes = prose.as_bytes();
        let mut code = CodeSpans::new();
        let mut at = 0;
        while let Some(next) = memchr::memchr2(b'`', b'<', &bytes[at..]) {
            at += next;
            if bytes[at] == b'`' {
                at = code.skip(prose, at);
                continue;
            }
            match reasoning_tag_at(&prose[at..]) {
                Some((tag, length)) => {
                    self.take(tag, start + at, start + at + length);
                    at += length;
                }
                None => at += 1,
            }
        }
    }
}

/// The reasoning of `text` whose fenced code blocks are `fences` (in order, disjoint): its
/// spans, in order and disjoint.
pub fn reasoning_spans(text: &str, fences: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut reader = ReasoningSpans::default();
    let mut from = 0;
    for fence in fences {
        if fence.start >= from {
            reader.read_prose(text, from, fence.start);
        }
        from = from.max(fence.end);
    }
    if from < text.len() {
        reader.read_prose(text, from, text.len());
    }
    reader.finish(text.len())
}

/// `text` without the byte ranges `spans` (in order, disjoint).
pub fn remove_spans(text: &str, spans: &[Range<usize>]) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut from = 0;
    for span in spans {
        kept.push_str(&text[from..span.start]);
        from = span.end;
    }
    kept.push_str(&text[from..]);
    kept
}

/// `text` without its reasoning, its code read as the flycode dialect reads it (CommonMark):
/// what a reply says once the reasoning is set aside (the text calls of native mode are looked
/// for in it).
pub fn without_reasoning(text: &str) -> Cow<'_, str> {
    if !may_hold_reasoning(text) {
        return Cow::Borrowed(text);
    }
    let spans = reasoning_spans(text, &super::blocks::fence_spans(text));
    if spans.is_empty() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(remove_spans(text, &spans))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn without(text: &str) -> String {
        without_reasoning(text).into_owned()
    }

    #[test]
    fn tags_are_read_in_any_case_and_only_whole() {
        assert_eq!(
            reasoning_tag_at("<THINKING>x"),
            Some((ReasoningTag::Open("thinking"), 10))
        );
        assert_eq!(
            reasoning_tag_at("</Think>"),
            Some((ReasoningTag::Close("think"), 8))
        );
        assert_eq!(reasoning_tag_at("<thinker>"), None);
        assert_eq!(reasoning_tag_at("<think x>"), None);
        assert!(may_hold_reasoning("a </THINK"));
        assert!(!may_hold_reasoning("a <b>think</b>"));
    }

    #[test]
    fn reasoning_anywhere_outside_code_is_set_aside() {
        assert_eq!(without("a<think>b</think>c<thinking>d</thinking>e"), "ace");
        assert_eq!(without("a\n<think>never closed\n```x\n```\n"), "a\n");
        // A closing tag of the other name, or a second opening tag, is text inside reasoning.
        assert_eq!(without("<think>a</thinking>b</think>c"), "c");
        // A closing tag without an opening one: everything before it was reasoning.
        assert_eq!(without("drafting <b>x</b></think>\nanswer"), "\nanswer");
        assert_eq!(without("<think>a</think>b<think>c</think>d</think>e"), "e");
    }

    #[test]
    fn tags_in_code_are_text() {
        let fenced = "```\n<think>\n```\nafter";
        assert_eq!(without(fenced), fenced);
        let inline = "use `<think>` and `</think>` tags";
        assert_eq!(without(inline), inline);
        // Code inside reasoning hides a closing tag too.
        assert_eq!(
            without("<think>\n```\n</think>\n```\nstill `</think>` </think>done"),
            "done"
        );
    }
}
