//! What can be read of text that is not a valid call, for the person at the terminal and for a
//! model that must correct itself: a call that arrived without its ` ```flycode-call ` fence (a
//! near miss, PROTOCOL.md §12 (Watching)) and the id of a call block whose JSON is broken
//! (PROTOCOL.md §3 (Verdicts and error codes)).
//!
//! Nothing read here is ever run: a call without its fence could be any text a person pasted.
//! Only a clear call shape counts (an object with a known `tool`, an `args` object and no key
//! but `id`, `tool` and `args`), so JSON that merely mentions a tool is left alone.

use serde_json::{Map, Value};

use super::blocks::fenced_blocks;
use super::call::Attempt;
use super::json::parse_strict;
use super::parse::{CALL_TAG, block_kind, is_reply_whitespace};
use super::result::{INVALID_CALL_ID, ResultBlock};
use super::slash::render_command;
use super::{Call, ErrorCode, ToolName};

/// How a call arrived without its fence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wrapping {
    /// In a fenced block with another info string (` ```json `, or none).
    Fence {
        /// The first word of the info string, empty for a bare ` ``` `.
        info: String,
    },
    /// After a line that is only `flycode-call`: the label a chat shows above a rendered block,
    /// picked up when the person selects the rendered text instead of using the copy button.
    RenderedLabel,
    /// The whole text is the call's JSON object and nothing else.
    Bare,
}

/// A call seen where no call block was.
#[derive(Clone, Debug, PartialEq)]
pub struct NearMiss {
    /// How it arrived.
    pub wrapping: Wrapping,
    /// The call, when its shape is clear; `None` after a `flycode-call` label whose JSON is not
    /// a whole call (a partial selection): worth a word to the person, not an answer.
    pub call: Option<Call>,
}

/// The keys a call object may have.
const CALL_KEYS: [&str; 3] = ["id", "tool", "args"];

/// The call a JSON text clearly is: one object, a known tool, an `args` object, no other key
/// than `id`, `tool` and `args`. The id is kept only when it is usable (section 2).
fn clear_call(json: &str) -> Option<Call> {
    let Ok(Value::Object(object)) = parse_strict(json) else {
        return None;
    };
    if object.keys().any(|key| !CALL_KEYS.contains(&key.as_str())) {
        return None;
    }
    let tool = ToolName::from_name(object.get("tool")?.as_str()?)?;
    let args: Map<String, Value> = object.get("args")?.as_object()?.clone();
    Some(Call {
        id: Attempt::read(json).id,
        tool,
        args,
    })
}

/// The first JSON value at the start of `text` (after whitespace), as written.
fn leading_json(text: &str) -> Option<&str> {
    let start = text.len() - text.trim_start_matches(is_reply_whitespace).len();
    let rest = &text[start..];
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<serde::de::IgnoredAny>();
    match values.next() {
        Some(Ok(_)) => Some(&rest[..values.byte_offset()]),
        _ => None,
    }
}

/// A call in `text` (a reply's normalized text that holds no call or result block) that lacks
/// only its fence, or `None` for ordinary text. Tried in order: a fenced block of another info
/// string whose whole content is a clear call; a line `flycode-call` followed by JSON; the
/// whole text being a clear call.
pub fn find_near_miss(text: &str) -> Option<NearMiss> {
    let fenced = fenced_blocks(text, |info| block_kind(info).is_none());
    if let Some((fence, call)) = fenced
        .iter()
        .find_map(|fence| clear_call(fence.content.trim()).map(|call| (fence, call)))
    {
        let info = fence
            .info
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned();
        return Some(NearMiss {
            wrapping: Wrapping::Fence { info },
            call: Some(call),
        });
    }
    if let Some(after_label) = after_rendered_label(text) {
        return Some(NearMiss {
            wrapping: Wrapping::RenderedLabel,
            call: leading_json(after_label).and_then(clear_call),
        });
    }
    clear_call(text.trim_matches(is_reply_whitespace)).map(|call| NearMiss {
        wrapping: Wrapping::Bare,
        call: Some(call),
    })
}

/// The words a chat page shows on a code block's header beside its language, which a selection
/// of the rendered reply takes along: `flycode-call`, then `Copy code`, then the JSON.
const BUTTON_LABELS: [&str; 9] = [
    "copy code",
    "copy",
    "edit",
    "copy to clipboard",
    "copied!",
    "code",
    "复制代码",
    "复制",
    "编辑",
];

/// Whether `line` is only a code block header's button label (any ASCII case).
fn is_button_label(line: &str) -> bool {
    let line = line.trim_matches(is_reply_whitespace).to_lowercase();
    BUTTON_LABELS.contains(&line.as_str())
}

/// Whether `line` is the rendered label of a call block: `flycode-call`, alone or followed by a
/// button label (`flycode-callCopy code`, as a selection across the header reads).
fn is_rendered_label(line: &str) -> bool {
    let line = line.trim_matches(is_reply_whitespace);
    line.strip_prefix(CALL_TAG)
        .is_some_and(|rest| rest.trim().is_empty() || is_button_label(rest))
}

