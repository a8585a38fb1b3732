//! The transcript rules (PROTOCOL.md §8 (Transcripts)), applied message by message so a transcript never has to
//! be held in memory: every assistant reply is judged by [`classify_reply`] (the code path of
//! `flycode check`), and calls are paired with the results that answer them.
//!
//! Pairing: after an assistant message with calls, the *answer window* is the run of following
//! `tool` messages and `user` messages that hold result blocks (system and developer messages are
//! skipped). The window closes at the next assistant message or a user message without a result.
//!
//! Sub-agents: a result that answers an `agent.task` call and carries the task's envelope
//! ("Sub-agent task-N (...") is noted as a [`TaskReference`], so that [`report`](super::report)
//! can check the sub-agent's own transcript; this module reads no file.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::finding::{Finding, FindingCode, Severity};
use super::transcript::{TranscriptMessage, TranscriptRole};
use crate::protocol::call::{is_no_id, parse_native_call};
use crate::protocol::dialect::Dialect;
use crate::protocol::display::escape_for_display;
use crate::protocol::parse::{BlockKind, parse_reply};
use crate::protocol::tags::{TagVerdict, read_tags};
use crate::protocol::verdict::native_text_call_warning;
use crate::protocol::{
    Call, ClassifyOptions, ResultBlock, ResultParseError, ToolName, Verdict, classify_reply,
};
use crate::protocol::{ErrorCode, ToolSet};

/// Options for checking transcripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Accept text around call blocks, reporting it as a warning.
    pub lenient: bool,
    /// Report warnings as errors.
    pub strict: bool,
    /// The tools a call block may name (native tool calls come from `flycode run` only and are
    /// judged against its set).
    pub tools: ToolSet,
    /// The transcripts' dialect; `None` detects it per transcript (PROTOCOL.md §15 (The tag
    /// dialect: validate)).
    pub dialect: Option<Dialect>,
}

/// A call waiting for its result.
struct PendingCall {
    id: String,
    /// The tool as written, for messages.
    tool: String,
    /// A valid call's tool and arguments, for `repeated_failed_call`; `None` for an invalid
    /// native call, whose (error) result is paired when it comes but never missed: the call
    /// already has its finding.
    signature: Option<(ToolName, Map<String, Value>)>,
    index: usize,
    line: usize,
}

/// A result read from a user or tool message.
struct SeenResult {
    id: Option<String>,
    ok: Option<bool>,
    /// Malformed results are reported as such and answer the oldest waiting call, so one bad
    /// block is not also reported as a mismatch or a missing result.
    is_malformed: bool,
    /// The task id and turns of a sub-agent envelope in the body, if it holds one.
    task: Option<(String, Option<u32>)>,
}

/// A sub-agent task whose result a `flycode run` record holds: its transcript is
/// `STEM.TASK_ID.jsonl` next to the record (PROTOCOL.md §13 (The API loop: sub-agents)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskReference {
    /// `task-N`, from the envelope's first line.
    pub task_id: String,
    /// The id of the `agent.task` call the result answers.
    pub call_id: String,
    /// The requests the sub-agent sent (the envelope's `Turns:`); 0 for a task that failed or
    /// was cancelled before its first request, which recorded nothing.
    pub turns: Option<u32>,
    /// The 0-based index of the message holding the result.
    pub index: usize,
    /// The 1-based line where that message starts.
    pub line: usize,
}

/// What checking one transcript found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Findings, in the order they were made.
    pub findings: Vec<Finding>,
    /// Messages read.
    pub messages: usize,
    /// The sub-agent tasks whose results the transcript holds, in order.
    pub tasks: Vec<TaskReference>,
    /// The set the calls were judged against in the end (a `flycode run` record's own, when its
    /// system prompt shows it is one).
    pub tools: ToolSet,
}

