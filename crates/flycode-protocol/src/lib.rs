//! The flycode protocol: reading a model's reply, judging the call in it, and writing the result
//! block that answers it. Pure functions over text: this module does no I/O.
//!
//! - [`parse`]: reply text → fenced blocks with byte spans (normalization, fences, reasoning);
//! - [`blocks`]: CommonMark's block structure, read for fenced code blocks only, in linear time;
//! - [`reasoning`]: the `<think>` elements set aside before either dialect is read;
//! - [`verdict`]: one reply → `none` / `call` / `invalid` with the contract's error ladder;
//! - [`call`] and [`args`]: a block's JSON → a validated [`Call`];
//! - [`schema`]: the embedded tool schemas, the single source of the tools' arguments;
//! - [`result`]: render and read `flycode-result` blocks;
//! - [`backticks`]: the longest run of backticks, which chooses a block's fence;
//! - [`slash`]: slash commands and the `[command]` line;
//! - [`salvage`]: what can be read of a call without its fence, or of a broken block's id;
//! - [`prompt`]: the chat-UI system prompt generated from the schemas.

pub mod args;
pub mod backticks;
pub mod blocks;
pub mod call;
pub mod call_types;
pub mod dialect;
pub mod display;
pub mod error_code;
pub mod inline_code;
pub mod json;
pub mod parse;
pub mod paths;
pub mod prompt;
pub mod quick_check;
pub mod reasoning;
pub mod result;
pub mod salvage;
pub mod schema;
pub mod slash;
pub mod stream;
pub mod tags;
pub mod text_calls;
pub mod time;
pub mod tool_name;
pub mod verdict;
pub mod whole_numbers;

pub use call::{Attempt, Call, CallError};
pub use error_code::{ErrorCode, WarningCode};
pub use result::{DEFAULT_BODY_CAP, RenderedParts, ResultBlock, ResultParseError};
pub use slash::{parse_slash, parse_slash_in, render_command};
pub use tool_name::{ToolName, ToolSet};
pub use verdict::{Classification, ClassifyOptions, Verdict, Warning, classify_reply};
