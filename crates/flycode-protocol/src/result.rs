//! Result blocks: render them for the model, and read them back (for transcripts and tests).
//!
//! # The grammar of a result block
//!
//! ````text
//! ```flycode-result          ← backticks, one more than the longest run inside (at least 3)
//! [id] call-001              ← the call's id, flycode-invalid-call, or (none)
//! [command] /fs.read /a/b    ← the call in slash form, one line
//! [ok] true                  ← true or false
//! [code] not_found           ← failures only
//! [error] ...                ← failures only
//! [hint] ...                 ← optional
//! [truncated] true           ← other `[key] value` headers, in order
//! [data]                     ← the body, if any, follows to the closing fence
//! ...body...
//! ```
//! ````
//!
//! Header values are one line: control, bidirectional and zero-width characters in them are
//! escaped when rendering. They are bounded too (PROTOCOL.md §4 (The result block: header budget)): `[error]` and `[hint]` show at
//! most 512 characters of any one word (an echoed path or id) and every value at most 2048,
//! each cut marked `…(N chars)` with the full length. The body is written as it is, followed
//! by one newline before the closing fence; reading removes exactly that newline, so a body's
//! own final newline survives.

use thiserror::Error;

use super::display::{HEADER_VALUE_CHARS, escape_for_display, shorten_header_value, shorten_to};
use super::error_code::ErrorCode;
use super::parse::RESULT_TAG;

/// The default cap on a result's body: 64 KiB.
pub const DEFAULT_BODY_CAP: usize = 64 * 1024;

/// The `[id]` of a result with no call id: a slash command typed by a person.
pub const NONE_ID: &str = "(none)";

/// The `[id]` of flycode's answer to a reply whose call had no usable id (missing, empty,
/// `null`, not a string, or unreadable JSON). Not `(none)`: the seed prompt tells the model to
/// ignore a result with `[id] (none)`, and this answer asks it to correct its call. No call may
/// use it as its own id (it is `invalid_id`), so it never pairs with a model's call.
pub const INVALID_CALL_ID: &str = "flycode-invalid-call";

/// A rendered result block in parts ([`ResultBlock::render_parts`]): `head` (the opening fence,
/// the headers and `[data]` when there is a body), the body, then a line feed and `tail` (the
/// closing fence and its line feed).
#[derive(Debug)]
pub struct RenderedParts<'a> {
    /// The opening fence and the headers.
    pub head: String,
    /// The body, borrowed from the block.
    pub body: Option<&'a str>,
    /// The closing fence and its line feed.
    pub tail: String,
}

impl RenderedParts<'_> {
    /// How many backticks the fences are: a body must hold no run this long.
    pub fn fence_len(&self) -> usize {
        self.tail.len() - 1
    }
}

/// A result block, rendered or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultBlock {
    /// The call's id; `None` renders as `(none)` (a slash command typed by a person).
    pub id: Option<String>,
    /// The call in slash form.
    pub command: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// The error code of a failure.
    pub code: Option<String>,
    /// The error message of a failure.
    pub error: Option<String>,
    /// What to do instead.
    pub hint: Option<String>,
    /// Other headers (`exitCode`, `truncated`, ...), in order.
    pub fields: Vec<(String, String)>,
    /// The body after `[data]`, if any.
    pub body: Option<String>,
}

/// Header keys with a fixed place; they may not appear among [`ResultBlock::fields`].
pub const RESERVED_KEYS: [&str; 7] = ["id", "command", "ok", "code", "error", "hint", "data"];

/// Why a block's content is not a well-formed result.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ResultParseError {
    /// No `[id]` line.
    #[error("the result has no [id] line")]
    MissingId,
    /// `[id]` with nothing after it.
    #[error("the result's [id] is empty")]
    EmptyId,
    /// No `[ok]` line.
    #[error("the result has no [ok] line")]
    MissingOk,
    /// `[ok]` with something other than `true` or `false`.
    #[error("the result's [ok] is {0:?}, not true or false")]
    BadOk(String),
    /// A header that may appear once appears again.
    #[error("the result repeats its [{0}] header")]
    RepeatedHeader(String),
    /// A line before `[data]` that is not `[key] value`.
    #[error("line {line} of the result is not a [key] value header: {text:?}")]
    BadHeaderLine {
        /// 1-based line within the block.
        line: usize,
        /// The line, shortened.
        text: String,
    },
}

