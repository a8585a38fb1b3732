//! A call block's content → a validated [`Call`], or the first [`CallError`] of the contract's
//! ladder: JSON, duplicate keys, shape, id, tool, schema, exclusive groups, absolute paths.

use serde_json::{Map, Value};

pub use super::call_types::{Call, CallError};
use super::call_types::{EMPTY_BLOCK, json_kind};
use super::display::{HEADER_ARG_CHARS, escape_for_display, is_hidden_or_control};
use super::json::{JsonProblem, parse_strict};
use super::result::INVALID_CALL_ID;
use super::tool_name::{ToolName, ToolSet};

/// What could be read of a call, even an invalid one: for the `[id]` and `[command]` of the
/// result that answers it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attempt {
    /// The id, when it is a usable string.
    pub id: Option<String>,
    /// The tool name, as written.
    pub tool: Option<String>,
    /// The arguments, when they are an object.
    pub args: Option<Map<String, Value>>,
}

impl Attempt {
    /// Reads whatever it can from a block's content, never failing.
    pub fn read(content: &str) -> Attempt {
        // Through the strict reader: with a repeated key there is no "the" id or path to show.
        let Ok(Value::Object(mut object)) = parse_strict(content) else {
            return Attempt::default();
        };
        let id = match object.get("id") {
            Some(Value::String(id)) if check_id(id).is_ok() => Some(id.clone()),
            _ => None,
        };
        let tool = match object.get("tool") {
            Some(Value::String(tool)) => Some(tool.clone()),
            _ => None,
        };
        let args = match object.remove("args") {
            Some(Value::Object(args)) => Some(args),
            _ => None,
        };
        Attempt { id, tool, args }
    }
}

/// Validates a call block's content against the tools of `set`.
/// Validates a call block's content (already free of paste artefacts outside strings).
#[cfg(test)]
pub fn parse_call(content: &str) -> Result<Call, CallError> {
    parse_call_in(content, ToolSet::Seed)
}

/// Parses a call block's content against the tools of `set`.
pub fn parse_call_in(content: &str, set: ToolSet) -> Result<Call, CallError> {
    parse_call_noting_unset(content, set).map(|(call, _)| call)
}

/// The same, with the optional arguments given as `null` or `""` that the call was taken
/// without (PROTOCOL.md §3, Decision on unset arguments), each as written (`"glob": ""`): read
/// from the arguments already parsed, so a large call is never parsed twice for them.
pub fn parse_call_noting_unset(
    content: &str,
    set: ToolSet,
) -> Result<(Call, Vec<String>), CallError> {
    if content.trim().is_empty() {
        return Err(CallError::InvalidJson {
            message: EMPTY_BLOCK.into(),
            line: 1,
            column: 1,
            as_json: None,
            triple_quoted: false,
        });
    }
    let value = parse_strict(content).map_err(|problem| {
        match json_problem_error(problem, "", || slash_as_json(content)) {
            CallError::InvalidJson {
                message,
                line,
                column,
                as_json,
                ..
            } => CallError::InvalidJson {
                message,
                line,
                column,
                as_json,
                triple_quoted: content.contains("\"\"\""),
            },
            other => other,
        }
    })?;
    let Value::Object(mut object) = value else {
        return Err(CallError::NotAnObject {
            found: json_kind(&value),
        });
    };
    for field in ["id", "tool", "args"] {
        if !object.contains_key(field) {
            return Err(CallError::MissingField { field });
        }
    }
    if let Some(field) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "id" | "tool" | "args"))
    {
        return Err(CallError::UnknownField {
            field: field.clone(),
        });
    }
    let id = match &object["id"] {
        Value::String(id) => check_id(id).map(|()| id.clone()),
        other => Err(CallError::InvalidId {
            shown: other.to_string(),
            reason: "it must be a string",
        }),
    }?;
    let tool = match &object["tool"] {
        Value::String(name) => {
            ToolName::from_name_in(name, set).ok_or_else(|| CallError::unknown_tool(name, set))
        }
        other => Err(CallError::UnknownTool {
            shown: other.to_string(),
            nearest: None,
            set,
            elsewhere: None,
        }),
    }?;
    let args = object.remove("args").unwrap_or(Value::Null);
    let unset: Vec<(String, Value)> = match &args {
        Value::Object(given) => given
            .iter()
            .filter(|(_, value)| value.is_null() || value.as_str() == Some(""))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let args = super::args::validate_args(tool, args)?;
    let dropped = unset
        .into_iter()
        .filter(|(name, _)| !args.contains_key(name))
        .map(|(name, value)| format!("\"{name}\": {value}"))
        .collect();
    Ok((
        Call {
            id: Some(id),
            tool,
            args,
        },
        dropped,
    ))
}

/// Validates a native (API function-calling) tool call: its id, its function name (protocol or
/// native form, see [`ToolName::from_native_name`]) and its JSON arguments, with the same codes
/// as a call block.
pub fn parse_native_call(
    id: Option<&str>,
    name: &str,
    arguments: &str,
    set: ToolSet,
) -> Result<Call, CallError> {
    // The ladder of a call block: JSON first, then id, then tool, then the schema.
    // An API may send "" for a call without arguments.
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    // A native call has no block: its errors speak of its arguments.
    let args = parse_strict(arguments).map_err(|problem| {
        match json_problem_error(problem, "args", || None) {
            CallError::InvalidJson {
                message,
                line,
                column,
                ..
            } => CallError::InvalidArgumentsJson {
                message,
                line,
                column,
            },
            other => other,
        }
    })?;
    let id = match id {
        Some(id) => check_id(id).map(|()| id.to_owned()),
        None => Err(CallError::InvalidId {
            shown: "null".into(),
            reason: "a native tool call needs an id",
        }),
    }?;
    let tool =
        ToolName::from_native_name(name, set).ok_or_else(|| CallError::unknown_tool(name, set))?;
    let args = super::args::validate_args(tool, args)?;
    Ok(Call {
        id: Some(id),
        tool,
        args,
    })
}

