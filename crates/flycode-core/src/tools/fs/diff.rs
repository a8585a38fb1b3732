//! `fs.diff`: a unified diff of a file against another file or against given text.

use std::io::Read;

use serde::Deserialize;
use serde_json::{Value, json};
use similar::TextDiff;

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::fs::read::MAX_READ_BYTES;
use crate::tools::secrets::Secrets;
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};

/// The arguments of `fs.diff`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiffArgs {
    /// The left (old) file.
    pub left_path: String,
    /// The right (new) file.
    pub right_path: Option<String>,
    /// Or the right side as text.
    pub right_content: Option<String>,
    /// Unchanged lines around each change.
    #[serde(default = "default_context")]
    pub context_lines: usize,
}

fn default_context() -> usize {
    3
}

/// Runs `fs.diff`. Both sides are compared with their secrets masked (PROTOCOL.md §9,
/// "Secrets and masking"), so no hunk shows a part of one, whatever its context lines cut.
pub fn run(sandbox: &Sandbox, args: &DiffArgs, secrets: &Secrets) -> Result<ToolOutput, ToolError> {
    let left = read_text(sandbox, &args.left_path, secrets)?;
    let (right, right_name) = match (&args.right_path, &args.right_content) {
        (Some(path), None) => (read_text(sandbox, path, secrets)?, path.clone()),
        (None, Some(content)) => (
            masked(content.clone().into_bytes(), secrets),
            "(rightContent)".to_owned(),
        ),
        _ => {
            return Err(ToolError::new(
                ErrorCode::MutuallyExclusive,
                "fs.diff: give exactly one of rightPath and rightContent",
                None,
            ));
        }
    };
    let diff = TextDiff::from_lines(&left, &right);
    let changed = left != right;
    let body = if changed {
        diff.unified_diff()
            .context_radius(args.context_lines)
            .header(&args.left_path, &right_name)
            .to_string()
    } else {
        "no differences\n".to_owned()
    };
    Ok(ToolOutput {
        body: Some(body.clone()),
        fields: vec![("changed".to_owned(), changed.to_string())],
        data: json!({"leftPath": args.left_path, "right": right_name, "changed": changed, "diff": if changed { Value::String(body) } else { Value::Null }}),
        continue_hint: Some("diff a narrower part, e.g. with fewer contextLines".to_owned()),
        kept: None,
    })
}

/// `bytes`, known to be UTF-8, with their secrets masked (whole characters: still UTF-8).
fn masked(mut bytes: Vec<u8>, secrets: &Secrets) -> String {
    secrets.mask_bytes(&mut bytes);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn read_text(sandbox: &Sandbox, path: &str, secrets: &Secrets) -> Result<String, ToolError> {
    let mut file = sandbox.open_for_reading(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_READ_BYTES {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!("{path} is {size} bytes, more than fs.diff compares ({MAX_READ_BYTES})"),
            Some("compare smaller files, or run diff with process.run"),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{path}: {e}"), None))?;
    if let Err(e) = std::str::from_utf8(&bytes) {
        return Err(ToolError::new(
            ErrorCode::BinaryContent,
            format!(
                "{path} is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
            Some("fs.diff compares text; compare binary files with process.run (cmp)"),
        ));
    }
    Ok(masked(bytes, secrets))
}

/// `fs.diff` in the registry.
pub struct FsDiff;

impl Tool for FsDiff {
    type Args = DiffArgs;
    const NAME: ToolName = ToolName::FsDiff;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, args: &'a DiffArgs) -> Effects<'a> {
        Effects::reading(std::iter::once(args.left_path.as_str()).chain(args.right_path.as_deref()))
    }

    fn subject(&self, args: &DiffArgs, roots: &[std::path::PathBuf]) -> String {
        match &args.right_path {
            Some(right) => format!(
                "{} ↔ {}",
                shorten_path(&args.left_path, roots),
                shorten_path(right, roots)
            ),
            None => shorten_path(&args.left_path, roots),
        }
    }

    fn summary(&self, output: &ToolOutput) -> String {
        match output.data.get("diff").and_then(Value::as_str) {
            Some(diff) => {
                let changed = |sign: char, other: &str| {
                    diff.lines()
                        .filter(|l| l.starts_with(sign) && !l.starts_with(other))
                        .count()
                };
                format!("+{} -{} lines", changed('+', "+++"), changed('-', "---"))
            }
            None => "No differences".to_owned(),
        }
    }

    fn run(&self, context: &ToolContext<'_>, args: &DiffArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args, &context.limits.secrets())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sandbox::Roots;

    fn setup() -> (tempfile::TempDir, PathBuf, Sandbox) {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(root.join("b.txt"), "one\n2\nthree\n").unwrap();
        std::fs::write(root.join("bin"), [0xff, 0xfe]).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        (temp, root, sandbox)
    }

    fn diff(sandbox: &Sandbox, args: Value) -> Result<ToolOutput, ToolError> {
        run(
            sandbox,
            &crate::tools::parse_args("fs.diff", args.as_object().unwrap())?,
            &Secrets::default(),
        )
    }

    #[test]
    fn no_hunk_shows_a_secret_or_a_part_of_one() {
        let (_t, root, sandbox) = setup();
        let key = "sk-live-0123456789abcdef";
        std::fs::write(root.join("k.txt"), format!("a\nkey={key}\nb\n")).unwrap();
        let secrets = Secrets::from_values([key.to_owned()]);
        let path = root.join("k.txt").display().to_string();
        let args = json!({"leftPath": path, "rightContent": format!("a\nkey={key}x\nc\n")});
        let output = run(
            &sandbox,
            &crate::tools::parse_args("fs.diff", args.as_object().unwrap()).unwrap(),
            &secrets,
        )
        .unwrap();
        let body = output.body.unwrap();
        assert!(!body.contains("sk-live"), "{body}");
        let stars = "*".repeat(key.len());
        assert!(body.contains(&format!("-key={stars}\n")), "{body}");
        assert!(body.contains(&format!("+key={stars}x\n")), "{body}");
    }

    #[test]
    fn unified_diff_of_two_files() {
        let (_t, root, sandbox) = setup();
        let (a, b) = (
            root.join("a.txt").display().to_string(),
            root.join("b.txt").display().to_string(),
        );
        let output = diff(
            &sandbox,
            json!({"leftPath": a, "rightPath": b, "contextLines": 0}),
        )
        .unwrap();
        assert_eq!(
            output.body.unwrap(),
            format!("--- {a}\n+++ {b}\n@@ -2 +2 @@\n-two\n+2\n")
        );
    }

    #[test]
    fn equal_content_says_no_differences() {
        let (_t, root, sandbox) = setup();
        let a = root.join("a.txt").display().to_string();
        let output = diff(
            &sandbox,
            json!({"leftPath": a, "rightContent": "one\ntwo\nthree\n"}),
        )
        .unwrap();
        assert_eq!(output.body.unwrap(), "no differences\n");
        assert_eq!(output.data["changed"], false);
    }

    #[test]
    fn binary_and_outside_files_are_refused() {
        let (_t, root, sandbox) = setup();
        let bin = root.join("bin").display().to_string();
        assert_eq!(
            diff(&sandbox, json!({"leftPath": bin, "rightContent": ""}))
                .unwrap_err()
                .code,
            ErrorCode::BinaryContent
        );
        assert_eq!(
            diff(
                &sandbox,
                json!({"leftPath": "/etc/hostname", "rightContent": ""})
            )
            .unwrap_err()
            .code,
            ErrorCode::OutsideRoots
        );
    }
}
