//! The tag dialect's sub-agents (PROTOCOL.md §15 (The tag dialect: run)): a `<create_agent>`
//! runs a child of the agent that sent it, depth-first, on the run's model, in the run's one
//! loop ([`AgentRun`] in the tag dialect), within the run's quota (`max_tasks_per_run`, shared
//! with `agent.task`) and the sending agent's own (`max_tasks_per_agent`); the child's
//! `<return>` comes back as a `<child_summary>`. The flycode dialect's `agent.task` is the other
//! door of this layer ([`super::Tasks`]): the same settings, clients, transcripts and count.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use super::Tasks;
use super::envelope::neutralize_calls;
use crate::context::SharedMemory;
use crate::events::{ChildEvent, RunEnding, RunEvent, RunObserver};
use crate::predefined::{PredefinedAgent, PredefinedError, find_agent};
use crate::prompt::AssembledPrompt;
use crate::protocol::dialect::Dialect;
use crate::protocol::tags::{TagError, TagKind};
use crate::protocol::{ErrorCode, ToolName};
use crate::tags::{TagAnswer, child_result};
use crate::transcript::TranscriptWriter;
use crate::turn::{AgentRun, RunKind, TagChildAgents};
use flycode_core::tools::executor::{Executor, Restriction};

/// What every agent of one tag-dialect run shares: the sub-agent layer and the run's system
/// prompt.
pub struct TagTree<'t> {
    /// Settings, clients, Ctrl-C and the run's count of sub-agents.
    pub tasks: &'t Tasks<'t>,
    /// The system prompt every agent of the run gets (a predefined agent's role follows it).
    pub system: String,
}

/// One agent's `<create_agent>`s: whether it may send them, how many it started, where it
/// stands in the tree and where its children are recorded.
pub struct TagChildren<'t> {
    tree: &'t TagTree<'t>,
    may_delegate: bool,
    used: AtomicU32,
    depth: usize,
    transcripts: Vec<PathBuf>,
}

impl<'t> TagChildren<'t> {
    /// The children of the run's top agent, recorded next to `transcripts`.
    pub fn top(tree: &'t TagTree<'t>, transcripts: Vec<PathBuf>) -> TagChildren<'t> {
        TagChildren {
            tree,
            may_delegate: true,
            used: AtomicU32::new(0),
            depth: 0,
            transcripts,
        }
    }
}

