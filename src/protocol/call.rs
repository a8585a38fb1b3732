//! A call block's content → a validated [`Call`], or the first [`CallError`] of the contract's
//! ladder: JSON, duplicate keys, shape, id, tool, schema, exclusive groups, absolute paths.

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use super::display::{escape_for_display, is_hidden_or_control};
use super::error_code::ErrorCode;
use super::json::{JsonProblem, parse_strict};
use super::schema::{ToolSchema, tool_schema};
use super::tool_name::{ToolName, ToolSet};

/// A call that passed every check of CONTRACT §1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Call {
    /// The model's id; `None` for a slash command typed by a person.
    pub id: Option<String>,
    /// The tool to run.
    pub tool: ToolName,
    /// The arguments, valid against the tool's schema.
    pub args: Map<String, Value>,
}

/// Why a reply or a slash command is not a valid call. Each variant is one error code.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CallError {
    /// A `flycode-result` block in a model's reply.
    #[error("the reply contains a flycode-result block; only flycode writes results")]
    ForgedResult,
    /// More than one call block.
    #[error("the reply contains {count} flycode-call blocks; send exactly one per reply")]
    MultipleCalls {
        /// How many call blocks there were.
        count: usize,
    },
    /// The call block's fence is never closed.
    #[error("the flycode-call block is never closed (the reply looks cut off)")]
    UnterminatedBlock,
    /// Text before or after the call block.
    #[error("there is text outside the flycode-call block: {excerpt:?}")]
    TextOutsideBlock {
        /// The first stray text, shortened.
        excerpt: String,
    },
    /// The block is not JSON.
    #[error("{}", describe_invalid_json(message, *line, *column))]
    InvalidJson {
        /// What the JSON reader found wrong.
        message: String,
        /// 1-based line within the block.
        line: usize,
        /// 1-based column within the block.
        column: usize,
        /// The JSON this content would be, when it was written as a slash command.
        as_json: Option<String>,
    },
    /// A key appears twice in one object.
    #[error("the key {key:?} appears twice in {}", describe_location(location))]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// The object holding it (`args`, `args.files[1]`), empty for the top level.
        location: String,
    },
    /// The JSON value is not an object.
    #[error("the call must be a JSON object, but the block holds {found}")]
    NotAnObject {
        /// What it holds instead: "an array", "a string"...
        found: &'static str,
    },
    /// A required top-level field is missing.
    #[error("the call has no {field:?} field")]
    MissingField {
        /// `id`, `tool` or `args`.
        field: &'static str,
    },
    /// A top-level field other than `id`, `tool` and `args`.
    #[error("the call has an unknown top-level field {field:?}")]
    UnknownField {
        /// The unknown key.
        field: String,
    },
    /// The id is unusable.
    #[error("the call's id {shown} is not usable: {reason}")]
    InvalidId {
        /// The id as written (JSON).
        shown: String,
        /// Why not.
        reason: &'static str,
    },
    /// The tool is not whitelisted.
    #[error("{shown} is not a flycode tool")]
    UnknownTool {
        /// The name as written (JSON, so look-alikes stay visible).
        shown: String,
        /// The closest whitelisted name.
        nearest: Option<ToolName>,
        /// The tools the reader accepted.
        set: ToolSet,
    },
    /// The arguments fail the tool's schema.
    #[error("{tool}: {message}")]
    InvalidArgs {
        /// The tool whose schema failed.
        tool: ToolName,
        /// What is wrong, naming the argument.
        message: String,
    },
    /// More than one argument of an exclusive group.
    #[error("{tool}: {} cannot be used together; give only one of {}", given.join(" and "), group.join(", "))]
    MutuallyExclusive {
        /// The tool.
        tool: ToolName,
        /// The arguments given.
        given: Vec<String>,
        /// The whole group.
        group: Vec<String>,
    },
    /// A path argument is not absolute.
    #[error("{tool}: {arg} must be an absolute path, got {path:?}")]
    RelativePath {
        /// The tool.
        tool: ToolName,
        /// The argument, e.g. `path` or `files[2].path`.
        arg: String,
        /// The path as given.
        path: String,
    },
}

fn describe_invalid_json(message: &str, line: usize, column: usize) -> String {
    if message == EMPTY_BLOCK {
        "the flycode-call block is empty".to_owned()
    } else {
        format!(
            "the flycode-call block is not valid JSON: {message} at line {line}, column {column} of the block"
        )
    }
}

const EMPTY_BLOCK: &str = "the block is empty";

fn describe_location(location: &str) -> String {
    if location.is_empty() {
        "the call object".to_owned()
    } else {
        format!("the object at {location}")
    }
}

