//! The `fs.search` tool: arguments in, the search path opened through the sandbox's handles, the
//! engine run on it, a body out.

use serde::Deserialize;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Query, SearchError, SearchRequest, Start, parse_rfc3339_bound};
use crate::protocol::{ErrorCode, ToolName};
use crate::sandbox::{LastComponent, RootedPath, Sandbox};
use crate::tools::secrets::Secrets;
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, field, plural, shorten_path};
use crate::tools::{Limits, ToolError, ToolOutput};

/// The arguments of `fs.search`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchArgs {
    path: String,
    query: String,
    #[serde(default)]
    regex: bool,
    glob: Option<String>,
    limit: Option<usize>,
    #[serde(default)]
    extensions: Vec<String>,
    min_bytes: Option<u64>,
    max_bytes: Option<u64>,
    mtime_from: Option<String>,
    mtime_to: Option<String>,
    #[serde(default)]
    context_lines: usize,
}

/// Runs `fs.search`, masking the secrets of the default limits.
pub fn run(sandbox: &Sandbox, args: &SearchArgs) -> Result<ToolOutput, ToolError> {
    search_in(sandbox, args, None, Limits::default().secrets())
}

/// Runs `fs.search`, stopping at once when `cancel` is set (Ctrl-C in `flycode run`), with
/// `secrets` masked in every file searched.
pub(super) fn search_in(
    sandbox: &Sandbox,
    args: &SearchArgs,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    secrets: Secrets,
) -> Result<ToolOutput, ToolError> {
    let path = sandbox.resolve(&args.path, LastComponent::Follow)?;
    if !path.exists {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!("{} does not exist", args.path),
            None,
        ));
    }
    let bound = |text: &Option<String>, is_end: bool| -> Result<_, ToolError> {
        text.as_deref()
            .map(|t| parse_rfc3339_bound(t, is_end))
            .transpose()
            .map_err(|e| ToolError::new(e.code(), format!("fs.search: {e}"), None))
    };
    let mut request = SearchRequest::new(path.absolute.clone(), args.query.clone());
    request.regex = args.regex;
    request.glob.clone_from(&args.glob);
    request.extensions.clone_from(&args.extensions);
    request.min_bytes = args.min_bytes;
    request.max_bytes = args.max_bytes;
    request.mtime_from = bound(&args.mtime_from, false)?;
    request.mtime_to = bound(&args.mtime_to, true)?;
    request.context_lines = args.context_lines.min(20);
    request.limit = args.limit.unwrap_or(100).max(1);
    request.cancel = cancel;
    request.secrets = secrets;
    let engine_error = |error: SearchError| ToolError::new(error.code(), error.to_string(), None);
    let query = Query::new(&request).map_err(engine_error)?;
    let start = open_start(sandbox, &args.path, &path)?;
    let output = query.search(start).map_err(engine_error)?;
    let matches = output.lines.iter().filter(|l| !l.is_context).count();
    let mut body = output.render();
    if body.is_empty() {
        body = format!(
            "no matches for {:?} in {} file(s)\n",
            args.query, output.files_searched
        );
    }
    let mut fields = vec![
        ("matches".to_owned(), matches.to_string()),
        (
            "files".to_owned(),
            format!(
                "{} searched, {} matched",
                output.files_searched, output.files_matched
            ),
        ),
    ];
    if output.truncated {
        fields.push(("truncated".to_owned(), "true".to_owned()));
    }
    Ok(ToolOutput {
        body: Some(body),
        fields,
        data: json!({
            "lines": output.lines.iter().map(|l| json!({
                "path": l.path.display().to_string(), "line": l.line_number, "text": l.text, "context": l.is_context
            })).collect::<Vec<_>>(),
            "truncated": output.truncated,
            "filesSearched": output.files_searched,
            "filesMatched": output.files_matched,
        }),
        continue_hint: Some(
            "narrow the search with path, glob, extensions or a more specific query".to_owned(),
        ),
        kept: None,
    })
}

/// Opens the search path through the sandbox: a directory from its root's handle (the walk goes on
/// from that handle), a file as a regular file that never blocks; anything else is refused.
fn open_start(sandbox: &Sandbox, input: &str, path: &RootedPath) -> Result<Start, ToolError> {
    let meta = sandbox.metadata(input)?;
    if meta.is_dir() {
        let (dir, _) = sandbox.open_dir(input)?;
        let root = sandbox.root_dir(path);
        let root_path = path
            .absolute
            .ancestors()
            .nth(path.relative.components().count())
            .unwrap_or(&path.absolute);
        return Ok(
            Start::directory(dir, path.absolute.clone(), root, root_path, &path.relative)
                .skipping(sandbox.protection().own_paths()),
        );
    }
    if meta.is_file() {
        return Ok(Start::file(sandbox.open_for_reading(input)?));
    }
    let error = SearchError::SpecialFile {
        path: path.absolute.clone(),
    };
    Err(ToolError::new(error.code(), error.to_string(), None))
}

/// `fs.search` in the registry.
pub struct FsSearch;

impl Tool for FsSearch {
    type Args = SearchArgs;
    const NAME: ToolName = ToolName::FsSearch;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, args: &'a SearchArgs) -> Effects<'a> {
        Effects::reading([args.path.as_str()])
    }

    fn subject(&self, args: &SearchArgs, roots: &[PathBuf]) -> String {
        format!("{:?} in {}", args.query, shorten_path(&args.path, roots))
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let matches = field(output, "matches")
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let files = output
            .data
            .get("filesMatched")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        format!(
            "Found {} in {}",
            plural(matches, "match"),
            plural(usize::try_from(files).unwrap_or(usize::MAX), "file")
        )
    }

    fn run(&self, context: &ToolContext<'_>, args: &SearchArgs) -> Result<ToolOutput, ToolError> {
        search_in(
            context.sandbox,
            args,
            context.limits.cancel.clone(),
            context.limits.secrets(),
        )
    }
}
