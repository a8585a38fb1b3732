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
//! 6. When the block is the last thing before the model's reply (the first request, after the
//!    task), it ends with one more message, [`special::TASK_POINTER`], pointing back at the
//!    task: a weak model answers the last message it reads, and the block is not the task.

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
    assemble_request_moving_every(system, history, specials, 1)
}

/// The same, the block moving forward only every `every` results (`[agent] special_every`,
/// PROTOCOL.md §13 (The API loop: special messages)): a local server that caches the prompt's
/// start re-reads everything after the block each time it moves, so moving it less often saves
/// most of the prompt processing of a turn. `1` is seed 004's rule.
pub fn assemble_request_moving_every(
    system: Option<&str>,
    history: &[Message],
    specials: &SpecialMessages,
    every: usize,
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
    let at = insertion_point_every(history, every);
    request.extend_from_slice(&history[..at]);
    request.extend(specials);
    // The block is the last thing the model reads, right after the task: point back at it.
    if at == history.len() && at > 0 {
        request.push(Message::special(special::TASK_POINTER));
    }
    request.extend_from_slice(&history[at..]);
    request
}

/// Where in `history` the special messages go: the index of the message they precede.
pub fn insertion_point(history: &[Message]) -> usize {
    insertion_point_every(history, 1)
}

/// Where the special messages go when they move forward only every `every` results: after the
/// third-from-last result, that result's place counted from the start rounded down to a multiple
/// of `every` (so the block stays put for `every` results, then jumps), past the run of results
/// it belongs to.
pub fn insertion_point_every(history: &[Message], every: usize) -> usize {
    let results: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, message)| message.is_result())
        .map(|(index, _)| index)
        .collect();
    if results.len() >= RESULTS_FROM_THE_END {
        let every = every.max(1);
        let ordinal = (results.len() - RESULTS_FROM_THE_END) / every * every;
        let index = results[ordinal];
        let run = history[index..]
            .iter()
            .take_while(|m| m.is_result())
            .count();
        return index + run;
    }
    history
        .iter()
        .position(|m| m.role == Role::User && m.kind == MessageKind::Plain)
        .map_or(0, |first_user| first_user + 1)
}

#[cfg(test)]
mod tests;
