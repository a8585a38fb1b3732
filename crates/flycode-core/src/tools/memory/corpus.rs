//! The saved sessions `memory.query` searches: the transcripts of earlier runs in the state
//! directory's `runs/` (a sub-agent's beside its parent's), read as flycode's own files, of the
//! projects whose roots overlap the session's unless the person opted in to all of them. Only
//! what the user and the assistant said counts: system and tool messages, flycode's special
//! messages (`[flycode] ...`), messages holding a tool result (`flycode-result`,
//! `<bash_call_result>`, `<builtin_result>`, `<child_summary>`) and think blocks are left out,
//! and so is every call in what they said, with its arguments (a file's content, a command, a
//! secret): [`without_calls`]. The watch store holds calls and their results only, nothing a
//! person or model said, so it adds nothing here (PROTOCOL.md §9 (memory.query)).

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::protocol::parse::{BlockKind, parse_reply};
use crate::protocol::tags::{TagVerdict, read_tags};
use crate::protocol::text_calls::find_text_calls;
use crate::protocol::{Attempt, ToolName, ToolSet};

/// At most this many transcripts are read, the newest first.
const MAX_SESSIONS: usize = 500;
/// A transcript larger than this is skipped.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// One message's text is cut to this many characters.
const MAX_MESSAGE_CHARS: usize = 4000;

/// One message of a saved session, as the search sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its text, think blocks removed.
    pub text: String,
}

/// The conversations of the transcripts in `state_dir/runs`, newest first, leaving out the
/// files whose name starts with one of `skip_stems` (the current run's own) and, unless `roots`
/// is `None` (the person's opt-in), the runs whose recorded roots overlap none of `roots`.
pub fn saved_sessions(
    state_dir: &Path,
    skip_stems: &[String],
    roots: Option<&[PathBuf]>,
) -> Vec<Vec<SavedMessage>> {
    let runs = state_dir.join("runs");
    let Ok(entries) = crate::sandbox::host::read_dir(&runs) else {
        return Vec::new();
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            // Only regular files: a link in the state directory is never followed out of it.
            let metadata = crate::sandbox::host::symlink_metadata(&path).ok()?;
            let name = path.file_name()?.to_string_lossy().into_owned();
            let wanted = metadata.is_file()
                && metadata.len() <= MAX_FILE_BYTES
                && name.ends_with(".jsonl")
                && !skip_stems
                    .iter()
                    .any(|stem| name.starts_with(stem.as_str()));
            wanted.then(|| (metadata.modified().unwrap_or(std::time::UNIX_EPOCH), path))
        })
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files
        .into_iter()
        .take(MAX_SESSIONS)
        .filter_map(|(_, path)| crate::sandbox::host::read_to_string(&path).ok())
        .filter(|text| roots.is_none_or(|roots| overlaps(&recorded_roots(text), roots)))
        .map(|text| conversation(&text))
        .filter(|messages| !messages.is_empty())
        .collect()
}

/// The roots a transcript's first line records (`flycode.run.roots`); none for a run recorded
/// before roots were.
fn recorded_roots(jsonl: &str) -> Vec<PathBuf> {
    let first = jsonl.lines().next().unwrap_or_default();
    let Ok(line) = serde_json::from_str::<serde_json::Value>(first) else {
        return Vec::new();
    };
    line["flycode"]["run"]["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(PathBuf::from)
        .collect()
}

/// Whether one of `saved` is one of `roots`, inside one, or holds one (by path components).
fn overlaps(saved: &[PathBuf], roots: &[PathBuf]) -> bool {
    saved
        .iter()
        .any(|a| roots.iter().any(|b| a.starts_with(b) || b.starts_with(a)))
}

/// The user and assistant text of one transcript (JSON Lines of Chat Completions messages);
/// lines that are not such messages are skipped.
pub fn conversation(jsonl: &str) -> Vec<SavedMessage> {
    jsonl
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|message| said(message["role"].as_str()?, message["content"].as_str()?))
        .collect()
}

/// What a message of `role` with `content` said, as the search and the condenser's context see
/// it: the person's and the model's words, without flycode's own messages, results, reasoning
/// and calls; `None` when nothing is left.
pub fn said(role: &str, content: &str) -> Option<SavedMessage> {
    if role != "user" && role != "assistant" {
        return None;
    }
    if role == "user" && content.starts_with("[flycode]") || holds_a_result(content) {
        return None;
    }
    let text = without_calls(&without_think(content))?;
    let text = text.trim();
    (!text.is_empty()).then(|| SavedMessage {
        role: role.to_owned(),
        text: text.chars().take(MAX_MESSAGE_CHARS).collect(),
    })
}

/// Whether a message carries a tool's result (of either dialect) or a sub-agent's summary.
pub fn holds_a_result(content: &str) -> bool {
    [
        "flycode-result",
        "<bash_call_result",
        "<builtin_result",
        "<child_summary",
    ]
    .iter()
    .any(|mark| content.contains(mark))
}

