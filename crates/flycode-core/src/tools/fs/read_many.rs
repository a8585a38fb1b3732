//! `fs.readMany`: several files in one call (PROTOCOL.md §9 (Tools), seed 001's ReadManyFiles), read-only.
//!
//! The paths are planned first (`plan.rs`: literal paths resolved, globs expanded below their
//! literal directory prefix by fs.search's walk, `exclude` applied to glob matches, each file
//! once), then read in that order through the sandbox until the output cap (`body.rs`): what
//! does not fit is listed, never dropped. A path that fails is listed under Errors; the call
//! fails only when every entry failed.

pub mod body;
pub mod plan;

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::protocol::{ErrorCode, ToolName};
use crate::sandbox::Sandbox;
use crate::tools::tool::{
    ApprovalClass, Effects, SessionChange, Tool, ToolContext, plural, shorten_path,
};
use crate::tools::{Limits, ToolError, ToolOutput};

pub use body::seed_size;
use body::{Cut, ReadManyReport};

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

/// Runs `fs.readMany` with the body cap and cancel flag of `limits`.
pub fn run(
    sandbox: &Sandbox,
    limits: &Limits,
    args: &ReadManyArgs,
) -> Result<ToolOutput, ToolError> {
    let exclude = plan::exclude_set(&args.exclude)?;
    let cancel = limits.cancel.as_deref();
    let planned = plan::plan(sandbox, &args.paths, &exclude, cancel);
    let report = body::read_planned(
        sandbox,
        &planned,
        limits.output_cap,
        args.max_bytes_per_file,
        cancel,
        &limits.secrets(),
    )?;
    let output = output_of(&report);
    if report.all_failed() {
        return Err(all_failed(&report, output));
    }
    Ok(output)
}

fn output_of(report: &ReadManyReport) -> ToolOutput {
    let files: Vec<Value> = report
        .files
        .iter()
        .map(|file| {
            json!({
                "path": file.path,
                "size": file.size,
                "lines": file.lines,
                "shownBytes": file.shown_bytes,
                "truncated": file.cut.is_some(),
                "cutBy": file.cut.map(|cut| match cut {
                    Cut::PerFile => "maxBytesPerFile",
                    Cut::OutputCap => "outputCap",
                }),
                "sha256": file.sha256,
            })
        })
        .collect();
    let errors: Vec<Value> = report
        .errors
        .iter()
        .map(|e| json!({"path": e.path, "code": e.code.as_str(), "error": e.reason}))
        .collect();
    let mut fields = Vec::new();
    if report.is_truncated() {
        fields.push(("truncated".to_owned(), "true".to_owned()));
    }
    ToolOutput {
        body: Some(report.body.clone()),
        fields,
        data: json!({
            "files": files,
            "totalFiles": report.files.len(),
            "totalBytes": report.total_bytes(),
            "errors": errors,
            "notRead": report.not_read,
            "moreMatches": report.more_matches,
        }),
        continue_hint: Some(
            "read the files listed under Not read in another fs.readMany call".to_owned(),
        ),
        kept: None,
    }
}

/// Every entry failed: the first one's code, a message naming them all, and the body.
fn all_failed(report: &ReadManyReport, output: ToolOutput) -> ToolError {
    const NAMED: usize = 5;
    let code = report
        .errors
        .first()
        .map_or(ErrorCode::NotFound, |e| e.code);
    let mut named: Vec<String> = report
        .errors
        .iter()
        .take(NAMED)
        .map(|e| format!("{}: {}", e.path, e.reason))
        .collect();
    if report.errors.len() > NAMED {
        named.push(format!("and {} more", report.errors.len() - NAMED));
    }
    let mut error = ToolError::new(
        code,
        format!("fs.readMany read no file: {}", named.join("; ")),
        Some(
            "name files that exist inside the allowed roots (absolute paths or globs such as /abs/src/**/*.rs); fs.ls and fs.search find them",
        ),
    );
    error.output = Some(Box::new(output));
    error
}

/// `fs.readMany` in the registry.
pub struct FsReadMany;

impl Tool for FsReadMany {
    type Args = ReadManyArgs;
    const NAME: ToolName = ToolName::FsReadMany;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    /// The paths as given, globs included: each file a glob finds is still opened through the
    /// sandbox, inside the roots only.
    fn effects<'a>(&self, args: &'a ReadManyArgs) -> Effects<'a> {
        Effects::reading(args.paths.iter().map(String::as_str))
    }

    /// The files shown whole, with the hash of what was shown (the stale-read guard's memory);
    /// a file shown in part was not seen.
    fn session_changes<'a>(
        &self,
        _args: &'a ReadManyArgs,
        output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        let files = output.data["files"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        files
            .iter()
            .filter_map(|file| {
                let path = file["path"].as_str()?;
                let hash = file["sha256"].as_str()?;
                Some(SessionChange::Saw(path.to_owned(), hash.to_owned()))
            })
            .collect()
    }

    /// The one path when one is given (as seed 001 shows it), else `3 files`.
    fn subject(&self, args: &ReadManyArgs, roots: &[PathBuf]) -> String {
        match args.paths.as_slice() {
            [one] => shorten_path(one, roots),
            paths => plural(paths.len(), "file"),
        }
    }

    /// `Read 3 files (12.5 KB)`, `Read 3 files (12.5 KB), 2 errors` (seed 001's words), and how
    /// many were left for the output cap.
    fn summary(&self, output: &ToolOutput) -> String {
        let count = |key: &str| output.data[key].as_array().map_or(0, Vec::len);
        let files = output.data["totalFiles"].as_u64().unwrap_or(0);
        let bytes = output.data["totalBytes"].as_u64().unwrap_or(0);
        let mut line = format!(
            "Read {} ({})",
            plural(usize::try_from(files).unwrap_or(usize::MAX), "file"),
            seed_size(bytes)
        );
        let errors = count("errors");
        if errors > 0 {
            line.push_str(&format!(", {}", plural(errors, "error")));
        }
        let not_read = count("notRead");
        if not_read > 0 {
            line.push_str(&format!(", {not_read} not read (output cap)"));
        }
        line
    }

    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
        let errors = output?.data["errors"].as_array()?.len();
        Some(format!(
            "Failed: {code} · read no file, {}",
            plural(errors, "error")
        ))
    }

    fn run(&self, context: &ToolContext<'_>, args: &ReadManyArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, context.limits, args)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests;
