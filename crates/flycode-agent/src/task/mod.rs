//! Sub-agents (PROTOCOL.md §13 (The API loop: sub-agents), seeds 002 and 000): `agent.task` starts an isolated, read-only child
//! conversation and waits for it.
//!
//! A child reuses the main loop ([`AgentRun`], as [`RunKind::Subagent`]): the same client and
//! retries, the same prompt builder (its role from `subagent-<type>.md` or `[agent.subagent]`, the
//! sub-agent capabilities module, its own tool list), the same special messages in the same
//! places (its own role, TODO list and notes, the roots' folder notes), its own transcript. Its
//! executor is a restriction of the run's ([`Executor::subagent`]: the same policy, audit log,
//! undo recorder, limits and jobs), runs only the read-only tools ([`SUBAGENT_ONLY`]), whatever
//! the model sends, and has no task runner, so a child can never start a task. Its events reach
//! the parent's observer as [`RunEvent::Child`], through the relay the parent's turn passes on.
//!
//! [`Tasks`] is the run's [`TaskRunner`]: it counts the quotas, picks the model (light or main,
//! with the fallback), sets the child up, runs it, and turns its report into the [`Envelope`].

pub mod envelope;
pub mod tags;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::time::Instant;

use super::client::{ApiKey, ClientError, ClientSettings, Provider};
use super::compaction::Compactor;
use super::context::SharedMemory;
use super::events::{ChildEvent, RunEnding, RunEvent, RunObserver, RunReport};
use super::predefined::{PredefinedAgent, PredefinedError, find_agent, granted_tools};
use super::prompt::{
    AssembledPrompt, PromptContext, PromptOverrides, SystemPromptSource, assemble_prompt,
    subagent_role,
};
use super::settings::{ResolvedSettings, RoleChoice, SystemPromptChoice};
use super::transcript::TranscriptWriter;
use super::turn::{AgentRun, RunKind};
use crate::protocol::{ErrorCode, ToolName, ToolSet};
use crate::sandbox::Session;
pub use envelope::{Envelope, TaskContext, TaskStats, TaskStatus, ToolTally, fit_result};
use flycode_core::tools::agent::{ModelChoice, SubagentType, TaskArgs, TaskRunner};
use flycode_core::tools::executor::{Executor, Restriction};
use flycode_core::tools::{ToolError, ToolOutput};

/// What a sub-agent's executor runs: the read-only tools, its notes and `agent.complete`.
pub const SUBAGENT_ONLY: Restriction = Restriction {
    tools: std::borrow::Cow::Borrowed(&ToolName::SUBAGENT),
    reason: "sub-agents are read-only",
    hint: "use the read-only tools, and say in your agent.complete result what should be changed or run: the agent that started you will do it",
};

/// Makes the API client of a sub-agent (a real HTTP client; a scripted one in benchmarks).
pub type ProviderFactory =
    dyn Fn(&ClientSettings) -> Result<Box<dyn Provider>, ClientError> + Send + Sync;

/// The default [`ProviderFactory`]: the HTTP client of the settings' provider (OpenAI or
/// Anthropic).
pub fn http_provider(settings: &ClientSettings) -> Result<Box<dyn Provider>, ClientError> {
    crate::client::connect(settings)
}

/// The sub-agent layer of one run: everything a child is made from, and the run's count.
pub struct Tasks<'a> {
    /// The run's executor without its agent's notes and tasks, whose restriction each child's
    /// is: the same sandbox (children work under the same roots), policy, approver (a policy may
    /// ask even for reads), audit log, undo recorder, limits (output cap, timeouts, secrets,
    /// Ctrl-C), background jobs (a sub-agent may read them, never start or end one) and
    /// condenser (the run's light model, where there is one).
    pub service: Executor<'a>,
    /// The run's settings (models, quotas, budgets, roles).
    pub settings: &'a ResolvedSettings,
    /// The parent's prompt context (working directory, roots, date, mode).
    pub prompt_context: PromptContext,
    /// The parent's transcripts: each child's is recorded next to each of them.
    pub transcripts: Vec<PathBuf>,
    /// Set by Ctrl-C: stops every child at once.
    pub cancel: &'a AtomicBool,
    /// Makes the children's API clients.
    pub providers: &'a ProviderFactory,
    /// Where children's events go (the parent's turn passes them on to its observer).
    pub relay: Sender<RunEvent>,
    /// Accept text around a call block (text mode).
    pub lenient: bool,
    /// The largest reply read, in bytes (PROTOCOL.md §1 (Reading a reply: reply size limit)).
    pub max_reply_bytes: usize,
    /// Tasks started so far.
    pub started: Mutex<u32>,
}

