//! Integer arguments read one way at both doors (PROTOCOL.md §6, The schemas): an argument whose
//! schema type is `integer` takes a JSON number written as a whole number, digits only, within the
//! schema's `minimum`..=`maximum` (at most 2^64 − 1). JSON Schema calls `1.0` and `5e0` integers
//! while the executor's typed arguments (`u64`, `usize`, `u32`) refuse them, and `2^64` passes the
//! schema but fits no `u64`; checked here, in `validate_args`, `check`, `exec`, `run`, `watch` and
//! the MCP server give the same `invalid_args` with the same hint, and the executor never sees a
//! number it cannot read.
//!
//! Pure: walks the schema document and the arguments, no I/O.

use serde_json::{Map, Number, Value};

use super::call_types::CallError;
use super::schema::ToolSchema;

/// The first argument at an `integer` place that is a number but not a whole number from 0 to
/// 2^64 − 1 written with digits only. Other kinds (a string where a number belongs) and whole
/// numbers out of the schema's range are left to the schema's own messages.
pub fn check_whole_numbers(
    schema: &ToolSchema,
    args: &Map<String, Value>,
) -> Result<(), CallError> {
    let properties = &schema.document["properties"];
    for (name, value) in args {
        check_at(schema, &properties[name.as_str()], value, name)?;
    }
    Ok(())
}

fn check_at(schema: &ToolSchema, node: &Value, value: &Value, at: &str) -> Result<(), CallError> {
    match value {
        Value::Number(number) if is_integer_type(&node["type"]) => {
            check_number(schema, node, number, at)
        }
        Value::Object(object) => {
            for (key, inner) in object {
                check_at(
                    schema,
                    &node["properties"][key.as_str()],
                    inner,
                    &format!("{at}.{key}"),
                )?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                check_at(schema, &node["items"], inner, &format!("{at}[{index}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn is_integer_type(kind: &Value) -> bool {
    match kind {
        Value::String(name) => name == "integer",
        Value::Array(names) => names.iter().any(|n| n == "integer"),
        _ => false,
    }
}

fn check_number(
    schema: &ToolSchema,
    node: &Value,
    number: &Number,
    at: &str,
) -> Result<(), CallError> {
    if number.as_u64().is_some() {
        return Ok(());
    }
    let minimum = node["minimum"].as_u64().unwrap_or(0);
    let maximum = node["maximum"].as_u64().unwrap_or(u64::MAX);
    let example = example_value(number, minimum, maximum, node["default"].as_u64());
    let range = if maximum == u64::MAX {
        format!("{minimum} or more")
    } else {
        format!("from {minimum} to {maximum}")
    };
    let what = if number.as_i64().is_some() {
        "it is negative"
    } else if number.as_f64().is_some_and(|f| f.fract() != 0.0) {
        "it is not a whole number"
    } else if number.as_f64().is_some_and(|f| f.abs() < TWO_TO_64) {
        "it is written with a decimal point or an exponent"
    } else {
        "it is larger than 2^64 - 1"
    };
    Err(CallError::InvalidBounds {
        tool: schema.tool,
        message: format!(
            "argument \"{at}\" must be a whole number {range}, written with digits only (no decimal point, exponent or sign); got {number}: {what}"
        ),
        hint: format!(
            "Send \"{name}\" as digits only, {range}, e.g. \"{name}\": {example}.",
            name = at.rsplit('.').next().unwrap_or(at)
        ),
    })
}

const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;

/// What to suggest: the value meant, when it is a whole number in range; else the default, else
/// the nearest bound.
fn example_value(number: &Number, minimum: u64, maximum: u64, default: Option<u64>) -> u64 {
    let meant = number
        .as_f64()
        // 2^64 itself rounds to u64::MAX as f64: a whole number meant must be below it.
        .filter(|f| {
            f.fract() == 0.0 && *f >= minimum as f64 && *f <= maximum as f64 && *f < TWO_TO_64
        })
        .map(|f| f as u64);
    meant
        .or(default.filter(|d| (minimum..=maximum).contains(d)))
        .unwrap_or(if number.as_f64().is_some_and(|f| f > maximum as f64) {
            maximum
        } else {
            minimum
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use crate::schema::tool_schema;
    use crate::tool_name::ToolName;
    use serde_json::json;

    fn judge(tool: ToolName, args: Value) -> Result<(), CallError> {
        check_whole_numbers(tool_schema(tool), args.as_object().unwrap())
    }

    #[test]
    fn whole_numbers_in_range_pass() {
        assert!(judge(ToolName::FsRead, json!({"path": "/a", "head": 1})).is_ok());
        assert!(judge(ToolName::FsRead, json!({"path": "/a", "head": u64::MAX})).is_ok());
        assert!(judge(ToolName::FsLs, json!({"path": "/a", "depth": 16})).is_ok());
        assert!(
            judge(ToolName::FsRead, json!({"path": "/a", "head": "5"})).is_ok(),
            "left to the schema"
        );
    }

    #[test]
    fn decimal_points_exponents_signs_and_huge_numbers_are_refused_with_a_hint() {
        let cases: [(&str, &str); 5] = [
            ("1.0", "e.g. \"head\": 1."),
            ("5e0", "e.g. \"head\": 5."),
            ("18446744073709551616", "e.g. \"head\": 1."),
            ("-1", "e.g. \"head\": 1."),
            ("1.5", "e.g. \"head\": 1."),
        ];
        for (written, example) in cases {
            let args: Value =
                serde_json::from_str(&format!("{{\"path\":\"/a\",\"head\":{written}}}")).unwrap();
            let error = judge(ToolName::FsRead, args).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgs, "{written}");
            assert!(
                error
                    .to_string()
                    .contains("argument \"head\" must be a whole number 1 or more"),
                "{error}"
            );
            assert!(
                error.hint().contains(example),
                "{written}: {}",
                error.hint()
            );
        }
        let error = judge(ToolName::FsLs, json!({"path": "/a", "depth": 17.0})).unwrap_err();
        assert!(error.to_string().contains("from 1 to 16"), "{error}");
        assert!(
            error.hint().ends_with("e.g. \"depth\": 1."),
            "{}",
            error.hint()
        );
        let error = judge(ToolName::FsLs, json!({"path": "/a", "depth": 16.0})).unwrap_err();
        assert!(
            error.hint().ends_with("e.g. \"depth\": 16."),
            "{}",
            error.hint()
        );
        // A whole number out of range keeps the schema's message.
        assert!(judge(ToolName::FsLs, json!({"path": "/a", "depth": 17})).is_ok());
    }
}
