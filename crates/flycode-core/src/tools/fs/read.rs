//! `fs.read`: a file, whole or in part (head, tail, range, one line, lines), as UTF-8 text or
//! encoded as base64 or hex, optionally with its metadata.
//!
//! Units: for `utf-8`, `head`, `tail` and `range` count characters; for `base64` and `hex` they
//! count bytes. `line` and `lines` are 1-based; a line is the text up to and including `\n`.
//!
//! A file of at most [`WHOLE_READ_BYTES`] is read whole, so every total is exact and, for
//! `utf-8`, the whole file must be UTF-8. A larger file read in part is streamed: only the blocks
//! the part needs are read, memory stays bounded by the part itself, and what was not read is not
//! counted (the header says so). Such a file is judged text by the bytes read plus its first
//! [`SNIFF_BYTES`]: UTF-8 without a NUL byte. The reading itself is the sandbox's streaming-read
//! engine (`sandbox/read/`); this file holds the arguments, the masking of secrets and the
//! rendering.

use std::io::{Read, Seek};

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::protocol::ErrorCode;
use crate::protocol::ToolName;
use crate::sandbox::Sandbox;
use crate::sandbox::read::{
    FileFacts, KeptBody, KeptError, ReadError, ReadPart, ReadPlan, ReadSummary, Selection, Shown,
    Span, bytes_summary, file_facts, margins, read_part, read_whole, select_bytes, select_text,
    stream_summary,
};
use crate::tools::secrets::{Edge, Secrets};
use crate::tools::tool::{ApprovalClass, Effects, SessionChange, Tool, ToolContext, shorten_path};
use crate::tools::{ToolError, ToolOutput};

/// The largest file read whole, and the largest part returned; larger ones need a narrower read.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Files up to this size are read whole even for a partial read: cheap, and the totals in the
/// header stay exact. Larger files read in part are streamed.
pub const WHOLE_READ_BYTES: u64 = 1024 * 1024;

/// The block a streamed read reads at a time.
const BLOCK_BYTES: usize = 64 * 1024;

/// A door that prints only the result block gets a whole text file at least this large left in
/// the file, written out from there (PROTOCOL.md §9 (fs.read), "A large file written out from
/// where it is"); a smaller one is read into memory, which costs less than two passes.
pub const KEPT_FROM_BYTES: u64 = 256 * 1024;

/// The start of a streamed file checked for text (UTF-8, no NUL byte) on a `utf-8` read.
pub const SNIFF_BYTES: usize = 8 * 1024;

/// The sizes `fs.read` reads with; the unit tests shrink them to reach block boundaries.
const PLAN: ReadPlan = ReadPlan {
    whole_up_to: WHOLE_READ_BYTES,
    block: BLOCK_BYTES,
    sniff: SNIFF_BYTES,
    max_part: MAX_READ_BYTES,
};

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

/// Runs `fs.read`, masking `secrets` in what it shows.
pub fn run(sandbox: &Sandbox, args: &ReadArgs, secrets: &Secrets) -> Result<ToolOutput, ToolError> {
    run_with(sandbox, args, &PLAN, secrets)
}

fn run_with(
    sandbox: &Sandbox,
    args: &ReadArgs,
    plan: &ReadPlan,
    secrets: &Secrets,
) -> Result<ToolOutput, ToolError> {
    run_shown(sandbox, args, plan, secrets, None)
}

/// [`run`] for a door that reads only the result block (`block_only`, with its output cap):
/// the data's `content` is left null (the body is the content, and a second copy of a large
/// read costs as much as reading it), and a large whole text file that fits the cap is left in
/// the file for the door to write out.
fn run_shown(
    sandbox: &Sandbox,
    args: &ReadArgs,
    plan: &ReadPlan,
    secrets: &Secrets,
    block_only: Option<usize>,
) -> Result<ToolOutput, ToolError> {
    let selection = selection(args)?;
    let mut file = sandbox.open_for_reading(&args.path)?;
    let failed = |error| read_error(&args.path, error);
    let facts = file_facts(&file).map_err(failed)?;
    let text_only = block_only.is_some();
    if let Some(cap) = block_only
        && selection == Selection::Whole
        && args.encoding == Encoding::Utf8
        && !args.include_meta
        && (KEPT_FROM_BYTES..=u64::try_from(cap).unwrap_or(u64::MAX)).contains(&facts.size)
    {
        return kept_output(args, file, secrets);
    }
    let (content, mut shown, whole) =
        read_content(&mut file, args, selection, facts.size, plan, secrets)?;
    let meta = if !args.include_meta {
        None
    } else if let Some(bytes) = &whole {
        Some(meta_of(&bytes_summary(bytes), &facts))
    } else {
        let summary = stream_summary(&mut file, plan).map_err(failed)?;
        Some(meta_of(&summary, &facts))
    };
    // The metadata pass counted the lines a streamed `lines` read did not.
    if let (Selection::Lines(..), None, Some(lines)) = (
        selection,
        shown.total,
        meta.as_ref().and_then(|m| m["lines"].as_u64()),
    ) && shown.end.is_some_and(|end| end <= lines)
    {
        shown.total = Some(lines);
    }
    Ok(output(args, selection, content, &shown, meta, text_only))
}

