//! A turn of the loop in seed 000's tag dialect (PROTOCOL.md §15 (The tag dialect: run)): the
//! reply is read for tags ([`read_tags`]); its tool tags become steps ([`TagDoor::plan`]) that
//! run in order through the run's executor, each maximal run of consecutive read-only calls at
//! once as in the flycode dialect; a `<create_agent>` runs its child to its end first
//! (depth-first, [`crate::task::tags::TagChildren`]); the answers go back as one user message in the tag form. A
//! `<return>` ends the agent: alone, or as the reply's last tag once the tags before it ran.

use super::{AgentRun, RunEnding, RunEvent, RunObserver, TurnProgress, TurnStep};
use crate::message::Message;
use crate::protocol::tags::{Tag, TagError, TagResult, TagVerdict, read_tags};
use crate::protocol::{Call, ErrorCode};
use crate::tags::{AnswerShape, TagAnswer, TagDoor, TagStep, no_children, render_answers};
use flycode_core::tools::executor::schedule::CallClass;

/// The correction of a reply without tags: nobody reads prose in the tag dialect.
const NO_TAG: &str = "[flycode] Your reply holds no tag, and nobody reads prose: use <bash_call>, <builtin> or <create_agent> to work, and <return> alone to finish (also to ask the user a question).";

impl AgentRun<'_> {
    pub(super) fn tags_turn(
        &mut self,
        progress: &mut TurnProgress,
        completion: crate::client::Completion,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        let reply = completion.content;
        let verdict = read_tags(&reply);
        self.push(progress, Message::assistant(reply, Vec::new()), observer);
        let failed_before = std::mem::take(&mut progress.failed_last_turn);
        let secrets = self.executor.limits().secrets();
        match verdict {
            TagVerdict::Return(summary) => {
                progress.consecutive_violations = 0;
                progress.report.answer = Some(summary);
                TurnStep::End(RunEnding::Answered)
            }
            TagVerdict::None => {
                self.push(progress, Message::user_result(NO_TAG), observer);
                let said = "the reply holds no tag: nothing ran".to_owned();
                self.count_violation(progress, "no_tag", said, observer)
            }
            TagVerdict::Invalid(violation) => {
                let text = render_answers(&[&TagResult::violation(&violation)], &secrets);
                self.push(progress, Message::user_result(text), observer);
                let said = violation.message.clone();
                self.count_violation(progress, violation.code.as_str(), said, observer)
            }
            verdict => {
                progress.consecutive_violations = 0;
                let answers =
                    self.run_tags(progress, verdict.tool_tags(), &failed_before, observer);
                let results: Vec<&TagResult> = answers.iter().map(|a| &a.result).collect();
                let text = render_answers(&results, &secrets);
                self.push(progress, Message::user_result(text), observer);
                match verdict.returned() {
                    Some(summary) => {
                        progress.report.answer = Some(summary.to_owned());
                        TurnStep::End(RunEnding::Answered)
                    }
                    None => TurnStep::Continue,
                }
            }
        }
    }

    /// Runs a reply's tool tags in order and answers each: consecutive read-only calls at once,
    /// every other step alone, a call that repeats one that failed in the turn before refused
    /// (seed 003, R5).
    fn run_tags(
        &self,
        progress: &mut TurnProgress,
        tags: &[Tag],
        failed_before: &[(crate::protocol::ToolName, serde_json::Value)],
        observer: &mut dyn RunObserver,
    ) -> Vec<TagAnswer> {
        let door = TagDoor::new(&self.executor);
        let mut answers: Vec<Option<TagAnswer>> = tags.iter().map(|_| None).collect();
        let mut reads: Vec<(usize, Call, AnswerShape)> = Vec::new();
        for (index, tag) in tags.iter().enumerate() {
            progress.anonymous_calls += 1;
            let id = format!("tag-{}", progress.anonymous_calls);
            let step = match door.plan(tag, &id) {
                TagStep::Run { call, shape } if repeats_failed(&call, failed_before) => {
                    remember_failed(progress, &call, None);
                    TagStep::Answered(shape.refused(&repeated_failed_call()))
                }
                step => step,
            };
            match step {
                TagStep::Run { call, shape } if CallClass::of(call.tool) == CallClass::ReadOnly => {
                    reads.push((index, *call, shape));
                    continue;
                }
                _ => self.run_reads(progress, &mut reads, &mut answers, observer),
            }
            let answer = match step {
                TagStep::Run { call, shape } => self.run_alone(progress, *call, &shape, observer),
                step @ TagStep::Write { .. } => match door.write_step(step) {
                    Ok((call, shape)) => self.run_alone(progress, call, &shape, observer),
                    Err(answer) => *answer,
                },
                TagStep::Child { task, name, id } => match self.tag_children {
                    Some(children) => {
                        progress.report.calls += 1;
                        let answer = children.run_child(
                            &self.executor,
                            (&task, name.as_deref(), &id),
                            observer,
                        );
                        progress.report.failed_calls += u32::from(!answer.ok);
                        answer
                    }
                    None => TagAnswer::refused(tag.kind, "", &no_children()),
                },
                TagStep::Answered(answer) => {
                    observer.on_event(&RunEvent::Warning {
                        message: format!(
                            "<{}> was not run: {}",
                            tag.kind.name(),
                            answer.result.body.lines().next().unwrap_or_default()
                        ),
                    });
                    answer
                }
            };
            answers[index] = Some(answer);
        }
        self.run_reads(progress, &mut reads, &mut answers, observer);
        answers
            .into_iter()
            .map(|answer| answer.unwrap_or_else(not_run))
            .collect()
    }

    /// Runs the read-only calls gathered so far at once, and answers them.
    fn run_reads(
        &self,
        progress: &mut TurnProgress,
        reads: &mut Vec<(usize, Call, AnswerShape)>,
        answers: &mut [Option<TagAnswer>],
        observer: &mut dyn RunObserver,
    ) {
        if reads.is_empty() {
            return;
        }
        let gathered = std::mem::take(reads);
        let calls: Vec<Call> = gathered.iter().map(|(_, call, _)| call.clone()).collect();
        let executions = self
            .calls()
            .run_reads(&mut progress.report, &calls, observer);
        for ((index, call, shape), execution) in gathered.into_iter().zip(executions) {
            answers[index] = Some(match execution {
                Some(execution) => {
                    remember_failed(progress, &call, Some(&execution));
                    shape.finish(execution)
                }
                None => shape.refused(&cancelled()),
            });
        }
    }

    /// Runs one call on this thread and answers it.
    fn run_alone(
        &self,
        progress: &mut TurnProgress,
        call: Call,
        shape: &AnswerShape,
        observer: &mut dyn RunObserver,
    ) -> TagAnswer {
        match self
            .calls()
            .run_alone(&mut progress.report, &call, observer)
        {
            Some(execution) => {
                remember_failed(progress, &call, Some(&execution));
                shape.finish(execution)
            }
            None => shape.refused(&cancelled()),
        }
    }
}

