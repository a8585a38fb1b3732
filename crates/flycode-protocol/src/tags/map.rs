//! A tool tag → the registry call it stands for (PROTOCOL.md §15 (The tag dialect: mapping)):
//! `<bash_call>` is `shell.exec`, each builtin a tool of the registry, `<create_agent>` is
//! `agent.task`. The calls are read against the tools' own schemas, so their errors carry the
//! same codes and hints as a `flycode-call` block's.

use serde_json::{Map, Value, json};

use super::super::args::validate_args;
use super::super::call::Call;
use super::super::error_code::ErrorCode;
use super::super::tool_name::{ToolName, ToolSet};
use super::builtin::{BuiltinBody, read_builtin};
use super::read::{Tag, TagKind};
use super::{BUILTIN_NAMES, TagError};

/// `<bash_call>`'s default deadline, in seconds (seed 000).
pub const DEFAULT_BASH_TIMEOUT_SECS: u64 = 10;
/// `read_file`'s and `get_job_log`'s default page, in lines.
pub const DEFAULT_MAX_LINES: u64 = 200;
/// The largest page `read_file` returns; a larger `max_lines` is cut to it, with a note.
pub const MAX_LINES_CAP: u64 = 2000;

/// What a tool tag asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum TagAction {
    /// A registry call, ready to run.
    Call(Call),
    /// `read_file`: the `fs.read` call and the page it asked for.
    ReadFile {
        /// The call (`fs.read` with `lines` and `includeMeta`).
        call: Call,
        /// The first line shown.
        start_line: u64,
        /// `max_lines` as asked, when it was above [`MAX_LINES_CAP`].
        capped_from: Option<u64>,
    },
    /// `smart_edit` in Create, Append or Prepend mode: an `fs.write` once the file's byte-order
    /// mark and line ends are known ([`write_call`]).
    Write {
        /// The file, absolute when a root was known.
        path: String,
        /// Which mode.
        mode: SmartWriteMode,
        /// `new_text`, as written.
        text: String,
    },
}

/// `smart_edit`'s modes that write rather than replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmartWriteMode {
    /// The whole file (a new one, or an existing one replaced).
    Create,
    /// Added at the end.
    Append,
    /// Added at the start (after the byte-order mark).
    Prepend,
}

/// One tool tag, read.
#[derive(Clone, Debug, PartialEq)]
pub struct TagCall {
    /// Which tag.
    pub tag: TagKind,
    /// The builtin's name as written (empty for other tags).
    pub builtin: String,
    /// What it asks for, or why it cannot be read.
    pub action: Result<TagAction, TagError>,
}

/// Reads one tool tag (not `<return>`) as the call `id` would make. `base` is the first allowed
/// root: relative builtin paths are taken inside it, as `<bash_call>` runs there.
pub fn map_tag(tag: &Tag, id: &str, base: Option<&str>) -> TagCall {
    let mut builtin = String::new();
    let action = match tag.attribute_error.clone() {
        Some(message) => Err(TagError::new(
            ErrorCode::InvalidArgs,
            message,
            "Write attributes as key=value, e.g. <bash_call timeout=30>.".into(),
        )),
        None => match tag.kind {
            TagKind::BashCall => bash_call(tag, id),
            TagKind::CreateAgent => create_agent(tag, id),
            TagKind::Return => Err(TagError::new(
                ErrorCode::InvalidArgs,
                "<return> is not a tool call".into(),
                "Send <return> alone to finish.".into(),
            )),
            TagKind::Builtin => read_builtin(&tag.body).and_then(|body| {
                builtin.clone_from(&body.name);
                builtin_call(&body, id, base)
            }),
        },
    };
    TagCall {
        tag: tag.kind,
        builtin,
        action,
    }
}

fn bash_call(tag: &Tag, id: &str) -> Result<TagAction, TagError> {
    let mut background = false;
    let mut timeout = None;
    for (key, value) in &tag.attributes {
        match key.as_str() {
            "background" => {
                background = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad_value("background", value, "true or false")),
                }
            }
            "timeout" => timeout = Some(number("timeout", value, 1, 600)?),
            _ => return Err(unknown_key("<bash_call>", key, &["background", "timeout"])),
        }
    }
    let command = tag.body.trim();
    let mut args = Map::new();
    args.insert("command".into(), json!(command));
    match (timeout, background) {
        (Some(seconds), _) => {
            args.insert("timeoutMs".into(), json!(seconds * 1000));
        }
        (None, false) => {
            args.insert("timeoutMs".into(), json!(DEFAULT_BASH_TIMEOUT_SECS * 1000));
        }
        (None, true) => {}
    }
    if background {
        args.insert("background".into(), json!(true));
    }
    registry_call(id, "shell.exec", args, None).map(TagAction::Call)
}

