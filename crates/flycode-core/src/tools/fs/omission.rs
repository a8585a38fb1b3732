//! The omission guard (PROTOCOL.md §9 (Tools)): a model that rewrites a file and abbreviates what it did not
//! mean to change (`// ... rest of the code unchanged`) would destroy that code. Shared by
//! `fs.write` (overwrite), `fs.writeBatch` (its overwrite entries) and `fs.edit`; pure text
//! judgement, no I/O.
//!
//! The rule: the new content replaces an existing file of at least [`MIN_LINES`] lines, is less
//! than half of that file's size in bytes, and holds a *placeholder line* that the replaced text
//! did not already hold. A placeholder line is a line that says nothing but "the rest is as it
//! was", optionally wrapped in comment markers (`//`, `///`, `#`, `/*`, `*/`, `*`, `--`, `<!--`,
//! `-->`, `;`, `%`), dots or an ellipsis (`...`, `…`, `。。。`) and brackets. The phrases (case
//! does not matter):
//!
//! - English: `rest of (the) <thing> [is|remains|stays] [unchanged|the same|as before|omitted…]`
//!   (`... rest of the code unchanged`, `rest of file unchanged`); `<existing|previous|original|
//!   remaining|other|unchanged|old|more> <thing> [unchanged|omitted|here|goes here…]`
//!   (`// ... existing code ...`, `... remaining code ...`); `<thing> unchanged|omitted`
//!   (`// implementation unchanged`); a bare `unchanged`, `omitted`, `snip`, `as before`, `no
//!   changes`… (`# (unchanged)`), where *thing* is one of [`THINGS`].
//! - Chinese: `其余代码不变`, `其他部分保持不变`, `原有代码不变`, `此处省略`, `省略部分代码`,
//!   `此处省略 100 行`, a bare `省略`, `略`, `不变`, `同上`…
//!
//! A bare word (`unchanged`, `省略`) counts only with a comment marker, brackets or an ellipsis
//! around it, and the weak forms without a state word (`existing code`, `remaining code`) only
//! with an ellipsis, so a heading `# Existing tests` or a Python `...` (Ellipsis) alone never
//! counts, and neither does a line with anything else on it (`x = y...`, `foo(); // unchanged`).

/// Files shorter than this are never judged: rewriting a small file whole is normal.
pub const MIN_LINES: usize = 20;

/// Lines longer than this are never placeholders (and are not worth normalising).
const MAX_PLACEHOLDER_CHARS: usize = 160;

/// What a placeholder may say it stands for, separated by spaces.
pub const THINGS: &str = "\
    code file files content contents implementation implementations function functions method \
    methods class classes module body line lines logic import imports test tests section \
    sections component components config configuration settings styles fields cases props \
    properties definitions helpers handlers routes rules markup template script text document \
    items entries data query block blocks stuff";

/// Phrases that say the thing is as it was, separated by commas.
const STATES: &str = "\
    unchanged, the same, same, same as before, same as above, same as original, as before, as \
    above, as is, as it was, omitted, not shown, not changed, elided, unmodified, untouched, \
    skipped, intact, truncated, snipped, snip, left out, no changes, no change";

/// Words before a thing that make it "what is already there", separated by spaces.
const PREFIXES: &str = "existing previous original remaining other unchanged old more omitted same";

/// Verbs between a thing and its state (`rest of the code remains unchanged`).
const VERBS: &str = "is are remains remain stays stay kept left";

/// Whether `word` is one of the space-separated `list`.
fn is_one_of(list: &str, word: &str) -> bool {
    list.split(' ').any(|w| w == word)
}

/// A placeholder line in new content that would drop what the old content held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Omission {
    /// The 1-based line number of the placeholder in the text that holds it.
    pub line: usize,
    /// The placeholder line, trimmed.
    pub text: String,
}

/// Judges an overwrite: `Some` when `new` would replace `old` (an existing file) by an
/// abbreviation (see the module documentation for the rule). The size test comes first; then
/// only the new lines the old file does not hold are judged, and only those that pass
/// [`may_be_placeholder`] cost more than a glance.
pub fn judge_overwrite(old: &[u8], new: &str) -> Option<Omission> {
    if !is_shrunk(old, new.len()) {
        return None;
    }
    let old = String::from_utf8_lossy(old);
    first_new_placeholder(&old, new)
}

