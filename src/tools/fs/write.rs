//! `fs.write`: overwrite atomically or append; an `expectedSha256` precondition.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::{Sandbox, WriteMode};
use crate::tools::fs::ls::human_size;
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};
use std::path::PathBuf;

/// The arguments of `fs.write` (see `protocol/schemas/fs.write.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteArgs {
    /// The file.
    pub path: String,
    /// `overwrite` or `append`.
    pub mode: ModeArg,
    /// The text to write.
    pub content: String,
    /// The sha256 the current content must have.
    pub expected_sha256: Option<String>,
}

/// The `mode` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeArg {
    /// Replace the content.
    Overwrite,
    /// Add to the end.
    Append,
}

/// Runs `fs.write`.
pub fn run(sandbox: &Sandbox, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
    let mode = match args.mode {
        ModeArg::Overwrite => WriteMode::Overwrite,
        ModeArg::Append => WriteMode::Append,
    };
    let outcome = sandbox
        .write_file(
            &args.path,
            args.content.as_bytes(),
            mode,
            args.expected_sha256.as_deref(),
        )?
        .map_err(|mismatch| {
            ToolError::new(
                ErrorCode::Sha256Mismatch,
                format!(
                    "{} has changed: its sha256 is {}, not the expected {}; nothing was written",
                    args.path,
                    mismatch.actual,
                    args.expected_sha256.as_deref().unwrap_or_default()
                ),
                Some("read the file again and base the change on its current content"),
            )
        })?;
    let verb = match (mode, outcome.created) {
        (_, true) => "created",
        (WriteMode::Overwrite, false) => "replaced",
        (WriteMode::Append, false) => "appended to",
    };
    Ok(ToolOutput {
        body: Some(format!(
            "{verb} {} ({} bytes written)",
            outcome.path.display(),
            outcome.bytes_written
        )),
        fields: vec![
            ("bytes".to_owned(), outcome.bytes_written.to_string()),
            ("sha256".to_owned(), outcome.sha256.clone()),
        ],
        data: json!({
            "path": outcome.path.display().to_string(),
            "bytesWritten": outcome.bytes_written,
            "sha256": outcome.sha256,
            "created": outcome.created,
        }),
        continue_hint: None,
    })
}

/// `fs.write` in the registry.
pub struct FsWrite;

impl Tool for FsWrite {
    type Args = WriteArgs;
    const NAME: ToolName = ToolName::FsWrite;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    fn effects<'a>(&self, args: &'a WriteArgs) -> Effects<'a> {
        Effects::writing([args.path.as_str()])
    }

    fn guarded_paths<'a>(&self, args: &'a WriteArgs) -> Vec<&'a str> {
        match args.expected_sha256 {
            None => vec![args.path.as_str()],
            Some(_) => Vec::new(),
        }
    }

    fn session_changes<'a>(
        &self,
        args: &'a WriteArgs,
        output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        output.data["sha256"]
            .as_str()
            .map(|hash| SessionChange::Wrote(args.path.clone(), hash.to_owned()))
            .into_iter()
            .collect()
    }

    fn subject(&self, args: &WriteArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let bytes = output
            .data
            .get("bytesWritten")
            .and_then(serde_json::Value::as_u64);
        format!("Wrote {}", human_size(bytes.unwrap_or(0)))
    }

    fn run(&self, context: &ToolContext<'_>, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}
