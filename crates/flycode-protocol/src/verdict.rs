//! One reply → one verdict (PROTOCOL.md §1 (Reading a reply)): `none`, `call`, or `invalid` with the first error code
//! that applies, in the contract's order, plus warnings.

use std::ops::Range;

use serde::Serialize;
use serde_json::{Map, Value};

use super::call::{Attempt, Call, CallError, parse_call_noting_unset};
use super::error_code::WarningCode;
use super::json::normalize_artefacts_outside_strings;
use super::parse::{ParsedReply, is_paste_artefact, is_reply_whitespace, parse_reply};
use super::result::{INVALID_CALL_ID, ResultBlock};
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

    let before = &parsed.text[..block.span.start];
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
            || parsed.has_artefact_in(&(0..parsed.text.len())));
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
    match parse_call_noting_unset(&content, options.tools) {
        Ok((call, dropped)) => {
            warnings.extend(unset_arguments_warning(&dropped));
            Verdict::Call(call)
        }
        Err(error) => invalid(error, Attempt::read(&content)),
    }
}

/// The unset-argument warning among a reply's warnings, as its call's result carries it
/// (`[warning]`).
pub fn unset_argument_warning(warnings: &[Warning]) -> Option<String> {
    warnings
        .iter()
        .find(|warning| warning.code == WarningCode::UnsetArgument)
        .map(|warning| warning.message.clone())
}

