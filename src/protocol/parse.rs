//! Reply text → fenced blocks with byte spans. Pure text work: no I/O, no JSON.
//!
//! # The grammar of a reply
//!
//! A reply is UTF-8 text read as CommonMark. Before parsing:
//!
//! 1. a leading byte-order mark is dropped and CRLF / CR line ends become LF;
//! 2. on fence lines, browser copy-paste artefacts ([`is_paste_artefact`]: U+00A0, U+3000,
//!    U+200B, U+FEFF) at the start or end become one ASCII space each, so an indented fence or
//!    one with trailing no-break spaces still reads as a fence (other lines stay byte for byte);
//! 3. a `<think>…</think>` or `<thinking>…</thinking>` element at the start (after whitespace) is
//!    set aside: blocks are looked for only after it. An unclosed one means the reply is all
//!    reasoning.
//!
//! A *call block* is a fenced code block (backticks or tildes, fence length ≥ 3) whose info
//! string's first word is exactly `flycode-call`; a *result block* one whose first word is exactly
//! `flycode-result`. Indented code blocks, other fenced blocks and blocks nested inside another
//! code block are plain text. A fence is *terminated* when its last line is a closing fence of
//! the same character and at least the opener's length; CommonMark lets an unclosed fence run to
//! the end of its container, which for a call means the reply was cut off.
//!
//! Every span is a byte range of [`ParsedReply::text`], the normalized text.

use std::ops::Range;

use super::blocks::fenced_blocks;

/// The info-string word that marks a call block.
pub const CALL_TAG: &str = "flycode-call";
/// The info-string word that marks a result block.
pub const RESULT_TAG: &str = "flycode-result";

/// What a fenced block is, by the first word of its info string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// `flycode-call`
    Call,
    /// `flycode-result`
    Result,
}

/// One call or result block found in a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedBlock {
    /// Call or result.
    pub kind: BlockKind,
    /// The whole block, opening fence to closing fence, in [`ParsedReply::text`].
    pub span: Range<usize>,
    /// The block's content, with container prefixes (`> `, list indentation) removed.
    pub content: String,
    /// Whether the fence was closed.
    pub is_terminated: bool,
    /// Whether the info string held paste artefacts that were read as whitespace.
    pub has_artefact_in_info: bool,
}

/// A reply after normalization, with its call and result blocks located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedReply {
    /// The normalized text every span refers to.
    pub text: String,
    /// Where the reply proper starts: after a leading reasoning element, else 0.
    pub body_start: usize,
    /// The reply held only an unclosed reasoning element.
    pub is_reasoning_only: bool,
    /// Call and result blocks, in order of appearance.
    pub blocks: Vec<FencedBlock>,
    /// Byte offsets in `text` where a paste artefact on a fence line was replaced by a space.
    pub artefact_offsets: Vec<usize>,
}

impl ParsedReply {
    /// The call blocks, in order.
    pub fn call_blocks(&self) -> impl Iterator<Item = &FencedBlock> {
        self.blocks.iter().filter(|b| b.kind == BlockKind::Call)
    }

    /// Whether any result block is present.
    pub fn has_result_block(&self) -> bool {
        self.blocks.iter().any(|b| b.kind == BlockKind::Result)
    }

    /// Whether a fence-line artefact was replaced inside `span`.
    pub fn has_artefact_in(&self, span: &Range<usize>) -> bool {
        self.artefact_offsets.iter().any(|o| span.contains(o))
    }

    /// `span` widened to whole lines: from the start of its first line to the end of its last.
    pub fn whole_lines(&self, span: &Range<usize>) -> Range<usize> {
        let start = self.text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[span.end..]
            .find('\n')
            .map_or(self.text.len(), |i| span.end + i);
        start..end
    }
}

/// Whether `c` is one of the invisible characters browsers put into copied text.
pub fn is_paste_artefact(c: char) -> bool {
    matches!(c, '\u{00A0}' | '\u{3000}' | '\u{200B}' | '\u{FEFF}')
}

/// Whether `c` counts as whitespace between blocks: ASCII whitespace or a paste artefact.
pub fn is_reply_whitespace(c: char) -> bool {
    c.is_ascii_whitespace() || is_paste_artefact(c)
}

/// Normalizes `input` and locates its call and result blocks.
pub fn parse_reply(input: &str) -> ParsedReply {
    let (text, artefact_offsets) = normalize(input);
    let (body_start, is_reasoning_only) = match skip_reasoning(&text) {
        Reasoning::Absent => (0, false),
        Reasoning::Closed { end } => (end, false),
        Reasoning::Unclosed => (text.len(), true),
    };
    let blocks = find_blocks(&text, body_start);
    ParsedReply {
        text,
        body_start,
        is_reasoning_only,
        blocks,
        artefact_offsets,
    }
}

/// Drops a BOM, unifies line ends, and turns paste artefacts at line edges into spaces.
fn normalize(input: &str) -> (String, Vec<usize>) {
    let input = input.strip_prefix('\u{FEFF}').unwrap_or(input);
    let mut text = String::with_capacity(input.len());
    let mut artefacts = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (line, ending, after) = split_line(rest);
        push_line_with_edges_cleaned(&mut text, line, &mut artefacts);
        if ending {
            text.push('\n');
        }
        rest = after;
    }
    (text, artefacts)
}

