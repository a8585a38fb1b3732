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
//! 3. reasoning (`<think>…</think>`, `<thinking>…</thinking>`, wherever it stands outside code;
//!    see [`super::reasoning`]) is set aside: it is taken out of the text before blocks are looked
//!    for, so a call drafted there is never a call. An unclosed element runs to the end.
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

use super::blocks::{fence_spans, fenced_blocks};
use super::reasoning::{may_hold_reasoning, reasoning_spans, remove_spans};

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
    /// The normalized text every span refers to, its reasoning taken out.
    pub text: String,
    /// Whether reasoning was taken out.
    pub had_reasoning: bool,
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
    let (text, artefact_offsets, had_reasoning) = set_aside_reasoning(text, artefact_offsets);
    let blocks = find_blocks(&text);
    ParsedReply {
        text,
        had_reasoning,
        blocks,
        artefact_offsets,
    }
}

/// The normalized text without its reasoning, the artefact offsets moved with it (those inside
/// reasoning dropped), and whether any was taken out.
fn set_aside_reasoning(text: String, artefacts: Vec<usize>) -> (String, Vec<usize>, bool) {
    if !may_hold_reasoning(&text) {
        return (text, artefacts, false);
    }
    let spans = reasoning_spans(&text, &fence_spans(&text));
    if spans.is_empty() {
        return (text, artefacts, false);
    }
    let mut kept_artefacts = Vec::with_capacity(artefacts.len());
    let (mut next_span, mut removed) = (0, 0);
    for offset in artefacts {
        while let Some(span) = spans.get(next_span).filter(|span| span.end <= offset) {
            removed += span.len();
            next_span += 1;
        }
        if spans.get(next_span).is_none_or(|span| offset < span.start) {
            kept_artefacts.push(offset - removed);
        }
    }
    (remove_spans(&text, &spans), kept_artefacts, true)
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

/// Finds the call and result blocks of `text` by CommonMark's block structure
/// ([`super::blocks`]: one pass, no inline parsing, memory within a small multiple of the text).
fn find_blocks(text: &str) -> Vec<FencedBlock> {
    fenced_blocks(text, |info| block_kind(info).is_some())
        .into_iter()
        .filter_map(|fence| {
            let kind = block_kind(&fence.info)?;
            Some(FencedBlock {
                kind,
                is_terminated: is_closed_fence(&text[fence.span.clone()], &fence.content),
                span: fence.span.clone(),
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
    fn reasoning_is_taken_out_wherever_it_stands() {
        let reply = parse_reply("  <think>draft\n```flycode-call\n{}\n```\n</think>\nhello");
        assert!(reply.blocks.is_empty());
        assert_eq!(reply.text, "  \nhello");
        assert!(reply.had_reasoning);
        let reply = parse_reply("Sure.\n<Thinking>\n~~~~flycode-call\n{}\n~~~~\n</thinking>\n");
        assert!(reply.blocks.is_empty(), "{reply:?}");
        assert!(parse_reply("<THINKING>still drafting").text.is_empty());
        // Closed on the line the call block opens on: the block is the reply's.
        let reply = parse_reply("<think>x</think>```flycode-call\n{}\n```");
        assert_eq!(reply.blocks.len(), 1);
        assert_eq!(reply.text, "```flycode-call\n{}\n```");
    }

    #[test]
    fn artefacts_move_with_the_text_reasoning_leaves() {
        let reply =
            parse_reply("<think>\n\u{00A0}```\n```\n</think>\n\u{00A0}```flycode-call\n{}\n```");
        assert_eq!(reply.artefact_offsets, vec![1]);
        assert_eq!(reply.text, "\n ```flycode-call\n{}\n```");
    }
}