/// The warning for the optional arguments the call was given as `null` or `""` and runs without
/// (`dropped`, as written), so the model and a transcript's reader learn that they were left out.
fn unset_arguments_warning(dropped: &[String]) -> Option<Warning> {
    (!dropped.is_empty()).then(|| Warning {
        code: WarningCode::UnsetArgument,
        message: format!(
            "{} taken as not given; leave out an argument you have no value for",
            dropped.join(", ")
        ),
    })
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
/// hint, under the call's id when it could be read and [`INVALID_CALL_ID`] otherwise (never
/// `(none)`, which the seed prompt tells the model to ignore).
pub fn violation_result(error: &CallError, attempt: &Attempt) -> ResultBlock {
    violation_result_with_root(error, attempt, None)
}

/// [`violation_result`] for a user whose first allowed root is `example_root`: the hint of a
/// relative path shows an absolute path inside it.
pub fn violation_result_with_root(
    error: &CallError,
    attempt: &Attempt,
    example_root: Option<&str>,
) -> ResultBlock {
    let id = attempt
        .id
        .clone()
        .unwrap_or_else(|| INVALID_CALL_ID.to_owned());
    let mut hint = error.hint_with_root(example_root);
    if let Some(repaired) = repaired_call(error, attempt) {
        hint.push_str(&format!(
            " Leaving out what was refused, the call is valid: {repaired}"
        ));
    }
    ResultBlock::failure(
        Some(id),
        attempted_command(error, attempt),
        error.code(),
        error.to_string(),
        Some(hint),
    )
}

/// The attempted call with its refused optional arguments left out (the first of exclusive ones
/// kept), as one line of JSON to copy, where that makes it valid (PROTOCOL.md §3, Decision on
/// unset arguments). Only for the argument errors: every other error is about the reply itself.
fn repaired_call(error: &CallError, attempt: &Attempt) -> Option<String> {
    let (CallError::InvalidArgs { tool, .. } | CallError::MutuallyExclusive { tool, .. }) = error
    else {
        return None;
    };
    let repaired = super::args::repaired_args(*tool, attempt.args.as_ref()?)?;
    let mut call = Map::new();
    if let Some(id) = &attempt.id {
        call.insert("id".to_owned(), Value::String(id.clone()));
    }
    call.insert("tool".to_owned(), Value::String(tool.as_str().to_owned()));
    call.insert("args".to_owned(), Value::Object(repaired));
    Some(Value::Object(call).to_string())
}

/// The `[command]` of an invalid reply: the slash form of what could be read, `(none)` when
/// nothing could. A repeated key makes the value unknowable, so only the tool is shown then.
fn attempted_command(error: &CallError, attempt: &Attempt) -> String {
    let Some(name) = &attempt.tool else {
        return "(none)".to_owned();
    };
    let known = ToolName::from_name_in(name, ToolSet::Agent);
    if let CallError::DuplicateKey { key, location } = error {
        if location.is_empty() && key == "tool" {
            return "(none)".to_owned();
        }
        return match known {
            Some(tool) => format!("/{tool}"),
            None => render_unknown_command(name, None),
        };
    }
    let no_args = Map::new();
    match known {
        Some(tool) => render_command(tool, attempt.args.as_ref().unwrap_or(&no_args)),
        None => render_unknown_command(name, attempt.args.as_ref()),
    }
}

/// The warning for a native-mode reply whose text holds a `flycode-call` block, which native
/// mode does not run (PROTOCOL.md §13 (The API loop: calling modes)); `None` when it holds none.
pub fn native_text_call_warning(text: &str) -> Option<Warning> {
    let calls = super::text_calls::find_text_calls(text, super::ToolSet::All);
    let first = calls.first()?;
    let what = match calls.len() {
        1 => format!("a call written as text ({})", first.form.describe()),
        n => format!(
            "{n} calls written as text (the first {})",
            first.form.describe()
        ),
    };
    Some(Warning {
        code: WarningCode::CallBlockInNativeReply,
        message: format!(
            "the reply's text holds {what}, which native mode does not take as a call: the model must call the tool through the API's function calling (flycode run recovers one unambiguous call and corrects the model otherwise)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(reply: &str) -> ResultBlock {
        match classify_reply(reply, ClassifyOptions::default()).verdict {
            Verdict::Invalid { error, attempt } => violation_result(&error, &attempt),
            other => panic!("not invalid: {other:?}"),
        }
    }

    fn block(content: &str) -> String {
        format!("```flycode-call\n{content}\n```\n")
    }

    #[test]
    fn calls_without_a_usable_id_are_answered_under_flycodes_own_id() {
        for content in [
            r#"{"tool":"fs.read","args":{"path":"/a"}}"#,
            r#"{"id":"","tool":"fs.read","args":{"path":"/a"}}"#,
            r#"{"id":null,"tool":"fs.read","args":{"path":"/a"}}"#,
            r#"{"id":7,"tool":"fs.read","args":{"path":"/a"}}"#,
            r#"{"id":"(none)","tool":"fs.read","args":{"path":"/a"}}"#,
            r#"{"id":"flycode-invalid-call","tool":"fs.read","args":{"path":"/a"}}"#,
            "not json",
        ] {
            let rendered = answer(&block(content)).render();
            assert!(
                rendered.contains("\n[id] flycode-invalid-call\n"),
                "{content}: {rendered}"
            );
            let read = ResultBlock::parse_rendered(&rendered).unwrap();
            assert!(!crate::call::is_no_id(read.id.as_deref().unwrap()));
        }
        let rendered = answer(&block(r#"{"id":"call-009","tool":"fs.raed","args":{}}"#)).render();
        assert!(rendered.contains("\n[id] call-009\n"), "{rendered}");
    }

    #[test]
    fn a_repeated_key_shows_no_guessed_value() {
        let attempt = Attempt {
            id: Some("call_1".into()),
            tool: Some("fs.read".into()),
            args: serde_json::from_str(r#"{"path":"/etc/passwd"}"#).ok(),
        };
        let error = CallError::DuplicateKey {
            key: "path".into(),
            location: "args".into(),
        };
        let result = violation_result(&error, &attempt);
        assert_eq!(result.command, "/fs.read");
        let rendered = answer(&block(
            r#"{"id":"a","tool":"fs.read","args":{"path":"/a","path":"/etc/passwd"}}"#,
        ))
        .render();
        assert!(!rendered.contains("/etc/passwd\n[ok]"), "{rendered}");
        assert!(rendered.contains("[code] duplicate_key"), "{rendered}");
    }

    #[test]
    fn the_relative_path_hint_names_the_users_root() {
        let reply = block(r#"{"id":"c1","tool":"fs.read","args":{"path":"README.md"}}"#);
        let Verdict::Invalid { error, attempt } =
            classify_reply(&reply, ClassifyOptions::default()).verdict
        else {
            panic!("not invalid")
        };
        let result = violation_result_with_root(&error, &attempt, Some("/srv/app"));
        assert_eq!(
            result.hint.as_deref(),
            Some("Use an absolute path inside the allowed roots, e.g. /srv/app/README.md.")
        );
    }

    #[test]
    fn huge_arguments_keep_the_answer_small_and_say_what_was_wrong() {
        let huge = "x".repeat(1 << 20);
        let cases = [
            (
                format!(r#"{{"id":"c1","tool":"fs.read","args":{{"path":"/{huge}","head":0}}}}"#),
                "invalid_args",
            ),
            (
                format!(r#"{{"id":"c1","tool":"fs.read","args":{{"path":"{huge}"}}}}"#),
                "relative_path",
            ),
            (
                format!(r#"{{"id":"{huge}","tool":"fs.read","args":{{"path":"/a"}}}}"#),
                "invalid_id",
            ),
            (
                format!(r#"{{"id":"c1","tool":"{huge}","args":{{"path":"/{huge}"}}}}"#),
                "unknown_tool",
            ),
            (
                format!(r#"{{"id":"c1","tool":"fs.read","args":{{"{huge}":1}}}}"#),
                "invalid_args",
            ),
        ];
        for (content, code) in cases {
            let rendered = answer(&block(&content)).render();
            assert!(
                rendered.len() < 8 * 1024,
                "{code}: {} bytes",
                rendered.len()
            );
            assert!(rendered.contains(&format!("[code] {code}\n")), "{rendered}");
            assert!(rendered.contains("chars)"), "{code}: {rendered}");
        }
    }
}
