//! Draining one output pipe with bounded memory: keep the first half of the capture's budget
//! (the head), keep the most recent other half in a ring (the tail), count every byte, and never
//! stop reading before end of file (a full pipe would block the child). Also choosing what of a
//! stream to show within a byte budget, cut on character (and, when near, line) boundaries.

use std::io::{self, Read};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

use super::StreamOutput;

/// Bytes asked of the pipe per read.
const CHUNK: usize = 64 * 1024;

/// How many bytes of a line the cut may give up to end a head (or start a tail) on a line
/// boundary: at most this many, and at most a quarter of the budget.
const LINE_SLACK: usize = 4096;

/// What the replacement character costs in a rendered body.
const REPLACEMENT_LEN: usize = '\u{FFFD}'.len_utf8();

/// Which output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
}

/// The last `cap` bytes written to it. Grows up to `cap`, then overwrites its oldest bytes.
#[derive(Debug, Default)]
struct Ring {
    /// The kept bytes; once full, the oldest byte is at `next`.
    buffer: Vec<u8>,
    /// The most it keeps.
    cap: usize,
    /// Where the next byte goes once the buffer is full.
    next: usize,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            buffer: Vec::new(),
            cap,
            next: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        if self.cap == 0 {
            return;
        }
        if data.len() >= self.cap {
            self.buffer.clear();
            self.buffer
                .extend_from_slice(&data[data.len() - self.cap..]);
            self.next = 0;
            return;
        }
        let room = self.cap - self.buffer.len();
        if room > 0 {
            let take = room.min(data.len());
            self.buffer.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        while !data.is_empty() {
            let take = (self.cap - self.next).min(data.len());
            self.buffer[self.next..self.next + take].copy_from_slice(&data[..take]);
            self.next = (self.next + take) % self.cap;
            data = &data[take..];
        }
    }

    /// The kept bytes, oldest first.
    fn contents(&self) -> Vec<u8> {
        let (newer, older) = self.buffer.split_at(self.next);
        [older, newer].concat()
    }
}

/// What has been read from one stream so far; shared with the draining thread so that a run that
/// gives up on end of file can still take the output read so far.
#[derive(Debug)]
pub(super) struct Capture {
    /// The first bytes, up to `head_cap`.
    head: Vec<u8>,
    /// How many bytes the head keeps.
    head_cap: usize,
    /// The last bytes after the head.
    tail: Ring,
    /// Every byte read, kept or not.
    total: u64,
}

impl Capture {
    /// A capture that keeps at most `cap` bytes: the first half and the last half.
    pub(super) fn new(cap: usize) -> Capture {
        let head_cap = cap / 2;
        Capture {
            head: Vec::new(),
            head_cap,
            tail: Ring::new(cap - head_cap),
            total: 0,
        }
    }

    /// Takes in bytes just read from the pipe.
    pub(super) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(to_head);
        self.tail.push(rest);
    }

    /// What was kept and counted, for the outcome.
    pub(super) fn output(&self) -> StreamOutput {
        StreamOutput {
            head: self.head.clone(),
            tail: self.tail.contents(),
            total: self.total,
        }
    }
}

/// A shared capture, locked without caring whether a holder panicked (the data stays usable).
pub(super) type SharedCapture = Arc<Mutex<Capture>>;

/// A new shared capture keeping at most `cap` bytes.
pub(super) fn shared(cap: usize) -> SharedCapture {
    Arc::new(Mutex::new(Capture::new(cap)))
}

/// Locks `capture`, ignoring poisoning.
pub(super) fn lock(capture: &SharedCapture) -> std::sync::MutexGuard<'_, Capture> {
    capture.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `pipe` to end of file (or to a read error) into `capture`, then calls `done` with the
/// stream. Runs on its own thread.
pub(super) fn drain<T>(
    mut pipe: impl Read,
    stream: Stream,
    capture: &SharedCapture,
    done: &Sender<T>,
    event: impl FnOnce(Stream) -> T,
) {
    let mut buffer = vec![0_u8; CHUNK];
    loop {
        let read = match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        lock(capture).push(buffer.get(..read).unwrap_or_default());
    }
    // The receiver is gone only if the run already returned; nobody is left to tell.
    let _ = done.send(event(stream));
}

