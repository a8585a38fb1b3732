//! Making untrusted text safe to show on one line: control, bidirectional and zero-width
//! characters become visible escapes, so what a person reads is what will run.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal or a header line as it is: control characters, line and
/// paragraph separators, bidirectional controls, and Unicode's default-ignorable code points
/// (zero-width characters, soft hyphen, fillers, variation selectors, tag characters).
pub fn is_hidden_or_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// Escapes every control, bidirectional and zero-width character: `\n`, `\t`, `\r` as such,
/// the rest as `\u{XXXX}`. Text without such characters is returned as it is.
pub fn escape_for_display(text: &str) -> Cow<'_, str> {
    if !text.contains(is_hidden_or_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_hidden_or_control(c) => out.push_str(&format!("\\u{{{:04X}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Like [`escape_for_display`], but keeps line breaks and tabs: for whole blocks of untrusted
/// text (file contents, program output) printed to a terminal, where an escape sequence could
/// recolour the screen, move the cursor or rewrite the clipboard (OSC 52).
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    if !text.contains(|c: char| c != '\n' && c != '\t' && is_hidden_or_control(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if is_hidden_or_control(c) => out.push_str(&format!("\\u{{{:04X}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_keeps_lines_but_not_escape_sequences() {
        assert_eq!(
            escape_for_terminal("a\n\tb\u{1b}]52;c;SGk=\u{7}\u{9b}\u{202E}"),
            "a\n\tb\\u{001B}]52;c;SGk=\\u{0007}\\u{009B}\\u{202E}"
        );
    }

    #[test]
    fn plain_text_is_untouched() {
        assert!(matches!(
            escape_for_display("fs.read 中文"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escapes_default_ignorable_characters() {
        for c in [
            '\u{00AD}',
            '\u{180E}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{2066}',
        ] {
            assert!(is_hidden_or_control(c), "U+{:04X}", u32::from(c));
        }
        assert!(!is_hidden_or_control('中'));
        assert!(!is_hidden_or_control('é'));
    }

    #[test]
    fn escapes_terminal_sequences_and_invisible_characters() {
        assert_eq!(
            escape_for_display("a\u{1b}]52;c;x\u{7}\nb\u{202E}c\u{200B}"),
            "a\\u{001B}]52;c;x\\u{0007}\\nb\\u{202E}c\\u{200B}"
        );
    }
}