fn create_agent(tag: &Tag, id: &str) -> Result<TagAction, TagError> {
    let mut args = Map::new();
    for (key, value) in &tag.attributes {
        match key.as_str() {
            "name" => {
                args.insert("name".into(), json!(value));
            }
            _ => return Err(unknown_key("<create_agent>", key, &["name"])),
        }
    }
    let task = tag.body.trim();
    args.insert("description".into(), json!(title_of(task)));
    args.insert("prompt".into(), json!(task));
    registry_call(id, "agent.task", args, None).map(TagAction::Call)
}

/// A task's title for `agent.task`: its first line, 3 to 80 characters.
fn title_of(task: &str) -> String {
    let first = task.lines().map(str::trim).find(|l| !l.is_empty());
    let first = first.unwrap_or_default();
    if first.chars().count() < 3 {
        return "sub-agent task".into();
    }
    if first.chars().count() <= 80 {
        return first.to_owned();
    }
    let cut: String = first.chars().take(77).collect();
    format!("{cut}...")
}

fn builtin_call(body: &BuiltinBody, id: &str, base: Option<&str>) -> Result<TagAction, TagError> {
    let keys: &[&str] = match body.name.as_str() {
        "read_file" => &["path", "start_line", "max_lines"],
        "get_job_log" => &["job_id", "start_line", "max_lines", "wait_ms"],
        "smart_edit" => &["path", "mode", "old_text", "new_text"],
        "memory_query" => &[
            "query",
            "limit",
            "window",
            "candidate",
            "batch",
            "topn",
            "context_tail",
        ],
        "hint" => &["action", "name"],
        "get_resource" => &["path", "encoding"],
        other => return Err(unknown_builtin(other)),
    };
    if let Some((key, _)) = body
        .fields
        .iter()
        .find(|(k, _)| !keys.contains(&k.as_str()))
    {
        return Err(unknown_key(
            &format!("the {} builtin", body.name),
            key,
            keys,
        ));
    }
    match body.name.as_str() {
        "read_file" => read_file(body, id, base),
        "get_job_log" => get_job_log(body, id),
        "smart_edit" => smart_edit(body, id, base),
        "memory_query" => memory_query(body, id),
        "hint" => hint(body, id),
        _ => get_resource(body, id),
    }
}

fn read_file(body: &BuiltinBody, id: &str, base: Option<&str>) -> Result<TagAction, TagError> {
    let path = in_root(required(body, "path")?, base);
    let start_line = optional_number(body, "start_line", 1, 1)?;
    let asked = optional_number(body, "max_lines", 1, DEFAULT_MAX_LINES)?;
    let max_lines = asked.min(MAX_LINES_CAP);
    let last = start_line.saturating_add(max_lines - 1);
    let mut args = Map::new();
    args.insert("path".into(), json!(path));
    args.insert("lines".into(), json!(format!("{start_line}-{last}")));
    args.insert("includeMeta".into(), json!(true));
    let call = registry_call(id, "fs.read", args, base)?;
    Ok(TagAction::ReadFile {
        call,
        start_line,
        capped_from: (asked > MAX_LINES_CAP).then_some(asked),
    })
}

fn get_job_log(body: &BuiltinBody, id: &str) -> Result<TagAction, TagError> {
    let mut args = Map::new();
    args.insert("jobId".into(), json!(required(body, "job_id")?));
    args.insert(
        "startLine".into(),
        json!(optional_number(body, "start_line", 1, 1)?),
    );
    args.insert(
        "maxLines".into(),
        json!(optional_number(body, "max_lines", 1, DEFAULT_MAX_LINES)?),
    );
    // flycode's addition to seed 000's get_job_log: wait up to this long for a line at or past
    // start_line, or the job's end (job.log's waitMs), so a model need not poll.
    if let Some(wait) = body.get("wait_ms") {
        args.insert("waitMs".into(), json!(number("wait_ms", wait, 0, 60_000)?));
    }
    registry_call(id, "job.log", args, None).map(TagAction::Call)
}

