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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::calls::{PlannedCall, TurnCalls};
use super::client::{
    CUT_REPETITION, CUT_TIME_LIMIT, ChatRequest, ClientError, ClientEvent, Completion, Provider,
    repetition,
};
use super::compaction::{self, Compactor, Measure, estimate_tokens};
use super::context::{SharedMemory, SpecialMessages, assemble_request_moving_every, folder_notes};
use super::events::MaskingObserver;
pub use super::events::{RunEnding, RunEvent, RunObserver, RunReport, TokenUsage};
use super::message::{Message, NativeToolCall, ReplyNote};
use super::prompt::{AssembledPrompt, CallingMode};
use super::settings::ResolvedSettings;
use super::tools::native_tool_definitions;
use super::transcript::{RecordState, RunRecord, SummaryRecord, TranscriptWriter};
use crate::protocol::call::{Attempt, CallError, parse_native_call};
use crate::protocol::dialect::Dialect;
use crate::protocol::text_calls::find_text_calls;
use crate::protocol::verdict::{unset_argument_warning, violation_result_with_root};
use crate::protocol::{
    Call, ClassifyOptions, ErrorCode, ResultBlock, ToolName, ToolSet, Verdict, classify_reply,
};
use flycode_core::tools::executor::{Executor, Restriction};

pub mod tags;

/// Who the loop works for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// The main agent: works until it answers in prose.
    Main,
    /// A sub-agent (PROTOCOL.md §13 (The API loop: sub-agents)): works until it calls `agent.complete`. On its turn limit,
    /// its time limit, or a reply without that call, it gets one last turn in which only
    /// `agent.complete` runs; after that its task ends incomplete.
    Subagent {
        /// Its time before the last turn.
        time_limit: Duration,
    },
}

/// The only tool of a sub-agent's last turn.
const LAST_TURN: Restriction = Restriction {
    tools: std::borrow::Cow::Borrowed(&[ToolName::AgentComplete]),
    reason: "this is your last turn",
    hint: "call agent.complete now with your result so far, and say what is missing",
};

/// A sub-agent's last turn: not given, given for the next request, or taken.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LastTurn {
    NotGiven,
    Given(String),
    Taken(String),
}

/// One run of the loop, with everything it works with.
pub struct AgentRun<'a> {
    /// The API.
    pub provider: &'a mut dyn Provider,
    /// Runs the calls (policy, approval, sandbox, audit, stale-read guard).
    pub executor: Executor<'a>,
    /// Model, mode and budgets.
    pub settings: &'a ResolvedSettings,
    /// Accept text around a call block in text mode (reported as a warning, not a violation).
    pub lenient: bool,
    /// The system prompt and the role definition.
    pub prompt: AssembledPrompt,
    /// Where the run is recorded.
    pub transcript: TranscriptWriter,
    /// Set by Ctrl-C.
    pub cancel: &'a AtomicBool,
    /// The agent's TODO list and notes: written by `agent.todo` / `agent.note` through the
    /// executor's notebook (the same memory), read into every request.
    pub memory: &'a SharedMemory,
    /// The main agent or a sub-agent.
    pub kind: RunKind,
    /// What the sub-agents started by this run's `agent.task` calls report (the main agent's).
    pub relay: Option<&'a Receiver<RunEvent>>,
    /// Writes compaction summaries: the light model, or `None` for the run's own model.
    pub compactor: Option<Compactor>,
    /// How the model's replies are read and the results written: flycode's call blocks (text
    /// or native calling) or seed 000's tags (PROTOCOL.md §15 (The tag dialect: run)).
    pub dialect: Dialect,
    /// Runs this agent's `<create_agent>`s (the tag dialect's sub-agents); `None` refuses them.
    pub tag_children: Option<&'a dyn TagChildAgents>,
}

/// Runs the `<create_agent>`s of one agent of the tag dialect (PROTOCOL.md §15 (The tag
/// dialect: run)): the sub-agent layer's side of the seam (`task::tags::TagChildren`).
pub trait TagChildAgents {
    /// Runs `task` as a child of the agent whose executor is `parent` (the predefined agent
    /// `name`, if given; `id` its step's id) to its end, its events passed on to `observer`,
    /// and answers with its `<child_summary>`.
    fn run_child(
        &self,
        parent: &Executor<'_>,
        request: (&str, Option<&str>, &str),
        observer: &mut dyn RunObserver,
    ) -> crate::tags::TagAnswer;
}

/// The conversation a run starts from: the task alone, or a resumed run's.
#[derive(Debug, Default)]
pub struct Conversation {
    /// The messages sent with every request (system prompt and special messages aside).
    pub history: Vec<Message>,
    /// The messages earlier compactions replaced, with the compaction's number.
    pub archive: Vec<(Message, u32)>,
    /// The latest compaction.
    pub summary: Option<SummaryRecord>,
    /// Call ids an earlier run used that the history's native calls do not show (text-mode
    /// call blocks, compacted turns): reserved like the history's own.
    pub used_ids: Vec<String>,
}