/// Splits off one line: (line without its ending, whether an ending was present, the rest).
fn split_line(s: &str) -> (&str, bool, &str) {
    match s.find(['\n', '\r']) {
        None => (s, false, ""),
        Some(i) => {
            let skip = if s[i..].starts_with("\r\n") { 2 } else { 1 };
            (&s[..i], true, &s[i + skip..])
        }
    }
}

fn push_line_with_edges_cleaned(text: &mut String, line: &str, artefacts: &mut Vec<usize>) {
    let is_edge = |c: char| c == ' ' || c == '\t' || is_paste_artefact(c);
    let lead_end = line.find(|c| !is_edge(c)).unwrap_or(line.len());
    // Only fence lines need cleaning: elsewhere artefacts are handled where they matter (JSON
    // structure, text around the block), and other content must stay byte for byte.
    let is_fence_like = line[lead_end..].starts_with("```") || line[lead_end..].starts_with("~~~");
    if !is_fence_like || !line.contains(is_paste_artefact) {
        text.push_str(line);
        return;
    }
    let trail_start = line[lead_end..]
        .rfind(|c| !is_edge(c))
        .map_or(line.len(), |i| {
            let at = lead_end + i;
            at + line[at..].chars().next().map_or(0, char::len_utf8)
        });
    let mut push_edge = |text: &mut String, edge: &str| {
        for c in edge.chars() {
            if is_paste_artefact(c) {
                artefacts.push(text.len());
                text.push(' ');
            } else {
                text.push(c);
            }
        }
    };
    push_edge(text, &line[..lead_end]);
    text.push_str(&line[lead_end..trail_start.max(lead_end)]);
    push_edge(text, &line[trail_start.max(lead_end)..]);
}

/// Whether a reply opens with a reasoning element, and where it ends.
pub(crate) enum Reasoning {
    /// No reasoning element.
    Absent,
    /// One that closes at byte `end`.
    Closed {
        /// The byte after its closing tag.
        end: usize,
    },
    /// One that never closes: the whole reply is reasoning.
    Unclosed,
}

/// Recognizes a `<think>` / `<thinking>` element at the very start (after whitespace).
pub(crate) fn skip_reasoning(text: &str) -> Reasoning {
    let start = text.len() - text.trim_start_matches(is_reply_whitespace).len();
    let head = &text[start..];
    for name in ["think", "thinking"] {
        let open = format!("<{name}>");
        if head
            .get(..open.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(&open))
        {
            let close = format!("</{name}>");
            let after_open = start + open.len();
            return match find_ignore_ascii_case(&text[after_open..], &close) {
                Some(at) => Reasoning::Closed {
                    end: after_open + at + close.len(),
                },
                None => Reasoning::Unclosed,
            };
        }
    }
    Reasoning::Absent
}

