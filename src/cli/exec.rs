//! `flycode exec`: judge one reply (or a slash command), run its call under the policy, print
//! the `flycode-result` block.

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;

use anyhow::Context;
use serde_json::Value;

use super::early_reply::EarlyReply;
use super::{ExecArgs, Outcome, advise_too_large, approver, hand_off_secrets, open_sandbox};
use crate::protocol::display::{escape_for_display, escape_for_terminal};
use crate::protocol::verdict::{unset_argument_warning, violation_result_with_root};
use crate::protocol::{
    Call, ClassifyOptions, ResultBlock, ToolSet, Verdict, classify_reply, parse_slash_in,
};
use crate::sandbox::Session;
use crate::sandbox::read::{KeptBody, KeptError};
use crate::tools::executor::{Door, DoorSession};
use crate::tools::secrets::Secrets;

/// Runs `flycode exec`.
pub fn run(args: &ExecArgs) -> anyhow::Result<Outcome> {
    // The reply first, then the guardian, before anything else is read or started, unless the
    // reply cannot start a program (PROTOCOL.md §11 (Security), "No program outlives flycode").
    use crate::sandbox::process::guard;
    // A worker reads its reply later, from the standard input the front gave it (read early,
    // a restart that hands off the secrets would lose it).
    let early = if guard::is_guarded_worker() {
        EarlyReply::NotRead
    } else {
        EarlyReply::read(args)?
    };
    if !early.may_start_program(args.slash.as_deref()) {
        guard::run_no_programs(
            "this flycode exec judged its reply to start no program, so it has no guardian to end one; nothing was run (report this as a flycode bug)",
        );
    } else {
        guard::guard_this_process_feeding(early.for_the_worker());
        if early.for_the_worker().is_some() && !guard::is_guarded_worker() {
            // Its guardian could not be started, and the reply was read: a restart without the
            // secrets would lose it, and a program started here could read them.
            guard::run_no_programs(
                "flycode could not start its guardian (see the warning above), so it runs no program",
            );
        }
    }
    // Without a program to end, a signal only has to stop the call: flags, no thread.
    let stop = if guard::runs_no_programs().is_some() {
        Some(super::signals::install_for_calls_alone()?)
    } else {
        super::signals::install(super::signals::StopDoor::Exec, None)?;
        None
    };
    let loaded = crate::config::Config::load(&super::config_flags(&args.run));
    // The secrets leave flycode's environment only where a program could read it (PROTOCOL.md
    // §11 (Security)): a process that runs none keeps them and reads them from there.
    if guard::runs_no_programs().is_none() {
        hand_off_secrets(loaded.as_ref().ok())?;
    }
    let (config, sandbox) = open_sandbox(&args.run, loaded)?;
    // One door, two readers (PROTOCOL.md §15 (The tag dialect)): the reply is read in its
    // dialect; what it asks for runs through one session, opened only when there is a call.
    let tags = args.slash.is_none()
        && super::dialect(args.run.dialect, &config) == crate::protocol::dialect::Dialect::Tags;
    let work = if tags {
        match super::exec_tags::read(args, early, &config)? {
            super::exec_tags::TagReading::Tags(tags) => Work::Tags(tags),
            super::exec_tags::TagReading::Answered(outcome) => return Ok(outcome),
            super::exec_tags::TagReading::NoCall => anyhow::bail!(NoCall),
        }
    } else {
        // A relative path's hint shows a path inside the first root.
        let first_root = sandbox
            .roots()
            .first()
            .map(|root| root.display().to_string());
        match read_call(
            args,
            early,
            config.tool_set,
            config.max_reply_bytes,
            first_root.as_deref(),
        )? {
            CallOrAnswer::Call(call, warning) => Work::Call(Box::new(call), warning),
            CallOrAnswer::Answer(block, code) => {
                print_result(
                    args.json,
                    block,
                    None,
                    None,
                    None,
                    &config.limits().secrets(),
                )?;
                return Ok(code);
            }
        }
    };
    let memory = match &args.session {
        Some(name) => {
            let memory = Session::load(name).map_err(anyhow::Error::msg)?;
            if let Some(notice) = memory.notice() {
                eprintln!("flycode: {notice}");
            }
            Some(memory)
        }
        None => None,
    };
    let session = DoorSession::open(Door::Exec, &config, config.limits(), memory)?;
    let approver = approver(&args.run, super::approve::Asking::OneCall);
    let executor = session.executor(&sandbox, approver.as_ref());
    let executor = match stop {
        Some(stop) => executor.cancelled_by(stop),
        None => executor,
    };
    // Without --json only the result block is printed: no tool need copy its body into data,
    // and a large read's body can stay in its file until `print_result` writes it out. The tag
    // dialect builds its answers from the blocks' bodies, so it gets them in memory.
    let executor = if args.json || tags {
        executor
    } else {
        executor.text_only()
    };
    let succeeded = match work {
        Work::Call(call, warning) => run_call(args, &executor, &call, warning, &config)?,
        Work::Tags(tags) => super::exec_tags::answer(args, &executor, &tags, &config)?,
    };
    session.save_memory().context("saving the session")?;
    // Ctrl-C at the question: refused (and logged) like a no, and flycode reports the stop
    // (PROTOCOL.md §10 (Running calls), "Ctrl-C at the question").
    Ok(if super::approve::was_interrupted() {
        Outcome::Interrupted
    } else if succeeded {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// What a reply asks the door to run.
enum Work {
    /// A flycode-dialect call (or a slash command), and what its result must warn of.
    Call(Box<Call>, Option<String>),
    /// The tool tags of a tag-dialect reply.
    Tags(Vec<crate::protocol::tags::Tag>),
}

/// Runs one call through `executor` and prints its result, with `warning` among its headers
/// (arguments it was given and runs without); whether it succeeded.
fn run_call(
    args: &ExecArgs,
    executor: &crate::tools::executor::Executor<'_>,
    call: &Call,
    warning: Option<String>,
    config: &crate::config::Config,
) -> anyhow::Result<bool> {
    let mut execution = executor.execute(call);
    if let Some(warning) = warning {
        execution.block.fields.push(("warning".to_owned(), warning));
    }
    if execution.change.is_some() {
        eprintln!("└ {}", escape_for_display(&execution.summary));
    }
    if let Some(warning) = &execution.audit_error {
        eprintln!("flycode: warning: {warning}");
    }
    if let Some(advice) = execution.advice() {
        eprintln!("flycode: to allow it: {}", escape_for_display(advice));
    }
    // Moved, not copied: a 1 MB read's content is in the data.
    let output = execution.output.take();
    let kept = output.as_ref().and_then(|output| output.kept.clone());
    let data = output.map(|output| output.data);
    let succeeded = execution.is_ok();
    let block = std::mem::replace(
        &mut execution.block,
        ResultBlock::success(None, String::new(), None),
    );
    let whole = print_result(
        args.json,
        block,
        Some(call),
        data,
        kept.as_ref(),
        &config.limits().secrets(),
    )?;
    Ok(succeeded && whole)
}

enum CallOrAnswer {
    /// A call, and the warning its result carries (PROTOCOL.md §3, Decision on unset
    /// arguments).
    Call(Call, Option<String>),
    Answer(ResultBlock, Outcome),
}

fn read_call(
    args: &ExecArgs,
    early: EarlyReply,
    tools: ToolSet,
    max_reply_bytes: usize,
    example_root: Option<&str>,
) -> anyhow::Result<CallOrAnswer> {
    if let Some(line) = &args.slash {
        if !line.trim_start().starts_with('/') {
            anyhow::bail!(
                "--slash takes a slash command, and a slash command starts with `/`: --slash \"/{}\"",
                escape_for_display(line.trim())
            );
        }
        return Ok(match parse_slash_in(line, tools) {
            Ok(call) => CallOrAnswer::Call(call, None),
            Err(error) => CallOrAnswer::Answer(
                ResultBlock::failure(
                    None,
                    escape_for_display(line.trim()).into_owned(),
                    error.code(),
                    error.to_string(),
                    Some(error.hint_with_root(example_root)),
                ),
                Outcome::Failure,
            ),
        });
    }
    if args.input.is_none() && std::io::stdin().is_terminal() {
        eprintln!("flycode exec: reading the reply from standard input (end it with Ctrl-D)");
    }
    let reply = match early.into_reply(args.input.as_ref(), max_reply_bytes)? {
        Ok(reply) => reply,
        Err(too_large) => {
            advise_too_large(&too_large);
            return Ok(CallOrAnswer::Answer(
                too_large.result_block(),
                Outcome::Failure,
            ));
        }
    };
    let classification = classify_reply(
        &reply,
        ClassifyOptions {
            lenient: args.run.lenient,
            tools,
        },
    );
    for warning in &classification.warnings {
        eprintln!("warning[{}]: {}", warning.code.as_str(), warning.message);
    }
    Ok(match classification.verdict {
        Verdict::Call(call) => {
            CallOrAnswer::Call(call, unset_argument_warning(&classification.warnings))
        }
        Verdict::Invalid { error, attempt } => {
            super::check::note_legible_id(&reply, &attempt);
            let answer = violation_result_with_root(&error, &attempt, example_root);
            CallOrAnswer::Answer(answer, Outcome::Failure)
        }
        Verdict::None => {
            eprintln!("no call: the reply holds no flycode-call block (verdict none)");
            anyhow::bail!(NoCall)
        }
    })
}

/// The reply held no call: exit 3, not an error message.
#[derive(Debug, thiserror::Error)]
#[error("the input holds no call")]
pub struct NoCall;

/// Prints the answer, masked once more as it leaves (PROTOCOL.md §9 (Secrets and masking)): whatever made
/// the block (the executor, a violation, a refused slash line), its id, text and data show no
/// secret. A body `kept` in its file is written out from there (masked as it goes). Whether the
/// body went out whole: a kept file that changed since the tool checked it is cut short.
fn print_result(
    as_json: bool,
    mut block: ResultBlock,
    call: Option<&Call>,
    mut data: Option<Value>,
    kept: Option<&KeptBody>,
    secrets: &Secrets,
) -> anyhow::Result<bool> {
    secrets.mask_block(&mut block);
    if let Some(data) = &mut data {
        secrets.mask_value(data);
    }
    let mut stdout = std::io::stdout().lock();
    if !as_json {
        // Written in parts: a large body goes out from where it is, not copied into the
        // rendered block first (a 10 MB read would pay for a second 10 MB of fresh memory).
        let parts = match kept {
            Some(kept) => block.render_parts_around(kept.facts().longest_backtick_run),
            None => block.render_parts(),
        };
        // On a terminal, file contents and program output must not drive it (colours, cursor,
        // OSC 52 clipboard writes); piped, the block stays byte for byte.
        let terminal = stdout.is_terminal();
        // A body written out from its file goes straight to the descriptor: through the
        // standard output's line buffer, a piece that does not end with a line feed costs two
        // writes (a 10 MB file: 80 writes more, issue 41).
        let mut direct = match kept {
            Some(_) if !terminal => {
                stdout.flush()?;
                stdout
                    .as_fd()
                    .try_clone_to_owned()
                    .ok()
                    .map(std::fs::File::from)
            }
            _ => None,
        };
        let mut send = |piece: &str| {
            if terminal {
                stdout.write_all(escape_for_terminal(piece).as_bytes())
            } else if let Some(direct) = &mut direct {
                direct.write_all(piece.as_bytes())
            } else {
                stdout.write_all(piece.as_bytes())
            }
        };
        send(&parts.head)?;
        let mut whole = true;
        match (kept, parts.body) {
            (Some(kept), _) => {
                match kept.write_out(parts.fence_len(), &mut send) {
                    Ok(_) => {}
                    Err(KeptError::Write(error)) => return Err(error.into()),
                    Err(error) => {
                        // The body so far is whole characters and keeps the fence; what it
                        // misses is said in it, and here (PROTOCOL.md §9 (fs.read), "A large
                        // file written out from where it is").
                        whole = false;
                        send(CUT_SHORT)?;
                        eprintln!(
                            "flycode: {}: {error}: the result's content stops there; read it again",
                            escape_for_display(kept.path())
                        );
                    }
                }
                send("\n")?;
            }
            (None, Some(body)) => {
                send(body)?;
                send("\n")?;
            }
            (None, None) => {}
        }
        send(&parts.tail)?;
        return Ok(whole);
    }
    let text = block.render();
    let mut report = block.report(call.map(|c| c.tool), data);
    report["text"] = Value::String(text);
    writeln!(stdout, "{report}")?;
    Ok(true)
}

/// The line that ends a body written out from its file when the file changed meanwhile.
const CUT_SHORT: &str = "\n[flycode: the file changed while it was written out: its content above stops where the change was found; read it again]";

#[cfg(test)]
mod tests {
    use super::super::approve::approval_question;

    #[test]
    fn the_approval_question_shows_hidden_characters() {
        let question = approval_question(
            "/shell.exec 'rm -rf ./\u{202E}gpj.exe\u{1b}[2K'",
            "shell.exec asks first",
            None,
            None,
        );
        assert!(
            question.contains("\\u{202E}gpj.exe\\u{001B}[2K"),
            "{question}"
        );
        assert!(!question.contains('\u{202E}') && !question.contains('\u{1b}'));
    }
}
