//! Degenerate replies: a model stuck repeating the same line or span (small models on local
//! servers do this until their token limit, for minutes). The stream is watched as it grows and
//! cut as soon as its end is one span repeated many times (PROTOCOL.md §13 (The API loop:
//! bounded replies)). Pure: bytes in, a verdict out.

/// The longest repeated span looked for, in bytes (a paragraph or a short prompt).
pub const MAX_PERIOD: usize = 4096;
/// The fewest repetitions that make a reply degenerate.
pub const MIN_REPEATS: usize = 8;
/// The fewest bytes the repetitions must cover: a table rule or a short list of equal lines in
/// a real answer stays below it.
pub const MIN_SPAN: usize = 4096;
/// The fewest times a block of whole lines must repeat at the end of a reply, however few bytes
/// it covers: a short line a small model repeats for minutes stays under [`MIN_SPAN`] for long.
pub const MIN_LINE_REPEATS: usize = 24;
/// The longest block of lines looked for by the line rule.
pub const MAX_LINE_PERIOD: usize = 4;
/// The fewest characters other than whitespace a repeated block of lines must hold (blank lines
/// and a lone brace are no loop).
const MIN_LINE_CONTENT: usize = 4;

/// How much the text grows between two looks at least (a look costs `MAX_PERIOD` comparisons
/// and more): a long reply is looked at after it grew by a thirty-second of itself, so the
/// looks at a reply of `n` bytes cost `O(MAX_PERIOD · log n)`, not `O(MAX_PERIOD · n)`.
const LOOK_EVERY: usize = 256;

/// A repeating end of a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repetition {
    /// Where the repeating part starts, in bytes.
    pub start: usize,
    /// The length of the repeated span, in bytes.
    pub period: usize,
    /// How many times it repeats (whole times).
    pub repeats: usize,
}

impl Repetition {
    /// Where to cut the text so that the span appears once: the text before the repetition and
    /// its first span, on a character boundary of `text`.
    pub fn keep_up_to(&self, text: &str) -> usize {
        let mut end = self.start.saturating_add(self.period).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        end
    }
}

/// The repetition that ends `text`, if its end is one span of at most [`MAX_PERIOD`] bytes
/// repeated at least [`MIN_REPEATS`] times over at least [`MIN_SPAN`] bytes (the shortest such
/// span is found), or a block of up to [`MAX_LINE_PERIOD`] whole lines, with some text in it,
/// repeated at least [`MIN_LINE_REPEATS`] times whatever their length.
pub fn find(text: &str) -> Option<Repetition> {
    find_by_bytes(text).or_else(|| find_by_lines(text))
}

fn find_by_bytes(text: &str) -> Option<Repetition> {
    let bytes = text.as_bytes();
    let n = bytes.len();
    if n < MIN_SPAN {
        return None;
    }
    for period in 1..=MAX_PERIOD.min(n / MIN_REPEATS) {
        // The length of the longest end of `text` in which every byte equals the one a period
        // before it.
        let matched = (period..n)
            .rev()
            .take_while(|&i| bytes[i] == bytes[i - period])
            .count();
        let span = matched + period;
        let repeats = span / period;
        if repeats >= MIN_REPEATS && span >= MIN_SPAN {
            return Some(Repetition {
                start: n - span,
                period,
                repeats,
            });
        }
    }
    None
}

/// The line rule of [`find`]: the complete lines at the end of `text` (a line still being
/// written is left out), looked at for a block of 1 to [`MAX_LINE_PERIOD`] lines repeated.
fn find_by_lines(text: &str) -> Option<Repetition> {
    let complete = &text[..text.rfind('\n')? + 1];
    // The last lines, newest first, with where each starts; as many as the rule can use.
    let wanted = MAX_LINE_PERIOD * MIN_LINE_REPEATS;
    let mut lines: Vec<(usize, &str)> = Vec::with_capacity(wanted);
    let mut end = complete.len();
    while lines.len() < wanted && end > 0 {
        let start = complete[..end - 1]
            .rfind('\n')
            .map_or(0, |newline| newline + 1);
        lines.push((start, &complete[start..end]));
        end = start;
    }
    for period in 1..=MAX_LINE_PERIOD {
        let block = lines.get(..period)?;
        // A block that is a shorter one repeated was judged as that one.
        let made_of_shorter = (1..period).any(|shorter| {
            period % shorter == 0 && (shorter..period).all(|i| block[i].1 == block[i - shorter].1)
        });
        if made_of_shorter {
            continue;
        }
        let content: usize = block
            .iter()
            .map(|(_, line)| line.chars().filter(|c| !c.is_whitespace()).count())
            .sum();
        if content < MIN_LINE_CONTENT {
            continue;
        }
        let repeats = lines
            .chunks_exact(period)
            .take_while(|chunk| {
                chunk
                    .iter()
                    .zip(block)
                    .all(|((_, line), (_, first))| line == first)
            })
            .count();
        if repeats >= MIN_LINE_REPEATS {
            let start = lines[repeats * period - 1].0;
            let period_bytes = block.iter().map(|(_, line)| line.len()).sum();
            return Some(Repetition {
                start,
                period: period_bytes,
                repeats,
            });
        }
    }
    None
}

