//! Link reference definitions (`[label]: destination "title"`), read only for how many lines they
//! take: a paragraph made of them alone cannot become a setext heading, so the line after one
//! starts a new paragraph, and what may start there differs (an HTML block of type 7 cannot
//! interrupt a paragraph). A port of pulldown-cmark 0.13's `parse_refdef_total` and helpers (MIT,
//! Copyright 2015 Google Inc.), container checks on continuation lines included.

use super::BlockReader;
use super::line::LineStart;
use super::scan::{
    is_blank_line, is_paragraph_interrupt, scan_eol, scan_setext_heading, scan_whitespace_no_nl,
};

/// How deep `(` may nest in a destination (pulldown-cmark's `LINK_MAX_NESTED_PARENS`).
const MAX_NESTED_PARENS: usize = 32;

impl<'t> BlockReader<'t, '_, '_> {
    /// A definition starting at `start`: where it ends.
    pub(super) fn parse_refdef(&mut self, start: usize) -> Option<usize> {
        if self.bytes.get(start) != Some(&b'[') {
            return None;
        }
        let after_label = self.scan_label_rest(start + 1)?;
        if self.bytes.get(after_label) != Some(&b':') {
            return None;
        }
        self.scan_refdef(after_label + 1)
    }

    /// A line after the one a definition's destination or title starts on: the container
    /// prefix to skip, or `None` when the line ends the paragraph or underlines it.
    fn space_continuation(&mut self, at: usize) -> Option<usize> {
        let mut line = LineStart::new(&self.bytes[at..]);
        let continued = self.scan_containers(&mut line, false);
        let current_container = continued == self.spine.len();
        if line.scan_space(4) {
            return Some(line.bytes_scanned());
        }
        let rest = &self.bytes[at + line.bytes_scanned()..];
        if is_paragraph_interrupt(rest, current_container) || scan_setext_heading(rest).is_some() {
            return None;
        }
        Some(line.bytes_scanned())
    }

    /// The rest of a label after its `[`: the index after its `]`.
    fn scan_label_rest(&mut self, start: usize) -> Option<usize> {
        let mut ix = start;
        let mut only_white_space = true;
        let mut codepoints = 0;
        loop {
            if codepoints >= 1000 {
                return None;
            }
            match *self.bytes.get(ix)? {
                b'[' => return None,
                b']' => break,
                b'\\' if self.bytes.get(ix + 1)?.is_ascii_punctuation() => {
                    ix += 2;
                    codepoints += 2;
                    only_white_space = false;
                }
                b if is_ascii_whitespace(b) => {
                    let whitespace_start = ix;
                    let mut linebreaks = 0;
                    while ix < self.bytes.len() && is_ascii_whitespace(self.bytes[ix]) {
                        if let Some(eol) = scan_eol(&self.bytes[ix..]) {
                            linebreaks += 1;
                            if linebreaks > 1 {
                                return None;
                            }
                            ix += eol;
                            let at = ix;
                            // As in the label: a setext underline only in the current container.
                            ix += self.label_continuation(at)?;
                        } else {
                            ix += 1;
                        }
                    }
                    codepoints += ix - whitespace_start;
                }
                b => {
                    only_white_space = false;
                    ix += 1;
                    if b & 0b1000_0000 != 0 {
                        codepoints += 1;
                    }
                }
            }
        }
        if only_white_space { None } else { Some(ix + 1) }
    }

    /// A label's continuation line: ends it on an interruption, or a setext underline in the
    /// current container.
    fn label_continuation(&mut self, at: usize) -> Option<usize> {
        let mut line = LineStart::new(&self.bytes[at..]);
        let continued = self.scan_containers(&mut line, false);
        let current_container = continued == self.spine.len();
        if line.scan_space(4) {
            return Some(line.bytes_scanned());
        }
        let rest = &self.bytes[at + line.bytes_scanned()..];
        if is_paragraph_interrupt(rest, current_container)
            || (current_container && scan_setext_heading(rest).is_some())
        {
            return None;
        }
        Some(line.bytes_scanned())
    }

    /// Whitespace with at most one line end: (index after it, line ends crossed).
    fn scan_refdef_space(&mut self, mut i: usize) -> Option<(usize, usize)> {
        let mut newlines = 0;
        loop {
            i += scan_whitespace_no_nl(&self.bytes[i..]);
            let Some(eol) = scan_eol(&self.bytes[i..]) else {
                break;
            };
            i += eol;
            newlines += 1;
            if newlines > 1 {
                return None;
            }
            i += self.space_continuation(i)?;
        }
        Some((i, newlines))
    }

