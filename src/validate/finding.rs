//! Findings: what `flycode validate` reports about a transcript (PROTOCOL.md §8 (Transcripts)).

use serde::Serialize;

use crate::protocol::ErrorCode;

/// How serious a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fails the check.
    Error,
    /// Reported; fails the check only with `--strict`.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// The code of a finding: a reply code of §1, or a transcript rule of §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingCode {
    /// An assistant reply whose verdict is `invalid`, with its §1 code.
    Reply(ErrorCode),
    /// A reply warning of §1 (`normalized_whitespace`, lenient `text_outside_block`).
    ReplyWarning(&'static str),
    /// A call id used by an earlier call.
    DuplicateId,
    /// A call never answered before the conversation moved on.
    MissingResult,
    /// The first result after a call carries another id.
    ResultIdMismatch,
    /// A result block without a usable `[id]` or `[ok]`.
    MalformedResult,
    /// The exact call whose result just failed, made again.
    RepeatedFailedCall,
    /// A call made right after a result whose id is `(none)`, empty or `null`.
    CallAfterInvalidResult,
    /// The file is not a transcript.
    UnreadableTranscript,
    /// An `agent.task` result names a sub-agent whose transcript is not next to this one.
    MissingSubagentTranscript,
    /// A reply written in another dialect than the transcript's (or in both).
    MixedDialects,
}

/// The transcript rules of §7 with their default severity and help text, for SARIF and docs.
pub(crate) const TRANSCRIPT_RULES: &[(FindingCode, Severity, &str)] = &[
    (
        FindingCode::DuplicateId,
        Severity::Error,
        "A call id was already used by an earlier call in the same transcript. Give every call a fresh id (call-001, call-002, ...).",
    ),
    (
        FindingCode::MissingResult,
        Severity::Error,
        "A call was followed by another assistant or user message with no result carrying its id in between. Every call must be answered by a flycode-result with the same id before the conversation moves on.",
    ),
    (
        FindingCode::ResultIdMismatch,
        Severity::Error,
        "The first result after a call carries a different id. Results must echo the id of the call they answer.",
    ),
    (
        FindingCode::MalformedResult,
        Severity::Error,
        "A flycode-result block lacks [id] or [ok] true|false, has an empty id, or has a line that is not a [key] value header before [data].",
    ),
    (
        FindingCode::RepeatedFailedCall,
        Severity::Warning,
        "The assistant repeated exactly the call (tool and arguments) whose result just said [ok] false. It should correct the arguments or ask the user instead.",
    ),
    (
        FindingCode::CallAfterInvalidResult,
        Severity::Warning,
        "The assistant made a call right after a result whose id is (none), empty or null. Such a result is not a valid answer and must not trigger another call.",
    ),
    (
        FindingCode::UnreadableTranscript,
        Severity::Error,
        "The file is not a transcript: a JSON array of messages, an object {\"messages\": [...]}, or JSON Lines with one message per line.",
    ),
    (
        FindingCode::MissingSubagentTranscript,
        Severity::Warning,
        "An agent.task result of a flycode run record names a sub-agent (task-N) that sent requests, but its transcript STEM.task-N.jsonl is not next to this one, so its conversation cannot be checked. Keep each sub-agent's transcript beside its parent's.",
    ),
    (
        FindingCode::MixedDialects,
        Severity::Error,
        "A reply is written in another dialect than the transcript's (flycode-call blocks in a tag-dialect conversation, tags in a flycode one, or both in one reply). A door reads one dialect, so the other's calls never ran as the model meant. Each reply is still judged in its own dialect; reported once per transcript.",
    ),
];

impl FindingCode {
    /// The code as written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::Reply(code) => code.as_str(),
            FindingCode::ReplyWarning(code) => code,
            FindingCode::DuplicateId => "duplicate_id",
            FindingCode::MissingResult => "missing_result",
            FindingCode::ResultIdMismatch => "result_id_mismatch",
            FindingCode::MalformedResult => "malformed_result",
            FindingCode::RepeatedFailedCall => "repeated_failed_call",
            FindingCode::CallAfterInvalidResult => "call_after_invalid_result",
            FindingCode::UnreadableTranscript => "unreadable_transcript",
            FindingCode::MissingSubagentTranscript => "missing_subagent_transcript",
            FindingCode::MixedDialects => "mixed_dialects",
        }
    }

    /// The severity before `--strict`.
    pub fn default_severity(self) -> Severity {
        match self {
            FindingCode::ReplyWarning(_)
            | FindingCode::RepeatedFailedCall
            | FindingCode::CallAfterInvalidResult
            | FindingCode::MissingSubagentTranscript => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl Serialize for FindingCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One finding in one transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule.
    pub code: FindingCode,
    /// Error or warning (after `--strict`).
    pub severity: Severity,
    /// The transcript, as named on the command line or found in a directory.
    pub file: String,
    /// The 0-based message index; `None` for a problem with the file as a whole.
    pub index: Option<usize>,
    /// The 1-based line where the message starts (or where reading failed).
    pub line: usize,
    /// The 1-based column, for unreadable transcripts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// What is wrong, naming ids and tools.
    pub message: String,
    /// A short excerpt of the offending message, control characters escaped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}
