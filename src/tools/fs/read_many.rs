//! `fs.readMany`: several files in one call (CONTRACT §8, seed 001's ReadManyFiles).

use std::path::PathBuf;

use serde::Deserialize;

use crate::protocol::{ErrorCode, ToolName};
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext};
use crate::tools::{ToolError, ToolOutput};

/// The arguments of `fs.readMany` (see `protocol/schemas/fs.readMany.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadManyArgs {
    /// Absolute paths and absolute glob patterns.
    pub paths: Vec<String>,
    /// Globs of files to leave out.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Bytes shown of each file at most.
    pub max_bytes_per_file: Option<u64>,
}

/// `fs.readMany` in the registry.
pub struct FsReadMany;

impl Tool for FsReadMany {
    type Args = ReadManyArgs;
    const NAME: ToolName = ToolName::FsReadMany;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, args: &'a ReadManyArgs) -> Effects<'a> {
        Effects::reading(args.paths.iter().map(String::as_str))
    }

    fn subject(&self, args: &ReadManyArgs, _roots: &[PathBuf]) -> String {
        crate::tools::tool::plural(args.paths.len(), "file")
    }

    fn summary(&self, _output: &ToolOutput) -> String {
        String::new()
    }

    fn run(
        &self,
        _context: &ToolContext<'_>,
        _args: &ReadManyArgs,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::new(
            ErrorCode::IoError,
            "fs.readMany is being built",
            None,
        ))
    }
}
