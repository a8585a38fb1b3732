//! `flycode run`: the API-backed auto loop. A task goes to an OpenAI-compatible endpoint; each
//! call the model makes is judged by [`crate::protocol`] and run by [`flycode_core::tools`] under the
//! same roots and policy as everywhere else; results go back until the model answers in prose.
//!
//! - [`message`]: the conversation's messages, in their wire shape;
//! - [`client`]: the model API client (HTTP, SSE, retries) behind the [`client::Provider`] trait;
//! - [`prompt`]: the system prompt and role definition, assembled from modules;
//! - [`context`]: the special user messages (role, TODO list, notes, folder notes) and where they
//!   go in every request;
//! - [`settings`]: flags, environment and `flycode.toml` resolved into a run's settings;
//! - [`launch`]: a run put together from its settings (prompt, client, transcripts) and started;
//! - [`turn`]: the loop itself, reporting [`events`] to an observer;
//! - [`parallel`]: the read-only calls of a turn run at once (PROTOCOL.md §13 (The API loop: parallel calls));
//! - [`summary`]: the terminal's one-line summaries of calls and their outcomes;
//! - [`tools`]: the tools as API function definitions;
//! - [`transcript`]: the run recorded as JSON Lines that `flycode validate` accepts;
//! - [`predefined`]: predefined agents (`.flycode/agents/NAME.md`) for `agent.task` with `name`;
//! - [`recall`]: the light model condensing what `memory.query` finds;
//! - [`tags_prompt`]: the tag dialect's system prompt (seed 000), rendered;
//! - [`compaction`]: older turns replaced by a summary when the context fills up;
//! - [`resume`]: an earlier run read back from its transcript (`flycode run --resume`).

pub mod calls;
pub mod client;
pub mod compaction;
pub mod context;
pub mod events;
pub mod launch;
pub mod message;
pub mod parallel;
pub mod predefined;
pub mod prompt;
pub mod recall;
pub mod resume;
pub mod settings;
pub mod summary;
pub mod tags_prompt;
pub mod task;
pub mod tools;
pub mod transcript;
pub mod turn;

pub use message::{Message, MessageKind, NativeToolCall, Role};

// The layers beneath, under the names the code has always used for them.
use flycode_core::{config, tags};
use flycode_protocol as protocol;
use flycode_sandbox as sandbox;
