//! `fs.chmod`: octal (`644`, `0755`) or symbolic (`u+x,go-w`) modes; never setuid, setgid or
//! sticky bits.

use serde::Deserialize;
use serde_json::json;

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::tool::{ApprovalClass, Effects, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};
use std::path::PathBuf;

/// The arguments of `fs.chmod`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChmodArgs {
    /// The file or directory.
    pub path: String,
    /// The mode.
    pub mode: String,
}

/// Runs `fs.chmod`.
pub fn run(sandbox: &Sandbox, args: &ChmodArgs) -> Result<ToolOutput, ToolError> {
    let current = sandbox.mode_of(&args.path)?;
    let is_dir = sandbox.metadata(&args.path).is_ok_and(|m| m.is_dir());
    let mode = apply_mode(&args.mode, current, is_dir).map_err(|error| {
        ToolError::new(
            error.code(),
            format!("fs.chmod: {error}"),
            Some("use an octal mode such as \"644\" or a symbolic one such as \"u+x,go-w\""),
        )
    })?;
    sandbox.set_mode(&args.path, mode)?;
    Ok(ToolOutput {
        body: Some(format!(
            "{} is now {mode:04o} (was {current:04o})",
            args.path
        )),
        fields: vec![("mode".to_owned(), format!("{mode:04o}"))],
        data: json!({"path": args.path, "mode": format!("{mode:04o}"), "previous": format!("{current:04o}")}),
        continue_hint: None,
        kept: None,
    })
}

/// Why a mode is not one `fs.chmod` can apply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// Octal digits that make no mode.
    #[error("{0:?} is not an octal mode")]
    NotOctal(String),
    /// A symbolic clause without an operator.
    #[error("{0:?} has no +, - or =")]
    NoOperator(String),
    /// A class other than `u`, `g`, `o` and `a`.
    #[error("unknown class {class:?} in {clause:?}")]
    UnknownClass {
        /// The class as written.
        class: char,
        /// The clause holding it.
        clause: String,
    },
    /// A permission other than `r`, `w`, `x`, `X`, `s` and `t`.
    #[error("unknown permission {permission:?} in {clause:?}")]
    UnknownPermission {
        /// The permission as written.
        permission: char,
        /// The clause holding it.
        clause: String,
    },
}

impl ModeError {
    /// The protocol's code for it: the model wrote a wrong argument.
    pub fn code(&self) -> ErrorCode {
        match self {
            ModeError::NotOctal(_)
            | ModeError::NoOperator(_)
            | ModeError::UnknownClass { .. }
            | ModeError::UnknownPermission { .. } => ErrorCode::InvalidArgs,
        }
    }
}

/// The new mode: `text` octal, or symbolic clauses applied to `current` (`X` sets execute only
/// for directories or files that already have an execute bit). `s` and `t` are accepted here and
/// refused by the sandbox, so the error names the real reason.
pub fn apply_mode(text: &str, current: u32, is_dir: bool) -> Result<u32, ModeError> {
    if !text.is_empty() && text.len() <= 4 && text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return u32::from_str_radix(text, 8).map_err(|_| ModeError::NotOctal(text.to_owned()));
    }
    let mut mode = current & 0o7777;
    for clause in text.split(',') {
        let operator_at = clause
            .find(['+', '-', '='])
            .ok_or_else(|| ModeError::NoOperator(clause.to_owned()))?;
        let (who, rest) = clause.split_at(operator_at);
        let operator = rest.as_bytes()[0];
        let perms = &rest[1..];
        let mut who_mask = 0;
        for c in who.chars() {
            who_mask |= match c {
                'u' => 0o4700,
                'g' => 0o2070,
                'o' => 0o1007,
                'a' => 0o7777,
                other => {
                    return Err(ModeError::UnknownClass {
                        class: other,
                        clause: clause.to_owned(),
                    });
                }
            };
        }
        if who_mask == 0 {
            who_mask = 0o7777;
        }
        let mut bits = 0;
        for c in perms.chars() {
            bits |= match c {
                'r' => 0o444,
                'w' => 0o222,
                'x' => 0o111,
                'X' if is_dir || current & 0o111 != 0 => 0o111,
                'X' => 0,
                's' => 0o6000,
                't' => 0o1000,
                other => {
                    return Err(ModeError::UnknownPermission {
                        permission: other,
                        clause: clause.to_owned(),
                    });
                }
            };
        }
        let bits = bits & who_mask;
        mode = match operator {
            b'+' => mode | bits,
            b'-' => mode & !bits,
            _ => (mode & !(who_mask & 0o777)) | bits,
        };
    }
    Ok(mode)
}

/// `fs.chmod` in the registry.
pub struct FsChmod;

impl Tool for FsChmod {
    type Args = ChmodArgs;
    const NAME: ToolName = ToolName::FsChmod;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AsksFirst
    }

    fn effects<'a>(&self, args: &'a ChmodArgs) -> Effects<'a> {
        Effects::writing([args.path.as_str()])
    }

    fn guarded_paths<'a>(&self, args: &'a ChmodArgs) -> Vec<&'a str> {
        vec![args.path.as_str()]
    }

    fn subject(&self, args: &ChmodArgs, roots: &[PathBuf]) -> String {
        format!("{} {}", shorten_path(&args.path, roots), args.mode)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let text = |key: &str| {
            output
                .data
                .get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
                .to_owned()
        };
        format!("Mode {} (was {})", text("mode"), text("previous"))
    }

    fn run(&self, context: &ToolContext<'_>, args: &ChmodArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_and_symbolic_modes() {
        assert_eq!(apply_mode("644", 0o600, false), Ok(0o644));
        assert_eq!(apply_mode("0755", 0, false), Ok(0o755));
        assert_eq!(apply_mode("u+x,go-w", 0o666, false), Ok(0o744));
        assert_eq!(apply_mode("a=r", 0o777, false), Ok(0o444));
        assert_eq!(apply_mode("+x", 0o644, false), Ok(0o755));
        assert_eq!(apply_mode("a+X", 0o644, false), Ok(0o644));
        assert_eq!(apply_mode("a+X", 0o644, true), Ok(0o755));
        assert_eq!(apply_mode("u+s", 0o755, false), Ok(0o4755));
        assert!(apply_mode("rwx", 0o644, false).is_err());
        assert!(apply_mode("q+x", 0o644, false).is_err());
    }
}
