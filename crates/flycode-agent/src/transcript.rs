//! The record of a run: JSON Lines, one Chat Completions message a line, that `flycode validate`
//! accepts. It holds the latest request exactly as it was sent (system message and special
//! messages where that request had them) followed by the reply to it, and is rewritten
//! atomically after every reply and every result, so a run that is killed or cancelled leaves a
//! whole record of everything up to that point. Earlier requests differ from the latest only in
//! where their special messages sat: those are rebuilt for every request.
//!
//! Each line may carry a `"flycode"` object that is never sent to the API (PROTOCOL.md §13 (The
//! API loop: transcript records)): what the message is to flycode (`kind`: `special`, `result`,
//! `summary`), on the first line the run's own record (`run`: its TODO list and notes, the
//! transcript it continues), on the lines a compaction replaced the compaction's number
//! (`compacted`), and on a summary what it replaced (`summary`). `flycode run --resume` reads
//! them back; `flycode validate` reads the lines as the messages they are.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::context::{AgentMemory, TodoItem, TodoStatus};
use super::message::{Message, MessageKind};
use crate::sandbox::state::write_atomically;

/// What flycode records beside a message (the line's `"flycode"` object).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineMarks {
    /// `special`, `result` or `summary`; absent for anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The run's record, on the first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRecord>,
    /// The number of the compaction that replaced this message (it is no longer sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<u32>,
    /// On a summary: what it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRecord>,
}

/// The run's own record: what `--resume` needs beyond the messages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The TODO list, `{content, status}` items in order.
    #[serde(default)]
    pub todos: Vec<TodoRecord>,
    /// The notes, oldest first.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The transcript this run continues (`flycode run --resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    /// The run's allowed roots: `memory.query` searches a later session's own projects only
    /// (PROTOCOL.md §9 (memory.query)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// The API it talked to: `--resume` talks to it again unless told otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointRecord>,
}

/// The API a run talked to (never its key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRecord {
    /// `openai` or `anthropic`.
    pub provider: String,
    /// The base URL.
    pub base_url: String,
    /// The model.
    pub model: String,
    /// `tags` for a run in seed 000's tag dialect (PROTOCOL.md §15): `--resume` goes on in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

/// One TODO item as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoRecord {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `done`.
    pub status: String,
}

impl RunRecord {
    /// The record of `memory`, continuing `continues`.
    pub fn of(memory: &AgentMemory, continues: Option<&Path>) -> RunRecord {
        RunRecord {
            todos: memory
                .todos
                .iter()
                .map(|item| TodoRecord {
                    content: item.content.clone(),
                    status: item.status.as_str().to_owned(),
                })
                .collect(),
            notes: memory.notes.clone(),
            continues: continues.map(|path| path.display().to_string()),
            roots: Vec::new(),
            endpoint: None,
        }
    }

    /// The memory it records (items of an unknown status are read as pending).
    pub fn memory(&self) -> AgentMemory {
        AgentMemory {
            todos: self
                .todos
                .iter()
                .map(|item| TodoItem {
                    content: item.content.clone(),
                    status: TodoStatus::from_name(&item.status).unwrap_or(TodoStatus::Pending),
                })
                .collect(),
            notes: self.notes.clone(),
            completion: None,
        }
    }
}

/// What a compaction replaced, recorded on its summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRecord {
    /// The compaction's number in the run, from 1.
    pub number: u32,
    /// How many messages it replaced (recorded before the summary, marked `compacted`).
    pub replaced: usize,
    /// The estimated tokens of the request before.
    pub tokens_before: u64,
    /// The estimated tokens of the request after.
    pub tokens_after: u64,
}

/// One line as written.
#[derive(Serialize)]
struct LineOut<'a> {
    #[serde(flatten)]
    message: &'a Message,
    #[serde(skip_serializing_if = "is_unmarked")]
    flycode: LineMarks,
}

fn is_unmarked(marks: &LineMarks) -> bool {
    *marks == LineMarks::default()
}

/// The `kind` mark of a message kind.
pub fn kind_mark(kind: MessageKind) -> Option<String> {
    match kind {
        MessageKind::Plain => None,
        MessageKind::Result => Some("result".to_owned()),
        MessageKind::Special => Some("special".to_owned()),
        MessageKind::Summary => Some("summary".to_owned()),
    }
}

/// The message kind of a `kind` mark.
pub fn kind_of_mark(mark: Option<&str>) -> MessageKind {
    match mark {
        Some("result") => MessageKind::Result,
        Some("special") => MessageKind::Special,
        Some("summary") => MessageKind::Summary,
        _ => MessageKind::Plain,
    }
}

/// What a checkpoint records beside the request and the messages after it.
#[derive(Debug, Default)]
pub struct RecordState<'a> {
    /// The run's record (first line).
    pub run: RunRecord,
    /// The messages compactions replaced, with the compaction's number: recorded, no longer sent.
    pub archive: &'a [(Message, u32)],
    /// The latest compaction, recorded on its summary.
    pub summary: Option<SummaryRecord>,
}

