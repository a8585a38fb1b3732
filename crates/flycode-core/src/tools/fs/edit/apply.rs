//! Applying `fs.edit`'s replacements to a file's text: line endings, unique or every match, in
//! order, all or nothing. Pure text work; reading and writing the file is `edit.rs`'s.

use memchr::memmem;

use super::closest::{Closest, closest_lines};
use crate::tools::secrets::Secrets;

/// How many occurrences' line numbers an ambiguous match names.
const SHOWN_OCCURRENCES: usize = 5;

/// A file's line endings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LineEndings {
    /// `\n` only.
    Lf,
    /// `\r\n` only.
    Crlf,
    /// Both.
    Mixed,
    /// No line break at all.
    None,
}

impl LineEndings {
    /// Detects the line endings of `text`.
    pub(super) fn of(text: &str) -> LineEndings {
        let breaks = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        let crlf = memmem::find_iter(text.as_bytes(), b"\r\n").count();
        match (breaks, crlf) {
            (0, _) => LineEndings::None,
            (b, c) if b == c => LineEndings::Crlf,
            (_, 0) => LineEndings::Lf,
            _ => LineEndings::Mixed,
        }
    }

    /// The name in the result's data.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            LineEndings::Lf => "lf",
            LineEndings::Crlf => "crlf",
            LineEndings::Mixed => "mixed",
            LineEndings::None => "none",
        }
    }

    /// The forms of an edit's (oldText, newText) to look for, in order: a file of one style
    /// gets both texts in its style; a mixed file, the texts as written, then with LF, then
    /// with CRLF endings; a file without line breaks, the texts as written.
    fn forms(self, old: &str, new: &str) -> Vec<(String, String)> {
        match self {
            LineEndings::Lf => vec![(to_lf(old), to_lf(new))],
            LineEndings::Crlf => vec![(to_crlf(old), to_crlf(new))],
            LineEndings::None => vec![(old.to_owned(), new.to_owned())],
            LineEndings::Mixed => {
                let mut forms = vec![
                    (old.to_owned(), new.to_owned()),
                    (to_lf(old), to_lf(new)),
                    (to_crlf(old), to_crlf(new)),
                ];
                forms.dedup_by(|a, b| a.0 == b.0);
                forms
            }
        }
    }
}

fn to_lf(text: &str) -> String {
    text.replace("\r\n", "\n")
}

fn to_crlf(text: &str) -> String {
    to_lf(text).replace('\n', "\r\n")
}

/// One replacement, as the call gives it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Edit<'a> {
    /// The text to find.
    pub old: &'a str,
    /// Its replacement.
    pub new: &'a str,
    /// Replace every occurrence.
    pub all: bool,
}

/// The edited text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct EditedText {
    /// The text after every edit.
    pub text: String,
    /// Occurrences replaced, all edits together.
    pub replacements: usize,
}

/// Why the edits could not be applied; `index` is the failing edit's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum EditFailure {
    /// Its oldText does not occur.
    NoMatch {
        /// The edit.
        index: usize,
        /// The lines most like it, if any are.
        closest: Option<Closest>,
    },
    /// Its oldText occurs more than once and `replaceAll` is not set.
    Ambiguous {
        /// The edit.
        index: usize,
        /// How often it occurs.
        count: usize,
        /// The 1-based lines of the first few occurrences.
        lines: Vec<usize>,
    },
    /// Its oldText overlaps a secret's text: replacing it would show the rest of the secret
    /// unmasked (a character put inside a key stops it from being the key).
    Secret {
        /// The edit.
        index: usize,
    },
}

