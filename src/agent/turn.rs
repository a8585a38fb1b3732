//! The loop of `flycode run`: request, reply, calls, results, until the model answers in prose.
//!
//! Every request is built afresh: the system prompt, the history, and the special messages at
//! their place of the moment ([`super::context`]). A reply is judged by the same code as
//! `flycode check` (text mode) or `flycode validate` (native mode); each valid call runs through
//! the [`Executor`] (policy, approval, sandbox, audit), the agent's own `agent.todo` and
//! `agent.note` too, which write to the run's [`SharedMemory`]; the read-only calls of a turn run
//! at once ([`super::parallel`]). Results go back as `flycode-result` blocks: in user messages
//! (text mode) or `tool` messages (native mode). The loop prints nothing: it reports
//! [`RunEvent`]s to an observer.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::client::{ChatRequest, ClientError, ClientEvent, Completion, Provider};
use super::context::{SharedMemory, SpecialMessages, assemble_request, folder_notes};
use super::message::{Message, NativeToolCall};
use super::parallel;
use super::prompt::{AssembledPrompt, CallingMode};
use super::summary::call_subject;
use super::tools::native_tool_definitions;
use super::transcript::TranscriptWriter;
use crate::protocol::call::{Attempt, CallError, parse_native_call};
use crate::protocol::verdict::violation_result;
use crate::protocol::{
    Call, ClassifyOptions, ErrorCode, ResultBlock, ToolName, ToolSet, Verdict, classify_reply,
    render_command,
};
use crate::tools::executor::{Execution, Executor};
use crate::tools::registry::{self, Invocation};

/// How a run is driven.
#[derive(Clone, Debug)]
pub struct RunSettings {
    /// The model name sent with every request.
    pub model: String,
    /// Calls as `flycode-call` blocks or as native function calls.
    pub mode: CallingMode,
    /// Requests at most.
    pub max_turns: u32,
    /// Consecutive invalid replies (or native turns whose calls were all invalid) before the
    /// run stops.
    pub max_violations: u32,
    /// Read-only calls of one turn running at once (1: one after another).
    pub max_parallel: u32,
    /// Stream replies.
    pub stream: bool,
    /// Accept text around a call block in text mode (reported as a warning, not a violation).
    pub lenient: bool,
}

/// Token counts summed over a run's requests, where the server reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "ending", content = "detail")]
pub enum Ending {
    /// The model answered in prose: the task is done (or the model says why not).
    Answered,
    /// The turn budget ran out first.
    MaxTurns,
    /// Too many invalid replies in a row; the detail is the last error.
    TooManyViolations(String),
    /// The person pressed Ctrl-C.
    Cancelled,
    /// The API failed beyond its retries; the detail says how.
    ClientFailed(String),
    /// The model sent an empty reply without calls; the detail is its finish reason.
    EmptyReply(String),
}

