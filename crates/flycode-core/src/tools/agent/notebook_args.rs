//! What `agent.todo` and `agent.note` ask for (PROTOCOL.md §13 (The API loop)). A file of its
//! own because two sides carry it: the tools ([`super`]) read it from the call, and
//! [`Notebook`](crate::tools::tool::Notebook) hands it to the run's notebook, so the tool trait's
//! file needs it without needing the tools.

/// The arguments of `agent.todo`: the whole list, replacing the one before.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoArgs {
    /// The items, in the model's order (the schema allows 0 to 100).
    pub items: Vec<TodoArgItem>,
}

/// One item of `agent.todo`'s list, as the schema allows it (the notebook refuses a blank one).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoArgItem {
    /// What to do, in one line.
    pub content: String,
    /// `pending`, `in_progress` or `done`.
    pub status: String,
}

/// The arguments of `agent.note`.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoteArgs {
    /// The information to keep (the notebook refuses a blank one).
    pub note: String,
}