/// The whole text file `file` left where it is: checked by a first pass, its body written out
/// by the door ([`KeptBody::write_out`]).
fn kept_output(
    args: &ReadArgs,
    file: std::fs::File,
    secrets: &Secrets,
) -> Result<ToolOutput, ToolError> {
    let kept = match KeptBody::scan(file, &args.path, secrets) {
        Ok(kept) => kept,
        Err(KeptError::NotUtf8 { offset }) => return Err(not_utf8(&args.path, offset)),
        Err(KeptError::Read(error) | KeptError::Write(error)) => {
            return Err(io_error(&args.path, &error));
        }
        Err(KeptError::Changed { .. }) => return Err(read_error(&args.path, ReadError::Shrank)),
    };
    let mut output = output(
        args,
        Selection::Whole,
        String::new(),
        &Shown::exact(Span {
            start: 0,
            end: 0,
            total: 0,
        }),
        None,
        true,
    );
    output.kept = Some(kept);
    Ok(output)
}

/// The selected part of the open file of `size` bytes, masked and encoded, what it shows, and
/// the file's bytes when it was read whole and the metadata needs them: streamed when the file
/// is too large to read whole and only a part is asked for.
fn read_content<R: Read + Seek>(
    file: &mut R,
    args: &ReadArgs,
    selection: Selection,
    size: u64,
    plan: &ReadPlan,
    secrets: &Secrets,
) -> Result<(String, Shown, Option<Vec<u8>>), ToolError> {
    let failed = |error| read_error(&args.path, error);
    if selection != Selection::Whole && size > plan.whole_up_to {
        let text = args.encoding == Encoding::Utf8;
        let mut part = read_part(file, size, selection, text, plan).map_err(failed)?;
        mask_streamed(file, &mut part, secrets).map_err(failed)?;
        return Ok((encode(part.bytes, args.encoding), part.shown, None));
    }
    if size > MAX_READ_BYTES {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!(
                "{} is {size} bytes, more than fs.read loads whole ({MAX_READ_BYTES})",
                args.path
            ),
            Some(
                "read part of it with \"head\", \"tail\", \"range\" or \"lines\" (they work \
                 on files of any size), or search it with fs.search",
            ),
        ));
    }
    let bytes = read_whole(file, size).map_err(failed)?;
    // The bytes are kept only for the metadata, which hashes the same bytes.
    let (content, span, whole) = select_whole(
        bytes,
        selection,
        args.encoding,
        &args.path,
        args.include_meta,
        secrets,
    )?;
    Ok((content, Shown::exact(span), whole))
}

/// The result: the content as the body, the `[range]`/`[lines]` and `[meta]` headers, the data.
fn output(
    args: &ReadArgs,
    selection: Selection,
    content: String,
    shown: &Shown,
    meta: Option<Value>,
    text_only: bool,
) -> ToolOutput {
    let unit = if args.encoding == Encoding::Utf8 {
        "chars"
    } else {
        "bytes"
    };
    let mut fields = Vec::new();
    let mut data = json!({"path": args.path, "encoding": encoding_name(args.encoding)});
    data["content"] = if text_only {
        Value::Null
    } else {
        Value::String(content.clone())
    };
    if selection != Selection::Whole {
        let label = if matches!(selection, Selection::Lines(..)) {
            "lines"
        } else {
            "range"
        };
        fields.push((label.to_owned(), describe(label, shown, unit)));
        data["selection"] = json!({
            "kind": label, "start": shown.start, "end": shown.end, "total": shown.total
        });
        if let Some((start, end, size)) = shown.bytes {
            data["selection"]["count"] = json!(shown.count);
            data["selection"]["bytes"] = json!({"start": start, "end": end, "fileSize": size});
        }
    }
    if let Some(meta) = meta {
        fields.push(("meta".to_owned(), meta.to_string()));
        data["meta"] = meta;
    }
    ToolOutput {
        body: Some(content),
        fields,
        data,
        continue_hint: Some(match args.encoding {
            Encoding::Utf8 => "read on with \"range\" (character offsets) or \"lines\"".to_owned(),
            _ => "read on with \"range\" (byte offsets)".to_owned(),
        }),
        kept: None,
    }
}

