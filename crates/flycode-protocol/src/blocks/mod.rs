//! The block structure of a reply, read for one purpose: where its fenced code blocks are, what
//! they hold and what their info strings say (PROTOCOL.md §1, Reading a reply).
//!
//! CommonMark decides what is a fence line by line: block quotes, list items, indented code,
//! HTML blocks, paragraphs (with lazy continuation) and setext headings all change it. This is a
//! port of the block pass of pulldown-cmark 0.13 (MIT, Copyright 2015 Google Inc.; with no
//! extensions, the options flycode always used), which flycode used whole until it was found
//! that its inline pass, never needed here, takes ~50 bytes of memory per `[`, `*` or line of a
//! paragraph: a 15 MB reply of `[[[[…` took 0.95 GB. Here nothing inline is read, and the only
//! state is the stack of open containers (one byte each, at most one per byte of a line), so a
//! reply is read in one pass, in time linear in its size, in memory within a small multiple of
//! it. The tests below compare the two on generated Markdown (a property test) and on the 1,154
//! examples of pulldown-cmark's own test suite (`fixtures/commonmark/`), and the fuzz target
//! `blocks` on any text; pulldown-cmark itself still unescapes an info string with `\` or `&`.
//!
//! Link reference definitions are read for how many lines they take (`refdef.rs`): a paragraph of
//! them alone is not underlined into a setext heading, which changes what the next line may be.

pub mod line;
pub mod refdef;
pub mod scan;

use std::ops::Range;

use line::LineStart;
use scan::{
    html_end_tag, is_atx_heading, is_blank_line, is_hrule, is_html_type_7, is_paragraph_interrupt,
    scan_closing_code_fence, scan_code_fence, scan_nextline, scan_setext_heading,
    scan_whitespace_no_nl, starts_html_block_type_6,
};

/// One fenced code block: where it is, its info string (unescaped) and its content (container
/// prefixes removed), exactly as pulldown-cmark's events give them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    /// From the first fence character to the end of the closing fence (or where the block
    /// ended without one).
    pub span: Range<usize>,
    /// The info string after backslash escapes and entities are resolved.
    pub info: String,
    /// The content, each line without its container prefix and fence indentation.
    pub content: String,
}

/// The fenced code blocks of `text` whose info string `wanted` accepts, in order; the content of
/// the others is never copied.
pub fn fenced_blocks(text: &str, wanted: impl Fn(&str) -> bool) -> Vec<Fence> {
    read_blocks(text, &wanted, None)
}

/// Where every fenced code block of `text` is, whatever its info string, in order: the code in
/// which a reasoning element's tags are text ([`super::reasoning`]). One range per fence, no
/// content copied.
pub fn fence_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    read_blocks(text, &|_| false, Some(&mut spans));
    spans
}

fn read_blocks(
    text: &str,
    wanted: &dyn Fn(&str) -> bool,
    spans: Option<&mut Vec<Range<usize>>>,
) -> Vec<Fence> {
    let mut reader = BlockReader {
        bytes: text.as_bytes(),
        text,
        spine: Vec::new(),
        last_line_blank: false,
        marked_end: 0,
        begin_list_item: None,
        fences: Vec::new(),
        wanted,
        spans,
    };
    let mut ix = 0;
    while ix < text.len() {
        ix = reader.parse_block(ix);
    }
    reader.fences
}

/// An open container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    Quote,
    List {
        ch: u8,
        is_tight: bool,
        last_line_empty: bool,
    },
    Item {
        indent: u8,
    },
}

/// A [`Container`] in one byte: a line of `>>>>…` or `- - - …` opens one per byte or two, so the
/// stack of a 15 MB reply stays within its size. `0` a quote; `1..=127` an item, its indentation
/// plus one; `128..` a list: its marker's place in [`LIST_MARKERS`] times 4, plus 2 when tight,
/// plus 1 when its last line was empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed(u8);

