//! The masking engine for flycode's secrets (PROTOCOL.md §9 (Secrets and masking)): which byte patterns
//! stand for a secret, and how they are masked in text flycode composes, in a window of a file or
//! of a program's output, and in a stream. It knows no tool and no result shape; `tools::secrets`
//! applies it to results, the audit log applies it to every entry.
//!
//! A secret stands for several patterns: its value, its lowercase and uppercase hex, and the parts
//! of its standard and URL-safe base64 that depend on its bytes alone, at each of the three
//! alignments it can have in a longer encoded stream. Only values of at least [`MIN_SECRET_LEN`]
//! characters are secrets, and only patterns that long are looked for: a short value (`1`, `yes`,
//! a test's `x`) would mask common text everywhere and tell a reader which letters it holds.
//!
//! Two ways to mask, for two kinds of text:
//!
//! - **composed text** (ids, commands, messages, hints, headers, arguments): each whole occurrence
//!   becomes [`MASK`] (`***`), [`Secrets::mask`];
//! - **content** (a file's bytes, a program's output): every byte of every occurrence becomes `*`,
//!   except line feeds, so sizes, offsets and line numbers stay true ([`Secrets::mask_window`]).
//!   A window (a range, some lines, a chunk) is masked with the bytes around it in view, so the
//!   part of a secret that a window's edge cuts is masked too, and no sequence of windows shows a
//!   secret in pieces.

use std::borrow::Cow;

use aho_corasick::AhoCorasick;
use base64::Engine;
use flycode_protocol::ResultBlock;
use serde_json::Value;

pub mod reader;

pub use reader::MaskingReader;

/// The shortest value masked, and the shortest pattern looked for.
pub const MIN_SECRET_LEN: usize = 8;

/// What a secret's value is replaced by in composed text.
pub const MASK: &str = "***";

/// What each byte of a secret becomes in content.
pub const MASK_BYTE: u8 = b'*';

/// The secret values to mask and the patterns that stand for them, longest first (a secret that
/// contains another is masked whole). Its `Debug` shows how many values, never the values.
#[derive(Clone, Default)]
pub struct Secrets {
    values: usize,
    patterns: Vec<String>,
    /// Every pattern at once, every occurrence (overlapping ones too) in one pass; `None` when
    /// there is nothing to mask.
    matcher: Option<AhoCorasick>,
    /// The same without a prefilter: for encoded text (base64, hex), where the prefilter's "rare"
    /// bytes are everywhere and it costs several times a plain scan.
    dense: Option<AhoCorasick>,
}

/// Content this large whose start is all base64 or hex characters is scanned without the
/// prefilter.
const DENSE_FROM: usize = 64 * 1024;

/// How much of a haystack's start is looked at to tell encoded text.
const DENSE_SAMPLE: usize = 4096;

/// Whether `haystack` looks like base64 or hex: large, and its start all of their characters.
fn is_dense(haystack: &[u8]) -> bool {
    haystack.len() >= DENSE_FROM
        && haystack[..DENSE_SAMPLE]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.values)
    }
}

/// The bytes beside a window, as far as they are known.
#[derive(Clone, Copy, Debug)]
pub struct Edge<'a> {
    /// The bytes next to the window: those before it end where it starts, those after it start
    /// where it ends.
    bytes: &'a [u8],
    /// Whether nothing lies beyond `bytes` (the start or end of the file). Otherwise what lies
    /// beyond is unknown, and any byte there is taken to continue a secret.
    complete: bool,
}

impl<'a> Edge<'a> {
    /// The bytes beside the window, and nothing beyond them (or at least as many as
    /// [`Secrets::margin`]: then what lies beyond never matters).
    pub fn exact(bytes: &'a [u8]) -> Edge<'a> {
        Edge {
            bytes,
            complete: true,
        }
    }

    /// The bytes beside the window, and unknown ones beyond them: a secret's part that reaches
    /// into the unknown is masked as if it were there.
    pub fn open(bytes: &'a [u8]) -> Edge<'a> {
        Edge {
            bytes,
            complete: false,
        }
    }

    /// The start or end of the content: nothing beside the window.
    pub fn none() -> Edge<'static> {
        Edge::exact(&[])
    }
}

impl Secrets {
    /// Masks a rendered result block: id, command, code, error, hint, headers and body. Every
    /// block that leaves flycode (the executor's, a refusal's, a violation's) goes through it.
    pub fn mask_block(&self, block: &mut ResultBlock) {
        if self.is_empty() {
            return;
        }
        let ResultBlock {
            id,
            command,
            ok: _,
            code,
            error,
            hint,
            fields,
            body,
        } = block;
        self.mask_string(command);
        for text in [id, code, error, hint, body].into_iter().flatten() {
            self.mask_string(text);
        }
        for (key, value) in fields {
            self.mask_string(key);
            self.mask_string(value);
        }
    }

