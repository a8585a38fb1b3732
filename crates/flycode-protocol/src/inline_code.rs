//! Inline code spans, as the readers of prose outside code blocks skip them: a run of backticks
//! opens a span that the next run of the same length closes, within the paragraph (up to a blank
//! line); a run nothing closes is text. The tag reader skips tags written there, and the
//! reasoning reader (`reasoning`) skips `<think>` written there. Pure text work.
//!
//! Each search is remembered, so a paragraph of unmatched backticks is searched once, not once
//! per run: reading stays linear in the text.

use std::collections::HashMap;

/// Skips inline code spans in one text, remembering what it searched.
#[derive(Debug)]
pub struct CodeSpans {
    /// For a backtick run length, the paragraph end before which it has no closing run.
    unmatched: HashMap<usize, usize>,
    /// The last search for the end of a paragraph: where it started and the end it found (there
    /// is no blank line between them, so a later search starting between them ends there too).
    paragraph: (usize, usize),
}

impl Default for CodeSpans {
    fn default() -> CodeSpans {
        CodeSpans::new()
    }
}

impl CodeSpans {
    /// A reader of one text's code spans.
    pub fn new() -> CodeSpans {
        CodeSpans {
            unmatched: HashMap::new(),
            paragraph: (usize::MAX, 0),
        }
    }

    /// Past the inline code span that the backtick run at `at` opens, or past the run when
    /// nothing closes it before the paragraph ends.
    pub fn skip(&mut self, text: &str, at: usize) -> usize {
        let bytes = text.as_bytes();
        let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
        let after_run = at + run;
        let paragraph_end = self.paragraph_end(text, after_run);
        if self
            .unmatched
            .get(&run)
            .is_some_and(|&until| until >= paragraph_end)
        {
            return after_run;
        }
        let mut i = after_run;
        while i < paragraph_end {
            if bytes[i] == b'`' {
                let other = bytes[i..paragraph_end]
                    .iter()
                    .take_while(|&&b| b == b'`')
                    .count();
                if other == run {
                    return i + other;
                }
                i += other;
            } else {
                i += 1;
            }
        }
        self.unmatched.insert(run, paragraph_end);
        after_run
    }

    /// Where the paragraph holding `from` ends (a blank line, or the end of the text); searched
    /// once for every position before the end it finds.
    fn paragraph_end(&mut self, text: &str, from: usize) -> usize {
        let (start, end) = self.paragraph;
        if start <= from && from <= end {
            return end;
        }
        let end = text[from..].find("\n\n").map_or(text.len(), |n| from + n);
        self.paragraph = (from, end);
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_closes_at_a_run_of_its_own_length_in_its_paragraph() {
        let text = "a `<think>` b ``x ` y`` c `open\n\nnot closed` here";
        let mut spans = CodeSpans::new();
        assert_eq!(spans.skip(text, 2), 11);
        assert_eq!(&text[2..11], "`<think>`");
        let double = text.find("``").unwrap();
        assert_eq!(&text[double..spans.skip(text, double)], "``x ` y``");
        let open = text.find("`open").unwrap();
        assert_eq!(
            spans.skip(text, open),
            open + 1,
            "closed only after the blank line"
        );
    }
}