impl CallError {
    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            CallError::ForgedResult => ErrorCode::ForgedResult,
            CallError::MultipleCalls { .. } => ErrorCode::MultipleCalls,
            CallError::UnterminatedBlock => ErrorCode::UnterminatedBlock,
            CallError::TextOutsideBlock { .. } => ErrorCode::TextOutsideBlock,
            CallError::InvalidJson { .. } => ErrorCode::InvalidJson,
            CallError::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            CallError::NotAnObject { .. } => ErrorCode::NotAnObject,
            CallError::MissingField { .. } => ErrorCode::MissingField,
            CallError::UnknownField { .. } => ErrorCode::UnknownField,
            CallError::InvalidId { .. } => ErrorCode::InvalidId,
            CallError::UnknownTool { .. } => ErrorCode::UnknownTool,
            CallError::InvalidArgs { .. } => ErrorCode::InvalidArgs,
            CallError::MutuallyExclusive { .. } => ErrorCode::MutuallyExclusive,
            CallError::RelativePath { .. } => ErrorCode::RelativePath,
        }
    }

    /// What the model should do instead, in one line.
    pub fn hint(&self) -> String {
        match self {
            CallError::ForgedResult => "Never write flycode-result blocks: send one flycode-call block and wait for flycode to answer with the result.".into(),
            CallError::MultipleCalls { .. } => "Send only the first call now, alone in its own reply; make the next call after its result arrives.".into(),
            CallError::UnterminatedBlock => "Resend the whole call and close the block with ``` on a line of its own.".into(),
            CallError::TextOutsideBlock { .. } => "When you call a tool, reply with the flycode-call block alone: no text before or after it.".into(),
            CallError::InvalidJson { as_json: Some(json), .. } => format!("Inside a flycode-call block write JSON, not a slash command: {json}"),
            CallError::InvalidJson { .. } => r#"The block must hold exactly one JSON object, e.g. {"id":"call-001","tool":"fs.read","args":{"path":"/abs/path"}} (double quotes, no comments, no trailing commas)."#.into(),
            CallError::DuplicateKey { key, .. } => format!("Write the key {key:?} once, with the value you mean."),
            CallError::NotAnObject { .. } | CallError::MissingField { .. } => r#"A call is one JSON object with exactly "id", "tool" and "args", e.g. {"id":"call-001","tool":"fs.read","args":{"path":"/abs/path"}}."#.into(),
            CallError::UnknownField { .. } => r#"Only "id", "tool" and "args" may appear at the top level; put tool arguments inside "args"."#.into(),
            CallError::InvalidId { .. } => r#"Give every call a new non-empty string id, e.g. "call-002"."#.into(),
            CallError::UnknownTool { nearest, set, .. } => {
                let tools: Vec<&str> = set.tools().iter().map(|t| t.as_str()).collect();
                match nearest {
                    Some(tool) => format!("Did you mean \"{tool}\"? The tools are: {}.", tools.join(", ")),
                    None => format!("The tools are: {}.", tools.join(", ")),
                }
            }
            CallError::InvalidArgs { tool, .. } => {
                let schema = tool_schema(*tool);
                format!("{tool} takes: {}.", signature(schema))
            }
            CallError::MutuallyExclusive { group, .. } => format!("Use only one of {}.", group.join(", ")),
            CallError::RelativePath { .. } => r"Use an absolute path inside the allowed roots, e.g. /home/me/project/file.txt or C:\work\file.txt.".into(),
        }
    }
}

/// `path, depth?, glob?`: the argument list of a tool, optional ones marked with `?`.
pub(crate) fn signature(schema: &ToolSchema) -> String {
    schema
        .args
        .iter()
        .map(|a| {
            if a.is_required {
                a.name.clone()
            } else {
                format!("{}?", a.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

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

/// Validates a call block's content (already free of paste artefacts outside strings).
pub fn parse_call(content: &str) -> Result<Call, CallError> {
    parse_call_in(content, ToolSet::Chat)
}

/// Validates a call block's content against the tools of `set`.
pub fn parse_call_in(content: &str, set: ToolSet) -> Result<Call, CallError> {
    if content.trim().is_empty() {
        return Err(CallError::InvalidJson {
            message: EMPTY_BLOCK.into(),
            line: 1,
            column: 1,
            as_json: None,
        });
    }
    let value = parse_strict(content)
        .map_err(|problem| json_problem_error(problem, "", || slash_as_json(content)))?;
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
            ToolName::from_name_in(name, set).ok_or_else(|| CallError::UnknownTool {
                shown: show_tool_name(name),
                nearest: ToolName::nearest(name, set),
                set,
            })
        }
        other => Err(CallError::UnknownTool {
            shown: other.to_string(),
            nearest: None,
            set,
        }),
    }?;
    let args = object.remove("args").unwrap_or(Value::Null);
    let args = super::args::validate_args(tool, args)?;
    Ok(Call {
        id: Some(id),
        tool,
        args,
    })
}

/// A tool name as JSON, with look-alike characters (Cyrillic `е` for `e`...) pointed out.
pub(crate) fn show_tool_name(name: &str) -> String {
    let shown = escape_for_display(&Value::String(name.to_owned()).to_string()).into_owned();
    let foreign: Vec<String> = name
        .chars()
        .filter(|c| !c.is_ascii())
        .take(3)
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    if foreign.is_empty() {
        shown
    } else {
        format!("{shown} (with non-ASCII {})", foreign.join(", "))
    }
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
    let args =
        parse_strict(arguments).map_err(|problem| json_problem_error(problem, "args", || None))?;
    let id = match id {
        Some(id) => check_id(id).map(|()| id.to_owned()),
        None => Err(CallError::InvalidId {
            shown: "null".into(),
            reason: "a native tool call needs an id",
        }),
    }?;
    let tool = ToolName::from_native_name(name, set).ok_or_else(|| CallError::UnknownTool {
        shown: show_tool_name(name),
        nearest: ToolName::nearest(name, set),
        set,
    })?;
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

/// The name of a JSON value's type, with its article.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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
