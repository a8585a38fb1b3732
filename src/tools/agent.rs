//! `agent.todo` and `agent.note`: the agent's own TODO list and notes (`flycode run` only). They
//! change no file; they write to the run's [`Notebook`], which the executor is given by the loop.
//! Anywhere else (chat front ends) there is no notebook, and they are `unknown_tool`.

use std::path::PathBuf;

use serde_json::{Map, Value};

pub use super::tool::Notebook;
use super::tool::{ApprovalClass, Effects, Tool, ToolContext, first_line, plural};
use super::{ToolError, ToolOutput};
use crate::protocol::{ErrorCode, ToolName};

/// `agent.todo` in the registry.
pub struct AgentTodo;

/// `agent.note` in the registry.
pub struct AgentNote;

impl Tool for AgentTodo {
    type Args = Map<String, Value>;
    const NAME: ToolName = ToolName::AgentTodo;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a Map<String, Value>) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &Map<String, Value>, _roots: &[PathBuf]) -> String {
        let count = args
            .get("items")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        plural(count, "item")
    }

    fn summary(&self, output: &ToolOutput) -> String {
        body_line(output)
    }

    fn run(
        &self,
        context: &ToolContext<'_>,
        args: &Map<String, Value>,
    ) -> Result<ToolOutput, ToolError> {
        notebook(context, Self::NAME)?
            .replace_todos(args)
            .map(saved)
    }
}

impl Tool for AgentNote {
    type Args = Map<String, Value>;
    const NAME: ToolName = ToolName::AgentNote;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a Map<String, Value>) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &Map<String, Value>, _roots: &[PathBuf]) -> String {
        first_line(args.get("note").and_then(Value::as_str).unwrap_or_default())
    }

    fn summary(&self, output: &ToolOutput) -> String {
        body_line(output)
    }

    fn run(
        &self,
        context: &ToolContext<'_>,
        args: &Map<String, Value>,
    ) -> Result<ToolOutput, ToolError> {
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
    }
}

fn body_line(output: &ToolOutput) -> String {
    output
        .body
        .as_deref()
        .map(first_line)
        .unwrap_or_else(|| "Saved".to_owned())
}
