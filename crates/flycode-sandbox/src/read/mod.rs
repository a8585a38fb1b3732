//! The streaming-read engine of `fs.read`: a file of any size, whole or in part (head, tail,
//! range of characters or bytes, one line, lines), read through a handle the sandbox opened.
//!
//! A file of at most [`ReadPlan::whole_up_to`] is read whole by the caller ([`read_whole`]) and its
//! part selected in memory ([`select`]), so every total is exact. A larger file read in part is
//! streamed ([`read_part`]): only the blocks the part needs are read (head and range forward from
//! the start, tail backwards from the end, lines forward line by line), memory stays bounded by
//! the part itself, and what was not read is not counted. Such a file is judged text by the bytes
//! read (the part, and for a range everything before it) plus its first [`ReadPlan::sniff`] bytes:
//! UTF-8 without a NUL byte. Arguments, encodings, masking and rendering are the tool's
//! (`tools/fs/read.rs`); this module knows no tool.

pub mod aligned;
pub mod count;
pub mod kept;
pub mod part;
pub mod select;
pub mod stream;
pub mod summary;

pub use aligned::{BlockBuffer, read_to_end_aligned};
pub use kept::{KEPT_BLOCK_BYTES, KeptBody, KeptError, TextScan, copy_text, scan_text};
pub use part::{ReadError, ReadPart, ReadPlan, Selection, Shown, Span};
pub use select::{select_bytes, select_text};
pub use stream::{margins, read_part, read_whole};
pub use summary::{FileFacts, ReadSummary, bytes_summary, file_facts, stream_summary};
