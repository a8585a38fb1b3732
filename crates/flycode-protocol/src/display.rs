//! Making untrusted text safe to show: control, bidirectional and zero-width characters become
//! visible escapes, so what a person reads is what will run; a call's arguments laid out in lines
//! for the approval question.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Whether `c` must not reach a terminal or a header line as it is: control characters, line and
/// paragraph separators, bidirectional controls, and Unicode's default-ignorable code points
/// (zero-width characters, soft hyphen, fillers, variation selectors, tag characters).
pub fn is_hidden_or_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// Escapes every control, bidirectional and zero-width character: `\n`, `\t`, `\r` as such,
/// the rest as `\u{XXXX}`. Text without such characters is returned as it is.
pub fn escape_for_display(text: &str) -> Cow<'_, str> {
    if !text.contains(is_hidden_or_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_hidden_or_control(c) => out.push_str(&format!("\\u{{{:04X}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The most characters of any one argument a header line shows (PROTOCOL.md §4 (The result block: header budget)): `[command]` and
/// `[error]` stay within the result's budget whatever the model sent.
pub const HEADER_ARG_CHARS: usize = 512;

/// The most characters any one header value shows, as a last line of defence for text that
/// echoes several arguments at once.
pub const HEADER_VALUE_CHARS: usize = 2048;

/// `text` cut after `limit` characters as they will be shown (an escaped character counts as
/// its escape), then `…` and the full length: `/very/long/pa…(1048576 chars)`. Text within the
/// limit is returned as it is.
pub fn shorten_to(text: &str, limit: usize) -> Cow<'_, str> {
    match cut_point(text, limit) {
        None => Cow::Borrowed(text),
        Some(cut) => Cow::Owned(format!(
            "{}{}",
            &text[..cut],
            elision_note(text.chars().count(), "chars")
        )),
    }
}

/// [`shorten_to`] with [`HEADER_ARG_CHARS`]: one argument as a header shows it.
pub fn shorten_argument(text: &str) -> Cow<'_, str> {
    shorten_to(text, HEADER_ARG_CHARS)
}

/// The byte offset where `text` must be cut to show at most `limit` characters, or `None`
/// when it fits.
pub fn cut_point(text: &str, limit: usize) -> Option<usize> {
    // Cheap exit: no text of `limit` bytes or fewer can show more than `limit` characters
    // unless it holds escaped characters, which are counted below.
    if text.len() <= limit && !text.contains(is_hidden_or_control) {
        return None;
    }
    let mut shown = 0;
    for (at, c) in text.char_indices() {
        shown += shown_width(c);
        if shown > limit {
            return Some(at);
        }
    }
    None
}

/// `…(N chars)`, `…(N items)`: what follows a shortened value, giving its full size.
pub fn elision_note(total: usize, unit: &str) -> String {
    format!("…({total} {unit})")
}

/// How many characters `c` takes once [`escape_for_display`] has escaped it.
fn shown_width(c: char) -> usize {
    match c {
        '\n' | '\t' | '\r' => 2,
        c if is_hidden_or_control(c) => format!("\\u{{{:04X}}}", u32::from(c)).len(),
        _ => 1,
    }
}

/// Shortens every run of non-whitespace much longer than [`HEADER_ARG_CHARS`] (a path or an id
/// a message echoes) to that many characters, then the whole text to [`HEADER_VALUE_CHARS`]: a
/// header value that stays within the budget whoever wrote it.
pub fn shorten_header_value(text: &str) -> Cow<'_, str> {
    // An argument a message already shortened is 512 characters plus quotes and the start of
    // its `…(N chars)`: leave room for those so it is not cut twice.
    let word_limit = HEADER_ARG_CHARS + 32;
    let has_long_word = text
        .split(char::is_whitespace)
        .any(|word| cut_point(word, word_limit).is_some());
    let words: Cow<'_, str> = if has_long_word {
        let mut out = String::with_capacity(text.len().min(HEADER_VALUE_CHARS * 2));
        let mut rest = text;
        while !rest.is_empty() {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let word = &rest[..end];
            if cut_point(word, word_limit).is_some() {
                out.push_str(&shorten_argument(word));
            } else {
                out.push_str(word);
            }
            let next = rest[end..]
                .find(|c: char| !c.is_whitespace())
                .map_or(rest.len(), |n| end + n);
            out.push_str(&rest[end..next]);
            rest = &rest[next..];
        }
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    };
    if cut_point(&words, HEADER_VALUE_CHARS).is_none() {
        return words;
    }
    Cow::Owned(shorten_to(&words, HEADER_VALUE_CHARS).into_owned())
}

