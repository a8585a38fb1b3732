//! The registry: every tool describes itself, and everything that needs to know about a tool
//! (policy, the stale-read guard, the session, the audit log, the terminal display, the agent
//! loop) asks it instead of matching on its name.
//!
//! A tool is one file holding its typed arguments and a [`Tool`](super::tool::Tool)
//! implementation (see [`super::tool`]): its name, what it reads, writes and runs ([`Effects`]),
//! its [`ApprovalClass`], the files the stale-read guard covers, what it changes in the session,
//! its one-line subject and outcome summary, and `run`. Arguments are parsed once, right after
//! schema validation ([`RegisteredTool::bind`]), and every question is answered from the typed
//! value by the [`BoundCall`] that results.
//!
//! Adding a tool: its schema in `protocol/schemas/`, its name in the protocol's whitelist
//! (`protocol/tool_name.rs`, the layer beneath the tools that parses calls), one new file with the
//! `Tool` implementation, and one line in [`REGISTRY`].

use std::path::PathBuf;

use super::ToolError;
use super::tool::{ApprovalClass, BoundCall, Effects, RegisteredTool};
use crate::protocol::{Call, ToolName};

/// Every tool, in the whitelist's order.
pub(crate) static REGISTRY: [&dyn RegisteredTool; 26] = [
    &super::fs::ls::FsLs,
    &super::fs::mkdir::FsMkdir,
    &super::fs::read::FsRead,
    &super::fs::search::FsSearch,
    &super::fs::write::FsWrite,
    &super::fs::rm::FsRm,
    &super::fs::mv::FsMv,
    &super::fs::chmod::FsChmod,
    &super::fs::write_batch::FsWriteBatch,
    &super::fs::diff::FsDiff,
    &super::process::ProcessRun,
    &super::process::ShellExec,
    &super::fs::read_many::FsReadMany,
    &super::fs::edit::FsEdit,
    &super::memory::MemoryQuery,
    &super::hint::HintLoad,
    &super::hint::HintUnload,
    &super::hint::HintResource,
    &super::jobs::tools::JobLog,
    &super::jobs::tools::JobList,
    &super::jobs::tools::JobInput,
    &super::jobs::tools::JobKill,
    &super::agent::AgentTodo,
    &super::agent::AgentNote,
    &super::agent::AgentTask,
    &super::agent::AgentComplete,
];

/// The registered tool named `name` (every whitelisted tool is; a test holds it).
pub(crate) fn tool(name: ToolName) -> Option<&'static dyn RegisteredTool> {
    REGISTRY.iter().copied().find(|tool| tool.name() == name)
}

/// Whether `name` only reads (and so may run beside other reads, PROTOCOL.md §13 (The API loop: parallel calls)).
pub(crate) fn is_read_only(name: ToolName) -> bool {
    tool(name).is_some_and(|tool| tool.approval() == ApprovalClass::Read)
}

/// A validated call bound to its tool: what the executor runs.
pub struct Invocation<'c> {
    /// The call as it arrived.
    pub call: &'c Call,
    /// The call bound to its tool, its arguments parsed once.
    pub bound: Box<dyn BoundCall>,
}

impl<'c> Invocation<'c> {
    /// Looks the call's tool up and parses its arguments.
    pub fn new(call: &'c Call) -> Result<Invocation<'c>, ToolError> {
        let tool = tool(call.tool).ok_or_else(|| {
            ToolError::new(
                crate::protocol::ErrorCode::UnknownTool,
                format!("{} has no implementation in this flycode", call.tool),
                None,
            )
        })?;
        let bound = tool.bind(&call.args)?;
        Ok(Invocation { call, bound })
    }

    /// The call's tool.
    pub fn tool(&self) -> &'static dyn RegisteredTool {
        self.bound.tool()
    }

    /// See [`Tool::effects`](super::tool::Tool::effects).
    pub fn effects(&self) -> Effects<'_> {
        self.bound.effects()
    }

    /// See [`Tool::subject`](super::tool::Tool::subject).
    pub fn subject(&self, roots: &[PathBuf]) -> String {
        self.bound.subject(roots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolSet;

    #[test]
    fn every_whitelisted_tool_is_registered_once_in_order() {
        let names: Vec<ToolName> = REGISTRY.iter().map(|tool| tool.name()).collect();
        assert_eq!(names, ToolSet::All.tools());
    }

    #[test]
    fn the_read_only_tools_are_those_of_the_contract() {
        let read_only: Vec<ToolName> = REGISTRY
            .iter()
            .map(|tool| tool.name())
            .filter(|&name| is_read_only(name))
            .collect();
        assert_eq!(
            read_only,
            [
                ToolName::FsLs,
                ToolName::FsRead,
                ToolName::FsSearch,
                ToolName::FsDiff,
                ToolName::FsReadMany,
                ToolName::MemoryQuery,
                ToolName::HintResource,
                ToolName::JobLog,
                ToolName::JobList,
                ToolName::AgentTask,
            ]
        );
    }

    #[test]
    fn the_schemas_mark_exactly_the_read_only_tools() {
        for tool in REGISTRY {
            assert_eq!(
                crate::protocol::schema::tool_schema(tool.name()).is_read_only,
                is_read_only(tool.name()),
                "{}",
                tool.name()
            );
        }
    }
}
