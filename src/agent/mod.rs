//! `flycode run`: the API-backed auto loop. A task goes to an OpenAI-compatible endpoint; each
//! call the model makes is judged by [`crate::protocol`] and run by [`crate::tools`] under the
//! same roots and policy as everywhere else; results go back until the model answers in prose.
//!
//! - [`message`]: the conversation's messages, in their wire shape;
//! - [`prompt`]: the system prompt and role definition, assembled from modules;
//! - [`context`]: the special user messages (role, TODO list, notes, folder notes) and where they
//!   go in every request.

pub mod context;
pub mod message;
pub mod prompt;

pub use message::{Message, MessageKind, NativeToolCall, Role};
