//! The special user messages of every request (seed 004) and where they go. Rebuilt in content
//! and position for every request, identically for the main agent and sub-agents and for every
//! calling mode; nothing here is stored in the history.
//!
//! - [`memory`]: the TODO list and the notes the agent's own tools keep;
//! - [`folder_notes`](mod@folder_notes): `AGENTS.md` / `FLYCODE.md` at the roots, read afresh;
//! - [`special`]: the messages rendered under `[flycode]` headings (the fifth, the loaded hints'
//!   `HINT.md`, comes from the executor's hint shelf: PROTOCOL.md §9 (hint.load)).
//!
//! # Where the special messages go
//!
//! [`assemble_request`] builds the messages of one request from the system prompt, the history
//! and the rendered [`SpecialMessages`]:
//!
//! 1. The system message is always first: the configured system prompt when there is one;
//!    otherwise the role definition is promoted to the system message (and is still sent as
//!    special message 1 as well). When neither exists there is no system message.
//! 2. The special messages come in the order role definition, TODO list, useful information,
//!    folder notes, loaded hints, empty ones left out. When all are empty nothing is inserted: the history
//!    follows the system message as it is.
//! 3. They are inserted as one contiguous block right after the third-from-last result message
//!    ([`Message::is_result`]: a `tool` message in native mode, a user message carrying a
//!    `flycode-result` block in text mode). When that result is part of a contiguous run of
//!    results (parallel calls answered by several `tool` messages), the block goes after the last
//!    result of the run, so it never sits between an assistant message with tool calls and its
//!    results.
//! 4. With fewer than three results, the block goes right after the first user message (the
//!    first message with role user that is not special); with no user message at all, right
//!    after the system message.
//! 5. The history never holds special messages or a system message: the caller keeps them out,
//!    and they are rebuilt for every request.

pub mod folder_notes;
pub mod memory;
pub mod special;

pub use folder_notes::{FolderNote, folder_notes};
pub use memory::{AgentMemory, MemoryError, SharedMemory, TodoItem, TodoStatus};
pub use special::SpecialMessages;

use crate::message::{Message, MessageKind, Role};

/// How many results from the end the special messages follow.
const RESULTS_FROM_THE_END: usize = 3;

/// The messages of one request: the system message, then `history` with the special messages
/// inserted as one block (the rules are in the [module documentation](self)).
pub fn assemble_request(
    system: Option<&str>,
    history: &[Message],
    specials: &SpecialMessages,
) -> Vec<Message> {
    let mut request = Vec::with_capacity(history.len() + 5);
    let system = system.or(specials.role_definition.as_deref());
    if let Some(system) = system {
        request.push(Message::system(system));
    }
    let specials = specials.messages();
    if specials.is_empty() {
        request.extend_from_slice(history);
        return request;
    }
    let at = insertion_point(history);
    request.extend_from_slice(&history[..at]);
    request.extend(specials);
    request.extend_from_slice(&history[at..]);
    request
}

/// Where in `history` the special messages go: the index of the message they precede.
pub fn insertion_point(history: &[Message]) -> usize {
    let mut seen = 0;
    for (index, message) in history.iter().enumerate().rev() {
        if !message.is_result() {
            continue;
        }
        seen += 1;
        if seen == RESULTS_FROM_THE_END {
            let run = history[index..]
                .iter()
                .take_while(|m| m.is_result())
                .count();
            return index + run;
        }
    }
    history
        .iter()
        .position(|m| m.role == Role::User && m.kind == MessageKind::Plain)
        .map_or(0, |first_user| first_user + 1)
}

#[cfg(test)]
mod tests;
