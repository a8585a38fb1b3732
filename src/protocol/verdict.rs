//! One reply → one verdict (CONTRACT §1): `none`, `call`, or `invalid` with the first error code
//! that applies, in the contract's order, plus warnings.

use std::ops::Range;

use serde::Serialize;
use serde_json::Map;

use super::call::{Attempt, Call, CallError, parse_call_in};
use super::error_code::WarningCode;
use super::json::normalize_artefacts_outside_strings;
use super::parse::{ParsedReply, is_paste_artefact, is_reply_whitespace, parse_reply};
use super::result::ResultBlock;
use super::slash::{render_command, render_unknown_command};
use super::tool_name::{ToolName, ToolSet};

/// How strictly to read a reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifyOptions {
    /// Accept text outside the call block, reporting it as a warning.
    pub lenient: bool,
    /// The tools a call may name.
    pub tools: ToolSet,
}

/// A warning about a reply that does not change its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The warning's code.
    pub code: WarningCode,
    /// What was noticed.
    pub message: String,
}

/// The verdict on one reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Prose: no call block and no result block.
    None,
    /// Exactly one valid call.
    Call(Call),
    /// Anything else, with what could be read of the attempted call.
    Invalid {
        /// The first problem in the contract's order.
        error: CallError,
        /// What could be read of the call, for the answering result's `[id]` and `[command]`.
        attempt: Attempt,
    },
}

impl Verdict {
    /// `none`, `call` or `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::None => "none",
            Verdict::Call(_) => "call",
            Verdict::Invalid { .. } => "invalid",
        }
    }
}

/// A verdict with its warnings and where the call block was.
#[derive(Clone, Debug, PartialEq)]
pub struct Classification {
    /// The verdict.
    pub verdict: Verdict,
    /// Warnings, in the order they were noticed.
    pub warnings: Vec<Warning>,
    /// The call block's span in the normalized reply, when there was exactly one.
    pub block_span: Option<Range<usize>>,
}

/// Judges one assistant reply.
pub fn classify_reply(reply: &str, options: ClassifyOptions) -> Classification {
    let parsed = parse_reply(reply);
    let mut warnings = Vec::new();
    let mut block_span = None;
    let verdict = judge(&parsed, options, &mut warnings, &mut block_span);
    Classification {
        verdict,
        warnings,
        block_span,
    }
}

fn judge(
    parsed: &ParsedReply,
    options: ClassifyOptions,
    warnings: &mut Vec<Warning>,
    block_span: &mut Option<Range<usize>>,
) -> Verdict {
    let calls: Vec<_> = parsed.call_blocks().collect();
    let first_attempt = || {
        calls
            .first()
            .map(|b| Attempt::read(&b.content))
            .unwrap_or_default()
    };
    if parsed.has_result_block() {
        return invalid(CallError::ForgedResult, first_attempt());
    }
    if calls.len() > 1 {
        return invalid(
            CallError::MultipleCalls { count: calls.len() },
            first_attempt(),
        );
    }
    let Some(block) = calls.first() else {
        return Verdict::None;
    };
    *block_span = Some(block.span.clone());
    if !block.is_terminated {
        return invalid(CallError::UnterminatedBlock, Attempt::default());
    }

    let before = &parsed.text[parsed.body_start..block.span.start];
    let after = &parsed.text[block.span.end..];
    let stray = [before, after]
        .into_iter()
        .map(|s| s.trim_matches(is_reply_whitespace))
        .find(|s| !s.is_empty());
    let (content, artefacts_in_json) = normalize_artefacts_outside_strings(&block.content);
    if let Some(stray) = stray {
        let error = CallError::TextOutsideBlock {
            excerpt: excerpt(stray),
        };
        if !options.lenient {
            return invalid(error, Attempt::read(&content));
        }
        warnings.push(Warning {
            code: WarningCode::TextOutsideBlock,
            message: error.to_string(),
        });
    }
    // Artefacts matter where they were read as whitespace: in the block, or around it when
    // nothing else is there.
    let artefacts_around = stray.is_none()
        && (before.contains(is_paste_artefact)
            || after.contains(is_paste_artefact)
            || parsed.has_artefact_in(&(parsed.body_start..parsed.text.len())));
    if artefacts_in_json
        || artefacts_around
        || block.has_artefact_in_info
        || parsed.has_artefact_in(&parsed.whole_lines(&block.span))
    {
        warnings.push(Warning {
            code: WarningCode::NormalizedWhitespace,
            message: "invisible copy-paste characters (no-break or zero-width spaces) were read as whitespace".into(),
        });
    }
    match parse_call_in(&content, options.tools) {
        Ok(call) => Verdict::Call(call),
        Err(error) => invalid(error, Attempt::read(&content)),
    }
}

fn invalid(error: CallError, attempt: Attempt) -> Verdict {
    Verdict::Invalid { error, attempt }
}

/// The first line of stray text, at most 40 characters.
fn excerpt(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= 40 {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(40).collect();
        format!("{cut}...")
    }
}

/// The `flycode-result` block an invalid reply earns: `[ok] false` with its code, message and a
/// hint, under the call's id when it could be read.
pub fn violation_result(error: &CallError, attempt: &Attempt) -> ResultBlock {
    let no_args = Map::new();
    let command = match &attempt.tool {
        Some(name) => match ToolName::from_name_in(name, ToolSet::Agent) {
            Some(tool) => render_command(tool, attempt.args.as_ref().unwrap_or(&no_args)),
            None => render_unknown_command(name, attempt.args.as_ref()),
        },
        None => "(none)".to_owned(),
    };
    ResultBlock::failure(
        attempt.id.clone(),
        command,
        error.code(),
        error.to_string(),
        Some(error.hint()),
    )
}
