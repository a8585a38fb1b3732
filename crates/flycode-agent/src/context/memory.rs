//! The agent's memory: the TODO list `agent.todo` replaces and the notes `agent.note` adds. Plain
//! state, applied from already validated arguments; a malformed argument is an error, never a
//! panic, and leaves the memory as it was.
//!
//! At most [`MAX_NOTES`] notes are kept: the note after that drops the oldest one, and the
//! summary says so. Refusing it instead would leave the model stuck, since no tool removes or
//! merges notes.

use thiserror::Error;

use flycode_core::tools::ToolError;
use flycode_core::tools::agent::{NoteArgs, Notebook, TodoArgItem, TodoArgs};

use crate::protocol::ErrorCode;

/// How many notes are kept; adding one more drops the oldest.
pub const MAX_NOTES: usize = 100;

/// Where an item of the TODO list stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
}

impl TodoStatus {
    /// The schema's spelling: `pending`, `in_progress`, `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Done => "done",
        }
    }

    /// The status spelled `text` in the schema.
    pub fn from_name(text: &str) -> Option<TodoStatus> {
        match text {
            "pending" => Some(TodoStatus::Pending),
            "in_progress" => Some(TodoStatus::InProgress),
            "done" => Some(TodoStatus::Done),
            _ => None,
        }
    }
}

/// One item of the TODO list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TodoItem {
    /// What to do, in one line.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

/// The TODO list and the notes of one agent (the main agent and each sub-agent keep their own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentMemory {
    /// The TODO list, in the model's order.
    pub todos: Vec<TodoItem>,
    /// The notes, oldest first.
    pub notes: Vec<String>,
    /// A sub-agent's result, once it called `agent.complete` (the first call counts).
    pub completion: Option<String>,
}

/// Arguments of `agent.todo` or `agent.note` that the schema lets through but memory cannot
/// keep (a blank item or note).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MemoryError {
    /// One item is not `{"content": non-empty string, "status": pending|in_progress|done}`.
    #[error(
        "`items[{index}]` must be {{\"content\": non-empty string, \"status\": \"pending\"|\"in_progress\"|\"done\"}}; the list was not changed"
    )]
    BadItem {
        /// The item's position, 0-based.
        index: usize,
    },
    /// `note` is missing, not a string, or blank.
    #[error("`note` must be a non-empty string")]
    BadNote,
}

impl MemoryError {
    /// The protocol's code for the error.
    pub fn code(&self) -> ErrorCode {
        match self {
            MemoryError::BadItem { .. } | MemoryError::BadNote => ErrorCode::InvalidArgs,
        }
    }
}

impl AgentMemory {
    /// Applies `agent.todo`: the list in `args.items` replaces the whole TODO list. Returns a
    /// one-line summary for the result.
    pub fn replace_todos(&mut self, args: &TodoArgs) -> Result<String, MemoryError> {
        let todos = args
            .items
            .iter()
            .enumerate()
            .map(|(index, item)| todo_item(item).ok_or(MemoryError::BadItem { index }))
            .collect::<Result<Vec<_>, _>>()?;
        self.todos = todos;
        Ok(self.todo_summary())
    }

    /// Applies `agent.note`: `args.note` is added after the other notes (dropping the oldest
    /// when [`MAX_NOTES`] are kept already). Returns a one-line summary for the result.
    pub fn add_note(&mut self, args: &NoteArgs) -> Result<String, MemoryError> {
        let note = Some(args.note.trim())
            .filter(|note| !note.is_empty())
            .ok_or(MemoryError::BadNote)?;
        let dropped = self.notes.len() >= MAX_NOTES;
        if dropped {
            let excess = self.notes.len() + 1 - MAX_NOTES;
            self.notes.drain(..excess);
        }
        self.notes.push(note.to_owned());
        Ok(if dropped {
            format!(
                "Note saved; the oldest note was dropped (at most {MAX_NOTES} are kept: fold related notes together into one)."
            )
        } else {
            format!("Note {} saved.", self.notes.len())
        })
    }

    fn todo_summary(&self) -> String {
        if self.todos.is_empty() {
            return "TODO list cleared.".to_owned();
        }
        let count = |status| self.todos.iter().filter(|t| t.status == status).count();
        format!(
            "TODO list replaced: {} item{} ({} done, {} in progress, {} pending).",
            self.todos.len(),
            if self.todos.len() == 1 { "" } else { "s" },
            count(TodoStatus::Done),
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending)
        )
    }
}

fn todo_item(item: &TodoArgItem) -> Option<TodoItem> {
    let content = item.content.trim();
    let status = TodoStatus::from_name(&item.status)?;
    (!content.is_empty()).then(|| TodoItem {
        content: content.to_owned(),
        status,
    })
}

/// One agent's memory, shared by the loop (which reads it into every request and tells it
/// what the conversation says) and the executor (which runs `agent.todo` and `agent.note`
/// against it as the run's [`Notebook`], and reads the conversation for `memory.query`).
#[derive(Debug, Default)]
pub struct SharedMemory(std::sync::Mutex<AgentMemory>, std::sync::Mutex<Vec<String>>);

/// How many of an agent's latest messages its memory keeps for `memory.query`'s context.
const HEARD_MESSAGES: usize = 64;

impl SharedMemory {
    /// A memory that starts as `memory` (a resumed run's TODO list and notes).
    pub fn restored(memory: AgentMemory) -> SharedMemory {
        SharedMemory(std::sync::Mutex::new(memory), std::sync::Mutex::default())
    }

