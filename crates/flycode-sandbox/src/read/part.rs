//! The words of a read: which part is asked for ([`Selection`]), the sizes a read works with
//! ([`ReadPlan`]), what it shows ([`Span`], [`Shown`], [`ReadPart`]) and why it fails ([`ReadError`]).

use thiserror::Error;

/// The sizes a read works with; the unit tests shrink them to reach block boundaries.
#[derive(Clone, Copy, Debug)]
pub struct ReadPlan {
    /// Files up to this size are read whole, even for a partial read.
    pub whole_up_to: u64,
    /// The block a streamed read reads at a time.
    pub block: usize,
    /// The start of a streamed file checked for text.
    pub sniff: usize,
    /// The largest part returned.
    pub max_part: u64,
}

/// An exact span: `start..end` of `total` units (characters, bytes or, for lines, 1-based
/// inclusive line numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Where it starts.
    pub start: u64,
    /// Where it ends.
    pub end: u64,
    /// The units there are.
    pub total: u64,
}

/// The part shown, as far as it is known: a streamed read knows where a tail of characters
/// starts only in bytes, and knows no total it did not read to the end for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    /// Where it starts, when known.
    pub start: Option<u64>,
    /// Where it ends, when known.
    pub end: Option<u64>,
    /// The units there are, when known.
    pub total: Option<u64>,
    /// Units shown (what a tail of characters holds when its start is unknown); reported for
    /// streamed reads only.
    pub count: u64,
    /// For a streamed read: the part's byte offsets and the file's size.
    pub bytes: Option<(u64, u64, u64)>,
}

impl Shown {
    /// What a read that knows every total shows of `span`.
    pub fn exact(span: Span) -> Shown {
        Shown {
            start: Some(span.start),
            end: Some(span.end),
            total: Some(span.total),
            count: span.end.saturating_sub(span.start),
            bytes: None,
        }
    }
}

/// A part read from a streamed file.
pub struct ReadPart {
    /// The part's bytes.
    pub bytes: Vec<u8>,
    /// What part of the file they are.
    pub shown: Shown,
}

/// Which part of the file to read: units are characters for text, bytes otherwise; lines are
/// 1-based and inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// All of it.
    Whole,
    /// The first N units.
    Head(u64),
    /// The last N units.
    Tail(u64),
    /// Units from the first to the second (the end when `None`).
    Range(u64, Option<u64>),
    /// Lines from the first to the second, inclusive (the last when `None`).
    Lines(u64, Option<u64>),
}

/// Why a read failed. It names no path: the caller, which knows what it was asked, says that.
#[derive(Debug, Error)]
pub enum ReadError {
    /// Reading or seeking failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// The file ended before bytes it had a moment ago.
    #[error("the file got shorter while it was read")]
    Shrank,
    /// A text read met bytes that are not UTF-8, at this byte offset.
    #[error("not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The byte offset in the file.
        offset: u64,
    },
    /// A streamed text read found a NUL byte in the file's start, at this byte offset.
    #[error("not text (a NUL byte at offset {offset})")]
    NotText {
        /// The byte offset in the file.
        offset: u64,
    },
    /// The part asked for is larger than [`ReadPlan::max_part`].
    #[error("the part asked for is larger than a read returns")]
    PartTooLarge,
    /// A line past the end of the file was asked for.
    #[error("line {line} is past the end of the file ({total} lines)")]
    PastTheEnd {
        /// The line asked for.
        line: u64,
        /// The file's lines.
        total: u64,
    },
}
