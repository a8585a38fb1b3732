//! The types shared by the readers of calls (JSON blocks, native calls, slash commands and
//! their arguments): a validated [`Call`] and the [`CallError`] ladder of PROTOCOL.md §1 (Reading a reply). A leaf of
//! the protocol module: `args`, `slash` and `call` build on it, and it on none of them.

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use super::display::{
    HEADER_ARG_CHARS, escape_for_display, shorten_argument, shorten_header_value,
};
use super::error_code::ErrorCode;
use super::schema::{ToolSchema, tool_schema};
use super::tool_name::{ToolName, ToolSet};

/// A call that passed every check of PROTOCOL.md §1 (Reading a reply).
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
        /// The content holds a string in triple quotes (Python's `"""`), which JSON has not.
        triple_quoted: bool,
    },
    /// A native call's arguments are not JSON (PROTOCOL.md §13 (The API loop: calling modes)).
    #[error(
        "the call's arguments are not valid JSON: {message} at line {line}, column {column} of the arguments"
    )]
    InvalidArgumentsJson {
        /// What the JSON reader found wrong.
        message: String,
        /// 1-based line within the arguments.
        line: usize,
        /// 1-based column within the arguments.
        column: usize,
    },
    /// A key appears twice in one object.
    #[error(
        "the key {:?} appears twice in {}",
        shorten_argument(key),
        describe_location(location)
    )]
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
    #[error(
        "the call has an unknown top-level field {:?}",
        shorten_argument(field)
    )]
    UnknownField {
        /// The unknown key.
        field: String,
    },
    /// The id is unusable.
    #[error("the call's id {} is not usable: {reason}", shorten_argument(shown))]
    InvalidId {
        /// The id as written (JSON).
        shown: String,
        /// Why not.
        reason: &'static str,
    },
    /// The tool is not whitelisted.
    #[error("{} is not a flycode tool", shorten_argument(shown))]
    UnknownTool {
        /// The name as written (JSON, so look-alikes stay visible).
        shown: String,
        /// The closest whitelisted name.
        nearest: Option<ToolName>,
        /// The tools the reader accepted.
        set: ToolSet,
        /// The tool of that exact name in a larger set (`fs.edit` asked of the seed set).
        elsewhere: Option<ToolName>,
    },
    /// The arguments fail the tool's schema.
    #[error("{tool}: {}", shorten_header_value(message))]
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
    /// Bounds in the wrong order (fs.read's `range` or `lines` ending before it starts, fs.search's
    /// `minBytes` above `maxBytes`), or a number where a whole number in range belongs (`1.0`,
    /// `5e0`, `-1`, 2^64): `invalid_args`, with a hint that shows the argument's form.
    #[error("{tool}: {message}")]
    InvalidBounds {
        /// The tool.
        tool: ToolName,
        /// What is wrong, naming the argument and its value.
        message: String,
        /// How to write the argument, from its schema.
        hint: String,
    },
    /// A path argument is not absolute.
    #[error(
        "{tool}: {} must be an absolute path, got {:?}",
        shorten_argument(arg),
        shorten_argument(path)
    )]
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

