//! Slash commands (PROTOCOL.md §5 (Slash commands)): `/fs.read /abs/path --head 200` for people to type, and the
//! one-line `[command]` form of any call.
//!
//! Grammar: `/TOOL WORD...`, words split as a POSIX shell splits them. Positional words fill the
//! tool's positional arguments in schema order (`x-flycode-positional`). A final array-typed
//! positional that follows another one (process.run's `args`) takes every remaining word, flags
//! included; an array that is the only positional (fs.readMany's `paths`) takes every word that
//! is not a flag, and flags may come before, between and after its words. Elsewhere,
//! `--name value` or `--name=value` sets an argument, `--name` alone sets a boolean to true,
//! `--name=false` to false; an array flag repeats (`--extensions ts --extensions rs`), and
//! `--env NAME=VALUE` repeats. `--` ends the flags.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::call_types::{Call, CallError};
use super::display::{
    HEADER_ARG_CHARS, HEADER_VALUE_CHARS, cut_point, elision_note, escape_for_display,
};
use super::schema::{ArgKind, ArgSpec, ToolSchema, tool_schema};
use super::tool_name::{ToolName, ToolSet};

/// Parses a slash command of the seed set into a validated call with no id.
pub fn parse_slash(line: &str) -> Result<Call, CallError> {
    parse_slash_in(line, ToolSet::Seed)
}

/// Parses a slash command naming a tool of `set` into a validated call with no id.
pub fn parse_slash_in(line: &str, set: ToolSet) -> Result<Call, CallError> {
    let line = line.trim();
    let Some(rest) = line.strip_prefix('/') else {
        return Err(CallError::UnknownTool {
            shown: format!("{:?}", first_word(line)),
            nearest: ToolName::nearest(first_word(line), set),
            set,
            elsewhere: None,
        });
    };
    let (name, remainder) = match rest.find(char::is_whitespace) {
        Some(end) => (&rest[..end], &rest[end..]),
        None => (rest, ""),
    };
    let tool =
        ToolName::from_name_in(name, set).ok_or_else(|| CallError::unknown_tool(name, set))?;
    let invalid = |message: String| CallError::InvalidArgs { tool, message };
    let schema = tool_schema(tool);
    let Some(positional) = &schema.positional else {
        return Err(invalid(
            "has no slash form; send it as a JSON flycode-call block".into(),
        ));
    };
    let words = shlex::split(remainder)
        .ok_or_else(|| invalid("unbalanced quotes in the slash command".into()))?;
    let args =
        assign_words(schema, positional, words).map_err(|error| invalid(error.to_string()))?;
    let args = super::args::validate_args(tool, Value::Object(args))?;
    Ok(Call {
        id: None,
        tool,
        args,
    })
}

/// Why the words of a slash command do not make the tool's arguments: each is `invalid_args`
/// (PROTOCOL.md §5 (Slash commands)), its message naming the flag or word to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum WordError {
    /// A flag the tool does not have.
    #[error("unknown flag --{name} (flags: {flags})")]
    UnknownFlag { name: String, flags: String },
    /// A flag at the end, without its value.
    #[error("flag --{0} needs a value")]
    MissingValue(String),
    /// More words than positional arguments.
    #[error(
        "unexpected extra word {word:?} (positional arguments: {positional}); quote a value that contains spaces"
    )]
    ExtraWord { word: String, positional: String },
    /// Not a whole number.
    #[error("--{name} needs an integer, got {word:?}")]
    NotInteger { name: String, word: String },
    /// Neither `true` nor `false`.
    #[error("--{name} is true or false, got {word:?}")]
    NotBoolean { name: String, word: String },
    /// A map entry without `=`.
    #[error("--{name} takes NAME=VALUE, got {word:?}")]
    NotPair { name: String, word: String },
    /// A map key given twice.
    #[error("--{name} sets {key} twice")]
    KeyTwice { name: String, key: String },
    /// A list of objects, which words cannot spell.
    #[error("--{0} cannot be given in a slash command")]
    ObjectList(String),
    /// One argument given twice.
    #[error("{0} is given twice")]
    GivenTwice(String),
}

fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or_default()
}

fn assign_words(
    schema: &ToolSchema,
    positional: &[String],
    words: Vec<String>,
) -> Result<Map<String, Value>, WordError> {
    let mut args = Map::new();
    let mut next_positional: usize = 0;
    let mut flags_ended = false;
    // A final array positional that follows another one (process.run's args, after the program)
    // takes every word after the ones before it, flags included: they are the program's. An array
    // that is the only positional (fs.readMany's paths) gathers words while flags are still read.
    let variadic_at = positional
        .last()
        .and_then(|name| schema.arg(name))
        .filter(|arg| arg.kind == ArgKind::StringList && positional.len() > 1)
        .map(|_| positional.len() - 1);
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let variadic_started = variadic_at.is_some_and(|at| next_positional >= at);
        if !flags_ended && !variadic_started && word == "--" {
            flags_ended = true;
            continue;
        }
        if !flags_ended && !variadic_started && word.starts_with("--") && word.len() > 2 {
            let (name, inline) = match word[2..].split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (word[2..].to_owned(), None),
            };
            let arg = schema.arg(&name).ok_or_else(|| WordError::UnknownFlag {
                name: name.clone(),
                flags: schema
                    .arg_names()
                    .map(|n| format!("--{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
            let value = match (arg.kind, inline) {
                (ArgKind::Boolean, None) => "true".to_owned(),
                (_, Some(value)) => value,
                (_, None) => words
                    .next()
                    .ok_or_else(|| WordError::MissingValue(name.clone()))?,
            };
            set_argument(&mut args, arg, value)?;
            continue;
        }
        let arg = match positional.get(next_positional) {
            Some(name) => schema.arg(name),
            None => positional
                .last()
                .and_then(|name| schema.arg(name))
                .filter(|a| a.kind == ArgKind::StringList),
        };
        let Some(arg) = arg else {
            return Err(WordError::ExtraWord {
                word: escape_for_display(&word).into_owned(),
                positional: positional.join(" "),
            });
        };
        if arg.kind != ArgKind::StringList || !args.contains_key(&arg.name) {
            next_positional += 1;
        }
        set_argument(&mut args, arg, word)?;
    }
    Ok(args)
}

/// Converts one word to the argument's JSON type and stores it (arrays and maps accumulate).
fn set_argument(
    args: &mut Map<String, Value>,
    arg: &ArgSpec,
    word: String,
) -> Result<(), WordError> {
    let name = &arg.name;
    let value = match arg.kind {
        ArgKind::String => Value::String(word),
        ArgKind::Integer => {
            word.parse::<i64>()
                .map(Value::from)
                .map_err(|_| WordError::NotInteger {
                    name: name.clone(),
                    word: word.clone(),
                })?
        }
        ArgKind::Boolean => match word.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => {
                return Err(WordError::NotBoolean {
                    name: name.clone(),
                    word,
                });
            }
        },
        ArgKind::StringList => {
            let list = args
                .entry(name.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = list {
                items.push(Value::String(word));
            }
            return Ok(());
        }
        ArgKind::StringMap => {
            let (key, value) = word.split_once('=').ok_or_else(|| WordError::NotPair {
                name: name.clone(),
                word: word.clone(),
            })?;
            let map = args
                .entry(name.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map
                && map
                    .insert(key.to_owned(), Value::String(value.to_owned()))
                    .is_some()
            {
                return Err(WordError::KeyTwice {
                    name: name.clone(),
                    key: key.to_owned(),
                });
            }
            return Ok(());
        }
        ArgKind::ObjectList => return Err(WordError::ObjectList(name.clone())),
    };
    if args.insert(name.clone(), value).is_some() {
        return Err(WordError::GivenTwice(name.clone()));
    }
    Ok(())
}

/// The one-line slash form of a call, as shown in `[command]`: positionals first, then flags in
/// schema order; content arguments as `<N bytes>`; control characters escaped. When the last
/// positional is a list that takes every remaining word (process.run's `args`), flags come
/// first, so the line reads back to the same call whether the list is given or not.
///
/// Each argument shows at most [`HEADER_ARG_CHARS`] characters (PROTOCOL.md §4 (The result block: header budget)): a longer string
/// ends in `…(N chars)`, a longer list in `…(N items)` (N the full size), so a 1 MB path costs a
/// few hundred bytes of header, not a megabyte.
pub fn render_command(tool: ToolName, args: &Map<String, Value>) -> String {
    let schema = tool_schema(tool);
    let mut positional_words = Vec::new();
    let mut shown = Vec::new();
    // A word read before the variadic list has begun could be taken for a flag.
    let mut looks_like_flag = false;
    let positional = schema.positional.as_deref().unwrap_or_default();
    // The list that swallows every word after the positional before it (process.run's args);
    // a list that is the only positional (fs.readMany's paths) leaves flags to be flags.
    let ends_in_list = positional.len() > 1
        && positional
            .last()
            .and_then(|name| schema.arg(name))
            .is_some_and(|arg| arg.kind == ArgKind::StringList);
    for name in positional {
        let Some(value) = args.get(name) else { break };
        match value {
            Value::Array(items) => {
                if !ends_in_list {
                    looks_like_flag |= items
                        .iter()
                        .any(|item| item.as_str().is_some_and(|s| s.starts_with("--")));
                }
                let items: Vec<Cow<'_, str>> = items.iter().map(value_text).collect();
                positional_words.extend(list_words(&items, "items", quote_short));
            }
            other => {
                looks_like_flag |= other.as_str().is_some_and(|s| s.starts_with("--"));
                positional_words.push(quote_short(&value_text(other)));
            }
        }
        shown.push(name.as_str());
    }
    let mut flag_words = Vec::new();
    for arg in &schema.args {
        if !shown.contains(&arg.name.as_str())
            && let Some(value) = args.get(&arg.name)
        {
            push_flag(&mut flag_words, arg, value);
        }
    }
    let mut words = vec![format!("/{tool}")];
    if ends_in_list || looks_like_flag {
        // Flags first: after a variadic list has begun every word belongs to it.
        words.extend(flag_words);
        if looks_like_flag {
            words.push("--".into());
        }
        words.extend(positional_words);
    } else {
        words.extend(positional_words);
        words.extend(flag_words);
    }
    escape_for_display(&words.join(" ")).into_owned()
}

/// The slash-like form of a call to a tool that does not exist, for the `[command]` of its error:
/// `--name value` pairs in the order written, each shortened like [`render_command`]'s, and no
/// more of them than fit in [`HEADER_VALUE_CHARS`].
pub fn render_unknown_command(tool: &str, args: Option<&Map<String, Value>>) -> String {
    let mut words = vec![format!("/{}", quote_short(tool))];
    let mut length = words[0].len();
    let total = args.map_or(0, Map::len);
    for (name, value) in args.into_iter().flatten() {
        if length > HEADER_VALUE_CHARS {
            words.push(elision_note(total, "arguments"));
            break;
        }
        let flag = format!("--{}", quote_short(name));
        let text = quote_short(&value_text(value));
        length += flag.len() + text.len() + 2;
        words.push(flag);
        words.push(text);
    }
    escape_for_display(&words.join(" ")).into_owned()
}

fn push_flag(words: &mut Vec<String>, arg: &ArgSpec, value: &Value) {
    let flag = format!("--{}", arg.name);
    match (arg.kind, value) {
        (_, Value::String(text)) if arg.is_content => {
            words.push(flag);
            words.push(format!("<{} bytes>", text.len()));
        }
        (ArgKind::Boolean, Value::Bool(true)) => words.push(flag),
        (ArgKind::Boolean, Value::Bool(false)) => words.push(format!("{flag}=false")),
        // fs.edit's edits: how many and how much text, never the text itself.
        (ArgKind::ObjectList, Value::Array(items))
            if arg.schema["items"]["properties"].get("oldText").is_some() =>
        {
            let bytes: usize = items
                .iter()
                .flat_map(|item| [&item["oldText"], &item["newText"]])
                .filter_map(Value::as_str)
                .map(str::len)
                .sum();
            let noun = if items.len() == 1 { "edit" } else { "edits" };
            words.push(flag);
            words.push(format!("<{} {noun}, {bytes} bytes>", items.len()));
        }
        // Any other list of objects (agent.todo's items): how many, not the whole list.
        (ArgKind::ObjectList, Value::Array(items))
            if arg.schema["items"]["properties"].get("path").is_none() =>
        {
            let noun = if items.len() == 1 { "item" } else { "items" };
            words.push(flag);
            words.push(format!("<{} {noun}>", items.len()));
        }
        (ArgKind::ObjectList, Value::Array(items)) => {
            let bytes: usize = items
                .iter()
                .filter_map(|item| item["content"].as_str())
                .map(str::len)
                .sum();
            let paths: Vec<&str> = items
                .iter()
                .filter_map(|item| item["path"].as_str())
                .collect();
            words.push(flag);
            words.push(format!(
                "<{} files, {bytes} bytes: {}>",
                items.len(),
                list_words(&paths, "paths", quote_short).join(" ")
            ));
        }
        (_, Value::Array(items)) => {
            let items: Vec<Cow<'_, str>> = items.iter().map(value_text).collect();
            let mut listed = list_words(&items, "items", |item| {
                format!("{flag} {}", quote_short(item))
            });
            words.append(&mut listed);
        }
        (_, Value::Object(map)) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, item)| format!("{key}={}", value_text(item)))
                .collect();
            let mut listed = list_words(&entries, "entries", |entry| {
                format!("{flag} {}", quote_short(entry))
            });
            words.append(&mut listed);
        }
        (_, other) => {
            words.push(flag);
            words.push(quote_short(&value_text(other)));
        }
    }
}