/// Why a transcript could not be written (the run goes on with a warning: PROTOCOL.md §13 (The API loop)).
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// A message could not be written as JSON (a fault of flycode).
    #[error("transcript: cannot encode a message as JSON: {0}")]
    Unencodable(serde_json::Error),
    /// A file could not be written.
    #[error("transcript {}: {error}; check that its folder is writable, or pass --transcript another path", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Where a run's transcript goes: the state directory's copy and the user's `--transcript`.
#[derive(Debug, Default)]
pub struct TranscriptWriter {
    paths: Vec<PathBuf>,
    continues: Option<PathBuf>,
    /// The run's allowed roots, recorded in the run's record.
    roots: Vec<String>,
    /// The API the run talks to, recorded in the run's record.
    endpoint: Option<EndpointRecord>,
}

impl TranscriptWriter {
    /// Writes to every path of `paths` (none: records nothing).
    pub fn new(paths: Vec<PathBuf>) -> TranscriptWriter {
        TranscriptWriter {
            paths,
            continues: None,
            roots: Vec::new(),
            endpoint: None,
        }
    }

    /// The same writer recording that the run works in `roots`.
    pub fn with_roots(mut self, roots: &[PathBuf]) -> TranscriptWriter {
        self.roots = roots
            .iter()
            .map(|root| root.display().to_string())
            .collect();
        self
    }

    /// The same writer recording the API the run talks to.
    pub fn with_endpoint(mut self, endpoint: EndpointRecord) -> TranscriptWriter {
        self.endpoint = Some(endpoint);
        self
    }

    /// The same writer recording that the run continues the one recorded in `parent`.
    pub fn continuing(mut self, parent: PathBuf) -> TranscriptWriter {
        self.continues = Some(parent);
        self
    }

    /// The transcript the run continues, if any.
    pub fn continues(&self) -> Option<&Path> {
        self.continues.as_deref()
    }

    /// The files written.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Replaces the record with `request` (as sent) followed by `after` (the replies and results
    /// since it was sent). Every path is attempted; the first failure is returned.
    #[cfg(test)]
    pub fn save(&self, request: &[Message], after: &[Message]) -> Result<(), TranscriptError> {
        let state = RecordState {
            run: RunRecord::of(&AgentMemory::default(), self.continues()),
            ..RecordState::default()
        };
        self.save_with(request, after, &state)
    }

    /// Replaces the record with `request` (as sent) followed by `after`, with the run's record,
    /// the messages compactions replaced (written just before the summary that replaced them)
    /// and the latest summary's record.
    pub fn save_with(
        &self,
        request: &[Message],
        after: &[Message],
        state: &RecordState<'_>,
    ) -> Result<(), TranscriptError> {
        if self.paths.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        let mut write = |message: &Message, flycode: LineMarks| {
            let line = serde_json::to_string(&LineOut { message, flycode })
                .map_err(TranscriptError::Unencodable)?;
            text.push_str(&line);
            text.push('\n');
            Ok::<(), TranscriptError>(())
        };
        for (index, message) in request.iter().chain(after).enumerate() {
            if message.kind == MessageKind::Summary {
                for (old, number) in state.archive {
                    let marks = LineMarks {
                        kind: kind_mark(old.kind),
                        compacted: Some(*number),
                        ..LineMarks::default()
                    };
                    write(old, marks)?;
                }
            }
            let marks = LineMarks {
                kind: kind_mark(message.kind),
                run: (index == 0).then(|| RunRecord {
                    roots: self.roots.clone(),
                    endpoint: self.endpoint.clone(),
                    ..state.run.clone()
                }),
                summary: state
                    .summary
                    .filter(|_| message.kind == MessageKind::Summary),
                ..LineMarks::default()
            };
            write(message, marks)?;
        }
        let mut first_error = None;
        for path in &self.paths {
            if let Err(error) = write_atomically(path, text.as_bytes()) {
                first_error.get_or_insert(TranscriptError::Unwritable {
                    path: path.clone(),
                    error,
                });
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The default transcript path of this process's run: `runs/RUN.jsonl` in the state directory,
/// `RUN` being the run's one id (`YYYYMMDDTHHMMSSZ-PID`), the same the undo store records its
/// changes under, so `flycode history --run RUN` and the transcript's name agree (PROTOCOL.md
/// §16 (Undo and history)).
pub fn default_transcript_path(state_dir: &Path) -> PathBuf {
    state_dir
        .join("runs")
        .join(format!("{}.jsonl", crate::sandbox::undo::session_id()))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn the_record_is_one_message_a_line_and_replaced_whole() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("deep/run.jsonl");
        let writer = TranscriptWriter::new(vec![path.clone()]);
        writer
            .save(&[Message::system("s"), Message::user("task")], &[])
            .unwrap();
        writer
            .save(
                &[Message::system("s"), Message::user("task")],
                &[Message::assistant("done", Vec::new())],
            )
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let roles: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["role"].to_string())
            .collect();
        assert_eq!(roles, ["\"system\"", "\"user\"", "\"assistant\""]);
    }

    #[test]
    fn default_paths_live_under_runs() {
        let path = default_transcript_path(Path::new("/state"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(path.starts_with("/state/runs"), "{}", path.display());
        assert_eq!(
            name,
            format!("{}.jsonl", crate::sandbox::undo::session_id()),
            "the run's one id"
        );
    }
}
