//! A quick yes for arguments that are plainly valid, so that a one-shot `flycode exec` need not
//! compile a tool's JSON Schema validator (about a quarter of a trivial call, most of it checking
//! the schema against the 2020-12 meta-schema) for a call it would pass anyway.
//!
//! It answers only "certainly valid": it knows the few keywords flycode's schemas use, and for
//! anything else (a keyword it does not know, a `pattern` to match, a number that is not a whole
//! one, a value it finds wrong) it says "not sure", and the caller asks the real validator, which
//! also writes the error a model reads. So a call is never let through that the validator would
//! refuse, and every refusal still comes from the validator (PROTOCOL.md §6 (The schemas)).

use serde_json::{Map, Value};

/// Whether `value` certainly satisfies `schema` (one of flycode's tool schemas or a part of it).
/// `false` means "not sure": ask the validator.
pub fn certainly_valid(schema: &Value, value: &Value) -> bool {
    let Some(schema) = schema.as_object() else {
        return false;
    };
    schema
        .iter()
        .all(|(keyword, rule)| keyword_holds(schema, keyword, rule, value))
}

/// Whether one keyword of `schema` certainly holds for `value`.
fn keyword_holds(schema: &Map<String, Value>, keyword: &str, rule: &Value, value: &Value) -> bool {
    match keyword {
        // Annotations: they constrain nothing.
        "$schema" | "title" | "description" | "default" | "examples" => true,
        _ if keyword.starts_with("x-") => true,
        "type" => rule.as_str().is_some_and(|kind| has_type(kind, value)),
        "enum" => rule
            .as_array()
            .is_some_and(|values| values.iter().any(|v| same_json(v, value))),
        "properties" => properties_hold(rule, value),
        "required" => required_hold(rule, value),
        "additionalProperties" => additional_hold(schema, rule, value),
        "items" => match value {
            Value::Array(items) => items.iter().all(|item| certainly_valid(rule, item)),
            _ => true,
        },
        "minItems" | "maxItems" => match value {
            Value::Array(items) => within(keyword == "minItems", rule, items.len() as u64),
            _ => true,
        },
        "minLength" | "maxLength" => match value {
            // JSON Schema counts characters (code points).
            Value::String(text) => {
                within(keyword == "minLength", rule, text.chars().count() as u64)
            }
            _ => true,
        },
        "minimum" | "maximum" => match value {
            Value::Number(_) => number_within(keyword == "minimum", rule, value),
            _ => true,
        },
        // A pattern to match (or any other keyword): not sure.
        _ => false,
    }
}

fn has_type(kind: &str, value: &Value) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        // 1.0 is an integer to JSON Schema; only plain whole numbers are certain here.
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// Equal as JSON values, numbers by their whole value only (a fraction is "not sure").
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => whole(a).is_some() && whole(a) == whole(b),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

fn whole(value: &Value) -> Option<i128> {
    value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
}

fn within(is_lower: bool, rule: &Value, count: u64) -> bool {
    match rule.as_u64() {
        Some(bound) if is_lower => count >= bound,
        Some(bound) => count <= bound,
        None => false,
    }
}

fn number_within(is_lower: bool, rule: &Value, value: &Value) -> bool {
    match (whole(rule), whole(value)) {
        (Some(bound), Some(number)) if is_lower => number >= bound,
        (Some(bound), Some(number)) => number <= bound,
        _ => false,
    }
}

fn properties_hold(rule: &Value, value: &Value) -> bool {
    let (Some(properties), Value::Object(object)) = (rule.as_object(), value) else {
        return rule.is_object();
    };
    object.iter().all(|(name, item)| {
        properties
            .get(name)
            .is_none_or(|schema| certainly_valid(schema, item))
    })
}

fn required_hold(rule: &Value, value: &Value) -> bool {
    let (Some(names), Value::Object(object)) = (rule.as_array(), value) else {
        return rule.is_array();
    };
    names
        .iter()
        .all(|name| name.as_str().is_some_and(|name| object.contains_key(name)))
}

/// `additionalProperties: false` with `properties` beside it: every name is a known one.
fn additional_hold(schema: &Map<String, Value>, rule: &Value, value: &Value) -> bool {
    let Value::Object(object) = value else {
        return true;
    };
    match rule {
        Value::Bool(true) => true,
        Value::Bool(false) => {
            let known = schema.get("properties").and_then(Value::as_object);
            object
                .keys()
                .all(|name| known.is_some_and(|known| known.contains_key(name)))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolName;
    use crate::schema::tool_schema;
    use serde_json::json;

    /// fs.read calls, valid and not, each with whether the quick check says yes.
    fn read_calls() -> Vec<(ToolName, Value, bool)> {
        vec![
            (ToolName::FsRead, json!({"path": "/w/a"}), true),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "head": 10, "encoding": "hex"}),
                true,
            ),
            (ToolName::FsRead, json!({"path": "/w/a", "head": 0}), false),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "head": 1.0}),
                false,
            ),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "head": 1.5}),
                false,
            ),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "lines": "1-2"}),
                false,
            ),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "lines": "x"}),
                false,
            ),
            (
                ToolName::FsRead,
                json!({"path": "/w/a", "encoding": "utf-16"}),
                false,
            ),
            (ToolName::FsRead, json!({"path": "/w/a", "extra": 1}), false),
            (ToolName::FsRead, json!({"head": 3}), false),
            (ToolName::FsRead, json!({"path": 3}), false),
            (
                ToolName::FsLs,
                json!({"path": "/w", "depth": 3, "sizes": false}),
                true,
            ),
        ]
    }

    /// The other tools' calls.
    fn other_calls() -> Vec<(ToolName, Value, bool)> {
        vec![
            (ToolName::FsLs, json!({"path": "/w", "depth": 17}), false),
            (ToolName::FsLs, json!({"path": "/w", "glob": ""}), false),
            (
                ToolName::FsSearch,
                json!({"path": "/w", "query": "x", "limit": 100}),
                true,
            ),
            (
                ToolName::FsWrite,
                json!({"path": "/w/a", "mode": "overwrite", "content": "x"}),
                true,
            ),
            (
                ToolName::FsWrite,
                json!({"path": "/w/a", "mode": "clobber", "content": "x"}),
                false,
            ),
            (
                ToolName::FsEdit,
                json!({"path": "/w/a", "edits": [{"oldText": "a", "newText": "b"}]}),
                true,
            ),
            (
                ToolName::FsEdit,
                json!({"path": "/w/a", "edits": []}),
                false,
            ),
            (
                ToolName::FsEdit,
                json!({"path": "/w/a", "edits": [{"oldText": "", "newText": "b"}]}),
                false,
            ),
            (
                ToolName::FsEdit,
                json!({"path": "/w/a", "edits": [{"oldText": "a"}]}),
                false,
            ),
            (ToolName::ShellExec, json!({"command": "true"}), true),
        ]
    }

    /// Every "certainly valid" is one the validator agrees with, over calls of every tool, valid
    /// and not; and the plain calls are recognised (or the quick check would save nothing).
    #[test]
    fn a_quick_yes_is_never_a_validator_no() {
        for (tool, args, quick) in read_calls().into_iter().chain(other_calls()) {
            let schema = tool_schema(tool);
            let certain = certainly_valid(&schema.document, &args);
            let valid = schema.validator().is_valid(&args);
            assert!(
                !certain || valid,
                "{tool} {args}: a quick yes the validator refuses"
            );
            assert_eq!(certain, quick, "{tool} {args}");
        }
    }
}
