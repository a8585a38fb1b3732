//! The tool schemas of `protocol/schemas/`, embedded in the binary and compiled once.
//!
//! Each tool's schema is read the first time that tool is named, and its validator is compiled
//! the first time a call to it is checked: a one-shot `flycode exec` pays for the one tool it
//! calls, not for all of them (compiling a validator, with its patterns, is most of start-up).
//!
//! They are the single source for argument validation, the slash-command grammar, the `[command]`
//! rendering and the generated prompt. Besides standard JSON Schema they carry a few annotations
//! that standard keywords cannot express:
//!
//! - `x-flycode-path: true` on a string property: an absolute path (checked for `relative_path`);
//! - `x-flycode-content: true`: long text, shown as `<N bytes>` in `[command]`;
//! - `x-flycode-positional`: the slash command's positional arguments in order, or `false` when the
//!   tool has no slash form; a final array-typed positional takes all remaining words;
//! - `x-flycode-exclusive`: groups `{"fields": [...], "required": bool}` of which at most one (or,
//!   when required, exactly one) may be given;
//! - `x-flycode-unique`: on an array of objects, a property whose value must not repeat;
//! - `x-flycode-extended: true` on a property: an argument of the extended set only (`background`,
//!   `pty`): the seed prompt leaves it out;
//! - `x-flycode-read-only: true`: the tool only reads (the prompt leaves it out of the tools to
//!   call only when asked; the registry's approval class agrees, a test holds it).

use std::collections::BTreeMap;
use std::sync::{LazyLock, OnceLock};

use serde_json::Value;

use super::tool_name::ToolName;

/// The JSON type of one argument, as far as the slash grammar and the prompt need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A boolean flag.
    Boolean,
    /// An array of strings.
    StringList,
    /// An object of string values (`env`).
    StringMap,
    /// An array of objects (`fs.writeBatch` files): JSON only.
    ObjectList,
}

/// One argument of a tool, read from its schema.
#[derive(Clone, Debug)]
pub struct ArgSpec {
    /// The argument's name, e.g. `contextLines`.
    pub name: String,
    /// Its type.
    pub kind: ArgKind,
    /// Whether the schema requires it.
    pub is_required: bool,
    /// Whether it is an absolute path.
    pub is_path: bool,
    /// Whether it is long content shown as `<N bytes>`.
    pub is_content: bool,
    /// The property's own schema.
    pub schema: Value,
}

/// A group of arguments of which at most one (exactly one when `is_required`) may be given.
#[derive(Clone, Debug)]
pub struct ExclusiveGroup {
    /// The argument names.
    pub fields: Vec<String>,
    /// Whether one of them must be given.
    pub is_required: bool,
}

/// A tool's schema, compiled, with the facts the rest of the protocol reads from it.
pub struct ToolSchema {
    /// The tool.
    pub tool: ToolName,
    /// The schema document as written.
    pub document: Value,
    /// The one-line purpose from the schema's `description`.
    pub description: String,
    /// Arguments in schema order.
    pub args: Vec<ArgSpec>,
    /// Slash positionals in order; `None` when the tool has no slash form.
    pub positional: Option<Vec<String>>,
    /// Mutually exclusive groups.
    pub exclusive: Vec<ExclusiveGroup>,
    /// Whether the tool only reads.
    pub is_read_only: bool,
    /// Compiled on first use (see the module docs).
    validator: OnceLock<jsonschema::Validator>,
}

impl ToolSchema {
    /// The argument called `name`.
    pub fn arg(&self, name: &str) -> Option<&ArgSpec> {
        self.args.iter().find(|a| a.name == name)
    }

    /// The argument names, in schema order.
    pub fn arg_names(&self) -> impl Iterator<Item = &str> {
        self.args.iter().map(|a| a.name.as_str())
    }

    /// The compiled validator.
    pub fn validator(&self) -> &jsonschema::Validator {
        self.validator.get_or_init(|| compile(&self.document))
    }
}