const LIST_MARKERS: &[u8; 5] = b"-+*.)";

impl Packed {
    fn pack(container: Container) -> Packed {
        Packed(match container {
            Container::Quote => 0,
            Container::Item { indent } => indent.min(126) + 1,
            Container::List {
                ch,
                is_tight,
                last_line_empty,
            } => {
                let marker = LIST_MARKERS.iter().position(|m| *m == ch).unwrap_or(0) as u8;
                128 + marker * 4 + u8::from(is_tight) * 2 + u8::from(last_line_empty)
            }
        })
    }

    fn unpack(self) -> Container {
        match self.0 {
            0 => Container::Quote,
            1..=127 => Container::Item { indent: self.0 - 1 },
            list => {
                let bits = list - 128;
                Container::List {
                    ch: LIST_MARKERS[usize::from(bits / 4).min(LIST_MARKERS.len() - 1)],
                    is_tight: bits & 2 != 0,
                    last_line_empty: bits & 1 != 0,
                }
            }
        }
    }
}

struct BlockReader<'t, 'w, 's> {
    text: &'t str,
    bytes: &'t [u8],
    /// The open containers, outermost first (pulldown-cmark's spine without its leaf).
    spine: Vec<Packed>,
    last_line_blank: bool,
    /// No list at this index of `spine` or after it has `last_line_empty` set: clearing the flags
    /// after a container that did not continue walks only up to here, so lines that end a deep
    /// nest lazily cost their own length, not the nest's depth.
    marked_end: usize,
    /// Where a list item that began with a blank line began its content.
    begin_list_item: Option<usize>,
    fences: Vec<Fence>,
    wanted: &'w dyn Fn(&str) -> bool,
    /// Where every fence is, when asked for ([`fence_spans`]).
    spans: Option<&'s mut Vec<Range<usize>>>,
}

impl<'t> BlockReader<'t, '_, '_> {
    /// How many containers `line` continues (all of them when the rest is blank lines in a
    /// list, as pulldown-cmark shortcuts); `update_flags` at the start of a block.
    fn scan_containers(&mut self, line: &mut LineStart<'_>, update_flags: bool) -> usize {
        let mut matched = 0;
        let depth = self.spine.len();
        for slot in &mut self.spine {
            let mut container = slot.unpack();
            match &mut container {
                Container::List {
                    last_line_empty, ..
                } if update_flags => {
                    if line.is_at_eol() {
                        if *last_line_empty && line.remaining_space() == 0 {
                            return depth;
                        }
                        *last_line_empty = true;
                        self.marked_end = self.marked_end.max(matched + 1);
                    } else {
                        *last_line_empty = false;
                    }
                }
                Container::Quote => {
                    let save = line.clone();
                    let _ = line.scan_space(3);
                    if !line.scan_blockquote_marker() {
                        *line = save;
                        break;
                    }
                }
                Container::Item { indent } => {
                    let save = line.clone();
                    if !line.scan_space(usize::from(*indent)) && !line.is_at_eol() {
                        *line = save;
                        break;
                    }
                }
                Container::List { .. } => {}
            }
            *slot = Packed::pack(container);
            matched += 1;
        }
        // The containers after the one that failed (pulldown-cmark's iterator has moved past it).
        let end = self.marked_end.min(self.spine.len());
        for slot in self.spine.get_mut(matched + 1..end).unwrap_or_default() {
            if let Container::List { ch, is_tight, .. } = slot.unpack() {
                *slot = Packed::pack(Container::List {
                    ch,
                    is_tight,
                    last_line_empty: false,
                });
            }
        }
        if matched < self.spine.len() {
            self.marked_end = self.marked_end.min(matched + 1);
        }
        matched
    }

    fn top(&self) -> Option<Container> {
        self.spine.last().map(|slot| slot.unpack())
    }

    fn replace_top(&mut self, container: Container) {
        if let Some(slot) = self.spine.last_mut() {
            *slot = Packed::pack(container);
        }
    }

