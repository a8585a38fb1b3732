//! `fs.writeBatch`: several files, all or nothing.

use serde::Deserialize;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::write::{ModeArg, refuse_omission};
use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::{
    BatchFile, BatchRefusal, LastComponent, Sandbox, SandboxError, WriteMode, WriteOutcome,
};
use crate::tools::fs::ls::human_size;
use crate::tools::preview::{self, Preview};
use crate::tools::secrets::Secrets;
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, plural};
use crate::tools::{ToolError, ToolOutput};

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

/// Runs `fs.writeBatch`. The omission guard judges every overwrite entry as it judges
/// `fs.write`'s overwrite (a batch is no way around it); one abbreviated file refuses the batch.
pub fn run(sandbox: &Sandbox, args: &WriteBatchArgs) -> Result<ToolOutput, ToolError> {
    refuse_omissions(sandbox, args)?;
    let files = batch_files(args);
    // Each entry's path first, so a refusal names the entry it is about.
    for (index, file) in files.iter().enumerate() {
        check_entry(sandbox, &file.path)
            .map_err(|error| entry_error(&files, Some(index), error))?;
    }
    let outcomes = write_all(sandbox, &files)?;
    Ok(batch_output(&outcomes))
}

/// Refuses the batch when an overwrite entry looks abbreviated (the omission guard of
/// `fs.write`, its message saying no file was written).
fn refuse_omissions(sandbox: &Sandbox, args: &WriteBatchArgs) -> Result<(), ToolError> {
    for (index, file) in args.files.iter().enumerate() {
        if file.mode != Some(ModeArg::Append) {
            refuse_omission(
                sandbox,
                &file.path,
                &file.content,
                &format!("files[{index}] "),
            )
            .map_err(|mut error| {
                error.message = error
                    .message
                    .replace("; nothing was written", "; no file was written");
                error
            })?;
        }
    }
    Ok(())
}

/// The batch's entries as the sandbox writes them.
fn batch_files(args: &WriteBatchArgs) -> Vec<BatchFile> {
    args.files
        .iter()
        .map(|file| BatchFile {
            path: file.path.clone(),
            content: file.content.clone().into_bytes(),
            mode: match file.mode {
                Some(ModeArg::Append) => WriteMode::Append,
                _ => WriteMode::Overwrite,
            },
            expected_sha256: file.expected_sha256.clone(),
        })
        .collect()
}

/// Writes every entry or none; a failure or refusal names the entry it is about.
fn write_all(sandbox: &Sandbox, files: &[BatchFile]) -> Result<Vec<WriteOutcome>, ToolError> {
    sandbox
        .write_batch(files)
        .map_err(|error| {
            // The entry whose path the error names, when one does.
            let text = error.to_string();
            let index = files
                .iter()
                .position(|file| text.contains(file.path.as_str()));
            entry_error(files, index, error)
        })?
        .map_err(|refusal| match refusal {
            BatchRefusal::Mismatch { index, mismatch } => ToolError::new(
                ErrorCode::Sha256Mismatch,
                format!(
                    "files[{index}] ({}) has changed: its sha256 is {}; no file was written",
                    files[index].path, mismatch.actual
                ),
                Some("read the file (fs.read shows its sha256) and base the change on its current content; give expectedSha256 only as a read of this file showed it"),
            ),
            BatchRefusal::Conflict { message } => ToolError::new(
                ErrorCode::InvalidArgs,
                format!("fs.writeBatch: {message}; no file was written"),
                Some("name each file once, by one path"),
            ),
        })
}

/// The result of a written batch: one line and one data entry per file.
fn batch_output(outcomes: &[WriteOutcome]) -> ToolOutput {
    let mut body = String::new();
    for outcome in outcomes {
        let verb = if outcome.created { "created" } else { "wrote" };
        body.push_str(&format!(
            "{verb} {} ({} bytes, sha256 {})\n",
            outcome.path.display(),
            outcome.bytes_written,
            outcome.sha256
        ));
    }
    ToolOutput {
        body: Some(body),
        fields: vec![("files".to_owned(), outcomes.len().to_string())],
        data: json!({"files": outcomes.iter().map(|o| json!({
            "path": o.path.display().to_string(),
            "bytesWritten": o.bytes_written,
            "sha256": o.sha256,
            "created": o.created,
        })).collect::<Vec<_>>()}),
        continue_hint: None,
        kept: None,
    }
}

