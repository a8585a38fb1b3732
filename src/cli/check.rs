//! `flycode check`: the verdict on one reply, as text or JSON.

use std::io::{IsTerminal, Write};

use serde_json::{Value, json};

use super::{CheckArgs, Outcome, read_input};
use crate::protocol::verdict::violation_result;
use crate::protocol::{ClassifyOptions, Verdict, classify_reply};

/// Runs `flycode check`.
pub fn run(args: &CheckArgs) -> anyhow::Result<Outcome> {
    if args.input.is_none() && std::io::stdin().is_terminal() {
        eprintln!("flycode check: reading the reply from standard input (end it with Ctrl-D)");
    }
    let reply = read_input(args.input.as_ref())?;
    let classification = classify_reply(
        &reply,
        ClassifyOptions {
            lenient: args.lenient,
            tools: super::tool_set(args.tools)?,
        },
    );
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
                json!({"code": error.code(), "message": error.to_string(), "hint": error.hint()}),
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
            write!(stdout, "{}", violation_result(error, attempt).render())?;
        }
    }
    Ok(outcome)
}