    fn pop(&mut self) {
        if let Some(Container::List { is_tight: true, .. }) = self.spine.pop().map(Packed::unpack) {
            self.begin_list_item = None;
        }
        self.marked_end = self.marked_end.min(self.spine.len());
    }

    fn finish_list(&mut self) {
        self.finish_empty_list_item();
        if let Some(Container::List { .. }) = self.top() {
            self.pop();
        }
        if self.last_line_blank {
            let grandparent = self.spine.len().checked_sub(2);
            if let Some(slot) = grandparent.and_then(|i| self.spine.get_mut(i))
                && let Container::List {
                    ch,
                    last_line_empty,
                    ..
                } = slot.unpack()
            {
                *slot = Packed::pack(Container::List {
                    ch,
                    is_tight: false,
                    last_line_empty,
                });
            }
            self.last_line_blank = false;
        }
    }

    fn finish_empty_list_item(&mut self) {
        if self.begin_list_item.is_some()
            && self.last_line_blank
            && let Some(Container::Item { .. }) = self.top()
        {
            self.pop();
        }
        self.begin_list_item = None;
    }

    fn continue_list(&mut self, ch: u8) {
        self.finish_empty_list_item();
        if let Some(top) = self.top() {
            if let Container::List {
                ch: existing,
                last_line_empty,
                ..
            } = top
                && existing == ch
            {
                if self.last_line_blank {
                    self.replace_top(Container::List {
                        ch,
                        is_tight: false,
                        last_line_empty,
                    });
                    self.last_line_blank = false;
                }
                return;
            }
            self.finish_list();
        }
        self.spine.push(Packed::pack(Container::List {
            ch,
            is_tight: true,
            last_line_empty: false,
        }));
        self.last_line_blank = false;
    }

    /// Reads the block starting at the line at `start_ix`; returns where the next one starts.
    fn parse_block(&mut self, start_ix: usize) -> usize {
        let bytes = self.bytes;
        let mut line = LineStart::new(&bytes[start_ix..]);
        let continued = self.scan_containers(&mut line, true);
        while self.spine.len() > continued {
            self.pop();
        }
        if let Some(next) = self.open_containers(&mut line, start_ix) {
            return next;
        }
        let ix = start_ix + line.bytes_scanned();
        if let Some(n) = is_blank_line(&bytes[ix..]) {
            self.note_blank_line();
            return ix + n;
        }
        let indent = line.scan_space_upto(4);
        if indent == 4 {
            self.finish_list();
            return self.parse_indented_code_block(start_ix + line.bytes_scanned());
        }
        self.parse_leaf_block(start_ix, line, indent)
    }

    /// Opens the list items and block quotes `line` starts with; `Some(next)` when a list item
    /// begins with a blank line (the block ends there).
    fn open_containers(&mut self, line: &mut LineStart<'t>, start_ix: usize) -> Option<usize> {
        let bytes = self.bytes;
        loop {
            let save = line.clone();
            let outer_indent = line.scan_space_upto(4);
            if outer_indent >= 4 {
                *line = save;
                return None;
            }
            if let Some((ch, indent)) = line.scan_list_marker_with_indent(outer_indent) {
                let after_marker = start_ix + line.bytes_scanned();
                self.continue_list(ch);
                self.spine.push(Packed::pack(Container::Item {
                    indent: u8::try_from(indent).unwrap_or(u8::MAX),
                }));
                if let Some(n) = is_blank_line(&bytes[after_marker..]) {
                    self.begin_list_item = Some(after_marker + n);
                    return Some(after_marker + n);
                }
            } else if line.scan_blockquote_marker() {
                self.finish_list();
                self.spine.push(Packed::pack(Container::Quote));
            } else {
                *line = save;
                return None;
            }
        }
    }