/// What of one stream fits a budget: its beginning, how many bytes were left out, its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Excerpt {
    /// The beginning (the whole stream when nothing was left out), decoded lossily.
    pub head: String,
    /// How many bytes the program wrote between `head` and `tail` that are not shown.
    pub omitted: u64,
    /// The end (empty when nothing was left out), decoded lossily.
    pub tail: String,
    /// How many of the program's bytes `head` shows.
    pub head_bytes: u64,
    /// How many of the program's bytes `tail` shows.
    pub tail_bytes: u64,
}

impl Excerpt {
    /// Whether bytes were left out.
    pub fn is_cut(&self) -> bool {
        self.omitted > 0
    }
}

impl StreamOutput {
    /// Whether every byte the program wrote was kept.
    pub fn is_complete(&self) -> bool {
        self.total == (self.head.len() + self.tail.len()) as u64
    }

    /// Every kept byte as text (invalid UTF-8 as U+FFFD), head then tail; when bytes were
    /// dropped between them, a character cut at either edge of the gap is dropped too.
    pub fn text(&self) -> String {
        if self.is_complete() {
            let whole = [self.head.as_slice(), &self.tail].concat();
            return String::from_utf8_lossy(&whole).into_owned();
        }
        let head = without_partial_char(&self.head);
        let tail = without_leading_continuation(&self.tail);
        let mut text = String::from_utf8_lossy(head).into_owned();
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }

    /// How many bytes [`StreamOutput::text`] takes when the stream is complete, if it is.
    pub fn full_len(&self) -> Option<usize> {
        self.is_complete().then(|| {
            let whole = [self.head.as_slice(), &self.tail].concat();
            rendered_len(&whole)
        })
    }

    /// The stream within `budget` bytes of text: all of it when it fits; otherwise its head and
    /// its tail, about half each (what the head's cut gives up goes to the tail), cut between
    /// characters and, when a line boundary is near, between lines. Every byte not shown counts
    /// in `omitted`, so `head_bytes + omitted + tail_bytes` is the stream's true total.
    pub fn excerpt(&self, budget: usize) -> Excerpt {
        let whole;
        let (head, tail): (&[u8], &[u8]) = if self.is_complete() {
            whole = [self.head.as_slice(), &self.tail].concat();
            if rendered_len(&whole) <= budget {
                return Excerpt {
                    head: String::from_utf8_lossy(&whole).into_owned(),
                    omitted: 0,
                    tail: String::new(),
                    head_bytes: self.total,
                    tail_bytes: 0,
                };
            }
            (&whole, &whole)
        } else {
            (
                without_partial_char(&self.head),
                without_leading_continuation(&self.tail),
            )
        };
        let head_end = fit_prefix(head, budget / 2);
        let head_text = String::from_utf8_lossy(&head[..head_end]).into_owned();
        let tail_budget = budget.saturating_sub(head_text.len());
        let mut tail_start = fit_suffix(tail, tail_budget);
        if self.is_complete() {
            // One buffer: the tail never starts before the head ends.
            tail_start = tail_start.max(head_end);
        }
        let tail_text = String::from_utf8_lossy(&tail[tail_start..]).into_owned();
        let head_bytes = head_end as u64;
        let tail_bytes = (tail.len() - tail_start) as u64;
        Excerpt {
            head: head_text,
            omitted: self.total.saturating_sub(head_bytes + tail_bytes),
            tail: tail_text,
            head_bytes,
            tail_bytes,
        }
    }
}

/// How many bytes `bytes` takes once decoded lossily.
fn rendered_len(bytes: &[u8]) -> usize {
    bytes
        .utf8_chunks()
        .map(|chunk| {
            let invalid = if chunk.invalid().is_empty() {
                0
            } else {
                REPLACEMENT_LEN
            };
            chunk.valid().len() + invalid
        })
        .sum()
}

/// How far a cut may move to land on a line boundary.
fn line_slack(budget: usize) -> usize {
    LINE_SLACK.min(budget / 4)
}