/// The words of a list argument, each made by `word`, within one argument's budget of
/// [`HEADER_ARG_CHARS`] characters: the item that crosses it is shortened, and the rest are
/// replaced by `…(N unit)` with the list's full length.
fn list_words(items: &[impl AsRef<str>], unit: &str, word: impl Fn(&str) -> String) -> Vec<String> {
    let mut words = Vec::new();
    let mut left = HEADER_ARG_CHARS;
    for (index, item) in items.iter().enumerate() {
        let item = item.as_ref();
        if left == 0 {
            words.push(elision_note(items.len(), unit));
            break;
        }
        match cut_point(item, left) {
            None => {
                left = left.saturating_sub(item.chars().count() + 1);
                words.push(word(item));
            }
            Some(_) => {
                words.push(shorten_word(item, left, &word));
                if index + 1 < items.len() {
                    words.push(elision_note(items.len(), unit));
                }
                break;
            }
        }
    }
    words
}

/// `word` of the first `limit` characters of `text`, then `…(N chars)`.
fn shorten_word(text: &str, limit: usize, word: &impl Fn(&str) -> String) -> String {
    match cut_point(text, limit) {
        None => word(text),
        Some(cut) => format!(
            "{}{}",
            word(&text[..cut]),
            elision_note(text.chars().count(), "chars")
        ),
    }
}