impl Ending {
    /// `answered`, `max_turns`...
    pub fn name(&self) -> &'static str {
        match self {
            Ending::Answered => "answered",
            Ending::MaxTurns => "max_turns",
            Ending::TooManyViolations(_) => "too_many_violations",
            Ending::Cancelled => "cancelled",
            Ending::ClientFailed(_) => "client_failed",
            Ending::EmptyReply(_) => "empty_reply",
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Why it ended.
    #[serde(flatten)]
    pub ending: Ending,
    /// The model's final prose answer, when it gave one.
    pub answer: Option<String>,
    /// Requests sent.
    pub turns: u32,
    /// Calls run (agent tools included), and how many of them failed.
    pub calls: u32,
    /// Calls that failed.
    pub failed_calls: u32,
    /// Invalid replies or native calls.
    pub violations: u32,
    /// Tokens, as reported by the server.
    pub usage: TokenUsage,
    /// Wall-clock time.
    #[serde(rename = "duration_ms", serialize_with = "as_millis")]
    pub duration: Duration,
    /// Where the transcript was written.
    pub transcript: Vec<PathBuf>,
}

fn as_millis<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// What happens during a run, for the terminal or `--json`.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// A request is about to be sent.
    Request {
        /// 1-based.
        turn: u32,
        /// Messages in it, special messages included.
        messages: usize,
    },
    /// A piece of the reply's text, as it streams.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// The request failed and is tried again.
    Retrying {
        /// The retry's number, 1-based.
        attempt: u32,
        /// The wait before it.
        delay_ms: u64,
        /// What failed.
        reason: String,
    },
    /// The whole reply arrived.
    Reply {
        /// 1-based.
        turn: u32,
        /// Its text.
        text: String,
        /// Native calls in it.
        tool_calls: usize,
        /// Its tokens, when reported.
        usage: Option<TokenUsage>,
    },
    /// A valid call starts (approval, if needed, comes after this).
    CallStarted {
        /// The call's id.
        id: Option<String>,
        /// The tool.
        tool: ToolName,
        /// Its main argument, short.
        subject: String,
        /// The slash form.
        command: String,
        /// It runs a program (the terminal shows a spinner while it runs).
        runs_program: bool,
    },
    /// The call ended.
    CallFinished {
        /// The call's id.
        id: Option<String>,
        /// The tool.
        tool: ToolName,
        /// Whether it succeeded.
        ok: bool,
        /// The error code, when it failed.
        code: Option<String>,
        /// One line saying what it did.
        summary: String,
        /// What the person could do to allow a refused call (never sent to the model).
        #[serde(skip_serializing_if = "Option::is_none")]
        advice: Option<String>,
        /// How long it took.
        duration_ms: u64,
    },
    /// A reply (or a native call) broke the protocol; its result tells the model how.
    Violation {
        /// The call's id, when readable.
        id: Option<String>,
        /// The error code.
        code: String,
        /// The message.
        message: String,
        /// Invalid turns in a row.
        consecutive: u32,
    },
    /// Something went wrong that does not stop the run (a transcript or audit write).
    Warning {
        /// What.
        message: String,
    },
    /// The run ended.
    Finished(RunReport),
}

/// Receives a run's events.
pub trait RunObserver {
    /// One event, in order.
    fn on_event(&mut self, event: &RunEvent);
}

/// One run of the loop, with everything it works with.
pub struct AgentRun<'a> {
    /// The API.
    pub provider: &'a mut dyn Provider,
    /// Runs the calls (policy, approval, sandbox, audit, stale-read guard).
    pub executor: Executor<'a>,
    /// Model, mode and budgets.
    pub settings: RunSettings,
    /// The system prompt and the role definition.
    pub prompt: AssembledPrompt,
    /// Where the run is recorded.
    pub transcript: TranscriptWriter,
    /// Set by Ctrl-C.
    pub cancel: &'a AtomicBool,
    /// The agent's TODO list and notes: written by `agent.todo` / `agent.note` through the
    /// executor's notebook (the same memory), read into every request.
    pub memory: &'a SharedMemory,
}

/// The loop's state while it runs.
struct Progress {
    history: Vec<Message>,
    /// The latest request as sent, and where this turn's messages start in the history: what
    /// the transcript holds.
    request: Vec<Message>,
    turn_start: usize,
    /// Names given to native calls that came without an id.
    anonymous_calls: u32,
    used_ids: HashSet<String>,
    consecutive_violations: u32,
    report: RunReport,
}

