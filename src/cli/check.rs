//! `flycode check`: the verdict on one reply, as text or JSON.

use std::io::{IsTerminal, Write};

use serde_json::{Value, json};

use super::{CheckArgs, Outcome, advise_too_large, read_input};
use crate::config::reply_limit::ReplyTooLarge;
use crate::protocol::verdict::violation_result_with_root;
use crate::protocol::{ClassifyOptions, ErrorCode, Verdict, classify_reply};

/// Runs `flycode check`.
pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<Outcome> {
    if args.input.is_none() && std::io::stdin().is_terminal() {
        eprintln!("flycode check: reading the reply from standard input (end it with Ctrl-D)");
    }
    let config = super::load_config(&crate::config::Flags {
        tool_set: args.tools.map(Into::into),
        roots: args.roots.roots.clone(),
        ..crate::config::Flags::default()
    })?;
    if super::dialect(args.dialect, &config) == crate::protocol::dialect::Dialect::Tags {
        return super::check_tags::run(args, &config);
    }
    let reply = match read_input(args.input.as_ref(), config.max_reply_bytes)? {
        Ok(reply) => reply,
        Err(too_large) => return refuse_too_large(args.json, &too_large),
    };
    let classification = classify_reply(
        &reply,
        ClassifyOptions {
            lenient: args.lenient,
            tools: config.tool_set,
        },
    );
    // The first root exec would be given is the example a relative path's hint shows.
    let example_root = super::first_root(&config);
    let outcome = match &classification.verdict {
        Verdict::None => Outcome::NoCall,
        Verdict::Call(_) => Outcome::Success,
        Verdict::Invalid { .. } => Outcome::Failure,
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let (call, error) = match &classification.verdict {
            Verdict::None => (Value::Null, Value::Null),
            Verdict::Call(call) => (json!(call), Value::Null),
            Verdict::Invalid { error, .. } => (
                Value::Null,
                json!({"code": error.code(), "message": error.to_string(), "hint": error.hint_with_root(example_root.as_deref())}),
            ),
        };
        let report = json!({
            "verdict": classification.verdict.name(),
            "call": call,
            "error": error,
            "warnings": classification.warnings,
        });
        writeln!(stdout, "{report}")?;
        return Ok(outcome);
    }
    for warning in &classification.warnings {
        eprintln!("warning[{}]: {}", warning.code.as_str(), warning.message);
    }
    match &classification.verdict {
        Verdict::None => {
            eprintln!("no call: the reply holds no flycode-call block (verdict none)");
        }
        Verdict::Call(call) => writeln!(stdout, "{}", json!(call))?,
        Verdict::Invalid { error, attempt } => {
            let result = violation_result_with_root(error, attempt, example_root.as_deref());
            write!(stdout, "{}", result.render())?;
            note_legible_id(&reply, attempt);
        }
    }
    Ok(outcome)
}

/// Names on standard error the id written in a call block whose JSON is broken: the answer's
/// `[id]` cannot carry it (PROTOCOL.md §3 (The answer to an invalid reply)), the person can
/// still find the call by it.
pub(super) fn note_legible_id(reply: &str, attempt: &crate::protocol::Attempt) {
    if attempt.id.is_some() {
        return;
    }
    if let Some(id) = crate::protocol::salvage::legible_id_of_reply(reply) {
        eprintln!(
            "note: the broken call block is call {} (its id as written; the answer carries [id] flycode-invalid-call, as its JSON cannot be read)",
            crate::protocol::display::escape_for_display(&id)
        );
    }
}

/// A reply over the reply limit: the invalid verdict with `too_large`, without parsing it.
fn refuse_too_large(as_json: bool, too_large: &ReplyTooLarge) -> anyhow::Result<Outcome> {
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let report = json!({
            "verdict": "invalid",
            "call": null,
            "error": {
                "code": ErrorCode::TooLarge,
                "message": too_large.to_string(),
                "hint": too_large.hint(),
            },
            "warnings": [],
        });
        writeln!(stdout, "{report}")?;
    } else {
        write!(stdout, "{}", too_large.result_block().render())?;
    }
    advise_too_large(too_large);
    Ok(Outcome::Failure)
}
