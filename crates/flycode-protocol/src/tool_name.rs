//! The whitelist of tool names: a tool's name string is spelled here and nowhere else.

use std::fmt;

use serde::{Serialize, Serializer};

/// One tool of the whitelist (PROTOCOL.md §9 (Tools)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolName {
    /// `fs.ls`
    FsLs,
    /// `fs.mkdir`
    FsMkdir,
    /// `fs.read`
    FsRead,
    /// `fs.search`
    FsSearch,
    /// `fs.write`
    FsWrite,
    /// `fs.rm`
    FsRm,
    /// `fs.mv`
    FsMv,
    /// `fs.chmod`
    FsChmod,
    /// `fs.writeBatch`
    FsWriteBatch,
    /// `fs.diff`
    FsDiff,
    /// `process.run`
    ProcessRun,
    /// `shell.exec`
    ShellExec,
    /// `fs.readMany`: several files in one call (the extended set).
    FsReadMany,
    /// `fs.edit`: exact-text replacements in one file (the extended set).
    FsEdit,
    /// `memory.query`: what earlier sessions said about a question (the extended set).
    MemoryQuery,
    /// `hint.load`: a hint folder's `HINT.md` joins the context (the extended set).
    HintLoad,
    /// `hint.unload`: a loaded hint leaves the context (the extended set).
    HintUnload,
    /// `hint.resource`: a file of a loaded hint (the extended set).
    HintResource,
    /// `job.log`: lines of a background job's output (the extended set).
    JobLog,
    /// `job.list`: the session's background jobs (the extended set).
    JobList,
    /// `job.input`: write to a background job's stdin (the extended set).
    JobInput,
    /// `job.kill`: end a background job and everything it started (the extended set).
    JobKill,
    /// `agent.todo`: replace the agent's TODO list (`flycode run` only).
    AgentTodo,
    /// `agent.note`: save a piece of useful information (`flycode run` only).
    AgentNote,
    /// `agent.task`: hand a read-only piece of work to a sub-agent (`flycode run` only).
    AgentTask,
    /// `agent.complete`: a sub-agent's last call, its result (sub-agents only).
    AgentComplete,
}

/// Which tools a reader accepts (PROTOCOL.md §9 (Tools)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ToolSet {
    /// The twelve tools of PROTOCOL.md §9 (Tools), exactly the seed protocol's whitelist: the default of
    /// the chat front ends (`prompt`, `check`, `exec`, `watch`, `validate`).
    #[default]
    Seed,
    /// The twelve plus `fs.readMany`, `fs.edit`, `memory.query`, the hint tools and the job
    /// tools (`job.log`, `job.list`, `job.input`, `job.kill`) (`--tools extended`).
    Extended,
    /// The extended set plus the agent's own tools (`agent.todo`, `agent.note`, `agent.task`):
    /// `flycode run` (its default, and `--tools extended`).
    Agent,
    /// The seed set plus the agent's own tools: `flycode run --tools seed`.
    SeedAgent,
    /// What a sub-agent is offered (PROTOCOL.md §13 (The API loop: sub-agents)): the read-only file tools, `job.log`,
    /// `job.list`, `agent.todo`, `agent.note` and `agent.complete`.
    Subagent,
    /// Every tool: what a sub-agent's calls are read against, so that a call of a tool it is not
    /// offered is refused by its executor (`denied_by_policy`), not misread as unknown.
    All,
}

