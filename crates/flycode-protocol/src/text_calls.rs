//! Calls written as text in a native-mode reply: local models served without a tool-call parser
//! (or ignoring it) write their call in the message text, as a ```` ```json ```` or
//! `flycode-call` block, a bare JSON object, a Qwen/Hermes `<tool_call>{…}</tool_call>` element
//! or a `<function=NAME>{…}</function>` element. Such a reply is never a final answer
//! (PROTOCOL.md §13 (The API loop: calls written as text)). A call drafted in the reply's
//! reasoning (`<think>…</think>`, [`super::reasoning`]) is not one. This module only finds them;
//! the loop decides whether one runs. Pure: text in, findings out.

use std::ops::Range;

use serde_json::{Map, Value};

use super::{ToolName, ToolSet};

/// How a call was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextCallForm {
    /// A fenced block tagged `json` (or untagged) holding a call object.
    JsonBlock,
    /// A `flycode-call` block.
    CallBlock,
    /// `<tool_call>{…}</tool_call>`.
    ToolCallElement,
    /// `<function=NAME>{…}</function>`.
    FunctionElement,
    /// A JSON object in the text naming an offered tool.
    BareJson,
}

impl TextCallForm {
    /// How the form is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            TextCallForm::JsonBlock => "a ```json block",
            TextCallForm::CallBlock => "a flycode-call block",
            TextCallForm::ToolCallElement => "a <tool_call> element",
            TextCallForm::FunctionElement => "a <function=…> element",
            TextCallForm::BareJson => "a JSON object",
        }
    }
}

/// A call found in the text.
#[derive(Clone, Debug, PartialEq)]
pub struct TextCall {
    /// How it was written.
    pub form: TextCallForm,
    /// The tool it names, when that tool is in the set looked for.
    pub tool: Option<ToolName>,
    /// The name as written.
    pub name: String,
    /// Its arguments, when they are a JSON object.
    pub args: Option<Map<String, Value>>,
    /// Where it is written, in the text with its reasoning taken out (the text itself when it
    /// holds none).
    pub span: Range<usize>,
}

/// Every call written in `text` outside its reasoning, in order. An element (`<tool_call>`,
/// `<function=…>`) or a `flycode-call` block is a call whatever it names; a JSON block or a bare
/// object only when it names a tool of `set` (so JSON data in an answer stays prose).
pub fn find_text_calls(text: &str, set: ToolSet) -> Vec<TextCall> {
    let text = &*super::reasoning::without_reasoning(text);
    let mut calls = Vec::new();
    let mut rest = text.to_owned();
    for (start, end, inner) in elements(text, "<tool_call>", "</tool_call>") {
        calls.push(from_object(
            TextCallForm::ToolCallElement,
            &inner,
            set,
            start..end,
        ));
        blank(&mut rest, start, end);
    }
    for (start, end, name, inner) in function_elements(text) {
        let args = serde_json::from_str::<Value>(inner.trim())
            .ok()
            .and_then(|v| v.as_object().cloned());
        calls.push(TextCall {
            form: TextCallForm::FunctionElement,
            tool: ToolName::from_native_name(&name, set),
            name,
            args,
            span: start..end,
        });
        blank(&mut rest, start, end);
    }
    for (start, end, tag, inner) in fences(&rest.clone()) {
        let form = match tag.as_str() {
            "flycode-call" => TextCallForm::CallBlock,
            "json" | "" | "tool_call" | "function" => TextCallForm::JsonBlock,
            _ => continue,
        };
        let call = from_object(form, &inner, set, start..end);
        // A block shaped like a call is an attempted call, whatever the name it gives.
        if call.tool.is_some() || form == TextCallForm::CallBlock || is_call_shaped(&inner) {
            calls.push(call);
        }
        blank(&mut rest, start, end);
    }
    calls.extend(bare_objects(&rest, set));
    calls
}

