//! A tool's arguments against its schema: JSON Schema first, then the annotations standard
//! keywords cannot say (unique items, exclusive groups, absolute paths). Shared by JSON calls and
//! slash commands, so both are judged by one rule book.

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Value};

use super::call_types::{CallError, json_kind, signature};
use super::paths::path_form;
use super::quick_check::certainly_valid;
use super::schema::{ToolSchema, tool_schema};
use super::tool_name::ToolName;
use super::whole_numbers::check_whole_numbers;

/// Checks `args` against `tool`'s schema and annotations; returns them as an object.
pub fn validate_args(tool: ToolName, args: Value) -> Result<Map<String, Value>, CallError> {
    let schema = tool_schema(tool);
    let invalid = |message: String| CallError::InvalidArgs { tool, message };
    let Value::Object(mut args) = args else {
        return Err(invalid(format!(
            "\"args\" must be an object of {tool}'s arguments, but it is {}",
            json_kind(&args)
        )));
    };
    drop_unset_optionals(schema, &mut args);
    let as_value = Value::Object(args);
    // Plainly valid arguments skip the validator, which is compiled on first use (one-shot
    // start-up); anything less than certain, and every error, is the validator's.
    let schema_error = if certainly_valid(&schema.document, &as_value) {
        None
    } else {
        most_telling_error(schema, &as_value)
    };
    // Unknown and missing arguments come first; then numbers where whole numbers belong, read by
    // the executor's rule (JSON Schema alone would take 1.0 and 2^64).
    if let Some(error) = schema_error.as_ref().filter(|e| rank(e.kind()) < 2) {
        return Err(invalid(describe(schema, error)));
    }
    if let Value::Object(args) = &as_value {
        check_whole_numbers(schema, args)?;
    }
    if let Some(error) = schema_error {
        return Err(invalid(describe(schema, &error)));
    }
    let Value::Object(args) = as_value else {
        return Err(invalid("\"args\" must be an object".into()));
    };
    check_unique_items(schema, &args)?;
    check_bounds(schema, &args)?;
    check_exclusive_groups(schema, &args)?;
    check_paths(tool, schema, &args)?;
    Ok(args)
}

