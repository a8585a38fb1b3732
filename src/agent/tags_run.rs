//! `flycode run --dialect tags` (PROTOCOL.md §15 (The tag dialect: run)): the loop of seed 000's
//! agents. Each reply is read for tags; its tool tags run in order through the run's one
//! executor ([`crate::tags::TagDoor`]) and their results go back as the next user message; a
//! `<create_agent>` runs a sub-agent to its end first (depth-first, on the same model and
//! executor, within the run's and the agent's quotas) and answers with its `<child_summary>`; a
//! `<return>` alone ends the agent with its summary (the run's answer at the top).

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::client::{ChatRequest, Provider};
use super::context::SpecialMessages;
use super::message::Message;
use super::predefined::{PredefinedAgent, PredefinedError, find_agent};
use super::settings::ResolvedSettings;
use super::task::child_transcript_path;
use super::task::envelope::neutralize_calls;
use super::transcript::TranscriptWriter;
use crate::protocol::display::escape_for_terminal;
use crate::protocol::tags::{TagError, TagKind, TagResult, TagVerdict, read_tags};
use crate::protocol::{ErrorCode, ToolName};
use crate::tags::{ChildAgents, TagAnswer, TagDoor, child_result, render_answers};
use crate::tools::executor::{Executor, Restriction};

/// How an agent of the loop ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TagEnding {
    /// It sent `<return>`: its summary.
    Returned(String),
    /// It stopped without one: why.
    Stopped(String),
    /// Ctrl-C.
    Cancelled,
}

/// Everything the agents of one run share.
pub(crate) struct TagLoop<'a> {
    /// The model's client: one request at a time, children in turn (depth-first).
    pub provider: Mutex<&'a mut dyn Provider>,
    /// Runs every agent's calls.
    pub executor: &'a Executor<'a>,
    /// Model, budgets and quotas.
    pub settings: &'a ResolvedSettings,
    /// The system prompt every agent gets.
    pub system: String,
    /// Set by Ctrl-C.
    pub cancel: &'a AtomicBool,
    /// Sub-agents started in the run.
    pub started: Mutex<u32>,
    /// The largest reply read, in bytes.
    pub max_reply_bytes: usize,
}

impl TagLoop<'_> {
    /// Runs the top agent on `task`, recorded in `transcripts`.
    pub(crate) fn run(&self, task: &str, transcripts: Vec<PathBuf>) -> TagEnding {
        let top = AgentFrame {
            system: self.system.clone(),
            executor: self.executor,
            may_delegate: true,
            depth: 0,
            transcripts,
        };
        self.converse(task, top)
    }

    /// One agent's conversation, to its `<return>` or until it stops.
    fn converse(&self, task: &str, start: AgentFrame<'_>) -> TagEnding {
        let AgentFrame {
            system,
            executor,
            may_delegate,
            depth,
            transcripts,
        } = start;
        let transcript =
            TranscriptWriter::new(transcripts.clone()).with_roots(executor.sandbox().roots());
        let mut messages = vec![Message::system(system), Message::user(task)];
        let frame = TagAgent {
            owner: self,
            executor,
            may_delegate,
            used: Cell::new(0),
            depth,
            transcripts,
        };
        let mut violations = 0;
        for _turn in 0..self.settings.max_turns {
            if self.cancel.load(Ordering::SeqCst) {
                return TagEnding::Cancelled;
            }
            let reply = match self.ask(&with_hints(&messages, executor, &self.secrets())) {
                Ok(reply) => reply,
                Err(ending) => return ending,
            };
            messages.push(Message::assistant(reply.clone(), Vec::new()));
            let answer = match read_tags(&reply) {
                TagVerdict::Return(summary) => {
                    let _ = transcript.save(&messages, &[]);
                    return TagEnding::Returned(summary);
                }
                TagVerdict::Tags(tags) => {
                    violations = 0;
                    frame.run_tags(&tags)
                }
                TagVerdict::None => {
                    violations += 1;
                    "[flycode] Your reply holds no tag, and nobody reads prose: use <bash_call>, <builtin> or <create_agent> to work, and <return> alone to finish (also to ask the user a question).".to_owned()
                }
                TagVerdict::Invalid(violation) => {
                    violations += 1;
                    render_answers(&[&TagResult::violation(&violation)], &self.secrets())
                }
            };
            messages.push(Message::user_result(answer));
            let _ = transcript.save(&messages, &[]);
            if violations > self.settings.max_violations {
                return TagEnding::Stopped(format!(
                    "{violations} replies in a row ran nothing (max_violations)"
                ));
            }
        }
        TagEnding::Stopped(format!(
            "the agent used its {} turns without <return> (max_turns)",
            self.settings.max_turns
        ))
    }

    /// One completion: the reply's text, or how the agent ends.
    fn ask(&self, messages: &[Message]) -> Result<String, TagEnding> {
        let mut provider = self
            .provider
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let request = ChatRequest {
            model: &self.settings.model,
            messages,
            tools: &[],
            stream: self.settings.stream,
            max_tokens: self.settings.bounds.max_reply_tokens,
        };
        match provider.complete(&request, &mut |_| {}, self.cancel) {
            Ok(completion) if completion.reply_bytes() > self.max_reply_bytes => {
                Err(TagEnding::Stopped(format!(
                    "a reply of {} bytes is over max_reply_bytes ({})",
                    completion.reply_bytes(),
                    self.max_reply_bytes
                )))
            }
            Ok(completion) => Ok(completion.content),
            Err(_) if self.cancel.load(Ordering::SeqCst) => Err(TagEnding::Cancelled),
            Err(error) => Err(TagEnding::Stopped(format!("the API failed: {error}"))),
        }
    }

    fn secrets(&self) -> crate::tools::secrets::Secrets {
        self.executor.limits().secrets()
    }
}