/// The `[range]` / `[lines]` header: `S-E of N unit` when exact; a streamed read says what it
/// did not count rather than guess.
fn describe(label: &str, shown: &Shown, unit: &str) -> String {
    let unit = if label == "lines" {
        String::new()
    } else {
        format!(" {unit}")
    };
    let size = shown.bytes.map_or(0, |(_, _, size)| size);
    match (shown.start, shown.end, shown.total) {
        (Some(start), Some(end), Some(total)) => format!("{start}-{end} of {total}{unit}"),
        (Some(start), Some(end), None) => {
            format!("{start}-{end} of ?{unit} (file {size} bytes, read in part)")
        }
        _ => {
            let (from, to) = shown.bytes.map_or((0, 0), |(from, to, _)| (from, to));
            format!("last {}{unit}: bytes {from}-{to} of {size}", shown.count)
        }
    }
}

fn encode(bytes: Vec<u8>, encoding: Encoding) -> String {
    match encoding {
        // A streamed utf-8 part is checked before it is returned.
        Encoding::Utf8 => String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(bytes),
        Encoding::Hex => hex::encode(bytes),
    }
}

/// The part of a file read whole (as before streaming existed: a `utf-8` read needs the whole
/// file to be UTF-8) that `selection` asks for, its secrets masked with the bytes around it in
/// view (PROTOCOL.md §9 (Secrets and masking)), and the file's bytes when `keep_bytes`. The whole of a
/// UTF-8 file becomes the content without a copy.
fn select_whole(
    bytes: Vec<u8>,
    selection: Selection,
    encoding: Encoding,
    path: &str,
    keep_bytes: bool,
    secrets: &Secrets,
) -> Result<(String, Span, Option<Vec<u8>>), ToolError> {
    let not_utf8_at = |e: std::str::Utf8Error| not_utf8(path, e.valid_up_to() as u64);
    match encoding {
        Encoding::Utf8 if selection == Selection::Whole => {
            let whole = keep_bytes.then(|| bytes.clone());
            // Checked as UTF-8 once: the checked bytes become the content without a copy.
            let text = String::from_utf8(bytes).map_err(|e| not_utf8_at(e.utf8_error()))?;
            let total = text.chars().count() as u64;
            let content = if secrets.is_empty() {
                text
            } else {
                let mut content = text.into_bytes();
                secrets.mask_bytes(&mut content);
                encode(content, encoding)
            };
            let span = Span {
                start: 0,
                end: total,
                total,
            };
            Ok((content, span, whole))
        }
        Encoding::Utf8 => {
            let text = std::str::from_utf8(&bytes).map_err(not_utf8_at)?;
            let (part, span) = select_text(text, selection).map_err(|e| read_error(path, e))?;
            let start = part.as_ptr() as usize - text.as_ptr() as usize;
            let part = secrets.masked_part(&bytes, start, start + part.len());
            Ok((encode(part, encoding), span, keep_bytes.then_some(bytes)))
        }
        Encoding::Base64 | Encoding::Hex => {
            let (part, span) = select_bytes(&bytes, selection).map_err(|e| read_error(path, e))?;
            let start = part.as_ptr() as usize - bytes.as_ptr() as usize;
            let part = secrets.masked_part(&bytes, start, start + part.len());
            Ok((encode(part, encoding), span, keep_bytes.then_some(bytes)))
        }
    }
}

/// Masks the secrets in a part of a streamed file, with the bytes around it read (a margin on
/// each side, no more): a secret the part's edge cuts is masked as far as the part shows it.
fn mask_streamed<R: Read + Seek>(
    file: &mut R,
    part: &mut ReadPart,
    secrets: &Secrets,
) -> Result<(), ReadError> {
    let Some((start, end, _)) = part.shown.bytes else {
        return Ok(());
    };
    if secrets.is_empty() {
        return Ok(());
    }
    let (before, after) = margins(file, start, end, secrets.margin() as u64)?;
    secrets.mask_window(&mut part.bytes, Edge::exact(&before), Edge::exact(&after));
    Ok(())
}

