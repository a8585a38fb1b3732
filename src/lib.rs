//! flycode lets a language model in a chat window work on a real machine through a small
//! tagged-block protocol: the model writes one fenced `flycode-call` JSON block, flycode judges
//! it against the protocol and the user's policy, runs the tool, and answers with a well-formed
//! `flycode-result` block.
//!
//! The layers are crates of one workspace, re-exported here under their module names (the
//! arrows point one way: `flycode` → `flycode-agent` → `flycode-core` → `flycode-sandbox` →
//! `flycode-protocol`):
//!
//! - [`protocol`]: replies, verdicts, calls, schemas, result blocks, slash commands, prompts;
//! - [`tools`]: the whitelisted tools, working through the sandbox;
//! - [`sandbox`]: allowed roots, containment, file access;
//! - [`tags`]: seed 000's tag dialect run through the call service, answered in the tag form;
//! - [`watch`]: replies from an inbox folder (and, next, the clipboard) answered once each;
//! - [`agent`]: `flycode run`, the API-backed loop: client, prompt, special messages, transcript;
//! - [`validate`]: recorded conversations checked against the protocol;
//! - [`config`]: flags, `flycode.toml` and defaults resolved into one configuration;
//! - [`cli`]: the `flycode` commands, the only code that prints.

pub mod cli;
pub(crate) mod http_checks;
pub mod mcp;
pub mod validate;
pub mod watch;

pub use flycode_agent as agent;
pub use flycode_core::{config, tags, tools};
pub use flycode_protocol as protocol;
pub use flycode_sandbox as sandbox;