/// The text after the first line that is the rendered label `flycode-call` (alone, or with the
/// page's copy button's label), when the next line that is neither blank nor a button label
/// opens a JSON object.
fn after_rendered_label(text: &str) -> Option<&str> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if !is_rendered_label(line) {
            continue;
        }
        let mut start = offset;
        for next in text[offset..].split_inclusive('\n') {
            if next.trim_matches(is_reply_whitespace).is_empty() || is_button_label(next) {
                start += next.len();
            } else {
                break;
            }
        }
        let rest = &text[start..];
        if rest
            .trim_start_matches(is_reply_whitespace)
            .starts_with('{')
        {
            return Some(rest);
        }
    }
    None
}

impl NearMiss {
    /// What was seen, for the terminal: `a call in a ```json block`.
    pub fn seen(&self) -> String {
        match &self.wrapping {
            Wrapping::Fence { info } if info.is_empty() => {
                "a call in a ``` block without the flycode-call info string".to_owned()
            }
            Wrapping::Fence { info } => format!("a call in a ```{info} block, not ```flycode-call"),
            Wrapping::RenderedLabel if self.call.is_none() => {
                "the label flycode-call and part of a call, without its ``` fence (copied as rendered text?)".to_owned()
            }
            Wrapping::RenderedLabel | Wrapping::Bare => {
                "a call without its ```flycode-call fence (copied as rendered text?)".to_owned()
            }
        }
    }

    /// What the person should do, for the terminal.
    pub fn advice(&self) -> &'static str {
        match (&self.wrapping, &self.call) {
            (Wrapping::Fence { .. }, _) => {
                "paste the answer into the chat: it tells the model to use a ```flycode-call block"
            }
            (_, None) => "use the chat's copy button on the code block (it keeps the fence)",
            (Wrapping::RenderedLabel | Wrapping::Bare, Some(_)) => {
                "use the chat's copy button on the code block (it keeps the fence), or paste the answer: it asks the model to send the call again"
            }
        }
    }

    /// The answer for the model: `text_outside_block` (the call is text, not a call block),
    /// under the call's id when it is usable, saying it did not run and how to send it. `None`
    /// when no whole call was seen.
    pub fn result(&self) -> Option<ResultBlock> {
        let call = self.call.as_ref()?;
        // No backticks in the answer: they would lengthen its own fence.
        let how = match &self.wrapping {
            Wrapping::Fence { info } if info.is_empty() => {
                "in a code block without the flycode-call info string".to_owned()
            }
            Wrapping::Fence { info } => format!("in a code block marked {info}"),
            Wrapping::RenderedLabel | Wrapping::Bare => {
                "without its flycode-call code fence".to_owned()
            }
        };
        Some(ResultBlock::failure(
            Some(call.id.clone().unwrap_or_else(|| INVALID_CALL_ID.to_owned())),
            render_command(call.tool, &call.args),
            ErrorCode::TextOutsideBlock,
            format!("the call arrived {how}, so it was not run: only a flycode-call block is a call"),
            Some(
                "Send the call again as a fenced block of its own: three backticks and flycode-call on its first line, the JSON object, three backticks on its last line. If your reply had that fence, the person copied the rendered text; sending it again is safe, it has not run."
                    .to_owned(),
            ),
        ))
    }
}

/// The id of a call block whose JSON is broken, read as written: the `"id"` key of the outer
/// object followed by a string, when that string is a usable id (section 2) and the key is not
/// given twice. For the terminal only: the answer's `[id]` stays [`INVALID_CALL_ID`] (section 3),
/// as flycode does not guess at JSON it cannot read. `None` for content that is JSON: what can be
/// read of it is [`Attempt::read`]'s to say.
pub fn legible_id(content: &str) -> Option<String> {
    if serde_json::from_str::<serde::de::IgnoredAny>(content).is_ok() {
        return None;
    }
    let text = content.trim_start_matches(is_reply_whitespace);
    if !text.starts_with('{') {
        return None;
    }
    let bytes = text.as_bytes();
    let (mut depth, mut expect_key, mut at) = (0usize, false, 0);
    let mut found = None;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                let Some(end) = string_end(bytes, at) else {
                    break;
                };
                if depth == 1 && expect_key && &text[at..end] == "\"id\"" {
                    if found.is_some() {
                        // Given twice: there is no "the" id.
                        return None;
                    }
                    found = Some(id_after_key(&text[end..]));
                }
                expect_key = false;
                at = end;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => expect_key = depth == 1,
            _ => {}
        }
        at += 1;
    }
    found.flatten()
}