/// Checks one transcript, one message at a time.
pub(crate) struct TranscriptChecker {
    file: String,
    options: ValidateOptions,
    findings: Vec<Finding>,
    messages: usize,
    seen_ids: HashSet<String>,
    pending: Vec<PendingCall>,
    window_has_results: bool,
    /// Calls whose result just said `[ok] false`: the next assistant turn must not repeat them.
    just_failed: Vec<(ToolName, Map<String, Value>)>,
    /// The last message before this one was a result whose id is `(none)`, empty or `null`, or
    /// one that is not well-formed (an `[id]` but no `[ok]`: seed 003, R3).
    /// flycode's own answer to a call without a usable id carries `flycode-invalid-call`
    /// instead, so the model's corrected call after it is not reported.
    after_invalid_result: bool,
    tasks: Vec<TaskReference>,
    /// The record is of a native-mode run: its system prompt is the native tool guide, or a
    /// reply made API tool calls.
    native: bool,
    /// What set the transcript's dialect (`--dialect`, its system prompt, its first reply
    /// showing one), for the `mixed_dialects` message.
    dialect_source: String,
    /// `mixed_dialects` was reported: once per transcript.
    mixed_reported: bool,
}

/// The dialects a reply is written in: flycode's when it holds a call or result block, the
/// tags' when it holds tags (or a violation of them); both, or neither (prose).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ReplyDialects {
    flycode: bool,
    tags: bool,
}

impl ReplyDialects {
    fn of(text: &str) -> ReplyDialects {
        let parsed = parse_reply(text);
        ReplyDialects {
            flycode: parsed.call_blocks().next().is_some() || parsed.has_result_block(),
            tags: !matches!(read_tags(text), TagVerdict::None),
        }
    }

    /// The one dialect shown, when exactly one is.
    fn only(self) -> Option<Dialect> {
        match (self.flycode, self.tags) {
            (true, false) => Some(Dialect::Flycode),
            (false, true) => Some(Dialect::Tags),
            _ => None,
        }
    }
}

fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Flycode => "the flycode dialect",
        Dialect::Tags => "the tag dialect",
    }
}

impl TranscriptChecker {
    /// A checker for the transcript named `file`.
    pub(crate) fn new(file: String, options: ValidateOptions) -> TranscriptChecker {
        TranscriptChecker {
            file,
            options,
            findings: Vec::new(),
            messages: 0,
            seen_ids: HashSet::new(),
            pending: Vec::new(),
            window_has_results: false,
            just_failed: Vec::new(),
            after_invalid_result: false,
            tasks: Vec::new(),
            native: false,
            dialect_source: if options.dialect.is_some() {
                "--dialect or flycode.toml".to_owned()
            } else {
                String::new()
            },
            mixed_reported: false,
        }
    }

    /// A checker for the transcript of a sub-agent, named `file`: its calls are read against
    /// every tool ([`ToolSet::All`]), as the sub-agent's own calls were, since its executor
    /// answers a tool it may not call with `denied_by_policy` rather than `unknown_tool`.
    pub(crate) fn new_subagent(file: String, options: ValidateOptions) -> TranscriptChecker {
        TranscriptChecker::new(
            file,
            ValidateOptions {
                tools: ToolSet::All,
                ..options
            },
        )
    }

    /// The transcript's name, as findings give it.
    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// Applies the rules to the next message.
    pub(crate) fn push(&mut self, message: &TranscriptMessage) {
        self.messages += 1;
        match message.role {
            TranscriptRole::System | TranscriptRole::Developer => {
                // flycode run's prompt lists its own tools: its record is judged against its
                // set, whatever --tools says (a chat prompt never names them). A sub-agent's is
                // never narrowed again.
                if message.index == 0
                    && self.options.tools != ToolSet::All
                    && let Some(tools) = run_tool_set(&message.text)
                {
                    self.options.tools = tools;
                }
                if message.index == 0 && is_native_prompt(&message.text) {
                    self.native = true;
                }
                // Seed 000's prompt shows its tags and no call block.
                if message.index == 0
                    && self.options.dialect.is_none()
                    && message.text.contains("<bash_call")
                    && !message.text.contains(crate::protocol::parse::CALL_TAG)
                {
                    self.options.dialect = Some(Dialect::Tags);
                    self.dialect_source = "its system prompt".to_owned();
                }
            }
            TranscriptRole::Assistant => self.push_assistant(message),
            TranscriptRole::User | TranscriptRole::Tool => self.push_user_or_tool(message),
        }
    }