/// What `text` says without its calls: every call any of flycode's readers would take from it
/// (a `flycode-call` or `flycode-result` block, a seed 000 tag, a call written as text:
/// `<tool_call>`, `<function=…>`, a JSON block or object naming a tool) is replaced by
/// `[call: TOOL]` (`[call]` when its tool is unknown), so none of its arguments is kept. `None`
/// (the message is left out) when a tag cannot be told from the text around it (a violation).
pub fn without_calls(text: &str) -> Option<String> {
    let parsed = parse_reply(text);
    let text = parsed.text;
    let mut calls: Vec<(Range<usize>, Option<String>)> = parsed
        .blocks
        .iter()
        .map(|block| match block.kind {
            BlockKind::Call => (block.span.clone(), Attempt::read(&block.content).tool),
            BlockKind::Result => (block.span.clone(), Some("result".to_owned())),
        })
        .collect();
    match read_tags(&text) {
        TagVerdict::Tags(tags) | TagVerdict::TagsThenReturn(tags, _) => calls.extend(
            tags.into_iter()
                .map(|tag| (tag.span, Some(tag.kind.name().to_owned()))),
        ),
        TagVerdict::Invalid(_) => return None,
        TagVerdict::None | TagVerdict::Return(_) => {}
    }
    if let std::borrow::Cow::Owned(_) = crate::protocol::reasoning::without_reasoning(&text) {
        // Reasoning formed again by what was taken out: the text calls' spans would not be
        // this text's.
        return None;
    }
    calls.extend(
        find_text_calls(&text, ToolSet::All)
            .into_iter()
            .map(|call| (call.span, Some(call.name))),
    );
    calls.sort_by_key(|(span, _)| (span.start, std::cmp::Reverse(span.end)));
    let mut kept = String::with_capacity(text.len());
    let mut from = 0;
    for (span, name) in calls {
        if span.start < from {
            continue;
        }
        kept.push_str(&text[from..span.start]);
        kept.push_str(&call_marker(name.as_deref()));
        if text[span.clone()].ends_with('\n') {
            kept.push('\n');
        }
        from = span.end;
    }
    kept.push_str(&text[from.min(text.len())..]);
    Some(kept)
}

/// `[call: NAME]` for a tool, a tag or a result flycode knows by that name, else `[call]`: a
/// name the model made up is not repeated.
fn call_marker(name: Option<&str>) -> String {
    let known = name.filter(|name| {
        *name == "result"
            || ToolName::from_native_name(name, ToolSet::All).is_some()
            || crate::protocol::tags::TagKind::ALL
                .iter()
                .any(|kind| kind.name() == *name)
    });
    match known {
        Some(name) => format!("[call: {name}]"),
        None => "[call]".to_owned(),
    }
}

/// `text` without its `<think>...</think>` blocks (an unclosed one runs to the end).
pub fn without_think(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<think>") {
        out.push_str(&rest[..start]);
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_what_user_and_assistant_said() {
        let jsonl = [
            r#"{"role":"system","content":"you are"}"#,
            r#"{"role":"user","content":"[flycode] TODO list"}"#,
            r#"{"role":"user","content":"where is the parser?"}"#,
            r#"{"role":"assistant","content":"<think>hmm secret</think>In src/parse.rs"}"#,
            r#"{"role":"user","content":"```flycode-result\nx\n```"}"#,
            r#"{"role":"user","content":"<bash_call_result exit_code=0>ls</bash_call_result>"}"#,
            r#"{"role":"tool","content":"result"}"#,
            "not json",
        ]
        .join("\n");
        let messages = conversation(&jsonl);
        assert_eq!(
            messages,
            [
                SavedMessage {
                    role: "user".into(),
                    text: "where is the parser?".into()
                },
                SavedMessage {
                    role: "assistant".into(),
                    text: "In src/parse.rs".into()
                },
            ]
        );
    }

    #[test]
    fn calls_are_cut_out_of_what_was_said_with_their_arguments() {
        let said = "Saving it.\n```flycode-call\n{\"id\":\"c1\",\"tool\":\"fs.write\",\"args\":{\"path\":\"/w/.env\",\"mode\":\"overwrite\",\"content\":\"TOKEN=s3cret\"}}\n```\nDone.";
        assert_eq!(
            without_calls(said).unwrap(),
            "Saving it.\n[call: fs.write]\nDone."
        );
        let tags = "Looking.\n<bash_call>cat ~/.ssh/id_rsa</bash_call> then <builtin>\nsmart_edit\npath: a\nnew_text:\n<<<\ns3cret\n>>>\n</builtin>";
        assert_eq!(
            without_calls(tags).unwrap(),
            "Looking.\n[call: bash_call] then [call: builtin]"
        );
        let native = "<tool_call>{\"name\": \"fs_write\", \"arguments\": {\"content\": \"s3cret\"}}</tool_call> and <function=made_up>{\"x\": \"s3cret\"}</function>";
        assert_eq!(
            without_calls(native).unwrap(),
            "[call: fs_write] and [call]"
        );
        assert_eq!(without_calls("<bash_call> s3cret"), None);
        assert_eq!(without_calls("plain words").unwrap(), "plain words");
    }

    #[test]
    fn a_run_counts_where_its_roots_meet_the_sessions() {
        let record = |roots: &str| {
            format!(
                "{{\"role\":\"system\",\"content\":\"s\",\"flycode\":{{\"run\":{{\"roots\":{roots}}}}}}}"
            )
        };
        let here = [PathBuf::from("/w/app")];
        assert!(overlaps(&recorded_roots(&record("[\"/w/app\"]")), &here));
        assert!(overlaps(&recorded_roots(&record("[\"/w\"]")), &here));
        assert!(overlaps(
            &recorded_roots(&record("[\"/w/app/sub\"]")),
            &here
        ));
        assert!(!overlaps(
            &recorded_roots(&record("[\"/w/app-evil\"]")),
            &here
        ));
        assert!(!overlaps(
            &recorded_roots("{\"role\":\"user\",\"content\":\"x\"}"),
            &here
        ));
    }

    #[test]
    fn think_blocks_go_also_unclosed() {
        assert_eq!(without_think("a<think>b</think>c<think>d"), "ac");
        assert_eq!(without_think("plain"), "plain");
    }
}