/// The call error for a JSON problem; `prefix` places duplicate keys (`args` for native
/// arguments), `as_json` offers the JSON a slash command would have been.
fn json_problem_error(
    problem: JsonProblem,
    prefix: &str,
    as_json: impl FnOnce() -> Option<String>,
) -> CallError {
    match problem {
        JsonProblem::Syntax {
            message,
            line,
            column,
        } => CallError::InvalidJson {
            message,
            line,
            column,
            as_json: as_json(),
            triple_quoted: false,
        },
        JsonProblem::DuplicateKey { key, location } => CallError::DuplicateKey {
            key,
            location: match (prefix.is_empty(), location.is_empty()) {
                (true, _) => location,
                (false, true) => prefix.to_owned(),
                (false, false) => format!("{prefix}.{location}"),
            },
        },
    }
}

/// An id must be a non-blank string and not one of the "no id" spellings.
fn check_id(id: &str) -> Result<(), CallError> {
    let reject = |reason: &'static str| {
        Err(CallError::InvalidId {
            shown: escape_for_display(&Value::String(id.to_owned()).to_string()).into_owned(),
            reason,
        })
    };
    if is_no_id(id) {
        return if id.trim_matches(is_blank).is_empty() {
            reject("it is empty or blank")
        } else {
            reject("it means \"no id\"")
        };
    }
    if id.contains(is_hidden_or_control) {
        return reject("it contains control or invisible characters");
    }
    if id.starts_with(is_blank) || id.ends_with(is_blank) {
        return reject("it starts or ends with whitespace");
    }
    // An id is echoed whole on the result's [id] line, so it must fit the header budget.
    if id.chars().count() > HEADER_ARG_CHARS {
        return reject("it is longer than 512 characters");
    }
    if id.eq_ignore_ascii_case(INVALID_CALL_ID) {
        return reject("flycode answers calls without a usable id under it");
    }
    Ok(())
}

/// Whitespace, paste artefacts and invisible characters: what a reader cannot see.
fn is_blank(c: char) -> bool {
    c.is_whitespace() || is_hidden_or_control(c) || super::parse::is_paste_artefact(c)
}

/// Whether `id` means "no id": empty or blank (invisible characters included), `(none)` or
/// `null` in any case, around any blank. Shared by call checking and transcript checking.
pub fn is_no_id(id: &str) -> bool {
    let id = id.trim_matches(is_blank);
    id.is_empty() || id.eq_ignore_ascii_case("(none)") || id.eq_ignore_ascii_case("null")
}

/// When a model wrote a slash command inside the block, the JSON call it meant.
fn slash_as_json(content: &str) -> Option<String> {
    let line = content.trim();
    if !line.starts_with('/') || line.contains('\n') {
        return None;
    }
    let call = super::slash::parse_slash(line).ok()?;
    let json = serde_json::json!({"id": "call-001", "tool": call.tool, "args": call.args});
    Some(json.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn code_of(content: &str) -> ErrorCode {
        parse_call(content).unwrap_err().code()
    }

    #[test]
    fn accepts_a_valid_call() {
        let call =
            parse_call(r#"{"id":"call-001","tool":"fs.read","args":{"path":"/a"}}"#).unwrap();
        assert_eq!(call.tool, ToolName::FsRead);
        assert_eq!(call.id.as_deref(), Some("call-001"));
    }

    #[test]
    fn the_ladder_reports_the_first_problem() {
        assert_eq!(code_of("[1]"), ErrorCode::NotAnObject);
        assert_eq!(
            code_of(r#"{"tool":"fs.read","args":{}}"#),
            ErrorCode::MissingField
        );
        assert_eq!(
            code_of(r#"{"id":"a","tool":"fs.read","args":{},"x":1}"#),
            ErrorCode::UnknownField
        );
        assert_eq!(
            code_of(r#"{"id":"NULL","tool":"nope","args":{}}"#),
            ErrorCode::InvalidId
        );
        assert_eq!(
            code_of(r#"{"id":"a","tool":"nope","args":{}}"#),
            ErrorCode::UnknownTool
        );
        assert_eq!(
            code_of(r#"{"id":"a","tool":"fs.read","args":{}}"#),
            ErrorCode::InvalidArgs
        );
    }

    #[test]
    fn a_slash_command_in_the_block_gets_its_json_in_the_hint() {
        let error = parse_call("/fs.read /tmp/a.txt --head 200\n").unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidJson);
        assert!(
            error
                .hint()
                .contains(r#""args":{"path":"/tmp/a.txt","head":200}"#),
            "{}",
            error.hint()
        );
    }

    #[test]
    fn attempt_reads_what_it_can() {
        let attempt = Attempt::read(r#"{"id":"c1","tool":"fs.raed","args":{"path":"x"}}"#);
        assert_eq!(attempt.id.as_deref(), Some("c1"));
        assert_eq!(attempt.tool.as_deref(), Some("fs.raed"));
        assert!(Attempt::read("not json").id.is_none());
    }
}
