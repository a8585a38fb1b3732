//! A `<builtin>` body (PROTOCOL.md §15 (The tag dialect)): the tool's name on its first line,
//! then `key: value` lines, and literal blocks (`key:` alone, then the lines between a `<<<` line
//! and a `>>>` line, kept byte for byte).

use super::super::error_code::ErrorCode;
use super::TagError;

/// A builtin's name and its fields, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinBody {
    /// The builtin's name (`read_file`, `smart_edit`, ...), trimmed.
    pub name: String,
    /// `key` → value; a literal block's value is its text exactly.
    pub fields: Vec<(String, String)>,
}

impl BuiltinBody {
    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a builtin's body.
pub fn read_builtin(body: &str) -> Result<BuiltinBody, TagError> {
    let mut lines = Lines { text: body, pos: 0 };
    let name = loop {
        let Some(line) = lines.next_line() else {
            return Err(TagError::new(
                ErrorCode::InvalidArgs,
                "the <builtin> is empty: its first line must name the builtin tool".into(),
                format!(
                    "Write the tool's name on the first line, e.g. <builtin>\\nread_file\\npath: README.md\\n</builtin>; the builtins are: {}.",
                    super::BUILTIN_NAMES.join(", ")
                ),
            ));
        };
        if !line.trim().is_empty() {
            break line.trim().to_owned();
        }
    };
    let mut fields: Vec<(String, String)> = Vec::new();
    while let Some(line) = lines.next_line() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            return Err(bad_line(&name, trimmed));
        };
        let key = key.trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad_line(&name, trimmed));
        }
        let value = value.trim();
        let value = if value.is_empty() && lines.peek_line().is_some_and(|l| l.trim() == "<<<") {
            lines.next_line();
            lines.literal(key)?
        } else {
            value.to_owned()
        };
        if fields.iter().any(|(k, _)| k == key) {
            return Err(TagError::new(
                ErrorCode::DuplicateKey,
                format!("the {name} builtin gives {key:?} twice"),
                format!("Give {key:?} once."),
            ));
        }
        fields.push((key.to_owned(), value));
    }
    Ok(BuiltinBody { name, fields })
}

fn bad_line(name: &str, line: &str) -> TagError {
    let shown: String = line.chars().take(60).collect();
    TagError::new(
        ErrorCode::InvalidArgs,
        format!("a line of the {name} builtin is not `key: value`: {shown:?}"),
        "Write one `key: value` per line; for text of several lines write `key:` alone, then the text between a `<<<` line and a `>>>` line.".into(),
    )
}

/// The body's lines, their ends (LF or CRLF) taken off.
struct Lines<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lines<'a> {
    fn next_line(&mut self) -> Option<&'a str> {
        let (line, next) = self.line_at(self.pos)?;
        self.pos = next;
        Some(line)
    }

    fn peek_line(&self) -> Option<&'a str> {
        self.line_at(self.pos).map(|(line, _)| line)
    }

    fn line_at(&self, pos: usize) -> Option<(&'a str, usize)> {
        if pos >= self.text.len() {
            return None;
        }
        let rest = &self.text[pos..];
        let (line, next) = match rest.find('\n') {
            Some(n) => (&rest[..n], pos + n + 1),
            None => (rest, self.text.len()),
        };
        Some((line.strip_suffix('\r').unwrap_or(line), next))
    }

    /// The text up to a `>>>` line, byte for byte, without the line end before it.
    fn literal(&mut self, key: &str) -> Result<String, TagError> {
        let start = self.pos;
        loop {
            let line_start = self.pos;
            let Some(line) = self.next_line() else {
                return Err(TagError::new(
                    ErrorCode::InvalidArgs,
                    format!(
                        "the literal block of {key:?} opened with <<< is never closed by a >>> line"
                    ),
                    "End the text with a line holding only >>>.".into(),
                ));
            };
            if line.trim() == ">>>" {
                let text = &self.text[start..line_start];
                let text = text
                    .strip_suffix("\r\n")
                    .or_else(|| text.strip_suffix('\n'))
                    .unwrap_or(text);
                return Ok(text.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_and_literal_blocks_byte_for_byte() {
        let body = read_builtin(
            "\nsmart_edit\npath: a.txt\nmode: Patch\nold_text:\n<<<\n  two\r\n\tthree \n>>>\nnew_text:\n<<<\n\n>>>\n",
        )
        .unwrap();
        assert_eq!(body.name, "smart_edit");
        assert_eq!(body.get("path"), Some("a.txt"));
        assert_eq!(body.get("old_text"), Some("  two\r\n\tthree "));
        assert_eq!(body.get("new_text"), Some(""));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert_eq!(
            read_builtin("  \n").unwrap_err().code,
            ErrorCode::InvalidArgs
        );
        assert_eq!(
            read_builtin("read_file\npath a").unwrap_err().code,
            ErrorCode::InvalidArgs
        );
        assert_eq!(
            read_builtin("read_file\npath: a\npath: b")
                .unwrap_err()
                .code,
            ErrorCode::DuplicateKey
        );
        assert_eq!(
            read_builtin("smart_edit\nnew_text:\n<<<\nopen")
                .unwrap_err()
                .code,
            ErrorCode::InvalidArgs
        );
    }
}
