//! The saved sessions `memory.query` searches: the transcripts of earlier runs in the state
//! directory's `runs/` (a sub-agent's beside its parent's), read as flycode's own files. Only
//! what the user and the assistant said counts: system and tool messages, flycode's special
//! messages (`[flycode] ...`), messages holding a tool result (`flycode-result`,
//! `<bash_call_result>`, `<builtin_result>`, `<child_summary>`) and think blocks are left out.
//! The watch store holds calls and their results only, nothing a person or model said, so it
//! adds nothing here (PROTOCOL.md §9 (memory.query)).

use std::path::{Path, PathBuf};

/// At most this many transcripts are read, the newest first.
const MAX_SESSIONS: usize = 500;
/// A transcript larger than this is skipped.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// One message's text is cut to this many characters.
const MAX_MESSAGE_CHARS: usize = 4000;

/// One message of a saved session, as the search sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SavedMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its text, think blocks removed.
    pub text: String,
}

/// The conversations of the transcripts in `state_dir/runs`, newest first, leaving out the
/// files whose name starts with one of `skip_stems` (the current run's own).
pub(crate) fn saved_sessions(state_dir: &Path, skip_stems: &[String]) -> Vec<Vec<SavedMessage>> {
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
        .map(|text| conversation(&text))
        .filter(|messages| !messages.is_empty())
        .collect()
}

/// The user and assistant text of one transcript (JSON Lines of Chat Completions messages);
/// lines that are not such messages are skipped.
pub(crate) fn conversation(jsonl: &str) -> Vec<SavedMessage> {
    jsonl
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|message| {
            let role = message["role"].as_str()?;
            if role != "user" && role != "assistant" {
                return None;
            }
            let content = message["content"].as_str()?;
            if role == "user" && content.starts_with("[flycode]") || holds_a_result(content) {
                return None;
            }
            let text = without_think(content);
            let text = text.trim();
            (!text.is_empty()).then(|| SavedMessage {
                role: role.to_owned(),
                text: text.chars().take(MAX_MESSAGE_CHARS).collect(),
            })
        })
        .collect()
}

/// Whether a message carries a tool's result (of either dialect) or a sub-agent's summary.
pub(crate) fn holds_a_result(content: &str) -> bool {
    [
        "flycode-result",
        "<bash_call_result",
        "<builtin_result",
        "<child_summary",
    ]
    .iter()
    .any(|mark| content.contains(mark))
}

/// `text` without its `<think>...</think>` blocks (an unclosed one runs to the end).
pub(crate) fn without_think(text: &str) -> String {
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
    fn think_blocks_go_also_unclosed() {
        assert_eq!(without_think("a<think>b</think>c<think>d"), "ac");
        assert_eq!(without_think("plain"), "plain");
    }
}
