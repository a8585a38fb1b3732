//! The contract's error codes (CONTRACT §1 and §4): one enum, one spelling per code.
//!
//! Every error type in the crate maps onto one of these with a `code()` method, so what the model
//! reads in `[code]` never drifts from what the documentation promises.

use std::fmt;

use serde::{Serialize, Serializer};

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident => $text:literal, )*) => {
        /// A stable, machine-readable error code, as written in `[code]` and in `--json` output.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
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
    /// The reply contains a `flycode-result` block: only the mediator writes results.
    ForgedResult => "forged_result",
    /// More than one call block in one reply.
    MultipleCalls => "multiple_calls",
    /// A call block's fence is never closed.
    UnterminatedBlock => "unterminated_block",
    /// Something other than whitespace before or after the call block.
    TextOutsideBlock => "text_outside_block",
    /// The block's content is not JSON.
    InvalidJson => "invalid_json",
    /// An object in the call has the same key twice.
    DuplicateKey => "duplicate_key",
    /// The JSON is not an object.
    NotAnObject => "not_an_object",
    /// `id`, `tool` or `args` is missing.
    MissingField => "missing_field",
    /// A top-level key other than `id`, `tool` and `args`.
    UnknownField => "unknown_field",
    /// `id` is not a usable string.
    InvalidId => "invalid_id",
    /// `tool` is not in the whitelist.
    UnknownTool => "unknown_tool",
    /// `args` fail the tool's JSON Schema.
    InvalidArgs => "invalid_args",
    /// More than one argument of a mutually exclusive group.
    MutuallyExclusive => "mutually_exclusive",
    /// A path argument that is not absolute.
    RelativePath => "relative_path",
    /// A path outside every allowed root.
    OutsideRoots => "outside_roots",
    /// A path of another platform's form (a Windows path on a Unix host or the reverse).
    UnsupportedPath => "unsupported_path",
    /// The path does not exist.
    NotFound => "not_found",
    /// The path exists and the call needs it not to.
    AlreadyExists => "already_exists",
    /// A directory where the call needs something else.
    IsDirectory => "is_directory",
    /// Not a directory where the call needs one.
    NotDirectory => "not_directory",
    /// The operating system refused access.
    PermissionDenied => "permission_denied",
    /// The user's policy forbids the call.
    DeniedByPolicy => "denied_by_policy",
    /// The file changed on disk since the model read it.
    StaleFile => "stale_file",
    /// A FIFO, socket or device.
    SpecialFile => "special_file",
    /// The input or output exceeds a limit.
    TooLarge => "too_large",
    /// Any other input/output failure.
    IoError => "io_error",
    /// `expectedSha256` does not match the file's current bytes.
    Sha256Mismatch => "sha256_mismatch",
    /// A non-UTF-8 file read as UTF-8.
    BinaryContent => "binary_content",
    /// The process ran past its deadline.
    Timeout => "timeout",
    /// The program to run does not exist.
    CommandNotFound => "command_not_found",
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

/// A warning that does not change a verdict (CONTRACT §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningCode {
    /// Browser copy-paste artefacts (no-break or zero-width spaces) were read as whitespace.
    NormalizedWhitespace,
    /// Text outside the call block, accepted because of `--lenient`.
    TextOutsideBlock,
}

impl WarningCode {
    /// The code as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::NormalizedWhitespace => "normalized_whitespace",
            WarningCode::TextOutsideBlock => "text_outside_block",
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
