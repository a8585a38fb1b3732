//! What a tool is: the [`Tool`] trait each tool's file implements (typed arguments, effects,
//! approval class, stale-read paths, session changes, subject, summary, the preview of its
//! change, `run`), its object-safe
//! face [`RegisteredTool`] and the call bound to it, [`BoundCall`], plus the small helpers the
//! tools share for their one-line subjects and summaries. A leaf of `tools`: the tools build on it,
//! and the registry lists them.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::preview::Preview;
use super::secrets::Secrets;
use super::{Limits, ToolError, ToolOutput, parse_args};
use crate::protocol::{ErrorCode, ToolName};
use crate::sandbox::Sandbox;

/// What a call does to the world, for policy: the paths it reads, the paths whose content or
/// existence it changes, the directories it creates, and the program it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects<'a> {
    /// Paths it reads.
    pub reads: Vec<&'a str>,
    /// Paths it writes, moves, removes or chmods.
    pub writes: Vec<&'a str>,
    /// Directories it creates (a change, but no file's content).
    pub creates: Vec<&'a str>,
    /// The program it runs, if it runs one.
    pub program: Option<Program<'a>>,
    /// The call removes or moves what `writes` name themselves (a link, not its target; a
    /// folder with everything in it): the undo store records those whole (PROTOCOL.md §16
    /// (Undo and history)).
    pub whole: bool,
    /// The call replaces or removes the files `writes` name (a new file takes each name, or the
    /// name goes), never changing an old file itself: the undo store keeps the old files by a
    /// second name instead of copying them (PROTOCOL.md §16 (Undo and history), "The store").
    pub replaces: bool,
    /// The paths of `writes` the call appends to (its old content stays, at the start of the
    /// new): the undo store records their old content by length and hash, not a copy
    /// (PROTOCOL.md §16 (Undo and history), "How a content is kept").
    pub appends: Vec<&'a str>,
    /// The call stages its new contents before it changes anything in the roots, and waits at
    /// the sandbox's landing points ([`crate::sandbox::landing`]) before it does: its undo
    /// record is written beside it rather than before it.
    pub stages: bool,
}

impl<'a> Effects<'a> {
    /// A tool that reads `paths`.
    pub fn reading(paths: impl IntoIterator<Item = &'a str>) -> Effects<'a> {
        Effects {
            reads: paths.into_iter().collect(),
            ..Effects::default()
        }
    }

    /// A tool that changes `paths`.
    pub fn writing(paths: impl IntoIterator<Item = &'a str>) -> Effects<'a> {
        Effects {
            writes: paths.into_iter().collect(),
            ..Effects::default()
        }
    }

    /// Whether the call changes anything or runs a program (refused under `read-only`).
    pub fn is_mutating(&self) -> bool {
        !self.writes.is_empty() || !self.creates.is_empty() || self.program.is_some()
    }

    /// The same effects, acting on what the paths name themselves ([`Effects::whole`]).
    pub fn on_whole_paths(mut self) -> Effects<'a> {
        self.whole = true;
        self
    }

    /// Marks the call as one that replaces or removes the files it writes (see
    /// [`Effects::replaces`]).
    pub fn replacing_files(mut self) -> Effects<'a> {
        self.replaces = true;
        self
    }

    /// Marks `paths` (of [`Effects::writes`]) as appended to (see [`Effects::appends`]).
    pub fn appending(mut self, paths: impl IntoIterator<Item = &'a str>) -> Effects<'a> {
        self.appends.extend(paths);
        self
    }

    /// Marks the call as one that stages its new contents before it lands them (see
    /// [`Effects::stages`]).
    pub fn staging_first(mut self) -> Effects<'a> {
        self.stages = true;
        self
    }

    /// Every path the call changes.
    pub fn changed(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.writes.iter().chain(&self.creates).copied()
    }
}