/// `<stem>.<task_id>.jsonl` next to `parent`: where a child of the run recorded in `parent` is
/// recorded (`flycode validate` finds it there).
pub fn child_transcript_path(parent: &Path, task_id: &str) -> PathBuf {
    let stem = parent
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent.with_file_name(format!("{stem}.{task_id}.jsonl"))
}

/// The model a child runs on, and which one it is.
struct ChildModel {
    client: ClientSettings,
    model: String,
    used: ModelChoice,
}

/// Why a sub-agent type's role cannot be had: the task fails before any request.
#[derive(Debug, thiserror::Error)]
enum RoleError {
    /// Its `role_file` cannot be read.
    #[error(
        "cannot read the role of {} sub-agents from {} (role_file in {setting} of flycode.toml): {error}; fix the path",
        subagent.as_str(),
        path.display()
    )]
    Unreadable {
        subagent: SubagentType,
        path: std::path::PathBuf,
        setting: String,
        error: std::io::Error,
    },
    /// Its role is empty.
    #[error(
        "the role of {} sub-agents is empty: {named} of flycode.toml; a sub-agent needs a role definition, so write one there or remove the setting to use the built-in role",
        subagent.as_str()
    )]
    Empty {
        subagent: SubagentType,
        named: String,
    },
}