fn smart_edit(body: &BuiltinBody, id: &str, base: Option<&str>) -> Result<TagAction, TagError> {
    let path = in_root(required(body, "path")?, base);
    let mode = body.get("mode").unwrap_or("Patch");
    let mode = match mode.to_ascii_lowercase().as_str() {
        "patch" => None,
        "create" => Some(SmartWriteMode::Create),
        "append" => Some(SmartWriteMode::Append),
        "prepend" => Some(SmartWriteMode::Prepend),
        _ => return Err(bad_value("mode", mode, "Patch, Create, Append or Prepend")),
    };
    let new_text = required(body, "new_text")?;
    let Some(mode) = mode else {
        let old_text = required(body, "old_text")?;
        let mut args = Map::new();
        args.insert("path".into(), json!(path));
        args.insert(
            "edits".into(),
            json!([{"oldText": old_text, "newText": new_text}]),
        );
        return registry_call(id, "fs.edit", args, base).map(TagAction::Call);
    };
    if body.get("old_text").is_some() {
        return Err(TagError::new(
            ErrorCode::InvalidArgs,
            format!("smart_edit in mode {mode:?} takes no old_text"),
            "Give old_text only with mode: Patch; Create, Append and Prepend take new_text alone."
                .into(),
        ));
    }
    // The path is checked the way fs.write checks it, before the file is looked at.
    let mut args = Map::new();
    args.insert("path".into(), json!(path));
    args.insert("mode".into(), json!("append"));
    args.insert("content".into(), json!(""));
    registry_call(id, "fs.write", args, base)?;
    Ok(TagAction::Write {
        path,
        mode,
        text: new_text.to_owned(),
    })
}

/// What a writing `smart_edit` needs to know of the file it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingText {
    /// The file's text, its byte-order mark taken off.
    pub text: String,
    /// Whether it starts with a byte-order mark.
    pub bom: bool,
    /// The sha256 of its bytes, so that a change in between is refused (`sha256_mismatch`).
    pub sha256: String,
}

/// The `fs.write` call of a writing `smart_edit`: the new text in the file's line ends, its
/// byte-order mark kept (PROTOCOL.md §15 (The tag dialect: smart_edit)); the text is whole
/// lines, so it ends with a line end (one is added when the literal block had none), and an
/// appended text starts on a line of its own. `existing` is `None` for a file that does not
/// exist yet.
pub fn write_call(
    id: &str,
    path: &str,
    mode: SmartWriteMode,
    text: &str,
    existing: Option<&ExistingText>,
) -> Result<Call, TagError> {
    let mut args = Map::new();
    args.insert("path".into(), json!(path));
    // The text is whole lines: a literal block leaves out the line end before `>>>`.
    let text = if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    };
    let Some(existing) = existing else {
        args.insert("mode".into(), json!("overwrite"));
        args.insert("content".into(), json!(text));
        return registry_call(id, "fs.write", args, None);
    };
    let text = in_line_ends_of(&existing.text, &text);
    let bom = if existing.bom { "\u{feff}" } else { "" };
    let (mode_name, content) = match mode {
        // A last line without its line end gets one first, in the file's style.
        SmartWriteMode::Append if !existing.text.is_empty() && !existing.text.ends_with('\n') => (
            "append",
            format!("{}{text}", in_line_ends_of(&existing.text, "\n")),
        ),
        SmartWriteMode::Append => ("append", text),
        SmartWriteMode::Create => ("overwrite", format!("{bom}{text}")),
        SmartWriteMode::Prepend => ("overwrite", format!("{bom}{text}{}", existing.text)),
    };
    args.insert("mode".into(), json!(mode_name));
    args.insert("content".into(), json!(content));
    args.insert("expectedSha256".into(), json!(existing.sha256));
    registry_call(id, "fs.write", args, None)
}

/// `text` with the line ends of `file`: CRLF for a file whose every line ends so, LF for one
/// with LF only, as written otherwise (no line break, or both kinds).
pub fn in_line_ends_of(file: &str, text: &str) -> String {
    let breaks = file.matches('\n').count();
    let crlf = file.matches("\r\n").count();
    let lf_only = text.replace("\r\n", "\n");
    if breaks == 0 || (crlf != 0 && crlf != breaks) {
        text.to_owned()
    } else if crlf == breaks {
        lf_only.replace('\n', "\r\n")
    } else {
        lf_only
    }
}

