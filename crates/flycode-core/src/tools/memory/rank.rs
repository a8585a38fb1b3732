//! The lexical ranking of `memory.query`: every saved session is cut into windows of
//! consecutive messages (half a window apart, so a passage on a border is whole in one of them),
//! and the windows are ranked against the query with BM25 (the `bm25` crate's search engine,
//! without its default tokenizer). The tokenizer here keeps Latin words (lower-cased) and cuts
//! CJK text into single characters and pairs of characters, so a Chinese query finds Chinese
//! text without a dictionary.

use super::corpus::SavedMessage;

/// A window of one session, ranked.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedWindow {
    /// `user: ...` / `assistant: ...` lines.
    pub text: String,
    /// Its BM25 score against the query.
    pub score: f32,
}

/// Latin words and CJK characters and character pairs.
#[derive(Clone, Copy, Debug, Default)]
pub struct MixedTokenizer;

impl bm25::Tokenizer for MixedTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        tokens(input_text)
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// The tokens of `text`.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_cjk: Option<char> = None;
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut word, &mut out);
            out.push(c.to_string());
            if let Some(before) = previous_cjk {
                out.push(format!("{before}{c}"));
            }
            previous_cjk = Some(c);
        } else if c.is_alphanumeric() || c == '_' {
            previous_cjk = None;
            word.extend(c.to_lowercase());
        } else {
            previous_cjk = None;
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn flush(word: &mut String, out: &mut Vec<String>) {
    if !word.is_empty() {
        out.push(std::mem::take(word));
    }
}

/// The windows of `window` messages of `sessions`, half a window apart.
pub fn windows(sessions: &[Vec<SavedMessage>], window: usize) -> Vec<String> {
    let window = window.max(1);
    let step = (window / 2).max(1);
    let mut out = Vec::new();
    for messages in sessions {
        let mut start = 0;
        loop {
            let end = (start + window).min(messages.len());
            let text: Vec<String> = messages[start..end]
                .iter()
                .map(|m| format!("{}: {}", m.role, m.text))
                .collect();
            out.push(text.join("\n"));
            if end == messages.len() {
                break;
            }
            start += step;
        }
    }
    out
}

/// The best `candidate` windows for `query`, best first; windows that share no token with the
/// query are left out.
pub fn rank(windows: Vec<String>, query: &str, candidate: usize) -> Vec<RankedWindow> {
    if windows.is_empty() {
        return Vec::new();
    }
    let engine = bm25::SearchEngineBuilder::<u32, u32, MixedTokenizer>::with_tokenizer_and_corpus(
        MixedTokenizer,
        windows,
    )
    .build();
    engine
        .search(query, candidate)
        .into_iter()
        .filter(|result| result.score > 0.0)
        .map(|result| RankedWindow {
            text: result.document.contents,
            score: result.score,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(role: &str, text: &str) -> SavedMessage {
        SavedMessage {
            role: role.into(),
            text: text.into(),
        }
    }

    #[test]
    fn chinese_and_latin_tokens() {
        assert_eq!(
            tokens("Parse 解析器!"),
            ["parse", "解", "析", "解析", "器", "析器"]
        );
    }

    #[test]
    fn the_window_about_the_query_wins() {
        let sessions = vec![
            vec![
                said("user", "the weather is nice"),
                said("assistant", "indeed"),
            ],
            vec![
                said("user", "where does the tokenizer live?"),
                said("assistant", "the tokenizer lives in src/lex.rs"),
            ],
            vec![
                said("user", "数据库迁移怎么做"),
                said("assistant", "用 migrate 命令"),
            ],
        ];
        let ranked = rank(windows(&sessions, 10), "tokenizer", 5);
        assert_eq!(ranked.len(), 1);
        assert!(ranked[0].text.contains("src/lex.rs"));
        let ranked = rank(windows(&sessions, 10), "数据库", 5);
        assert!(ranked[0].text.contains("migrate"), "{ranked:?}");
    }

    #[test]
    fn windows_overlap_by_half_and_cover_everything() {
        let messages: Vec<SavedMessage> = (0..5).map(|n| said("user", &n.to_string())).collect();
        let cut = windows(&[messages], 2);
        assert_eq!(cut.len(), 4);
        assert!(cut.last().unwrap().contains("user: 4"));
    }
}