impl Tasks<'_> {
    /// Takes the next task's number, or says which quota is spent.
    fn claim(&self) -> Result<u32, ToolError> {
        let mut started = self
            .started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let limits = self.settings.tasks;
        let spent = if *started >= limits.per_run {
            Some(("the run's", limits.per_run, "max_tasks_per_run"))
        } else if *started >= limits.per_agent {
            Some(("this agent's", limits.per_agent, "max_tasks_per_agent"))
        } else {
            None
        };
        if let Some((whose, quota, key)) = spent {
            return Err(ToolError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "agent.task was not run: {whose} quota of {quota} sub-agent tasks is spent ({key} in [agent] of flycode.toml)"
                ),
                Some(
                    "do the work directly: fs.readMany, fs.search and fs.read find and read what a sub-agent would",
                ),
            )
            .with_advice(format!(
                "raise {key} in the [agent] table of flycode.toml to allow more sub-agent tasks"
            )));
        }
        *started += 1;
        Ok(*started)
    }

    /// The role of `subagent`, or why it cannot be had (the task fails before any request).
    fn role(&self, subagent: SubagentType) -> Result<String, RoleError> {
        let setting = format!("[agent.subagent.{}]", subagent.as_str());
        let (text, named) = match self.settings.subagent_role(subagent) {
            RoleChoice::Built => return Ok(subagent_role(subagent).to_owned()),
            RoleChoice::Text(text) => (text.clone(), format!("role in {setting}")),
            RoleChoice::File(path) => match crate::sandbox::host::read_to_string(path) {
                Ok(text) => (
                    text,
                    format!("the file {} (role_file in {setting})", path.display()),
                ),
                Err(error) => {
                    return Err(RoleError::Unreadable {
                        subagent,
                        path: path.clone(),
                        setting,
                        error,
                    });
                }
            },
        };
        if text.trim().is_empty() {
            return Err(RoleError::Empty { subagent, named });
        }
        Ok(text)
    }

    /// The light model's client for compaction summaries (PROTOCOL.md §13 (The API loop:
    /// compaction)), when one is configured and its client can be made; `None` lets the run's
    /// own model write them.
    pub fn compactor(&self) -> Option<Compactor> {
        self.settings.light.as_ref()?;
        let light = self.model(ModelChoice::Light);
        let provider = (self.providers)(&light.client).ok()?;
        Some(Compactor {
            provider,
            model: light.model,
        })
    }

    /// The light model where one is configured and asked for; the main one otherwise.
    fn model(&self, choice: ModelChoice) -> ChildModel {
        let settings = self.settings;
        let (provider, base_url, model, api_key, used) = match (choice, &settings.light) {
            (ModelChoice::Light, Some(light)) => (
                light.provider,
                light.base_url.clone(),
                light.model.clone(),
                light.api_key.clone(),
                ModelChoice::Light,
            ),
            _ => (
                settings.provider,
                settings.base_url.clone(),
                settings.model.clone(),
                settings.api_key.clone(),
                ModelChoice::Main,
            ),
        };
        let first_byte_timeout = settings
            .bounds
            .first_byte_timeout(&base_url, settings.read_timeout);
        ChildModel {
            client: ClientSettings {
                first_byte_timeout,
                turn_timeout: Some(settings.bounds.turn_timeout),
                provider,
                base_url,
                api_key: api_key.map(ApiKey::new),
                connect_timeout: settings.connect_timeout,
                read_timeout: settings.read_timeout,
                max_retries: settings.max_retries,
                retry_base: settings.retry_base,
                max_reply_bytes: self.max_reply_bytes,
            },
            model,
            used,
        }
    }

    /// Runs the child of task `task_id` (as `predefined` when the task names one) and returns
    /// its envelope.
    fn run_child(
        &self,
        task: &TaskArgs,
        predefined: Option<&PredefinedAgent>,
        task_id: &str,
        parent_call_id: Option<&str>,
    ) -> Envelope {
        let started = Instant::now();
        let model = self.model(task.model_choice());
        let (transcripts, context) = self.child_context(task_id, parent_call_id);
        let envelope = |status, result: &str, tallies, stats, context| {
            Envelope::new(
                status,
                &fit_result(result, self.service.limits().output_cap),
                (tallies, model.used, task.subagent_type),
                stats,
                context,
                self.settings.strict,
            )
        };
        let (role, mut provider) = match self.child_parts(task, predefined, &model) {
            Ok(parts) => parts,
            Err(message) => {
                // A task that fails before its first request had no conversation: no
                // transcript is written, so the envelope names none.
                let stats = TaskStats {
                    duration_ms: millis(started),
                    ..TaskStats::default()
                };
                let context = TaskContext {
                    transcripts: Vec::new(),
                    ..context
                };
                return envelope(TaskStatus::Failed, &message, Vec::new(), stats, context);
            }
        };
        let mut observer = RelayObserver {
            relay: self.relay.clone(),
            task_id: task_id.to_owned(),
            parent_call_id: parent_call_id.map(str::to_owned),
            tallies: Vec::new(),
        };
        let prompt = self.child_prompt(&model, role);
        let restriction = match predefined {
            Some(agent) => Restriction {
                tools: std::borrow::Cow::Owned(granted_tools(agent, &ToolName::SUBAGENT)),
                ..SUBAGENT_ONLY
            },
            None => SUBAGENT_ONLY,
        };
        let (report, status, result) = self.converse(
            (task, restriction),
            &model,
            provider.as_mut(),
            prompt,
            transcripts,
            &mut observer,
        );
        let stats = TaskStats {
            turns: report.turns,
            tool_calls: report.calls,
            tokens_in: report.usage.prompt_tokens,
            tokens_out: report.usage.completion_tokens,
            duration_ms: millis(started),
        };
        // Calls of a parallel batch finish in any order: sorting by tool name keeps the envelope
        // the same from one run to the next.
        let mut tallies = observer.tallies;
        tallies.sort_by(|a, b| a.tool.cmp(&b.tool));
        envelope(status, &result, tallies, stats, context)
    }

    /// The child's transcripts (one beside each of the parent's) and the context its envelope
    /// names.
    fn child_context(
        &self,
        task_id: &str,
        parent_call_id: Option<&str>,
    ) -> (Vec<PathBuf>, TaskContext) {
        let transcripts: Vec<PathBuf> = self
            .transcripts
            .iter()
            .map(|parent| child_transcript_path(parent, task_id))
            .collect();
        let context = TaskContext {
            task_id: task_id.to_owned(),
            parent_call_id: parent_call_id.map(str::to_owned),
            transcripts: transcripts
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
        };
        (transcripts, context)
    }

    /// The child's role and API client; the words of the task's failure when either cannot be
    /// had (before any request).
    fn child_parts(
        &self,
        task: &TaskArgs,
        predefined: Option<&PredefinedAgent>,
        model: &ChildModel,
    ) -> Result<(String, Box<dyn Provider>), String> {
        let role = match predefined {
            Some(agent) => predefined_role(agent),
            None => self
                .role(task.subagent_type)
                .map_err(|error| error.to_string())?,
        };
        let provider = (self.providers)(&model.client)
            .map_err(|error| format!("the sub-agent's API client: {error}"))?;
        Ok((role, provider))
    }

    /// The child's system prompt: the parent's context with the child's model, tools and role.
    fn child_prompt(&self, model: &ChildModel, role: String) -> AssembledPrompt {
        assemble_prompt(
            &PromptContext {
                model_name: model.model.clone(),
                tools: ToolSet::Subagent,
                ..self.prompt_context.clone()
            },
            &PromptOverrides {
                role: Some(role),
                system: match self.settings.system_prompt {
                    SystemPromptChoice::None => SystemPromptSource::None,
                    _ => SystemPromptSource::Built,
                },
            },
        )
    }

    /// Runs the child's conversation (its own notes, session and read-only executor) and
    /// returns its report with the task's status and result.
    fn converse(
        &self,
        (task, restriction): (&TaskArgs, Restriction),
        model: &ChildModel,
        provider: &mut dyn Provider,
        prompt: AssembledPrompt,
        transcripts: Vec<PathBuf>,
        observer: &mut RelayObserver,
    ) -> (RunReport, TaskStatus, String) {
        let child_settings = ResolvedSettings {
            base_url: model.client.base_url.clone(),
            model: model.model.clone(),
            max_turns: self.settings.tasks.max_turns,
            ..self.settings.clone()
        };
        let memory = SharedMemory::default();
        let session = Mutex::new(Session::in_memory());
        let mut run = AgentRun {
            provider,
            executor: self.service.subagent(restriction, &session, &memory),
            settings: &child_settings,
            lenient: self.lenient,
            prompt,
            transcript: TranscriptWriter::new(transcripts)
                .with_roots(self.service.sandbox().roots()),
            cancel: self.cancel,
            memory: &memory,
            kind: RunKind::Subagent {
                time_limit: self.settings.tasks.time_limit,
            },
            relay: None,
            compactor: self.compactor(),
            dialect: crate::protocol::dialect::Dialect::Flycode,
            tag_children: None,
        };
        let report = run.run(&task.prompt, observer);
        let (status, result) = outcome(&report, &memory);
        (report, status, result)
    }
}