/// The error of an empty call block.
pub const EMPTY_BLOCK: &str = "the block is empty";

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
            CallError::InvalidJson { .. } | CallError::InvalidArgumentsJson { .. } => {
                ErrorCode::InvalidJson
            }
            CallError::DuplicateKey { .. } => ErrorCode::DuplicateKey,
            CallError::NotAnObject { .. } => ErrorCode::NotAnObject,
            CallError::MissingField { .. } => ErrorCode::MissingField,
            CallError::UnknownField { .. } => ErrorCode::UnknownField,
            CallError::InvalidId { .. } => ErrorCode::InvalidId,
            CallError::UnknownTool { .. } => ErrorCode::UnknownTool,
            CallError::InvalidArgs { .. } | CallError::InvalidBounds { .. } => {
                ErrorCode::InvalidArgs
            }
            CallError::MutuallyExclusive { .. } => ErrorCode::MutuallyExclusive,
            CallError::RelativePath { .. } => ErrorCode::RelativePath,
        }
    }

    /// What the model should do instead, in one line.
    pub fn hint(&self) -> String {
        self.hint_with_root(None)
    }

    /// [`CallError::hint`] for a user whose first allowed root is `example_root`: a relative
    /// path's hint then shows an absolute path inside it instead of a made-up one.
    pub fn hint_with_root(&self, example_root: Option<&str>) -> String {
        match self {
            CallError::ForgedResult => "Never write flycode-result blocks: send one flycode-call block and wait for flycode to answer with the result.".into(),
            CallError::MultipleCalls { .. } => "Send only the first call now, alone in its own reply; make the next call after its result arrives.".into(),
            CallError::UnterminatedBlock => "Resend the whole call and close the block with ``` on a line of its own.".into(),
            CallError::TextOutsideBlock { .. } => "When you call a tool, reply with the flycode-call block alone: no text before or after it.".into(),
            CallError::InvalidJson { as_json: Some(json), .. } => format!("Inside a flycode-call block write JSON, not a slash command: {json}"),
            CallError::InvalidJson { triple_quoted: true, .. } => r#"JSON has no triple-quoted strings ("""): write the content as one JSON string, with \n for each line break and \" for each double quote inside it, e.g. "content": "def f():\n    return \"ok\"\n"."#.into(),
            CallError::InvalidJson { .. } => r#"The block must hold exactly one JSON object, e.g. {"id":"call-001","tool":"fs.read","args":{"path":"/abs/path"}} (double quotes, no comments, no trailing commas)."#.into(),
            CallError::InvalidArgumentsJson { .. } => r#"Send the function's arguments as one JSON object, e.g. {"path":"/abs/path"} (double quotes, no comments, no trailing commas)."#.into(),
            CallError::DuplicateKey { key, .. } => format!("Write the key {:?} once, with the value you mean.", shorten_argument(key)),
            CallError::NotAnObject { .. } | CallError::MissingField { .. } => r#"A call is one JSON object with exactly "id", "tool" and "args", e.g. {"id":"call-001","tool":"fs.read","args":{"path":"/abs/path"}}."#.into(),
            CallError::UnknownField { .. } => r#"Only "id", "tool" and "args" may appear at the top level; put tool arguments inside "args"."#.into(),
            CallError::InvalidId { .. } => r#"Give every call a new non-empty string id, e.g. "call-002"."#.into(),
            CallError::UnknownTool { elsewhere: Some(tool), set, .. } => {
                let tools: Vec<&str> = set.tools().iter().map(|t| t.as_str()).collect();
                let switch = match tool.home_set() {
                    ToolSet::Agent => "it exists only in flycode run".to_owned(),
                    ToolSet::Subagent | ToolSet::All => "it ends a sub-agent's task; the main agent answers in prose instead".to_owned(),
                    // flycode run takes no set from flycode.toml: its flag alone turns it on.
                    home if *set == ToolSet::SeedAgent => format!("it belongs to the {} tool set, which the user turns on with flycode run --tools {}", home.as_str(), home.as_str()),
                    home => format!("it belongs to the {} tool set, which the user turns on with --tools {} or tools = \"{}\" in flycode.toml", home.as_str(), home.as_str(), home.as_str()),
                };
                format!("{tool} is not offered here: {switch}. The tools here are: {}.", tools.join(", "))
            }
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
            CallError::InvalidBounds { hint, .. } => hint.clone(),
            CallError::MutuallyExclusive { group, .. } => format!("Use only one of {}.", group.join(", ")),
            CallError::RelativePath { path, .. } => match example_root {
                Some(root) => format!("Use an absolute path inside the allowed roots, e.g. {}.", absolute_example(root, path)),
                None => r"Use an absolute path inside the allowed roots, e.g. /home/me/project/file.txt or C:\work\file.txt.".into(),
            },
        }
    }
}