/// Whether `inner` is a JSON object made of a call's keys only: a name (`name` or `tool`) and
/// arguments (`arguments`, `args`, `parameters` or `input`) as an object, and at most an `id`
/// and a `type`; or `{"function": {…}}` of the same. A data object that happens to have a
/// `name` has other keys too.
fn is_call_shaped(inner: &str) -> bool {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(inner.trim()) else {
        return false;
    };
    let object = match object.get("function") {
        Some(Value::Object(function))
            if object
                .keys()
                .all(|k| matches!(k.as_str(), "function" | "id" | "type")) =>
        {
            function.clone()
        }
        _ => object,
    };
    let named = ["name", "tool"]
        .iter()
        .filter(|key| object.get(**key).is_some_and(Value::is_string))
        .count()
        == 1;
    let with_arguments = ["arguments", "args", "parameters", "input"]
        .iter()
        .filter(|key| {
            object
                .get(**key)
                .is_some_and(|v| v.is_object() || v.is_string())
        })
        .count()
        == 1;
    named
        && with_arguments
        && object.keys().all(|key| {
            matches!(
                key.as_str(),
                "name" | "tool" | "arguments" | "args" | "parameters" | "input" | "id" | "type"
            )
        })
}

/// A call read from a JSON object text: `{"name", "arguments"|"parameters"}`, `{"tool",
/// "args"}` or `{"function": {"name", "arguments"}}`; arguments may be a JSON string. Text that
/// is not such an object gives a call of no tool.
fn from_object(form: TextCallForm, inner: &str, set: ToolSet, span: Range<usize>) -> TextCall {
    serde_json::from_str::<Value>(inner.trim())
        .ok()
        .as_ref()
        .and_then(Value::as_object)
        .and_then(|object| call_of_object(form, object, set, span.clone()))
        .unwrap_or(TextCall {
            form,
            tool: None,
            name: String::new(),
            args: None,
            span,
        })
}

fn call_of_object(
    form: TextCallForm,
    object: &Map<String, Value>,
    set: ToolSet,
    span: Range<usize>,
) -> Option<TextCall> {
    let object = match object.get("function") {
        Some(Value::Object(function)) => function,
        _ => object,
    };
    let name = object
        .get("name")
        .or_else(|| object.get("tool"))
        .and_then(Value::as_str)?
        .to_owned();
    let args = ["arguments", "args", "parameters", "input"]
        .iter()
        .find_map(|key| object.get(*key))
        .and_then(|value| match value {
            Value::Object(map) => Some(map.clone()),
            Value::String(text) => serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.as_object().cloned()),
            _ => None,
        });
    Some(TextCall {
        form,
        tool: ToolName::from_native_name(&name, set),
        name,
        args,
        span,
    })
}

/// `open…close` elements: (start, end, inner text). An element left open runs to the end.
fn elements(text: &str, open: &str, close: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(open) {
        let start = from + at;
        let inner_start = start + open.len();
        let (inner_end, end) = match text[inner_start..].find(close) {
            Some(i) => (inner_start + i, inner_start + i + close.len()),
            None => (text.len(), text.len()),
        };
        found.push((start, end, text[inner_start..inner_end].to_owned()));
        from = end;
    }
    found
}

/// `<function=NAME>…</function>` elements: (start, end, name, inner text).
fn function_elements(text: &str) -> Vec<(usize, usize, String, String)> {
    let mut found = Vec::new();
    for (start, end, inner) in elements(text, "<function=", "</function>") {
        let Some(close) = inner.find('>') else {
            continue;
        };
        let name = inner[..close].trim().trim_matches('"').to_owned();
        found.push((start, end, name, inner[close + 1..].to_owned()));
    }
    found
}