impl TaskRunner for Tasks<'_> {
    fn run_task(
        &self,
        task: &TaskArgs,
        parent_call_id: Option<&str>,
    ) -> Result<ToolOutput, ToolError> {
        // A name that does not lead to an agent fails before the quota is touched.
        let predefined = task
            .name
            .as_deref()
            .map(|name| find_agent(&self.service.limits().places, name))
            .transpose()
            .map_err(predefined_error)?;
        let number = self.claim()?;
        let task_id = format!("task-{number}");
        let envelope = self.run_child(task, predefined.as_ref(), &task_id, parent_call_id);
        let output = ToolOutput {
            body: Some(envelope.body()),
            fields: vec![("status".to_owned(), envelope.status.as_str().to_owned())],
            data: envelope.to_json(),
            continue_hint: None,
            kept: None,
        };
        let (code, message, hint) = match envelope.status {
            TaskStatus::Ok | TaskStatus::Partial => return Ok(output),
            TaskStatus::Failed => (
                ErrorCode::TaskFailed,
                format!(
                    "sub-agent {task_id} failed: {}",
                    first_line(&envelope.data.result)
                ),
                "do the work directly; start the task again only if the failure above can pass (an API outage), not for a setting the user must fix",
            ),
            TaskStatus::Cancelled => (
                ErrorCode::Cancelled,
                format!("sub-agent {task_id} was stopped: the user pressed Ctrl-C"),
                "wait for the user",
            ),
        };
        let mut error = ToolError::new(code, message, Some(hint));
        error.output = Some(Box::new(output));
        Err(error)
    }
}

