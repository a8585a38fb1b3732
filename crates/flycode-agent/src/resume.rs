//! `flycode run --resume`: an earlier run's conversation read back from its transcript, at its
//! last complete turn (PROTOCOL.md §13 (The API loop: resume)). The system prompt and the special
//! messages are left out (they are rebuilt for every request), the TODO list and notes come back
//! from the transcript's run record, and a call whose result is missing gets a result saying it
//! was not run: it is never run again behind the model's back. Reads files; runs nothing.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::context::AgentMemory;
use super::message::{Message, MessageKind, NativeToolCall, Role};
use super::transcript::{LineMarks, SummaryRecord, kind_of_mark};
use crate::protocol::{ClassifyOptions, ErrorCode, ResultBlock, ToolName, ToolSet, Verdict};

/// Why a run cannot be resumed (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// `--resume latest` without a state folder.
    #[error(
        "--resume latest: there is no state folder to look in; set FLYCODE_STATE_DIR or give the transcript's path"
    )]
    NoStateDir,
    /// `--resume latest` and no run recorded.
    #[error("--resume latest: no run is recorded in {}; give the transcript's path", dir.display())]
    NoRuns {
        /// The folder looked in.
        dir: PathBuf,
    },
    /// The transcript cannot be read.
    #[error("--resume {}: cannot read it: {error}; check the path", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A line is not a message.
    #[error(
        "--resume {}: line {line} is not a message ({problem}); give a transcript written by flycode run",
        path.display()
    )]
    NotATranscript {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// No message to go on from.
    #[error(
        "--resume {}: the transcript holds no conversation; give a transcript written by flycode run",
        path.display()
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// What `--resume` names: the newest run of the state folder, or a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeSource {
    /// `latest`.
    Latest,
    /// A transcript's path.
    File(PathBuf),
}

impl ResumeSource {
    /// `latest` or a path.
    pub fn from_arg(arg: &str) -> ResumeSource {
        if arg == "latest" {
            ResumeSource::Latest
        } else {
            ResumeSource::File(PathBuf::from(arg))
        }
    }
}

/// An earlier run, read back and ready to go on.
#[derive(Debug)]
pub struct Resumed {
    /// Its transcript.
    pub parent: PathBuf,
    /// The conversation: the task, replies, results (missing ones answered as not run), a
    /// summary where compaction replaced older turns.
    pub history: Vec<Message>,
    /// The messages its compactions replaced, kept for the record.
    pub archive: Vec<(Message, u32)>,
    /// Its latest compaction.
    pub summary: Option<SummaryRecord>,
    /// Its TODO list and notes.
    pub memory: AgentMemory,
    /// The sub-agent tasks it started, so the next one gets a new number.
    pub tasks_started: u32,
    /// The calls answered as not run.
    pub not_run: usize,
    /// The ids its calls used (native and text mode, compacted turns included): reserved, so
    /// that the resumed run refuses a reused one as an unbroken run would.
    pub used_ids: Vec<String>,
    /// The API it talked to, where its record says (runs from before 2026-11-29 do not).
    pub endpoint: Option<super::transcript::EndpointRecord>,
}

/// One transcript line as read.
#[derive(Deserialize)]
struct StoredLine {
    role: Role,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<NativeToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    flycode: LineMarks,
}

/// The transcript `source` names.
pub fn locate(source: &ResumeSource) -> Result<PathBuf, ResumeError> {
    match source {
        ResumeSource::File(path) => Ok(path.clone()),
        ResumeSource::Latest => {
            let dir = crate::sandbox::state::state_dir()
                .ok_or(ResumeError::NoStateDir)?
                .join("runs");
            newest_run(&dir).ok_or(ResumeError::NoRuns { dir })
        }
    }
}

/// The most recently written main-run transcript of `dir` (sub-agents' `<stem>.task-N.jsonl`
/// left out).
fn newest_run(dir: &Path) -> Option<PathBuf> {
    crate::sandbox::host::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n.ends_with(".jsonl") && !n.contains(".task-"))
        })
        .filter_map(|path| {
            let modified = crate::sandbox::host::symlink_metadata(&path)
                .ok()?
                .modified()
                .ok()?;
            Some((modified, path))
        })
        .max()
        .map(|(_, path)| path)
}