    /// Hears a message of the agent's conversation: what the person and the model said is kept
    /// (the latest [`HEARD_MESSAGES`]) for `memory.query`'s context.
    pub fn hear(&self, role: &str, content: &str) {
        let Some(said) = flycode_core::tools::memory::corpus::said(role, content) else {
            return;
        };
        let mut heard = self
            .1
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        heard.push(format!("{}: {}", said.role, said.text));
        let over = heard.len().saturating_sub(HEARD_MESSAGES);
        heard.drain(..over);
    }

    /// The memory as it is now.
    pub fn snapshot(&self) -> AgentMemory {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AgentMemory> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Notebook for SharedMemory {
    fn replace_todos(&self, args: &TodoArgs) -> Result<String, ToolError> {
        self.lock().replace_todos(args).map_err(memory_error)
    }

    fn add_note(&self, args: &NoteArgs) -> Result<String, ToolError> {
        self.lock().add_note(args).map_err(memory_error)
    }

    fn recent(&self, count: usize) -> Option<Vec<String>> {
        let heard = self
            .1
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(heard[heard.len().saturating_sub(count)..].to_vec())
    }

    /// Keeps the first result: a second `agent.complete` in the same turn changes nothing.
    fn complete(&self, result: &str) -> Result<String, ToolError> {
        let mut memory = self.lock();
        if memory.completion.is_none() {
            memory.completion = Some(result.to_owned());
        }
        Ok(format!(
            "Completed: the result ({} characters) goes to the agent that started this task",
            result.chars().count()
        ))
    }
}

fn memory_error(error: MemoryError) -> ToolError {
    ToolError::new(error.code(), error.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Typed arguments, as the registry reads them from a validated call.
    fn args<T: serde::de::DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).unwrap()
    }

    /// Arguments of the wrong shape never reach memory: they are not arguments of the tool.
    fn is_not_todo_args(value: &Value) -> bool {
        serde_json::from_value::<TodoArgs>(value.clone()).is_err()
    }

    #[test]
    fn todo_list_is_replaced_whole() {
        let mut memory = AgentMemory::default();
        let summary = memory
            .replace_todos(&args(json!({"items": [
                {"content": "Read the parser", "status": "done"},
                {"content": "Fix it", "status": "in_progress"},
                {"content": "Run tests", "status": "pending"}
            ]})))
            .unwrap();
        assert_eq!(
            summary,
            "TODO list replaced: 3 items (1 done, 1 in progress, 1 pending)."
        );
        memory
            .replace_todos(&args(
                json!({"items": [{"content": "Only", "status": "pending"}]}),
            ))
            .unwrap();
        assert_eq!(
            memory.todos,
            vec![TodoItem {
                content: "Only".into(),
                status: TodoStatus::Pending
            }]
        );
        assert_eq!(
            memory.replace_todos(&args(json!({"items": []}))).unwrap(),
            "TODO list cleared."
        );
        assert!(memory.todos.is_empty());
    }

    #[test]
    fn malformed_todo_arguments_are_errors_and_change_nothing() {
        let mut memory = AgentMemory::default();
        memory
            .replace_todos(&args(
                json!({"items": [{"content": "Keep", "status": "done"}]}),
            ))
            .unwrap();
        let before = memory.clone();
        for bad in [json!({}), json!({"items": "x"}), json!({"items": [7]})] {
            assert!(is_not_todo_args(&bad), "{bad}");
        }
        for bad in [
            json!({"items": [{"content": "a", "status": "started"}]}),
            json!({"items": [{"content": "ok", "status": "done"}, {"content": " ", "status": "done"}]}),
        ] {
            let error = memory.replace_todos(&args(bad.clone())).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgs, "{bad}");
            assert_eq!(memory, before, "{bad}");
        }
        assert!(is_not_todo_args(
            &json!({"items": [{"content": "a"}, {"status": "x"}]})
        ));
        assert_eq!(
            memory
                .replace_todos(&args(
                    json!({"items": [{"content": " ", "status": "x"}, {"content": "b", "status": "done"}]})
                ))
                .unwrap_err(),
            MemoryError::BadItem { index: 0 }
        );
    }

    #[test]
    fn notes_are_added_in_order() {
        let mut memory = AgentMemory::default();
        assert_eq!(
            memory.add_note(&args(json!({"note": "first"}))).unwrap(),
            "Note 1 saved."
        );
        assert_eq!(
            memory
                .add_note(&args(json!({"note": " second\n"})))
                .unwrap(),
            "Note 2 saved."
        );
        assert_eq!(memory.notes, vec!["first", "second"]);
        assert_eq!(
            memory.add_note(&args(json!({"note": "  "}))),
            Err(MemoryError::BadNote)
        );
        assert!(serde_json::from_value::<NoteArgs>(json!({"text": "x"})).is_err());
    }

    #[test]
    fn the_note_past_the_cap_drops_the_oldest() {
        let mut memory = AgentMemory::default();
        for n in 1..=MAX_NOTES {
            memory
                .add_note(&args(json!({"note": format!("note {n}")})))
                .unwrap();
        }
        let summary = memory.add_note(&args(json!({"note": "newest"}))).unwrap();
        assert!(summary.contains("oldest note was dropped"), "{summary}");
        assert_eq!(memory.notes.len(), MAX_NOTES);
        assert_eq!(memory.notes[0], "note 2");
        assert_eq!(memory.notes[MAX_NOTES - 1], "newest");
    }
}