    /// The values of the secret variables `names` (held since a hand-off, else in this process's
    /// environment: [`crate::secret_env::value`]), where set and long enough.
    pub fn from_env<I, S>(names: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        // Asked for on every call, by the tool and again by the executor and the door: the
        // matchers are built once per set of values and then shared (cloning them is cheap).
        static LAST: std::sync::Mutex<Option<(Vec<String>, Secrets)>> = std::sync::Mutex::new(None);
        let values: Vec<String> = names
            .into_iter()
            .filter_map(|name| crate::secret_env::value(name.as_ref()))
            .collect();
        let mut last = LAST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kept, secrets)) = last.as_ref()
            && *kept == values
        {
            return secrets.clone();
        }
        let secrets = Secrets::from_values(values.iter().cloned());
        *last = Some((values, secrets.clone()));
        secrets
    }

    /// The given values, where long enough.
    pub fn from_values<I: IntoIterator<Item = String>>(values: I) -> Secrets {
        let mut kept: Vec<String> = values
            .into_iter()
            .filter(|value| value.chars().count() >= MIN_SECRET_LEN)
            .collect();
        kept.sort();
        kept.dedup();
        let mut patterns: Vec<String> = kept.iter().flat_map(|value| forms(value)).collect();
        patterns.retain(|pattern| pattern.len() >= MIN_SECRET_LEN);
        patterns.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        patterns.dedup();
        // A handful of short patterns: the automaton cannot fail to build (were it to, every
        // pattern is still looked for at the edges, and `mask_string` falls back to `replace`).
        let build = |prefilter: bool| {
            (!patterns.is_empty())
                .then(|| {
                    AhoCorasick::builder()
                        .prefilter(prefilter)
                        .build(&patterns)
                        .ok()
                })
                .flatten()
        };
        let (matcher, dense) = (build(true), build(false));
        Secrets {
            values: kept.len(),
            patterns,
            matcher,
            dense,
        }
    }

    /// The spans of every occurrence of every pattern in `haystack`, overlapping ones too, in
    /// order of their end.
    fn occurrences(&self, haystack: &[u8]) -> Vec<(usize, usize)> {
        let matcher = if is_dense(haystack) {
            self.dense.as_ref().or(self.matcher.as_ref())
        } else {
            self.matcher.as_ref()
        };
        match matcher {
            Some(matcher) => matcher
                .find_overlapping_iter(haystack)
                .map(|found| (found.start(), found.end()))
                .collect(),
            None => {
                let mut spans = Vec::new();
                for pattern in &self.patterns {
                    let finder = memchr::memmem::Finder::new(pattern.as_bytes());
                    let mut from = 0;
                    while let Some(found) = haystack.get(from..).and_then(|rest| finder.find(rest))
                    {
                        spans.push((from + found, from + found + pattern.len()));
                        from += found + 1;
                    }
                }
                spans
            }
        }
    }

    /// The byte spans of every occurrence of a secret (in any of its forms) in `content`, in
    /// order of their end; overlapping ones too.
    pub fn spans(&self, content: &[u8]) -> Vec<(usize, usize)> {
        if self.is_empty() {
            return Vec::new();
        }
        self.occurrences(content)
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// How many bytes on each side of a window can hold part of a secret that overlaps it: the
    /// longest pattern's length less one.
    pub fn margin(&self) -> usize {
        self.patterns
            .first()
            .map_or(0, |longest| longest.len().saturating_sub(1))
    }

    /// `text` with every occurrence of a secret (in any of its forms) replaced by [`MASK`]
    /// (occurrences that overlap become one); borrowed when it holds none.
    pub fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut spans = self.occurrences(text.as_bytes());
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_unstable();
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut shown_to = 0;
        for (start, end) in spans {
            if start >= shown_to {
                out.extend_from_slice(&bytes[shown_to..start]);
                out.extend_from_slice(MASK.as_bytes());
            }
            shown_to = shown_to.max(end);
        }
        out.extend_from_slice(&bytes[shown_to..]);
        // Occurrences start and end between characters (each pattern is UTF-8 text).
        Cow::Owned(
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }

    /// Masks `text` in place.
    pub fn mask_string(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.mask(text) {
            *text = masked;
        }
    }

    /// Masks every string in `value`, object keys included.
    pub fn mask_value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.mask_string(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_value(item)),
            Value::Object(members) => {
                let leaks_in_keys = members.keys().any(|key| self.mask(key) != key.as_str());
                if leaks_in_keys {
                    let old = std::mem::take(members);
                    for (key, mut member) in old {
                        self.mask_value(&mut member);
                        members.insert(self.mask(&key).into_owned(), member);
                    }
                } else {
                    members
                        .values_mut()
                        .for_each(|member| self.mask_value(member));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Masks content seen through a window: every byte of `window` that belongs to an occurrence
    /// of a secret becomes [`MASK_BYTE`] (line feeds stay), also an occurrence that starts in
    /// `before` or ends in `after`. With [`Secrets::margin`] bytes on each side (or the content's
    /// start or end), what the window shows of a secret is exactly what is masked. Whether
    /// anything was masked.
    pub fn mask_window(&self, window: &mut [u8], before: Edge<'_>, after: Edge<'_>) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut spans = self.occurrences(window);
        for pattern in &self.patterns {
            edge_matches(window, pattern.as_bytes(), before, after, &mut spans);
        }
        for (start, end) in &spans {
            for byte in &mut window[*start..*end] {
                if *byte != b'\n' {
                    *byte = MASK_BYTE;
                }
            }
        }
        !spans.is_empty()
    }

    /// Whole content, seen from start to end.
    pub fn mask_bytes(&self, content: &mut [u8]) -> bool {
        self.mask_window(content, Edge::none(), Edge::none())
    }

    /// The bytes of `content[start..end]`, masked with what lies around them in view.
    pub fn masked_part(&self, content: &[u8], start: usize, end: usize) -> Vec<u8> {
        let mut part = content[start..end].to_vec();
        self.mask_window(
            &mut part,
            Edge::exact(&content[..start]),
            Edge::exact(&content[end..]),
        );
        part
    }
}

/// The spans (in `window`) of the occurrences of `pattern` that cross an edge of `window`: those
/// that start before it or end after it, with at least one byte inside.
fn edge_matches(
    window: &[u8],
    pattern: &[u8],
    before: Edge<'_>,
    after: Edge<'_>,
    spans: &mut Vec<(usize, usize)>,
) {
    let (w, m) = (window.len() as i64, pattern.len() as i64);
    if w == 0 || m == 0 {
        return;
    }
    // Whether the content byte at `pos` (relative to the window's start) may be `expected`.
    let fits = |pos: i64, expected: u8| -> bool {
        if (0..w).contains(&pos) {
            return window[pos as usize] == expected;
        }
        let (edge, index) = if pos < 0 {
            (before, before.bytes.len() as i64 + pos)
        } else {
            (after, pos - w)
        };
        match usize::try_from(index).ok().and_then(|i| edge.bytes.get(i)) {
            Some(byte) => *byte == expected,
            None => !edge.complete,
        }
    };
    let starts = (1 - m)..0;
    let ends = (w - m + 1).max(0)..w;
    for start in starts.chain(ends) {
        let matched = pattern
            .iter()
            .enumerate()
            .all(|(i, byte)| fits(start + i as i64, *byte));
        if matched {
            let from = start.max(0) as usize;
            let to = (start + m).min(w) as usize;
            spans.push((from, to));
        }
    }
}

/// The forms of `value` looked for: itself, its hex in both cases, and its base64 (standard and
/// URL-safe) at each alignment.
fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![
        value.to_owned(),
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ];
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ] {
        for lead in 0..3 {
            forms.push(base64_core(engine, bytes, lead));
        }
    }
    forms
}

