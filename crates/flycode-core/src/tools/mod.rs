//! The tools of the whitelist: each takes validated arguments, works through the sandbox, and
//! returns a body for the result block plus structured data (for `--json` and API mode).
//!
//! Tools never touch the file system or spawn processes themselves: they go through
//! [`crate::sandbox`]. Each tool describes itself to the [`registry`]; the [`executor`] runs a
//! call by asking its tool.

pub mod agent;
pub mod approval;
pub mod executor;
pub mod fs;
pub mod hint;
pub mod jobs;
pub mod memory;
pub mod places;
pub mod policy;
pub mod preview;
pub mod process;
pub mod registry;
pub mod secrets;
pub mod tool;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::protocol::ErrorCode;
use crate::sandbox::SandboxError;

/// What a tool produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The result block's body.
    pub body: Option<String>,
    /// Extra headers, in order (`[meta]`, `[exitCode]`...).
    pub fields: Vec<(String, String)>,
    /// The same result as structured data.
    pub data: Value,
    /// How to see more when the body is cut at the output cap (e.g. "read on with range 65536-").
    pub continue_hint: Option<String>,
    /// A body left in its file for the door to write out (then `body` is empty): `fs.read` of
    /// a large whole text file, for a door that prints only the result block
    /// ([`crate::sandbox::read::KeptBody`]).
    pub kept: Option<crate::sandbox::read::KeptBody>,
}

/// Why a tool failed: an error the model can correct, rendered as `[ok] false`.
#[derive(Debug, Error)]
#[error("{message}")]
pub struct ToolError {
    /// The contract's code.
    pub code: ErrorCode,
    /// What went wrong, naming the path.
    pub message: String,
    /// What to do instead.
    pub hint: Option<String>,
    /// What the tool produced before it failed (a program's output, a timeout's output so far).
    pub output: Option<Box<ToolOutput>>,
    /// What the person at the terminal could do about it (flags, configuration). Never sent to
    /// the model, whose `hint` says what to send instead (PROTOCOL.md §12 (Watching): two audiences).
    pub advice: Option<String>,
}

/// Limits a tool works within, from the configuration, and how the caller can stop it.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Result body cap in bytes (also each process stream's capture cap).
    pub output_cap: usize,
    /// Default process timeout in milliseconds.
    pub default_timeout_ms: u64,
    /// Set (by Ctrl-C) to stop a running program at once: it and everything it started are
    /// killed, and the call fails with `cancelled`.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Environment variables to keep from programs besides flycode's usual secrets (the variable
    /// `api_key_env` names).
    pub extra_secrets: Vec<String>,
    /// The variables `secret_env` names: kept from programs, and their values masked in every
    /// output, like the API keys.
    pub secret_env: Vec<String>,
    /// `process_sandbox`: how programs are contained (PROTOCOL.md §9 (Tools: what programs may do)).
    pub program_sandbox: crate::sandbox::contain::ProgramSandbox,
    /// `process_network`: whether programs may use TCP.
    pub program_network: bool,
    /// The tools the calls were offered: a hint names only these (the omission guard's
    /// `fs.edit` is no advice where it is not offered), and `flycode run`'s main agent is offered
    /// exactly these.
    pub tool_set: crate::protocol::ToolSet,
    /// Where `memory.query`, the hint tools and predefined agents look.
    pub places: places::Places,
    /// `[jobs] log_bytes`: what one background job's output file holds at most.
    pub job_log_bytes: u64,
    /// `[jobs] max_running`: how many background jobs a session runs at once.
    pub max_running_jobs: u32,
}

impl Limits {
    /// A job table for a session under these limits (PROTOCOL.md §10 (Running calls:
    /// background jobs)).
    pub fn job_table(&self) -> jobs::JobTable {
        jobs::JobTable::new(self.job_log_bytes, self.max_running_jobs)
    }

    /// Every environment variable holding a secret of flycode's: the API keys it knows, the
    /// variable `api_key_env` names and those `secret_env` names.
    pub fn secret_names(&self) -> Vec<String> {
        let mut names: Vec<String> = process::SECRET_VARIABLES
            .iter()
            .map(|name| (*name).to_owned())
            .chain(self.extra_secrets.iter().cloned())
            .chain(self.secret_env.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            output_cap: crate::protocol::DEFAULT_BODY_CAP,
            default_timeout_ms: 60_000,
            cancel: None,
            extra_secrets: Vec::new(),
            secret_env: Vec::new(),
            program_sandbox: crate::sandbox::contain::ProgramSandbox::default(),
            program_network: true,
            tool_set: crate::protocol::ToolSet::Seed,
            places: places::Places::from_environment(),
            job_log_bytes: jobs::DEFAULT_LOG_BYTES,
            max_running_jobs: jobs::DEFAULT_MAX_RUNNING,
        }
    }
}

impl ToolError {
    /// An error with a code, a message and a hint.
    pub fn new(code: ErrorCode, message: impl Into<String>, hint: Option<&str>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            hint: hint.map(str::to_owned),
            output: None,
            advice: None,
        }
    }

    /// The same error with advice for the person at the terminal.
    pub fn with_advice(mut self, advice: impl Into<String>) -> ToolError {
        self.advice = Some(advice.into());
        self
    }
}

/// Reads a tool's validated arguments into its typed `*Args`.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: &Map<String, Value>,
) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| ToolError::new(ErrorCode::InvalidArgs, format!("{tool}: {e}"), None))
}

impl From<SandboxError> for ToolError {
    fn from(error: SandboxError) -> ToolError {
        let hint = match &error {
            SandboxError::OutsideRoots { .. } => {
                Some("use a path inside the allowed roots listed in the prompt")
            }
            SandboxError::SpecialFile { .. } => Some("read regular files only"),
            SandboxError::IsDirectory { .. } => Some("list a directory with fs.ls"),
            _ => None,
        };
        ToolError::new(error.code(), error.to_string(), hint)
    }
}