    /// Records a point where the file stopped being readable.
    pub(crate) fn push_unreadable(
        &mut self,
        line: usize,
        column: usize,
        index: Option<usize>,
        message: String,
    ) {
        self.report(
            FindingCode::UnreadableTranscript,
            index,
            line,
            message,
            None,
        );
        if let Some(finding) = self.findings.last_mut() {
            finding.column = (column > 0).then_some(column);
        }
    }

    /// The findings, how many messages were read, and the sub-agent tasks referenced.
    pub(crate) fn finish(mut self) -> Checked {
        // A call that is the very last thing in the transcript is fine; one whose window began
        // (some parallel results arrived) but never completed is not.
        if self.window_has_results {
            self.close_window();
        }
        Checked {
            findings: self.findings,
            messages: self.messages,
            tasks: self.tasks,
            tools: self.options.tools,
        }
    }

    fn report(
        &mut self,
        code: FindingCode,
        index: Option<usize>,
        line: usize,
        message: String,
        excerpt: Option<String>,
    ) {
        let mut severity = code.default_severity();
        if self.options.strict {
            severity = Severity::Error;
        }
        self.findings.push(Finding {
            code,
            severity,
            file: self.file.clone(),
            index,
            line,
            column: None,
            message,
            excerpt,
        });
    }

    fn push_assistant(&mut self, message: &TranscriptMessage) {
        // Each reply is judged in the dialect it is written in; the transcript's is the one the
        // flag, the system prompt or the first reply showing one set (PROTOCOL.md §8 (Rules)).
        let shown = ReplyDialects::of(&message.text);
        if self.options.dialect.is_none()
            && let Some(dialect) = shown.only()
        {
            self.options.dialect = Some(dialect);
            self.dialect_source = format!("message {}", message.index);
        }
        self.note_mixed(shown, message);
        self.close_window();
        let judged_as = shown.only().or(self.options.dialect);
        if judged_as == Some(Dialect::Tags) && message.tool_calls.is_empty() {
            self.judge_tags(message);
            self.just_failed.clear();
            self.after_invalid_result = false;
            return;
        }
        let mut calls = Vec::new();
        let mut invalid = Vec::new();
        if !message.tool_calls.is_empty() {
            self.native = true;
        }
        if self.native {
            // Native mode reads calls from the API alone: a block in the text is prose, and
            // not run (PROTOCOL.md §13 (The API loop: calling modes)).
            if let Some(warning) = native_text_call_warning(&message.text) {
                self.report(
                    FindingCode::ReplyWarning(warning.code.as_str()),
                    Some(message.index),
                    message.line,
                    warning.message,
                    Some(excerpt(&message.text)),
                );
            }
        } else if !message.text.trim().is_empty() || message.tool_calls.is_empty() {
            self.judge_reply(message, &mut calls);
        }
        // Native calls come from flycode run only: its main agent's set, or a sub-agent's.
        let native_tools = match self.options.tools {
            ToolSet::All => ToolSet::All,
            _ => ToolSet::Agent,
        };
        for native in &message.tool_calls {
            match parse_native_call(
                native.id.as_deref(),
                &native.function.name,
                &native.function.arguments,
                native_tools,
            ) {
                Ok(call) => calls.push(call),
                Err(error) => {
                    self.report(
                        FindingCode::Reply(error.code()),
                        Some(message.index),
                        message.line,
                        format!("native tool call {:?}: {error}", native.function.name),
                        Some(excerpt(&native.function.arguments)),
                    );
                    // The API pairs every tool call with a tool message: an invalid one may get
                    // its error result under its id, which must not pass for another call's.
                    if let Some(id) = native.id.as_deref().filter(|id| !is_no_id(id))
                        && error.code() != ErrorCode::InvalidId
                    {
                        invalid.push((id.to_owned(), native.function.name.clone()));
                    }
                }
            }
        }
        for (id, tool) in invalid {
            self.pending.push(PendingCall {
                id,
                tool,
                signature: None,
                index: message.index,
                line: message.line,
            });
        }
        for call in calls {
            self.accept_call(call, message);
        }
        self.just_failed.clear();
        self.after_invalid_result = false;
    }