impl AgentRun<'_> {
    /// Works on `task` until the model answers in prose, a budget runs out, the API fails, or
    /// Ctrl-C.
    pub fn run(&mut self, task: &str, observer: &mut dyn RunObserver) -> RunReport {
        let started = Instant::now();
        let mut progress = Progress {
            history: vec![Message::user(task)],
            request: Vec::new(),
            turn_start: 1,
            anonymous_calls: 0,
            used_ids: HashSet::new(),
            consecutive_violations: 0,
            report: RunReport {
                ending: Ending::MaxTurns,
                answer: None,
                turns: 0,
                calls: 0,
                failed_calls: 0,
                violations: 0,
                usage: TokenUsage::default(),
                duration: Duration::ZERO,
                transcript: self.transcript.paths().to_vec(),
            },
        };
        let ending = self.drive(&mut progress, observer);
        progress.report.ending = ending;
        progress.report.duration = started.elapsed();
        observer.on_event(&RunEvent::Finished(progress.report.clone()));
        progress.report
    }

    fn drive(&mut self, progress: &mut Progress, observer: &mut dyn RunObserver) -> Ending {
        let tools = match self.settings.mode {
            CallingMode::Native => native_tool_definitions(),
            CallingMode::Text => Vec::new(),
        };
        for turn in 1..=self.settings.max_turns {
            if self.cancel.load(Ordering::SeqCst) {
                return Ending::Cancelled;
            }
            progress.request = self.build_request(progress);
            progress.turn_start = progress.history.len();
            progress.report.turns = turn;
            observer.on_event(&RunEvent::Request {
                turn,
                messages: progress.request.len(),
            });
            self.checkpoint(progress, observer);
            let completion = match self.provider.complete(
                &ChatRequest {
                    model: &self.settings.model,
                    messages: &progress.request,
                    tools: &tools,
                    stream: self.settings.stream,
                },
                &mut |event| observer.on_event(&client_event(event)),
                self.cancel,
            ) {
                Ok(completion) => completion,
                Err(ClientError::Cancelled) => return Ending::Cancelled,
                Err(error) => return Ending::ClientFailed(error.to_string()),
            };
            let usage = completion.usage.as_ref().map(|u| TokenUsage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            });
            if let Some(usage) = usage {
                let total = &mut progress.report.usage;
                total.prompt_tokens = total.prompt_tokens.saturating_add(usage.prompt_tokens);
                total.completion_tokens = total
                    .completion_tokens
                    .saturating_add(usage.completion_tokens);
            }
            observer.on_event(&RunEvent::Reply {
                turn,
                text: completion.content.clone(),
                tool_calls: completion.tool_calls.len(),
                usage,
            });
            if completion.finish_reason.as_deref() == Some("length") {
                observer.on_event(&RunEvent::Warning {
                    message: "the reply was cut at the model's output limit (finish_reason \"length\"); raise the server's max tokens if replies end early".to_owned(),
                });
            }
            // In text mode native calls are not read (no tools were offered): only text counts.
            let has_calls =
                self.settings.mode == CallingMode::Native && !completion.tool_calls.is_empty();
            if completion.content.trim().is_empty() && !has_calls {
                let reason = completion.finish_reason.clone();
                self.push(
                    progress,
                    Message::assistant(completion.content, Vec::new()),
                    observer,
                );
                return Ending::EmptyReply(reason.unwrap_or_else(|| "none".to_owned()));
            }
            let step = match self.settings.mode {
                CallingMode::Text => self.text_turn(progress, completion, observer),
                CallingMode::Native => self.native_turn(progress, completion, observer),
            };
            match step {
                Step::Continue => {}
                Step::End(ending) => return ending,
            }
            if self.cancel.load(Ordering::SeqCst) {
                return Ending::Cancelled;
            }
        }
        Ending::MaxTurns
    }

    /// The request as sent: system message, history, special messages at their place.
    fn build_request(&self, progress: &Progress) -> Vec<Message> {
        let notes = folder_notes(self.executor.sandbox);
        let specials = SpecialMessages::render(
            &self.prompt.role_definition,
            &self.memory.snapshot(),
            &notes,
        );
        assemble_request(self.prompt.system.as_deref(), &progress.history, &specials)
    }

    /// Rewrites the transcript: the latest request and everything since.
    fn checkpoint(&self, progress: &Progress, observer: &mut dyn RunObserver) {
        let since = progress
            .history
            .get(progress.turn_start..)
            .unwrap_or_default();
        if let Err(message) = self.transcript.save(&progress.request, since) {
            observer.on_event(&RunEvent::Warning { message });
        }
    }

    /// Adds a message to the conversation and to the transcript at once, so a run killed while
    /// a call runs still has the call on record.
    fn push(&self, progress: &mut Progress, message: Message, observer: &mut dyn RunObserver) {
        progress.history.push(message);
        self.checkpoint(progress, observer);
    }

    fn text_turn(
        &mut self,
        progress: &mut Progress,
        completion: Completion,
        observer: &mut dyn RunObserver,
    ) -> Step {
        let reply = completion.content;
        let classification = classify_reply(
            &reply,
            ClassifyOptions {
                lenient: self.settings.lenient,
                tools: ToolSet::Agent,
            },
        );
        self.push(
            progress,
            Message::assistant(reply.clone(), Vec::new()),
            observer,
        );
        match classification.verdict {
            Verdict::None => {
                progress.report.answer = Some(reply);
                Step::End(Ending::Answered)
            }
            Verdict::Call(call) => match self.claim_id(progress, &call) {
                Ok(()) => {
                    progress.consecutive_violations = 0;
                    let block = self.run_call(progress, &call, observer);
                    self.push(progress, Message::user_result(block.render()), observer);
                    Step::Continue
                }
                Err(error) => {
                    let attempt = attempt_of(&call);
                    let block = self.violation(progress, &error, &attempt, observer);
                    self.push(progress, Message::user_result(block.render()), observer);
                    self.after_violation(progress, &error)
                }
            },
            Verdict::Invalid { error, attempt } => {
                let block = self.violation(progress, &error, &attempt, observer);
                self.push(progress, Message::user_result(block.render()), observer);
                self.after_violation(progress, &error)
            }
        }
    }

    fn native_turn(
        &mut self,
        progress: &mut Progress,
        completion: Completion,
        observer: &mut dyn RunObserver,
    ) -> Step {
        let Completion {
            content,
            mut tool_calls,
            ..
        } = completion;
        name_anonymous_calls(progress, &mut tool_calls);
        self.push(
            progress,
            Message::assistant(content.clone(), tool_calls.clone()),
            observer,
        );
        if tool_calls.is_empty() {
            progress.report.answer = Some(content);
            return Step::End(Ending::Answered);
        }
        let mut last_error = None;
        let mut any_valid = false;
        // Judged in order first; then run, read-only runs at once (CONTRACT §11).
        let mut planned = Vec::with_capacity(tool_calls.len());
        for native in &tool_calls {
            planned.push(match self.native_call(progress, native) {
                Ok(call) => {
                    any_valid = true;
                    Planned::Run(call)
                }
                Err(error) => {
                    let attempt = Attempt {
                        id: Some(native.id.clone()),
                        tool: super::tools::tool_for_function(&native.function.name)
                            .map(|t| t.as_str().to_owned())
                            .or_else(|| Some(native.function.name.clone())),
                        args: serde_json::from_str(&native.function.arguments).ok(),
                    };
                    let block = self.violation(progress, &error, &attempt, observer);
                    last_error = Some(error);
                    Planned::Answered(block)
                }
            });
        }
        let blocks = self.run_planned(progress, planned, observer);
        for (native, mut block) in tool_calls.iter().zip(blocks) {
            // The API pairs results by tool_call_id: answer under the API's id even when the
            // violation could not read it.
            block.id = Some(native.id.clone());
            self.push(
                progress,
                Message::tool_result(native.id.clone(), block.render()),
                observer,
            );
        }
        match (any_valid, last_error) {
            (false, Some(error)) => self.after_violation(progress, &error),
            _ => {
                progress.consecutive_violations = 0;
                Step::Continue
            }
        }
    }

    fn native_call(
        &self,
        progress: &mut Progress,
        native: &NativeToolCall,
    ) -> Result<Call, CallError> {
        let call = parse_native_call(
            Some(&native.id),
            &native.function.name,
            &native.function.arguments,
            ToolSet::Agent,
        )?;
        self.claim_id(progress, &call)?;
        Ok(call)
    }

    /// A call id may be used once per run: a reused one would make the transcript ambiguous
    /// and could make a person think a call ran twice.
    fn claim_id(&self, progress: &mut Progress, call: &Call) -> Result<(), CallError> {
        let Some(id) = &call.id else {
            return Ok(());
        };
        if progress.used_ids.insert(id.clone()) {
            Ok(())
        } else {
            Err(CallError::InvalidId {
                shown: serde_json::Value::String(id.clone()).to_string(),
                reason: "an earlier call of this run used it; give every call a new id",
            })
        }
    }

    fn violation(
        &mut self,
        progress: &mut Progress,
        error: &CallError,
        attempt: &Attempt,
        observer: &mut dyn RunObserver,
    ) -> ResultBlock {
        progress.report.violations += 1;
        observer.on_event(&RunEvent::Violation {
            id: attempt.id.clone(),
            code: error.code().as_str().to_owned(),
            message: error.to_string(),
            consecutive: progress.consecutive_violations + 1,
        });
        violation_result(error, attempt)
    }

    fn after_violation(&mut self, progress: &mut Progress, error: &CallError) -> Step {
        progress.consecutive_violations += 1;
        if progress.consecutive_violations >= self.settings.max_violations {
            Step::End(Ending::TooManyViolations(format!(
                "{} invalid replies in a row; the last: {} ({})",
                progress.consecutive_violations,
                error,
                error.code().as_str()
            )))
        } else {
            Step::Continue
        }
    }

    /// Runs the calls of one turn and returns their results in call order: each maximal run of
    /// consecutive read-only calls at once (at most `max_parallel`), every other call alone.
    fn run_planned(
        &mut self,
        progress: &mut Progress,
        planned: Vec<Planned>,
        observer: &mut dyn RunObserver,
    ) -> Vec<ResultBlock> {
        let read_only: Vec<bool> = planned
            .iter()
            .map(|p| matches!(p, Planned::Run(call) if is_read_only(call)))
            .collect();
        let mut planned: Vec<Option<Planned>> = planned.into_iter().map(Some).collect();
        let mut blocks = Vec::with_capacity(planned.len());
        for run in parallel::runs(&read_only) {
            let mut calls = Vec::new();
            for slot in &mut planned[run] {
                match slot.take() {
                    Some(Planned::Answered(block)) => blocks.push(block),
                    Some(Planned::Run(call)) => calls.push(call),
                    None => {}
                }
            }
            match calls.len() {
                0 => {}
                1 => blocks.push(self.run_call(progress, &calls[0], observer)),
                _ => blocks.extend(self.run_at_once(progress, &calls, observer)),
            }
        }
        blocks
    }

    /// Runs read-only `calls` concurrently, sharing the executor; their events reach `observer`
    /// as they happen (each carries its call's id), their results come back in call order.
    fn run_at_once(
        &mut self,
        progress: &mut Progress,
        calls: &[Call],
        observer: &mut dyn RunObserver,
    ) -> Vec<ResultBlock> {
        let executor = &self.executor;
        let roots = executor.sandbox.roots();
        let mut blocks: Vec<Option<ResultBlock>> = vec![None; calls.len()];
        parallel::run_bounded(
            calls,
            self.settings.max_parallel as usize,
            self.cancel,
            |call| {
                let started = Instant::now();
                let execution = executor.execute(call);
                (execution, started.elapsed())
            },
            |event| match event {
                parallel::Progress::Started(index) => {
                    progress.report.calls += 1;
                    observer.on_event(&started_event(&calls[index], roots));
                }
                parallel::Progress::Finished(index, (execution, took)) => {
                    blocks[index] = Some(report_finished(
                        progress,
                        &calls[index],
                        execution,
                        *took,
                        observer,
                    ));
                }
            },
        );
        // A call Ctrl-C kept from starting is answered all the same.
        calls
            .iter()
            .zip(blocks)
            .map(|(call, block)| block.unwrap_or_else(|| not_run(call)))
            .collect()
    }

    /// Runs one valid call and returns its result block.
    fn run_call(
        &mut self,
        progress: &mut Progress,
        call: &Call,
        observer: &mut dyn RunObserver,
    ) -> ResultBlock {
        if self.cancel.load(Ordering::SeqCst) {
            return not_run(call);
        }
        observer.on_event(&started_event(call, self.executor.sandbox.roots()));
        let started = Instant::now();
        progress.report.calls += 1;
        let execution = self.executor.execute(call);
        report_finished(progress, call, &execution, started.elapsed(), observer)
    }
}