impl ToolSet {
    /// The tools of the set, in prompt order.
    pub fn tools(self) -> &'static [ToolName] {
        match self {
            ToolSet::Seed => &ToolName::WITH_AGENT_TOOLS[..12],
            ToolSet::Extended => &ToolName::WITH_AGENT_TOOLS[..ToolName::EXTENDED.len()],
            // The extended set, then agent.todo, agent.note and agent.task (agent.complete is a
            // sub-agent's).
            ToolSet::Agent => &ToolName::WITH_AGENT_TOOLS[..ToolName::EXTENDED.len() + 3],
            ToolSet::SeedAgent => &ToolName::SEED_AGENT,
            ToolSet::Subagent => &ToolName::SUBAGENT,
            ToolSet::All => &ToolName::WITH_AGENT_TOOLS,
        }
    }

    /// Whether `tool` belongs to the set.
    pub fn contains(self, tool: ToolName) -> bool {
        self.tools().contains(&tool)
    }

    /// The set's name as `--tools` and `flycode.toml` spell it (`seed`, `extended`); the agent
    /// set is `flycode run`'s and has no switch.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSet::Seed => "seed",
            ToolSet::Extended => "extended",
            ToolSet::Agent => "agent",
            ToolSet::SeedAgent => "seed agent",
            ToolSet::Subagent => "sub-agent",
            ToolSet::All => "all",
        }
    }

    /// The set `flycode run` offers its main agent when the chat set `self` is chosen: the
    /// agent's own tools added (PROTOCOL.md §13 (The API loop: `flycode run`)).
    pub fn with_agent_tools(self) -> ToolSet {
        match self {
            ToolSet::Seed | ToolSet::SeedAgent => ToolSet::SeedAgent,
            ToolSet::Extended | ToolSet::Agent => ToolSet::Agent,
            ToolSet::Subagent | ToolSet::All => self,
        }
    }

    /// The chat set called `name` (`seed` or `extended`).
    pub fn from_name(name: &str) -> Option<ToolSet> {
        match name {
            "seed" => Some(ToolSet::Seed),
            "extended" => Some(ToolSet::Extended),
            _ => None,
        }
    }
}

impl ToolName {
    /// The seed whitelist, in the order the contract and the prompt list them.
    pub const ALL: [ToolName; 12] = ToolName::first_of_all::<12>();

    /// The extended set: the seed whitelist, then `fs.readMany`, `fs.edit`, `memory.query`,
    /// the hint tools and the job tools.
    pub const EXTENDED: [ToolName; 22] = ToolName::first_of_all::<22>();

    /// The tools of background jobs (PROTOCOL.md §9 (Tools: background jobs)).
    pub const JOB_TOOLS: [ToolName; 4] = [
        ToolName::JobLog,
        ToolName::JobList,
        ToolName::JobInput,
        ToolName::JobKill,
    ];

    /// The agent's own tools, known to `flycode run` only (`agent.complete` to its sub-agents
    /// only).
    pub const AGENT_TOOLS: [ToolName; 4] = [
        ToolName::AgentTodo,
        ToolName::AgentNote,
        ToolName::AgentTask,
        ToolName::AgentComplete,
    ];

    /// The tools that change only what the conversation's context holds, never a file or a
    /// program: not risky, though they are not read-only.
    pub const CONTEXT_TOOLS: [ToolName; 2] = [ToolName::HintLoad, ToolName::HintUnload];

    /// What a sub-agent may call (PROTOCOL.md §13 (The API loop: sub-agents)), in prompt order.
    pub const SUBAGENT: [ToolName; 14] = [
        ToolName::FsLs,
        ToolName::FsRead,
        ToolName::FsReadMany,
        ToolName::FsSearch,
        ToolName::FsDiff,
        ToolName::MemoryQuery,
        ToolName::HintLoad,
        ToolName::HintUnload,
        ToolName::HintResource,
        ToolName::JobLog,
        ToolName::JobList,
        ToolName::AgentTodo,
        ToolName::AgentNote,
        ToolName::AgentComplete,
    ];