/// The end of the longest beginning of `bytes` whose lossy decoding takes at most `budget`
/// bytes, never inside a character, moved back to just after a newline when one is near.
fn fit_prefix(bytes: &[u8], budget: usize) -> usize {
    let mut end = 0;
    let mut room = budget;
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        if valid.len() > room {
            let mut cut = room;
            while !valid.is_char_boundary(cut) {
                cut -= 1;
            }
            end += cut;
            break;
        }
        end += valid.len();
        room -= valid.len();
        let invalid = chunk.invalid().len();
        if invalid > 0 {
            if REPLACEMENT_LEN > room {
                break;
            }
            end += invalid;
            room -= REPLACEMENT_LEN;
        }
    }
    if end < bytes.len()
        && let Some(newline) = bytes[..end].iter().rposition(|&byte| byte == b'\n')
        && end - (newline + 1) <= line_slack(budget)
    {
        end = newline + 1;
    }
    end
}

/// The start of the longest end of `bytes` whose lossy decoding takes at most `budget` bytes,
/// never inside a character, moved forward to just after a newline when one is near.
fn fit_suffix(bytes: &[u8], budget: usize) -> usize {
    // Where each chunk starts, so that the walk can go from the end.
    let mut chunks = Vec::new();
    let mut at = 0;
    for chunk in bytes.utf8_chunks() {
        chunks.push((at, chunk.valid(), !chunk.invalid().is_empty()));
        at += chunk.valid().len() + chunk.invalid().len();
    }
    let mut start = bytes.len();
    let mut room = budget;
    for (chunk_start, valid, has_invalid) in chunks.into_iter().rev() {
        if has_invalid {
            if REPLACEMENT_LEN > room {
                break;
            }
            room -= REPLACEMENT_LEN;
        }
        if valid.len() > room {
            let mut cut = valid.len() - room;
            while !valid.is_char_boundary(cut) {
                cut += 1;
            }
            start = chunk_start + cut;
            break;
        }
        start = chunk_start;
        room -= valid.len();
    }
    if start > 0
        && let Some(newline) = bytes[start..].iter().position(|&byte| byte == b'\n')
        && newline < line_slack(budget)
        && start + newline + 1 < bytes.len()
    {
        start += newline + 1;
    }
    start
}

/// `bytes` without a trailing incomplete UTF-8 sequence (at most 3 bytes).
fn without_partial_char(bytes: &[u8]) -> &[u8] {
    for back in 1..=bytes.len().min(3) {
        let at = bytes.len() - back;
        let byte = bytes[at];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { &bytes[..at] } else { bytes };
    }
    bytes
}

