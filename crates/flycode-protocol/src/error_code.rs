//! The contract's error codes (PROTOCOL.md §1 (Reading a reply) and §4): one enum, one spelling per code.
//!
//! Every error type in the crate maps onto one of these with a `code()` method, so what the model
//! reads in `[code]` never drifts from what the documentation promises.

use std::fmt;

use serde::{Serialize, Serializer};

macro_rules! error_codes {
    ($( $variant:ident => $text:literal, $summary:literal, )*) => {
        /// A stable, machine-readable error code, as written in `[code]` and in `--json` output.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $( #[doc = $summary] $variant, )*
        }

        impl ErrorCode {
            /// Every code, in the order of the contract's tables.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as the contract spells it, e.g. `text_outside_block`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $text, )*
                }
            }

            /// One sentence on when the code applies (for reports and rule help).
            pub fn summary(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $summary, )*
                }
            }

            /// Parses a code as the contract spells it.
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name {
                    $( $text => Some(ErrorCode::$variant), )*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    ForgedResult => "forged_result", "The reply contains a `flycode-result` block: only the mediator writes results.",
    MultipleCalls => "multiple_calls", "More than one call block in one reply.",
    UnterminatedBlock => "unterminated_block", "A call block's fence is never closed.",
    TextOutsideBlock => "text_outside_block", "Something other than whitespace before or after the call block.",
    InvalidJson => "invalid_json", "The block's content is not JSON.",
    DuplicateKey => "duplicate_key", "An object in the call has the same key twice.",
    NotAnObject => "not_an_object", "The JSON is not an object.",
    MissingField => "missing_field", "`id`, `tool` or `args` is missing.",
    UnknownField => "unknown_field", "A top-level key other than `id`, `tool` and `args`.",
    InvalidId => "invalid_id", "`id` is not a usable string.",
    UnknownTool => "unknown_tool", "`tool` is not in the whitelist.",
    InvalidArgs => "invalid_args", "`args` fail the tool's JSON Schema.",
    MutuallyExclusive => "mutually_exclusive", "More than one argument of a mutually exclusive group.",
    RelativePath => "relative_path", "A path argument that is not absolute.",
    OutsideRoots => "outside_roots", "A path outside every allowed root.",
    NestedTags => "nested_tags", "A tag of the tag dialect opened inside another one's body: tags never nest (PROTOCOL.md §15).",
    ReturnWithOtherTags => "return_with_other_tags", "A tag-dialect reply with `<return>` and another tag: `<return>` must be alone (PROTOCOL.md §15).",
    UnsupportedPath => "unsupported_path", "A path of another platform's form (a Windows path on a Unix host or the reverse).",
    NotFound => "not_found", "The path does not exist.",
    AlreadyExists => "already_exists", "The path exists and the call needs it not to.",
    IsDirectory => "is_directory", "A directory where the call needs something else.",
    NotDirectory => "not_directory", "Not a directory where the call needs one.",
    PermissionDenied => "permission_denied", "The operating system refused access.",
    DeniedByPolicy => "denied_by_policy", "The user's policy forbids the call.",
    StaleFile => "stale_file", "The file changed on disk since the model read it.",
    SpecialFile => "special_file", "A FIFO, socket or device.",
    TooLarge => "too_large", "The input or output exceeds a limit.",
    IoError => "io_error", "Any other input/output failure.",
    Sha256Mismatch => "sha256_mismatch", "`expectedSha256` does not match the file's current bytes.",
    NoMatch => "no_match", "An `fs.edit` `oldText` does not occur in the file.",
    AmbiguousMatch => "ambiguous_match", "An `fs.edit` `oldText` occurs more than once and `replaceAll` is not set.",
    OmissionPlaceholder => "omission_placeholder", "New content would replace most of a file with a placeholder such as `// ... rest of the code unchanged`.",
    BinaryContent => "binary_content", "A non-UTF-8 file read as UTF-8.",
    Timeout => "timeout", "The process ran past its deadline.",
    CommandNotFound => "command_not_found", "The program to run does not exist.",
    NonzeroExit => "nonzero_exit", "The program ran and exited with a status other than 0.",
    QuotaExceeded => "quota_exceeded", "An `agent.task` past the run's or the agent's quota of sub-agent tasks.",
    TaskFailed => "task_failed", "A sub-agent could not do its task: its model's API failed, or its setup is wrong (the envelope says why).",
    RepeatedFailedCall => "repeated_failed_call", "The call repeats exactly (same tool, equal arguments) a call whose result just failed (seed 003, R5): it was not run again.",
    Cancelled => "cancelled", "The person stopped the call (Ctrl-C in `flycode run`) before it finished, or before it started.",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A warning that does not change a verdict (PROTOCOL.md §1 (Reading a reply)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningCode {
    /// Browser copy-paste artefacts (no-break or zero-width spaces) were read as whitespace.
    NormalizedWhitespace,
    /// Text outside the call block, accepted because of `--lenient`.
    TextOutsideBlock,
    /// A native-mode reply whose text holds a `flycode-call` block: native mode does not run it
    /// (PROTOCOL.md §13 (The API loop: calling modes)).
    CallBlockInNativeReply,
    /// An optional argument given as `null`, or as `""` where no empty text is a value, was
    /// taken as not given (PROTOCOL.md §3, Decision on unset arguments).
    UnsetArgument,
}

impl WarningCode {
    /// The code as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::NormalizedWhitespace => "normalized_whitespace",
            WarningCode::TextOutsideBlock => "text_outside_block",
            WarningCode::CallBlockInNativeReply => "call_block_in_native_reply",
            WarningCode::UnsetArgument => "unset_argument",
        }
    }
}

impl Serialize for WarningCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_name() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_name(code.as_str()), Some(*code));
        }
        assert_eq!(ErrorCode::from_name("no_such_code"), None);
    }
}