/// Reads the run recorded in `path`.
pub fn load(path: &Path) -> Result<Resumed, ResumeError> {
    let text =
        crate::sandbox::host::read_to_string(path).map_err(|error| ResumeError::Unreadable {
            path: path.to_owned(),
            error,
        })?;
    let mut resumed = Resumed {
        parent: path.to_owned(),
        history: Vec::new(),
        archive: Vec::new(),
        summary: None,
        memory: AgentMemory::default(),
        tasks_started: 0,
        not_run: 0,
        used_ids: Vec::new(),
        endpoint: None,
    };
    let mut first = true;
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let stored: StoredLine =
            serde_json::from_str(line).map_err(|e| ResumeError::NotATranscript {
                path: path.to_owned(),
                line: index + 1,
                problem: e.to_string(),
            })?;
        if std::mem::take(&mut first)
            && let Some(run) = &stored.flycode.run
        {
            resumed.memory = run.memory();
            resumed.endpoint.clone_from(&run.endpoint);
        }
        take_line(&mut resumed, stored);
    }
    if resumed.history.is_empty() {
        return Err(ResumeError::Empty {
            path: path.to_owned(),
        });
    }
    resumed.not_run = complete_turns(&mut resumed.history);
    resumed.tasks_started = count_tasks(&resumed.history);
    resumed.used_ids = used_ids(&resumed.history, &resumed.archive);
    Ok(resumed)
}

/// The ids the earlier run's calls claimed: every native call's, and the id of every text-mode
/// call block that was a valid call (an invalid attempt claims no id in a run either, so the
/// model may repeat it in its correction).
fn used_ids(history: &[Message], archive: &[(Message, u32)]) -> Vec<String> {
    let options = ClassifyOptions {
        lenient: true,
        tools: ToolSet::All,
    };
    history
        .iter()
        .chain(archive.iter().map(|(message, _)| message))
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| {
            let text_id = if message.tool_calls.is_empty() {
                match crate::protocol::classify_reply(&message.content, options).verdict {
                    Verdict::Call(call) => call.id,
                    Verdict::None | Verdict::Invalid { .. } => None,
                }
            } else {
                None
            };
            message
                .tool_calls
                .iter()
                .map(|call| call.id.clone())
                .chain(text_id)
        })
        .collect()
}

/// Files one line: replaced by a compaction, left out (system, special), or history.
fn take_line(resumed: &mut Resumed, stored: StoredLine) {
    let kind = kind_of_mark(stored.flycode.kind.as_deref());
    let message = Message::stored(
        stored.role,
        stored.content.unwrap_or_default(),
        stored.tool_calls.unwrap_or_default(),
        stored.tool_call_id,
        match (stored.role, kind) {
            (Role::Tool, _) => MessageKind::Result,
            (_, kind) => kind,
        },
    );
    if let Some(number) = stored.flycode.compacted {
        resumed.archive.push((message, number));
    } else if message.role == Role::System || message.kind == MessageKind::Special {
        // Rebuilt for every request: the system prompt and special messages of now.
    } else {
        if message.kind == MessageKind::Summary {
            resumed.summary = stored.flycode.summary;
        }
        resumed.history.push(message);
    }
}

/// Answers every call that has no result as not run; returns how many there were.
fn complete_turns(history: &mut Vec<Message>) -> usize {
    let mut added = 0;
    let mut index = 0;
    while index < history.len() {
        let message = &history[index];
        if message.role != Role::Assistant {
            index += 1;
            continue;
        }
        let results_end = index
            + 1
            + history[index + 1..]
                .iter()
                .take_while(|m| m.is_result())
                .count();
        let missing: Vec<Message> = if message.tool_calls.is_empty() {
            let answered = results_end > index + 1;
            match text_call(&message.content) {
                Some((id, command)) if !answered => {
                    vec![Message::user_result(not_run(id, command).render())]
                }
                _ => Vec::new(),
            }
        } else {
            let answered: Vec<&str> = history[index + 1..results_end]
                .iter()
                .filter_map(|m| m.tool_call_id.as_deref())
                .collect();
            message
                .tool_calls
                .iter()
                .filter(|call| !answered.contains(&call.id.as_str()))
                .map(|call| {
                    let command = format!("/{}", call.function.name.replace('_', "."));
                    let block = not_run(Some(call.id.clone()), command);
                    Message::tool_result(call.id.clone(), block.render())
                })
                .collect()
        };
        added += missing.len();
        let inserted = missing.len();
        history.splice(results_end..results_end, missing);
        index = results_end + inserted;
    }
    added
}