/// Applies `edits` in order, each to the result of the one before; the first that fails stops
/// everything. No edit may replace a byte of a secret's occurrence nor put text inside one
/// (PROTOCOL.md §9 (Secrets and masking)), so every secret stays whole, and masked, in every
/// text made on the way.
pub(super) fn apply(
    text: &str,
    endings: LineEndings,
    edits: &[Edit<'_>],
    secrets: &Secrets,
) -> Result<EditedText, EditFailure> {
    let mut current = text.to_owned();
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let forms = endings.forms(edit.old, edit.new);
        // Occurrences do not overlap: `aa` occurs twice in `aaaa`, not three times.
        let found = forms.iter().find_map(|(old, new)| {
            let offsets: Vec<usize> =
                memmem::find_iter(current.as_bytes(), old.as_bytes()).collect();
            (!offsets.is_empty()).then_some((old, new, offsets))
        });
        let Some((old, new, offsets)) = found else {
            // Shown from a masked copy: the lines are cut at 200 characters, and a key that
            // crosses the cut would show its start (the result's own masking sees no whole key).
            let mut masked = current.clone().into_bytes();
            secrets.mask_bytes(&mut masked);
            let masked = String::from_utf8_lossy(&masked);
            return Err(EditFailure::NoMatch {
                index,
                closest: closest_lines(&masked, edit.old),
            });
        };
        if offsets.len() > 1 && !edit.all {
            return Err(EditFailure::Ambiguous {
                index,
                count: offsets.len(),
                lines: line_numbers(&current, &offsets[..offsets.len().min(SHOWN_OCCURRENCES)]),
            });
        }
        if touches_secret(&current, &offsets, old.len(), secrets) {
            return Err(EditFailure::Secret { index });
        }
        current = splice(&current, &offsets, old.len(), new);
        replacements += offsets.len();
    }
    Ok(EditedText {
        text: current,
        replacements,
    })
}

/// Whether a replacement of the `len` bytes at any of `offsets` would change a secret's
/// occurrence in `text`: it overlaps one, or (replacing nothing) lies strictly inside one.
fn touches_secret(text: &str, offsets: &[usize], len: usize, secrets: &Secrets) -> bool {
    let spans = secrets.spans(text.as_bytes());
    offsets.iter().any(|&at| {
        spans
            .iter()
            .any(|&(start, end)| at < end && start < at + len && (len > 0 || at > start))
    })
}

/// `text` with the `len` bytes at each of the ascending, non-overlapping `offsets` replaced by
/// `new`. (The offsets are those of a match of valid UTF-8 in valid UTF-8: char boundaries.)
fn splice(text: &str, offsets: &[usize], len: usize, new: &str) -> String {
    let grown = text.len() + offsets.len() * new.len();
    let mut out = String::with_capacity(grown.saturating_sub(offsets.len() * len));
    let mut from = 0;
    for &at in offsets {
        out.push_str(&text[from..at]);
        out.push_str(new);
        from = at + len;
    }
    out.push_str(&text[from..]);
    out
}