/// Takes an optional argument given as `null`, or as `""` where no empty text is a value it can
/// have (a path, a glob, a choice, a pattern), as not given: small models fill every argument
/// they are shown, and `"cwd": null` or `"glob": ""` means "no value" to them (PROTOCOL.md §3,
/// Decision on unset arguments). A required argument is left as it is, for its error to say so.
fn drop_unset_optionals(schema: &ToolSchema, args: &mut Map<String, Value>) {
    let required: Vec<&str> = schema.document["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = &schema.document["properties"];
    args.retain(|name, value| {
        if required.contains(&name.as_str()) {
            return true;
        }
        let property = &properties[name.as_str()];
        let unset = match value {
            Value::Null => !property.is_null(),
            Value::String(text) if text.is_empty() => {
                ["minLength", "enum", "pattern", "x-flycode-path"]
                    .iter()
                    .any(|keyword| property.get(keyword).is_some())
            }
            _ => false,
        };
        !unset
    });
}

/// The arguments of a refused call repaired by leaving things out, for a correction a weak model
/// can copy (PROTOCOL.md §3, Decision on unset arguments): optional arguments whose own values
/// the schema refuses are dropped, and of a mutually exclusive group only the first given is
/// kept. `None` when leaving optional arguments out does not make the call valid (a required
/// argument is wrong, a path is relative, an argument is unknown and needed...).
pub fn repaired_args(tool: ToolName, args: &Map<String, Value>) -> Option<Map<String, Value>> {
    let schema = tool_schema(tool);
    let required: Vec<&str> = schema.document["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut repaired = args.clone();
    drop_unset_optionals(schema, &mut repaired);
    // The first of a group as the model wrote them stays.
    for group in &schema.exclusive {
        let later: Vec<String> = repaired
            .keys()
            .filter(|name| group.fields.contains(name))
            .skip(1)
            .cloned()
            .collect();
        for name in later {
            repaired.remove(&name);
        }
    }
    let value = Value::Object(repaired);
    let offending: Vec<String> = schema
        .validator()
        .iter_errors(&value)
        .map(|error| argument_name(error.instance_path().as_str()))
        .collect();
    let Value::Object(mut repaired) = value else {
        return None;
    };
    for name in offending {
        let top = name.split(['.', '[']).next().unwrap_or_default().to_owned();
        if top.is_empty() || required.contains(&top.as_str()) {
            return None;
        }
        repaired.remove(&top);
    }
    (repaired != *args && validate_args(tool, Value::Object(repaired.clone())).is_ok())
        .then_some(repaired)
}

/// The schema error a model can act on first: unknown or missing arguments before types before
/// ranges; ties keep the validator's order, so the choice is deterministic.
fn most_telling_error<'a>(schema: &'a ToolSchema, args: &'a Value) -> Option<ValidationError<'a>> {
    schema
        .validator()
        .iter_errors(args)
        .enumerate()
        .min_by_key(|(index, error)| (rank(error.kind()), *index))
        .map(|(_, error)| error)
}

fn rank(kind: &ValidationErrorKind) -> u8 {
    match kind {
        ValidationErrorKind::AdditionalProperties { .. } => 0,
        ValidationErrorKind::Required { .. } => 1,
        ValidationErrorKind::Type { .. } => 2,
        _ => 3,
    }
}

/// `files[1].path` for the JSON pointer `/files/1/path`.
fn argument_name(pointer: &str) -> String {
    let mut name = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.bytes().all(|b| b.is_ascii_digit()) && !segment.is_empty() {
            name.push_str(&format!("[{segment}]"));
        } else {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(&segment);
        }
    }
    name
}

fn describe(schema: &ToolSchema, error: &ValidationError<'_>) -> String {
    let at = argument_name(error.instance_path().as_str());
    let subject = if at.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("argument \"{at}\"")
    };
    let inside = |what: String| {
        if at.is_empty() {
            what
        } else {
            format!("{what} in \"{at}\"")
        }
    };
    let got = short_json(error.instance());
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let names: Vec<String> = unexpected.iter().map(|n| format!("\"{n}\"")).collect();
            let known = if at.is_empty() {
                format!(" (it takes: {})", signature(schema))
            } else {
                String::new()
            };
            inside(format!("unknown argument {}{known}", names.join(", ")))
        }
        ValidationErrorKind::Required { property } => {
            inside(format!("missing required argument {property}"))
        }
        ValidationErrorKind::Type { kind } => {
            format!("{subject} must be {}, got {got}", describe_type(kind))
        }
        ValidationErrorKind::Enum { options } => {
            let choices: Vec<String> = options
                .as_array()
                .map(|o| o.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!("{subject} must be one of {}, got {got}", choices.join(", "))
        }
        ValidationErrorKind::Minimum { limit } => {
            format!("{subject} must be at least {limit}, got {got}")
        }
        ValidationErrorKind::Maximum { limit } => {
            format!("{subject} must be at most {limit}, got {got}")
        }
        ValidationErrorKind::MinLength { limit: 1 } => format!("{subject} must not be empty"),
        ValidationErrorKind::MinLength { limit } => {
            let length = error
                .instance()
                .as_str()
                .map_or(0, |text| text.chars().count());
            format!("{subject} must be at least {limit} characters long, got {length} ({got})")
        }
        ValidationErrorKind::MinItems { limit } => {
            format!("{subject} must have at least {limit} item(s)")
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("{subject} must have at most {limit} items")
        }
        ValidationErrorKind::Pattern { .. } => {
            let expected = property_description(schema, &at)
                .map(|d| format!("; expected: {d}"))
                .unwrap_or_default();
            format!("{subject} has the wrong form, got {got}{expected}")
        }
        _ => format!("{subject}: {error}"),
    }
}

fn describe_type(kind: &TypeKind) -> String {
    let name = |t: &jsonschema::JsonType| match t.to_string().as_str() {
        "integer" => "an integer".to_owned(),
        "array" => "an array".to_owned(),
        "object" => "an object".to_owned(),
        other => format!("a {other}"),
    };
    match kind {
        TypeKind::Single(t) => name(t),
        TypeKind::Multiple(types) => types
            .into_iter()
            .map(|t| name(&t))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// The description of the argument at `files[0].mode`-style `at`, for pattern errors.
fn property_description<'s>(schema: &'s ToolSchema, at: &str) -> Option<&'s str> {
    let mut node = &schema.document;
    for part in at.split('.') {
        let name = part.split('[').next().unwrap_or(part);
        node = &node["properties"][name];
        if part.contains('[') {
            node = &node["items"];
        }
    }
    node["description"].as_str()
}