fn memory_query(body: &BuiltinBody, id: &str) -> Result<TagAction, TagError> {
    let mut args = Map::new();
    args.insert("query".into(), json!(required(body, "query")?));
    for (key, name) in [
        ("limit", "limit"),
        ("window", "window"),
        ("candidate", "candidate"),
        ("batch", "batch"),
        ("topn", "topn"),
        ("context_tail", "contextTail"),
    ] {
        if let Some(value) = body.get(key) {
            args.insert(name.into(), json!(number(key, value, 0, u64::MAX)?));
        }
    }
    registry_call(id, "memory.query", args, None).map(TagAction::Call)
}

fn hint(body: &BuiltinBody, id: &str) -> Result<TagAction, TagError> {
    let mut args = Map::new();
    let tool = match required(body, "action")? {
        "load" => {
            args.insert("name".into(), json!(required(body, "name")?));
            "hint.load"
        }
        "unload" => {
            if let Some(name) = body.get("name") {
                args.insert("name".into(), json!(name));
            }
            "hint.unload"
        }
        other => return Err(bad_value("action", other, "load or unload")),
    };
    registry_call(id, tool, args, None).map(TagAction::Call)
}

fn get_resource(body: &BuiltinBody, id: &str) -> Result<TagAction, TagError> {
    let mut args = Map::new();
    args.insert("path".into(), json!(required(body, "path")?));
    if let Some(encoding) = body.get("encoding") {
        args.insert("encoding".into(), json!(encoding));
    }
    registry_call(id, "hint.resource", args, None).map(TagAction::Call)
}

/// A relative path taken inside `base` (the first root); an absolute one as it is.
fn in_root(path: &str, base: Option<&str>) -> String {
    let is_absolute = std::path::Path::new(path).is_absolute()
        || path.starts_with('/')
        || path.starts_with('\\')
        || path.as_bytes().get(1) == Some(&b':');
    match base {
        Some(base) if !is_absolute => {
            let relative = path.strip_prefix("./").unwrap_or(path);
            format!("{}/{relative}", base.trim_end_matches('/'))
        }
        _ => path.to_owned(),
    }
}

/// The call of the registry tool `name`, its arguments read against its schema.
fn registry_call(
    id: &str,
    name: &str,
    args: Map<String, Value>,
    base: Option<&str>,
) -> Result<Call, TagError> {
    let tool = ToolName::from_name_in(name, ToolSet::All).ok_or_else(|| {
        TagError::new(
            ErrorCode::UnknownTool,
            format!("this flycode has no {name} tool, which the tag needs"),
            "Use <bash_call> or another builtin instead.".into(),
        )
    })?;
    let args = validate_args(tool, Value::Object(args)).map_err(|error| {
        TagError::new(error.code(), error.to_string(), error.hint_with_root(base))
    })?;
    Ok(Call {
        id: Some(id.to_owned()),
        tool,
        args,
    })
}

fn required<'a>(body: &'a BuiltinBody, key: &str) -> Result<&'a str, TagError> {
    body.get(key).ok_or_else(|| {
        TagError::new(
            ErrorCode::InvalidArgs,
            format!("the {} builtin needs {key:?}", body.name),
            format!("Add a line `{key}: …` (text of several lines between <<< and >>> lines)."),
        )
    })
}

fn optional_number(body: &BuiltinBody, key: &str, min: u64, default: u64) -> Result<u64, TagError> {
    body.get(key)
        .map_or(Ok(default), |value| number(key, value, min, u64::MAX))
}

fn number(key: &str, value: &str, min: u64, max: u64) -> Result<u64, TagError> {
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ if max == u64::MAX => Err(bad_value(
            key,
            value,
            &format!("a whole number {min} or more"),
        )),
        _ => Err(bad_value(
            key,
            value,
            &format!("a whole number from {min} to {max}"),
        )),
    }
}

fn bad_value(key: &str, value: &str, expected: &str) -> TagError {
    let shown: String = value.chars().take(60).collect();
    TagError::new(
        ErrorCode::InvalidArgs,
        format!("{key} is {shown:?}; it must be {expected}"),
        format!("Send {key} as {expected}."),
    )
}

fn unknown_key(owner: &str, key: &str, known: &[&str]) -> TagError {
    let shown: String = key.chars().take(60).collect();
    TagError::new(
        ErrorCode::InvalidArgs,
        format!("{owner} has no {shown:?}"),
        format!("It takes: {}.", known.join(", ")),
    )
}