/// What the model hears of a failed read of `path`.
fn read_error(path: &str, error: ReadError) -> ToolError {
    match error {
        ReadError::Io(error) => io_error(path, &error),
        ReadError::Shrank => ToolError::new(
            ErrorCode::IoError,
            format!("{path} got shorter while it was read"),
            Some("read it again"),
        ),
        ReadError::NotUtf8 { offset } => not_utf8(path, offset),
        ReadError::NotText { offset } => ToolError::new(
            ErrorCode::BinaryContent,
            format!("{path} is not text (a NUL byte at offset {offset})"),
            Some("read it with \"encoding\": \"base64\" or \"hex\""),
        ),
        ReadError::PartTooLarge => part_too_large(path),
        ReadError::PastTheEnd { line, total } => ToolError::new(
            ErrorCode::InvalidArgs,
            format!("fs.read: line {line} is past the end of the file ({total} lines)"),
            Some("ask for a line within the file; includeMeta gives the line count"),
        ),
    }
}

fn io_error(path: &str, error: &std::io::Error) -> ToolError {
    ToolError::new(ErrorCode::IoError, format!("{path}: {error}"), None)
}

fn not_utf8(path: &str, offset: u64) -> ToolError {
    ToolError::new(
        ErrorCode::BinaryContent,
        format!("{path} is not UTF-8 text (invalid byte at offset {offset})"),
        Some("read it with \"encoding\": \"base64\" or \"hex\""),
    )
}