    /// A blank line inside the open containers.
    fn note_blank_line(&mut self) {
        match self.top() {
            Some(Container::Quote) => {}
            Some(Container::Item { .. }) if self.begin_list_item.is_some() => {
                self.last_line_blank = true;
                // A blank list item nests nothing: its indentation no longer counts.
                self.replace_top(Container::Item { indent: 0 });
            }
            _ => self.last_line_blank = true,
        }
    }

    /// A block that holds no other: HTML, a thematic break, an ATX heading, a fenced code block,
    /// link reference definitions or a paragraph; `line` is past the containers and `indent`.
    fn parse_leaf_block(&mut self, start_ix: usize, line: LineStart<'t>, indent: usize) -> usize {
        let bytes = self.bytes;
        let ix = start_ix + line.bytes_scanned();
        if bytes[ix] == b'<' {
            if let Some(end_tag) = html_end_tag(&bytes[ix + 1..]) {
                self.finish_list();
                return self.parse_html_block_type_1_to_5(ix, end_tag);
            }
            if starts_html_block_type_6(&bytes[ix + 1..]) || is_html_type_7(&bytes[ix..]) {
                self.finish_list();
                return self.parse_html_block_type_6_or_7(ix);
            }
        }
        if let Ok(n) = is_hrule(&bytes[ix..]) {
            self.finish_list();
            return ix + n;
        }
        if is_atx_heading(&bytes[ix..]) {
            self.finish_list();
            return ix + scan_nextline(&bytes[ix..]);
        }
        if let Some((n, fence_ch)) = scan_code_fence(&bytes[ix..]) {
            self.finish_list();
            return self.parse_fenced_code_block(ix, indent, fence_ch, n);
        }
        // Link reference definitions, each possibly followed (lazily, even) by another.
        let (mut start_ix, mut line) = (start_ix, line);
        while let Some(end) = self.parse_refdef(start_ix + line.bytes_scanned()) {
            let Some(blank) = is_blank_line(&bytes[end..]) else {
                self.finish_list();
                return end;
            };
            let next = end + blank;
            let Some(next_line) = self.next_line_after_refdef(next) else {
                self.finish_list();
                return next;
            };
            (start_ix, line) = (next, next_line);
        }
        self.parse_paragraph(start_ix + line.bytes_scanned())
    }

    /// A paragraph (or link reference definitions: the same lines): until a line that is blank,
    /// interrupts it, or underlines it as a setext heading.
    fn parse_paragraph(&mut self, start_ix: usize) -> usize {
        self.finish_list();
        let bytes = self.bytes;
        let mut ix = start_ix;
        loop {
            let next_ix = ix + scan_nextline(&bytes[ix..]);
            ix = next_ix;
            let mut line = LineStart::new(&bytes[ix..]);
            let continued = self.scan_containers(&mut line, false);
            let current_container = continued == self.spine.len();
            if !line.scan_space(4) {
                let ix_new = ix + line.bytes_scanned();
                if current_container && let Some(n) = scan_setext_heading(&bytes[ix_new..]) {
                    return ix_new + n;
                }
                if is_paragraph_interrupt(&bytes[ix_new..], current_container) {
                    break;
                }
            }
            line.scan_all_space();
            if line.is_at_eol() {
                break;
            }
            ix = next_ix + line.bytes_scanned();
        }
        ix
    }

    fn parse_indented_code_block(&mut self, start_ix: usize) -> usize {
        let bytes = self.bytes;
        self.last_line_blank = false;
        let mut ix = start_ix;
        loop {
            ix += scan_nextline(&bytes[ix..]);
            let mut line = LineStart::new(&bytes[ix..]);
            let continued = self.scan_containers(&mut line, false);
            if continued < self.spine.len() || !(line.scan_space(4) || line.is_at_eol()) {
                break;
            }
            let next_line_ix = ix + line.bytes_scanned();
            if next_line_ix == bytes.len() {
                break;
            }
            ix = next_line_ix;
            self.last_line_blank = is_blank_line(&bytes[ix..]).is_some();
        }
        ix
    }

