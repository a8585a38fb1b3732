//! `flycode validate`: recorded conversations checked against the protocol, for CI.
//!
//! - [`transcript`]: the three transcript forms → messages, streaming JSON Lines;
//! - [`rules`]: the §7 rules, message by message;
//! - [`finding`]: findings and their codes;
//! - [`inputs`]: files, directories and globs → the transcripts to read;
//! - [`report`]: many files checked in parallel, in a deterministic order, with the transcripts
//!   of the sub-agents they reference;
//! - [`format`](mod@format): human, JSON, GitHub and SARIF output.

pub(crate) mod finding;
pub mod format;
pub(crate) mod inputs;
pub mod report;
pub(crate) mod rules;
pub(crate) mod transcript;

pub use finding::{Finding, FindingCode, Severity};
pub use report::{Report, validate_files};
pub use rules::ValidateOptions;