/// The checks the batch makes of one entry's path before it writes anything: inside a root,
/// not a root itself, not protected.
fn check_entry(sandbox: &Sandbox, path: &str) -> Result<(), SandboxError> {
    let resolved = sandbox.resolve(path, LastComponent::Follow)?;
    if resolved.is_root() {
        return Err(SandboxError::IsDirectory {
            path: path.to_owned(),
        });
    }
    sandbox.protection().check(path, &resolved.absolute)
}

/// A refusal of the whole batch: the entry it is about (`files[1]`), and that no file was
/// written (PROTOCOL.md §9 (Tools: fs.writeBatch)).
fn entry_error(files: &[BatchFile], index: Option<usize>, error: SandboxError) -> ToolError {
    let mut error = ToolError::from(error);
    error.message = match index {
        Some(index) => format!(
            "files[{index}] ({}): {}; no file was written",
            files[index].path, error.message
        ),
        None => format!("fs.writeBatch: {}; no file was written", error.message),
    };
    error
}

/// `fs.writeBatch` in the registry.
pub struct FsWriteBatch;

impl Tool for FsWriteBatch {
    type Args = WriteBatchArgs;
    const NAME: ToolName = ToolName::FsWriteBatch;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    fn effects<'a>(&self, args: &'a WriteBatchArgs) -> Effects<'a> {
        // Each path is named once in a batch (an alias is refused), so an appended path is only
        // appended to.
        Effects::writing(args.files.iter().map(|file| file.path.as_str()))
            .staging_first()
            .replacing_files()
            .appending(
                args.files
                    .iter()
                    .filter(|file| file.mode == Some(ModeArg::Append))
                    .map(|file| file.path.as_str()),
            )
    }

    fn guarded_paths<'a>(&self, args: &'a WriteBatchArgs) -> Vec<&'a str> {
        args.files
            .iter()
            .filter(|file| file.expected_sha256.is_none())
            .map(|file| file.path.as_str())
            .collect()
    }

    fn session_changes<'a>(
        &self,
        args: &'a WriteBatchArgs,
        output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        // The output lists the files in the order of the arguments.
        output.data["files"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(&args.files)
            .filter_map(|(file, arg)| {
                let path = file["path"].as_str()?.to_owned();
                let hash = file["sha256"].as_str()?.to_owned();
                Some(match arg.mode {
                    Some(ModeArg::Append) => SessionChange::Appended(path, hash),
                    _ => SessionChange::Wrote(path, hash),
                })
            })
            .collect()
    }

    fn subject(&self, args: &WriteBatchArgs, _roots: &[PathBuf]) -> String {
        plural(args.files.len(), "file")
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let files = output.data.get("files").and_then(Value::as_array);
        let bytes: u64 = files
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("bytesWritten").and_then(Value::as_u64))
            .sum();
        let count = files.map_or(0, Vec::len);
        format!("Wrote {} ({})", plural(count, "file"), human_size(bytes))
    }

    /// Each file's diff in turn, as [`super::write::FsWrite`]'s.
    fn preview(
        &self,
        args: &WriteBatchArgs,
        sandbox: &Sandbox,
        secrets: &Secrets,
    ) -> Option<Preview> {
        Preview::files(args.files.iter().filter_map(|file| {
            let append = file.mode == Some(ModeArg::Append);
            preview::file_write(sandbox, secrets, &file.path, &file.content, append)
        }))
    }

    fn run(
        &self,
        context: &ToolContext<'_>,
        args: &WriteBatchArgs,
    ) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
            .map_err(|error| super::write::hint_for_offered(error, context.limits.tool_set))
    }
}
