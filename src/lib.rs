//! flycode lets a language model in a chat window work on a real machine through a small
//! tagged-block protocol: the model writes one fenced `flycode-call` JSON block, flycode judges
//! it against the protocol and the user's policy, runs the tool, and answers with a well-formed
//! `flycode-result` block.
//!
//! Modules, with dependencies pointing one way (`cli → sandbox`; everyone may use `protocol`):
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

pub mod agent;
pub mod cli;
pub mod config;
pub mod mcp;
pub mod tags;
pub mod tools;
pub mod validate;
pub mod watch;

pub use flycode_protocol as protocol;
pub use flycode_sandbox as sandbox;