impl TagChildAgents for TagChildren<'_> {
    /// Runs `task` as a child of the agent whose executor is `parent` (the predefined agent
    /// `name`, if given) to its end, its events passed on to `observer` under its task id, and
    /// answers with its `<child_summary>`.
    fn run_child(
        &self,
        parent: &Executor<'_>,
        (task, name, id): (&str, Option<&str>, &str),
        observer: &mut dyn RunObserver,
    ) -> TagAnswer {
        if !self.may_delegate {
            let error = TagError::new(
                ErrorCode::DeniedByPolicy,
                "<create_agent> was not run: this predefined agent's file does not name agent.task among its tools".into(),
                "Do the work with the tools your role names, then <return>.".into(),
            );
            return TagAnswer::refused(TagKind::CreateAgent, "", &error);
        }
        // A name that leads to no agent fails before the quota is touched.
        let predefined = match name.map(|name| predefined(parent, name)).transpose() {
            Ok(predefined) => predefined,
            Err(error) => return TagAnswer::refused(TagKind::CreateAgent, "", &error),
        };
        let number = match self.claim() {
            Ok(number) => number,
            Err(error) => return TagAnswer::refused(TagKind::CreateAgent, "", &error),
        };
        let task_id = format!("task-{number}");
        let title: String = first_line(task).chars().take(60).collect();
        observer.on_event(&RunEvent::CallStarted {
            id: Some(id.to_owned()),
            tool: ToolName::AgentTask,
            subject: format!("{task_id}: {title}"),
            command: format!("<create_agent> {title}"),
            runs_program: false,
        });
        let started = std::time::Instant::now();
        let (ok, summary) = self.converse(parent, task, predefined.as_ref(), &task_id, observer);
        observer.on_event(&RunEvent::CallFinished {
            id: Some(id.to_owned()),
            tool: ToolName::AgentTask,
            ok,
            code: (!ok).then(|| ErrorCode::TaskFailed.as_str().to_owned()),
            summary: format!("{task_id}: {}", first_line(&summary)),
            advice: None,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        // The child's words go to its parent as background: no call form in them runs.
        TagAnswer {
            result: child_result(ok, &neutralize_calls(&summary), name),
            ok,
            execution: None,
        }
    }
}

impl TagChildren<'_> {
    /// The child's conversation, to its `<return>` or until it stops: whether it returned, and
    /// its summary or why it stopped.
    fn converse(
        &self,
        parent: &Executor<'_>,
        task: &str,
        predefined: Option<&PredefinedAgent>,
        task_id: &str,
        observer: &mut dyn RunObserver,
    ) -> (bool, String) {
        let tasks = self.tree.tasks;
        let model = tasks.model(flycode_core::tools::agent::ModelChoice::Main);
        let mut provider = match (tasks.providers)(&model.client) {
            Ok(provider) => provider,
            Err(error) => return (false, format!("the sub-agent's API client: {error}")),
        };
        // A predefined agent's tools are those its file names that its parent may use too.
        let restriction = predefined
            .and_then(|agent| agent.tools.clone())
            .map(|tools| Restriction {
                tools: std::borrow::Cow::Owned(tools),
                reason: "this predefined agent's file names the tools it may use",
                hint: "Use the tools your role names, or <return> and say what is left to do.",
            });
        let memory = SharedMemory::default();
        let executor = parent.tag_agent(restriction, &memory);
        let system = match predefined {
            Some(agent) => predefined_system(&self.tree.system, agent, &executor),
            None => self.tree.system.clone(),
        };
        let transcripts: Vec<PathBuf> = self
            .transcripts
            .iter()
            .map(|parent| super::child_transcript_path(parent, task_id))
            .collect();
        let grandchildren = TagChildren {
            tree: self.tree,
            may_delegate: executor.allows(ToolName::AgentTask),
            used: AtomicU32::new(0),
            depth: self.depth + 1,
            transcripts: transcripts.clone(),
        };
        let mut run = AgentRun {
            provider: provider.as_mut(),
            transcript: TranscriptWriter::new(transcripts).with_roots(executor.sandbox().roots()),
            executor,
            settings: tasks.settings,
            lenient: tasks.lenient,
            prompt: AssembledPrompt {
                system: Some(system),
                role_definition: String::new(),
            },
            cancel: tasks.cancel,
            memory: &memory,
            // Every agent of the tag tree works until its `<return>`.
            kind: RunKind::Main,
            relay: None,
            compactor: tasks.compactor(),
            dialect: Dialect::Tags,
            tag_children: Some(&grandchildren),
        };
        let mut relayed = ChildObserver {
            parent: observer,
            task_id,
        };
        let report = run.run(task, &mut relayed);
        match report.ending {
            RunEnding::Answered => (true, report.answer.unwrap_or_default()),
            RunEnding::Cancelled => (false, "the sub-agent was stopped (Ctrl-C)".to_owned()),
            ending => (
                false,
                format!(
                    "the sub-agent stopped without <return>: {}",
                    stopped_because(&ending, tasks.settings.max_turns)
                ),
            ),
        }
    }

    /// The next sub-agent's number, or which quota is spent.
    fn claim(&self) -> Result<u32, TagError> {
        let limits = self.tree.tasks.settings.tasks;
        let mut started = self
            .tree
            .tasks
            .started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = self.used.load(Ordering::SeqCst);
        let spent = if *started >= limits.per_run {
            Some((
                "[global quota limit] the run's",
                limits.per_run,
                "max_tasks_per_run",
            ))
        } else if used >= limits.per_agent {
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
        self.used.store(used + 1, Ordering::SeqCst);
        Ok(*started)
    }
}

/// Why an agent of the tree stopped without `<return>`, in words.
fn stopped_because(ending: &RunEnding, max_turns: u32) -> String {
    match ending {
        RunEnding::MaxTurns => {
            format!("the agent used its {max_turns} turns without <return> (max_turns)")
        }
        RunEnding::TooManyViolations(detail) => detail.clone(),
        RunEnding::ClientFailed(error) => format!("the API failed: {error}"),
        RunEnding::EmptyReply(reason) => format!("an empty reply (finish reason {reason})"),
        other => other.name().to_owned(),
    }
}

/// The predefined agent `name` (PROTOCOL.md §9 (Hints and predefined agents)), or the error
/// that lists the ones there are.
fn predefined(executor: &Executor<'_>, name: &str) -> Result<PredefinedAgent, TagError> {
    find_agent(&executor.limits().places, name).map_err(|error| {
        let code = match error {
            PredefinedError::Unknown { .. } => ErrorCode::NotFound,
            PredefinedError::Untrusted { .. } | PredefinedError::Broken { .. } => {
                ErrorCode::InvalidArgs
            }
        };
        TagError::new(
            code,
            format!("<create_agent> was not run: {error}"),
            "Name one of the available agents, or leave name out for a general sub-agent.".into(),
        )
    })
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

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or_default()
}

/// A child's observer: its events go to its parent's observer as they happen, under its task
/// id (a grandchild's under both, `task-1/task-2`).
struct ChildObserver<'o> {
    parent: &'o mut dyn RunObserver,
    task_id: &'o str,
}

impl RunObserver for ChildObserver<'_> {
    fn on_event(&mut self, event: &RunEvent) {
        let child = match event {
            RunEvent::Child(inner) => ChildEvent {
                task_id: format!("{}/{}", self.task_id, inner.task_id),
                parent_call_id: inner.parent_call_id.clone(),
                event: inner.event.clone(),
            },
            event => ChildEvent {
                task_id: self.task_id.to_owned(),
                parent_call_id: None,
                event: Box::new(event.clone()),
            },
        };
        self.parent.on_event(&RunEvent::Child(child));
    }
}
