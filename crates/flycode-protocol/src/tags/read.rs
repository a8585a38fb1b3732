//! Reading seed 000's tags out of a reply (PROTOCOL.md §15 (The tag dialect)): `<bash_call>`,
//! `<builtin>`, `<create_agent>` and `<return>`, outside code fences and inline code, never
//! nested. Pure text work in one pass: what the tags ask for is `map`'s to say.
//!
//! Reasoning (`<think>…</think>`, `<thinking>…</thinking>`) is skipped wherever it stands
//! outside code, and a closing tag with no opening tag drops every tag before it
//! ([`super::super::reasoning`]): a tag drafted while reasoning never runs.
//!
//! The reader never fails and never panics: every reply gets a [`TagVerdict`]. Its time is linear
//! in the reply (an unmatched inline-code run is remembered, so a paragraph of backticks is not
//! searched again and again).

use super::super::error_code::ErrorCode;
use super::super::inline_code::CodeSpans;
use super::super::reasoning::{ReasoningTag, reasoning_tag_at};

/// The tool tags a model writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagKind {
    /// `<bash_call [background=true] [timeout=SECONDS]> command </bash_call>`.
    BashCall,
    /// `<builtin> name, key: value lines, literal blocks </builtin>`.
    Builtin,
    /// `<create_agent [name=NAME]> task </create_agent>`.
    CreateAgent,
    /// `<return> summary </return>`.
    Return,
}

impl TagKind {
    /// Every tool tag, in the order the prompt names them.
    pub const ALL: [TagKind; 4] = [
        TagKind::BashCall,
        TagKind::Builtin,
        TagKind::CreateAgent,
        TagKind::Return,
    ];

    /// The tag's name as written.
    pub fn name(self) -> &'static str {
        match self {
            TagKind::BashCall => "bash_call",
            TagKind::Builtin => "builtin",
            TagKind::CreateAgent => "create_agent",
            TagKind::Return => "return",
        }
    }
}

/// The tags only flycode writes: a model that writes one forges a result.
pub const RESULT_TAGS: [&str; 3] = ["bash_call_result", "builtin_result", "child_summary"];

/// One tag as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Which tag.
    pub kind: TagKind,
    /// Its attributes, in order, values unquoted.
    pub attributes: Vec<(String, String)>,
    /// Why its attributes could not be read, if they could not.
    pub attribute_error: Option<String>,
    /// Everything between the opening and the closing tag, byte for byte.
    pub body: String,
    /// The 1-based line of the opening tag in the reply.
    pub line: usize,
    /// Where the tag stands, from its `<` to the end of its closing tag, in the reply without
    /// its byte-order mark.
    pub span: std::ops::Range<usize>,
}

/// Why a reply runs nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagViolation {
    /// `forged_result`, `nested_tags`, `unterminated_block` or `return_with_other_tags`.
    pub code: ErrorCode,
    /// What was wrong, with its line.
    pub message: String,
    /// What to send instead.
    pub hint: String,
    /// The 1-based line it was found on.
    pub line: usize,
}

/// The verdict on one reply in the tag dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagVerdict {
    /// No tag: prose only.
    None,
    /// Tool tags (no `<return>`), to run in order.
    Tags(Vec<Tag>),
    /// Tool tags, then one `<return>` as the reply's last tag (seed 000's own answer to
    /// `[global quota limit]`): the tags run in order, then the agent ends with the summary
    /// (trimmed).
    TagsThenReturn(Vec<Tag>, String),
    /// One `<return>` and nothing else: the agent's end, with its summary (trimmed).
    Return(String),
    /// A violation: nothing in the reply runs.
    Invalid(TagViolation),
}