/// A program a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program<'a> {
    /// The program (process.run) or the command line (shell.exec).
    pub command: &'a str,
    /// Whether it goes through a shell.
    pub shell: bool,
    /// The variables it adds to the environment.
    pub env: &'a Map<String, Value>,
}

/// How policy treats a tool under the default approval mode (`ask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalClass {
    /// Only reads: runs at once, also concurrently with other reads (PROTOCOL.md §13 (The API loop: parallel calls)).
    Read,
    /// Changes files within the roots: runs at once under `ask`.
    Write,
    /// Runs a program, removes, moves or chmods: asks first under `ask`.
    AsksFirst,
    /// Keeps the agent's own notes (`flycode run` only): runs at once, changes no file.
    AgentMemory,
}

/// What a successful call changes in the session's memory of file contents (the stale-read
/// guard's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionChange<'a> {
    /// The model read this path: remember its current hash.
    Read(&'a str),
    /// flycode wrote this file with this hash (the model knows what it wrote).
    Wrote(String, String),
    /// flycode appended to this file, which now has this hash. The model knows the whole content
    /// only if it knew what was there before: the hash is remembered only where the session
    /// remembers one already, so appends alone never arm the guard.
    Appended(String, String),
    /// The model saw this file whole, with this hash, at this resolved path (also a file the
    /// arguments do not name, such as one an fs.readMany glob found).
    Saw(String, String),
    /// This path no longer holds what the model read (removed, moved away).
    Forget(&'a str),
}

/// Where `agent.todo`, `agent.note` and `agent.complete` keep what they are given (the loop's
/// memory).
pub trait Notebook: Send + Sync {
    /// Replaces the TODO list with `args.items`; a one-line summary.
    fn replace_todos(
        &self,
        args: &super::agent::notebook_args::TodoArgs,
    ) -> Result<String, ToolError>;
    /// Adds `args.note`; a one-line summary.
    fn add_note(&self, args: &super::agent::notebook_args::NoteArgs) -> Result<String, ToolError>;
    /// The latest `count` user and assistant messages of this agent's own conversation, as
    /// `role: text` lines, oldest first (`memory.query`'s context); `None` where the notebook
    /// does not hear the conversation.
    fn recent(&self, _count: usize) -> Option<Vec<String>> {
        None
    }
    /// Records a sub-agent's result (`agent.complete`); a one-line summary. Only a sub-agent's
    /// notebook takes one.
    fn complete(&self, _result: &str) -> Result<String, ToolError> {
        Err(ToolError::new(
            ErrorCode::UnknownTool,
            "agent.complete ends a sub-agent's task, and this agent is not a sub-agent".to_owned(),
            Some("answer in prose when the task is done"),
        ))
    }
}

/// Runs `agent.task` calls: the sub-agent layer of `flycode run` (PROTOCOL.md §13 (The API loop: sub-agents)), given to the
/// main agent's executor only.
pub trait TaskRunner: Send + Sync {
    /// Runs the task to its end (synchronously) and returns its envelope; `parent_call_id` is
    /// the id of the `agent.task` call.
    fn run_task(
        &self,
        task: &super::agent::task_args::TaskArgs,
        parent_call_id: Option<&str>,
    ) -> Result<ToolOutput, ToolError>;
}

/// What a tool runs with.
pub struct ToolContext<'a> {
    /// The allowed roots.
    pub sandbox: &'a Sandbox,
    /// Output cap, default timeout, cancellation.
    pub limits: &'a Limits,
    /// The agent's TODO list and notes (`flycode run` only).
    pub notebook: Option<&'a dyn Notebook>,
    /// Runs sub-agent tasks (the main agent of `flycode run` only).
    pub tasks: Option<&'a dyn TaskRunner>,
    /// The id of the call being run.
    pub call_id: Option<&'a str>,
    /// The hints this conversation has loaded.
    pub hints: &'a super::hint::shelf::HintShelf,
    /// Condenses what `memory.query` finds (`flycode run` only).
    pub condenser: Option<&'a dyn super::memory::condenser::Condenser>,
    /// The session's background jobs (`watch`, `run`, `mcp`; none in `exec`).
    pub jobs: Option<&'a super::jobs::JobTable>,
    /// The door reads only the result block: the structured data may leave out what the body
    /// holds, and a body may be left in its file ([`crate::tools::ToolOutput::kept`]), which the
    /// door then writes out ([`crate::tools::executor::Executor::text_only`]).
    pub text_only: bool,
}