    fn judge_reply(&mut self, message: &TranscriptMessage, calls: &mut Vec<Call>) {
        let classification = classify_reply(
            &message.text,
            ClassifyOptions {
                lenient: self.options.lenient,
                tools: self.options.tools,
            },
        );
        for warning in &classification.warnings {
            self.report(
                FindingCode::ReplyWarning(warning.code.as_str()),
                Some(message.index),
                message.line,
                warning.message.clone(),
                Some(excerpt(&message.text)),
            );
        }
        match classification.verdict {
            Verdict::None => {}
            Verdict::Call(call) => calls.push(call),
            Verdict::Invalid { error, .. } => self.report(
                FindingCode::Reply(error.code()),
                Some(message.index),
                message.line,
                error.to_string(),
                Some(excerpt(&message.text)),
            ),
        }
    }

    fn accept_call(&mut self, call: Call, message: &TranscriptMessage) {
        let Some(id) = call.id.clone() else { return };
        let shown = escape_for_display(&id).into_owned();
        if !self.seen_ids.insert(id.clone()) {
            self.report(
                FindingCode::DuplicateId,
                Some(message.index),
                message.line,
                format!(
                    "call id {shown:?} ({}) was already used by an earlier call",
                    call.tool
                ),
                None,
            );
        }
        if self
            .just_failed
            .iter()
            .any(|(tool, args)| *tool == call.tool && *args == call.args)
        {
            self.report(
                FindingCode::RepeatedFailedCall,
                Some(message.index),
                message.line,
                format!(
                    "call {shown:?} repeats exactly the {} call whose result just failed",
                    call.tool
                ),
                None,
            );
        }
        if self.after_invalid_result {
            self.report(
                FindingCode::CallAfterInvalidResult,
                Some(message.index),
                message.line,
                format!("call {shown:?} ({}) comes right after a result that is not well-formed (no valid id, or no [ok]), which must not trigger a call", call.tool),
                None,
            );
        }
        self.pending.push(PendingCall {
            id,
            tool: call.tool.to_string(),
            signature: Some((call.tool, call.args)),
            index: message.index,
            line: message.line,
        });
    }

    /// Reports, once per transcript, a reply written in another dialect than the transcript's,
    /// or in both: a door reads one dialect, so what the model wrote in the other never ran.
    fn note_mixed(&mut self, shown: ReplyDialects, message: &TranscriptMessage) {
        let Some(dialect) = self.options.dialect else {
            return;
        };
        if self.mixed_reported {
            return;
        }
        let message_text = match shown.only() {
            _ if shown.flycode && shown.tags => format!(
                "a reply in both dialects (a flycode block and tags) in a transcript that speaks {} (set by {}): a door reads one dialect, so the other's calls never ran as written",
                dialect_name(dialect),
                self.dialect_source
            ),
            Some(other) if other != dialect => format!(
                "a reply in {} in a transcript that speaks {} (set by {}): a door reads one dialect, so its calls never ran as written",
                dialect_name(other),
                dialect_name(dialect),
                self.dialect_source
            ),
            _ => return,
        };
        self.mixed_reported = true;
        self.report(
            FindingCode::MixedDialects,
            Some(message.index),
            message.line,
            message_text,
            Some(excerpt(&message.text)),
        );
    }

    /// A tag-dialect reply: its violations (nesting, forged results, `<return>` with other
    /// tags, an unclosed tag) are findings; its results carry no ids to pair.
    fn judge_tags(&mut self, message: &TranscriptMessage) {
        if let TagVerdict::Invalid(violation) = read_tags(&message.text) {
            self.report(
                FindingCode::Reply(violation.code),
                Some(message.index),
                message.line,
                violation.message,
                Some(excerpt(&message.text)),
            );
        }
    }

