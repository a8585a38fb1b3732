//! `flycode mcp` (PROTOCOL.md §14 (The MCP server)): the tool registry served as a Model Context
//! Protocol server over stdio, or over streamable HTTP (`--http`), with the official Rust SDK
//! (`rmcp`), through the same sandbox, policy, output budgets and audit log as every other front
//! end.
//!
//! - [`tools`]: what `tools/list` shows: snake-case names, the tool schemas, annotations.
//! - [`result`]: an [`Execution`](crate::tools::executor::Execution) as a `CallToolResult`.
//! - [`approval`]: a call policy asks about, asked through MCP elicitation.
//! - [`roots`]: the client's roots, which only narrow flycode's.
//! - [`server`]: the handler, its connections, cancellation and progress.
//! - [`transport`]: newline-delimited JSON-RPC on stdio, with a direct path for plain tool calls.
//! - [`remote`]: the streamable HTTP transport: who may connect, resumable streams, bounds.
//!
//! Over stdio nothing here writes to standard output: it carries the protocol alone. Warnings
//! go to standard error.

pub(crate) mod approval;
pub(crate) mod remote;
pub(crate) mod result;
pub(crate) mod roots;
pub(crate) mod server;
pub(crate) mod tools;
pub(crate) mod transport;

pub(crate) use remote::serve_http;
pub use server::{McpServer, McpSettings, SessionOpener, serve_stdio};