/// The raw schema text of `tool`, exactly as shipped in `protocol/schemas/`.
pub fn schema_source(tool: ToolName) -> &'static str {
    match tool {
        ToolName::FsLs => include_str!("../../../protocol/schemas/fs.ls.json"),
        ToolName::FsMkdir => include_str!("../../../protocol/schemas/fs.mkdir.json"),
        ToolName::FsRead => include_str!("../../../protocol/schemas/fs.read.json"),
        ToolName::FsSearch => include_str!("../../../protocol/schemas/fs.search.json"),
        ToolName::FsWrite => include_str!("../../../protocol/schemas/fs.write.json"),
        ToolName::FsRm => include_str!("../../../protocol/schemas/fs.rm.json"),
        ToolName::FsMv => include_str!("../../../protocol/schemas/fs.mv.json"),
        ToolName::FsChmod => include_str!("../../../protocol/schemas/fs.chmod.json"),
        ToolName::FsWriteBatch => include_str!("../../../protocol/schemas/fs.writeBatch.json"),
        ToolName::FsDiff => include_str!("../../../protocol/schemas/fs.diff.json"),
        ToolName::ProcessRun => include_str!("../../../protocol/schemas/process.run.json"),
        ToolName::ShellExec => include_str!("../../../protocol/schemas/shell.exec.json"),
        ToolName::FsReadMany => include_str!("../../../protocol/schemas/fs.readMany.json"),
        ToolName::FsEdit => include_str!("../../../protocol/schemas/fs.edit.json"),
        ToolName::MemoryQuery => include_str!("../../../protocol/schemas/memory.query.json"),
        ToolName::HintLoad => include_str!("../../../protocol/schemas/hint.load.json"),
        ToolName::HintUnload => include_str!("../../../protocol/schemas/hint.unload.json"),
        ToolName::HintResource => include_str!("../../../protocol/schemas/hint.resource.json"),
        ToolName::JobLog => include_str!("../../../protocol/schemas/job.log.json"),
        ToolName::JobList => include_str!("../../../protocol/schemas/job.list.json"),
        ToolName::JobInput => include_str!("../../../protocol/schemas/job.input.json"),
        ToolName::JobKill => include_str!("../../../protocol/schemas/job.kill.json"),
        ToolName::AgentTodo => include_str!("../../../protocol/schemas/agent.todo.json"),
        ToolName::AgentNote => include_str!("../../../protocol/schemas/agent.note.json"),
        ToolName::AgentTask => include_str!("../../../protocol/schemas/agent.task.json"),
        ToolName::AgentComplete => include_str!("../../../protocol/schemas/agent.complete.json"),
    }
}

/// One slot per tool, filled the first time the tool is named.
static CATALOGUE: LazyLock<BTreeMap<ToolName, OnceLock<ToolSchema>>> = LazyLock::new(|| {
    ToolName::WITH_AGENT_TOOLS
        .into_iter()
        .map(|tool| (tool, OnceLock::new()))
        .collect()
});

/// The schema of `tool`, read on first use.
pub fn tool_schema(tool: ToolName) -> &'static ToolSchema {
    // The catalogue holds a slot for every ToolName (ToolName::WITH_AGENT_TOOLS lists them all).
    #[allow(clippy::expect_used)]
    CATALOGUE
        .get(&tool)
        .expect("the catalogue holds every tool")
        .get_or_init(|| load(tool))
}

/// Compiles a schema's validator. The schemas ship inside the binary and a unit test compiles
/// every one, so a failure here is a build defect, not an input error.
#[allow(clippy::expect_used)]
fn compile(document: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(false)
        .build(document)
        .expect("embedded schema compiles")
}