/// Like [`escape_for_display`], but keeps line breaks and tabs: for whole blocks of untrusted
/// text (file contents, program output) printed to a terminal, where an escape sequence could
/// recolour the screen, move the cursor or rewrite the clipboard (OSC 52).
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    if !text.contains(|c: char| c != '\n' && c != '\t' && is_hidden_or_control(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if is_hidden_or_control(c) => out.push_str(&format!("\\u{{{:04X}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Like [`escape_for_display`], but keeps line feeds as line breaks: for text laid out in lines
/// on purpose, such as the approval question. Each line is escaped as [`escape_for_display`]
/// escapes it, so a carriage return, a vertical tab, a form feed or a line or paragraph separator
/// (U+2028, U+2029), which could move the cursor back over a line or start one the text does not
/// show, still appears as an escape. Tabs appear as `\t` too: a run of tabs can push the rest of a
/// line out of sight at the terminal's right edge.
pub fn escape_lines_for_display(text: &str) -> Cow<'_, str> {
    if !text.contains(|c: char| c != '\n' && is_hidden_or_control(c)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(escape_for_display).collect();
    Cow::Owned(lines.join("\n"))
}

/// The margin before each line of a multi-line value in [`show_arguments`]: no line of a value
/// can pass for a line of the listing.
pub const BLOCK_MARGIN: char = '│';

/// Lays out a call's arguments for a person, one `name: value` a line, nothing left out:
///
/// - a string on one line as it is; a string with line breaks as a block of its lines under its
///   name, indented, each after [`BLOCK_MARGIN`] (a text ending with a line break ends with an
///   empty `│` line);
/// - numbers, booleans, `null` and lists of them as JSON on one line (`args: ["-la", "src"]`);
/// - an object as `KEY=value` lines (`env`);
/// - a list holding objects or multi-line strings as `- ` items (fs.writeBatch's `files`), an
///   object's members laid out as above.
///
/// Every line starts with `indent` and is escaped as [`escape_for_display`] escapes it: a line
/// break inside a one-line value (an `env` value, a JSON list) shows as `\n`, so the only line
/// breaks of the result are the listing's own.
pub fn show_arguments(args: &Map<String, Value>, indent: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, value) in args {
        push_member(&mut lines, indent, name, value);
    }
    lines
}

fn has_line_break(value: &Value) -> bool {
    value.as_str().is_some_and(|text| text.contains('\n'))
}

fn push_member(lines: &mut Vec<String>, indent: &str, name: &str, value: &Value) {
    let name = escape_for_display(name);
    match value {
        Value::String(text) if text.contains('\n') => {
            lines.push(format!("{indent}{name}:"));
            push_block(lines, &format!("{indent}  "), text);
        }
        Value::String(text) => lines.push(format!("{indent}{name}: {}", escape_for_display(text))),
        Value::Object(members) if !members.is_empty() => {
            lines.push(format!("{indent}{name}:"));
            for (key, value) in members {
                let value = match value {
                    Value::String(text) => Cow::Borrowed(text.as_str()),
                    other => Cow::Owned(other.to_string()),
                };
                lines.push(format!(
                    "{indent}  {}={}",
                    escape_for_display(key),
                    escape_for_display(&value)
                ));
            }
        }
        Value::Array(items)
            if items
                .iter()
                .any(|item| item.is_object() || has_line_break(item)) =>
        {
            lines.push(format!("{indent}{name}:"));
            for item in items {
                push_item(lines, &format!("{indent}  "), item);
            }
        }
        other => lines.push(format!(
            "{indent}{name}: {}",
            escape_for_display(&other.to_string())
        )),
    }
}

/// One item of a list, after `- `; an object's first member shares the dash's line.
fn push_item(lines: &mut Vec<String>, indent: &str, item: &Value) {
    match item {
        Value::Object(members) if !members.is_empty() => {
            let inner = format!("{indent}  ");
            let first = lines.len();
            for (name, value) in members {
                push_member(lines, &inner, name, value);
            }
            if let Some(line) = lines.get_mut(first) {
                line.replace_range(indent.len()..inner.len(), "- ");
            }
        }
        Value::String(text) if text.contains('\n') => {
            lines.push(format!("{indent}-"));
            push_block(lines, &format!("{indent}  "), text);
        }
        Value::String(text) => lines.push(format!("{indent}- {}", escape_for_display(text))),
        other => lines.push(format!(
            "{indent}- {}",
            escape_for_display(&other.to_string())
        )),
    }
}

fn push_block(lines: &mut Vec<String>, indent: &str, text: &str) {
    for line in text.split('\n') {
        if line.is_empty() {
            lines.push(format!("{indent}{BLOCK_MARGIN}"));
        } else {
            lines.push(format!(
                "{indent}{BLOCK_MARGIN} {}",
                escape_for_display(line)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shown(args: Value) -> String {
        show_arguments(args.as_object().unwrap(), "  ").join("\n")
    }

    #[test]
    fn a_multi_line_string_is_a_block_of_real_lines() {
        assert_eq!(
            shown(json!({"command": "echo one\necho two\n", "cwd": "/w"})),
            "  command:\n    │ echo one\n    │ echo two\n    │\n  cwd: /w"
        );
    }

    #[test]
    fn hidden_characters_inside_a_line_are_escaped() {
        let text = shown(json!({"command": "ls\n\u{1b}[2Krm -rf ~\r\u{202E}txt\u{2028}x\ty"}));
        assert_eq!(
            text,
            "  command:\n    │ ls\n    │ \\u{001B}[2Krm -rf ~\\r\\u{202E}txt\\u{2028}x\\ty"
        );
    }

    #[test]
    fn lists_objects_and_nested_files_are_readable() {
        let text = shown(json!({
            "args": ["-la", "a b"],
            "env": {"A": "1", "B\nC": "x\ny"},
            "files": [
                {"path": "/w/a", "content": "one\ntwo"},
                {"path": "/w/b", "content": "x"}
            ],
            "timeoutMs": 5000,
            "empty": {}
        }));
        assert_eq!(
            text,
            [
                "  args: [\"-la\",\"a b\"]",
                "  env:",
                "    A=1",
                "    B\\nC=x\\ny",
                "  files:",
                "    - path: /w/a",
                "      content:",
                "        │ one",
                "        │ two",
                "    - path: /w/b",
                "      content: x",
                "  timeoutMs: 5000",
                "  empty: {}",
            ]
            .join("\n")
        );
    }

    #[test]
    fn line_layout_keeps_line_feeds_only() {
        assert_eq!(
            escape_lines_for_display("a\n\tb\r\u{1b}[2K\u{2028}\nc"),
            "a\n\\tb\\r\\u{001B}[2K\\u{2028}\nc"
        );
        assert!(matches!(escape_lines_for_display("a\nb"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_text_keeps_lines_but_not_escape_sequences() {
        assert_eq!(
            escape_for_terminal("a\n\tb\u{1b}]52;c;SGk=\u{7}\u{9b}\u{202E}"),
            "a\n\tb\\u{001B}]52;c;SGk=\\u{0007}\\u{009B}\\u{202E}"
        );
    }

    #[test]
    fn long_arguments_are_shortened_with_their_full_length() {
        let path = format!("/{}", "a".repeat(1 << 20));
        let short = shorten_argument(&path);
        assert_eq!(short, format!("/{}…(1048577 chars)", "a".repeat(511)));
        assert!(matches!(shorten_argument("/short"), Cow::Borrowed(_)));
        // Escaped characters count as the escapes they become.
        let hidden = "\u{1b}".repeat(600);
        let short = shorten_argument(&hidden);
        assert!(
            escape_for_display(&short).chars().count() < 512 + 20,
            "{short}"
        );
        assert!(short.ends_with("…(600 chars)"));
    }

    #[test]
    fn header_values_shorten_each_long_word_and_stay_bounded() {
        let message = format!("not_found: /w/{} does not exist", "x".repeat(100_000));
        let short = shorten_header_value(&message);
        assert!(short.starts_with("not_found: /w/xxx"), "{short}");
        assert!(short.ends_with("…(100003 chars) does not exist"), "{short}");
        let many = "word ".repeat(100_000);
        let short = shorten_header_value(&many);
        assert!(short.chars().count() < HEADER_VALUE_CHARS + 20);
        assert!(
            short.ends_with("…(500000 chars)"),
            "{}",
            &short[short.len() - 40..]
        );
        // An argument a message already shortened is not cut a second time.
        let once = format!(
            "id {} is bad",
            shorten_argument(&format!("{:?}", "a".repeat(600)))
        );
        assert_eq!(shorten_header_value(&once), once);
        assert!(matches!(
            shorten_header_value("a short message"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn plain_text_is_untouched() {
        assert!(matches!(
            escape_for_display("fs.read 中文"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escapes_default_ignorable_characters() {
        for c in [
            '\u{00AD}',
            '\u{180E}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{2066}',
        ] {
            assert!(is_hidden_or_control(c), "U+{:04X}", u32::from(c));
        }
        assert!(!is_hidden_or_control('中'));
        assert!(!is_hidden_or_control('é'));
    }

    #[test]
    fn escapes_terminal_sequences_and_invisible_characters() {
        assert_eq!(
            escape_for_display("a\u{1b}]52;c;x\u{7}\nb\u{202E}c\u{200B}"),
            "a\\u{001B}]52;c;x\\u{0007}\\nb\\u{202E}c\\u{200B}"
        );
    }
}
