//! `fs.mv`: move or rename; `toPath` is the final name; no clobbering without `overwrite`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::sandbox::Sandbox;
use crate::tools::{ToolError, ToolOutput, parse_args};

/// The arguments of `fs.mv`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MvArgs {
    /// What to move.
    pub from_path: String,
    /// Its final name.
    pub to_path: String,
    /// Replace an existing `toPath`.
    #[serde(default)]
    pub overwrite: bool,
}

/// Runs `fs.mv`.
pub fn run(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let args: MvArgs = parse_args("fs.mv", args)?;
    sandbox.rename(&args.from_path, &args.to_path, args.overwrite)?;
    Ok(ToolOutput {
        body: Some(format!("moved {} to {}", args.from_path, args.to_path)),
        fields: Vec::new(),
        data: json!({"fromPath": args.from_path, "toPath": args.to_path}),
        continue_hint: None,
    })
}