fn part_too_large(path: &str) -> ToolError {
    ToolError::new(
        ErrorCode::TooLarge,
        format!("{path}: the part asked for is more than fs.read returns ({MAX_READ_BYTES} bytes)"),
        Some(
            "ask for less: a smaller \"head\" or \"tail\", a narrower \"range\" or fewer \"lines\"",
        ),
    )
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
        let hint = if what == "lines" {
            "write it as \"20-60\" (lines 20 to 60) or \"20-\" (line 20 to the end)"
        } else {
            "write it as \"0-4096\" or \"4096-\""
        };
        ToolError::new(
            ErrorCode::InvalidArgs,
            format!("fs.read: {what} {text:?} is not START-END with START <= END"),
            Some(hint),
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

fn meta_of(summary: &ReadSummary, facts: &FileFacts) -> Value {
    json!({
        "size": summary.size,
        "lines": summary.lines,
        "modified": facts.modified.map(crate::protocol::time::format_rfc3339),
        "permissions": facts.permissions,
        "sha256": summary.sha256,
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
        if let Some(kept) = &output.kept {
            let scan = kept.facts();
            let lines = scan.newlines + u64::from(scan.bytes > 0 && !scan.ends_with_newline);
            return format!(
                "Read {} ({})",
                super::ls::human_size(scan.bytes),
                crate::tools::tool::plural(usize::try_from(lines).unwrap_or(usize::MAX), "line")
            );
        }
        // The body is the content (the data's copy is left out for a text-only door).
        let content = output
            .body
            .as_deref()
            .or_else(|| output.data.get("content").and_then(Value::as_str))
            .unwrap_or_default();
        // As `str::lines` counts them (a last line without `\n` counts too), with a vectorised
        // count of `\n` rather than a line splitter: a 10 MB read's summary is counted in a
        // fraction of a millisecond.
        let newlines = crate::sandbox::read::count::count_newlines(content.as_bytes());
        let lines = usize::try_from(newlines).unwrap_or(usize::MAX)
            + usize::from(!content.is_empty() && !content.ends_with('\n'));
        format!(
            "Read {} ({})",
            super::ls::human_size(content.len() as u64),
            crate::tools::tool::plural(lines, "line")
        )
    }

    fn run(&self, context: &ToolContext<'_>, args: &ReadArgs) -> Result<ToolOutput, ToolError> {
        run_shown(
            context.sandbox,
            args,
            &PLAN,
            &context.limits.secrets(),
            context.text_only.then_some(context.limits.output_cap),
        )
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
        run(
            &f.sandbox,
            &crate::tools::parse_args("fs.read", &args)?,
            &Secrets::default(),
        )
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
    fn a_text_only_door_gets_the_content_once_in_the_body() {
        let f = fixture(&[("a.txt", b"one\ntwo\n")]);
        let args: ReadArgs = crate::tools::parse_args(
            "fs.read",
            json!({"path": f.root.join("a.txt")}).as_object().unwrap(),
        )
        .unwrap();
        let secrets = Secrets::default();
        let shown = run_shown(&f.sandbox, &args, &PLAN, &secrets, Some(1 << 20)).unwrap();
        assert_eq!(shown.body.as_deref(), Some("one\ntwo\n"));
        assert_eq!(shown.data["content"], Value::Null);
        assert!(shown.kept.is_none(), "a small file is read into memory");
        assert_eq!(FsRead.summary(&shown), "Read 8 B (2 lines)");
        let structured = run_shown(&f.sandbox, &args, &PLAN, &secrets, None).unwrap();
        assert_eq!(structured.data["content"], "one\ntwo\n");
        assert_eq!(FsRead.summary(&structured), FsRead.summary(&shown));
    }

    #[test]
    fn a_large_whole_file_is_left_in_place_for_a_door_that_prints_only_the_block() {
        let line = "let x = `y`; // ```` four ticks, a secret sk-live-0123456789, ünïcode\n";
        let text = line.repeat(usize::try_from(KEPT_FROM_BYTES).unwrap() / line.len() + 1);
        let f = fixture(&[("big.rs", text.as_bytes())]);
        let parsed = |args: Value| -> ReadArgs {
            crate::tools::parse_args("fs.read", args.as_object().unwrap()).unwrap()
        };
        let whole = parsed(json!({"path": f.root.join("big.rs")}));
        let secrets = Secrets::from_values(["sk-live-0123456789".to_owned()]);
        let in_memory = run_shown(&f.sandbox, &whole, &PLAN, &secrets, None).unwrap();
        let kept = run_shown(&f.sandbox, &whole, &PLAN, &secrets, Some(16 << 20)).unwrap();
        let body = kept.kept.as_ref().expect("left in the file");
        assert_eq!(kept.body.as_deref(), Some(""));
        assert_eq!(kept.data["content"], Value::Null);
        assert_eq!(body.facts().longest_backtick_run, 4);
        assert_eq!(FsRead.summary(&kept), FsRead.summary(&in_memory));
        let mut written = String::new();
        body.write_out(5, |piece| {
            written.push_str(piece);
            Ok(())
        })
        .unwrap();
        // Masked as the in-memory read masks it, byte for byte.
        assert_eq!(Some(written.as_str()), in_memory.body.as_deref());
        assert!(!written.contains("sk-live"));
        // Past the cap, in part, with its metadata, or for a door that reads the data: in memory.
        let small_cap = run_shown(&f.sandbox, &whole, &PLAN, &secrets, Some(64 * 1024)).unwrap();
        assert!(small_cap.kept.is_none());
        for args in [
            json!({"path": f.root.join("big.rs"), "head": 10}),
            json!({"path": f.root.join("big.rs"), "includeMeta": true}),
            json!({"path": f.root.join("big.rs"), "encoding": "base64"}),
        ] {
            let output = run_shown(&f.sandbox, &parsed(args), &PLAN, &secrets, Some(16 << 20));
            assert!(output.unwrap().kept.is_none());
        }
    }

    #[test]
    fn a_large_file_that_is_not_utf8_fails_as_the_in_memory_read_does() {
        let mut bytes = vec![b'a'; usize::try_from(KEPT_FROM_BYTES).unwrap() + 10];
        bytes[crate::sandbox::read::KEPT_BLOCK_BYTES + 3] = 0xFF;
        let f = fixture(&[("bin.dat", &bytes)]);
        let args: ReadArgs = crate::tools::parse_args(
            "fs.read",
            json!({"path": f.root.join("bin.dat")}).as_object().unwrap(),
        )
        .unwrap();
        let secrets = Secrets::default();
        let kept = run_shown(&f.sandbox, &args, &PLAN, &secrets, Some(16 << 20)).unwrap_err();
        let in_memory = run_shown(&f.sandbox, &args, &PLAN, &secrets, None).unwrap_err();
        assert_eq!(kept.code, in_memory.code);
        assert_eq!(kept.message, in_memory.message);
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
    fn whole_reads_over_the_limit_are_too_large_but_parts_are_read() {
        let f = fixture(&[]);
        let big = std::fs::File::create(f.root.join("big.bin")).unwrap();
        big.set_len(MAX_READ_BYTES + 1).unwrap();
        let error = read(&f, json!({"path": "big.bin", "encoding": "hex"})).unwrap_err();
        assert_eq!(error.code, ErrorCode::TooLarge);
        let hint = error.hint.unwrap();
        assert!(
            hint.contains("\"head\"") && hint.contains("fs.search"),
            "{hint}"
        );
        assert_eq!(
            body(&f, json!({"path": "big.bin", "encoding": "hex", "head": 4})),
            "00000000"
        );
        let tail = read(&f, json!({"path": "big.bin", "encoding": "hex", "tail": 2})).unwrap();
        assert_eq!(tail.body.as_deref(), Some("0000"));
        let size = MAX_READ_BYTES + 1;
        assert_eq!(
            tail.fields,
            vec![(
                "range".to_owned(),
                format!("{}-{size} of {size} bytes", size - 2)
            )]
        );
        // A part may not be larger than a whole read could be.
        let error = read(
            &f,
            json!({"path": "big.bin", "encoding": "hex", "range": "0-"}),
        )
        .unwrap_err();
        assert_eq!(error.code, ErrorCode::TooLarge);
        assert!(
            error.message.contains("the part asked for"),
            "{}",
            error.message
        );
    }

    /// A plan that streams every partial read, in blocks of `block` bytes.
    fn tiny(block: usize) -> ReadPlan {
        ReadPlan {
            whole_up_to: 0,
            block,
            sniff: 5,
            max_part: 1 << 20,
        }
    }

    fn streamed(
        bytes: &[u8],
        selection: Selection,
        encoding: Encoding,
        plan: &ReadPlan,
    ) -> Result<(String, Shown), ToolError> {
        let mut cursor = std::io::Cursor::new(bytes.to_vec());
        let text = encoding == Encoding::Utf8;
        let part = read_part(&mut cursor, bytes.len() as u64, selection, text, plan)
            .map_err(|e| read_error("f", e))?;
        Ok((encode(part.bytes, encoding), part.shown))
    }

    fn selections(units: u64, lines: u64) -> Vec<Selection> {
        let mut all = Vec::new();
        for n in 1..=units + 2 {
            all.push(Selection::Head(n));
            all.push(Selection::Tail(n));
        }
        for start in 0..=units + 1 {
            all.push(Selection::Range(start, None));
            for end in start..=units + 1 {
                all.push(Selection::Range(start, Some(end)));
            }
        }
        for first in 1..=lines + 1 {
            all.push(Selection::Lines(first, None));
            for last in first..=lines + 1 {
                all.push(Selection::Lines(first, Some(last)));
            }
        }
        all
    }

    #[test]
    fn a_whole_read_is_the_file_and_spans_every_character() {
        for text in ["αβγ line\n😀", "", "x\ny"] {
            let (content, span, _) = select_whole(
                text.as_bytes().to_vec(),
                Selection::Whole,
                Encoding::Utf8,
                "f",
                false,
                &Secrets::default(),
            )
            .unwrap();
            let (part, expected) = select_text(text, Selection::Whole).unwrap();
            assert_eq!((content.as_str(), span), (part, expected));
        }
        let error = select_whole(
            b"ab\xffc".to_vec(),
            Selection::Whole,
            Encoding::Utf8,
            "f",
            false,
            &Secrets::default(),
        )
        .unwrap_err();
        assert_eq!(error.code, ErrorCode::BinaryContent);
        assert!(error.message.contains("offset 2"), "{}", error.message);
    }

    /// Streaming in any block size gives what a whole read gives, with the same positions and
    /// totals wherever the streamed read knows them.
    #[test]
    fn streamed_parts_match_whole_reads_across_block_boundaries() {
        let texts: [&str; 6] = [
            "αβγ line one\nline two\nline three\n",
            "a\r\nb€\r\n\r\nlast without newline 😀",
            "😀😀😀\n€€\n",
            "\n\n\n",
            "x",
            "",
        ];
        let none = Secrets::default();
        for text in texts {
            let chars = text.chars().count() as u64;
            let lines = text.lines().count() as u64 + 1;
            for encoding in [Encoding::Utf8, Encoding::Hex] {
                let units = if encoding == Encoding::Utf8 {
                    chars
                } else {
                    text.len() as u64
                };
                for selection in selections(units, lines) {
                    let whole = select_whole(
                        text.as_bytes().to_vec(),
                        selection,
                        encoding,
                        "f",
                        false,
                        &none,
                    );
                    let kept = select_whole(
                        text.as_bytes().to_vec(),
                        selection,
                        encoding,
                        "f",
                        true,
                        &none,
                    );
                    if let (Ok((content, span, none)), Ok((same, same_span, bytes))) =
                        (&whole, &kept)
                    {
                        assert_eq!((content, span), (same, same_span));
                        assert!(none.is_none());
                        assert_eq!(bytes.as_deref(), Some(text.as_bytes()));
                    }
                    for block in [1, 2, 3, 5, 7, 64] {
                        let got = streamed(text.as_bytes(), selection, encoding, &tiny(block));
                        let context = format!("{text:?} {selection:?} {encoding:?} block {block}");
                        match (&whole, got) {
                            (Ok((content, span, _)), Ok((got, shown))) => {
                                assert_eq!(&got, content, "{context}");
                                let expected_count = match selection {
                                    Selection::Lines(..) if span.total == 0 => 0,
                                    Selection::Lines(..) => span.end + 1 - span.start,
                                    _ => span.end - span.start,
                                };
                                assert_eq!(shown.count, expected_count, "{context}");
                                if shown.total.is_some() {
                                    assert_eq!(
                                        (shown.start, shown.end, shown.total),
                                        (Some(span.start), Some(span.end), Some(span.total)),
                                        "{context}"
                                    );
                                } else if let Some(start) = shown.start {
                                    assert_eq!(
                                        (Some(start), shown.end),
                                        (Some(span.start), Some(span.end)),
                                        "{context}"
                                    );
                                }
                                let (from, to, size) = shown.bytes.unwrap();
                                assert_eq!(size, text.len() as u64, "{context}");
                                if encoding == Encoding::Utf8 {
                                    assert_eq!(
                                        &text.as_bytes()[from as usize..to as usize],
                                        got.as_bytes(),
                                        "{context}"
                                    );
                                }
                            }
                            (Err(expected), Err(error)) => {
                                assert_eq!(error.code, expected.code, "{context}");
                                assert_eq!(error.message, expected.message, "{context}");
                            }
                            (whole, got) => panic!("{context}: whole {whole:?}, streamed {got:?}"),
                        }
                    }
                }
            }
        }
    }
    #[test]
    fn a_streamed_file_is_judged_by_its_start_and_the_bytes_read() {
        let plan = tiny(4);
        let utf8 = Encoding::Utf8;
        // A NUL byte in the first block: binary, whatever part is asked for.
        let error = streamed(b"ab\0cdefghij\n", Selection::Tail(2), utf8, &plan).unwrap_err();
        assert_eq!(error.code, ErrorCode::BinaryContent);
        assert!(
            error.message.contains("NUL byte at offset 2"),
            "{}",
            error.message
        );
        // Invalid UTF-8 after the part is not read, so a head is still text...
        let text = b"hello world\n\xff\xfe";
        assert_eq!(
            streamed(text, Selection::Head(5), utf8, &plan).unwrap().0,
            "hello"
        );
        assert_eq!(
            streamed(text, Selection::Lines(1, Some(1)), utf8, &plan)
                .unwrap()
                .0,
            "hello world\n"
        );
        // ...but a part that holds it, or a range that counts characters across it, is not.
        for selection in [
            Selection::Tail(2),
            Selection::Range(13, None),
            Selection::Lines(2, None),
        ] {
            let error = streamed(text, selection, utf8, &plan).unwrap_err();
            assert_eq!(error.code, ErrorCode::BinaryContent, "{selection:?}");
            assert!(
                error.message.contains("offset 12"),
                "{selection:?}: {}",
                error.message
            );
        }
        // A character cut off by the end of the file.
        let error = streamed(
            "abcdefgh€".as_bytes()[..10].as_ref(),
            Selection::Head(20),
            utf8,
            &plan,
        )
        .unwrap_err();
        assert!(error.message.contains("offset 8"), "{}", error.message);
        // Bytes are bytes.
        assert_eq!(
            streamed(b"ab\0cd", Selection::Tail(3), Encoding::Hex, &plan)
                .unwrap()
                .0,
            "006364"
        );
    }

    #[test]
    fn a_streamed_part_has_the_same_size_limit_as_a_whole_read() {
        let plan = ReadPlan {
            max_part: 8,
            ..tiny(3)
        };
        let text = "0123456789\n".repeat(5);
        for selection in [
            Selection::Head(9),
            Selection::Tail(9),
            Selection::Range(3, None),
            Selection::Lines(2, Some(3)),
        ] {
            for encoding in [Encoding::Utf8, Encoding::Base64] {
                let error = streamed(text.as_bytes(), selection, encoding, &plan).unwrap_err();
                assert_eq!(
                    error.code,
                    ErrorCode::TooLarge,
                    "{selection:?} {encoding:?}"
                );
            }
        }
        assert_eq!(
            streamed(text.as_bytes(), Selection::Tail(8), Encoding::Utf8, &plan)
                .unwrap()
                .0,
            "3456789\n"
        );
    }

    #[test]
    fn streamed_headers_say_what_was_not_counted() {
        let text = "αβγ line one\r\nline two\r\nline three\r\n";
        let f = fixture(&[("a.txt", text.as_bytes())]);
        let size = text.len();
        let streamed_read = |args: Value| {
            let mut args = args.as_object().unwrap().clone();
            args.insert("path".into(), json!(format!("{}/a.txt", f.root.display())));
            run_with(
                &f.sandbox,
                &crate::tools::parse_args("fs.read", &args).unwrap(),
                &tiny(4),
                &Secrets::default(),
            )
            .unwrap()
        };
        let head = streamed_read(json!({"head": 3}));
        assert_eq!(head.body.as_deref(), Some("αβγ"));
        assert_eq!(
            head.fields,
            vec![(
                "range".to_owned(),
                format!("0-3 of ? chars (file {size} bytes, read in part)")
            )]
        );
        assert_eq!(head.data["selection"]["total"], Value::Null);
        assert_eq!(
            head.data["selection"]["bytes"],
            json!({"start": 0, "end": 6, "fileSize": size})
        );
        let tail = streamed_read(json!({"tail": 7}));
        assert_eq!(tail.body.as_deref(), Some("three\r\n"));
        assert_eq!(
            tail.fields,
            vec![(
                "range".to_owned(),
                format!("last 7 chars: bytes {}-{size} of {size}", size - 7)
            )]
        );
        let lines = streamed_read(json!({"lines": "2-2"}));
        assert_eq!(lines.body.as_deref(), Some("line two\r\n"));
        assert_eq!(
            lines.fields,
            vec![(
                "lines".to_owned(),
                format!("2-2 of ? (file {size} bytes, read in part)")
            )]
        );
        // Read to the end, the total is known; includeMeta counts the lines of the whole file.
        let rest = streamed_read(json!({"lines": "2-"}));
        assert_eq!(
            rest.fields,
            vec![("lines".to_owned(), "2-3 of 3".to_owned())]
        );
        let with_meta = streamed_read(json!({"line": 2, "includeMeta": true}));
        assert_eq!(
            with_meta.fields[0],
            ("lines".to_owned(), "2-2 of 3".to_owned())
        );
        let whole_meta = read(&f, json!({"path": "a.txt", "includeMeta": true})).unwrap();
        assert_eq!(with_meta.data["meta"], whole_meta.data["meta"]);
        assert_eq!(whole_meta.data["meta"]["lines"], 3);
    }

    #[test]
    fn sandbox_refusals_keep_their_codes() {
        let f = fixture(&[("a.txt", TEXT)]);
        let mut args = serde_json::Map::new();
        args.insert("path".into(), Value::String("/etc/passwd".into()));
        assert_eq!(
            run(
                &f.sandbox,
                &crate::tools::parse_args("fs.read", &args).unwrap(),
                &Secrets::default()
            )
            .unwrap_err()
            .code,
            ErrorCode::OutsideRoots
        );
        let missing = read(&f, json!({"path": "missing.txt"})).unwrap_err();
        assert_eq!(missing.code, ErrorCode::NotFound);
    }

    /// The attack of issue 22: a key in a file read as base64 or hex, or in two ranges split
    /// anywhere, or through head, tail and lines. Every window masks what it shows of the key,
    /// so the windows pieced together give the masked file, never the key.
    #[test]
    fn no_window_in_any_encoding_shows_a_secret_or_a_piece_of_one() {
        let key = "sk-live-0123456789abcdef";
        let secrets = Secrets::from_values([key.to_owned()]);
        let text = format!("line one\nkey = {key}\nlast {key}");
        let masked = text.replace(key, &"*".repeat(key.len()));
        let f = fixture(&[("a.txt", text.as_bytes())]);
        let len = text.len();
        let decode = |encoding: &str, body: &str| -> String {
            let bytes = match encoding {
                "base64" => base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .unwrap(),
                "hex" => hex::decode(body).unwrap(),
                _ => body.as_bytes().to_vec(),
            };
            String::from_utf8(bytes).unwrap()
        };
        for plan in [PLAN, tiny(3)] {
            let read = |args: Value| -> String {
                let mut args = args.as_object().unwrap().clone();
                args.insert("path".into(), json!(format!("{}/a.txt", f.root.display())));
                let encoding = args["encoding"].as_str().unwrap().to_owned();
                let output = run_with(
                    &f.sandbox,
                    &crate::tools::parse_args("fs.read", &args).unwrap(),
                    &plan,
                    &secrets,
                )
                .unwrap();
                decode(&encoding, output.body.as_deref().unwrap())
            };
            for encoding in ["utf-8", "base64", "hex"] {
                let whole = read(json!({"encoding": encoding}));
                assert_eq!(whole, masked, "{encoding}");
                for split in 0..=len {
                    let first = read(json!({"encoding": encoding, "range": format!("0-{split}")}));
                    let second = read(json!({"encoding": encoding, "range": format!("{split}-")}));
                    assert_eq!(
                        format!("{first}{second}"),
                        masked,
                        "{encoding} split {split}"
                    );
                    let head = read(json!({"encoding": encoding, "head": split}));
                    assert_eq!(head, masked[..split], "{encoding} head {split}");
                    let tail = read(json!({"encoding": encoding, "tail": split}));
                    assert_eq!(tail, masked[len - split..], "{encoding} tail {split}");
                }
                for (line, expected) in masked.split_inclusive('\n').enumerate() {
                    let got = read(json!({"encoding": encoding, "line": line + 1}));
                    assert_eq!(got, expected, "{encoding} line {}", line + 1);
                }
            }
        }
    }
}
