//! The tag dialect's reader and printer of the one `flycode exec` door (`cli/exec.rs`): judge
//! one reply in seed 000's tag dialect, run its tool tags in order through the door's executor,
//! print their results in the tag form (PROTOCOL.md §15 (The tag dialect)).

use std::io::{IsTerminal, Write};

use serde_json::{Value, json};

use super::early_reply::EarlyReply;
use super::{ExecArgs, Outcome, advise_too_large};
use crate::config::Config;
use crate::protocol::ErrorCode;
use crate::protocol::display::{escape_for_display, escape_for_terminal};
use crate::protocol::tags::{TagResult, TagVerdict, read_tags};
use crate::tags::{TagAnswer, TagDoor, render_answers};
use crate::tools::executor::Executor;

/// What a tag-dialect reply came to before anything ran.
pub(crate) enum TagReading {
    /// Tool tags to run.
    Tags(Vec<crate::protocol::tags::Tag>),
    /// Answered already (too large, a violation): the door's outcome.
    Answered(Outcome),
    /// No call: prose, or a `<return>`.
    NoCall,
}

/// Reads the reply of `flycode exec --dialect tags` and judges it (PROTOCOL.md §15 (The tag
/// dialect)): its tool tags, or its answer when nothing can run.
pub(crate) fn read(
    args: &ExecArgs,
    early: EarlyReply,
    config: &Config,
) -> anyhow::Result<TagReading> {
    if args.input.is_none() && std::io::stdin().is_terminal() {
        eprintln!("flycode exec: reading the reply from standard input (end it with Ctrl-D)");
    }
    let secrets = config.limits().secrets();
    let reply = match early.into_reply(args.input.as_ref(), config.max_reply_bytes)? {
        Ok(reply) => reply,
        Err(too_large) => {
            advise_too_large(&too_large);
            let result = TagResult::failure(
                "reply",
                ErrorCode::TooLarge,
                &too_large.to_string(),
                "Send a shorter reply; write large content in parts (smart_edit with mode: Append).",
            );
            print(args.json, "invalid", &[&result], &[false], &secrets)?;
            return Ok(TagReading::Answered(Outcome::Failure));
        }
    };
    Ok(match read_tags(&reply) {
        TagVerdict::None => {
            eprintln!("no call: the reply holds no tag (verdict none)");
            TagReading::NoCall
        }
        TagVerdict::Return(summary) => {
            eprintln!(
                "no call: the reply is a <return> (the agent's end): {}",
                escape_for_display(&summary)
            );
            TagReading::NoCall
        }
        TagVerdict::Invalid(violation) => {
            let result = TagResult::violation(&violation);
            print(args.json, "invalid", &[&result], &[false], &secrets)?;
            TagReading::Answered(Outcome::Failure)
        }
        TagVerdict::Tags(tags) => TagReading::Tags(tags),
        TagVerdict::TagsThenReturn(tags, _) => {
            eprintln!(
                "flycode exec: the reply's last tag is a <return>: its tags run, and no agent ends here"
            );
            TagReading::Tags(tags)
        }
    })
}

/// Runs `tags` in order through the door's executor and prints their results in the tag form;
/// whether all succeeded.
pub(crate) fn answer(
    args: &ExecArgs,
    executor: &Executor<'_>,
    tags: &[crate::protocol::tags::Tag],
    config: &Config,
) -> anyhow::Result<bool> {
    let mut number = 0;
    let answers = TagDoor::new(executor).answer(tags, &mut || {
        number += 1;
        format!("tag-{number}")
    });
    report_on_terminal(&answers);
    let results: Vec<&TagResult> = answers.iter().map(|a| &a.result).collect();
    let oks: Vec<bool> = answers.iter().map(|a| a.ok).collect();
    print(
        args.json,
        "call",
        &results,
        &oks,
        &config.limits().secrets(),
    )?;
    Ok(oks.iter().all(|ok| *ok))
}

/// What the person at the terminal could do about a refusal, and unwritten audit lines.
fn report_on_terminal(answers: &[TagAnswer]) {
    for execution in answers.iter().filter_map(|a| a.execution.as_ref()) {
        if let Some(warning) = &execution.audit_error {
            eprintln!("flycode: warning: {warning}");
        }
        if let Some(advice) = execution.advice() {
            eprintln!("flycode: to allow it: {}", escape_for_display(advice));
        }
    }
}

/// Prints the results (escaped on a terminal), or one JSON object with `--json`.
fn print(
    as_json: bool,
    verdict: &str,
    results: &[&TagResult],
    oks: &[bool],
    secrets: &crate::tools::secrets::Secrets,
) -> anyhow::Result<()> {
    let text = render_answers(results, secrets);
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let items: Vec<Value> = results
            .iter()
            .zip(oks)
            .map(|(result, ok)| {
                let attributes: serde_json::Map<String, Value> = result
                    .attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(secrets.mask(v).into_owned())))
                    .collect();
                json!({
                    "tag": result.tag.name(),
                    "ok": ok,
                    "attributes": attributes,
                    "text": render_answers(&[result], secrets),
                })
            })
            .collect();
        let report = json!({"dialect": "tags", "verdict": verdict, "results": items, "text": text});
        writeln!(stdout, "{report}")?;
    } else if stdout.is_terminal() {
        stdout.write_all(escape_for_terminal(&text).as_bytes())?;
    } else {
        stdout.write_all(text.as_bytes())?;
    }
    Ok(())
}