    /// `flycode run --tools seed`: the seed whitelist, then the main agent's own tools.
    pub const SEED_AGENT: [ToolName; 15] = [
        ToolName::FsLs,
        ToolName::FsMkdir,
        ToolName::FsRead,
        ToolName::FsSearch,
        ToolName::FsWrite,
        ToolName::FsRm,
        ToolName::FsMv,
        ToolName::FsChmod,
        ToolName::FsWriteBatch,
        ToolName::FsDiff,
        ToolName::ProcessRun,
        ToolName::ShellExec,
        ToolName::AgentTodo,
        ToolName::AgentNote,
        ToolName::AgentTask,
    ];

    /// Every tool: the extended set followed by the agent's own tools.
    pub const WITH_AGENT_TOOLS: [ToolName; 26] = [
        ToolName::FsLs,
        ToolName::FsMkdir,
        ToolName::FsRead,
        ToolName::FsSearch,
        ToolName::FsWrite,
        ToolName::FsRm,
        ToolName::FsMv,
        ToolName::FsChmod,
        ToolName::FsWriteBatch,
        ToolName::FsDiff,
        ToolName::ProcessRun,
        ToolName::ShellExec,
        ToolName::FsReadMany,
        ToolName::FsEdit,
        ToolName::MemoryQuery,
        ToolName::HintLoad,
        ToolName::HintUnload,
        ToolName::HintResource,
        ToolName::JobLog,
        ToolName::JobList,
        ToolName::JobInput,
        ToolName::JobKill,
        ToolName::AgentTodo,
        ToolName::AgentNote,
        ToolName::AgentTask,
        ToolName::AgentComplete,
    ];

    const fn first_of_all<const N: usize>() -> [ToolName; N] {
        let mut first = [ToolName::FsLs; N];
        let mut index = 0;
        while index < N {
            first[index] = ToolName::WITH_AGENT_TOOLS[index];
            index += 1;
        }
        first
    }

    /// The smallest set holding the tool: what a reader of another set names in its hint.
    pub fn home_set(self) -> ToolSet {
        [
            ToolSet::Seed,
            ToolSet::Extended,
            ToolSet::Agent,
            ToolSet::Subagent,
        ]
        .into_iter()
        .find(|set| set.contains(self))
        .unwrap_or(ToolSet::All)
    }