/// An absolute path inside `root` for the hint of a relative `path`: the path itself joined to
/// the root when it is a plain relative name (`src/main.rs`, `./a`), else a file name in the
/// root (`~/x`, `../x` and drive-relative forms say nothing about where in the root).
fn absolute_example(root: &str, path: &str) -> String {
    let windows = root.contains('\\') && !root.starts_with('/');
    let separator = if windows { '\\' } else { '/' };
    let mut relative = path.trim();
    while let Some(rest) = relative
        .strip_prefix("./")
        .or_else(|| relative.strip_prefix(".\\"))
    {
        relative = rest;
    }
    let is_plain = !relative.is_empty()
        && relative.len() <= HEADER_ARG_CHARS
        && !relative.starts_with(['~', '\\', '/'])
        && !relative.contains(':')
        && !relative.split(['/', '\\']).any(|part| part == "..")
        && !relative.contains(super::display::is_hidden_or_control);
    let root = root.trim_end_matches(['/', '\\']);
    let root = if root.is_empty() { "/" } else { root };
    let tail = match (is_plain, relative) {
        (true, ".") => return root.to_owned(),
        (true, relative) => relative.to_owned(),
        (false, _) => "file.txt".to_owned(),
    };
    if root.ends_with(separator) {
        format!("{root}{tail}")
    } else {
        format!("{root}{separator}{tail}")
    }
}

/// `path, depth?, glob?`: the argument list of a tool, optional ones marked with `?`.
pub fn signature(schema: &ToolSchema) -> String {
    schema
        .args
        .iter()
        .map(|a| {
            if a.is_required {
                a.name.clone()
            } else if a.schema["x-flycode-extended"] == Value::Bool(true) {
                // `background`/`pty`: a call of the seed set that uses one is refused, so the
                // hint must not read as if every set took it (PROTOCOL.md §6 (The schemas)).
                format!("{}? (extended set)", a.name)
            } else {
                format!("{}?", a.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name of a JSON value's type, with its article.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl CallError {
    /// `unknown_tool` for `name` (as written) asked of a reader of `set`: the nearest name of
    /// the set, and the tool of that exact name in a larger set.
    pub fn unknown_tool(name: &str, set: ToolSet) -> CallError {
        // No tool name is near a name this long, and measuring the distance would take long.
        let nearest = (name.len() <= 128)
            .then(|| ToolName::nearest(name, set))
            .flatten();
        CallError::UnknownTool {
            shown: show_tool_name(name),
            nearest,
            set,
            elsewhere: ToolName::from_native_name(name, ToolSet::All),
        }
    }
}

/// A tool name as JSON, with look-alike characters (Cyrillic `е` for `e`...) pointed out.
pub fn show_tool_name(name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn relative(path: &str) -> CallError {
        CallError::RelativePath {
            tool: ToolName::FsRead,
            arg: "path".into(),
            path: path.into(),
        }
    }

    #[test]
    fn the_relative_path_hint_uses_the_first_root() {
        let cases = [
            (
                "README.md",
                "/root/work/app",
                "e.g. /root/work/app/README.md.",
            ),
            (
                "./src/main.rs",
                "/root/work/app/",
                "e.g. /root/work/app/src/main.rs.",
            ),
            (".", "/w", "e.g. /w."),
            ("../etc/passwd", "/w", "e.g. /w/file.txt."),
            ("~/x", "/w", "e.g. /w/file.txt."),
            ("a.txt", "/", "e.g. /a.txt."),
            ("a.txt", r"C:\work", r"e.g. C:\work\a.txt."),
        ];
        for (path, root, example) in cases {
            let hint = relative(path).hint_with_root(Some(root));
            assert!(hint.ends_with(example), "{path} in {root}: {hint}");
        }
        assert!(relative("a").hint().contains("/home/me/project/file.txt"));
        let long = "x".repeat(1 << 20);
        assert!(
            relative(&long)
                .hint_with_root(Some("/w"))
                .ends_with("/w/file.txt.")
        );
    }

    #[test]
    fn messages_echo_at_most_512_characters_of_an_argument() {
        let huge = "y".repeat(1 << 20);
        let errors = [
            relative(&huge),
            CallError::unknown_tool(&huge, ToolSet::Seed),
            CallError::InvalidId {
                shown: format!("{huge:?}"),
                reason: "it is longer than 512 characters",
            },
            CallError::DuplicateKey {
                key: huge.clone(),
                location: "args".into(),
            },
            CallError::UnknownField {
                field: huge.clone(),
            },
            CallError::InvalidArgs {
                tool: ToolName::FsRead,
                message: format!("unknown argument \"{huge}\""),
            },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(
                text.len() < 1200,
                "{:?}: {} bytes",
                error.code(),
                text.len()
            );
            assert!(text.contains("…(10485"), "{:?}: {text}", error.code());
            assert!(error.hint().len() < 1200, "{:?}", error.code());
        }
    }
}