/// A tool, as its file implements it, with typed arguments.
pub trait Tool: Send + Sync + 'static {
    /// The arguments, read from the validated JSON.
    type Args: DeserializeOwned + Send + Sync + 'static;

    /// The tool's name on the wire.
    const NAME: ToolName;

    /// How policy treats it.
    fn approval(&self) -> ApprovalClass;

    /// What the call reads, changes and runs.
    fn effects<'a>(&self, args: &'a Self::Args) -> Effects<'a>;

    /// The tool policy judges the call as (`process.run` of a shell is judged as `shell.exec`).
    fn judged_as(&self, _args: &Self::Args) -> ToolName {
        Self::NAME
    }

    /// The files the call would change that the model must have seen as they are now (the
    /// stale-read guard): those changed without an explicit `expectedSha256`.
    fn guarded_paths<'a>(&self, _args: &'a Self::Args) -> Vec<&'a str> {
        Vec::new()
    }

    /// What a successful call changes in the session.
    fn session_changes<'a>(
        &self,
        _args: &'a Self::Args,
        _output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        Vec::new()
    }

    /// The call's main argument, short (`src/main.rs`, `cargo test -q`, `3 files`); paths are
    /// shown relative to the first of `roots` that holds them. Not yet escaped for a terminal.
    fn subject(&self, args: &Self::Args, roots: &[PathBuf]) -> String;

    /// What a successful call did (`Read 1.2 KiB (42 lines)`).
    fn summary(&self, output: &ToolOutput) -> String;

    /// What a failed call reported, when the tool says it better than its error code (a
    /// program's exit status).
    fn failure_summary(&self, _code: ErrorCode, _output: Option<&ToolOutput>) -> Option<String> {
        None
    }

    /// What the call would change in files' content, for its approval question
    /// ([`super::preview`]): made from a plan of the change, read through `sandbox` and masked
    /// with `secrets`, never by running the call. `None` for a tool that writes no file's
    /// content, a file the sandbox refuses, or a change that would fail.
    fn preview(
        &self,
        _args: &Self::Args,
        _sandbox: &Sandbox,
        _secrets: &Secrets,
    ) -> Option<Preview> {
        None
    }

    /// Runs the call.
    fn run(&self, context: &ToolContext<'_>, args: &Self::Args) -> Result<ToolOutput, ToolError>;
}

