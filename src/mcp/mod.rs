//! `flycode mcp` (PROTOCOL.md §14 (The MCP server)): the tool registry served as a Model Context Protocol server
//! over stdio, with the official Rust SDK (`rmcp`), through the same sandbox, policy, output
//! budgets and audit log as every other front end.
//!
//! - [`tools`]: what `tools/list` shows: snake-case names, the tool schemas, annotations.
//! - [`result`]: an [`Execution`](crate::tools::executor::Execution) as a `CallToolResult`.
//! - [`approval`]: a call policy asks about, asked through MCP elicitation.
//! - [`roots`]: the client's roots, which only narrow flycode's.
//! - [`server`]: the handler, cancellation and progress.
//! - [`transport`]: newline-delimited JSON-RPC on stdio, with a direct path for plain tool calls.
//!
//! Nothing here writes to standard output: it carries the protocol alone. Warnings go to
//! standard error.

pub(crate) mod approval;
pub(crate) mod result;
pub(crate) mod roots;
pub(crate) mod server;
pub(crate) mod tools;
pub(crate) mod transport;

pub use server::{McpServer, McpSettings, serve_stdio};