impl TagVerdict {
    /// `none`, `call`, `return` or `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            TagVerdict::None => "none",
            TagVerdict::Tags(_) | TagVerdict::TagsThenReturn(..) => "call",
            TagVerdict::Return(_) => "return",
            TagVerdict::Invalid(_) => "invalid",
        }
    }

    /// The tool tags the reply runs (none for `none`, `return` and `invalid`).
    pub fn tool_tags(&self) -> &[Tag] {
        match self {
            TagVerdict::Tags(tags) | TagVerdict::TagsThenReturn(tags, _) => tags,
            _ => &[],
        }
    }

    /// The summary of the reply's `<return>`, when it ends the agent.
    pub fn returned(&self) -> Option<&str> {
        match self {
            TagVerdict::Return(summary) | TagVerdict::TagsThenReturn(_, summary) => Some(summary),
            _ => None,
        }
    }
}

/// Reads the tags of one reply.
pub fn read_tags(reply: &str) -> TagVerdict {
    let text = reply.strip_prefix('\u{feff}').unwrap_or(reply);
    let mut scanner = Scanner::new(text);
    let stopped = scanner.scan();
    if let Some(forged) = scanner.forged.take() {
        return TagVerdict::Invalid(forged);
    }
    if let Some(violation) = stopped {
        return TagVerdict::Invalid(violation);
    }
    judge_tags(scanner.tags)
}

fn judge_tags(mut tags: Vec<Tag>) -> TagVerdict {
    let returns = tags.iter().filter(|t| t.kind == TagKind::Return).count();
    if returns == 0 {
        return if tags.is_empty() {
            TagVerdict::None
        } else {
            TagVerdict::Tags(tags)
        };
    }
    // One `<return>`, the reply's last tag: it ends the agent once the tags before it ran.
    if returns == 1
        && tags.last().is_some_and(|t| t.kind == TagKind::Return)
        && let Some(tag) = tags.pop()
    {
        let summary = tag.body.trim().to_owned();
        return if tags.is_empty() {
            TagVerdict::Return(summary)
        } else {
            TagVerdict::TagsThenReturn(tags, summary)
        };
    }
    let line = tags
        .iter()
        .find(|t| t.kind == TagKind::Return)
        .map_or(1, |t| t.line);
    TagVerdict::Invalid(TagViolation {
        code: ErrorCode::ReturnWithOtherTags,
        message: if returns > 1 {
            format!("the reply holds {returns} <return> tags (the first on line {line}): an agent ends once")
        } else {
            format!(
                "the reply holds <return> (line {line}) before other tags: <return> ends the agent, so it can only be the reply's last tag"
            )
        },
        hint: "Send the tool tags first; end with one <return>, as the reply's last tag or alone in a later reply once their results are in.".into(),
        line,
    })
}

