//! The tag dialect's reader of the one `flycode check` door (`cli/check.rs`, which loads the
//! configuration and the roots for both dialects): the verdict on one reply in seed 000's tag
//! dialect, and the registry call each of its tool tags stands for (PROTOCOL.md §15 (The tag
//! dialect)).

use std::io::Write;

use serde_json::{Value, json};

use super::{CheckArgs, Outcome, read_input};
use crate::config::Config;
use crate::protocol::ErrorCode;
use crate::protocol::tags::{TagAction, TagResult, TagVerdict, map_tag, read_tags};

/// Runs `flycode check --dialect tags` with the loaded configuration.
pub(crate) fn run(args: &CheckArgs, config: &Config) -> anyhow::Result<Outcome> {
    let reply = match read_input(args.input.as_ref(), config.max_reply_bytes)? {
        Ok(reply) => reply,
        Err(too_large) => {
            super::advise_too_large(&too_large);
            let violation = crate::protocol::tags::TagViolation {
                code: ErrorCode::TooLarge,
                message: too_large.to_string(),
                hint: "Send a shorter reply; write large content in parts (smart_edit with mode: Append).".into(),
                line: 1,
            };
            return report(args.json, &TagVerdict::Invalid(violation), None);
        }
    };
    // One judgement with exec: relative builtin paths are taken in the first root exec would be
    // given (the current directory when none is named).
    let base = super::first_root(config);
    report(args.json, &read_tags(&reply), base.as_deref())
}

fn report(as_json: bool, verdict: &TagVerdict, base: Option<&str>) -> anyhow::Result<Outcome> {
    let mut stdout = std::io::stdout().lock();
    let mut outcome = match verdict {
        TagVerdict::None => Outcome::NoCall,
        TagVerdict::Tags(_) | TagVerdict::TagsThenReturn(..) | TagVerdict::Return(_) => {
            Outcome::Success
        }
        TagVerdict::Invalid(_) => Outcome::Failure,
    };
    let mut calls = Vec::new();
    let mut texts = Vec::new();
    {
        let tags = verdict.tool_tags();
        for (index, tag) in tags.iter().enumerate() {
            let mapped = map_tag(tag, &format!("tag-{}", index + 1), base);
            let item = match &mapped.action {
                Ok(action) => {
                    let call = match action {
                        TagAction::Call(call) | TagAction::ReadFile { call, .. } => json!(call),
                        TagAction::Write { path, mode, text } => json!({
                            "tool": "fs.write",
                            "smartEdit": {"path": path, "mode": format!("{mode:?}"), "newText": text},
                        }),
                    };
                    texts.push(format!("{call}\n"));
                    json!({"tag": tag.kind.name(), "line": tag.line, "call": call, "error": null})
                }
                Err(error) => {
                    outcome = Outcome::Failure;
                    let name = if mapped.builtin.is_empty() {
                        tag.kind.name()
                    } else {
                        mapped.builtin.as_str()
                    };
                    texts.push(
                        TagResult::failure(name, error.code, &error.message, &error.hint).render(),
                    );
                    json!({"tag": tag.kind.name(), "line": tag.line, "call": null,
                        "error": {"code": error.code, "message": error.message, "hint": error.hint}})
                }
            };
            calls.push(item);
        }
    }
    let (error, summary) = match verdict {
        TagVerdict::Invalid(v) => {
            texts.push(TagResult::violation(v).render());
            (
                json!({"code": v.code, "message": v.message, "hint": v.hint, "line": v.line}),
                Value::Null,
            )
        }
        _ => match verdict.returned() {
            Some(summary) => {
                texts.push(format!("{}\n", json!({"return": summary})));
                (Value::Null, json!(summary))
            }
            None => (Value::Null, Value::Null),
        },
    };
    if as_json {
        let report = json!({
            "dialect": "tags",
            "verdict": verdict.name(),
            "calls": calls,
            "error": error,
            "return": summary,
        });
        writeln!(stdout, "{report}")?;
    } else {
        if matches!(verdict, TagVerdict::None) {
            eprintln!("no call: the reply holds no tag (verdict none)");
        }
        for text in texts {
            stdout.write_all(text.as_bytes())?;
        }
    }
    Ok(outcome)
}