/// The loop's state while it runs.
struct TurnProgress {
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
    started: Instant,
    last_turn: LastTurn,
    /// The messages compactions replaced, with the compaction's number (recorded, not sent).
    archive: Vec<(Message, u32)>,
    /// The latest compaction.
    summary: Option<SummaryRecord>,
    /// The size of the last request, as the server counted it.
    measure: Measure,
    /// The tool and arguments of the calls that failed in the last turn: an exact repeat in
    /// the next is not run (seed 003, R5).
    failed_last_turn: Vec<(ToolName, serde_json::Value)>,
}

impl AgentRun<'_> {
    /// What runs the valid calls of a turn.
    fn calls(&self) -> TurnCalls<'_, '_> {
        TurnCalls {
            executor: &self.executor,
            max_parallel: self.settings.max_parallel as usize,
            cancel: self.cancel,
            relay: self.relay,
        }
    }

    /// The set the model's calls are read against: a sub-agent's calls of tools it is not
    /// offered are read, so its executor refuses them as such.
    fn reading_set(&self) -> ToolSet {
        match self.kind {
            RunKind::Main => self.executor.limits().tool_set,
            RunKind::Subagent { .. } => ToolSet::All,
        }
    }

    /// The tools offered in the next request.
    fn offered_tools(&self, progress: &TurnProgress) -> &'static [ToolName] {
        match (self.kind, &progress.last_turn) {
            // The run's `--tools`, with the agent's own tools (see `Launch::prepare`).
            (RunKind::Main, _) => self.executor.limits().tool_set.tools(),
            (RunKind::Subagent { .. }, LastTurn::Taken(_)) => &[ToolName::AgentComplete],
            (RunKind::Subagent { .. }, _) => ToolSet::Subagent.tools(),
        }
    }

    /// Works on `task` until the model answers in prose, a budget runs out, the API fails, or
    /// Ctrl-C.
    pub fn run(&mut self, task: &str, observer: &mut dyn RunObserver) -> RunReport {
        let conversation = Conversation {
            history: vec![Message::user(task)],
            ..Conversation::default()
        };
        self.run_history(conversation, observer)
    }

    /// Goes on with `history`, a conversation read back from an earlier run's transcript whose
    /// every call has its result (`flycode run --resume`, PROTOCOL.md §13 (The API loop:
    /// resume)).
    pub fn run_history(
        &mut self,
        conversation: Conversation,
        observer: &mut dyn RunObserver,
    ) -> RunReport {
        let Conversation {
            history,
            archive,
            summary,
            used_ids,
        } = conversation;
        let started = Instant::now();
        let used_ids = history
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
            .chain(history.iter().filter_map(|m| m.tool_call_id.clone()))
            .chain(used_ids)
            .collect();
        let mut progress = TurnProgress {
            turn_start: history.len(),
            history,
            request: Vec::new(),
            anonymous_calls: 0,
            used_ids,
            consecutive_violations: 0,
            report: RunReport {
                ending: RunEnding::MaxTurns,
                answer: None,
                turns: 0,
                calls: 0,
                failed_calls: 0,
                violations: 0,
                usage: TokenUsage::default(),
                duration: Duration::ZERO,
                transcript: self.transcript.paths().to_vec(),
            },
            started,
            last_turn: LastTurn::NotGiven,
            archive,
            summary,
            measure: Measure::default(),
            failed_last_turn: Vec::new(),
        };
        // Every event is heard masked, and every message is masked as it joins the
        // conversation (`push`, `build_request`): PROTOCOL.md §9 (Secrets and masking).
        let secrets = self.executor.limits().secrets();
        progress.history.iter_mut().for_each(|message| {
            message.mask(&secrets);
            self.memory.hear(message.role.as_str(), &message.content);
        });
        let mut observer = MaskingObserver {
            inner: observer,
            secrets: secrets.clone(),
        };
        let ending = self.drive(&mut progress, &mut observer);
        progress.report.ending = ending;
        progress.report.duration = started.elapsed();
        progress.report = progress.report.masked(&secrets);
        observer.on_event(&RunEvent::Finished(progress.report.clone()));
        progress.report
    }

    fn drive(&mut self, progress: &mut TurnProgress, observer: &mut dyn RunObserver) -> RunEnding {
        let mut turn = 0;
        // The function definitions of the tools offered, made again only when the offer changes
        // (a sub-agent's last turn): the schemas are the same every turn.
        let mut definitions: Option<ToolDefinitions> = None;
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                return RunEnding::Cancelled;
            }
            turn += 1;
            if let Some(ending) = self.before_request(progress, turn, observer) {
                return ending;
            }
            let tools = self.refresh_definitions(progress, &mut definitions);
            let completion = match self.request_reply(progress, turn, tools, observer) {
                Ok(completion) => completion,
                Err(ending) => return ending,
            };
            self.record_reply(progress, turn, &completion, observer);
            if let Some(step) = self.cut_reply(progress, turn, &completion, observer) {
                match step {
                    TurnStep::Continue => continue,
                    TurnStep::End(ending) => return ending,
                }
            }
            // A tag-dialect reply without text is one without tags: answered as such.
            if self.dialect == Dialect::Flycode && self.is_empty_reply(&completion) {
                match self.empty_reply(progress, completion, observer) {
                    TurnStep::Continue => continue,
                    TurnStep::End(ending) => return ending,
                }
            }
            let step = match (self.dialect, self.settings.mode) {
                (Dialect::Tags, _) => self.tags_turn(progress, completion, observer),
                (Dialect::Flycode, CallingMode::Text) => {
                    self.text_turn(progress, completion, observer)
                }
                (Dialect::Flycode, CallingMode::Native) => {
                    self.native_turn(progress, completion, observer)
                }
            };
            match step {
                TurnStep::Continue => {}
                TurnStep::End(ending) => return ending,
            }
            if self.cancel.load(Ordering::SeqCst) {
                return RunEnding::Cancelled;
            }
            if let Some(ending) = self.after_turn(progress) {
                return ending;
            }
        }
    }

    /// The function definitions to send with this turn's request: those already made when the
    /// offer is unchanged, made again from the schemas when it changed.
    fn refresh_definitions<'d>(
        &self,
        progress: &TurnProgress,
        definitions: &'d mut Option<ToolDefinitions>,
    ) -> &'d [serde_json::Value] {
        let offered = match (self.dialect, self.settings.mode) {
            (Dialect::Flycode, CallingMode::Native) => self.offered_tools(progress),
            _ => &[],
        };
        if definitions
            .as_ref()
            .is_none_or(|(made_for, _)| !std::ptr::eq(*made_for, offered))
        {
            let profile = self.settings.prompt_profile;
            let agents: Vec<String> = if offered.contains(&ToolName::AgentTask) {
                super::predefined::available_agents(&self.executor.limits().places)
                    .into_iter()
                    .map(|agent| agent.name)
                    .collect()
            } else {
                Vec::new()
            };
            *definitions = Some((offered, native_tool_definitions(offered, profile, &agents)));
        }
        definitions
            .as_ref()
            .map(|(_, tools)| tools.as_slice())
            .unwrap_or_default()
    }

    /// Builds request `turn`, says so, saves the checkpoint and asks the model; the ending
    /// when the request was cancelled or failed.
    fn request_reply(
        &mut self,
        progress: &mut TurnProgress,
        turn: u32,
        tools: &[serde_json::Value],
        observer: &mut dyn RunObserver,
    ) -> Result<Completion, RunEnding> {
        progress.request = self.build_request(progress);
        self.compact_if_full(progress, observer);
        progress.turn_start = progress.history.len();
        progress.report.turns = turn;
        observer.on_event(&RunEvent::Request {
            turn,
            messages: progress.request.len(),
        });
        self.checkpoint(progress, observer);
        // The text as it streams: kept in the transcript when the stream is cancelled or fails.
        let mut partial = String::new();
        let outcome = self.provider.complete(
            &ChatRequest {
                model: &self.settings.model,
                messages: &progress.request,
                tools,
                stream: self.settings.stream,
                max_tokens: self.settings.bounds.max_reply_tokens,
            },
            &mut |event| {
                if let ClientEvent::TextDelta(text) = &event {
                    partial.push_str(text);
                }
                observer.on_event(&client_event(event));
            },
            self.cancel,
        );
        let ending = match outcome {
            Ok(completion) => return Ok(completion),
            Err(ClientError::Cancelled) => RunEnding::Cancelled,
            Err(error) => RunEnding::ClientFailed(error.to_string()),
        };
        if !partial.is_empty() {
            let reason = match ending {
                RunEnding::Cancelled => "cancelled",
                _ => "failed",
            };
            self.push(progress, Message::partial_reply(partial, reason), observer);
        }
        Err(ending)
    }

    /// Adds the reply's token counts to the run's, and tells the observer about the reply (and
    /// that it was cut, when the model hit its output limit).
    fn record_reply(
        &self,
        progress: &mut TurnProgress,
        turn: u32,
        completion: &Completion,
        observer: &mut dyn RunObserver,
    ) {
        let usage = completion.usage.as_ref().map(|u| TokenUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cache_read_tokens: u.cache_read_tokens,
        });
        progress.measure = Measure::new(
            usage.map(|u| u.prompt_tokens),
            estimate_tokens(&progress.request),
        );
        if let Some(usage) = usage {
            let total = &mut progress.report.usage;
            total.cache_read_tokens = total
                .cache_read_tokens
                .saturating_add(usage.cache_read_tokens);
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
    }

    /// A reply flycode cut (it repeated itself, or the turn took too long): recorded as partial
    /// (a repeating reply up to its first repetition), nothing in it run, the model told why,
    /// counted like an invalid reply (PROTOCOL.md §13 (The API loop: bounded replies)).
    fn cut_reply(
        &mut self,
        progress: &mut TurnProgress,
        turn: u32,
        completion: &Completion,
        observer: &mut dyn RunObserver,
    ) -> Option<TurnStep> {
        let (reason, content, said, correction) = match completion.finish_reason.as_deref() {
            Some(CUT_REPETITION) => {
                let text = &completion.content;
                let keep = repetition::find(text).map_or(text.len(), |r| r.keep_up_to(text));
                (
                    "repetition",
                    text.get(..keep).unwrap_or(text).to_owned(),
                    "the reply was cut: it repeated the same text over and over".to_owned(),
                    "[flycode] Your last reply was cut because it repeated the same text over and over; nothing in it was run. Do not repeat yourself: take the next step of the task, or answer if it is done.",
                )
            }
            Some(CUT_TIME_LIMIT) => (
                "time_limit",
                completion.content.clone(),
                format!(
                    "the reply was cut at the turn time limit of {} (turn_timeout_ms)",
                    super::summary::human_duration(
                        u64::try_from(self.settings.bounds.turn_timeout.as_millis())
                            .unwrap_or(u64::MAX)
                    )
                ),
                "[flycode] Your last reply was cut because it took longer than the time one turn may take; nothing in it was run. Take a smaller step: one call, or a short answer.",
            ),
            _ => return None,
        };
        observer.on_event(&RunEvent::ReplyCut {
            turn,
            reason: reason.to_owned(),
            message: said.clone(),
        });
        self.push(progress, Message::partial_reply(content, reason), observer);
        self.push(progress, Message::user(correction), observer);
        Some(self.count_violation(progress, reason, said, observer))
    }

    /// Counts an invalid reply that is not a call (a cut reply, calls written as text): said to
    /// the observer, and the run ends when there were too many in a row.
    fn count_violation(
        &mut self,
        progress: &mut TurnProgress,
        code: &str,
        message: String,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        progress.report.violations += 1;
        progress.consecutive_violations += 1;
        observer.on_event(&RunEvent::Violation {
            id: None,
            code: code.to_owned(),
            message: message.clone(),
            consecutive: progress.consecutive_violations,
        });
        if progress.consecutive_violations >= self.settings.max_violations {
            TurnStep::End(RunEnding::TooManyViolations(format!(
                "{} invalid replies in a row; the last: {message} ({code})",
                progress.consecutive_violations
            )))
        } else {
            TurnStep::Continue
        }
    }

    /// A native reply without API calls whose text writes calls (PROTOCOL.md §13 (The API
    /// loop: calls written as text)): one unambiguous call of an offered tool becomes the
    /// reply's native call (`Ok`, shown and recorded as recovered); any other is answered with
    /// a correction and counted (`Err`). `None`: the text writes no call, it is prose.
    fn recover_text_call(
        &mut self,
        progress: &mut TurnProgress,
        content: &str,
        observer: &mut dyn RunObserver,
    ) -> Option<Result<NativeToolCall, TurnStep>> {
        let calls = find_text_calls(content, self.reading_set());
        let first = calls.first()?;
        let offered = self.offered_tools(progress);
        if let [call] = calls.as_slice()
            && let (Some(tool), Some(args)) = (call.tool, &call.args)
            && offered.contains(&tool)
        {
            progress.anonymous_calls += 1;
            let id = format!("flycode_text_call_{}", progress.anonymous_calls);
            observer.on_event(&RunEvent::CallRecovered {
                id: id.clone(),
                tool,
                form: call.form.describe().to_owned(),
            });
            let arguments = serde_json::Value::Object(args.clone()).to_string();
            return Some(Ok(NativeToolCall::function(
                id,
                tool.native_name(),
                arguments,
            )));
        }
        let said = match calls.len() {
            1 => format!(
                "the reply wrote a call as text ({}) that names no offered tool with its arguments; nothing was run",
                first.form.describe()
            ),
            n => format!(
                "the reply wrote {n} calls as text; none was run (flycode does not guess which one was meant)"
            ),
        };
        self.push(
            progress,
            Message::assistant(content.to_owned(), Vec::new()),
            observer,
        );
        let mut correction = "[flycode] Call tools through the tools API (function calling), not as text: your last reply wrote a call in its text, and nothing was run. Call one tool now through the API, or answer in prose without any call if the task is done.".to_owned();
        // A name that is no tool: say which tools are near it.
        if let [call] = calls.as_slice()
            && call.tool.is_none()
            && !call.name.is_empty()
        {
            let nearest = ToolName::nearest(&call.name, self.reading_set())
                .filter(|tool| offered.contains(tool))
                .map_or_else(String::new, |tool| {
                    format!(" The closest is {}.", tool.native_name())
                });
            correction.push_str(&format!(
                " There is no tool named {}.{nearest}",
                serde_json::Value::String(call.name.clone())
            ));
        }
        self.push(progress, Message::user(&correction), observer);
        Some(Err(self.count_violation(
            progress,
            "call_as_text",
            said,
            observer,
        )))
    }

    /// A text-mode reply with no call block that still writes a call another way (a ```` ```json
    /// ```` block, a bare object, `<tool_call>`, an invented tool name: PROTOCOL.md §13 (The API
    /// loop: calls written as text)): an attempted call, never the answer. Nothing runs (the
    /// text dialect's one form is the fenced block); a correction says what to write, naming
    /// the closest tool to an invented name, and the reply counts as a violation. `None`: the
    /// reply writes no call, it is prose.
    fn call_written_another_way(
        &mut self,
        progress: &mut TurnProgress,
        content: &str,
        observer: &mut dyn RunObserver,
    ) -> Option<TurnStep> {
        let calls = find_text_calls(content, self.reading_set());
        let first = calls.first()?;
        let said = format!(
            "the reply wrote a call as {} instead of one ```flycode-call block; nothing was run",
            first.form.describe()
        );
        let mut correction = format!(
            "[flycode] Your last reply wrote a call as {}, and nothing was run: a call is one ```flycode-call block holding one JSON object {{\"id\", \"tool\", \"args\"}}, and nothing else in the reply. Write the call again that way, or answer in prose without any call if the task is done.",
            first.form.describe()
        );
        if let [call] = calls.as_slice()
            && call.tool.is_none()
            && !call.name.is_empty()
        {
            let offered = self.offered_tools(progress);
            let nearest = ToolName::nearest(&call.name, self.reading_set())
                .filter(|tool| offered.contains(tool))
                .map_or_else(String::new, |tool| format!(" The closest is {tool}."));
            correction.push_str(&format!(
                " There is no tool named {}.{nearest}",
                serde_json::Value::String(call.name.clone())
            ));
        }
        self.push(progress, Message::user(&correction), observer);
        Some(self.count_violation(progress, "call_as_text", said, observer))
    }

    /// Whether the reply holds nothing to act on: no text and no call that is read.
    fn is_empty_reply(&self, completion: &Completion) -> bool {
        // In text mode native calls are not read (no tools were offered): only text counts.
        let has_calls =
            self.settings.mode == CallingMode::Native && !completion.tool_calls.is_empty();
        completion.content.trim().is_empty() && !has_calls
    }

    /// Records an empty reply; ends the main agent's run, gives a sub-agent its last turn
    /// (`Continue`) unless it already had it.
    fn empty_reply(
        &mut self,
        progress: &mut TurnProgress,
        completion: Completion,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        let reason = completion.finish_reason.clone();
        self.push(
            progress,
            Message::assistant(completion.content, Vec::new()),
            observer,
        );
        let ending = RunEnding::EmptyReply(reason.unwrap_or_else(|| "none".to_owned()));
        match self.kind {
            RunKind::Main => TurnStep::End(ending),
            RunKind::Subagent { .. } => match progress.last_turn {
                LastTurn::NotGiven => {
                    self.give_last_turn(progress, "your reply was empty", observer);
                    TurnStep::Continue
                }
                _ => TurnStep::End(ending),
            },
        }
    }

    /// Whether the run stops before request `turn`: the main agent's turn budget; a
    /// sub-agent's limits give it its last turn instead (which is then taken).
    fn before_request(
        &mut self,
        progress: &mut TurnProgress,
        turn: u32,
        observer: &mut dyn RunObserver,
    ) -> Option<RunEnding> {
        let max_turns = self.settings.max_turns;
        let RunKind::Subagent { time_limit } = self.kind else {
            return (turn > max_turns).then_some(RunEnding::MaxTurns);
        };
        if progress.last_turn == LastTurn::NotGiven {
            if turn > max_turns {
                let reason = format!("you used all {max_turns} requests of your budget");
                self.give_last_turn(progress, &reason, observer);
            } else if progress.started.elapsed() >= time_limit {
                let reason = format!("you used all {} seconds of your time", time_limit.as_secs());
                self.give_last_turn(progress, &reason, observer);
            }
        }
        if let LastTurn::Given(reason) = &progress.last_turn {
            progress.last_turn = LastTurn::Taken(reason.clone());
            self.executor.restrict(LAST_TURN);
        }
        None
    }

    /// A sub-agent's end after a turn: its result, or the end of its last turn.
    fn after_turn(&self, progress: &mut TurnProgress) -> Option<RunEnding> {
        if self.kind == RunKind::Main {
            return None;
        }
        if let Some(result) = self.memory.snapshot().completion {
            progress.report.answer = Some(result);
            return Some(RunEnding::Completed);
        }
        match &progress.last_turn {
            LastTurn::Taken(reason) => Some(RunEnding::Incomplete(reason.clone())),
            _ => None,
        }
    }

    /// Tells a sub-agent that its next request is its last, and why.
    fn give_last_turn(
        &mut self,
        progress: &mut TurnProgress,
        reason: &str,
        observer: &mut dyn RunObserver,
    ) {
        progress.last_turn = LastTurn::Given(reason.to_owned());
        let text = format!(
            "[flycode] {reason}. This is your last turn: call agent.complete now with your result so far, and say what is missing. No other tool runs now."
        );
        self.push(progress, Message::user(text), observer);
    }

    /// A reply without a call: the main agent's answer; a sub-agent's prose, which does not end
    /// its task (it gets its last turn, or its last turn is over).
    fn prose(
        &mut self,
        progress: &mut TurnProgress,
        text: String,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        progress.report.answer = Some(text);
        match (self.kind, &progress.last_turn) {
            (RunKind::Main, _) => TurnStep::End(RunEnding::Answered),
            (RunKind::Subagent { .. }, LastTurn::NotGiven) => {
                self.give_last_turn(
                    progress,
                    "you answered without calling agent.complete, which alone ends your task",
                    observer,
                );
                TurnStep::Continue
            }
            (RunKind::Subagent { .. }, LastTurn::Given(reason) | LastTurn::Taken(reason)) => {
                TurnStep::End(RunEnding::Incomplete(reason.clone()))
            }
        }
    }

    /// Replaces the older turns with a summary when the request just built would pass
    /// `compact_at` of the context (PROTOCOL.md §13 (The API loop: compaction)), and builds the
    /// request again. A failed summary is a warning: the run goes on uncompacted.
    fn compact_if_full(&mut self, progress: &mut TurnProgress, observer: &mut dyn RunObserver) {
        let settings = self.settings.compaction;
        let estimated = estimate_tokens(&progress.request);
        let before = progress.measure.tokens_of(estimated);
        if !settings.enabled || before <= settings.threshold() {
            return;
        }
        let Some(range) = compaction::plan(&progress.history, settings.keep_turns) else {
            return;
        };
        let (Some(task), Some(replaced)) = (
            progress.history.first(),
            progress.history.get(range.clone()),
        ) else {
            return;
        };
        let request = compaction::summary_request(task, replaced);
        let summary = match self.summarize(&request) {
            Ok(text) if !text.trim().is_empty() => text,
            outcome => {
                let why = outcome
                    .err()
                    .map_or("the summary was empty".to_owned(), |e| e.to_string());
                observer.on_event(&RunEvent::Warning {
                    message: format!("compaction failed, the conversation stays whole: {why}"),
                });
                return;
            }
        };
        let number = progress.summary.map_or(0, |s| s.number) + 1;
        let count = range.len();
        let mut message = compaction::summary_message(number, count, &summary);
        message.mask(&self.executor.limits().secrets());
        let old: Vec<Message> = progress.history.splice(range, [message]).collect();
        progress
            .archive
            .extend(old.into_iter().map(|m| (m, number)));
        progress.request = self.build_request(progress);
        let now = estimate_tokens(&progress.request);
        let after = before.saturating_sub(estimated.saturating_sub(now));
        progress.measure = Measure::new(Some(after), now);
        progress.summary = Some(SummaryRecord {
            number,
            replaced: count,
            tokens_before: before,
            tokens_after: after,
        });
        observer.on_event(&RunEvent::Compacted {
            number,
            replaced: count,
            tokens_before: before,
            tokens_after: after,
        });
    }

    /// The summary of `request`, from the compactor or the run's own model.
    fn summarize(&mut self, request: &[Message]) -> Result<String, ClientError> {
        let (provider, model): (&mut dyn Provider, &str) = match &mut self.compactor {
            Some(compactor) => (compactor.provider.as_mut(), &compactor.model),
            None => (&mut *self.provider, &self.settings.model),
        };
        let chat = ChatRequest {
            model,
            messages: request,
            tools: &[],
            stream: false,
            max_tokens: self.settings.bounds.max_reply_tokens,
        };
        Ok(provider.complete(&chat, &mut |_| {}, self.cancel)?.content)
    }

    /// The request as sent: system message, history, special messages at their place.
    fn build_request(&self, progress: &TurnProgress) -> Vec<Message> {
        let notes = folder_notes(self.executor.sandbox());
        let jobs = self
            .executor
            .job_table()
            .map(|jobs| jobs.state_lines())
            .unwrap_or_default();
        let specials = SpecialMessages::render(
            &self.prompt.role_definition,
            &self.memory.snapshot(),
            &notes,
        )
        .with_hints(&self.executor.loaded_hints())
        .with_jobs(&jobs);
        let mut request = assemble_request_moving_every(
            self.prompt.system.as_deref(),
            &progress.history,
            &specials,
            self.settings.special_every as usize,
        );
        let secrets = self.executor.limits().secrets();
        request
            .iter_mut()
            .for_each(|message| message.mask(&secrets));
        request
    }

    /// Rewrites the transcript: the latest request and everything since.
    fn checkpoint(&self, progress: &TurnProgress, observer: &mut dyn RunObserver) {
        let since = progress
            .history
            .get(progress.turn_start..)
            .unwrap_or_default();
        let state = RecordState {
            run: RunRecord::of(&self.memory.snapshot(), self.transcript.continues()),
            archive: &progress.archive,
            summary: progress.summary,
        };
        if let Err(error) = self.transcript.save_with(&progress.request, since, &state) {
            observer.on_event(&RunEvent::Warning {
                message: error.to_string(),
            });
        }
    }

    /// Adds a message to the conversation and to the transcript at once, so a run killed while
    /// a call runs still has the call on record.
    fn push(
        &self,
        progress: &mut TurnProgress,
        mut message: Message,
        observer: &mut dyn RunObserver,
    ) {
        message.mask(&self.executor.limits().secrets());
        self.memory.hear(message.role.as_str(), &message.content);
        progress.history.push(message);
        self.checkpoint(progress, observer);
    }

    fn text_turn(
        &mut self,
        progress: &mut TurnProgress,
        completion: Completion,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        let reply = completion.content;
        let classification = classify_reply(
            &reply,
            ClassifyOptions {
                lenient: self.lenient,
                tools: self.reading_set(),
            },
        );
        self.push(
            progress,
            Message::assistant(reply.clone(), Vec::new()),
            observer,
        );
        let failed_before = std::mem::take(&mut progress.failed_last_turn);
        match classification.verdict {
            Verdict::None => match self.call_written_another_way(progress, &reply, observer) {
                Some(step) => step,
                None => self.prose(progress, reply, observer),
            },
            Verdict::Call(call) => match self.claim_id(progress, &call) {
                Ok(()) if tags::repeats_failed(&call, &failed_before) => {
                    tags::remember_failed(progress, &call, None);
                    let block = self.repeated_failed_call(progress, &call, observer);
                    self.push(progress, Message::user_result(block.render()), observer);
                    self.after_violation_named(progress, ErrorCode::RepeatedFailedCall, &block)
                }
                Ok(()) => {
                    progress.consecutive_violations = 0;
                    let ran = call.clone();
                    let mut block = self.calls().run_one(&mut progress.report, call, observer);
                    // Arguments given as null or "" and run without (PROTOCOL.md §3).
                    if let Some(warning) = unset_argument_warning(&classification.warnings) {
                        block.fields.push(("warning".to_owned(), warning));
                    }
                    if !block.ok && block.code.as_deref() != Some(ErrorCode::Cancelled.as_str()) {
                        tags::remember_failed(progress, &ran, None);
                    }
                    self.push(progress, Message::user_result(block.render()), observer);
                    TurnStep::Continue
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
        progress: &mut TurnProgress,
        completion: Completion,
        observer: &mut dyn RunObserver,
    ) -> TurnStep {
        let Completion {
            content,
            mut tool_calls,
            ..
        } = completion;
        let mut recovered = false;
        if tool_calls.is_empty() {
            match self.recover_text_call(progress, &content, observer) {
                None => {
                    self.push(
                        progress,
                        Message::assistant(content.clone(), Vec::new()),
                        observer,
                    );
                    return self.prose(progress, content, observer);
                }
                Some(Err(step)) => return step,
                Some(Ok(call)) => {
                    tool_calls.push(call);
                    recovered = true;
                }
            }
        }
        name_anonymous_calls(progress, &mut tool_calls);
        let mut reply = Message::assistant(content.clone(), tool_calls.clone());
        if recovered {
            reply.note = Some(ReplyNote {
                partial: None,
                recovered_from_text: true,
            });
        } else if let Some(warning) = crate::protocol::verdict::native_text_call_warning(&content) {
            // Text calls beside API calls are not run: said live, as `validate` says it.
            observer.on_event(&RunEvent::Warning {
                message: warning.message,
            });
        }
        self.push(progress, reply, observer);
        let mut last_error = None;
        let mut any_valid = false;
        let failed_before = std::mem::take(&mut progress.failed_last_turn);
        let mut repeated = None;
        // Judged in order first; then run, read-only runs at once (PROTOCOL.md §13 (The API loop: parallel calls)).
        let mut planned = Vec::with_capacity(tool_calls.len());
        let mut ran = Vec::with_capacity(tool_calls.len());
        for native in &tool_calls {
            let judged = self.native_call(progress, native);
            ran.push(judged.as_ref().ok().cloned());
            planned.push(match judged {
                Ok(call) if tags::repeats_failed(&call, &failed_before) => {
                    let block = self.repeated_failed_call(progress, &call, observer);
                    repeated = Some(block.clone());
                    PlannedCall::Answered(block)
                }
                Ok(call) => {
                    any_valid = true;
                    PlannedCall::Run(call)
                }
                Err(error) => {
                    let attempt = Attempt {
                        id: Some(native.id.clone()),
                        tool: super::tools::tool_for_function(
                            &native.function.name,
                            self.reading_set(),
                        )
                        .map(|t| t.as_str().to_owned())
                        .or_else(|| Some(native.function.name.clone())),
                        args: serde_json::from_str(&native.function.arguments).ok(),
                    };
                    let block = self.violation(progress, &error, &attempt, observer);
                    last_error = Some(error);
                    PlannedCall::Answered(block)
                }
            });
        }
        let blocks = self
            .calls()
            .run_planned(&mut progress.report, planned, observer);
        for ((native, mut block), call) in tool_calls.iter().zip(blocks).zip(&ran) {
            if let Some(call) = call
                && !block.ok
                && block.code.as_deref() != Some(ErrorCode::Cancelled.as_str())
            {
                tags::remember_failed(progress, call, None);
            }
            // The API pairs results by tool_call_id: answer under the API's id even when the
            // violation could not read it.
            block.id = Some(native.id.clone());
            self.push(
                progress,
                Message::tool_result(native.id.clone(), block.render()),
                observer,
            );
        }
        match (any_valid, last_error, repeated) {
            (false, Some(error), _) => self.after_violation(progress, &error),
            (false, None, Some(block)) => {
                self.after_violation_named(progress, ErrorCode::RepeatedFailedCall, &block)
            }
            _ => {
                progress.consecutive_violations = 0;
                TurnStep::Continue
            }
        }
    }

    fn native_call(
        &self,
        progress: &mut TurnProgress,
        native: &NativeToolCall,
    ) -> Result<Call, CallError> {
        let call = parse_native_call(
            Some(&native.id),
            &native.function.name,
            &native.function.arguments,
            self.reading_set(),
        )?;
        self.claim_id(progress, &call)?;
        Ok(call)
    }

    /// A call id may be used once per run: a reused one would make the transcript ambiguous
    /// and could make a person think a call ran twice.
    fn claim_id(&self, progress: &mut TurnProgress, call: &Call) -> Result<(), CallError> {
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
        progress: &mut TurnProgress,
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
        let root = self.executor.sandbox().roots().first();
        let root = root.map(|root| root.display().to_string());
        violation_result_with_root(error, attempt, root.as_deref())
    }

    /// Answers a call that repeats exactly one whose result failed in the turn before (seed
    /// 003, R5: "不得重复同一失败调用"): not run, said to the observer as a violation.
    fn repeated_failed_call(
        &mut self,
        progress: &mut TurnProgress,
        call: &Call,
        observer: &mut dyn RunObserver,
    ) -> ResultBlock {
        let message = "not run: this call repeats exactly (same tool, equal arguments) the call whose result just failed".to_owned();
        progress.report.violations += 1;
        observer.on_event(&RunEvent::Violation {
            id: call.id.clone(),
            code: ErrorCode::RepeatedFailedCall.as_str().to_owned(),
            message: message.clone(),
            consecutive: progress.consecutive_violations + 1,
        });
        ResultBlock::failure(
            call.id.clone(),
            crate::protocol::render_command(call.tool, &call.args),
            ErrorCode::RepeatedFailedCall,
            message,
            Some("correct what the error said (other arguments), or ask the user; do not send the same failing call again".to_owned()),
        )
    }

    /// Counts a refused reply that is not a `CallError` (a repeated failed call).
    fn after_violation_named(
        &mut self,
        progress: &mut TurnProgress,
        code: ErrorCode,
        block: &ResultBlock,
    ) -> TurnStep {
        progress.consecutive_violations += 1;
        if progress.consecutive_violations >= self.settings.max_violations {
            TurnStep::End(RunEnding::TooManyViolations(format!(
                "{} invalid replies in a row; the last: {} ({})",
                progress.consecutive_violations,
                block.error.as_deref().unwrap_or_default(),
                code.as_str()
            )))
        } else {
            TurnStep::Continue
        }
    }

    fn after_violation(&mut self, progress: &mut TurnProgress, error: &CallError) -> TurnStep {
        progress.consecutive_violations += 1;
        if progress.consecutive_violations >= self.settings.max_violations {
            TurnStep::End(RunEnding::TooManyViolations(format!(
                "{} invalid replies in a row; the last: {} ({})",
                progress.consecutive_violations,
                error,
                error.code().as_str()
            )))
        } else {
            TurnStep::Continue
        }
    }
}

/// The tools offered and the function definitions made for them.
type ToolDefinitions = (&'static [ToolName], Vec<serde_json::Value>);

enum TurnStep {
    Continue,
    End(RunEnding),
}

/// Gives every native call an id no other call of this run has: one that came without an id
/// gets `flycode_call_N`; one whose id the server gave before (Xinference gives one id to every
/// call of a reply, other servers reuse ids across requests) gets the server's id with `_2`,
/// `_3`… The ids are the server's to choose, so a repeat is never counted as the model's
/// violation; the reply is recorded and answered under the new ids, which pair its results as
/// the server's would (PROTOCOL.md §13 (The API loop: calling modes)).
fn name_anonymous_calls(progress: &mut TurnProgress, calls: &mut [NativeToolCall]) {
    let mut taken: HashSet<String> = HashSet::new();
    for call in calls.iter_mut() {
        if call.id.trim().is_empty() {
            loop {
                progress.anonymous_calls += 1;
                let id = format!("flycode_call_{}", progress.anonymous_calls);
                if !progress.used_ids.contains(&id) && !taken.contains(&id) {
                    call.id = id;
                    break;
                }
            }
        } else if progress.used_ids.contains(&call.id) || taken.contains(&call.id) {
            let renamed = (2..)
                .map(|n| format!("{}_{n}", call.id))
                .find(|id| !progress.used_ids.contains(id) && !taken.contains(id));
            if let Some(renamed) = renamed {
                call.id = renamed;
            }
        }
        taken.insert(call.id.clone());
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
        ClientEvent::Waiting { elapsed } => RunEvent::Waiting {
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        },
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