/// [`legible_id`] of a reply's call block, when the reply has exactly one.
pub fn legible_id_of_reply(reply: &str) -> Option<String> {
    let parsed = super::parse::parse_reply(reply);
    let mut blocks = parsed.call_blocks();
    match (blocks.next(), blocks.next()) {
        (Some(block), None) => legible_id(&block.content),
        _ => None,
    }
}

/// The index just past the string literal that opens at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// The usable id in `: "c7"` at the start of `rest`.
fn id_after_key(rest: &str) -> Option<String> {
    let rest = rest
        .trim_start_matches(is_reply_whitespace)
        .strip_prefix(':')?;
    let rest = rest.trim_start_matches(is_reply_whitespace);
    if !rest.starts_with('"') {
        return None;
    }
    let literal = &rest[..string_end(rest.as_bytes(), 0)?];
    Attempt::read(&format!("{{\"id\":{literal}}}")).id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_in_a_json_fence_is_a_near_miss_with_its_call() {
        let text = "I'll read it.\n```json\n{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/a\"}}\n```\n";
        let miss = find_near_miss(text).unwrap();
        assert_eq!(
            miss.wrapping,
            Wrapping::Fence {
                info: "json".into()
            }
        );
        let block = miss.result().unwrap();
        assert_eq!(block.id.as_deref(), Some("c1"));
        assert_eq!(block.command, "/fs.read /a");
        assert_eq!(block.code.as_deref(), Some("text_outside_block"));
        assert!(miss.seen().contains("```json"));
    }

    #[test]
    fn a_rendered_copy_and_a_bare_object_are_near_misses() {
        let call = "{\"id\":\"c2\",\"tool\":\"fs.ls\",\"args\":{\"path\":\"/\"}}";
        let rendered =
            find_near_miss(&format!("Let me look.\nflycode-call\n{call}\nDone?")).unwrap();
        assert_eq!(rendered.wrapping, Wrapping::RenderedLabel);
        assert_eq!(rendered.call.unwrap().id.as_deref(), Some("c2"));
        let bare = find_near_miss(&format!("  {call}\n")).unwrap();
        assert_eq!(bare.wrapping, Wrapping::Bare);
        // A partial selection after the label: seen, not answerable.
        let partial = find_near_miss("flycode-call\n{\"id\":\"c3\",\"tool\":\"fs.r").unwrap();
        assert!(partial.call.is_none() && partial.result().is_none());
    }

    #[test]
    fn a_selection_with_the_pages_copy_button_label_is_a_rendered_near_miss() {
        let call = "{\"id\":\"c4\",\"tool\":\"fs.ls\",\"args\":{\"path\":\"/\"}}";
        for text in [
            format!("flycode-call\nCopy code\n{call}\n"),
            format!("flycode-callCopy code\n{call}"),
            format!("flycode-call\n\nCopy\nEdit\n\n{call}"),
            format!("flycode-call\n复制代码\n{call}"),
        ] {
            let miss = find_near_miss(&text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(miss.wrapping, Wrapping::RenderedLabel, "{text}");
            assert_eq!(miss.call.unwrap().id.as_deref(), Some("c4"), "{text}");
        }
        // Other words between the label and the JSON: not a rendered call block.
        assert_eq!(
            find_near_miss(&format!("flycode-call\nsome words\n{call} and more")),
            None
        );
    }

    #[test]
    fn ordinary_json_and_code_are_no_near_miss() {
        for text in [
            "just prose",
            "```json\n{\"tool\":\"hammer\",\"args\":{}}\n```",
            "```json\n{\"name\":\"x\",\"tool\":\"fs.read\",\"args\":{}}\n```",
            "{\"tool\":\"fs.read\"}",
            "{\"tool\":\"fs.read\",\"args\":[]}",
            "Here is a config: {\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{}} and more text",
            "```rust\nlet call = json!({\"tool\": \"fs.read\"});\n```",
        ] {
            assert_eq!(find_near_miss(text), None, "{text}");
        }
    }

    #[test]
    fn the_id_of_a_broken_block_is_read_as_written() {
        assert_eq!(
            legible_id("{\"id\": \"c7\", \"tool\": \"fs.read\", \"args\": {\"path\": \"/a\",}}")
                .as_deref(),
            Some("c7")
        );
        assert_eq!(
            legible_id("{\"tool\":\"fs.read\",\"args\":{\"id\":\"inner\"},\"id\":\"c8\" oops")
                .as_deref(),
            Some("c8")
        );
        assert_eq!(legible_id("{\"args\":{\"id\":\"inner\"}"), None);
        assert_eq!(legible_id("{\"id\": \"null\", oops"), None);
        assert_eq!(legible_id("{\"id\": 7, oops"), None);
        // Given twice, or in JSON that reads (Attempt::read answers for that): no id here.
        assert_eq!(legible_id("{\"id\":\"a\",\"id\":\"b\",}"), None);
        assert_eq!(legible_id("{\"id\":\"a\",\"tool\":\"x\"}"), None);
        assert_eq!(legible_id("/fs.read /a"), None);
    }
}
