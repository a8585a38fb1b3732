//! `fs.rm`: remove a file, a link (never its target) or, with `recursive`, a directory tree.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::sandbox::{Removed, Sandbox};
use crate::tools::{ToolError, ToolOutput, parse_args};

/// The arguments of `fs.rm`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RmArgs {
    /// What to remove.
    pub path: String,
    /// Needed for a directory.
    #[serde(default)]
    pub recursive: bool,
    /// A missing path is not an error.
    #[serde(default)]
    pub force: bool,
}

/// Runs `fs.rm`.
pub fn run(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args: RmArgs = parse_args("fs.rm", args)?;
    let removed = sandbox.remove(&args.path, args.recursive, args.force)?;
    let (what, text) = match removed {
        Removed::File => ("file", format!("removed {}", args.path)),
        Removed::Directory => (
            "directory",
            format!("removed {} and everything in it", args.path),
        ),
        Removed::Nothing => (
            "nothing",
            format!("{} did not exist; nothing removed", args.path),
        ),
    };
    Ok(ToolOutput {
        body: Some(text),
        fields: Vec::new(),
        data: json!({"path": args.path, "removed": what}),
        continue_hint: None,
    })
}
