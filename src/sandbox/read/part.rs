//! The words of a read: which part is asked for ([`Selection`]), the sizes a read works with
//! ([`ReadPlan`]), what it shows ([`Span`], [`Shown`], [`ReadPart`]) and why it fails ([`ReadError`]).

use thiserror::Error;

/// The sizes a read works with; the unit tests shrink them to reach block boundaries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadPlan {
    /// Files up to this size are read whole, even for a partial read.
    pub(crate) whole_up_to: u64,
    /// The block a streamed read reads at a time.
    pub(crate) block: usize,
    /// The start of a streamed file checked for text.
    pub(crate) sniff: usize,
    /// The largest part returned.
    pub(crate) max_part: u64,
}

/// An exact span: `start..end` of `total` units (characters, bytes or, for lines, 1-based
/// inclusive line numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) total: u64,
}

/// The part shown, as far as it is known: a streamed read knows where a tail of characters
/// starts only in bytes, and knows no total it did not read to the end for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) start: Option<u64>,
    pub(crate) end: Option<u64>,
    pub(crate) total: Option<u64>,
    /// Units shown (what a tail of characters holds when its start is unknown); reported for
    /// streamed reads only.
    pub(crate) count: u64,
    /// For a streamed read: the part's byte offsets and the file's size.
    pub(crate) bytes: Option<(u64, u64, u64)>,
}

impl Shown {
    /// What a read that knows every total shows of `span`.
    pub(crate) fn exact(span: Span) -> Shown {
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
pub(crate) struct ReadPart {
    pub(crate) bytes: Vec<u8>,
    pub(crate) shown: Shown,
}

/// Which part of the file to read: units are characters for text, bytes otherwise; lines are
/// 1-based and inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Selection {
    Whole,
    Head(u64),
    Tail(u64),
    Range(u64, Option<u64>),
    Lines(u64, Option<u64>),
}

/// Why a read failed. It names no path: the caller, which knows what it was asked, says that.
#[derive(Debug, Error)]
pub(crate) enum ReadError {
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
