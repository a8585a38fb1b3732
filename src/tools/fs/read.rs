//! `fs.read`: a file, whole or in part (head, tail, range, one line, lines), as UTF-8 text or
//! encoded as base64 or hex, optionally with its metadata.
//!
//! Units: for `utf-8`, `head`, `tail` and `range` count characters; for `base64` and `hex` they
//! count bytes. `line` and `lines` are 1-based; a line is the text up to and including `\n`.

use std::io::Read;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};

/// The largest file read into memory; larger ones need a narrower read.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// The arguments of `fs.read` (see `protocol/schemas/fs.read.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArgs {
    /// The file.
    pub path: String,
    /// The first N characters (bytes for base64/hex).
    pub head: Option<u64>,
    /// The last N characters (bytes for base64/hex).
    pub tail: Option<u64>,
    /// `START-END` or `START-`.
    pub range: Option<String>,
    /// One 1-based line.
    pub line: Option<u64>,
    /// `A-B` or `A-`, 1-based, inclusive.
    pub lines: Option<String>,
    /// How to return the content.
    #[serde(default)]
    pub encoding: Encoding,
    /// Add size, line count, mtime, permissions and sha256.
    #[serde(default)]
    pub include_meta: bool,
}

/// How content is returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Encoding {
    /// As text; the file must be UTF-8.
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    /// Bytes as base64.
    #[serde(rename = "base64")]
    Base64,
    /// Bytes as lowercase hex.
    #[serde(rename = "hex")]
    Hex,
}

/// The part shown: `start..end` of `total` units (characters, bytes or, for lines, 1-based
/// inclusive line numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shown {
    start: u64,
    end: u64,
    total: u64,
}

/// Which part of the file to return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Selection {
    Whole,
    Head(u64),
    Tail(u64),
    Range(u64, Option<u64>),
    Lines(u64, Option<u64>),
}

/// Runs `fs.read`.
pub fn run(sandbox: &Sandbox, args: &ReadArgs) -> Result<ToolOutput, ToolError> {
    let selection = selection(args)?;
    let mut file = sandbox.open_for_reading(&args.path)?;
    let metadata = file
        .metadata()
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{}: {e}", args.path), None))?;
    if metadata.len() > MAX_READ_BYTES {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!(
                "{} is {} bytes, more than fs.read loads ({MAX_READ_BYTES})",
                args.path,
                metadata.len()
            ),
            Some(
                "search it with fs.search, or run a command such as head or tail with process.run",
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{}: {e}", args.path), None))?;

    let (content, shown) = match args.encoding {
        Encoding::Utf8 => {
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                ToolError::new(
                    ErrorCode::BinaryContent,
                    format!(
                        "{} is not UTF-8 text (invalid byte at offset {})",
                        args.path,
                        e.valid_up_to()
                    ),
                    Some("read it with \"encoding\": \"base64\" or \"hex\""),
                )
            })?;
            let (part, shown) = select_text(text, selection)?;
            (part.to_owned(), shown)
        }
        Encoding::Base64 | Encoding::Hex => {
            let (part, shown) = select_bytes(&bytes, selection)?;
            let encoded = if args.encoding == Encoding::Base64 {
                base64::engine::general_purpose::STANDARD.encode(part)
            } else {
                hex::encode(part)
            };
            (encoded, shown)
        }
    };

    let unit = if args.encoding == Encoding::Utf8 {
        "chars"
    } else {
        "bytes"
    };
    let mut fields = Vec::new();
    let mut data =
        json!({"path": args.path, "encoding": encoding_name(args.encoding), "content": content});
    if selection != Selection::Whole {
        let (label, value) = match selection {
            Selection::Lines(..) => (
                "lines",
                format!("{}-{} of {}", shown.start, shown.end, shown.total),
            ),
            _ => (
                "range",
                format!("{}-{} of {} {unit}", shown.start, shown.end, shown.total),
            ),
        };
        fields.push((label.to_owned(), value));
        data["selection"] = json!({
            "kind": label, "start": shown.start, "end": shown.end, "total": shown.total
        });
    }
    if args.include_meta {
        let meta = meta_of(&bytes, &metadata);
        fields.push(("meta".to_owned(), meta.to_string()));
        data["meta"] = meta;
    }
    Ok(ToolOutput {
        body: Some(content),
        fields,
        data,
        continue_hint: Some(match args.encoding {
            Encoding::Utf8 => "read on with \"range\" (character offsets) or \"lines\"".to_owned(),
            _ => "read on with \"range\" (byte offsets)".to_owned(),
        }),
    })
}