/// `bytes` without the continuation bytes (at most 3) of a character whose start was dropped.
fn without_leading_continuation(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&byte| byte & 0xC0 == 0x80)
        .count();
    &bytes[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn captured(data: &[u8], cap: usize) -> StreamOutput {
        let mut capture = Capture::new(cap);
        // Odd-sized pushes, so the ring wraps at every offset.
        for piece in data.chunks(7) {
            capture.push(piece);
        }
        capture.output()
    }

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        assert_eq!(captured(b"a\xffb", 64).text(), "a\u{FFFD}b");
    }

    #[test]
    fn character_cut_at_the_edge_of_a_gap_is_dropped() {
        let text = "ab€".as_bytes(); // € is three bytes
        assert_eq!(without_partial_char(&text[..3]), b"ab");
        assert_eq!(without_partial_char(&text[..4]), b"ab");
        assert_eq!(without_partial_char(text), text);
        assert_eq!(without_leading_continuation(&text[2..]), "€".as_bytes());
        assert_eq!(without_leading_continuation(&text[3..]), b"");
        assert_eq!(without_leading_continuation(&text[4..]), b"");
        // "€€€" kept as 4 + 4 of its 9 bytes: the first "€" and a lead byte; a continuation byte
        // and the third "€".
        let output = captured("€€€".as_bytes(), 8);
        assert!(!output.is_complete());
        assert_eq!(output.text(), "€€");
    }

    #[test]
    fn ring_keeps_the_last_bytes_in_order() {
        let mut ring = Ring::new(5);
        ring.push(b"abc");
        assert_eq!(ring.contents(), b"abc");
        ring.push(b"defg");
        assert_eq!(ring.contents(), b"cdefg");
        ring.push(b"h");
        assert_eq!(ring.contents(), b"defgh");
        ring.push(b"0123456789");
        assert_eq!(ring.contents(), b"56789");
        ring.push(b"xy");
        assert_eq!(ring.contents(), b"789xy");
    }

    #[test]
    fn drain_keeps_head_and_tail_and_counts_everything() {
        let mut data = vec![b'x'; 3 * CHUNK + 5];
        data[..5].copy_from_slice(b"first");
        let at = data.len() - 4;
        data[at..].copy_from_slice(b"last");
        let capture = shared(20);
        let (tx, rx) = mpsc::channel();
        drain(&data[..], Stream::Stderr, &capture, &tx, |s| s);
        assert_eq!(rx.recv().unwrap(), Stream::Stderr);
        let output = lock(&capture).output();
        assert_eq!(output.head, b"firstxxxxx");
        assert_eq!(output.tail, b"xxxxxxlast");
        assert_eq!(output.total, data.len() as u64);
        assert!(!output.is_complete());
    }

    #[test]
    fn small_output_is_complete_and_whole() {
        let output = captured(b"hello\nworld\n", 64);
        assert!(output.is_complete());
        assert_eq!(output.text(), "hello\nworld\n");
        let excerpt = output.excerpt(64);
        assert_eq!(
            (excerpt.head.as_str(), excerpt.omitted),
            ("hello\nworld\n", 0)
        );
        assert!(!excerpt.is_cut());
    }

    #[test]
    fn output_between_half_and_whole_cap_stays_contiguous() {
        let data: Vec<u8> = (0..50).map(|i| b'a' + (i % 26) as u8).collect();
        let output = captured(&data, 64);
        assert!(output.is_complete());
        assert_eq!(output.text().as_bytes(), &data[..]);
    }

    #[test]
    fn excerpt_accounts_for_every_byte() {
        let data: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        for cap in [100, 1000, 4096, 20_000, 200_000] {
            let output = captured(data.as_bytes(), cap);
            for budget in [0, 10, 50, 99, 500, 3000] {
                let budget = budget.min(cap);
                let excerpt = output.excerpt(budget);
                assert!(
                    excerpt.head.len() + excerpt.tail.len() <= budget,
                    "{cap} {budget}"
                );
                assert_eq!(
                    excerpt.head_bytes + excerpt.omitted + excerpt.tail_bytes,
                    data.len() as u64
                );
                assert!(data.starts_with(&excerpt.head));
                assert!(data.ends_with(&excerpt.tail));
            }
        }
    }

    #[test]
    fn excerpt_cuts_between_lines_when_near() {
        let data: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let output = captured(data.as_bytes(), 4096);
        let excerpt = output.excerpt(1000);
        assert!(excerpt.head.starts_with("line 0000\n"));
        assert!(excerpt.head.ends_with('\n'));
        assert!(excerpt.tail.starts_with("line "));
        assert!(excerpt.tail.ends_with("line 0999\n"));
        assert!(excerpt.is_cut());
    }

    #[test]
    fn excerpt_never_splits_a_character() {
        let data = "é€😀".repeat(5000);
        for cap in [10, 11, 12, 13, 1001, 4096] {
            let output = captured(data.as_bytes(), cap);
            for budget in [4, 5, 6, 7, 9, 100, 1000] {
                let excerpt = output.excerpt(budget.min(cap));
                assert!(!excerpt.head.contains('\u{FFFD}'), "{cap} {budget}");
                assert!(!excerpt.tail.contains('\u{FFFD}'), "{cap} {budget}");
                assert_eq!(
                    excerpt.head_bytes + excerpt.omitted + excerpt.tail_bytes,
                    data.len() as u64
                );
            }
        }
    }

    #[test]
    fn invalid_bytes_count_at_their_rendered_size() {
        let data = vec![0xFF_u8; 1000];
        let output = captured(&data, 200);
        let excerpt = output.excerpt(60);
        assert!(excerpt.head.len() + excerpt.tail.len() <= 60);
        assert_eq!(
            excerpt.head_bytes + excerpt.omitted + excerpt.tail_bytes,
            1000
        );
        assert_eq!(excerpt.head, "\u{FFFD}".repeat(10));
    }
}
