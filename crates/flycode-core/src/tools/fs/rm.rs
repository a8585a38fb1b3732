//! `fs.rm`: remove a file, a link (never its target) or, with `recursive`, a directory tree.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ToolName;
use crate::sandbox::{Removed, Sandbox};
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};
use std::path::PathBuf;

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
pub fn run(sandbox: &Sandbox, args: &RmArgs) -> Result<ToolOutput, ToolError> {
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
        kept: None,
    })
}

/// `fs.rm` in the registry.
pub struct FsRm;

impl Tool for FsRm {
    type Args = RmArgs;
    const NAME: ToolName = ToolName::FsRm;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    fn effects<'a>(&self, args: &'a RmArgs) -> Effects<'a> {
        Effects::writing([args.path.as_str()])
            .on_whole_paths()
            .replacing_files()
    }

    fn guarded_paths<'a>(&self, args: &'a RmArgs) -> Vec<&'a str> {
        vec![args.path.as_str()]
    }

    fn session_changes<'a>(
        &self,
        args: &'a RmArgs,
        _output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        vec![SessionChange::Forget(&args.path)]
    }

    fn subject(&self, args: &RmArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, _output: &ToolOutput) -> String {
        "Removed".to_owned()
    }

    fn run(&self, context: &ToolContext<'_>, args: &RmArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}