fn encoding_name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Utf8 => "utf-8",
        Encoding::Base64 => "base64",
        Encoding::Hex => "hex",
    }
}

fn selection(args: &ReadArgs) -> Result<Selection, ToolError> {
    let bad = |what: &str, text: &str| {
        ToolError::new(
            ErrorCode::InvalidArgs,
            format!("fs.read: {what} {text:?} is not START-END with START <= END"),
            Some("write it as \"0-4096\" or \"4096-\""),
        )
    };
    let parse_span = |what: &str, text: &str| -> Result<(u64, Option<u64>), ToolError> {
        let (start, end) = text.split_once('-').ok_or_else(|| bad(what, text))?;
        let start: u64 = start.parse().map_err(|_| bad(what, text))?;
        let end: Option<u64> = if end.is_empty() {
            None
        } else {
            Some(end.parse().map_err(|_| bad(what, text))?)
        };
        if end.is_some_and(|end| end < start) {
            return Err(bad(what, text));
        }
        Ok((start, end))
    };
    Ok(if let Some(n) = args.head {
        Selection::Head(n)
    } else if let Some(n) = args.tail {
        Selection::Tail(n)
    } else if let Some(range) = &args.range {
        let (start, end) = parse_span("range", range)?;
        Selection::Range(start, end)
    } else if let Some(line) = args.line {
        Selection::Lines(line, Some(line))
    } else if let Some(lines) = &args.lines {
        let (start, end) = parse_span("lines", lines)?;
        Selection::Lines(start.max(1), end)
    } else {
        Selection::Whole
    })
}

/// The selected part of `text`, the shown span (start, end) and the total, in characters (or
/// lines for line selections).
fn select_text(text: &str, selection: Selection) -> Result<(&str, Shown), ToolError> {
    if let Selection::Lines(first, last) = selection {
        return select_lines(text, first, last);
    }
    let total = text.chars().count() as u64;
    let (start, end) = char_span(selection, total);
    let byte_at = |chars: u64| {
        text.char_indices()
            .nth(usize::try_from(chars).unwrap_or(usize::MAX))
            .map_or(text.len(), |(at, _)| at)
    };
    Ok((
        &text[byte_at(start)..byte_at(end)],
        Shown { start, end, total },
    ))
}

fn select_bytes(bytes: &[u8], selection: Selection) -> Result<(&[u8], Shown), ToolError> {
    if let Selection::Lines(first, last) = selection {
        let (span, shown) = line_bytes(bytes, first, last)?;
        return Ok((&bytes[span], shown));
    }
    let total = bytes.len() as u64;
    let (start, end) = char_span(selection, total);
    let (start_at, end_at) = (
        from_index(start).min(bytes.len()),
        from_index(end).min(bytes.len()),
    );
    Ok((&bytes[start_at..end_at], Shown { start, end, total }))
}

/// The byte span of lines `first..=last` (1-based), the lines shown, and the line count.
fn line_bytes(
    bytes: &[u8],
    first: u64,
    last: Option<u64>,
) -> Result<(std::ops::Range<usize>, Shown), ToolError> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .filter(|at| *at < bytes.len())
        .collect();
    let total = starts.len() as u64;
    let (from, to) = line_span(first, last, total)?;
    let begin = starts
        .get(from_index(from - 1))
        .copied()
        .unwrap_or(bytes.len());
    let finish = starts.get(from_index(to)).copied().unwrap_or(bytes.len());
    Ok((
        begin..finish,
        Shown {
            start: from,
            end: to,
            total,
        },
    ))
}