/// A call of a turn: judged valid and to be run, or already answered (a violation).
enum Planned {
    Run(Call),
    Answered(ResultBlock),
}

/// Whether `call` only reads, and so may run beside other reads.
fn is_read_only(call: &Call) -> bool {
    registry::is_read_only(call.tool)
}

fn started_event(call: &Call, roots: &[std::path::PathBuf]) -> RunEvent {
    RunEvent::CallStarted {
        id: call.id.clone(),
        tool: call.tool,
        subject: call_subject(call, roots),
        command: render_command(call.tool, &call.args),
        runs_program: Invocation::new(call)
            .is_ok_and(|invocation| invocation.effects().program.is_some()),
    }
}

/// Reports a call's end and returns its block.
fn report_finished(
    progress: &mut Progress,
    call: &Call,
    execution: &Execution,
    took: Duration,
    observer: &mut dyn RunObserver,
) -> ResultBlock {
    if let Some(message) = &execution.audit_error {
        observer.on_event(&RunEvent::Warning {
            message: message.clone(),
        });
    }
    let advice = execution.advice().map(str::to_owned);
    let block = execution.block.clone();
    if !block.ok {
        progress.report.failed_calls += 1;
    }
    observer.on_event(&RunEvent::CallFinished {
        id: call.id.clone(),
        tool: call.tool,
        ok: block.ok,
        code: block.code.clone(),
        summary: execution.summary.clone(),
        advice,
        duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    });
    block
}