/// Where an agent of the loop starts: its system prompt, the executor of its calls (the run's,
/// or a narrower one for a predefined agent that names its tools), its depth and transcripts.
struct AgentFrame<'e> {
    system: String,
    executor: &'e Executor<'e>,
    /// Whether its `<create_agent>` runs: not for a predefined agent whose tools leave out
    /// `agent.task`.
    may_delegate: bool,
    depth: usize,
    transcripts: Vec<PathBuf>,
}

/// One agent of the loop: its own quota of sub-agents and its place in the tree.
struct TagAgent<'l, 'a> {
    owner: &'l TagLoop<'a>,
    /// Runs this agent's calls.
    executor: &'l Executor<'l>,
    may_delegate: bool,
    /// Sub-agents this agent started.
    used: Cell<u32>,
    depth: usize,
    transcripts: Vec<PathBuf>,
}

impl TagAgent<'_, '_> {
    /// Runs a reply's tool tags and renders their results, saying on stderr what ran.
    fn run_tags(&self, tags: &[crate::protocol::tags::Tag]) -> String {
        let indent = "  ".repeat(self.depth);
        let mut number = 0;
        let answers = TagDoor::new(self.executor)
            .with_children(self)
            .answer(tags, &mut || {
                number += 1;
                format!("tag-{}-{number}", self.depth)
            });
        for (tag, answer) in tags.iter().zip(&answers) {
            let shown = match &answer.execution {
                Some(execution) => execution.command.clone(),
                None => tag.kind.name().to_owned(),
            };
            let word = if answer.ok { "ok" } else { "failed" };
            eprintln!(
                "{indent}● {} ({word})",
                escape_for_terminal(&self.owner.secrets().mask(&shown))
            );
        }
        let results: Vec<&TagResult> = answers.iter().map(|a| &a.result).collect();
        render_answers(&results, &self.owner.secrets())
    }

    /// The next sub-agent's number, or which quota is spent.
    fn claim(&self) -> Result<u32, TagError> {
        let limits = self.owner.settings.tasks;
        let mut started = self
            .owner
            .started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let spent = if *started >= limits.per_run {
            Some((
                "[global quota limit] the run's",
                limits.per_run,
                "max_tasks_per_run",
            ))
        } else if self.used.get() >= limits.per_agent {
            Some(("this agent's", limits.per_agent, "max_tasks_per_agent"))
        } else {
            None
        };
        if let Some((whose, quota, key)) = spent {
            return Err(TagError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "<create_agent> was not run: {whose} quota of {quota} sub-agents is spent ({key})"
                ),
                "Do the rest yourself with <bash_call> and <builtin>, then <return>.".into(),
            ));
        }
        *started += 1;
        self.used.set(self.used.get() + 1);
        Ok(*started)
    }
}

