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

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ToolError;
use super::tool::{ApprovalClass, BoundCall, Effects, RegisteredTool};
use crate::protocol::{Call, ToolName};

/// Every tool, in the whitelist's order.
pub static REGISTRY: [&dyn RegisteredTool; 26] = [
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
pub fn tool(name: ToolName) -> Option<&'static dyn RegisteredTool> {
    REGISTRY.iter().copied().find(|tool| tool.name() == name)
}

/// Whether `name` only reads (and so may run beside other reads, PROTOCOL.md §13 (The API loop: parallel calls)).
pub fn is_read_only(name: ToolName) -> bool {
    tool(name).is_some_and(|tool| tool.approval() == ApprovalClass::Read)
}

/// A validated call bound to its tool: what the executor decides and runs. Made only here
/// ([`Invocation::new`], [`Invocation::owned`]), each with an [`InvocationId`] of its own, so that
/// a [`Permit`](super::executor::Permit) names the invocation it was decided for and runs no
/// other.
pub struct Invocation<'c> {
    /// The call as it arrived (borrowed, or owned where the invocation outlives the caller's
    /// frame: an MCP call decided on the server's thread and run on a blocking one).
    call: Cow<'c, Call>,
    /// The call bound to its tool, its arguments parsed once.
    bound: Box<dyn BoundCall>,
    /// Which invocation this is.
    id: InvocationId,
}

/// The identity of one [`Invocation`]: unique in the process, never reused. Two invocations
/// of the same call are two identities: a permit answers one decision, not a look-alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvocationId(u64);

impl InvocationId {
    /// The next identity.
    fn next() -> InvocationId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        InvocationId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A call whose tool cannot read its arguments (a schema bug), handed back with the reason.
#[derive(Debug)]
pub struct UnboundCall {
    /// The call.
    pub call: Call,
    /// Why it could not be bound.
    pub error: ToolError,
}

/// Looks the call's tool up and parses its arguments.
fn bind(call: &Call) -> Result<Box<dyn BoundCall>, ToolError> {
    let tool = tool(call.tool).ok_or_else(|| {
        ToolError::new(
            crate::protocol::ErrorCode::UnknownTool,
            format!("{} has no implementation in this flycode", call.tool),
            None,
        )
    })?;
    tool.bind(&call.args)
}

impl<'c> Invocation<'c> {
    /// Looks the call's tool up and parses its arguments.
    pub fn new(call: &'c Call) -> Result<Invocation<'c>, ToolError> {
        Ok(Invocation {
            bound: bind(call)?,
            call: Cow::Borrowed(call),
            id: InvocationId::next(),
        })
    }

    /// The same for a call it takes (not a copy: a 1 MB write's content moves with it).
    pub fn owned(call: Call) -> Result<Invocation<'static>, Box<UnboundCall>> {
        match bind(&call) {
            Ok(bound) => Ok(Invocation {
                bound,
                call: Cow::Owned(call),
                id: InvocationId::next(),
            }),
            Err(error) => Err(Box::new(UnboundCall { call, error })),
        }
    }

    /// The call as it arrived.
    pub fn call(&self) -> &Call {
        &self.call
    }

    /// The call bound to its tool.
    pub fn bound(&self) -> &dyn BoundCall {
        self.bound.as_ref()
    }

    /// Which invocation this is.
    pub fn id(&self) -> InvocationId {
        self.id
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
