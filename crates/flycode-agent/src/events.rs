//! What a run reports while it runs and when it ends: the [`RunEvent`]s an observer hears (the
//! terminal display, `--json`), and the [`RunReport`].

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::protocol::ToolName;
use flycode_core::tools::secrets::Secrets;

/// Token counts summed over a run's requests, where the server reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those the server read from its prompt cache (Anthropic).
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "ending", content = "detail")]
pub enum RunEnding {
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
    /// A sub-agent called `agent.complete`: its task is done.
    Completed,
    /// A sub-agent's last turn ended without `agent.complete`; the detail says why it had a
    /// last turn.
    Incomplete(String),
}

impl RunEnding {
    /// `answered`, `max_turns`...
    pub fn name(&self) -> &'static str {
        match self {
            RunEnding::Answered => "answered",
            RunEnding::MaxTurns => "max_turns",
            RunEnding::TooManyViolations(_) => "too_many_violations",
            RunEnding::Cancelled => "cancelled",
            RunEnding::ClientFailed(_) => "client_failed",
            RunEnding::EmptyReply(_) => "empty_reply",
            RunEnding::Completed => "completed",
            RunEnding::Incomplete(_) => "incomplete",
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Why it ended.
    #[serde(flatten)]
    pub ending: RunEnding,
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
    /// No answer yet: the model is still reading the prompt (every few seconds until the
    /// first event of the response).
    Waiting {
        /// Since the request was sent.
        elapsed_ms: u64,
    },
    /// flycode cut the reply (PROTOCOL.md §13 (The API loop: bounded replies)): nothing in it
    /// runs, and the model is told why.
    ReplyCut {
        /// 1-based.
        turn: u32,
        /// `repetition` or `time_limit`.
        reason: String,
        /// What happened, in words.
        message: String,
    },
    /// A call the model wrote as text in native mode runs as if made through the API
    /// (PROTOCOL.md §13 (The API loop: calls written as text)).
    CallRecovered {
        /// The id flycode gave it.
        id: String,
        /// The tool.
        tool: ToolName,
        /// How it was written, e.g. "a ```json block".
        form: String,
    },
    /// Several read-only calls start at once.
    ParallelCalls {
        /// How many.
        count: usize,
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
    /// Older turns were replaced by a summary to keep the conversation within the context.
    Compacted {
        /// The compaction's number in the run, from 1.
        number: u32,
        /// How many messages the summary replaced.
        replaced: usize,
        /// The request's tokens before (the server's count plus an estimate of what was added).
        tokens_before: u64,
        /// The request's estimated tokens after.
        tokens_after: u64,
    },
    /// Something went wrong that does not stop the run (a transcript or audit write).
    Warning {
        /// What.
        message: String,
    },
    /// The run ended.
    Finished(RunReport),
    /// An event of a sub-agent: serialized as the event itself with `task_id` and
    /// `parent_call_id` added.
    #[serde(untagged)]
    Child(ChildEvent),
}

/// An event of a sub-agent, and which task it belongs to.
#[derive(Clone, Debug)]
pub struct ChildEvent {
    /// The task, e.g. `task-1`.
    pub task_id: String,
    /// The id of the `agent.task` call that started it.
    pub parent_call_id: Option<String>,
    /// What happened.
    pub event: Box<RunEvent>,
}

impl Serialize for ChildEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let serde_json::Value::Object(fields) =
            serde_json::to_value(&*self.event).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("an event is an object"));
        };
        let mut map = serializer.serialize_map(Some(fields.len() + 2))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("task_id", &self.task_id)?;
        map.serialize_entry("parent_call_id", &self.parent_call_id)?;
        map.end()
    }
}

