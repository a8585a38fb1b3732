//! The agent's own tools (`flycode run` only): `agent.todo` and `agent.note`, its TODO list and
//! notes; `agent.complete`, a sub-agent's result; and `agent.task` ([`task`]), which starts a
//! sub-agent. The first three change no file: they write to the run's [`Notebook`], which the
//! executor is given by the loop. Anywhere else (chat front ends) there is no notebook, and they
//! are `unknown_tool`.

pub mod notebook_args;
pub mod task;
pub mod task_args;

use std::path::PathBuf;

use serde_json::Value;

use super::tool::{ApprovalClass, Effects, Tool, ToolContext, first_line, plural};
pub use super::tool::{Notebook, TaskRunner};
use super::{ToolError, ToolOutput};
use crate::protocol::{ErrorCode, ToolName};
pub use notebook_args::{NoteArgs, TodoArgItem, TodoArgs};
pub use task::AgentTask;
pub use task_args::{ModelChoice, SubagentType, TaskArgs};

/// `agent.complete` in the registry.
pub struct AgentComplete;

/// The arguments of `agent.complete`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompleteArgs {
    /// The sub-agent's result.
    pub result: String,
}

impl Tool for AgentComplete {
    type Args = CompleteArgs;
    const NAME: ToolName = ToolName::AgentComplete;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a CompleteArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &CompleteArgs, _roots: &[PathBuf]) -> String {
        first_line(&args.result)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        body_line(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &CompleteArgs) -> Result<ToolOutput, ToolError> {
        if args.result.trim().is_empty() {
            return Err(ToolError::new(
                ErrorCode::InvalidArgs,
                "agent.complete needs a result that is not blank".to_owned(),
                Some("call agent.complete again with what you found"),
            ));
        }
        notebook(context, Self::NAME)?
            .complete(&args.result)
            .map(saved)
    }
}

/// `agent.todo` in the registry.
pub struct AgentTodo;

/// `agent.note` in the registry.
pub struct AgentNote;

impl Tool for AgentTodo {
    type Args = TodoArgs;
    const NAME: ToolName = ToolName::AgentTodo;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a TodoArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &TodoArgs, _roots: &[PathBuf]) -> String {
        plural(args.items.len(), "item")
    }

    fn summary(&self, output: &ToolOutput) -> String {
        body_line(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &TodoArgs) -> Result<ToolOutput, ToolError> {
        notebook(context, Self::NAME)?
            .replace_todos(args)
            .map(saved)
    }
}

impl Tool for AgentNote {
    type Args = NoteArgs;
    const NAME: ToolName = ToolName::AgentNote;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a NoteArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &NoteArgs, _roots: &[PathBuf]) -> String {
        first_line(&args.note)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        body_line(output)
    }

    fn run(&self, context: &ToolContext<'_>, args: &NoteArgs) -> Result<ToolOutput, ToolError> {
        notebook(context, Self::NAME)?.add_note(args).map(saved)
    }
}

fn notebook<'c>(context: &ToolContext<'c>, tool: ToolName) -> Result<&'c dyn Notebook, ToolError> {
    context.notebook.ok_or_else(|| {
        ToolError::new(
            ErrorCode::UnknownTool,
            format!("{tool} keeps the agent's own notes and exists only in flycode run"),
            Some("use the file-system and process tools here"),
        )
    })
}

fn saved(summary: String) -> ToolOutput {
    ToolOutput {
        body: Some(format!("{summary}\n")),
        fields: Vec::new(),
        data: Value::String(summary),
        continue_hint: None,
        kept: None,
    }
}

fn body_line(output: &ToolOutput) -> String {
    output
        .body
        .as_deref()
        .map(first_line)
        .unwrap_or_else(|| "Saved".to_owned())
}