    fn parse_html_block_type_1_to_5(&mut self, start_ix: usize, end_tag: &str) -> usize {
        let bytes = self.bytes;
        let mut ix = start_ix;
        loop {
            let line_start_ix = ix;
            ix += scan_nextline(&bytes[ix..]);
            let mut line = LineStart::new(&bytes[ix..]);
            let continued = self.scan_containers(&mut line, false);
            if continued < self.spine.len() || self.text[line_start_ix..ix].contains(end_tag) {
                break;
            }
            let next_line_ix = ix + line.bytes_scanned();
            if next_line_ix == bytes.len() {
                break;
            }
            ix = next_line_ix;
        }
        ix
    }

    fn parse_html_block_type_6_or_7(&mut self, start_ix: usize) -> usize {
        let bytes = self.bytes;
        let mut ix = start_ix;
        loop {
            ix += scan_nextline(&bytes[ix..]);
            let mut line = LineStart::new(&bytes[ix..]);
            let continued = self.scan_containers(&mut line, false);
            if continued < self.spine.len() || line.is_at_eol() {
                break;
            }
            let next_line_ix = ix + line.bytes_scanned();
            if next_line_ix == bytes.len() || is_blank_line(&bytes[next_line_ix..]).is_some() {
                break;
            }
            ix = next_line_ix;
        }
        ix
    }

    /// A fenced code block opened at `start_ix` by `n_fence_char` of `fence_ch`, indented
    /// `indent` columns: until its closing fence, or the line where its container ends.
    fn parse_fenced_code_block(
        &mut self,
        start_ix: usize,
        indent: usize,
        fence_ch: u8,
        n_fence_char: usize,
    ) -> usize {
        let bytes = self.bytes;
        let info_start =
            start_ix + n_fence_char + scan_whitespace_no_nl(&bytes[start_ix + n_fence_char..]);
        let mut ix = info_start + scan_nextline(&bytes[info_start..]);
        let info_end = ix
            - bytes[info_start..ix]
                .iter()
                .rev()
                .take_while(|b| (0x09..=0x0d).contains(*b) || **b == b' ')
                .count();
        let info = unescape_info(
            &self.text[start_ix..start_ix + n_fence_char],
            &self.text[info_start..info_end.max(info_start)],
        );
        let wanted = (self.wanted)(&info);
        let mut content = String::new();
        let end = loop {
            let mut line = LineStart::new(&bytes[ix..]);
            let continued = self.scan_containers(&mut line, false);
            if continued < self.spine.len() {
                break ix;
            }
            let _ = line.scan_space(indent);
            let mut close_line = line.clone();
            if !close_line.scan_space(4 - indent) {
                let close_ix = ix + close_line.bytes_scanned();
                if let Some(n) = scan_closing_code_fence(&bytes[close_ix..], fence_ch, n_fence_char)
                {
                    let end = close_ix + n;
                    ix = end + is_blank_line(&bytes[end..]).unwrap_or(0);
                    break end;
                }
            }
            let remaining_space = line.remaining_space();
            ix += line.bytes_scanned();
            let next_ix = ix + scan_nextline(&bytes[ix..]);
            if wanted {
                content.push_str(&"   "[..remaining_space.min(3)]);
                content.push_str(&self.text[ix..next_ix]);
            }
            ix = next_ix;
        };
        if let Some(spans) = self.spans.as_mut() {
            spans.push(start_ix..end);
        }
        if wanted {
            self.fences.push(Fence {
                span: start_ix..end,
                info,
                content,
            });
        }
        ix
    }
}