/// Judges an edit: `Some` when the edited file (`new_len` bytes) is less than half of `old` and
/// a `newText` holds a placeholder line that its `oldText` did not. The pairs are (oldText,
/// newText); the line number is within that newText.
pub fn judge_edit<'a>(
    old: &[u8],
    new_len: usize,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<(usize, Omission)> {
    if !is_shrunk(old, new_len) {
        return None;
    }
    pairs
        .into_iter()
        .enumerate()
        .find_map(|(index, (old_text, new_text))| {
            first_new_placeholder(old_text, new_text).map(|omission| (index, omission))
        })
}

/// The first placeholder line of `new` that `old` does not hold (trimmed, as a whole line).
/// The old lines are gathered only once a placeholder is found, so text without one costs a
/// prefilter pass and nothing more.
fn first_new_placeholder(old: &str, new: &str) -> Option<Omission> {
    let mut held: Option<std::collections::HashSet<&str>> = None;
    new.lines().enumerate().find_map(|(index, line)| {
        if !is_placeholder_line(line) {
            return None;
        }
        let text = line.trim();
        let held = held.get_or_insert_with(|| old.lines().map(str::trim).collect());
        (!held.contains(text)).then(|| Omission {
            line: index + 1,
            text: text.to_owned(),
        })
    })
}

/// Whether a file of `old` bytes shrinks to less than half by becoming `new_len` bytes, and is
/// long enough to be judged.
fn is_shrunk(old: &[u8], new_len: usize) -> bool {
    new_len.saturating_mul(2) < old.len() && count_lines(old) >= MIN_LINES
}

/// Lines of `bytes`, a last line without a line break included.
pub fn count_lines(bytes: &[u8]) -> usize {
    let breaks = bytes.iter().filter(|b| **b == b'\n').count();
    breaks + usize::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

/// How a line was dressed around its words.
#[derive(Clone, Copy, Debug, Default)]
struct Dress {
    /// A comment marker or brackets.
    marked: bool,
    /// An ellipsis (`...`, `…`, `。。。`).
    ellipsis: bool,
}

impl Dress {
    fn any(self) -> bool {
        self.marked || self.ellipsis
    }
}

/// How much dress a phrase needs to count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strength {
    /// Counts as it is (`rest of the code unchanged`, `其余代码不变`).
    Strong,
    /// Needs a comment marker, brackets or an ellipsis (`unchanged`, `省略`).
    NeedsDress,
    /// Needs an ellipsis (`existing code`).
    NeedsEllipsis,
}

/// Whether `line` is essentially only a placeholder phrase (see the module documentation).
pub fn is_placeholder_line(line: &str) -> bool {
    let line = line.trim();
    if !may_be_placeholder(line) || line.chars().count() > MAX_PLACEHOLDER_CHARS {
        return false;
    }
    let (core, dress) = undress(line);
    if core.is_empty() {
        return false;
    }
    let strength = if core.chars().any(is_cjk) {
        chinese_phrase(&core.split_whitespace().collect::<String>())
    } else {
        let words: Vec<&str> = core.split_whitespace().collect();
        english_phrase(&words)
    };
    match strength {
        Some(Strength::Strong) => true,
        Some(Strength::NeedsDress) => dress.any(),
        Some(Strength::NeedsEllipsis) => dress.ellipsis,
        None => false,
    }
}

/// The longest word of the English vocabulary (`implementations`).
const LONGEST_WORD: usize = 15;

/// Every word an English placeholder phrase can hold: [`THINGS`], the words of [`STATES`],
/// [`PREFIXES`], [`VERBS`] and the glue of the forms.
static VOCABULARY: std::sync::LazyLock<std::collections::HashSet<&'static str>> =
    std::sync::LazyLock::new(|| {
        [
            THINGS,
            PREFIXES,
            VERBS,
            "the this rest remainder of goes go is are here",
        ]
        .into_iter()
        .flat_map(str::split_whitespace)
        .chain(STATES.split(", ").flat_map(|state| state.split(' ')))
        .collect()
    });