fn from_index(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// The (start, end) of a head/tail/range/whole selection over `total` units, clamped.
fn char_span(selection: Selection, total: u64) -> (u64, u64) {
    match selection {
        Selection::Whole | Selection::Lines(..) => (0, total),
        Selection::Head(n) => (0, n.min(total)),
        Selection::Tail(n) => (total.saturating_sub(n), total),
        Selection::Range(start, end) => {
            let start = start.min(total);
            (start, end.unwrap_or(total).clamp(start, total))
        }
    }
}

/// Lines `first..=last` (1-based) of `total`: an error past the end, clamped otherwise.
fn line_span(first: u64, last: Option<u64>, total: u64) -> Result<(u64, u64), ToolError> {
    if first > total.max(1) || (total == 0 && first > 1) {
        return Err(ToolError::new(
            ErrorCode::InvalidArgs,
            format!("fs.read: line {first} is past the end of the file ({total} lines)"),
            Some("ask for a line within the file; includeMeta gives the line count"),
        ));
    }
    let last = last.unwrap_or(total).min(total).max(first);
    Ok((first, last))
}

fn select_lines(text: &str, first: u64, last: Option<u64>) -> Result<(&str, Shown), ToolError> {
    // Line starts follow a '\n', so the byte span falls on character boundaries.
    let (span, shown) = line_bytes(text.as_bytes(), first, last)?;
    Ok((&text[span], shown))
}

fn meta_of(bytes: &[u8], metadata: &std::fs::Metadata) -> Value {
    let lines = bytes.iter().filter(|b| **b == b'\n').count()
        + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    #[cfg(unix)]
    let permissions = {
        use std::os::unix::fs::PermissionsExt;
        format!("{:04o}", metadata.permissions().mode() & 0o7777)
    };
    #[cfg(not(unix))]
    let permissions = if metadata.permissions().readonly() {
        "readonly"
    } else {
        "readwrite"
    }
    .to_owned();
    json!({
        "size": bytes.len(),
        "lines": lines,
        "modified": metadata.modified().ok().map(crate::protocol::time::format_rfc3339),
        "permissions": permissions,
        "sha256": hex::encode(Sha256::digest(bytes)),
    })
}

/// `fs.read` in the registry.
pub struct FsRead;

impl Tool for FsRead {
    type Args = ReadArgs;
    const NAME: ToolName = ToolName::FsRead;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, args: &'a ReadArgs) -> Effects<'a> {
        Effects::reading([args.path.as_str()])
    }

    fn session_changes<'a>(
        &self,
        args: &'a ReadArgs,
        _output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        vec![SessionChange::Read(&args.path)]
    }

    fn subject(&self, args: &ReadArgs, roots: &[std::path::PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let content = output
            .data
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        format!(
            "Read {} ({})",
            super::ls::human_size(content.len() as u64),
            crate::tools::tool::plural(content.lines().count(), "line")
        )
    }

    fn run(&self, context: &ToolContext<'_>, args: &ReadArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sandbox::Roots;

    struct Fixture {
        _temp: tempfile::TempDir,
        root: PathBuf,
        sandbox: Sandbox,
    }

    fn fixture(files: &[(&str, &[u8])]) -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        for (name, content) in files {
            std::fs::write(root.join(name), content).unwrap();
        }
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        Fixture {
            _temp: temp,
            root,
            sandbox,
        }
    }

    fn read(f: &Fixture, args: Value) -> Result<ToolOutput, ToolError> {
        let mut args = args.as_object().unwrap().clone();
        let path = format!("{}/{}", f.root.display(), args["path"].as_str().unwrap());
        args.insert("path".into(), Value::String(path));
        run(&f.sandbox, &crate::tools::parse_args("fs.read", &args)?)
    }

    fn body(f: &Fixture, args: Value) -> String {
        read(f, args).unwrap().body.unwrap()
    }

    const TEXT: &[u8] = "αβγ line one\nline two\nline three\n".as_bytes();

    #[test]
    fn reads_whole_files_and_parts_counted_in_characters() {
        let f = fixture(&[("a.txt", TEXT)]);
        assert_eq!(
            body(&f, json!({"path": "a.txt"})),
            "αβγ line one\nline two\nline three\n"
        );
        assert_eq!(body(&f, json!({"path": "a.txt", "head": 3})), "αβγ");
        assert_eq!(body(&f, json!({"path": "a.txt", "tail": 6})), "three\n");
        assert_eq!(body(&f, json!({"path": "a.txt", "range": "1-5"})), "βγ l");
        assert_eq!(
            body(&f, json!({"path": "a.txt", "range": "22-"})),
            "line three\n"
        );
        let output = read(&f, json!({"path": "a.txt", "head": 3})).unwrap();
        assert_eq!(
            output.fields,
            vec![("range".to_owned(), "0-3 of 33 chars".to_owned())]
        );
    }

    #[test]
    fn reads_lines() {
        let f = fixture(&[("a.txt", TEXT), ("empty.txt", b"")]);
        assert_eq!(body(&f, json!({"path": "a.txt", "line": 2})), "line two\n");
        assert_eq!(
            body(&f, json!({"path": "a.txt", "lines": "2-3"})),
            "line two\nline three\n"
        );
        assert_eq!(
            body(&f, json!({"path": "a.txt", "lines": "3-"})),
            "line three\n"
        );
        assert_eq!(
            body(&f, json!({"path": "a.txt", "lines": "2-99"})),
            "line two\nline three\n"
        );
        let past = read(&f, json!({"path": "a.txt", "line": 4})).unwrap_err();
        assert_eq!(past.code, ErrorCode::InvalidArgs);
        assert!(
            past.message.contains("past the end of the file (3 lines)"),
            "{}",
            past.message
        );
        assert_eq!(body(&f, json!({"path": "empty.txt", "line": 1})), "");
    }

    #[test]
    fn bad_ranges_are_invalid_args() {
        let f = fixture(&[("a.txt", TEXT)]);
        let error = read(&f, json!({"path": "a.txt", "range": "9-3"})).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgs);
    }

    #[test]
    fn binary_files_need_an_encoding() {
        let f = fixture(&[("b.bin", &[0x00, 0xff, 0x10, b'\n', 0x80])]);
        let error = read(&f, json!({"path": "b.bin"})).unwrap_err();
        assert_eq!(error.code, ErrorCode::BinaryContent);
        assert!(error.hint.unwrap().contains("base64"));
        assert_eq!(
            body(&f, json!({"path": "b.bin", "encoding": "hex"})),
            "00ff100a80"
        );
        assert_eq!(
            body(
                &f,
                json!({"path": "b.bin", "encoding": "base64", "head": 2})
            ),
            "AP8="
        );
        assert_eq!(
            body(&f, json!({"path": "b.bin", "encoding": "hex", "tail": 1})),
            "80"
        );
        assert_eq!(
            body(&f, json!({"path": "b.bin", "encoding": "hex", "line": 2})),
            "80"
        );
    }

    #[test]
    fn meta_has_size_lines_mtime_permissions_and_sha256() {
        let f = fixture(&[("a.txt", b"hello\nworld")]);
        let output = read(&f, json!({"path": "a.txt", "includeMeta": true})).unwrap();
        let meta = &output.data["meta"];
        assert_eq!(meta["size"], 11);
        assert_eq!(meta["lines"], 2);
        assert_eq!(
            meta["sha256"],
            "26c60a61d01db5836ca70fefd44a6a016620413c8ef5f259a6c5612d4f79d3b8"
        );
        assert!(meta["modified"].as_str().unwrap().ends_with('Z'));
        assert!(
            output
                .fields
                .iter()
                .any(|(k, v)| k == "meta" && v.contains("\"sha256\""))
        );
    }

    #[test]
    fn files_over_the_limit_are_too_large() {
        let f = fixture(&[]);
        let big = std::fs::File::create(f.root.join("big.bin")).unwrap();
        big.set_len(MAX_READ_BYTES + 1).unwrap();
        let error = read(&f, json!({"path": "big.bin", "encoding": "hex", "head": 4})).unwrap_err();
        assert_eq!(error.code, ErrorCode::TooLarge);
        assert!(error.hint.unwrap().contains("fs.search"));
    }

    #[test]
    fn sandbox_refusals_keep_their_codes() {
        let f = fixture(&[("a.txt", TEXT)]);
        let mut args = serde_json::Map::new();
        args.insert("path".into(), Value::String("/etc/passwd".into()));
        assert_eq!(
            run(
                &f.sandbox,
                &crate::tools::parse_args("fs.read", &args).unwrap()
            )
            .unwrap_err()
            .code,
            ErrorCode::OutsideRoots
        );
        let missing = read(&f, json!({"path": "missing.txt"})).unwrap_err();
        assert_eq!(missing.code, ErrorCode::NotFound);
    }
}