/// The role of a predefined agent's sub-agent: its text, then the tools it may use when it
/// names them.
fn predefined_role(agent: &PredefinedAgent) -> String {
    match &agent.tools {
        None => agent.role.clone(),
        Some(_) => {
            let tools: Vec<&str> = granted_tools(agent, &ToolName::SUBAGENT)
                .iter()
                .map(|tool| tool.as_str())
                .collect();
            format!(
                "{}\n\nThe tools you may use: {}. Other calls are refused.",
                agent.role,
                tools.join(", ")
            )
        }
    }
}

/// The call's error for a predefined agent that cannot be used.
fn predefined_error(error: PredefinedError) -> ToolError {
    let code = match error {
        PredefinedError::Unknown { .. } => ErrorCode::NotFound,
        PredefinedError::Untrusted { .. } => ErrorCode::DeniedByPolicy,
        PredefinedError::Broken { .. } => ErrorCode::TaskFailed,
    };
    ToolError::new(
        code,
        format!("agent.task was not run: {error}"),
        Some("name one of the available predefined agents, or leave name out"),
    )
}

/// How a child's run ended, as the envelope says it, and its result.
fn outcome(report: &RunReport, memory: &SharedMemory) -> (TaskStatus, String) {
    let produced = report
        .answer
        .clone()
        .filter(|text| !text.trim().is_empty())
        .or_else(|| {
            let notes = memory.snapshot().notes;
            (!notes.is_empty()).then(|| {
                let list: Vec<String> = notes.iter().map(|note| format!("- {note}")).collect();
                format!("Notes the sub-agent saved:\n{}", list.join("\n"))
            })
        });
    let partial = |why: &str| {
        let text = match &produced {
            Some(text) => format!("{text}\n\n[flycode: the sub-agent did not finish: {why}]"),
            None => format!("[flycode: the sub-agent produced no result before it stopped: {why}]"),
        };
        (TaskStatus::Partial, text)
    };
    match &report.ending {
        RunEnding::Completed => (TaskStatus::Ok, report.answer.clone().unwrap_or_default()),
        RunEnding::Cancelled => (
            TaskStatus::Cancelled,
            "the user stopped the run (Ctrl-C) before the sub-agent finished".to_owned(),
        ),
        RunEnding::ClientFailed(error) => (
            TaskStatus::Failed,
            format!("the sub-agent's model API failed: {error}"),
        ),
        RunEnding::Incomplete(why) => partial(&format!(
            "{why}, and its last turn ended without agent.complete"
        )),
        RunEnding::EmptyReply(reason) => partial(&format!(
            "its model sent empty replies (finish_reason {reason})"
        )),
        RunEnding::TooManyViolations(detail) => {
            partial(&format!("too many invalid replies: {detail}"))
        }
        RunEnding::MaxTurns => partial("it reached its turn limit"),
        RunEnding::Answered => partial("it answered without agent.complete"),
    }
}

fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A child's observer: every event goes to the parent tagged with the task, and its calls are
/// counted per tool for the envelope.
struct RelayObserver {
    relay: Sender<RunEvent>,
    task_id: String,
    parent_call_id: Option<String>,
    tallies: Vec<ToolTally>,
}

impl RunObserver for RelayObserver {
    fn on_event(&mut self, event: &RunEvent) {
        if let RunEvent::CallFinished { tool, ok, .. } = event {
            let name = tool.as_str();
            let index = match self.tallies.iter().position(|t| t.tool == name) {
                Some(index) => index,
                None => {
                    self.tallies.push(ToolTally {
                        tool: name.to_owned(),
                        calls: 0,
                        errors: 0,
                    });
                    self.tallies.len() - 1
                }
            };
            self.tallies[index].calls += 1;
            self.tallies[index].errors += u32::from(!ok);
        }
        // A parent that stopped listening (its run ended) loses nothing it still needs.
        let _ = self.relay.send(RunEvent::Child(ChildEvent {
            task_id: self.task_id.clone(),
            parent_call_id: self.parent_call_id.clone(),
            event: Box::new(event.clone()),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_transcript_sits_next_to_its_parent() {
        assert_eq!(
            child_transcript_path(Path::new("/s/runs/20260101T000000Z-7.jsonl"), "task-2"),
            Path::new("/s/runs/20260101T000000Z-7.task-2.jsonl")
        );
        assert_eq!(
            child_transcript_path(Path::new("/tmp/run"), "task-1"),
            Path::new("/tmp/run.task-1.jsonl")
        );
    }
}
