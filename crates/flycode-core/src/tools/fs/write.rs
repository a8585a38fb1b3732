//! `fs.write`: overwrite atomically or append; an `expectedSha256` precondition.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ErrorCode;
use crate::protocol::{ToolName, ToolSet};
use crate::sandbox::{LastComponent, Sandbox, WriteMode};
use crate::tools::fs::ls::human_size;
use crate::tools::fs::omission;
use crate::tools::fs::read::MAX_READ_BYTES;
use crate::tools::preview::{self, Preview};
use crate::tools::secrets::Secrets;
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
    if mode == WriteMode::Overwrite {
        refuse_omission(sandbox, &args.path, &args.content, "")?;
    }
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
                Some("read the file (fs.read shows its sha256) and base the change on its current content; give expectedSha256 only as a read of this file showed it"),
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
        kept: None,
    })
}

/// The omission guard on an overwrite (see [`super::omission`]): refuses `content` that would
/// replace the existing file at `path` by an abbreviation. `which` names the entry in a batch
/// (`files[2] `), empty otherwise. A file that cannot be read here is not judged: the write itself
/// reports what is wrong with it.
pub fn refuse_omission(
    sandbox: &Sandbox,
    path: &str,
    content: &str,
    which: &str,
) -> Result<(), ToolError> {
    use std::io::Read;
    // Cheap checks first: a file that does not exist or would not be halved is not judged, and
    // its size costs one `stat`; the lines are looked at only after that (PROTOCOL.md §9 (Tools:
    // the omission guard)).
    // A protected path is refused by the write itself, with the reason that matters more.
    let is_protected = sandbox
        .resolve(path, LastComponent::Follow)
        .is_ok_and(|resolved| {
            sandbox
                .protection()
                .check(path, &resolved.absolute)
                .is_err()
        });
    if is_protected {
        return Ok(());
    }
    let Ok(mut file) = sandbox.open_for_reading(path) else {
        return Ok(());
    };
    let size = file.metadata().map_or(0, |m| m.len());
    if (content.len() as u64).saturating_mul(2) >= size || size > MAX_READ_BYTES {
        return Ok(());
    }
    let mut old = Vec::new();
    if file.read_to_end(&mut old).is_err() {
        return Ok(());
    }
    match omission::judge_overwrite(&old, content) {
        None => Ok(()),
        Some(found) => Err(ToolError::new(
            ErrorCode::OmissionPlaceholder,
            format!(
                "{which}{path}: the new content ({} bytes) would replace {} lines ({} bytes) and its line {} is a placeholder ({:?}), not the code it stands for; nothing was written",
                content.len(),
                omission::count_lines(&old),
                old.len(),
                found.line,
                found.text,
            ),
            Some(OMISSION_HINT_EDIT),
        )),
    }
}

/// The omission guard's hint where `fs.edit` is offered.
const OMISSION_HINT_EDIT: &str = "use fs.edit to change only the parts that change, or write the whole file with the real text in place of the placeholder";

/// An omission refusal's hint for the tools the calls were offered: `fs.edit` is named only
/// where it is offered (PROTOCOL.md §9 (Tools: the omission guard)).
pub fn hint_for_offered(mut error: ToolError, offered: ToolSet) -> ToolError {
    if error.code == ErrorCode::OmissionPlaceholder && !offered.contains(ToolName::FsEdit) {
        error.hint = Some(
            "write the whole file with the real text in place of the placeholder: every line, also those that do not change".to_owned(),
        );
    }
    error
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
        let effects = Effects::writing([args.path.as_str()]).staging_first();
        match args.mode {
            ModeArg::Overwrite => effects.replacing_files(),
            ModeArg::Append => effects.appending([args.path.as_str()]),
        }
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
        let Some(hash) = output.data["sha256"].as_str() else {
            return Vec::new();
        };
        let (path, hash) = (args.path.clone(), hash.to_owned());
        vec![match args.mode {
            ModeArg::Overwrite => SessionChange::Wrote(path, hash),
            ModeArg::Append => SessionChange::Appended(path, hash),
        }]
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

    /// The diff of the file against what the write would leave (an append: the file with the
    /// content at its end).
    fn preview(&self, args: &WriteArgs, sandbox: &Sandbox, secrets: &Secrets) -> Option<Preview> {
        let append = args.mode == ModeArg::Append;
        preview::file_write(sandbox, secrets, &args.path, &args.content, append)
    }

    fn run(&self, context: &ToolContext<'_>, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args).map_err(|error| hint_for_offered(error, context.limits.tool_set))
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;
    use crate::sandbox::Roots;

    fn overwrite(sandbox: &Sandbox, path: &std::path::Path, content: &str) -> Option<ErrorCode> {
        let args = WriteArgs {
            path: path.display().to_string(),
            mode: ModeArg::Overwrite,
            content: content.to_owned(),
            expected_sha256: None,
        };
        run(sandbox, &args).err().map(|e| e.code)
    }

    #[test]
    fn an_abbreviated_overwrite_is_refused_unless_the_path_is_protected() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        let long: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let short = "line 1\n// ... rest of the file unchanged ...\n";
        std::fs::write(root.join("a.txt"), &long).unwrap();
        assert_eq!(
            overwrite(&sandbox, &root.join("a.txt"), short),
            Some(ErrorCode::OmissionPlaceholder)
        );
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), long);
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), &long).unwrap();
        // The whole file again is no abbreviation.
        assert_eq!(overwrite(&sandbox, &root.join("a.txt"), &long), None);
        assert_eq!(
            overwrite(&sandbox, &root.join(".git/config"), short),
            Some(ErrorCode::DeniedByPolicy)
        );
    }
}