/// The prefilter of [`is_placeholder_line`] on a trimmed line: `false` only where the full test
/// would say `false` too, and cheaply, without allocating, for nearly every line of real code.
///
/// A line with a character outside ASCII (an ellipsis, Chinese, a letter whose lower case is
/// ASCII) always goes on to the full test. In an ASCII line every letter belongs to the words of
/// the phrase (markers, fillers and brackets hold none, and nothing between two words is
/// dropped), and an English phrase consists of vocabulary words only, so a line with a run of
/// letters that is no such word, or with no letters at all, is none.
fn may_be_placeholder(line: &str) -> bool {
    if line.is_empty() {
        return false;
    }
    if !line.is_ascii() {
        return true;
    }
    let mut any = false;
    let mut buffer = [0u8; LONGEST_WORD];
    for run in line
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|run| !run.is_empty())
    {
        let Some(word) = buffer.get_mut(..run.len()) else {
            return false;
        };
        word.copy_from_slice(run.as_bytes());
        word.make_ascii_lowercase();
        match std::str::from_utf8(word) {
            Ok(word) if VOCABULARY.contains(word) => any = true,
            _ => return false,
        }
    }
    any
}

/// Comment markers a line may start with, longest first.
const OPENERS: &[&str] = &["<!--", "{/*", "///", "/*", "//", "--", "#", ";", "*", "%"];
/// Comment markers a line may end with.
const CLOSERS: &[&str] = &["*/}", "-->", "*/"];

/// Characters around the words that carry no meaning (besides whitespace).
const FILLERS: &str = ".…⋯。·-—=:,、，：；~!！";

/// Brackets around or inside the words.
const BRACKETS: &str = "()[]{}<>（）【】「」《》";

fn is_filler(c: char) -> bool {
    c.is_whitespace() || FILLERS.contains(c)
}

fn is_bracket(c: char) -> bool {
    BRACKETS.contains(c)
}

fn is_cjk(c: char) -> bool {
    matches!(u32::from(c), 0x3400..=0x9FFF | 0xF900..=0xFAFF)
}

/// The words of `line` without the comment markers, fillers and brackets around them (lower
/// case, brackets and punctuation inside turned into spaces), and how it was dressed.
fn undress(line: &str) -> (String, Dress) {
    let mut dress = Dress {
        marked: false,
        ellipsis: line.contains("..")
            || line.contains('…')
            || line.contains('⋯')
            || line.contains("。。"),
    };
    let mut rest = line;
    loop {
        let before = rest.len();
        rest = rest.trim();
        if let Some(opener) = OPENERS.iter().find(|o| rest.starts_with(**o)) {
            rest = &rest[opener.len()..];
            dress.marked = true;
        }
        if let Some(closer) = CLOSERS.iter().find(|c| rest.ends_with(**c)) {
            rest = &rest[..rest.len() - closer.len()];
            dress.marked = true;
        }
        let trimmed = rest.trim_matches(|c: char| is_filler(c) || is_bracket(c));
        if trimmed.len() != rest.trim_matches(is_filler).len() {
            dress.marked = true;
        }
        rest = trimmed;
        if rest.len() == before {
            break;
        }
    }
    let core: String = rest
        .chars()
        .map(|c| {
            if is_bracket(c) || matches!(c, '.' | '…' | ',' | ':' | '-' | '—' | '、' | '，') {
                ' '
            } else {
                c
            }
        })
        .flat_map(char::to_lowercase)
        .collect();
    (core, dress)
}

/// The strength of an English phrase, `None` when it is no placeholder.
fn english_phrase(words: &[&str]) -> Option<Strength> {
    if let Some(rest) = strip_state(words)
        && rest.is_empty()
    {
        return Some(Strength::NeedsDress);
    }
    // rest of (the) <thing> ...
    let mut at = skip(words, "the");
    if let Some(after) = at
        .strip_prefix(&["rest"][..])
        .or(at.strip_prefix(&["remainder"][..]))
        && let Some(after) = after.strip_prefix(&["of"][..])
    {
        at = skip(after, "the this");
        let after_thing = strip_things(at)?;
        return tail_strength(after_thing, Strength::NeedsDress);
    }
    // <prefix> <thing> ...
    if let Some((first, rest)) = words.split_first()
        && is_one_of(PREFIXES, first)
        && let Some(after_thing) = strip_things(rest)
    {
        return tail_strength(after_thing, Strength::NeedsEllipsis);
    }
    // <thing> [verb] <state>
    let after_thing = strip_things(skip(words, "the"))?;
    match tail_strength(after_thing, Strength::NeedsEllipsis)? {
        Strength::Strong => Some(Strength::Strong),
        _ => None,
    }
}

