//! `fs.edit`: exact-text replacements in one file (CONTRACT §8, seed 000's `smart_edit`).

use std::path::PathBuf;

use serde::Deserialize;

use crate::protocol::{ErrorCode, ToolName};
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};

/// The arguments of `fs.edit` (see `protocol/schemas/fs.edit.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArgs {
    /// The file.
    pub path: String,
    /// The replacements, in order.
    pub edits: Vec<EditArg>,
    /// The sha256 the current content must have.
    pub expected_sha256: Option<String>,
    /// Show the diff, change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// One replacement.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArg {
    /// The exact text to replace.
    pub old_text: String,
    /// What to put in its place.
    pub new_text: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `fs.edit` in the registry.
pub struct FsEdit;

impl Tool for FsEdit {
    type Args = EditArgs;
    const NAME: ToolName = ToolName::FsEdit;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    fn effects<'a>(&self, args: &'a EditArgs) -> Effects<'a> {
        Effects::writing([args.path.as_str()])
    }

    fn subject(&self, args: &EditArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, _output: &ToolOutput) -> String {
        String::new()
    }

    fn run(&self, _context: &ToolContext<'_>, _args: &EditArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError::new(
            ErrorCode::IoError,
            "fs.edit is being built",
            None,
        ))
    }
}