    fn push_user_or_tool(&mut self, message: &TranscriptMessage) {
        // A tag-dialect transcript's results carry no ids; only a flycode call in it waits for one.
        if self.options.dialect == Some(Dialect::Tags) && self.pending.is_empty() {
            return;
        }
        let results = self.read_results(message);
        if results.is_empty() && message.role == TranscriptRole::User {
            self.close_window();
            self.after_invalid_result = false;
            return;
        }
        for result in &results {
            self.pair(result, message);
        }
        // Seed 003, R3: a result without an id, or with one but not well-formed (no `[ok]`), is
        // no ground for the next call.
        if let Some(last) = results.last() {
            self.after_invalid_result =
                last.is_malformed || last.id.as_deref().is_none_or(is_no_id);
        }
    }

    /// The results a user or tool message carries; malformed blocks are reported here.
    fn read_results(&mut self, message: &TranscriptMessage) -> Vec<SeenResult> {
        let mut results = Vec::new();
        // Result blocks need a fence: skip the Markdown parser for plain text.
        if message.text.contains("```") || message.text.contains("~~~") {
            let parsed = parse_reply(&message.text);
            for block in parsed.blocks.iter().filter(|b| b.kind == BlockKind::Result) {
                match ResultBlock::parse_content(&block.content) {
                    Ok(result) => results.push(SeenResult {
                        task: result.body.as_deref().and_then(task_envelope),
                        id: result.id,
                        ok: Some(result.ok),
                        is_malformed: false,
                    }),
                    Err(error) => {
                        self.report(
                            FindingCode::MalformedResult,
                            Some(message.index),
                            message.line,
                            format!("{error}"),
                            Some(excerpt(&block.content)),
                        );
                        let has_id = !matches!(
                            error,
                            ResultParseError::MissingId | ResultParseError::EmptyId
                        );
                        results.push(SeenResult {
                            id: has_id.then(|| "?".to_owned()),
                            ok: None,
                            is_malformed: true,
                            task: None,
                        });
                    }
                }
            }
        }
        if results.is_empty() && message.role == TranscriptRole::Tool {
            // Native mode: the message answers its tool_call_id even without a result block.
            results.push(SeenResult {
                id: message.tool_call_id.clone(),
                ok: None,
                is_malformed: false,
                task: None,
            });
        }
        results
    }

    fn pair(&mut self, result: &SeenResult, message: &TranscriptMessage) {
        if self.pending.is_empty() {
            return;
        }
        let first_in_window = !self.window_has_results;
        self.window_has_results = true;
        if result.is_malformed {
            self.pending.remove(0);
            return;
        }
        let answered = result
            .id
            .as_deref()
            .and_then(|id| self.pending.iter().position(|call| call.id == id));
        match answered {
            Some(position) => {
                let call = self.pending.remove(position);
                if let Some((ToolName::AgentTask, _)) = call.signature
                    && let Some((task_id, turns)) = &result.task
                {
                    self.tasks.push(TaskReference {
                        task_id: task_id.clone(),
                        call_id: call.id.clone(),
                        turns: *turns,
                        index: message.index,
                        line: message.line,
                    });
                }
                if result.ok == Some(false)
                    && let Some(signature) = call.signature
                {
                    self.just_failed.push(signature);
                }
            }
            None => {
                // The call this result should have answered: the oldest valid one waiting.
                let oldest = self
                    .pending
                    .iter()
                    .position(|call| call.signature.is_some())
                    .unwrap_or(0);
                let call = self.pending.remove(oldest);
                let got = result.id.as_deref().map_or("(none)".to_owned(), |id| {
                    format!("{:?}", escape_for_display(id))
                });
                let which = if first_in_window {
                    "the first result"
                } else {
                    "a result"
                };
                self.report(
                    FindingCode::ResultIdMismatch,
                    Some(message.index),
                    message.line,
                    format!(
                        "{which} after call {:?} ({}, message {}) carries id {got}",
                        escape_for_display(&call.id),
                        call.tool,
                        call.index
                    ),
                    None,
                );
            }
        }
    }

    /// The conversation moved on: every call still waiting lacks its result.
    fn close_window(&mut self) {
        for call in std::mem::take(&mut self.pending) {
            if call.signature.is_none() {
                continue;
            }
            self.report(
                FindingCode::MissingResult,
                Some(call.index),
                call.line,
                format!(
                    "call {:?} ({}) got no result carrying its id before the conversation moved on",
                    escape_for_display(&call.id),
                    call.tool
                ),
                None,
            );
        }
        self.window_has_results = false;
    }
}