/// A [`Tool`] behind a uniform, object-safe face: what the registry holds.
pub trait RegisteredTool: Send + Sync {
    /// The tool's name on the wire.
    fn name(&self) -> ToolName;
    /// See [`Tool::approval`].
    fn approval(&self) -> ApprovalClass;
    /// See [`Tool::summary`].
    fn summary(&self, output: &ToolOutput) -> String;
    /// See [`Tool::failure_summary`].
    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String>;
    /// Reads the validated arguments into the tool's typed arguments, once: the call, bound to
    /// its tool, answers every other question from them.
    fn bind(&'static self, args: &Map<String, Value>) -> Result<Box<dyn BoundCall>, ToolError>;
}

/// A call bound to its tool, its arguments parsed: what the executor, policy and the display ask.
pub trait BoundCall: Send + Sync {
    /// The tool.
    fn tool(&self) -> &'static dyn RegisteredTool;
    /// See [`Tool::effects`].
    fn effects(&self) -> Effects<'_>;
    /// See [`Tool::judged_as`].
    fn judged_as(&self) -> ToolName;
    /// See [`Tool::guarded_paths`].
    fn guarded_paths(&self) -> Vec<&str>;
    /// See [`Tool::session_changes`].
    fn session_changes(&self, output: &ToolOutput) -> Vec<SessionChange<'_>>;
    /// See [`Tool::subject`].
    fn subject(&self, roots: &[PathBuf]) -> String;
    /// See [`Tool::preview`].
    fn preview(&self, sandbox: &Sandbox, secrets: &Secrets) -> Option<Preview>;
    /// See [`Tool::run`].
    fn run(&self, context: &ToolContext<'_>) -> Result<ToolOutput, ToolError>;
}

/// A tool and its typed arguments.
struct Bound<T: Tool> {
    tool: &'static T,
    args: T::Args,
}

impl<T: Tool> RegisteredTool for T {
    fn name(&self) -> ToolName {
        T::NAME
    }

    fn approval(&self) -> ApprovalClass {
        Tool::approval(self)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        Tool::summary(self, output)
    }

    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
        Tool::failure_summary(self, code, output)
    }

    fn bind(&'static self, args: &Map<String, Value>) -> Result<Box<dyn BoundCall>, ToolError> {
        let args: T::Args = parse_args(T::NAME.as_str(), args)?;
        Ok(Box::new(Bound { tool: self, args }))
    }
}

impl<T: Tool> BoundCall for Bound<T> {
    fn tool(&self) -> &'static dyn RegisteredTool {
        self.tool
    }

    fn effects(&self) -> Effects<'_> {
        self.tool.effects(&self.args)
    }

    fn judged_as(&self) -> ToolName {
        self.tool.judged_as(&self.args)
    }

    fn guarded_paths(&self) -> Vec<&str> {
        self.tool.guarded_paths(&self.args)
    }

    fn session_changes(&self, output: &ToolOutput) -> Vec<SessionChange<'_>> {
        self.tool.session_changes(&self.args, output)
    }

    fn subject(&self, roots: &[PathBuf]) -> String {
        self.tool.subject(&self.args, roots)
    }

    fn preview(&self, sandbox: &Sandbox, secrets: &Secrets) -> Option<Preview> {
        self.tool.preview(&self.args, sandbox, secrets)
    }

    fn run(&self, context: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        Tool::run(self.tool, context, &self.args)
    }
}

/// `path` relative to the first of `roots` that holds it (`.` for the root itself); as it is
/// otherwise.
pub fn shorten_path(path: &str, roots: &[PathBuf]) -> String {
    let as_path = Path::new(path);
    for root in roots {
        if let Ok(rest) = as_path.strip_prefix(root) {
            let rest = rest.display().to_string();
            return if rest.is_empty() {
                ".".to_owned()
            } else {
                rest
            };
        }
    }
    path.to_owned()
}

/// `1 file`, `3 files`, `2 entries`, `7 matches`.
pub fn plural(count: usize, noun: &str) -> String {
    match (count, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "entry") => format!("{count} entries"),
        (_, "match") => format!("{count} matches"),
        _ => format!("{count} {noun}s"),
    }
}

/// The first line of `text`, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}

/// `Failed: not_found · /w/a.txt does not exist`: the code and the message's first line, clipped
/// and escaped for a terminal.
pub fn failure_line(code: &str, message: &str) -> String {
    let first = first_line(message);
    let clipped = if first.chars().count() > 100 {
        format!("{}…", first.chars().take(99).collect::<String>())
    } else {
        first
    };
    format!(
        "Failed: {code} · {}",
        crate::protocol::display::escape_for_terminal(&clipped)
    )
}

/// The value of the header `key` of `output`.
pub fn field<'o>(output: &'o ToolOutput, key: &str) -> Option<&'o str> {
    output
        .fields
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}