    /// The destination and optional title after `label:`: where the definition ends.
    fn scan_refdef(&mut self, start: usize) -> Option<usize> {
        let (mut i, _) = self.scan_refdef_space(start)?;
        let dest_length = scan_link_dest(&self.bytes[i..])?;
        if dest_length == 0 {
            return None;
        }
        i += dest_length;
        let without_title = i;
        let (title_start, newlines) = match self.scan_refdef_space(i) {
            Some((new_i, mut newlines)) => {
                if i == self.bytes.len() {
                    newlines += 1;
                }
                if new_i == i && newlines == 0 {
                    return None;
                }
                if newlines > 1 {
                    return Some(without_title);
                }
                (new_i, newlines)
            }
            None => return Some(without_title),
        };
        if let Some(title_length) = self.scan_refdef_title(title_start) {
            let end = title_start + title_length;
            if is_blank_line(&self.bytes[end..]).is_some() {
                return Some(end);
            }
        }
        (newlines > 0).then_some(without_title)
    }

    /// A title in `"…"`, `'…'` or `(…)`, possibly over several lines: its length.
    fn scan_refdef_title(&mut self, start: usize) -> Option<usize> {
        let closing = match self.bytes.get(start)? {
            b'\'' => b'\'',
            b'"' => b'"',
            b'(' => b')',
            _ => return None,
        };
        let mut at = start + 1;
        while let Some(&c) = self.bytes.get(at) {
            match c {
                b'(' if closing == b')' => return None,
                b'\n' | b'\r' => {
                    at += 1;
                    if c == b'\r' && self.bytes.get(at) == Some(&b'\n') {
                        at += 1;
                    }
                    let mut line = LineStart::new(&self.bytes[at..]);
                    let continued = self.scan_containers(&mut line, false);
                    let current_container = continued == self.spine.len();
                    if !line.scan_space(4) {
                        let rest = &self.bytes[at + line.bytes_scanned()..];
                        if is_paragraph_interrupt(rest, current_container)
                            || scan_setext_heading(rest).is_some()
                        {
                            return None;
                        }
                    }
                    line.scan_all_space();
                    at += line.bytes_scanned();
                    if is_blank_line(&self.bytes[at..]).is_some() {
                        return None;
                    }
                }
                b'\\' => {
                    at += 1;
                    if self
                        .bytes
                        .get(at)
                        .is_some_and(|c| *c != b'\r' && *c != b'\n')
                    {
                        at += 1;
                    }
                }
                c if c == closing => return Some(at + 1 - start),
                _ => at += 1,
            }
        }
        None
    }

    /// After a definition and its line end: the next line, when it may go on as part of the
    /// same paragraph-like run (lazily, even), its containers and spaces skipped.
    pub(super) fn next_line_after_refdef(&mut self, at: usize) -> Option<LineStart<'t>> {
        let bytes = self.bytes;
        let mut line = LineStart::new(&bytes[at..]);
        let continued = self.scan_containers(&mut line, false);
        let current_container = continued == self.spine.len();
        if (!line.scan_space(4)
            && is_paragraph_interrupt(&bytes[at + line.bytes_scanned()..], current_container))
            || is_blank_line(&bytes[at + line.bytes_scanned()..]).is_some()
        {
            return None;
        }
        line.scan_all_space();
        Some(line)
    }
}

fn is_ascii_whitespace(c: u8) -> bool {
    (0x09..=0x0d).contains(&c) || c == b' '
}

/// A link destination, `<…>` or bare with balanced parentheses: its length.
fn scan_link_dest(bytes: &[u8]) -> Option<usize> {
    if bytes.first() == Some(&b'<') {
        let mut i = 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' | b'\r' | b'<' => return None,
                b'>' => return Some(i + 1),
                b'\\' if i + 1 < bytes.len() && bytes[i + 1].is_ascii_punctuation() => i += 1,
                _ => {}
            }
            i += 1;
        }
        return None;
    }
    let mut nest = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x0..=0x20 => break,
            b'(' => {
                if nest > MAX_NESTED_PARENS {
                    return None;
                }
                nest += 1;
            }
            b')' => {
                if nest == 0 {
                    break;
                }
                nest -= 1;
            }
            b'\\' if i + 1 < bytes.len() && bytes[i + 1].is_ascii_punctuation() => i += 1,
            _ => {}
        }
        i += 1;
    }
    (nest == 0).then_some(i)
}