impl ResultBlock {
    /// The result as structured data, for `flycode exec --json` and MCP's `structuredContent`:
    /// `id`, `tool`, `command`, `ok`, `error` (`code`, `message`, `hint`, null on success) and
    /// `result`, the tool's own structured result.
    pub fn report(
        &self,
        tool: Option<super::ToolName>,
        result: Option<serde_json::Value>,
    ) -> serde_json::Value {
        use serde_json::Value;
        let error = (!self.ok).then(
            || serde_json::json!({"code": self.code, "message": self.error, "hint": self.hint}),
        );
        // Built by hand rather than with `json!`, which would copy `result` (a 1 MB read's
        // content) to serialize it.
        let mut report = serde_json::Map::new();
        report.insert(
            "id".into(),
            self.id.clone().map_or(Value::Null, Value::String),
        );
        report.insert(
            "tool".into(),
            tool.map_or(Value::Null, |tool| Value::String(tool.as_str().to_owned())),
        );
        report.insert("command".into(), Value::String(self.command.clone()));
        report.insert("ok".into(), Value::Bool(self.ok));
        report.insert("error".into(), error.unwrap_or(Value::Null));
        report.insert("result".into(), result.unwrap_or(Value::Null));
        // The change the call made, for `flycode undo` (PROTOCOL.md §16 (Undo and history)).
        if let Some((_, change)) = self.fields.iter().find(|(key, _)| key == "change") {
            report.insert("change".into(), Value::String(change.clone()));
        }
        Value::Object(report)
    }

    /// A successful result.
    pub fn success(id: Option<String>, command: String, body: Option<String>) -> ResultBlock {
        ResultBlock {
            id,
            command,
            ok: true,
            code: None,
            error: None,
            hint: None,
            fields: Vec::new(),
            body,
        }
    }

    /// A failed result with one of the contract's error codes.
    pub fn failure(
        id: Option<String>,
        command: String,
        code: ErrorCode,
        error: String,
        hint: Option<String>,
    ) -> ResultBlock {
        ResultBlock {
            id,
            command,
            ok: false,
            code: Some(code.as_str().to_owned()),
            // Bounded here too, not only when rendered: `exec --json` and the MCP server pass
            // the message on as it is.
            error: Some(bounded(error)),
            hint: hint.map(bounded),
            fields: Vec::new(),
            body: None,
        }
    }

    /// Caps the body at `cap` bytes (cut at a line end when one is near, never inside a
    /// character), marks the block `[truncated] true` and ends the body with a note telling how
    /// much was shown and how to see the rest (`how_to_continue`, or a generic advice).
    pub fn capped(mut self, cap: usize, how_to_continue: Option<&str>) -> ResultBlock {
        let Some(body) = self.body.as_mut() else {
            return self;
        };
        if body.len() <= cap {
            return self;
        }
        let total = body.len();
        let mut cut = cap;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(newline) = body[..cut].rfind('\n')
            && cut - newline <= 4096
        {
            cut = newline + 1;
        }
        body.truncate(cut);
        if !body.ends_with('\n') {
            body.push('\n');
        }
        let advice = how_to_continue.unwrap_or(
            "narrow the request (fs.read with range or lines, a smaller depth or limit)",
        );
        body.push_str(&format!(
            "[flycode: output truncated: showed {cut} of {total} bytes; {advice}]"
        ));
        self.fields.retain(|(key, _)| key != "truncated");
        self.fields.push(("truncated".into(), "true".into()));
        self
    }

    /// Renders the block, fence included, ending with a newline.
    pub fn render(&self) -> String {
        let parts = self.render_parts();
        let mut out = String::with_capacity(parts.head.len() + parts.body.map_or(0, str::len) + 16);
        out.push_str(&parts.head);
        if let Some(body) = parts.body {
            out.push_str(body);
            out.push('\n');
        }
        out.push_str(&parts.tail);
        out
    }

