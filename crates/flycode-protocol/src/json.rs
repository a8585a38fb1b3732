//! Strict JSON for calls: syntax errors with line and column, and duplicate keys detected rather
//! than silently resolved (serde_json alone keeps the last duplicate).

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::parse::is_paste_artefact;

/// Why a block's content is not an acceptable JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonProblem {
    /// Not JSON at all; line and column are 1-based within the block content.
    Syntax {
        /// serde_json's description of the problem.
        message: String,
        /// 1-based line in the block.
        line: usize,
        /// 1-based column in the block.
        column: usize,
    },
    /// Valid syntax, but an object repeats a key.
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Where the object is, e.g. `args` or `args.files[1]`; empty for the top level.
        location: String,
    },
}

/// Replaces paste artefacts outside JSON strings with spaces. Returns whether anything changed.
/// Content without artefacts (nearly every call) is borrowed, not copied: a call block may hold
/// up to the reply limit (PROTOCOL.md §1 (Reading a reply: reply size limit)), and a copy would cost as much again.
pub fn normalize_artefacts_outside_strings(content: &str) -> (Cow<'_, str>, bool) {
    if !content.contains(is_paste_artefact) {
        return (Cow::Borrowed(content), false);
    }
    let mut out = String::with_capacity(content.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut changed = false;
    for c in content.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            out.push(c);
        } else if is_paste_artefact(c) {
            changed = true;
            out.push(' ');
        } else {
            in_string = c == '"';
            out.push(c);
        }
    }
    (Cow::Owned(out), changed)
}

/// Parses `content` as one JSON value, rejecting duplicate keys at any depth.
///
/// Syntax errors win over duplicates: the whole document is read before a duplicate is reported.
pub fn parse_strict(content: &str) -> Result<Value, JsonProblem> {
    let first_duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(content);
    let parsed = StrictSeed {
        location: String::new(),
        first_duplicate: &first_duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match parsed {
        Err(error) => Err(JsonProblem::Syntax {
            message: describe_syntax_error(&error),
            line: error.line(),
            column: error.column(),
        }),
        Ok(value) => match first_duplicate.into_inner() {
            Some((key, location)) => Err(JsonProblem::DuplicateKey { key, location }),
            None => Ok(value),
        },
    }
}

/// serde_json's message without its trailing " at line L column C" (we say that ourselves).
fn describe_syntax_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Builds a `serde_json::Value` while remembering the first repeated key and where it was.
struct StrictSeed<'a> {
    location: String,
    first_duplicate: &'a RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl StrictSeed<'_> {
    fn child(&self, segment: Segment<'_>) -> StrictSeed<'_> {
        let location = match segment {
            Segment::Key(key) if self.location.is_empty() => key.to_owned(),
            Segment::Key(key) => format!("{}.{key}", self.location),
            Segment::Index(index) => format!("{}[{index}]", self.location),
        };
        StrictSeed {
            location,
            first_duplicate: self.first_duplicate,
        }
    }
}

enum Segment<'k> {
    Key(&'k str),
    Index(usize),
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(Segment::Index(items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(Segment::Key(&key)))?;
            if object.contains_key(&key) {
                let mut first = self.first_duplicate.borrow_mut();
                if first.is_none() {
                    *first = Some((key.clone(), self.location.clone()));
                }
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_json() {
        let value = parse_strict(r#"{"a":[1,2,{"b":null}]}"#).unwrap();
        assert_eq!(value["a"][2]["b"], Value::Null);
    }

    #[test]
    fn reports_a_duplicate_with_its_location() {
        let problem = parse_strict(r#"{"args":{"files":[{},{"path":"/a","path":"/b"}]}}"#);
        assert_eq!(
            problem,
            Err(JsonProblem::DuplicateKey {
                key: "path".into(),
                location: "args.files[1]".into()
            })
        );
    }

    #[test]
    fn syntax_errors_win_over_duplicates() {
        let problem = parse_strict(r#"{"id":"a","id":"b","#).unwrap_err();
        assert!(
            matches!(problem, JsonProblem::Syntax { line: 1, .. }),
            "{problem:?}"
        );
    }

    #[test]
    fn trailing_content_is_a_syntax_error() {
        assert!(matches!(
            parse_strict("{} {}"),
            Err(JsonProblem::Syntax { .. })
        ));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(matches!(
            parse_strict(&deep),
            Err(JsonProblem::Syntax { .. })
        ));
    }

    #[test]
    fn artefacts_are_replaced_only_outside_strings() {
        let (text, changed) =
            normalize_artefacts_outside_strings("{\u{00A0}\"a\":\"x\u{00A0}\\\"\u{3000}\"}");
        assert!(changed);
        assert_eq!(text, "{ \"a\":\"x\u{00A0}\\\"\u{3000}\"}");
    }
}