/// Words of the space-separated `set` at the start of `words`, skipped.
fn skip<'w>(mut words: &'w [&'w str], set: &str) -> &'w [&'w str] {
    while let Some((first, rest)) = words.split_first()
        && is_one_of(set, first)
    {
        words = rest;
    }
    words
}

/// One or two things at the start of `words` (`code`, `file content`), stripped.
fn strip_things<'w>(words: &'w [&'w str]) -> Option<&'w [&'w str]> {
    let (first, rest) = words.split_first()?;
    if !is_one_of(THINGS, first) {
        return None;
    }
    Some(match rest.split_first() {
        Some((second, after)) if is_one_of(THINGS, second) => after,
        _ => rest,
    })
}

/// A state phrase at the start of `words` (after an optional verb), stripped.
fn strip_state<'w>(words: &'w [&'w str]) -> Option<&'w [&'w str]> {
    let words = skip(words, VERBS);
    STATES
        .split(", ")
        .filter_map(|state| {
            let mut rest = words;
            for word in state.split(' ') {
                let (first, after) = rest.split_first()?;
                if *first != word {
                    return None;
                }
                rest = after;
            }
            Some(rest)
        })
        .min_by_key(|rest| rest.len())
}

/// How strong a phrase is, given what follows its thing: nothing (`without`), a state (strong),
/// `here` / `goes here` (needs dress); anything else is no placeholder.
fn tail_strength(tail: &[&str], without: Strength) -> Option<Strength> {
    if tail.is_empty() {
        return Some(without);
    }
    if strip_state(tail).is_some_and(<[&str]>::is_empty) {
        return Some(Strength::Strong);
    }
    let here = skip(tail, "goes go is are");
    (here == ["here"]).then_some(Strength::NeedsDress)
}

/// Chinese qualifiers (space-separated, longest first where one begins another): "the rest",
/// "here", "the original".
const CN_QUALIFIERS: &str = "此处 这里 中间 其余 其他 其它 以下 以上 后续 下面 上面 剩余 剩下 后面 原有 原来 现有 未修改 未改动";
/// Chinese things: code, content, part, implementation...
const CN_THINGS: &str = "代码块 代码 内容 部分 实现 函数 方法 逻辑 配置 行";
/// Chinese adverbs before a state: keep, all, still, already.
const CN_ADVERBS: &str = "保持 均 都 全部 仍然 依然 仍 已 被 皆";
/// Chinese states: unchanged, same as above, omitted, not modified.
const CN_STATES: &str =
    "不变 未变 相同 同上 一样 照旧 省略 略去 从略 略 未改动 未修改 无变化 无改动";

/// The strength of a Chinese phrase (whitespace removed), `None` when it is no placeholder.
fn chinese_phrase(core: &str) -> Option<Strength> {
    let mut rest = core;
    let mut qualified = false;
    if let Some(q) = CN_QUALIFIERS.split(' ').find(|q| rest.starts_with(q)) {
        rest = &rest[q.len()..];
        qualified = true;
    }
    rest = rest.strip_prefix('的').unwrap_or(rest);
    if let Some(thing) = CN_THINGS.split(' ').find(|t| rest.starts_with(t)) {
        rest = &rest[thing.len()..];
        qualified = true;
    }
    while let Some(adverb) = CN_ADVERBS.split(' ').find(|a| rest.starts_with(a)) {
        rest = &rest[adverb.len()..];
    }
    let state = CN_STATES.split(' ').find(|s| rest.starts_with(s))?;
    rest = &rest[state.len()..];
    // What may follow a state: 了 / 的, an amount (若干, 部分, 100), a thing (行, 代码).
    rest = rest.strip_prefix('了').unwrap_or(rest);
    rest = rest.strip_prefix('的').unwrap_or(rest);
    for amount in ["若干", "部分", "其余", "其他", "中间"] {
        rest = rest.strip_prefix(amount).unwrap_or(rest);
    }
    rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if let Some(thing) = CN_THINGS.split(' ').find(|t| rest.starts_with(t)) {
        rest = &rest[thing.len()..];
        qualified = true;
    }
    if !rest.is_empty() {
        return None;
    }
    Some(if qualified {
        Strength::Strong
    } else {
        Strength::NeedsDress
    })
}

#[cfg(test)]
mod tests;