/// The answer to a call Ctrl-C kept from running.
fn not_run(call: &Call) -> ResultBlock {
    ResultBlock::failure(
        call.id.clone(),
        render_command(call.tool, &call.args),
        ErrorCode::Cancelled,
        "not run: the user stopped the run (Ctrl-C)".to_owned(),
        None,
    )
}

enum Step {
    Continue,
    End(Ending),
}

/// Gives calls that came without an id one that no call of this run has.
fn name_anonymous_calls(progress: &mut Progress, calls: &mut [NativeToolCall]) {
    let taken: HashSet<String> = calls.iter().map(|c| c.id.clone()).collect();
    for call in calls.iter_mut().filter(|c| c.id.trim().is_empty()) {
        loop {
            progress.anonymous_calls += 1;
            let id = format!("flycode_call_{}", progress.anonymous_calls);
            if !taken.contains(&id) && !progress.used_ids.contains(&id) {
                call.id = id;
                break;
            }
        }
    }
}

fn attempt_of(call: &Call) -> Attempt {
    Attempt {
        id: call.id.clone(),
        tool: Some(call.tool.as_str().to_owned()),
        args: Some(call.args.clone()),
    }
}

fn client_event(event: ClientEvent) -> RunEvent {
    match event {
        ClientEvent::TextDelta(text) => RunEvent::TextDelta { text },
        ClientEvent::Retrying {
            attempt,
            delay,
            reason,
        } => RunEvent::Retrying {
            attempt,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            reason,
        },
    }
}