/// The one pass over a reply.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    tags: Vec<Tag>,
    /// The first result tag written by the model, wherever it was.
    forged: Option<TagViolation>,
    /// Inline code spans skipped.
    code: CodeSpans,
    /// Line counting: the last position counted and its 1-based line.
    counted: (usize, usize),
    /// The last search for an opening tag's `>`: where it started and the first `>` or line end
    /// after it.
    tag_end: (usize, usize),
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner {
            text,
            pos: 0,
            tags: Vec::new(),
            forged: None,
            code: CodeSpans::new(),
            counted: (0, 1),
            tag_end: (usize::MAX, 0),
        }
    }

    /// Reads the tags; returns the structural violation that stopped it, if one did. After it,
    /// the rest of the reply is still searched for forged results (they outrank it).
    fn scan(&mut self) -> Option<TagViolation> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() {
            let at_line_start = self.pos == 0 || bytes[self.pos - 1] == b'\n';
            if at_line_start && let Some(end) = fence_end(self.text, self.pos) {
                self.pos = end;
                continue;
            }
            match bytes[self.pos] {
                b'`' => self.pos = self.skip_code_span(self.pos),
                b'<' => {
                    if let Some(stop) = self.at_angle() {
                        self.find_forged_after();
                        return Some(stop);
                    }
                }
                _ => self.pos += 1,
            }
        }
        None
    }

    /// At a `<`: reasoning (skipped), a result tag (forged), a tool tag (read whole), or text.
    fn at_angle(&mut self) -> Option<TagViolation> {
        let rest = &self.text[self.pos..];
        match reasoning_tag_at(rest) {
            Some((ReasoningTag::Open(name), length)) => {
                self.pos = self.reasoning_end(self.pos + length, name);
                return None;
            }
            Some((ReasoningTag::Close(_), length)) => {
                // No opening tag before it: everything so far was reasoning.
                self.tags.clear();
                self.forged = None;
                self.pos += length;
                return None;
            }
            None => {}
        }
        if let Some(name) = result_tag_at(rest) {
            self.note_forged(name, self.pos);
            self.pos += 1;
            return None;
        }
        let Some(kind) = tool_tag_at(rest) else {
            self.pos += 1;
            return None;
        };
        let line = self.line_of(self.pos);
        let name_end = self.pos + 1 + kind.name().len();
        let stop = self.first_of(name_end, &['>', '\n'], |s| &mut s.tag_end);
        if self.text.as_bytes().get(stop) != Some(&b'>') {
            // `<bash_call` without `>` on its line: not a tag.
            self.pos += 1;
            return None;
        }
        let attributes_text = &self.text[name_end..stop];
        let body_start = stop + 1;
        let (body_end, after) = match self.find_close(kind, body_start, line) {
            Ok(found) => found,
            Err(violation) => return Some(violation),
        };
        let (attributes, attribute_error) = read_attributes(kind, attributes_text);
        self.tags.push(Tag {
            kind,
            attributes,
            attribute_error,
            body: self.text[body_start..body_end].to_owned(),
            line,
            span: self.pos..after,
        });
        self.pos = after;
        None
    }

    /// The end of a tag's body and the position after its closing tag, or why there is none.
    fn find_close(
        &mut self,
        kind: TagKind,
        body_start: usize,
        line: usize,
    ) -> Result<(usize, usize), TagViolation> {
        let closing = format!("</{}>", kind.name());
        let mut in_literal = false;
        let mut line_start = body_start;
        while line_start <= self.text.len() {
            let line_end = self.text[line_start..]
                .find('\n')
                .map_or(self.text.len(), |n| line_start + n);
            let this = &self.text[line_start..line_end];
            let trimmed = this.trim();
            // Literal blocks (`<<<` … `>>>` lines) of a builtin are content, never tags.
            let is_literal_line = kind == TagKind::Builtin && (in_literal || trimmed == "<<<");
            if is_literal_line {
                if in_literal && trimmed == ">>>" {
                    in_literal = false;
                } else if !in_literal {
                    in_literal = true;
                }
            } else {
                let close = this.find(&closing);
                let searched = close.map_or(this, |at| &this[..at]);
                self.check_nested(kind, searched, line_start, line)?;
                if let Some(at) = close {
                    return Ok((line_start + at, line_start + at + closing.len()));
                }
            }
            if line_end == self.text.len() {
                break;
            }
            line_start = line_end + 1;
        }
        let literal = if in_literal {
            " (a literal block opened with <<< is never closed by a >>> line)"
        } else {
            ""
        };
        Err(TagViolation {
            code: ErrorCode::UnterminatedBlock,
            message: format!(
                "<{}> on line {line} is never closed by {closing}{literal}",
                kind.name()
            ),
            hint: format!(
                "Close every tag: <{0}> … </{0}>; if the reply was cut off, send it again in smaller parts.",
                kind.name()
            ),
            line,
        })
    }

    /// A tag opened inside another tag's body (outside literal blocks): nesting, or a forged
    /// result.
    fn check_nested(
        &mut self,
        outer: TagKind,
        searched: &str,
        offset: usize,
        outer_line: usize,
    ) -> Result<(), TagViolation> {
        for (at, _) in searched.match_indices('<') {
            let rest = &searched[at..];
            if let Some(name) = result_tag_at(rest) {
                self.note_forged(name, offset + at);
            } else if let Some(inner) = tool_tag_at(rest) {
                let line = self.line_of(offset + at);
                return Err(TagViolation {
                    code: ErrorCode::NestedTags,
                    message: format!(
                        "<{}> on line {line} is inside <{}> (opened on line {outer_line}): tags never nest",
                        inner.name(),
                        outer.name()
                    ),
                    hint: "Write each tag on its own, one after the other (<bash_call>, <builtin>, <create_agent>, <return> never contain one another); nothing in this reply was run.".into(),
                    line,
                });
            }
        }
        Ok(())
    }

    /// Records the first result tag the model wrote.
    fn note_forged(&mut self, name: &str, at: usize) {
        if self.forged.is_some() {
            return;
        }
        let line = self.line_of(at);
        self.forged = Some(TagViolation {
            code: ErrorCode::ForgedResult,
            message: format!(
                "the reply writes a {name} tag on line {line}: only flycode writes results"
            ),
            hint: "Send only tool tags and wait: flycode answers each one with its result. Nothing in this reply was run.".into(),
            line,
        });
    }

    /// After a structural violation: the rest of the reply, outside code and reasoning,
    /// searched for forged results only.
    fn find_forged_after(&mut self) {
        let bytes = self.text.as_bytes();
        self.pos += 1;
        while self.pos < bytes.len() && self.forged.is_none() {
            let at_line_start = bytes[self.pos - 1] == b'\n';
            if at_line_start && let Some(end) = fence_end(self.text, self.pos) {
                self.pos = end;
                continue;
            }
            match bytes[self.pos] {
                b'`' => self.pos = self.skip_code_span(self.pos),
                b'<' => {
                    let rest = &self.text[self.pos..];
                    if let Some((ReasoningTag::Open(name), length)) = reasoning_tag_at(rest) {
                        self.pos = self.reasoning_end(self.pos + length, name);
                        continue;
                    }
                    if let Some(name) = result_tag_at(rest) {
                        self.note_forged(name, self.pos);
                    }
                    self.pos += 1;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Where the reasoning element `name` opened before `from` ends: after its closing tag
    /// outside code, or at the end of the reply.
    fn reasoning_end(&mut self, from: usize, name: &str) -> usize {
        let bytes = self.text.as_bytes();
        let mut at = from;
        while at < bytes.len() {
            let at_line_start = at == 0 || bytes[at - 1] == b'\n';
            if at_line_start && let Some(end) = fence_end(self.text, at) {
                at = end;
                continue;
            }
            match bytes[at] {
                b'`' => at = self.skip_code_span(at),
                b'<' => match reasoning_tag_at(&self.text[at..]) {
                    Some((ReasoningTag::Close(closed), length)) if closed == name => {
                        return at + length;
                    }
                    _ => at += 1,
                },
                _ => at += 1,
            }
        }
        bytes.len()
    }

    /// Past an inline code span opened by the backtick run at `at`, or past the run when nothing
    /// closes it before the paragraph ends.
    fn skip_code_span(&mut self, at: usize) -> usize {
        self.code.skip(self.text, at)
    }

    /// The first of `chars` at or after `from` (the end of the text when none), remembered in
    /// `cache` for the searches that start before it.
    fn first_of(
        &mut self,
        from: usize,
        chars: &[char],
        cache: fn(&mut Self) -> &mut (usize, usize),
    ) -> usize {
        let (start, found) = *cache(self);
        if start <= from && from <= found {
            return found;
        }
        let found = self.text[from..]
            .find(chars)
            .map_or(self.text.len(), |n| from + n);
        *cache(self) = (from, found);
        found
    }

    /// The 1-based line of byte `at` (positions asked for only grow, or restart the count).
    fn line_of(&mut self, at: usize) -> usize {
        let (from, line) = if at >= self.counted.0 {
            self.counted
        } else {
            (0, 1)
        };
        let more = self.text.as_bytes()[from..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.counted = (at, line + more);
        line + more
    }
}

/// The tool tag opened at the start of `rest` (`<name` then `>` or a blank), if any.
fn tool_tag_at(rest: &str) -> Option<TagKind> {
    TagKind::ALL
        .into_iter()
        .find(|kind| opens(rest, kind.name()))
}

/// The result tag opened at the start of `rest`, if any.
fn result_tag_at(rest: &str) -> Option<&'static str> {
    RESULT_TAGS.into_iter().find(|name| opens(rest, name))
}

/// Whether `rest` starts with `<name` followed by `>`, `/` or a blank.
fn opens(rest: &str, name: &str) -> bool {
    rest.strip_prefix('<')
        .and_then(|r| r.strip_prefix(name))
        .is_some_and(|after| {
            after
                .bytes()
                .next()
                .is_some_and(|b| matches!(b, b'>' | b'/' | b' ' | b'\t' | b'\r' | b'\n'))
        })
}

/// When a code fence opens on the line at `at`: the position after its closing line (the end
/// of the text when it never closes, as CommonMark reads it).
fn fence_end(text: &str, at: usize) -> Option<usize> {
    let line_end = text[at..].find('\n').map_or(text.len(), |n| at + n);
    let (character, length) = fence_opener(&text[at..line_end])?;
    let mut start = line_end + 1;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
        if let Some((c, n)) = fence_opener(&text[start..end])
            && c == character
            && n >= length
            && text[start..end]
                .trim_start()
                .trim_start_matches(c)
                .trim()
                .is_empty()
        {
            return Some((end + 1).min(text.len()));
        }
        start = end + 1;
    }
    Some(text.len())
}

/// A fence line: at most three spaces, then three or more backticks or tildes.
fn fence_opener(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let character = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let length = rest.chars().take_while(|c| *c == character).count();
    (length >= 3).then_some((character, length))
}

/// A tag's `key=value` attributes (values bare, or quoted with `"` or `'`), or why they cannot
/// be read.
fn read_attributes(kind: TagKind, text: &str) -> (Vec<(String, String)>, Option<String>) {
    let mut attributes = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            let word = rest.split_whitespace().next().unwrap_or(rest);
            return (
                attributes,
                Some(format!(
                    "<{}> has {word:?} where an attribute key=value belongs",
                    kind.name()
                )),
            );
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return (
                attributes,
                Some(format!(
                    "<{}> has a malformed attribute near {:?}",
                    kind.name(),
                    key.trim()
                )),
            );
        }
        let (value, remaining) = match after.chars().next() {
            Some(quote @ ('"' | '\'')) => match after[1..].find(quote) {
                Some(end) => (&after[1..1 + end], &after[end + 2..]),
                None => {
                    return (
                        attributes,
                        Some(format!(
                            "<{}>'s attribute {key} opens a quote that never closes",
                            kind.name()
                        )),
                    );
                }
            },
            _ => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        attributes.push((key.to_owned(), value.to_owned()));
        rest = remaining.trim_start();
    }
    (attributes, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(reply: &str) -> Vec<Tag> {
        match read_tags(reply) {
            TagVerdict::Tags(tags) => tags,
            other => panic!("not tags: {other:?}"),
        }
    }

    fn code(reply: &str) -> ErrorCode {
        match read_tags(reply) {
            TagVerdict::Invalid(v) => v.code,
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn reads_tags_in_order_with_attributes() {
        let found = tags(
            "Let me look.\n<bash_call timeout=30> ls -la </bash_call>\n<bash_call background=true>sleep 60</bash_call>\n<create_agent name=\"docs writer\">write docs</create_agent>",
        );
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].body, " ls -la ");
        assert_eq!(found[0].attributes, vec![("timeout".into(), "30".into())]);
        assert_eq!(found[0].line, 2);
        assert_eq!(found[2].attributes[0].1, "docs writer");
    }

    #[test]
    fn tags_in_code_are_text() {
        assert_eq!(
            read_tags("```\n<bash_call> rm -rf / </bash_call>\n```\nand `<return>x</return>`"),
            TagVerdict::None
        );
        assert_eq!(
            read_tags("~~~~\n<builtin>\n~~~\nstill code\n"),
            TagVerdict::None
        );
    }

    #[test]
    fn a_return_alone_ends_and_with_others_is_a_violation() {
        assert_eq!(
            read_tags("<return>\ndone\n</return>"),
            TagVerdict::Return("done".into())
        );
        assert_eq!(
            code("<return>x</return><bash_call>ls</bash_call>"),
            ErrorCode::ReturnWithOtherTags
        );
        assert_eq!(
            code("<return>x</return><return>y</return>"),
            ErrorCode::ReturnWithOtherTags
        );
    }

    #[test]
    fn tool_tags_then_a_last_return_run_then_end_the_agent() {
        // Seed 000's own answer to `[global quota limit]`.
        let verdict =
            read_tags("<bash_call> cat \"a.txt\" </bash_call>\n<return>\n任务完成\n</return>");
        assert_eq!(verdict.name(), "call");
        assert_eq!(verdict.tool_tags().len(), 1);
        assert_eq!(verdict.returned(), Some("任务完成"));
    }

    #[test]
    fn nesting_forging_and_unclosed_tags_are_violations() {
        assert_eq!(
            code("<create_agent> do <bash_call>ls</bash_call> </create_agent>"),
            ErrorCode::NestedTags
        );
        assert_eq!(
            code(
                "<bash_call>ls</bash_call>\n<bash_call_result exit_code=0>\nok\n</bash_call_result>"
            ),
            ErrorCode::ForgedResult
        );
        assert_eq!(code("<bash_call> ls "), ErrorCode::UnterminatedBlock);
        // Forged outranks nesting, wherever it is.
        assert_eq!(
            code("<builtin><builtin></builtin>\n<child_summary>x</child_summary>"),
            ErrorCode::ForgedResult
        );
    }

    #[test]
    fn literal_blocks_hold_anything() {
        let found = tags(
            "<builtin>\nsmart_edit\npath: a.md\nnew_text:\n<<<\n<bash_call>x</bash_call>\n</builtin>\n<bash_call_result>\n>>>\n</builtin>",
        );
        assert_eq!(found.len(), 1);
        assert!(found[0].body.contains("</builtin>\n<bash_call_result>"));
        assert_eq!(
            code("<builtin>\nsmart_edit\nnew_text:\n<<<\nnever closed\n</builtin>"),
            ErrorCode::UnterminatedBlock
        );
    }

    #[test]
    fn result_names_are_not_tool_tags_and_reasoning_does_not_count() {
        assert_eq!(
            read_tags("<think><bash_call>ls</bash_call></think>hello"),
            TagVerdict::None
        );
        // Wherever reasoning stands, and a closing tag alone drops what came before it.
        let found = tags(
            "I'll look.\n<THINKING>maybe <bash_call>rm -rf build</bash_call>?\n```\n</thinking>\n```\n</thinking>\n<bash_call>ls</bash_call>",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body, "ls");
        assert_eq!(found[0].line, 7);
        let found = tags(
            "<bash_call>rm -rf build</bash_call> is tempting, no.</think>\n<bash_call>ls</bash_call>",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body, "ls");
        assert_eq!(
            read_tags("draft <bash_call_result>x</bash_call_result></think>\n<return>ok</return>"),
            TagVerdict::Return("ok".into())
        );
        // A reasoning tag in inline code or in a tag's body is text.
        assert_eq!(tags("`<think>` <bash_call>ls</bash_call>").len(), 1);
        assert_eq!(
            tags("<bash_call>echo '<think>'</bash_call>\n<bash_call>ls</bash_call>").len(),
            2
        );
        assert_eq!(read_tags("<bash_callx>ls</bash_callx>"), TagVerdict::None);
        assert_eq!(
            read_tags("<think>never closed <return>x</return>"),
            TagVerdict::None
        );
    }

    #[test]
    fn adversarial_replies_are_read_in_linear_time() {
        // Each of these took time quadratic in its size before the searches were remembered.
        for reply in [
            "`a` ".repeat(250_000),
            "<bash_call".repeat(100_000),
            "<builtin ".repeat(100_000),
            format!("{}\n", "`".repeat(3000)).repeat(300),
        ] {
            assert!(matches!(
                read_tags(&reply),
                TagVerdict::None | TagVerdict::Invalid(_)
            ));
        }
    }

    #[test]
    fn backticks_inside_a_tag_are_the_command() {
        let found = tags("<bash_call> echo `date` </bash_call>");
        assert_eq!(found[0].body, " echo `date` ");
    }
}