/// Fenced blocks at the start of a line: (start, end, info tag lower-cased, content).
fn fences(text: &str) -> Vec<(usize, usize, String, String)> {
    let mut found = Vec::new();
    let mut open: Option<(usize, usize, String, usize)> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match &open {
            None if ticks >= 3 => {
                let tag = trimmed[ticks..].trim().to_ascii_lowercase();
                open = Some((offset, ticks, tag, offset + line.len()));
            }
            Some((start, width, tag, content_start))
                if ticks >= *width && trimmed.len() == ticks =>
            {
                found.push((
                    *start,
                    offset + line.len(),
                    tag.clone(),
                    text[*content_start..offset].to_owned(),
                ));
                open = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    if let Some((start, _, tag, content_start)) = open {
        found.push((start, text.len(), tag, text[content_start..].to_owned()));
    }
    found
}

/// JSON objects in `text` that start a line and name a tool of `set`.
fn bare_objects(text: &str, set: ToolSet) -> Vec<TextCall> {
    let mut calls = Vec::new();
    let mut offset = 0;
    let mut skip_to = 0;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let lead = line.len() - line.trim_start().len();
        if line_start < skip_to || !line.trim_start().starts_with('{') {
            continue;
        }
        let from = line_start + lead;
        let mut stream = serde_json::Deserializer::from_str(&text[from..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(object))) = stream.next() {
            skip_to = from + stream.byte_offset();
            if let Some(call) = call_of_object(TextCallForm::BareJson, &object, set, from..skip_to)
                && call.tool.is_some()
            {
                calls.push(call);
            }
        }
    }
    calls
}

/// Replaces `text[start..end]` by spaces (kept the same length, so later offsets hold).
fn blank(text: &mut String, start: usize, end: usize) {
    let end = end.min(text.len());
    if start < end && text.is_char_boundary(start) && text.is_char_boundary(end) {
        text.replace_range(start..end, &" ".repeat(end - start));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(text: &str) -> Vec<(TextCallForm, Option<ToolName>)> {
        find_text_calls(text, ToolSet::Agent)
            .into_iter()
            .map(|c| (c.form, c.tool))
            .collect()
    }

    #[test]
    fn finds_each_form_with_its_tool_and_arguments() {
        let json_block = "I will read it.\n```json\n{\"name\": \"fs_read\", \"arguments\": {\"path\": \"/w/a\"}}\n```\n";
        let calls = find_text_calls(json_block, ToolSet::Agent);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].tool, Some(ToolName::FsRead));
        assert_eq!(calls[0].args.as_ref().unwrap()["path"], "/w/a");
        assert_eq!(
            tools(
                "<tool_call>\n{\"name\": \"fs_ls\", \"arguments\": \"{\\\"path\\\": \\\"/w\\\"}\"}\n</tool_call>"
            ),
            [(TextCallForm::ToolCallElement, Some(ToolName::FsLs))]
        );
        assert_eq!(
            tools("<function=fs_read>{\"path\": \"/w/a\"}</function>"),
            [(TextCallForm::FunctionElement, Some(ToolName::FsRead))]
        );
        assert_eq!(
            tools("{\"tool\": \"fs.read\", \"args\": {\"path\": \"/w/a\"}}"),
            [(TextCallForm::BareJson, Some(ToolName::FsRead))]
        );
        assert_eq!(
            tools(
                "```flycode-call\n{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/w/a\"}}\n```"
            ),
            [(TextCallForm::CallBlock, Some(ToolName::FsRead))]
        );
    }

    #[test]
    fn json_data_and_prose_are_not_calls_but_unknown_elements_are() {
        assert!(
            tools("The config is:\n```json\n{\"name\": \"app\", \"version\": 2}\n```").is_empty()
        );
        assert!(tools("{\"a\": 1}\nDone: all tests pass.").is_empty());
        assert_eq!(
            tools("<tool_call>{\"name\": \"read_file\", \"arguments\": {}}</tool_call>"),
            [(TextCallForm::ToolCallElement, None)]
        );
    }

    #[test]
    fn calls_drafted_in_reasoning_are_none() {
        let drafted = "<think>\n<tool_call>{\"name\": \"fs_write\", \"arguments\": {}}</tool_call>\n```json\n{\"name\": \"fs_read\", \"arguments\": {\"path\": \"/a\"}}\n```\n</think>\nThe answer is 4.";
        assert!(tools(drafted).is_empty());
        assert_eq!(
            tools(&format!(
                "{drafted}\n<function=fs_ls>{{\"path\": \"/w\"}}</function>"
            )),
            [(TextCallForm::FunctionElement, Some(ToolName::FsLs))]
        );
    }

    #[test]
    fn two_calls_are_two() {
        let text = "```json\n{\"name\": \"fs_read\", \"arguments\": {\"path\": \"/a\"}}\n```\n```json\n{\"name\": \"fs_read\", \"arguments\": {\"path\": \"/b\"}}\n```";
        assert_eq!(tools(text).len(), 2);
    }
}
