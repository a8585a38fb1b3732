//! `fs.mv`: move or rename; `toPath` is the final name; no clobbering without `overwrite`.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};
use std::path::PathBuf;

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
pub fn run(sandbox: &Sandbox, args: &MvArgs) -> Result<ToolOutput, ToolError> {
    sandbox.rename(&args.from_path, &args.to_path, args.overwrite)?;
    Ok(ToolOutput {
        body: Some(format!("moved {} to {}", args.from_path, args.to_path)),
        fields: Vec::new(),
        data: json!({"fromPath": args.from_path, "toPath": args.to_path}),
        continue_hint: None,
        kept: None,
    })
}

/// `fs.mv` in the registry.
pub struct FsMv;

impl Tool for FsMv {
    type Args = MvArgs;
    const NAME: ToolName = ToolName::FsMv;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    fn effects<'a>(&self, args: &'a MvArgs) -> Effects<'a> {
        Effects::writing([args.from_path.as_str(), args.to_path.as_str()]).on_whole_paths()
    }

    fn guarded_paths<'a>(&self, args: &'a MvArgs) -> Vec<&'a str> {
        vec![args.from_path.as_str()]
    }

    fn session_changes<'a>(
        &self,
        args: &'a MvArgs,
        _output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        vec![SessionChange::Forget(&args.from_path)]
    }

    fn subject(&self, args: &MvArgs, roots: &[PathBuf]) -> String {
        format!(
            "{} → {}",
            shorten_path(&args.from_path, roots),
            shorten_path(&args.to_path, roots)
        )
    }

    fn summary(&self, _output: &ToolOutput) -> String {
        "Moved".to_owned()
    }

    fn run(&self, context: &ToolContext<'_>, args: &MvArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}