/// Watches a growing reply: [`RepetitionWatch::look`] looks again once the text has grown
/// enough since the last look.
#[derive(Debug, Default)]
pub struct RepetitionWatch {
    looked_at: usize,
}

impl RepetitionWatch {
    /// A watch that has seen nothing.
    pub fn new() -> RepetitionWatch {
        RepetitionWatch::default()
    }

    /// The repetition that ends `text`, looked for when it grew by a few hundred bytes since
    /// the last look.
    pub fn look(&mut self, text: &str) -> Option<Repetition> {
        let step = LOOK_EVERY.max(self.looked_at / 32);
        if text.len() < self.looked_at.saturating_add(step) {
            return None;
        }
        self.looked_at = text.len();
        find(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_repeated_over_and_over_is_found_and_cut_after_its_first_copy() {
        let line = "You are flycode's agent, a careful engineer.\n";
        let text = format!("Sure.\n{}", line.repeat(200));
        let found = find(&text).unwrap();
        assert_eq!(found.period, line.len());
        assert!(found.repeats >= MIN_REPEATS);
        let kept = &text[..found.keep_up_to(&text)];
        assert!(kept.starts_with("Sure.\n"));
        assert_eq!(kept.matches("careful engineer").count(), 1);
    }

    #[test]
    fn a_long_paragraph_repeated_is_found() {
        let paragraph: String = (0..40).map(|i| format!("step {i} of the plan; ")).collect();
        let text = paragraph.repeat(MIN_REPEATS + 1);
        assert!(paragraph.len() < MAX_PERIOD);
        assert_eq!(find(&text).map(|r| r.period), Some(paragraph.len()));
    }

    #[test]
    fn ordinary_text_and_short_repeats_are_not_degenerate() {
        let prose: String = (0..500)
            .map(|i| format!("line {i} says something\n"))
            .collect();
        assert_eq!(find(&prose), None);
        let table = format!("{}{}", "|---|---|\n".repeat(20), prose);
        assert_eq!(find(&table), None);
        assert_eq!(find(&"ab".repeat(100)), None, "shorter than the span");
    }

    #[test]
    fn the_cut_lands_on_a_character_boundary() {
        let text = "中文".repeat(2000);
        let found = find(&text).unwrap();
        assert!(text.is_char_boundary(found.keep_up_to(&text)));
    }

    #[test]
    fn a_short_line_repeated_is_found_by_lines_long_before_four_kibibytes() {
        let line = "- check the file again\n";
        let text = format!("Plan:\n{}", line.repeat(MIN_LINE_REPEATS));
        assert!(text.len() < MIN_SPAN);
        let found = find(&text).unwrap();
        let kept = &text[..found.keep_up_to(&text)];
        assert_eq!(kept, format!("Plan:\n{line}"));
        // Two lines in turn, too.
        let pair = "a = 1\nb = 2\n".repeat(MIN_LINE_REPEATS);
        assert_eq!(find(&pair).map(|r| r.period), Some(12));
        // Fewer repeats, blank lines and lone braces are no loop.
        assert_eq!(find(&line.repeat(MIN_LINE_REPEATS - 1)), None);
        assert_eq!(find(&"\n".repeat(100)), None);
        assert_eq!(find(&"  }\n".repeat(100)), None);
    }

    #[test]
    fn the_watch_looks_only_after_growth() {
        let mut watch = RepetitionWatch::new();
        let text = "x".repeat(MIN_SPAN + 10);
        assert!(watch.look(&text).is_some());
        assert!(watch.look(&text).is_none(), "no growth since");
    }
}