/// Whether `call` repeats exactly (tool and arguments) one that failed in the turn before.
pub(super) fn repeats_failed(
    call: &Call,
    failed: &[(crate::protocol::ToolName, serde_json::Value)],
) -> bool {
    failed.iter().any(|(tool, args)| {
        *tool == call.tool && *args == serde_json::Value::Object(call.args.clone())
    })
}

/// Keeps `call`'s tool and arguments for the next turn's R5 check when it failed (`execution`,
/// or refused before it ran: `None`); a call the person stopped is not the model's to avoid.
pub(super) fn remember_failed(
    progress: &mut TurnProgress,
    call: &Call,
    execution: Option<&flycode_core::tools::executor::Execution>,
) {
    let failed = execution.is_none_or(|execution| {
        !execution.block.ok
            && execution.block.code.as_deref() != Some(ErrorCode::Cancelled.as_str())
    });
    if failed {
        progress
            .failed_last_turn
            .push((call.tool, serde_json::Value::Object(call.args.clone())));
    }
}

fn repeated_failed_call() -> TagError {
    TagError::new(
        ErrorCode::RepeatedFailedCall,
        "not run: this repeats exactly the call whose result just failed".into(),
        "Correct what the error said, or <return> and ask the user; do not send the same failing call again.".into(),
    )
}

fn cancelled() -> TagError {
    TagError::new(
        ErrorCode::Cancelled,
        "not run: the user stopped the run (Ctrl-C)".into(),
        "Wait for the user.".into(),
    )
}

fn not_run() -> TagAnswer {
    TagAnswer::refused(crate::protocol::tags::TagKind::Builtin, "", &cancelled())
}