/// The info string as pulldown-cmark gives it: backslash escapes and entities resolved. Only an
/// info string with a `\` or `&` needs it; that one line is read by pulldown-cmark itself.
pub fn unescape_info(fence: &str, raw: &str) -> String {
    if !raw.contains(['\\', '&']) {
        return raw.to_owned();
    }
    let line = format!("{fence} {raw}\n");
    pulldown_cmark::Parser::new_ext(&line, pulldown_cmark::Options::empty())
        .find_map(|event| match event {
            pulldown_cmark::Event::Start(pulldown_cmark::Tag::CodeBlock(
                pulldown_cmark::CodeBlockKind::Fenced(info),
            )) => Some(info.into_string()),
            _ => None,
        })
        .unwrap_or_else(|| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

    /// What flycode read before: every fenced code block from pulldown-cmark's events.
    fn by_pulldown_cmark(text: &str) -> Vec<Fence> {
        let mut fences = Vec::new();
        let mut open: Option<(usize, String, String)> = None;
        for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
            match event {
                Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                    open = Some((range.start, info.into_string(), String::new()));
                }
                Event::Text(chunk) => {
                    if let Some((_, _, content)) = open.as_mut() {
                        content.push_str(&chunk);
                    }
                }
                Event::End(TagEnd::CodeBlock) => {
                    if let Some((start, info, content)) = open.take() {
                        fences.push(Fence {
                            span: start..range.end,
                            info,
                            content,
                        });
                    }
                }
                _ => {}
            }
        }
        fences
    }

    fn agree(text: &str) {
        assert_eq!(
            fenced_blocks(text, |_| true),
            by_pulldown_cmark(text),
            "{text:?}"
        );
    }

    #[test]
    fn agrees_with_pulldown_cmark_on_containers_and_leaves() {
        for text in [
            "```flycode-call\n{}\n```\n",
            "> ```flycode-call\n> {}\n> ```\n",
            "> ```flycode-call\n{}\n```\n",
            "- ```flycode-call\n  {}\n  ```\n",
            "- ```flycode-call\n  {}\n\nafter\n",
            "1. a\n\n   ```x\n   b\n   ```\n",
            "-\n  ```a\n  b\n  ```\n",
            "foo\n-\n  ```a\n  b\n",
            "<div>\n```flycode-call\n{}\n```\n\n```b\nc\n```",
            "<!--\n```a\n-->\n```b\nc\n",
            "<a href=\"x\">\n```a\n```\n",
            "text <a href=\"x\">\n```a\n```\n",
            "    ```a\n    b\n```c\nd",
            "\t```a\n\tb\n ```c\n\t\td\n ```",
            " - \t```a\n  \t b\n",
            ">\t```a\n>\t\tb\n",
            "~~~~ flycode-call x\n~~~\n~~~~~  \nafter",
            "``` a`b\n```\n",
            "```flycode\\-call\n```\n```a&amp;b &#45;\n```",
            "```&nbsp;flycode-call\n{}\n```",
            "- a\n- b\n\n\n  ```c\n  d\n  ```",
            "* a\n\n  * b\n\n    ```x\n    y\n    ```\n",
            "> - a\n>   ```b\n>   c\n> ```\nd\n",
            "[foo]: /url \"title\n```a\nb\n```\n",
            "para\n    ```not\n```yes\n```",
            "# h\n```a\n```\n---\n```b\n",
            "2. a\n3. b\n10) c\n   ```x\n   y\n",
            "- - - \n```a\n",
            "> > > ```a\n> > > b\n> > c\n",
            "```",
            "```\n",
            "",
            // A paragraph of definitions only is not underlined: `===` starts a paragraph, and
            // `</pre>` continues it instead of opening an HTML block that would hide the fence.
            "[foo]: /url\n===\n</pre>\n```",
            "> [foo]: /url\nbar\n```a\n",
            "[foo]:\n/url\n'title\nmore'\n```a\n",
        ] {
            agree(text);
        }
    }

    #[test]
    fn agrees_with_pulldown_cmark_on_the_commonmark_examples() {
        let examples: Vec<String> = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/commonmark/examples.json"
        )))
        .unwrap();
        assert_eq!(examples.len(), 1154);
        for example in examples {
            // flycode reads normalized text: no carriage returns.
            agree(&example.replace('\r', "\n"));
        }
    }

    #[test]
    fn a_container_packs_into_one_byte_and_back() {
        let mut all = vec![Container::Quote];
        for indent in 0..=126 {
            all.push(Container::Item { indent });
        }
        for &ch in LIST_MARKERS {
            for is_tight in [false, true] {
                for last_line_empty in [false, true] {
                    all.push(Container::List {
                        ch,
                        is_tight,
                        last_line_empty,
                    });
                }
            }
        }
        for container in all {
            assert_eq!(Packed::pack(container).unpack(), container);
        }
        assert_eq!(std::mem::size_of::<Packed>(), 1);
    }

    #[test]
    fn a_deep_nest_and_long_lines_cost_their_length() {
        // Each shape once at 1 MB: it would be quadratic if a line cost the nest's depth.
        let mut quotes = "> ".repeat(250_000);
        quotes.push_str("```flycode-call\n");
        quotes.push_str(&"b\n".repeat(250_000));
        let found = fenced_blocks(&quotes, |_| true);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].content, "");
        let mut lists = "- ".repeat(250_000);
        lists.push_str("a\n");
        lists.push_str(&"\n".repeat(1000));
        lists.push_str(&"c\n".repeat(250_000));
        assert!(fenced_blocks(&lists, |_| true).is_empty());
        agree(&"> ".repeat(2000));
        agree(&format!("{}a\n\n\nb\n```x\n", "- ".repeat(2000)));
    }

    fn markdownish() -> impl Strategy<Value = String> {
        let prefix = prop::sample::select(vec![
            "", "", "", "> ", ">", "- ", "* ", "+ ", "1. ", "2) ", " ", "  ", "   ", "    ", "\t",
            " \t", "-", "10. ", ">  ",
        ]);
        let leaf = prop::sample::select(vec![
            "```",
            "````",
            "~~~",
            "~~~~",
            "``` flycode-call",
            "```flycode-call",
            "~~~ flycode-result x",
            "```a`b",
            "``` a\\-b",
            "```a&amp;b",
            "<div>",
            "<div",
            "</div>",
            "<!--",
            "-->",
            "<pre>",
            "</pre>",
            "<a href='x'>",
            "<a b=c/>",
            "<x y",
            "# h",
            "#h",
            "---",
            "***",
            "- - -",
            "===",
            "-",
            "[foo]: /url",
            "[foo]:",
            "\"t\"",
            "text",
            "*a*",
            "[a](b)",
            "`c`",
            "&amp;",
            "\\",
            "[a]: <b> 't'",
            "[a]: b (t",
            "t)",
            "[a",
            "b]: c",
            "",
            "",
            "",
            "    code",
        ]);
        let line = (
            prop::collection::vec(prefix, 0..4),
            leaf,
            prop::sample::select(vec!["", "", " x", "  ", "\t"]),
        )
            .prop_map(|(prefixes, leaf, tail)| format!("{}{leaf}{tail}", prefixes.concat()));
        (prop::collection::vec(line, 0..14), any::<bool>()).prop_map(|(lines, final_newline)| {
            let mut text = lines.join("\n");
            if final_newline {
                text.push('\n');
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn agrees_with_pulldown_cmark(text in markdownish()) {
            prop_assert_eq!(fenced_blocks(&text, |_| true), by_pulldown_cmark(&text), "{:?}", text);
        }

        /// Character soup from the bytes block structure turns on, for what the line-based
        /// generator cannot think of.
        #[test]
        fn agrees_with_pulldown_cmark_on_character_soup(
            text in "[`~>*+\\-1.)<!/\\[\\]#=_ \t\na&;:'\"p]{0,80}"
        ) {
            prop_assert_eq!(fenced_blocks(&text, |_| true), by_pulldown_cmark(&text), "{:?}", text);
        }
    }
}