/// A value quoted as a shell word, at most [`HEADER_ARG_CHARS`] characters of it: the quoted
/// part stays a well-formed word and the elision follows it.
fn quote_short(text: &str) -> String {
    shorten_word(text, HEADER_ARG_CHARS, &quote)
}

/// A value as one word's text: a string as it is, anything else as JSON.
fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(text) => Cow::Borrowed(text),
        other => Cow::Owned(other.to_string()),
    }
}

/// Quotes a word the way a POSIX shell would read it back; never fails.
fn quote(word: &str) -> String {
    if word.is_empty() {
        return "''".to_owned();
    }
    shlex::try_quote(word).map_or_else(
        |_| format!("'{}'", word.replace('\0', "\\0")),
        |q| q.into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use serde_json::json;

    fn args_of(line: &str) -> Value {
        Value::Object(parse_slash(line).unwrap().args)
    }

    #[test]
    fn agent_todo_shows_how_many_items_not_the_list() {
        let args = serde_json::json!({"items": [
            {"content": "one", "status": "done"},
            {"content": "two", "status": "pending"},
        ]});
        let Value::Object(args) = args else { panic!() };
        assert_eq!(
            render_command(ToolName::AgentTodo, &args),
            "/agent.todo --items <2 items>"
        );
    }

    #[test]
    fn parses_the_contract_examples() {
        assert_eq!(
            args_of("/fs.read /abs/path --head 200"),
            json!({"path": "/abs/path", "head": 200})
        );
        assert_eq!(
            args_of("/fs.mv /a /b --overwrite"),
            json!({"fromPath": "/a", "toPath": "/b", "overwrite": true})
        );
        assert_eq!(
            args_of(r#"/shell.exec "git status --short""#),
            json!({"command": "git status --short"})
        );
    }

    #[test]
    fn variadic_arguments_take_the_rest_flags_included() {
        assert_eq!(
            args_of("/process.run --cwd /w git log --oneline -n 3"),
            json!({"cwd": "/w", "command": "git", "args": ["log", "--oneline", "-n", "3"]})
        );
        assert_eq!(
            args_of("/process.run git --version"),
            json!({"command": "git", "args": ["--version"]})
        );
        assert_eq!(
            args_of("/process.run git --cwd /x"),
            json!({"command": "git", "args": ["--cwd", "/x"]})
        );
    }

    #[test]
    fn repeated_flags_build_lists_and_maps() {
        assert_eq!(
            args_of("/fs.search /w TODO --extensions ts --extensions rs --contextLines=2"),
            json!({"path": "/w", "query": "TODO", "extensions": ["ts", "rs"], "contextLines": 2})
        );
        assert_eq!(
            args_of("/shell.exec 'echo $A' --env A=1 --env B=x=y"),
            json!({"command": "echo $A", "env": {"A": "1", "B": "x=y"}})
        );
    }

    #[test]
    fn errors_name_what_to_fix() {
        let cases = [
            ("/fs.raed /a", ErrorCode::UnknownTool, "not a flycode tool"),
            (
                "/fs.read /a --heads 3",
                ErrorCode::InvalidArgs,
                "unknown flag --heads",
            ),
            (
                "/fs.read /a --head x",
                ErrorCode::InvalidArgs,
                "needs an integer",
            ),
            (
                "/fs.read /a --head",
                ErrorCode::InvalidArgs,
                "needs a value",
            ),
            (
                "/fs.read /a /b",
                ErrorCode::InvalidArgs,
                "unexpected extra word",
            ),
            ("/fs.read '/a", ErrorCode::InvalidArgs, "unbalanced quotes"),
            ("/fs.writeBatch", ErrorCode::InvalidArgs, "no slash form"),
            ("/fs.read a.txt", ErrorCode::RelativePath, "absolute path"),
            (
                "/fs.read /a --head 1 --tail 1",
                ErrorCode::MutuallyExclusive,
                "head and tail",
            ),
            ("fs.read /a", ErrorCode::UnknownTool, "not a flycode tool"),
        ];
        for (line, code, text) in cases {
            let error = parse_slash(line).unwrap_err();
            assert_eq!(error.code(), code, "{line}");
            assert!(error.to_string().contains(text), "{line}: {error}");
        }
    }

    #[test]
    fn renders_calls_for_the_command_header() {
        let render = |tool, args: Value| render_command(tool, args.as_object().unwrap());
        assert_eq!(
            render(
                ToolName::FsRead,
                json!({"path": "/root/work/app/README.md", "head": 1200})
            ),
            "/fs.read /root/work/app/README.md --head 1200"
        );
        assert_eq!(
            render(
                ToolName::FsWrite,
                json!({"path": "/a b", "mode": "append", "content": "测试成功"})
            ),
            "/fs.write '/a b' --mode append --content <12 bytes>"
        );
        assert_eq!(
            render(
                ToolName::ProcessRun,
                json!({"command": "npm", "args": ["run", "test"], "cwd": "/w", "timeoutMs": 60000})
            ),
            "/process.run --cwd /w --timeoutMs 60000 npm run test"
        );
        assert_eq!(
            render(
                ToolName::FsMkdir,
                json!({"path": "/a\n/b", "parents": false})
            ),
            "/fs.mkdir '/a\\n/b' --parents=false"
        );
    }

    #[test]
    fn dashes_in_positionals_survive_a_round_trip() {
        for args in [
            json!({"command": "--help"}),
            json!({"command": "cargo", "args": ["--", "--nocapture"]}),
        ] {
            let tool = if args.get("args").is_some() {
                ToolName::ProcessRun
            } else {
                ToolName::ShellExec
            };
            let line = render_command(tool, args.as_object().unwrap());
            assert_eq!(args_of(&line), args, "{line}");
        }
    }

    #[test]
    fn process_run_flags_come_before_the_program_with_or_without_args() {
        let render = |args: Value| render_command(ToolName::ProcessRun, args.as_object().unwrap());
        let cases = [
            (
                json!({"command": "ls", "cwd": "/a"}),
                "/process.run --cwd /a ls",
            ),
            (
                json!({"command": "ls", "args": ["--cwd", "/b"], "cwd": "/a"}),
                "/process.run --cwd /a ls --cwd /b",
            ),
            (
                json!({"command": "--x", "timeoutMs": 5}),
                "/process.run --timeoutMs 5 -- --x",
            ),
        ];
        for (args, line) in cases {
            assert_eq!(render(args.clone()), line);
            assert_eq!(args_of(line), args, "{line}");
        }
    }

    #[test]
    fn long_arguments_are_shortened_in_the_command_header() {
        let huge = format!("/{}", "p".repeat(1 << 20));
        let line = render_command(
            ToolName::FsRead,
            json!({"path": huge, "head": 5}).as_object().unwrap(),
        );
        assert!(line.len() < 600, "{} bytes", line.len());
        assert!(line.starts_with("/fs.read /ppp"), "{line}");
        assert!(line.ends_with("…(1048577 chars) --head 5"), "{line}");

        let args: Vec<String> = (0..10_000).map(|i| format!("arg{i}")).collect();
        let line = render_command(
            ToolName::ProcessRun,
            json!({"command": "echo", "args": args, "env": {"A": "x".repeat(5000)}})
                .as_object()
                .unwrap(),
        );
        assert!(line.len() < 1500, "{} bytes: {line}", line.len());
        assert!(line.contains("--env 'A=xxx"), "{line}");
        assert!(line.contains("'…(5002 chars) echo arg0 arg1"), "{line}");
        assert!(line.ends_with("…(10000 items)"), "{line}");

        let tool = "t".repeat(1 << 20);
        let mut wide = Map::new();
        for i in 0..2000 {
            wide.insert(format!("k{i}"), json!({"deep": "v".repeat(1000)}));
        }
        let line = render_unknown_command(&tool, Some(&wide));
        assert!(line.len() < 2 * HEADER_VALUE_CHARS, "{} bytes", line.len());
        assert!(line.starts_with("/ttt"), "{}", &line[..40]);
        assert!(
            line.ends_with("…(2000 arguments)"),
            "{}",
            &line[line.len() - 40..]
        );
    }

    #[test]
    fn rendered_commands_parse_back_to_the_same_call() {
        let args = json!({"path": "/w x", "query": "a'b", "regex": true, "extensions": ["ts"], "limit": 5});
        let line = render_command(ToolName::FsSearch, args.as_object().unwrap());
        assert_eq!(args_of(&line), args);
    }
}
