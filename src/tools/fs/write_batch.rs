//! `fs.writeBatch`: several files, all or nothing.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::write::ModeArg;
use crate::protocol::ErrorCode;
use crate::sandbox::{BatchFile, BatchRefusal, Sandbox, WriteMode};
use crate::tools::{ToolError, ToolOutput, parse_args};

/// The arguments of `fs.writeBatch`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteBatchArgs {
    /// The files.
    pub files: Vec<FileArg>,
}

/// One file of the batch.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileArg {
    /// The file.
    pub path: String,
    /// `overwrite` (default) or `append`.
    pub mode: Option<ModeArg>,
    /// The text.
    pub content: String,
    /// The sha256 the current content must have.
    pub expected_sha256: Option<String>,
}

/// Runs `fs.writeBatch`.
pub fn run(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args: WriteBatchArgs = parse_args("fs.writeBatch", args)?;
    let files: Vec<BatchFile> = args
        .files
        .into_iter()
        .map(|file| BatchFile {
            path: file.path,
            content: file.content.into_bytes(),
            mode: match file.mode {
                Some(ModeArg::Append) => WriteMode::Append,
                _ => WriteMode::Overwrite,
            },
            expected_sha256: file.expected_sha256,
        })
        .collect();
    let outcomes = sandbox
        .write_batch(&files)?
        .map_err(|refusal| match refusal {
            BatchRefusal::Mismatch { index, mismatch } => ToolError::new(
                ErrorCode::Sha256Mismatch,
                format!(
                    "files[{index}] ({}) has changed: its sha256 is {}; no file was written",
                    files[index].path, mismatch.actual
                ),
                Some("read the file again and base the change on its current content"),
            ),
            BatchRefusal::Conflict { message } => ToolError::new(
                ErrorCode::InvalidArgs,
                format!("fs.writeBatch: {message}; no file was written"),
                Some("name each file once, by one path"),
            ),
        })?;
    let mut body = String::new();
    for outcome in &outcomes {
        let verb = if outcome.created { "created" } else { "wrote" };
        body.push_str(&format!(
            "{verb} {} ({} bytes, sha256 {})\n",
            outcome.path.display(),
            outcome.bytes_written,
            outcome.sha256
        ));
    }
    Ok(ToolOutput {
        body: Some(body),
        fields: vec![("files".to_owned(), outcomes.len().to_string())],
        data: json!({"files": outcomes.iter().map(|o| json!({
            "path": o.path.display().to_string(),
            "bytesWritten": o.bytes_written,
            "sha256": o.sha256,
            "created": o.created,
        })).collect::<Vec<_>>()}),
        continue_hint: None,
    })
}
