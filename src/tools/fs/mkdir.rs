//! `fs.mkdir`: create a directory; with `parents`, like `mkdir -p`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::sandbox::Sandbox;
use crate::tools::{ToolError, ToolOutput, parse_args};

/// The arguments of `fs.mkdir`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MkdirArgs {
    /// The directory to create.
    pub path: String,
    /// Create missing parents and accept an existing directory.
    #[serde(default)]
    pub parents: bool,
}

/// Runs `fs.mkdir`.
pub fn run(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args: MkdirArgs = parse_args("fs.mkdir", args)?;
    sandbox.make_dir(&args.path, args.parents)?;
    Ok(ToolOutput {
        body: Some(format!("created {}", args.path)),
        fields: Vec::new(),
        data: json!({"path": args.path}),
        continue_hint: None,
    })
}