/// Loads one embedded schema. The schemas ship inside the binary and a unit test loads every one,
/// so a failure here is a build defect, not an input error.
#[allow(clippy::expect_used)]
fn load(tool: ToolName) -> ToolSchema {
    let document: Value =
        serde_json::from_str(schema_source(tool)).expect("embedded schema is valid JSON");
    let required: Vec<&str> = document["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let args = document["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| ArgSpec {
                    name: name.clone(),
                    kind: arg_kind(schema),
                    is_required: required.contains(&name.as_str()),
                    is_path: schema["x-flycode-path"] == Value::Bool(true),
                    is_content: schema["x-flycode-content"] == Value::Bool(true),
                    schema: schema.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let positional = document["x-flycode-positional"].as_array().map(|names| {
        names
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    let exclusive = document["x-flycode-exclusive"]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .map(|group| ExclusiveGroup {
                    fields: group["fields"]
                        .as_array()
                        .map(|f| {
                            f.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                    is_required: group["required"] == Value::Bool(true),
                })
                .collect()
        })
        .unwrap_or_default();
    ToolSchema {
        tool,
        description: document["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        args,
        positional,
        exclusive,
        is_read_only: document["x-flycode-read-only"] == Value::Bool(true),
        validator: OnceLock::new(),
        document,
    }
}

fn arg_kind(schema: &Value) -> ArgKind {
    match schema["type"].as_str() {
        Some("integer") => ArgKind::Integer,
        Some("boolean") => ArgKind::Boolean,
        Some("object") => ArgKind::StringMap,
        Some("array") if schema["items"]["type"] == "object" => ArgKind::ObjectList,
        Some("array") => ArgKind::StringList,
        _ => ArgKind::String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `pattern` of every schema, wherever it stands.
    fn patterns(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("pattern", Value::String(pattern)) => found.push(pattern.clone()),
                        _ => patterns(child, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| patterns(item, found)),
            _ => {}
        }
    }

    /// A server that turns the schemas into a grammar (llama.cpp's converter) can enforce a
    /// pattern only when it is anchored at both ends and spells its classes out: no `\s`, `\S`,
    /// `\d`, `\w` shorthands (PROTOCOL.md §6).
    #[test]
    fn every_pattern_is_one_a_grammar_converter_can_enforce() {
        for tool in ToolName::WITH_AGENT_TOOLS {
            let mut found = Vec::new();
            patterns(&tool_schema(tool).document, &mut found);
            for pattern in found {
                assert!(
                    pattern.starts_with('^') && pattern.ends_with('$'),
                    "{tool}: {pattern} is not anchored"
                );
                for shorthand in ["\\s", "\\S", "\\d", "\\D", "\\w", "\\W", "\\b"] {
                    assert!(
                        !pattern.contains(shorthand),
                        "{tool}: {pattern} uses {shorthand}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_text_that_must_say_something_may_not_be_blank_on_any_line() {
        let schema = tool_schema(ToolName::MemoryQuery);
        let valid = |query: &str| {
            schema
                .validator()
                .is_valid(&serde_json::json!({"query": query}))
        };
        assert!(valid("zebra"));
        assert!(valid("  \n zebra \n\n more"));
        assert!(!valid(" \t\n "));
    }

    #[test]
    fn every_schema_loads_and_names_its_tool() {
        for tool in ToolName::WITH_AGENT_TOOLS {
            let schema = tool_schema(tool);
            // Compiled lazily in use; compiled here so a broken schema fails the build's tests.
            let _ = schema.validator();
            assert_eq!(schema.document["title"], tool.as_str());
            assert_eq!(schema.document["additionalProperties"], Value::Bool(false));
            assert!(!schema.description.is_empty(), "{tool} has no description");
            for arg in &schema.args {
                assert!(
                    arg.schema["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{tool}.{} has no description",
                    arg.name
                );
            }
        }
    }

    #[test]
    fn positionals_name_real_arguments() {
        for tool in ToolName::WITH_AGENT_TOOLS {
            let schema = tool_schema(tool);
            for name in schema.positional.iter().flatten() {
                assert!(schema.arg(name).is_some(), "{tool}: positional {name}");
            }
            for group in &schema.exclusive {
                for name in &group.fields {
                    assert!(schema.arg(name).is_some(), "{tool}: exclusive {name}");
                }
            }
        }
    }

    #[test]
    fn only_write_batch_and_edit_lack_a_slash_form() {
        for tool in ToolName::EXTENDED {
            assert_eq!(
                tool_schema(tool).positional.is_none(),
                matches!(tool, ToolName::FsWriteBatch | ToolName::FsEdit)
            );
        }
    }
}