    /// The rendered block in three parts, for a writer that sends them one after the other
    /// rather than copying a large body into one string first ([`ResultBlock::render`] is their
    /// concatenation, with a line feed after the body).
    pub fn render_parts(&self) -> RenderedParts<'_> {
        self.render_parts_around(0)
    }

    /// [`ResultBlock::render_parts`] for a body the writer sends from elsewhere (a file left
    /// where it is) in place of the block's own, whose longest run of backticks is
    /// `body_backtick_run`: the fence is longer than that run too.
    pub fn render_parts_around(&self, body_backtick_run: usize) -> RenderedParts<'_> {
        let mut inner = String::new();
        let mut header = |key: &str, value: &str| {
            inner.push('[');
            inner.push_str(key);
            inner.push_str("] ");
            // The last line of defence of the header budget (PROTOCOL.md §4 (The result block: header budget)): messages may echo
            // whatever the model sent, so every long word they hold is shortened too.
            let value = if matches!(key, "error" | "hint") {
                shorten_header_value(value)
            } else {
                shorten_to(value, HEADER_VALUE_CHARS)
            };
            inner.push_str(&escape_for_display(&value));
            inner.push('\n');
        };
        header("id", self.id.as_deref().unwrap_or(NONE_ID));
        header("command", &self.command);
        header("ok", if self.ok { "true" } else { "false" });
        for (key, value) in [
            ("code", &self.code),
            ("error", &self.error),
            ("hint", &self.hint),
        ] {
            if let Some(value) = value {
                header(key, value);
            }
        }
        for (key, value) in &self.fields {
            header(key, value);
        }
        // The body is scanned once for backticks (a run cannot span the `[data]` line between
        // headers and body), and not copied here.
        let body = self.body.as_deref();
        let longest = longest_backtick_run(&inner)
            .max(body.map_or(0, longest_backtick_run))
            .max(body_backtick_run);
        let fence = "`".repeat(longest.max(2) + 1);
        let mut head = String::with_capacity(fence.len() + RESULT_TAG.len() + inner.len() + 10);
        head.push_str(&fence);
        head.push_str(RESULT_TAG);
        head.push('\n');
        head.push_str(&inner);
        if body.is_some() {
            head.push_str("[data]\n");
        }
        let mut tail = fence;
        tail.push('\n');
        RenderedParts { head, body, tail }
    }

    /// Reads the content of a `flycode-result` block (the text between its fences).
    pub fn parse_content(content: &str) -> Result<ResultBlock, ResultParseError> {
        let mut id = None;
        let mut command = None;
        let mut ok = None;
        let (mut code, mut error, mut hint) = (None, None, None);
        let mut fields = Vec::new();
        let mut body = None;
        let mut rest = content;
        let mut line_number = 0;
        while !rest.is_empty() {
            line_number += 1;
            let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
            rest = after;
            let Some((key, value)) = split_header(line) else {
                if line.trim().is_empty() {
                    continue;
                }
                return Err(ResultParseError::BadHeaderLine {
                    line: line_number,
                    text: line.chars().take(60).collect(),
                });
            };
            let value = value.to_owned();
            let slot = match key {
                "data" => {
                    body = Some(rest.strip_suffix('\n').unwrap_or(rest).to_owned());
                    break;
                }
                "id" => &mut id,
                "command" => &mut command,
                "ok" => &mut ok,
                "code" => &mut code,
                "error" => &mut error,
                "hint" => &mut hint,
                other => {
                    if fields.iter().any(|(k, _)| k == other) {
                        return Err(ResultParseError::RepeatedHeader(other.to_owned()));
                    }
                    fields.push((other.to_owned(), value));
                    continue;
                }
            };
            // Two [ok] or two [id] lines are ambiguous: never let the last one win.
            if slot.replace(value).is_some() {
                return Err(ResultParseError::RepeatedHeader(key.to_owned()));
            }
        }
        let id = match id {
            None => return Err(ResultParseError::MissingId),
            Some(id) if id.trim().is_empty() => return Err(ResultParseError::EmptyId),
            Some(id) if id == NONE_ID => None,
            Some(id) => Some(id),
        };
        let ok = match ok.as_deref() {
            None => return Err(ResultParseError::MissingOk),
            Some("true") => true,
            Some("false") => false,
            Some(other) => return Err(ResultParseError::BadOk(other.to_owned())),
        };
        Ok(ResultBlock {
            id,
            command: command.unwrap_or_default(),
            ok,
            code,
            error,
            hint,
            fields,
            body,
        })
    }

    /// Reads a rendered block (opening fence, content, closing fence).
    pub fn parse_rendered(text: &str) -> Result<ResultBlock, ResultParseError> {
        let inner = text.split_once('\n').map_or("", |(_, rest)| rest);
        let inner = inner.strip_suffix('\n').unwrap_or(inner);
        let content = inner
            .rsplit_once('\n')
            .map_or("", |(content, _fence)| content);
        ResultBlock::parse_content(&format!("{content}\n"))
    }

    /// The value of header `key` among the other fields.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A message within the header budget, without copying one that already is.
fn bounded(message: String) -> String {
    match shorten_header_value(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(short) => short,
    }
}

/// `[key] value` → (key, value); `[key]` alone → (key, "").
fn split_header(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    let (key, value) = rest.split_once(']')?;
    let is_key = key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !is_key {
        return None;
    }
    if value.is_empty() {
        return Some((key, ""));
    }
    value.strip_prefix(' ').map(|value| (key, value))
}