impl RunEvent {
    /// The event with flycode's secrets masked in every text it carries (PROTOCOL.md §9,
    /// "Secrets and masking"): ids, commands, subjects, summaries, messages, the reply and the answer. The
    /// match names every variant, so a new one cannot be added without deciding what it masks.
    pub fn masked(&self, secrets: &Secrets) -> RunEvent {
        let text = |text: &String| secrets.mask(text).into_owned();
        let id = |id: &Option<String>| id.as_ref().map(text);
        match self {
            RunEvent::Request { .. }
            | RunEvent::Retrying { .. }
            | RunEvent::Waiting { .. }
            | RunEvent::ParallelCalls { .. }
            | RunEvent::Compacted { .. } => self.clone(),
            RunEvent::ReplyCut {
                turn,
                reason,
                message,
            } => RunEvent::ReplyCut {
                turn: *turn,
                reason: reason.clone(),
                message: text(message),
            },
            RunEvent::CallRecovered { id, tool, form } => RunEvent::CallRecovered {
                id: text(id),
                tool: *tool,
                form: form.clone(),
            },
            RunEvent::TextDelta { text: delta } => RunEvent::TextDelta { text: text(delta) },
            RunEvent::Reply {
                turn,
                text: reply,
                tool_calls,
                usage,
            } => RunEvent::Reply {
                turn: *turn,
                text: text(reply),
                tool_calls: *tool_calls,
                usage: *usage,
            },
            RunEvent::CallStarted {
                id: call_id,
                tool,
                subject,
                command,
                runs_program,
            } => RunEvent::CallStarted {
                id: id(call_id),
                tool: *tool,
                subject: text(subject),
                command: text(command),
                runs_program: *runs_program,
            },
            RunEvent::CallFinished {
                id: call_id,
                tool,
                ok,
                code,
                summary,
                advice,
                duration_ms,
            } => RunEvent::CallFinished {
                id: id(call_id),
                tool: *tool,
                ok: *ok,
                code: id(code),
                summary: text(summary),
                advice: id(advice),
                duration_ms: *duration_ms,
            },
            RunEvent::Violation {
                id: call_id,
                code,
                message,
                consecutive,
            } => RunEvent::Violation {
                id: id(call_id),
                code: text(code),
                message: text(message),
                consecutive: *consecutive,
            },
            RunEvent::Warning { message } => RunEvent::Warning {
                message: text(message),
            },
            RunEvent::Finished(report) => RunEvent::Finished(report.masked(secrets)),
            RunEvent::Child(child) => RunEvent::Child(ChildEvent {
                task_id: text(&child.task_id),
                parent_call_id: id(&child.parent_call_id),
                event: Box::new(child.event.masked(secrets)),
            }),
        }
    }
}

impl RunReport {
    /// The report with its answer and the detail of its ending masked.
    pub fn masked(&self, secrets: &Secrets) -> RunReport {
        let text = |text: &String| secrets.mask(text).into_owned();
        let ending = match &self.ending {
            RunEnding::TooManyViolations(detail) => RunEnding::TooManyViolations(text(detail)),
            RunEnding::ClientFailed(detail) => RunEnding::ClientFailed(text(detail)),
            RunEnding::EmptyReply(detail) => RunEnding::EmptyReply(text(detail)),
            RunEnding::Incomplete(detail) => RunEnding::Incomplete(text(detail)),
            other => other.clone(),
        };
        RunReport {
            ending,
            answer: self.answer.as_ref().map(text),
            ..self.clone()
        }
    }
}

/// An observer that hears every event masked ([`RunEvent::masked`]) and passes it on: a run
/// wraps the observer it is given in one, so no event reaches a terminal, `--json` or a parent
/// unmasked.
pub struct MaskingObserver<'o> {
    /// Who hears the masked events.
    pub inner: &'o mut dyn RunObserver,
    /// What to mask.
    pub secrets: Secrets,
}

impl RunObserver for MaskingObserver<'_> {
    fn on_event(&mut self, event: &RunEvent) {
        if self.secrets.is_empty() {
            self.inner.on_event(event);
        } else {
            self.inner.on_event(&event.masked(&self.secrets));
        }
    }
}

/// Receives a run's events.
pub trait RunObserver {
    /// One event, in order.
    fn on_event(&mut self, event: &RunEvent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_event_is_the_event_itself_with_its_task() {
        let event = RunEvent::Child(ChildEvent {
            task_id: "task-1".into(),
            parent_call_id: Some("call_7".into()),
            event: Box::new(RunEvent::Warning {
                message: "m".into(),
            }),
        });
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"event": "warning", "message": "m", "task_id": "task-1", "parent_call_id": "call_7"})
        );
    }

    #[test]
    fn every_text_of_an_event_is_masked() {
        let key = "sk-live-0123456789abcdef";
        let secrets = Secrets::from_values([key.to_owned()]);
        let started = RunEvent::CallStarted {
            id: Some(key.into()),
            tool: ToolName::FsRead,
            subject: format!("/w/{key}"),
            command: format!("/fs.read /w/{key}"),
            runs_program: false,
        };
        let child = RunEvent::Child(ChildEvent {
            task_id: "task-1".into(),
            parent_call_id: Some(format!("p-{key}")),
            event: Box::new(started),
        });
        struct Heard(Vec<String>);
        impl RunObserver for Heard {
            fn on_event(&mut self, event: &RunEvent) {
                self.0.push(serde_json::to_string(event).unwrap());
            }
        }
        let mut heard = Heard(Vec::new());
        let mut observer = MaskingObserver {
            inner: &mut heard,
            secrets,
        };
        observer.on_event(&child);
        observer.on_event(&RunEvent::TextDelta { text: key.into() });
        let shown = heard.0.join("\n");
        assert!(!shown.contains("sk-live"), "{shown}");
        assert!(shown.contains(r#""parent_call_id":"p-***""#), "{shown}");
    }
}