/// A value for a message: JSON, shortened to keep the line readable.
fn short_json(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let cut: String = text.chars().take(57).collect();
    format!("{cut}...")
}

/// An array marked `x-flycode-unique: KEY` may not hold two items with the same KEY.
fn check_unique_items(schema: &ToolSchema, args: &Map<String, Value>) -> Result<(), CallError> {
    for arg in &schema.args {
        let Some(key) = arg.schema["x-flycode-unique"].as_str() else {
            continue;
        };
        let Some(items) = args.get(&arg.name).and_then(Value::as_array) else {
            continue;
        };
        for (index, item) in items.iter().enumerate() {
            let earlier = items[..index]
                .iter()
                .position(|other| other.get(key) == item.get(key));
            if let Some(first) = earlier {
                return Err(CallError::InvalidArgs {
                    tool: schema.tool,
                    message: format!(
                        "argument \"{name}[{index}].{key}\" repeats \"{name}[{first}].{key}\" ({}); each {key} may appear once",
                        short_json(&item[key]),
                        name = arg.name,
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Bounds the schema's patterns cannot order: an `x-flycode-span` string (`START-END`, `A-B`)
/// may not end before it starts, and an argument marked `x-flycode-at-most: OTHER` may not
/// exceed OTHER when both are given. Caught here, a reversed span is `invalid_args` at `check`
/// time, not only when the call runs.
fn check_bounds(schema: &ToolSchema, args: &Map<String, Value>) -> Result<(), CallError> {
    for arg in &schema.args {
        let Some(value) = args.get(&arg.name) else {
            continue;
        };
        let reversed = |message: String, hint: String| CallError::InvalidBounds {
            tool: schema.tool,
            message,
            hint,
        };
        if arg.schema["x-flycode-span"] == Value::Bool(true)
            && let Some(text) = value.as_str()
        {
            let form = arg.schema["description"].as_str().unwrap_or_default();
            let hint = format!(
                "Give \"{}\" with its start no greater than its end. {form}",
                arg.name
            );
            let Some((start, end)) = text.split_once('-') else {
                continue;
            };
            let (Ok(start), end) = (start.parse::<u64>(), end.parse::<u64>()) else {
                return Err(reversed(
                    format!(
                        "argument \"{}\" is {}: its start is too large",
                        arg.name,
                        short_json(value)
                    ),
                    hint,
                ));
            };
            match end {
                Ok(end) if end < start => {
                    return Err(reversed(
                        format!(
                            "argument \"{}\" is {}: it ends ({end}) before it starts ({start})",
                            arg.name,
                            short_json(value)
                        ),
                        hint,
                    ));
                }
                Err(_) if !text.ends_with('-') => {
                    return Err(reversed(
                        format!(
                            "argument \"{}\" is {}: its end is too large",
                            arg.name,
                            short_json(value)
                        ),
                        hint,
                    ));
                }
                _ => {}
            }
        }
        if let Some(other) = arg.schema["x-flycode-at-most"].as_str()
            && let (Some(low), Some(high)) =
                (value.as_u64(), args.get(other).and_then(Value::as_u64))
            && low > high
        {
            return Err(reversed(
                format!(
                    "argument \"{}\" ({low}) is more than \"{other}\" ({high}), so nothing could match",
                    arg.name
                ),
                format!(
                    "Give {} at most {other}, or leave one of them out.",
                    arg.name
                ),
            ));
        }
    }
    Ok(())
}

fn check_exclusive_groups(schema: &ToolSchema, args: &Map<String, Value>) -> Result<(), CallError> {
    for group in &schema.exclusive {
        let given: Vec<String> = group
            .fields
            .iter()
            .filter(|f| args.contains_key(f.as_str()))
            .cloned()
            .collect();
        if given.len() > 1 {
            return Err(CallError::MutuallyExclusive {
                tool: schema.tool,
                given,
                group: group.fields.clone(),
            });
        }
        if given.is_empty() && group.is_required {
            return Err(CallError::InvalidArgs {
                tool: schema.tool,
                message: format!("give exactly one of {}", group.fields.join(", ")),
            });
        }
    }
    Ok(())
}

/// Every `x-flycode-path` string must be absolute, including inside arrays of objects.
fn check_paths(
    tool: ToolName,
    schema: &ToolSchema,
    args: &Map<String, Value>,
) -> Result<(), CallError> {
    fn walk(
        tool: ToolName,
        properties: &Value,
        object: &Map<String, Value>,
        prefix: &str,
    ) -> Result<(), CallError> {
        for (name, value) in object {
            let property = &properties[name];
            let arg = format!("{prefix}{name}");
            match value {
                Value::String(path)
                    if property["x-flycode-path"] == Value::Bool(true)
                        && !path_form(path).is_absolute() =>
                {
                    return Err(CallError::RelativePath {
                        tool,
                        arg,
                        path: path.clone(),
                    });
                }
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        if let Value::String(path) = item
                            && property["items"]["x-flycode-path"] == Value::Bool(true)
                            && !path_form(path).is_absolute()
                        {
                            return Err(CallError::RelativePath {
                                tool,
                                arg: format!("{arg}[{index}]"),
                                path: path.clone(),
                            });
                        }
                        if let Value::Object(inner) = item {
                            let prefix = format!("{arg}[{index}].");
                            walk(tool, &property["items"]["properties"], inner, &prefix)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
    walk(tool, &schema.document["properties"], args, "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use serde_json::json;

    fn repaired(tool: ToolName, args: Value) -> Option<Value> {
        let Value::Object(args) = args else {
            unreachable!()
        };
        repaired_args(tool, &args).map(Value::Object)
    }

    #[test]
    fn a_refused_call_is_repaired_by_leaving_out_its_refused_optional_arguments() {
        // The first of exclusive arguments, as the model wrote them, is kept.
        assert_eq!(
            repaired(
                ToolName::FsRead,
                json!({"path": "/a", "tail": 10, "head": 1})
            ),
            Some(json!({"path": "/a", "tail": 10}))
        );
        // A made-up value of an optional argument goes; the rest stays.
        assert_eq!(
            repaired(
                ToolName::FsWrite,
                json!({"path": "/a", "mode": "overwrite", "content": "x", "expectedSha256": "your-sha256-hash"})
            ),
            Some(json!({"path": "/a", "mode": "overwrite", "content": "x"}))
        );
        // Nothing to leave out, or a required argument at fault: no repair to offer.
        assert_eq!(repaired(ToolName::FsRead, json!({"path": "/a"})), None);
        assert_eq!(
            repaired(ToolName::FsRead, json!({"path": 7, "head": 1})),
            None
        );
        assert_eq!(
            repaired(ToolName::FsRead, json!({"path": "rel", "head": 0})),
            None
        );
    }

    fn message(tool: ToolName, args: Value) -> (ErrorCode, String) {
        let error = validate_args(tool, args).unwrap_err();
        (error.code(), error.to_string())
    }

    #[test]
    fn an_unset_optional_argument_is_not_given() {
        let args = validate_args(
            ToolName::ShellExec,
            json!({"command": "ls", "cwd": null, "timeoutMs": null}),
        )
        .unwrap();
        assert_eq!(Value::Object(args), json!({"command": "ls"}));
        let args = validate_args(
            ToolName::FsSearch,
            json!({"path": "/a", "query": "x", "glob": ""}),
        )
        .unwrap();
        assert!(!args.contains_key("glob"));
        // An empty text that is a value stays; a required argument keeps its error.
        let args = validate_args(
            ToolName::FsDiff,
            json!({"leftPath": "/a", "rightContent": ""}),
        )
        .unwrap();
        assert_eq!(args["rightContent"], "");
        assert_eq!(
            message(ToolName::FsRead, json!({"path": null})).0,
            ErrorCode::InvalidArgs
        );
        // A name the tool does not take is still unknown, null or not.
        assert!(
            message(ToolName::FsRead, json!({"path": "/a", "hed": null}))
                .1
                .contains("hed")
        );
    }

    #[test]
    fn names_the_unknown_argument() {
        let (code, text) = message(ToolName::FsRead, json!({"path": "/a", "heads": 3}));
        assert_eq!(code, ErrorCode::InvalidArgs);
        assert!(text.contains("unknown argument \"heads\""), "{text}");
        assert!(text.contains("path, head?"), "{text}");
    }

    #[test]
    fn names_the_missing_argument() {
        let (_, text) = message(ToolName::FsWrite, json!({"path": "/a", "content": ""}));
        assert!(
            text.contains("missing required argument \"mode\""),
            "{text}"
        );
    }

    #[test]
    fn names_wrong_types_and_ranges() {
        let (_, text) = message(ToolName::FsRead, json!({"path": "/a", "head": "12"}));
        assert_eq!(
            text,
            "fs.read: argument \"head\" must be an integer, got \"12\""
        );
        let (_, text) = message(ToolName::FsLs, json!({"path": "/a", "depth": 17}));
        assert_eq!(text, "fs.ls: argument \"depth\" must be at most 16, got 17");
        let (_, text) = message(ToolName::FsRead, json!({"path": "/a", "encoding": "utf8"}));
        assert!(
            text.contains("one of \"utf-8\", \"base64\", \"hex\""),
            "{text}"
        );
    }

    #[test]
    fn nested_errors_name_the_item() {
        let (_, text) = message(
            ToolName::FsWriteBatch,
            json!({"files": [{"path": "/a", "content": "x"}, {"path": "/b"}]}),
        );
        assert!(text.contains("\"content\" in \"files[1]\""), "{text}");
    }

    #[test]
    fn repeated_batch_paths_are_invalid() {
        let (code, text) = message(
            ToolName::FsWriteBatch,
            json!({"files": [{"path": "/a", "content": "x"}, {"path": "/a", "content": "y"}]}),
        );
        assert_eq!(code, ErrorCode::InvalidArgs);
        assert!(
            text.contains("files[1].path\" repeats \"files[0].path"),
            "{text}"
        );
    }

    #[test]
    fn exclusive_groups_and_required_choice() {
        let (code, _) = message(
            ToolName::FsRead,
            json!({"path": "/a", "head": 1, "tail": 1}),
        );
        assert_eq!(code, ErrorCode::MutuallyExclusive);
        let (code, text) = message(ToolName::FsDiff, json!({"leftPath": "/a"}));
        assert_eq!(code, ErrorCode::InvalidArgs);
        assert!(
            text.contains("exactly one of rightPath, rightContent"),
            "{text}"
        );
    }

    #[test]
    fn reversed_spans_are_invalid_before_anything_runs() {
        for (arg, value, form) in [
            ("range", "500-100", "0-4096"),
            ("lines", "60-20", "20-60"),
            ("lines", "99999999999999999999999-", "20-60"),
        ] {
            let error =
                validate_args(ToolName::FsRead, json!({"path": "/a", arg: value})).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgs, "{arg} {value}");
            let text = error.to_string();
            assert!(
                text.contains(&format!("\"{arg}\" is \"{value}\"")),
                "{text}"
            );
            let hint = error.hint();
            assert!(hint.contains(&format!("\"{arg}\"")), "{hint}");
            assert!(hint.contains(form), "{arg}: {hint}");
        }
        let error =
            validate_args(ToolName::FsRead, json!({"path": "/a", "lines": "60-20"})).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("ends (20) before it starts (60)")
        );
        assert!(!error.hint().contains("0-4096"), "{}", error.hint());
        for ok in ["100-100", "0-", "5-6"] {
            validate_args(ToolName::FsRead, json!({"path": "/a", "range": ok})).unwrap();
        }
        validate_args(ToolName::FsRead, json!({"path": "/a", "lines": "20-20"})).unwrap();
    }

    #[test]
    fn a_lower_bound_above_its_upper_bound_is_invalid() {
        let (code, text) = message(
            ToolName::FsSearch,
            json!({"path": "/a", "query": "x", "minBytes": 500, "maxBytes": 100}),
        );
        assert_eq!(code, ErrorCode::InvalidArgs);
        assert!(
            text.contains("\"minBytes\" (500) is more than \"maxBytes\" (100)"),
            "{text}"
        );
        validate_args(
            ToolName::FsSearch,
            json!({"path": "/a", "query": "x", "minBytes": 100, "maxBytes": 100}),
        )
        .unwrap();
    }

    #[test]
    fn relative_paths_are_found_at_any_depth() {
        let (code, text) = message(
            ToolName::FsWriteBatch,
            json!({"files": [{"path": "/a", "content": "x"}, {"path": "b", "content": "y"}]}),
        );
        assert_eq!(code, ErrorCode::RelativePath);
        assert!(text.contains("files[1].path"), "{text}");
        let (code, _) = message(ToolName::ProcessRun, json!({"command": "ls", "cwd": "~/x"}));
        assert_eq!(code, ErrorCode::RelativePath);
    }
}