/// A backtick fence that `text` cannot close: at least three backticks, and one more than the
/// longest run of backticks anywhere in `text`. Whatever `text` holds (a `flycode-result` or
/// `flycode-call` block included) stays content of the block this fence opens.
pub fn backtick_fence_for(text: &str) -> String {
    "`".repeat(longest_backtick_run(text).max(2) + 1)
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    crate::backticks::longest_run(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ResultBlock {
        let mut block = ResultBlock::success(
            Some("call-001".into()),
            "/fs.read /root/work/app/README.md --head 1200".into(),
            Some("# App\n".into()),
        );
        block.fields.push(("durationMs".into(), "3".into()));
        block
    }

    #[test]
    fn a_body_written_from_elsewhere_lengthens_the_fence_past_its_longest_run() {
        let mut block = sample();
        block.body = Some(String::new());
        let parts = block.render_parts_around(5);
        assert!(parts.head.starts_with("``````flycode-result\n"));
        assert!(parts.head.ends_with("[data]\n"));
        assert_eq!(parts.tail, "``````\n");
        assert_eq!(parts.fence_len(), 6);
        // Shorter runs than the block's own leave the fence as it was.
        assert_eq!(block.render_parts_around(1).fence_len(), 3);
    }

    #[test]
    fn renders_headers_in_contract_order() {
        assert_eq!(
            sample().render(),
            "```flycode-result\n[id] call-001\n[command] /fs.read /root/work/app/README.md --head 1200\n[ok] true\n[durationMs] 3\n[data]\n# App\n\n```\n"
        );
    }

    #[test]
    fn fence_grows_past_backticks_in_the_body() {
        let mut block = sample();
        block.body = Some("````` five".into());
        let text = block.render();
        assert!(text.starts_with("``````flycode-result\n"), "{text}");
        assert!(text.ends_with("\n``````\n"));
        assert_eq!(ResultBlock::parse_rendered(&text).unwrap(), block);
    }

    #[test]
    fn round_trips_failures_and_missing_ids() {
        let block = ResultBlock::failure(
            None,
            "/fs.ls /x".into(),
            ErrorCode::OutsideRoots,
            "no".into(),
            Some("use a root".into()),
        );
        let text = block.render();
        assert!(text.contains("[id] (none)\n"));
        assert_eq!(ResultBlock::parse_rendered(&text).unwrap(), block);
    }

    #[test]
    fn header_values_never_span_lines() {
        let block = ResultBlock::failure(
            None,
            "/x".into(),
            ErrorCode::IoError,
            "a\nb\u{1b}[31m".into(),
            None,
        );
        assert!(block.render().contains("[error] a\\nb\\u{001B}[31m\n"));
    }

    #[test]
    fn headers_stay_within_the_budget_whatever_they_echo() {
        let path = format!("/{}", "p".repeat(1 << 20));
        let mut block = ResultBlock::failure(
            Some("call-001".into()),
            format!("/fs.read {path}"),
            ErrorCode::NotFound,
            format!("{path} does not exist"),
            Some(format!("look in {path}")),
        );
        block.fields.push(("meta".into(), "m".repeat(1 << 20)));
        assert!(block.error.as_deref().unwrap().len() < 600);
        let text = block.render();
        assert!(text.len() < 8 * 1024, "{} bytes", text.len());
        assert!(text.contains("…(1048577 chars) does not exist\n"), "{text}");
        assert!(text.contains("[command] /fs.read /ppp"), "{text}");
        assert!(text.contains("…(1048586 chars)\n[ok] false"), "{text}");
    }

    #[test]
    fn capping_marks_truncation_and_says_how_to_continue() {
        let mut block = sample();
        block.body = Some("line\n".repeat(30_000));
        let capped = block.capped(DEFAULT_BODY_CAP, Some("read on with range 65535-"));
        let body = capped.body.as_deref().unwrap();
        assert_eq!(capped.field("truncated"), Some("true"));
        assert!(body.len() < DEFAULT_BODY_CAP + 200);
        assert!(
            body.ends_with("showed 65535 of 150000 bytes; read on with range 65535-]"),
            "{}",
            &body[body.len() - 100..]
        );
    }

    #[test]
    fn capping_never_splits_a_character() {
        let mut block = sample();
        block.body = Some("é".repeat(100));
        let capped = block.capped(11, None);
        assert!(
            capped
                .body
                .unwrap()
                .starts_with("ééééé\n[flycode: output truncated: showed 10 of 200")
        );
    }

    #[test]
    fn malformed_results_are_named() {
        assert_eq!(
            ResultBlock::parse_content("[ok] true\n"),
            Err(ResultParseError::MissingId)
        );
        assert_eq!(
            ResultBlock::parse_content("[id] \n[ok] true\n"),
            Err(ResultParseError::EmptyId)
        );
        assert_eq!(
            ResultBlock::parse_content("[id] a\n[ok] yes\n"),
            Err(ResultParseError::BadOk("yes".into()))
        );
        assert_eq!(
            ResultBlock::parse_content("[id] a\n[command] x\n"),
            Err(ResultParseError::MissingOk)
        );
        assert!(matches!(
            ResultBlock::parse_content("[id] a\nstray\n[ok] true\n"),
            Err(ResultParseError::BadHeaderLine { line: 2, .. })
        ));
        assert_eq!(
            ResultBlock::parse_content("[id] a\n[ok] false\n[ok] true\n"),
            Err(ResultParseError::RepeatedHeader("ok".into()))
        );
    }
}