/// The base64 characters that depend on `bytes` alone when `lead` bytes precede them in the
/// encoded stream: the characters that also hold bits of a neighbour are left out.
fn base64_core(engine: &base64::engine::GeneralPurpose, bytes: &[u8], lead: usize) -> String {
    let mut padded = vec![0u8; lead];
    padded.extend_from_slice(bytes);
    let encoded = engine.encode(&padded);
    // Character i holds bits 6i..6i+6 of the stream; the lead's bits end at 8*lead.
    let first = (8 * lead).div_ceil(6);
    let last = (8 * padded.len()) / 6;
    encoded.get(first..last).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef";

    fn secrets() -> Secrets {
        Secrets::from_values([KEY.to_owned(), "short".to_owned()])
    }

    #[test]
    fn a_secret_is_masked_in_composed_text_in_every_form_and_a_short_value_never() {
        let s = secrets();
        let b64 = base64::engine::general_purpose::STANDARD.encode(KEY);
        let text = format!(
            "k={KEY}; hex {}; HEX {}; b64 {b64}; short",
            hex::encode(KEY),
            hex::encode_upper(KEY)
        );
        let masked = s.mask(&text);
        assert_eq!(masked, "k=***; hex ***; HEX ***; b64 ***; short");
        assert!(matches!(s.mask("nothing here"), Cow::Borrowed(_)));
        assert!(Secrets::from_values(["1234567".to_owned()]).is_empty());
        assert!(!Secrets::from_values(["12345678".to_owned()]).is_empty());
    }

    #[test]
    fn base64_of_a_secret_is_found_at_every_alignment_and_in_both_alphabets() {
        let s = secrets();
        for lead in ["", "a", "ab", "abc"] {
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                let encoded = engine.encode(format!("{lead}{KEY}"));
                let masked = s.mask(&encoded);
                // What is left is the lead's characters, one shared with the key's last byte,
                // and padding: nothing of the key can be decoded from it.
                let left = masked.replace(MASK, "");
                assert!(
                    masked.contains(MASK) && left.len() <= 7,
                    "{lead:?}: {masked}"
                );
            }
        }
    }

    #[test]
    fn the_longer_of_two_overlapping_secrets_is_masked_whole() {
        let secrets = Secrets::from_values(["abcdefgh".to_owned(), "abcdefgh-and-more".to_owned()]);
        assert_eq!(secrets.mask("[abcdefgh-and-more]"), "[***]");
        assert_eq!(secrets.mask("[abcdefgh]"), "[***]");
    }

    #[test]
    fn content_keeps_its_size_and_line_feeds() {
        let s = Secrets::from_values(["line-one\nline-two".to_owned()]);
        let mut content = b"a line-one\nline-two b".to_vec();
        assert!(s.mask_bytes(&mut content));
        assert_eq!(content, b"a ********\n******** b");
    }

    /// Every window of a text holding the key, at every position, shows no byte of the key in
    /// the clear, and the windows together never show it.
    #[test]
    fn every_window_masks_the_part_of_a_secret_it_holds() {
        let s = secrets();
        let content = format!("before {KEY} after, and {KEY}");
        let bytes = content.as_bytes();
        let mut reassembled = Vec::new();
        for start in 0..bytes.len() {
            for end in start..=bytes.len() {
                let part = s.masked_part(bytes, start, end);
                let shown = String::from_utf8(part.clone()).unwrap();
                for (i, byte) in part.iter().enumerate() {
                    let at = start + i;
                    let in_key = content
                        .match_indices(KEY)
                        .any(|(k, _)| (k..k + KEY.len()).contains(&at));
                    assert_eq!(*byte == MASK_BYTE, in_key, "{start}-{end}: {shown:?}");
                }
                if end == start + 1 {
                    reassembled.push(part[0]);
                }
            }
        }
        assert!(!String::from_utf8_lossy(&reassembled).contains("sk-live"));
    }

    #[test]
    fn an_open_edge_masks_a_part_that_may_continue_beyond_it() {
        let s = secrets();
        let mut head = b"output ... sk-live-01".to_vec();
        s.mask_window(&mut head, Edge::none(), Edge::open(&[]));
        assert_eq!(head, b"output ... **********");
        let mut tail = b"23456789abcdef done".to_vec();
        s.mask_window(&mut tail, Edge::open(&[]), Edge::none());
        assert_eq!(tail, b"************** done");
        // A complete edge: nothing beyond, nothing to continue.
        let mut end = b"output ... sk-live-01".to_vec();
        assert!(!s.mask_window(&mut end, Edge::none(), Edge::none()));
    }

    #[test]
    fn encoded_text_is_scanned_without_the_prefilter_and_still_masked() {
        let s = secrets();
        let mut text = "QUJD".repeat(DENSE_FROM);
        text.push_str(&base64::engine::general_purpose::STANDARD.encode(KEY));
        assert!(is_dense(text.as_bytes()));
        assert!(!is_dense(b"QUJD"));
        assert!(
            !s.mask(&text)
                .contains(&base64::engine::general_purpose::STANDARD.encode(KEY))
        );
        let mut bytes = text.into_bytes();
        assert!(s.mask_bytes(&mut bytes));
    }

    #[test]
    fn debug_never_shows_a_value() {
        assert_eq!(format!("{:?}", secrets()), "Secrets(1 values)");
    }
}
