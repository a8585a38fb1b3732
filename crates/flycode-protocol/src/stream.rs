//! Streamed replies: leaving `flycode-call` blocks out of text as it arrives, piece by piece, for
//! a display that shows the model's prose live. The blocks are recognised by the same rule as
//! [`super::parse`] recognises them (the info string's first word, [`block_kind`]); the fences
//! are followed line by line, since a stream has no whole document to parse.

use super::parse::{BlockKind, block_kind};

/// Leaves `flycode-call` blocks out of streamed text mode replies. Text that cannot be part of
/// a fence line is shown at once; a line that starts like a fence is held until it ends.
#[derive(Default)]
pub struct CallBlockFilter {
    pending: String,
    fence: Option<String>,
}

impl CallBlockFilter {
    /// Takes the next piece of streamed text; returns what may be shown now.
    pub fn push(&mut self, text: &str) -> String {
        let mut shown = String::new();
        for c in text.chars() {
            self.pending.push(c);
            if c == '\n' {
                let line = std::mem::take(&mut self.pending);
                shown.push_str(&self.judge_line(line));
            } else if self.fence.is_none() && !self.could_be_fence() {
                shown.push_str(&std::mem::take(&mut self.pending));
            }
        }
        shown
    }

    /// The stream ended: what is left to show (nothing of an unclosed call block).
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        let shown = if self.fence.is_some() {
            String::new()
        } else {
            self.judge_line(rest)
        };
        self.fence = None;
        shown
    }

    /// Whether the line so far may still become an opening fence.
    fn could_be_fence(&self) -> bool {
        let trimmed = self.pending.trim_start_matches(' ');
        self.pending.len() - trimmed.len() <= 3
            && (trimmed.is_empty() || trimmed.starts_with('`') || trimmed.starts_with('~'))
    }

    fn judge_line(&mut self, line: String) -> String {
        let trimmed = line.trim();
        match &self.fence {
            Some(fence) => {
                if trimmed.starts_with(fence.as_str())
                    && trimmed
                        .chars()
                        .all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    self.fence = None;
                }
                String::new()
            }
            None => {
                let marker: String = trimmed
                    .chars()
                    .take_while(|&c| c == '`' || c == '~')
                    .collect();
                let info = trimmed[marker.len()..].trim();
                if marker.len() >= 3 && block_kind(info) == Some(BlockKind::Call) {
                    self.fence = Some(marker);
                    String::new()
                } else {
                    line
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(pieces: &[&str]) -> String {
        let mut filter = CallBlockFilter::default();
        let mut shown: String = pieces.iter().map(|p| filter.push(p)).collect();
        shown.push_str(&filter.finish());
        shown
    }

    #[test]
    fn call_blocks_are_left_out_of_streamed_text_however_it_is_split() {
        let reply = "Let me look.\n```flycode-call\n{\"id\":\"c1\",\"tool\":\"fs.ls\",\"args\":{\"path\":\"/w\"}}\n```\nafter\n";
        let expected = "Let me look.\nafter\n";
        assert_eq!(filtered(&[reply]), expected);
        let chars: Vec<String> = reply.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(filtered(&pieces), expected);
    }

    #[test]
    fn other_code_blocks_and_prose_are_shown() {
        let reply = "Here:\n```rust\nfn main() {}\n```\n~ not a fence\nend";
        assert_eq!(filtered(&[reply]), reply);
    }

    #[test]
    fn a_call_tag_behind_a_pasted_zero_width_space_is_a_call_as_the_parser_says() {
        assert_eq!(
            filtered(&["a\n```\u{200B}flycode-call\n{}\n```\nb\n"]),
            "a\nb\n"
        );
    }

    #[test]
    fn an_unterminated_call_block_shows_nothing_after_its_fence() {
        assert_eq!(filtered(&["a\n~~~~ flycode-call\n{\"id\""]), "a\n");
    }
}