/// The 1-based line of each of the ascending byte `offsets` of `text`.
fn line_numbers(text: &str, offsets: &[usize]) -> Vec<usize> {
    let mut line = 1;
    let mut from = 0;
    offsets
        .iter()
        .map(|&offset| {
            line += memchr::memchr_iter(b'\n', &text.as_bytes()[from..offset]).count();
            from = offset;
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

    /// Applies with no secret set.
    fn apply(
        text: &str,
        endings: LineEndings,
        edits: &[Edit<'_>],
    ) -> Result<EditedText, EditFailure> {
        super::apply(text, endings, edits, &Secrets::from_values(Vec::new()))
    }

    #[test]
    fn no_edit_touches_a_secret() {
        let secrets = Secrets::from_values([KEY.to_owned()]);
        let text = format!("config:\n  key: {KEY}\n");
        let with = |edits: &[Edit<'_>]| super::apply(&text, LineEndings::Lf, edits, &secrets);
        // A character put inside the key, its first or last bytes replaced, the key deleted: each
        // would show (in the diff, the closest lines or a later read) the key's text unmasked.
        for edit in [
            edit("sk-", "sk-#"),
            edit("key: s", "key: "),
            edit("56789", "56789#"),
            edit("9\n", "\n"),
            edit(KEY, ""),
        ] {
            assert_eq!(
                with(&[edit]),
                Err(EditFailure::Secret { index: 0 }),
                "{edit:?}"
            );
        }
        // A later edit is judged on the text the earlier ones left.
        assert_eq!(
            with(&[edit("config", "settings"), edit("AbCd", "AbXCd")]),
            Err(EditFailure::Secret { index: 1 })
        );
        // Text around the key is the model's to change.
        let applied = with(&[edit("key: ", "api_key: "), edit("config:\n", "")]).unwrap();
        assert_eq!(applied.text, format!("  api_key: {KEY}\n"));
    }

    #[test]
    fn the_closest_lines_of_a_miss_show_no_part_of_a_secret() {
        let secrets = Secrets::from_values([KEY.to_owned()]);
        // The key crosses the 200th character, where a shown line is cut.
        let line = format!("{} key = {KEY}", "x".repeat(190));
        let text = format!("{line}\n");
        let old = format!("{} key = nothing", "x".repeat(190));
        let Err(EditFailure::NoMatch { closest, .. }) =
            super::apply(&text, LineEndings::Lf, &[edit(&old, "y")], &secrets)
        else {
            panic!("expected no match");
        };
        let shown = closest.expect("a closest line").lines.join("\n");
        assert!(shown.contains("key = *"), "{shown}");
        assert!(!shown.contains(&KEY[..4]), "{shown}");
    }

    fn edit<'a>(old: &'a str, new: &'a str) -> Edit<'a> {
        Edit {
            old,
            new,
            all: false,
        }
    }

    #[test]
    fn detects_line_endings() {
        assert_eq!(LineEndings::of("a\nb\n"), LineEndings::Lf);
        assert_eq!(LineEndings::of("a\r\nb\r\n"), LineEndings::Crlf);
        assert_eq!(LineEndings::of("a\r\nb\n"), LineEndings::Mixed);
        assert_eq!(LineEndings::of("a"), LineEndings::None);
    }

    #[test]
    fn edits_apply_in_order_to_the_result_of_the_one_before() {
        let applied = apply(
            "one\ntwo\nthree\n",
            LineEndings::Lf,
            &[edit("two", "2"), edit("2\nthree", "2\n3")],
        )
        .unwrap();
        assert_eq!(applied.text, "one\n2\n3\n");
        assert_eq!(applied.replacements, 2);
    }

    #[test]
    fn line_endings_of_the_texts_follow_the_file() {
        let crlf = apply(
            "a\r\nb\r\nc\r\n",
            LineEndings::Crlf,
            &[edit("a\nb\n", "x\ny\nz\n")],
        )
        .unwrap();
        assert_eq!(crlf.text, "x\r\ny\r\nz\r\nc\r\n");
        let lf = apply("a\nb\n", LineEndings::Lf, &[edit("a\r\nb", "b\r\na")]).unwrap();
        assert_eq!(lf.text, "b\na\n");
        // A mixed file: as written first, then LF, then CRLF.
        let mixed = "a\r\nb\nc\r\n";
        let text = apply(mixed, LineEndings::Mixed, &[edit("b\r\nc", "B\nC")]).unwrap();
        assert_eq!(text.text, "a\r\nB\nC\r\n");
        let text = apply(mixed, LineEndings::Mixed, &[edit("a\nb", "A\r\nB")]).unwrap();
        assert_eq!(text.text, "A\r\nB\nc\r\n");
    }

    #[test]
    fn ambiguity_names_the_count_and_lines() {
        let failure = apply(
            "x\nfoo\nfoo\ny\nfoo\n",
            LineEndings::Lf,
            &[edit("x", "X"), edit("foo", "bar")],
        )
        .unwrap_err();
        assert_eq!(
            failure,
            EditFailure::Ambiguous {
                index: 1,
                count: 3,
                lines: vec![2, 3, 5]
            }
        );
        let all = apply(
            "foo foo\nfoo\n",
            LineEndings::Lf,
            &[Edit {
                old: "foo",
                new: "",
                all: true,
            }],
        )
        .unwrap();
        assert_eq!((all.text.as_str(), all.replacements), (" \n\n", 3));
    }

    #[test]
    fn a_missing_text_shows_the_closest_lines() {
        let failure = apply(
            "fn main() {\n    run();\n}\n",
            LineEndings::Lf,
            &[edit("run()", "go()"), edit("    go ();", "")],
        )
        .unwrap_err();
        let EditFailure::NoMatch { index, closest } = failure else {
            panic!("{failure:?}");
        };
        assert_eq!(index, 1);
        assert_eq!(closest.unwrap().first_line, 2);
    }
}
