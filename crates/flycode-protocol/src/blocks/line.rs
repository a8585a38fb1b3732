//! The start of a line as CommonMark's block structure reads it: indentation in columns (a tab
//! goes to the next multiple of 4, and may be used in part), block-quote markers and list
//! markers. A port of pulldown-cmark 0.13's `LineStart` (MIT, Copyright 2015 Google Inc.), kept
//! to what flycode's reading of a reply uses, so the two agree column for column.

use super::scan::{is_blank_line, is_hrule};

/// A cursor over the bytes from a line's start to the end of the text.
#[derive(Clone)]
pub(super) struct LineStart<'a> {
    bytes: &'a [u8],
    ix: usize,
    /// The index after the last tab scanned: from here the text is on a tab stop.
    tab_start: usize,
    /// Columns of a tab scanned but not yet used, before `ix`.
    spaces_remaining: usize,
    /// No thematic break can start before this index (saves rescanning `- - - …`).
    min_hrule_offset: usize,
}

impl<'a> LineStart<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> LineStart<'a> {
        LineStart {
            bytes,
            ix: 0,
            tab_start: 0,
            spaces_remaining: 0,
            min_hrule_offset: 0,
        }
    }

    /// Consumes `n` columns of space; whether all of them were there (some are consumed even
    /// when not).
    pub(super) fn scan_space(&mut self, n: usize) -> bool {
        self.scan_space_inner(n) == 0
    }

    /// Consumes up to `n` columns of space; how many were consumed.
    pub(super) fn scan_space_upto(&mut self, n: usize) -> usize {
        n - self.scan_space_inner(n)
    }

    fn scan_space_inner(&mut self, mut n: usize) -> usize {
        let from_remaining = self.spaces_remaining.min(n);
        self.spaces_remaining -= from_remaining;
        n -= from_remaining;
        while n > 0 && self.ix < self.bytes.len() {
            match self.bytes[self.ix] {
                b' ' => {
                    self.ix += 1;
                    n -= 1;
                }
                b'\t' => {
                    let spaces = 4 - (self.ix - self.tab_start) % 4;
                    self.ix += 1;
                    self.tab_start = self.ix;
                    let used = spaces.min(n);
                    n -= used;
                    self.spaces_remaining = spaces - used;
                }
                _ => break,
            }
        }
        n
    }

    /// Consumes all spaces and tabs.
    pub(super) fn scan_all_space(&mut self) {
        self.spaces_remaining = 0;
        self.ix += self.bytes[self.ix..]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
    }

    /// Whether the cursor is at the end of the line (or of the text).
    pub(super) fn is_at_eol(&self) -> bool {
        self.bytes
            .get(self.ix)
            .is_none_or(|&c| c == b'\r' || c == b'\n')
    }

    fn scan_ch(&mut self, c: u8) -> bool {
        if self.bytes.get(self.ix) == Some(&c) {
            self.ix += 1;
            true
        } else {
            false
        }
    }

    /// A `>` and the one column of space after it, if any.
    pub(super) fn scan_blockquote_marker(&mut self) -> bool {
        if self.scan_ch(b'>') {
            let _ = self.scan_space(1);
            true
        } else {
            false
        }
    }

    /// A list marker after `indent` columns: its character (`-`, `+`, `*`, or `.`/`)` for an
    /// ordered one) and the content's indentation.
    pub(super) fn scan_list_marker_with_indent(&mut self, indent: usize) -> Option<(u8, usize)> {
        let save = self.clone();
        if let Some(&c) = self.bytes.get(self.ix) {
            if c == b'-' || c == b'+' || c == b'*' {
                if self.ix >= self.min_hrule_offset {
                    match is_hrule(&self.bytes[self.ix..]) {
                        Err(min_offset) => self.min_hrule_offset = min_offset,
                        Ok(_) => {
                            *self = save;
                            return None;
                        }
                    }
                }
                self.ix += 1;
                if self.scan_space(1) || self.is_at_eol() {
                    return Some((c, self.finish_list_marker(indent + 2)));
                }
            } else if c.is_ascii_digit() {
                let start_ix = self.ix;
                let mut ix = self.ix + 1;
                while ix < self.bytes.len() && ix - start_ix < 10 {
                    let c = self.bytes[ix];
                    ix += 1;
                    if c.is_ascii_digit() {
                        continue;
                    }
                    if c == b')' || c == b'.' {
                        self.ix = ix;
                        if self.scan_space(1) || self.is_at_eol() {
                            return Some((c, self.finish_list_marker(indent + 1 + ix - start_ix)));
                        }
                    }
                    break;
                }
            }
        }
        *self = save;
        None
    }

    fn finish_list_marker(&mut self, mut indent: usize) -> usize {
        let save = self.clone();
        if is_blank_line(&self.bytes[self.ix..]).is_some() {
            return indent;
        }
        let post_indent = self.scan_space_upto(4);
        if post_indent < 4 {
            indent += post_indent;
        } else {
            *self = save;
        }
        indent
    }

    pub(super) fn bytes_scanned(&self) -> usize {
        self.ix
    }

    pub(super) fn remaining_space(&self) -> usize {
        self.spaces_remaining
    }
}