/// The set a `flycode run` record's system prompt shows: a sub-agent's names `agent.complete`
/// (its calls are read against every tool), the main agent's names its other tools but never
/// that one.
fn run_tool_set(prompt: &str) -> Option<ToolSet> {
    let names = |tool: ToolName| {
        prompt.contains(&format!("`{}`", tool.as_str()))
            || prompt.contains(&format!("`{}`", tool.native_name()))
    };
    if names(ToolName::AgentComplete) {
        Some(ToolSet::All)
    } else if ToolName::AGENT_TOOLS.iter().any(|tool| names(*tool)) {
        Some(ToolSet::Agent)
    } else {
        None
    }
}

/// Whether a `flycode run` system prompt is the native mode's: its tool guide (the main
/// agent's and a sub-agent's) says the tools are API functions, which the text mode's never does.
fn is_native_prompt(prompt: &str) -> bool {
    prompt.contains("The tools are API functions")
}

/// The task id and turns of a sub-agent envelope's body: "Sub-agent task-3 (explore, light
/// model): ok" then "Turns: 2 · ...". Only `task-` and digits make an id, since it becomes part
/// of a file name.
fn task_envelope(body: &str) -> Option<(String, Option<u32>)> {
    let mut lines = body.lines();
    let (task_id, _) = lines.next()?.strip_prefix("Sub-agent ")?.split_once(" (")?;
    let number = task_id.strip_prefix("task-")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let turns = lines
        .next()
        .and_then(|line| line.strip_prefix("Turns: "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok());
    Some((task_id.to_owned(), turns))
}

/// The first telling line of `text` (not blank, not a fence), at most 100 characters, made safe
/// to print.
fn excerpt(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or_default();
    let line = lines
        .find(|l| !l.starts_with("```") && !l.starts_with("~~~"))
        .unwrap_or(first);
    let short: String = line.chars().take(100).collect();
    let suffix = if line.chars().count() > 100 {
        "..."
    } else {
        ""
    };
    format!("{}{suffix}", escape_for_display(&short))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_gives_its_task_id_and_turns() {
        let body = "Sub-agent task-12 (explore, light model): ok\nTurns: 3 · calls: 4 · tokens: 1 in, 2 out · 0.5 s\nCalls: none\n";
        assert_eq!(task_envelope(body), Some(("task-12".to_owned(), Some(3))));
        let failed = "Sub-agent task-1 (plan, main model): failed\nTurns: 0 · calls: 0\n";
        assert_eq!(task_envelope(failed), Some(("task-1".to_owned(), Some(0))));
        assert_eq!(
            task_envelope("Sub-agent task-2 (general, main model): ok"),
            Some(("task-2".to_owned(), None))
        );
    }

    #[test]
    fn only_task_and_digits_make_a_task_id() {
        for body in [
            "Sub-agent ../../etc/passwd (explore, main model): ok\n",
            "Sub-agent task-1/../x (explore, main model): ok\n",
            "Sub-agent task- (explore, main model): ok\n",
            "Sub-agent task-1x (explore, main model): ok\n",
            "sub-agent task-1 (explore, main model): ok\n",
            "Read 3 lines\n",
        ] {
            assert_eq!(task_envelope(body), None, "{body}");
        }
    }

    #[test]
    fn a_sub_agents_prompt_names_agent_complete_and_the_main_agents_does_not() {
        assert_eq!(
            run_tool_set("Finish with one `agent.complete` call; use `agent.todo`."),
            Some(ToolSet::All)
        );
        assert_eq!(
            run_tool_set("call `agent_complete` when done"),
            Some(ToolSet::All)
        );
        assert_eq!(
            run_tool_set("Delegate with `agent.task`; plan with `agent.todo`."),
            Some(ToolSet::Agent)
        );
        assert_eq!(run_tool_set("You answer with flycode-call blocks."), None);
    }
}