    /// The name as the model writes it, e.g. `fs.read`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::FsLs => "fs.ls",
            ToolName::FsMkdir => "fs.mkdir",
            ToolName::FsRead => "fs.read",
            ToolName::FsSearch => "fs.search",
            ToolName::FsWrite => "fs.write",
            ToolName::FsRm => "fs.rm",
            ToolName::FsMv => "fs.mv",
            ToolName::FsChmod => "fs.chmod",
            ToolName::FsWriteBatch => "fs.writeBatch",
            ToolName::FsDiff => "fs.diff",
            ToolName::ProcessRun => "process.run",
            ToolName::ShellExec => "shell.exec",
            ToolName::FsReadMany => "fs.readMany",
            ToolName::FsEdit => "fs.edit",
            ToolName::MemoryQuery => "memory.query",
            ToolName::HintLoad => "hint.load",
            ToolName::HintUnload => "hint.unload",
            ToolName::HintResource => "hint.resource",
            ToolName::JobLog => "job.log",
            ToolName::JobList => "job.list",
            ToolName::JobInput => "job.input",
            ToolName::JobKill => "job.kill",
            ToolName::AgentTodo => "agent.todo",
            ToolName::AgentNote => "agent.note",
            ToolName::AgentTask => "agent.task",
            ToolName::AgentComplete => "agent.complete",
        }
    }

    /// The tool of any set with exactly this name (case-sensitive, no look-alikes).
    pub fn from_name(name: &str) -> Option<ToolName> {
        ToolName::from_name_in(name, ToolSet::All)
    }

    /// The tool of `set` with exactly this name.
    pub fn from_name_in(name: &str, set: ToolSet) -> Option<ToolName> {
        set.tools()
            .iter()
            .copied()
            .find(|tool| tool.as_str() == name)
    }

    /// The function name of native tool calling and of MCP (PROTOCOL.md §13 (The API loop:
    /// calling modes), §14 (The MCP server)): snake case, dots and capitals turned into
    /// underscores, so it matches `^[a-zA-Z0-9_-]{1,64}$`: `fs_read`, `fs_write_batch`,
    /// `process_run`. Both doors spell a tool the same.
    pub fn native_name(self) -> String {
        let mut name = String::with_capacity(self.as_str().len() + 2);
        for c in self.as_str().chars() {
            if c == '.' {
                name.push('_');
            } else if c.is_ascii_uppercase() {
                name.push('_');
                name.push(c.to_ascii_lowercase());
            } else {
                name.push(c);
            }
        }
        name
    }

    /// The name an MCP client sees: the same as [`ToolName::native_name`].
    pub fn mcp_name(self) -> String {
        self.native_name()
    }

    /// The spelling native calls had before they matched MCP's (`fs_writeBatch`): dots made
    /// underscores, capitals kept. Still accepted back from a model or an old transcript.
    fn old_native_name(self) -> String {
        self.as_str().replace('.', "_")
    }

    /// The tool of `set` whose MCP name is exactly `name` (see [`ToolName::mcp_name`]).
    pub fn from_mcp_name(name: &str, set: ToolSet) -> Option<ToolName> {
        set.tools()
            .iter()
            .copied()
            .find(|tool| tool.mcp_name() == name)
    }

    /// The tool of `set` with this protocol name (`fs.read`) or native name (`fs_read`,
    /// `fs_write_batch`, or the older `fs_writeBatch`).
    pub fn from_native_name(name: &str, set: ToolSet) -> Option<ToolName> {
        set.tools().iter().copied().find(|tool| {
            tool.as_str() == name || tool.native_name() == name || tool.old_native_name() == name
        })
    }

    /// The tool a name common among other agents' tools means (`list.files`, folded): what a
    /// model trained on them writes.
    fn usual_name(folded: &str) -> Option<ToolName> {
        Some(match folded {
            "list.files" | "list.dir" | "list.directory" | "ls" | "listdir" | "list" => {
                ToolName::FsLs
            }
            "read.file" | "cat" | "open.file" | "view.file" | "read" => ToolName::FsRead,
            "write.file" | "create.file" | "save.file" | "write" => ToolName::FsWrite,
            "edit.file" | "replace.in.file" | "str.replace" | "edit" => ToolName::FsEdit,
            "search" | "grep" | "search.files" | "find.in.files" => ToolName::FsSearch,
            "run.command" | "execute.command" | "bash" | "shell" | "run.shell" | "exec"
            | "terminal" => ToolName::ShellExec,
            "delete.file" | "remove.file" | "rm" => ToolName::FsRm,
            "move.file" | "rename.file" | "mv" => ToolName::FsMv,
            "mkdir" | "create.directory" | "make.dir" => ToolName::FsMkdir,
            _ => return None,
        })
    }

    /// The whitelisted name closest to `name`, for a "did you mean" hint; `None` when nothing is
    /// reasonably close.
    pub fn nearest(name: &str, set: ToolSet) -> Option<ToolName> {
        let folded = name
            .trim()
            .to_lowercase()
            .replace(['_', '-', '/', ':'], ".");
        // The names other agents' tools have, which models trained on them write.
        if let Some(tool) = Self::usual_name(&folded).filter(|tool| set.tools().contains(tool)) {
            return Some(tool);
        }
        set.tools()
            .iter()
            .copied()
            .map(|tool| {
                let candidate = tool.as_str().to_lowercase();
                let mut score = strsim::normalized_damerau_levenshtein(&folded, &candidate);
                // "read.file" or "read" should still find fs.read: reward a shared verb.
                let verb = candidate.rsplit('.').next().unwrap_or_default();
                if folded.split('.').any(|part| part == verb) {
                    score = score.max(0.6);
                }
                (tool, score)
            })
            .filter(|(_, score)| *score >= 0.5)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(tool, _)| tool)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ToolName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
        }
    }

    #[test]
    fn native_names_replace_dots_with_underscores() {
        assert_eq!(ToolName::FsWriteBatch.native_name(), "fs_write_batch");
        assert_eq!(
            ToolName::from_native_name("fs_writeBatch", ToolSet::Seed),
            Some(ToolName::FsWriteBatch)
        );
        assert_eq!(
            ToolName::from_native_name("fs_read_many", ToolSet::Extended),
            Some(ToolName::FsReadMany)
        );
        assert_eq!(
            ToolName::from_native_name("process_run", ToolSet::Seed),
            Some(ToolName::ProcessRun)
        );
        assert_eq!(
            ToolName::from_native_name("shell.exec", ToolSet::Seed),
            Some(ToolName::ShellExec)
        );
        assert_eq!(ToolName::from_native_name("fs_Read", ToolSet::Agent), None);
        assert_eq!(
            ToolName::from_native_name("agent_todo", ToolSet::Agent),
            Some(ToolName::AgentTodo)
        );
    }

    #[test]
    fn mcp_names_are_snake_case_and_map_back() {
        assert_eq!(ToolName::FsWriteBatch.mcp_name(), "fs_write_batch");
        assert_eq!(ToolName::FsReadMany.mcp_name(), "fs_read_many");
        assert_eq!(ToolName::ProcessRun.mcp_name(), "process_run");
        assert_eq!(ToolName::FsLs.mcp_name(), "fs_ls");
        for tool in ToolName::WITH_AGENT_TOOLS {
            let name = tool.mcp_name();
            assert!(
                (1..=64).contains(&name.len())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{name}"
            );
            assert_eq!(ToolName::from_mcp_name(&name, ToolSet::All), Some(tool));
        }
        assert_eq!(ToolName::from_mcp_name("fs_read_many", ToolSet::Seed), None);
        assert_eq!(
            ToolName::from_mcp_name("fs_writeBatch", ToolSet::Extended),
            None
        );
        assert_eq!(ToolName::from_mcp_name("fs.read", ToolSet::Extended), None);
    }

    #[test]
    fn agent_tools_exist_only_in_the_agent_set() {
        assert_eq!(ToolName::from_name_in("agent.todo", ToolSet::Seed), None);
        assert_eq!(
            ToolName::from_native_name("agent_note", ToolSet::Seed),
            None
        );
        assert_eq!(
            ToolName::from_name_in("agent.note", ToolSet::Agent),
            Some(ToolName::AgentNote)
        );
        assert_eq!(
            ToolName::nearest("agent.todos", ToolSet::Agent),
            Some(ToolName::AgentTodo)
        );
    }

    impl ToolName {
        fn nearest_chat(name: &str) -> Option<ToolName> {
            ToolName::nearest(name, ToolSet::Seed)
        }
    }

    #[test]
    fn look_alike_names_are_not_tools() {
        assert_eq!(ToolName::from_name("fs.Read"), None);
        assert_eq!(ToolName::from_name("fs.readmany"), None);
        assert_eq!(ToolName::from_name("fs.r\u{0435}ad"), None); // Cyrillic e
        assert_eq!(ToolName::from_name(" fs.read"), None);
    }

    #[test]
    fn nearest_name_is_suggested_for_typos_and_synonyms() {
        assert_eq!(ToolName::nearest_chat("fs.raed"), Some(ToolName::FsRead));
        assert_eq!(ToolName::nearest_chat("read.file"), Some(ToolName::FsRead));
        assert_eq!(ToolName::nearest_chat("fs_write"), Some(ToolName::FsWrite));
        assert_eq!(
            ToolName::nearest_chat("shell.run"),
            Some(ToolName::ShellExec)
        );
        assert_eq!(ToolName::nearest_chat("zzzzzzzzzzzzzzzz"), None);
    }
}
