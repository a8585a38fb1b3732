//! Where an `oldText` that does not occur most nearly does: the window of the file's lines most
//! similar to it, line by line (Dice coefficient of character bigrams, a cheap and forgiving
//! measure), so a `no_match` can show the model the text it should have copied.

/// At most this many lines are compared and shown.
const MAX_WINDOW: usize = 12;

/// Line comparisons one search may make; a larger file is compared with a narrower window.
const BUDGET: usize = 4_000_000;

/// Shown lines longer than this are cut.
const MAX_SHOWN_CHARS: usize = 200;

/// The lines of a file most similar to an `oldText`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Closest {
    /// The 1-based number of the first line shown.
    pub first_line: usize,
    /// The lines, as they are in the file (line ends removed, long lines cut).
    pub lines: Vec<String>,
    /// Whether they equal `oldText` but for whitespace and indentation.
    pub whitespace_only: bool,
}

impl Closest {
    /// The lines with their numbers, `12 | text`, one per line.
    pub(super) fn render(&self) -> String {
        let last = self.first_line + self.lines.len().saturating_sub(1);
        let width = last.to_string().len();
        self.lines
            .iter()
            .enumerate()
            .map(|(offset, line)| format!("{:>width$} | {line}\n", self.first_line + offset))
            .collect()
    }

    /// `12-14`, or `12` for one line.
    pub(super) fn range(&self) -> String {
        match self.lines.len() {
            0 | 1 => self.first_line.to_string(),
            n => format!("{}-{}", self.first_line, self.first_line + n - 1),
        }
    }
}

/// The window of `text`'s lines most like `old`'s; `None` when the file is empty, `old` is
/// blank, or no line resembles it at all.
pub(super) fn closest_lines(text: &str, old: &str) -> Option<Closest> {
    let file = split_lines(text);
    let wanted: Vec<&str> = {
        let all = split_lines(old);
        let first = all.iter().position(|l| !l.trim().is_empty())?;
        let last = all.iter().rposition(|l| !l.trim().is_empty())?;
        all[first..=last].to_vec()
    };
    if file.is_empty() {
        return None;
    }
    let mut width = wanted.len().min(MAX_WINDOW).min(file.len());
    if file.len().saturating_mul(width) > BUDGET {
        width = (BUDGET / file.len()).max(1);
    }
    let file_grams: Vec<Vec<u64>> = file.iter().map(|l| bigrams(l)).collect();
    let wanted_grams: Vec<Vec<u64>> = wanted[..width].iter().map(|l| bigrams(l)).collect();
    let mut best = (0.0_f64, 0_usize);
    for start in 0..=file.len() - width {
        let score: f64 = (0..width)
            .map(|j| dice(&file_grams[start + j], &wanted_grams[j]))
            .sum();
        if score > best.0 {
            best = (score, start);
        }
    }
    let (score, start) = best;
    if score <= 0.0 {
        return None;
    }
    let shown = &file[start..start + width];
    let whitespace_only = width == wanted.len()
        && shown
            .iter()
            .zip(&wanted)
            .all(|(a, b)| a.split_whitespace().eq(b.split_whitespace()));
    Some(Closest {
        first_line: start + 1,
        lines: shown.iter().map(|l| cut(l)).collect(),
        whitespace_only,
    })
}

/// The lines of `text` without their line ends (a final line break ends the last line).
fn split_lines(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// The trimmed line's character bigrams (its one character for a one-character line), sorted
/// and without repeats.
fn bigrams(line: &str) -> Vec<u64> {
    let chars: Vec<u64> = line.trim().chars().map(u64::from).collect();
    let mut grams: Vec<u64> = match chars.len() {
        0 => Vec::new(),
        1 => chars,
        _ => chars.windows(2).map(|w| (w[0] << 21) | w[1]).collect(),
    };
    grams.sort_unstable();
    grams.dedup();
    grams
}

/// The Dice coefficient of two sorted sets: 1 for two blank lines, 0 for a blank and a
/// non-blank one.
fn dice(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return if a.is_empty() && b.is_empty() {
            1.0
        } else {
            0.0
        };
    }
    let (mut i, mut j, mut shared) = (0, 0, 0_usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    (2 * shared) as f64 / (a.len() + b.len()) as f64
}

/// `line`, cut to [`MAX_SHOWN_CHARS`] characters with `…`.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "fn main() {\n    let total = add(1, 2);\n    println!(\"{total}\");\n}\n\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

    #[test]
    fn finds_the_most_similar_window() {
        let closest = closest_lines(FILE, "fn add(a: u32, b: u32) -> u32 {\n    a + b\n").unwrap();
        assert_eq!(closest.first_line, 6);
        assert_eq!(closest.range(), "6-7");
        assert!(!closest.whitespace_only);
        assert_eq!(
            closest.render(),
            "6 | fn add(a: i32, b: i32) -> i32 {\n7 |     a + b\n"
        );
    }

    #[test]
    fn notices_a_difference_in_indentation_only() {
        let closest =
            closest_lines(FILE, "let total = add(1, 2);\nprintln!(\"{total}\");").unwrap();
        assert_eq!(closest.first_line, 2);
        assert!(closest.whitespace_only);
    }

    #[test]
    fn crlf_files_and_long_lines_are_shown_plainly() {
        let long = format!("{}\r\nshort\r\n", "x".repeat(500));
        let closest = closest_lines(&long, "shorts").unwrap();
        assert_eq!(closest.lines, vec!["short".to_owned()]);
        let closest = closest_lines(&long, "xxxx").unwrap();
        assert_eq!(closest.lines[0].chars().count(), MAX_SHOWN_CHARS + 1);
    }

    #[test]
    fn nothing_alike_is_none() {
        assert_eq!(closest_lines("", "a"), None);
        assert_eq!(closest_lines("abc\n", "\n \n"), None);
        assert_eq!(closest_lines("abc\n", "xyz"), None);
    }
}
