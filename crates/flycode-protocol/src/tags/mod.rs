//! Seed 000's tag dialect (PROTOCOL.md §15 (The tag dialect)): reading `<bash_call>`,
//! `<builtin>`, `<create_agent>` and `<return>` out of a reply, the registry call each stands
//! for, and the results written back in the tag form. Pure functions over text, like the rest of
//! `protocol`: running the calls is the doors' work (`crate::tags`).
//!
//! - [`read`]: reply → [`TagVerdict`] (tags in order, a `<return>`, none, or a violation);
//! - [`builtin`]: a `<builtin>` body → name, `key: value` fields and literal blocks;
//! - [`map`]: a tag → the registry call ([`TagAction`]);
//! - [`render`]: `<bash_call_result>`, `<builtin_result>`, `<child_summary>`, and the escaping
//!   that keeps a body from closing its result.

pub mod builtin;
pub mod map;
pub mod read;
pub mod render;

pub use map::{SmartWriteMode, TagAction, TagCall, map_tag};
pub use read::{Tag, TagKind, TagVerdict, TagViolation, read_tags};
pub use render::{ResultTag, TagResult};

use super::error_code::ErrorCode;

/// The builtin tools, in the prompt's order.
pub const BUILTIN_NAMES: [&str; 6] = [
    "read_file",
    "get_job_log",
    "smart_edit",
    "memory_query",
    "hint",
    "get_resource",
];

/// Why one tag cannot run: a code of the protocol, what was wrong and what to send instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TagError {
    /// The protocol's code.
    pub code: ErrorCode,
    /// What was wrong.
    pub message: String,
    /// What to send instead.
    pub hint: String,
}

impl TagError {
    /// A tag's error.
    pub fn new(code: ErrorCode, message: String, hint: String) -> TagError {
        TagError {
            code,
            message,
            hint,
        }
    }
}