/// The id and command of the call block a text-mode reply holds, if it holds one.
fn text_call(reply: &str) -> Option<(Option<String>, String)> {
    let options = ClassifyOptions {
        lenient: true,
        tools: ToolSet::All,
    };
    match crate::protocol::classify_reply(reply, options).verdict {
        Verdict::None => None,
        Verdict::Call(call) => Some((call.id.clone(), format!("/{}", call.tool.as_str()))),
        Verdict::Invalid { attempt, .. } => {
            Some((attempt.id, format!("/{}", attempt.tool.unwrap_or_default())))
        }
    }
}

/// The result of a call the earlier run never answered.
fn not_run(id: Option<String>, command: String) -> ResultBlock {
    ResultBlock::failure(
        id,
        command,
        ErrorCode::Cancelled,
        "not run: the earlier run stopped before this call's result was recorded, and the resumed run does not run it again".to_owned(),
        Some("check what the call would have changed (it may have partly run), then call it again if it is still needed".to_owned()),
    )
}

/// The sub-agent tasks the conversation started (native and text calls of `agent.task`).
fn count_tasks(history: &[Message]) -> u32 {
    let native = history
        .iter()
        .flat_map(|m| &m.tool_calls)
        .filter(|call| call.function.name == "agent_task" || call.function.name == "agent.task")
        .count();
    let text = history
        .iter()
        .filter(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
        .filter(|m| {
            text_call(&m.content)
                .is_some_and(|(_, command)| command == format!("/{}", ToolName::AgentTask.as_str()))
        })
        .count();
    u32::try_from(native + text).unwrap_or(u32::MAX)
}

/// The user message that tells the model it was resumed.
pub fn resume_notice(resumed: &Resumed) -> String {
    let missing = match resumed.not_run {
        0 => String::new(),
        1 => " One call had no result: it was not run again, and its result says so.".to_owned(),
        n => {
            format!(" {n} calls had no result: they were not run again, and their results say so.")
        }
    };
    format!(
        "[flycode] This run continues an earlier one (recorded in {}) from its last complete turn.{missing} Background programs the earlier run started are gone, and approvals given then do not carry over. Your TODO list and notes are as you left them.",
        resumed.parent.display()
    )
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn a_call_without_a_result_is_answered_as_not_run_and_specials_are_left_out() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("run.jsonl");
        let lines = [
            r#"{"role":"system","content":"sys","flycode":{"run":{"todos":[{"content":"fix","status":"in_progress"}],"notes":["n1"]}}}"#,
            r#"{"role":"user","content":"task"}"#,
            r#"{"role":"user","content":"[flycode] TODO","flycode":{"kind":"special"}}"#,
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"fs_read","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"process_run","arguments":"{}"}}]}"#,
            r#"{"role":"tool","content":"ra","tool_call_id":"a"}"#,
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let resumed = load(&path).unwrap();
        assert_eq!(resumed.not_run, 1);
        assert_eq!(resumed.memory.todos[0].content, "fix");
        assert_eq!(resumed.memory.notes, ["n1"]);
        let roles: Vec<Role> = resumed.history.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Tool]);
        let last = resumed.history.last().unwrap();
        assert_eq!(last.tool_call_id.as_deref(), Some("b"));
        assert!(
            last.content.contains("[code] cancelled"),
            "{}",
            last.content
        );
        assert!(last.content.contains("not run"), "{}", last.content);
        assert!(resume_notice(&resumed).contains("One call had no result"));
    }

    #[test]
    fn a_text_mode_call_without_a_result_is_answered_too() {
        let mut history = vec![
            Message::user("task"),
            Message::assistant(
                "```flycode-call\n{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/a\"}}\n```",
                Vec::new(),
            ),
        ];
        assert_eq!(complete_turns(&mut history), 1);
        assert!(history[2].is_result());
        assert!(
            history[2].content.contains("[id] c1"),
            "{}",
            history[2].content
        );
        let mut prose = vec![
            Message::user("task"),
            Message::assistant("done", Vec::new()),
        ];
        assert_eq!(complete_turns(&mut prose), 0);
    }

    #[test]
    fn text_mode_ids_of_valid_calls_are_reserved_with_compacted_ones() {
        let block = |id: &str, tool: &str| {
            Message::assistant(
                format!(
                    "```flycode-call\n{{\"id\":\"{id}\",\"tool\":\"{tool}\",\"args\":{{\"path\":\"/a\"}}}}\n```"
                ),
                Vec::new(),
            )
        };
        let history = vec![
            Message::user("task"),
            block("c1", "fs.read"),
            block("bad", "no.such_tool"),
        ];
        let archive = vec![(block("c0", "fs.read"), 1)];
        assert_eq!(used_ids(&history, &archive), ["c1", "c0"]);
    }
}