impl ChildAgents for TagAgent<'_, '_> {
    fn run_child(&self, task: &str, name: Option<&str>, _id: &str) -> TagAnswer {
        if !self.may_delegate {
            let error = TagError::new(
                ErrorCode::DeniedByPolicy,
                "<create_agent> was not run: this predefined agent's file does not name agent.task among its tools".into(),
                "Do the work with the tools your role names, then <return>.".into(),
            );
            return TagAnswer::refused(TagKind::CreateAgent, "", &error);
        }
        // A name that leads to no agent fails before the quota is touched.
        let predefined = match name.map(|name| self.predefined(name)).transpose() {
            Ok(predefined) => predefined,
            Err(error) => return TagAnswer::refused(TagKind::CreateAgent, "", &error),
        };
        let number = match self.claim() {
            Ok(number) => number,
            Err(error) => return TagAnswer::refused(TagKind::CreateAgent, "", &error),
        };
        let indent = "  ".repeat(self.depth);
        let title: String = task
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(60)
            .collect();
        eprintln!(
            "{indent}● create_agent task-{number}: {}",
            escape_for_terminal(&title)
        );
        let transcripts = self
            .transcripts
            .iter()
            .map(|parent| child_transcript_path(parent, &format!("task-{number}")))
            .collect();
        let narrowed = predefined
            .as_ref()
            .and_then(|agent| agent.tools.clone())
            .map(|tools| {
                self.executor.restricted(Restriction {
                    tools: std::borrow::Cow::Owned(tools),
                    reason: "this predefined agent's file names the tools it may use",
                    hint: "Use the tools your role names, or <return> and say what is left to do.",
                })
            });
        // A predefined agent's tools are those its file names that its parent may use too.
        let executor = narrowed.as_ref().unwrap_or(self.executor);
        let start = AgentFrame {
            system: match &predefined {
                Some(agent) => predefined_system(&self.owner.system, agent, executor),
                None => self.owner.system.clone(),
            },
            executor,
            may_delegate: executor.allows(ToolName::AgentTask),
            depth: self.depth + 1,
            transcripts,
        };
        let ending = self.owner.converse(task, start);
        let (ok, summary) = match ending {
            TagEnding::Returned(summary) => (true, summary),
            TagEnding::Stopped(why) => (
                false,
                format!("the sub-agent stopped without <return>: {why}"),
            ),
            TagEnding::Cancelled => (false, "the sub-agent was stopped (Ctrl-C)".to_owned()),
        };
        // The child's words go to its parent as background: no call form in them runs.
        TagAnswer {
            result: child_result(ok, &neutralize_calls(&summary), name),
            ok,
            execution: None,
        }
    }
}

impl TagAgent<'_, '_> {
    /// The predefined agent `name` (PROTOCOL.md §9 (Hints and predefined agents)), or the
    /// error that lists the ones there are.
    fn predefined(&self, name: &str) -> Result<PredefinedAgent, TagError> {
        find_agent(&self.executor.limits().places, name).map_err(|error| {
            let code = match error {
                PredefinedError::Unknown { .. } => ErrorCode::NotFound,
                PredefinedError::Untrusted { .. } | PredefinedError::Broken { .. } => {
                    ErrorCode::InvalidArgs
                }
            };
            TagError::new(
                code,
                format!("<create_agent> was not run: {error}"),
                "Name one of the available agents, or leave name out for a general sub-agent."
                    .into(),
            )
        })
    }
}

/// A predefined agent's system prompt: the run's, then its role and the tools it may use (those
/// its executor runs).
fn predefined_system(system: &str, agent: &PredefinedAgent, executor: &Executor<'_>) -> String {
    let tools = match executor.restricted_to() {
        Some(tools) => {
            let names: Vec<&str> = tools.iter().map(|tool| tool.as_str()).collect();
            let names = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            format!("\n\nThe tools you may use: {names}. Other calls are refused.")
        }
        None => String::new(),
    };
    format!(
        "{system}\n\n# Your role: the predefined agent {}\n\n{}{tools}",
        agent.name, agent.role
    )
}

/// The request of an agent: its messages with the `HINT.md` of the hints it loaded right after
/// the system message, as in the flycode dialect (PROTOCOL.md §9 (hint.load)).
fn with_hints(
    messages: &[Message],
    executor: &Executor<'_>,
    secrets: &crate::tools::secrets::Secrets,
) -> Vec<Message> {
    let mut hints = SpecialMessages::default()
        .with_hints(&executor.loaded_hints())
        .messages();
    hints.iter_mut().for_each(|message| message.mask(secrets));
    let mut request = Vec::with_capacity(messages.len() + hints.len());
    request.extend(messages.first().cloned());
    request.extend(hints);
    request.extend(messages.iter().skip(1).cloned());
    request
}