fn find_ignore_ascii_case(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

/// What a fenced block with this info string is: the first word decides. Zero-width and
/// no-break spaces separate words here too: a pasted "```\u{200B}flycode-call" is still a call
/// (or a forged result).
pub fn block_kind(info: &str) -> Option<BlockKind> {
    let first_word = info
        .split(|c: char| c.is_whitespace() || is_paste_artefact(c))
        .find(|word| !word.is_empty());
    match first_word {
        Some(CALL_TAG) => Some(BlockKind::Call),
        Some(RESULT_TAG) => Some(BlockKind::Result),
        _ => None,
    }
}

/// Finds the call and result blocks of `text[from..]` by CommonMark's block structure
/// ([`super::blocks`]: one pass, no inline parsing, memory within a small multiple of the text).
fn find_blocks(text: &str, from: usize) -> Vec<FencedBlock> {
    let body = &text[from..];
    fenced_blocks(body, |info| block_kind(info).is_some())
        .into_iter()
        .filter_map(|fence| {
            let kind = block_kind(&fence.info)?;
            Some(FencedBlock {
                kind,
                is_terminated: is_closed_fence(&body[fence.span.clone()], &fence.content),
                span: from + fence.span.start..from + fence.span.end,
                content: fence.content,
                has_artefact_in_info: fence.info.contains(is_paste_artefact),
            })
        })
        .collect()
}

/// Whether the source of a fenced block ends with a closing fence matching its opener.
///
/// Two facts must agree: the source has exactly one line more than the opener plus the content
/// (the closing line, which CommonMark does not count as content), and that line, without its
/// container markers, is a run of the fence character at least as long as the opener. The line
/// count catches what the shape alone cannot: a fence indented four spaces or behind a stray `>`
/// is content, not a closer.
fn is_closed_fence(source: &str, content: &str) -> bool {
    let source = source.strip_suffix('\n').unwrap_or(source);
    let source_lines = source.split('\n').count();
    let content_lines = match content.strip_suffix('\n') {
        None if content.is_empty() => 0,
        None => content.split('\n').count(),
        Some(body) => body.split('\n').count(),
    };
    if source_lines != content_lines + 2 {
        return false;
    }
    let mut lines = source.lines();
    let Some(opener) = lines.next().map(strip_container_prefix) else {
        return false;
    };
    let Some(fence_char) = opener.chars().next().filter(|c| *c == '`' || *c == '~') else {
        return false;
    };
    let opener_len = opener.chars().take_while(|c| *c == fence_char).count();
    let Some(last) = lines.next_back().map(strip_container_prefix) else {
        return false;
    };
    let closer_len = last.chars().take_while(|c| *c == fence_char).count();
    closer_len >= opener_len && last[closer_len..].trim_matches([' ', '\t']).is_empty()
}

/// Drops block-quote markers and indentation in front of a fence.
fn strip_container_prefix(line: &str) -> &str {
    line.trim_start_matches([' ', '\t', '>'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_call_block_with_its_span() {
        let reply = parse_reply("```flycode-call\n{}\n```\n");
        assert_eq!(reply.blocks.len(), 1);
        let block = &reply.blocks[0];
        assert_eq!(block.kind, BlockKind::Call);
        assert_eq!(block.content, "{}\n");
        assert!(block.is_terminated);
        assert_eq!(
            &reply.text[block.span.clone()].trim_end(),
            &"```flycode-call\n{}\n```"
        );
    }

    #[test]
    fn crlf_and_bom_are_normalized() {
        let reply = parse_reply("\u{FEFF}```flycode-call\r\n{}\r\n```\r\n");
        assert_eq!(reply.text, "```flycode-call\n{}\n```\n");
        assert!(reply.blocks[0].is_terminated);
    }

    #[test]
    fn unclosed_fence_is_unterminated() {
        let reply = parse_reply("```flycode-call\n{\"id\":");
        assert!(!reply.blocks[0].is_terminated);
        let reply = parse_reply("```flycode-call");
        assert!(!reply.blocks[0].is_terminated);
    }

    #[test]
    fn shorter_closing_fence_does_not_close() {
        let reply = parse_reply("````flycode-call\n{}\n```\n");
        assert!(!reply.blocks[0].is_terminated);
        assert_eq!(reply.blocks[0].content, "{}\n```\n");
    }

    #[test]
    fn an_over_indented_or_quoted_last_line_does_not_close() {
        assert!(!parse_reply("```flycode-call\n{}\n    ```\n").blocks[0].is_terminated);
        assert!(!parse_reply("```flycode-call\n{}\n>```\n").blocks[0].is_terminated);
        assert!(parse_reply("```flycode-call\n{}\n   ```\n").blocks[0].is_terminated);
        assert!(parse_reply("```flycode-call\n\n{}\n\n```").blocks[0].is_terminated);
        assert!(parse_reply("```flycode-call\n```").blocks[0].is_terminated);
        assert!(!parse_reply("```flycode-call\n{}\n\n\n").blocks[0].is_terminated);
        assert!(parse_reply("- ```flycode-call\n  {}\n  ```\n").blocks[0].is_terminated);
        assert!(!parse_reply("- ```flycode-call\n  {}\n\nafter\n").blocks[0].is_terminated);
    }

    #[test]
    fn zero_width_characters_in_the_info_string_separate_words() {
        let reply = parse_reply("```\u{200B}flycode-call\n{}\n```");
        assert_eq!(reply.blocks[0].kind, BlockKind::Call);
        assert!(reply.blocks[0].has_artefact_in_info);
        assert_eq!(
            parse_reply("```flycode-result\u{FEFF} x\n```").blocks[0].kind,
            BlockKind::Result
        );
    }

    #[test]
    fn fence_inside_block_quote_closes() {
        let reply = parse_reply("> ```flycode-call\n> {}\n> ```\n");
        assert!(reply.blocks[0].is_terminated);
        assert_eq!(reply.blocks[0].content, "{}\n");
    }

    #[test]
    fn info_string_needs_the_exact_first_word() {
        assert!(
            parse_reply("```flycode-call extra words\n{}\n```")
                .blocks
                .len()
                == 1
        );
        assert!(parse_reply("```Flycode-call\n{}\n```").blocks.is_empty());
        assert!(parse_reply("```flycode-calls\n{}\n```").blocks.is_empty());
    }

    #[test]
    fn artefacts_at_line_edges_become_spaces() {
        let reply = parse_reply("\u{00A0}```flycode-call\n{}\n```\u{200B}\n");
        assert_eq!(reply.text, " ```flycode-call\n{}\n``` \n");
        assert_eq!(reply.artefact_offsets, vec![0, 23]);
        assert!(reply.blocks[0].is_terminated);
    }

    #[test]
    fn leading_reasoning_is_set_aside() {
        let reply = parse_reply("  <think>```flycode-call\n{}\n```</think>\nhello");
        assert!(reply.blocks.is_empty());
        assert_eq!(&reply.text[reply.body_start..], "\nhello");
        assert!(parse_reply("<THINKING>still drafting").is_reasoning_only);
    }
}