fn unknown_builtin(name: &str) -> TagError {
    let shown: String = name.chars().take(60).collect();
    TagError::new(
        ErrorCode::UnknownTool,
        format!("{shown:?} is not a builtin tool"),
        format!(
            "The builtins are: {}. Run programs with <bash_call>.",
            BUILTIN_NAMES.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tags::read::{TagVerdict, read_tags};

    fn mapped(reply: &str) -> TagCall {
        let TagVerdict::Tags(tags) = read_tags(reply) else {
            panic!("no tags")
        };
        map_tag(&tags[0], "tag-1", Some("/srv/app"))
    }

    fn call(reply: &str) -> Call {
        match mapped(reply).action {
            Ok(TagAction::Call(call)) | Ok(TagAction::ReadFile { call, .. }) => call,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bash_call_is_shell_exec_with_ten_seconds() {
        let c = call("<bash_call> ls -la </bash_call>");
        assert_eq!(c.tool, ToolName::ShellExec);
        assert_eq!(c.args["command"], "ls -la");
        assert_eq!(c.args["timeoutMs"], 10000);
        assert_eq!(
            call("<bash_call timeout=30>x</bash_call>").args["timeoutMs"],
            30000
        );
        let bad = mapped("<bash_call timeout=0>x</bash_call>")
            .action
            .unwrap_err();
        assert_eq!(bad.code, ErrorCode::InvalidArgs);
    }

    #[test]
    fn read_file_pages_by_lines_inside_the_root() {
        let TagAction::ReadFile {
            call, capped_from, ..
        } = mapped(
            "<builtin>\nread_file\npath: src/a.rs\nstart_line: 201\nmax_lines: 9000\n</builtin>",
        )
        .action
        .unwrap()
        else {
            panic!()
        };
        assert_eq!(call.args["path"], "/srv/app/src/a.rs");
        assert_eq!(call.args["lines"], "201-2200");
        assert_eq!(capped_from, Some(9000));
    }

    #[test]
    fn get_job_log_is_job_log_and_may_wait() {
        let c = call("<builtin>\nget_job_log\njob_id: job-2\nstart_line: 5\n</builtin>");
        assert_eq!(c.tool, ToolName::JobLog);
        assert_eq!(c.args["jobId"], "job-2");
        assert_eq!(c.args["startLine"], 5);
        assert!(c.args.get("waitMs").is_none());
        let waiting = call("<builtin>\nget_job_log\njob_id: job-2\nwait_ms: 5000\n</builtin>");
        assert_eq!(waiting.args["waitMs"], 5000);
        let bad = mapped("<builtin>\nget_job_log\njob_id: job-2\nwait_ms: 90000\n</builtin>")
            .action
            .unwrap_err();
        assert_eq!(bad.code, ErrorCode::InvalidArgs);
    }

    #[test]
    fn smart_edit_patch_is_fs_edit_and_unknown_builtins_list_the_known() {
        let c = call(
            "<builtin>\nsmart_edit\npath: /srv/app/a\nold_text:\n<<<\na\n>>>\nnew_text:\n<<<\nb\n>>>\n</builtin>",
        );
        assert_eq!(c.tool, ToolName::FsEdit);
        assert_eq!(c.args["edits"][0]["oldText"], "a");
        let unknown = mapped("<builtin>\nrun_python\n</builtin>")
            .action
            .unwrap_err();
        assert_eq!(unknown.code, ErrorCode::UnknownTool);
        assert!(unknown.hint.contains("read_file, get_job_log, smart_edit"));
    }

    #[test]
    fn writes_keep_the_files_bom_and_line_ends() {
        let existing = ExistingText {
            text: "a\r\nb\r\n".into(),
            bom: true,
            sha256: "0".repeat(64),
        };
        let prepend = write_call(
            "t",
            "/a",
            SmartWriteMode::Prepend,
            "x\ny\n",
            Some(&existing),
        )
        .unwrap();
        assert_eq!(prepend.args["content"], "\u{feff}x\r\ny\r\na\r\nb\r\n");
        let append = write_call("t", "/a", SmartWriteMode::Append, "z", Some(&existing)).unwrap();
        assert_eq!(append.args["content"], "z\r\n");
        assert_eq!(append.args["mode"], "append");
        let create = write_call("t", "/a", SmartWriteMode::Create, "n", Some(&existing)).unwrap();
        assert_eq!(create.args["content"], "\u{feff}n\r\n");
        assert_eq!(in_line_ends_of("a\nb\n", "x\r\ny"), "x\ny");
    }
}
