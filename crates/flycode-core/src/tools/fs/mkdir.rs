//! `fs.mkdir`: create a directory; with `parents`, like `mkdir -p`.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};
use std::path::PathBuf;

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
pub fn run(sandbox: &Sandbox, args: &MkdirArgs) -> Result<ToolOutput, ToolError> {
    sandbox.make_dir(&args.path, args.parents)?;
    Ok(ToolOutput {
        body: Some(format!("created {}", args.path)),
        fields: Vec::new(),
        data: json!({"path": args.path}),
        continue_hint: None,
        kept: None,
    })
}

/// `fs.mkdir` in the registry.
pub struct FsMkdir;

impl Tool for FsMkdir {
    type Args = MkdirArgs;
    const NAME: ToolName = ToolName::FsMkdir;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    fn effects<'a>(&self, args: &'a MkdirArgs) -> Effects<'a> {
        Effects {
            creates: vec![args.path.as_str()],
            ..Effects::default()
        }
    }

    fn subject(&self, args: &MkdirArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, _output: &ToolOutput) -> String {
        "Created".to_owned()
    }

    fn run(&self, context: &ToolContext<'_>, args: &MkdirArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}
