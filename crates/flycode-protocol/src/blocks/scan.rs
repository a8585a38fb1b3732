//! Stateless scanners for the start of a block: thematic breaks, headings, fences, list items,
//! HTML block starts and what may interrupt a paragraph. Ports of pulldown-cmark 0.13's
//! `scanners.rs` and `firstpass.rs` helpers (MIT, Copyright 2015 Google Inc.), kept byte for byte
//! where they decide block structure, so flycode's block reader and pulldown-cmark agree.

/// Whether `c` is ASCII whitespace as CommonMark's scanners count it (`\t`..`\r` and space).
fn is_ascii_whitespace(c: u8) -> bool {
    (0x09..=0x0d).contains(&c) || c == b' '
}

fn is_ascii_whitespace_no_nl(c: u8) -> bool {
    c == b'\t' || c == 0x0b || c == 0x0c || c == b' '
}

fn scan_while(data: &[u8], mut f: impl FnMut(&u8) -> bool) -> usize {
    data.iter().take_while(|b| f(b)).count()
}

/// How many `c` start `data`.
pub(super) fn scan_ch_repeat(data: &[u8], c: u8) -> usize {
    scan_while(data, |&b| b == c)
}

/// Spaces, tabs, vertical tabs and form feeds at the start of `data`.
pub(super) fn scan_whitespace_no_nl(data: &[u8]) -> usize {
    scan_while(data, |&b| is_ascii_whitespace_no_nl(b))
}

/// The length of a line end at the start of `bytes`; `Some(0)` at the end of the text.
pub(super) fn scan_eol(bytes: &[u8]) -> Option<usize> {
    match bytes {
        [] => Some(0),
        [b'\n', ..] => Some(1),
        [b'\r', b'\n', ..] => Some(2),
        [b'\r', ..] => Some(1),
        _ => None,
    }
}

/// The length of a blank line (its whitespace and its end) at the start of `bytes`.
pub(super) fn is_blank_line(bytes: &[u8]) -> Option<usize> {
    let i = scan_whitespace_no_nl(bytes);
    scan_eol(&bytes[i..]).map(|n| i + n)
}

/// Where the next line starts.
pub(super) fn scan_nextline(bytes: &[u8]) -> usize {
    memchr::memchr(b'\n', bytes).map_or(bytes.len(), |x| x + 1)
}

/// A closing fence of at least `n` `fence_char`s: its length without the line end.
pub(super) fn scan_closing_code_fence(bytes: &[u8], fence_char: u8, n: usize) -> Option<usize> {
    if bytes.is_empty() {
        return Some(0);
    }
    let found = scan_ch_repeat(bytes, fence_char);
    if found < n {
        return None;
    }
    let i = found + scan_ch_repeat(&bytes[found..], b' ');
    scan_eol(&bytes[i..]).map(|_| i)
}

/// A thematic break: `Ok(length with the line end)`, else `Err(offset before which none can
/// start)`.
pub(super) fn is_hrule(bytes: &[u8]) -> Result<usize, usize> {
    if bytes.len() < 3 {
        return Err(0);
    }
    let c = bytes[0];
    if !(c == b'*' || c == b'-' || c == b'_') {
        return Err(0);
    }
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' | b'\r' => {
                i += scan_eol(&bytes[i..]).unwrap_or(0);
                break;
            }
            c2 if c2 == c => n += 1,
            b' ' | b'\t' => {}
            _ => return Err(i),
        }
        i += 1;
    }
    if n >= 3 { Ok(i) } else { Err(i) }
}

/// An ATX heading's opening `#`s.
pub(super) fn is_atx_heading(data: &[u8]) -> bool {
    let level = scan_ch_repeat(data, b'#');
    (1..=6).contains(&level) && data.get(level).copied().is_none_or(is_ascii_whitespace)
}

/// A setext underline: its length with the line end.
pub(super) fn scan_setext_heading(data: &[u8]) -> Option<usize> {
    let c = *data.first()?;
    if c != b'=' && c != b'-' {
        return None;
    }
    let i = 1 + scan_ch_repeat(&data[1..], c);
    Some(i + is_blank_line(&data[i..])?)
}

/// An opening code fence: its length and character.
pub(super) fn scan_code_fence(data: &[u8]) -> Option<(usize, u8)> {
    let c = *data.first()?;
    if !(c == b'`' || c == b'~') {
        return None;
    }
    let i = 1 + scan_ch_repeat(&data[1..], c);
    if i < 3 {
        return None;
    }
    if c == b'`' {
        let suffix = &data[i..];
        if suffix[..scan_nextline(suffix)].contains(&b'`') {
            return None;
        }
    }
    Some((i, c))
}

fn is_blockquote_start(data: &[u8]) -> bool {
    data.first() == Some(&b'>')
}

/// (bytes, spaces) of up to `max` columns of indentation.
fn calc_indent(text: &[u8], max: usize) -> (usize, usize) {
    let mut spaces = 0;
    let mut offset = 0;
    for (i, &b) in text.iter().enumerate() {
        offset = i;
        match b {
            b' ' => {
                spaces += 1;
                if spaces == max {
                    break;
                }
            }
            b'\t' => {
                let new_spaces = spaces + 4 - (spaces & 3);
                if new_spaces > max {
                    break;
                }
                spaces = new_spaces;
            }
            _ => break,
        }
    }
    (offset, spaces)
}

/// (digits, value) of up to `limit` decimal digits, stopping before an overflow.
fn parse_decimal(bytes: &[u8], limit: usize) -> (usize, usize) {
    let mut count = 0;
    let mut acc = 0usize;
    for &b in bytes.iter().take(limit) {
        if !b.is_ascii_digit() {
            break;
        }
        match acc
            .checked_mul(10)
            .and_then(|t| t.checked_add(usize::from(b - b'0')))
        {
            Some(number) => {
                count += 1;
                acc = number;
            }
            None => break,
        }
    }
    (count, acc)
}

/// A list item's marker as paragraph interruption sees it: (bytes, delimiter, start number).
fn scan_listitem(bytes: &[u8]) -> Option<(usize, u8, usize)> {
    let mut c = *bytes.first()?;
    let (w, start) = match c {
        b'-' | b'+' | b'*' => (1, 0),
        b'0'..=b'9' => {
            let (length, start) = parse_decimal(bytes, 9);
            c = *bytes.get(length)?;
            if !(c == b'.' || c == b')') {
                return None;
            }
            (length + 1, start)
        }
        _ => return None,
    };
    let (mut postn, postindent) = calc_indent(&bytes[w..], 5);
    if postindent == 0 {
        scan_eol(&bytes[w..])?;
    } else if postindent > 4 {
        postn = 1;
    }
    if is_blank_line(&bytes[w..]).is_some() {
        postn = 0;
    }
    Some((w + postn, c, start))
}

/// Whether a line starting with `bytes` (after its containers) ends a paragraph.
/// `current_container`: every container of the paragraph continued on this line.
pub(super) fn is_paragraph_interrupt(bytes: &[u8], current_container: bool) -> bool {
    scan_eol(bytes).is_some()
        || is_hrule(bytes).is_ok()
        || is_atx_heading(bytes)
        || scan_code_fence(bytes).is_some()
        || is_blockquote_start(bytes)
        || scan_listitem(bytes).is_some_and(|(ix, delim, index)| {
            !current_container
                // Neither an empty item nor an ordered one not starting at 1 interrupts.
                || ((delim == b'*' || delim == b'-' || delim == b'+' || index == 1)
                    && is_blank_line(&bytes[ix..]).is_none())
        })
        || bytes.starts_with(b"<")
            && (html_end_tag(&bytes[1..]).is_some() || starts_html_block_type_6(&bytes[1..]))
}

/// The end condition of an HTML block of types 1 to 5 starting `<` + `text`.
pub(super) fn html_end_tag(text: &[u8]) -> Option<&'static str> {
    const BEGIN_TAGS: [(&[u8], &str); 4] = [
        (b"pre", "</pre>"),
        (b"style", "</style>"),
        (b"script", "</script>"),
        (b"textarea", "</textarea>"),
    ];
    for (begin, end) in BEGIN_TAGS {
        let len = begin.len();
        if text.len() < len {
            break;
        }
        if !text[..len].eq_ignore_ascii_case(begin) {
            continue;
        }
        if text.len() == len || is_ascii_whitespace(text[len]) || text[len] == b'>' {
            return Some(end);
        }
    }
    for (begin, end) in [(&b"!--"[..], "-->"), (b"?", "?>"), (b"![CDATA[", "]]>")] {
        if text.starts_with(begin) {
            return Some(end);
        }
    }
    if text.len() > 1 && text[0] == b'!' && text[1].is_ascii_alphabetic() {
        Some(">")
    } else {
        None
    }
}

/// The block-level HTML tag names (CommonMark's type 6), sorted.
const HTML_TAGS: [&str; 62] = [
    "address",
    "article",
    "aside",
    "base",
    "basefont",
    "blockquote",
    "body",
    "caption",
    "center",
    "col",
    "colgroup",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frame",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hr",
    "html",
    "iframe",
    "legend",
    "li",
    "link",
    "main",
    "menu",
    "menuitem",
    "nav",
    "noframes",
    "ol",
    "optgroup",
    "option",
    "p",
    "param",
    "search",
    "section",
    "summary",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "title",
    "tr",
    "track",
    "ul",
];

fn is_html_tag(tag: &[u8]) -> bool {
    HTML_TAGS
        .binary_search_by(|probe| {
            probe
                .as_bytes()
                .iter()
                .zip(tag)
                .find_map(|(&a, &b)| match a.cmp(&(b | 0x20)) {
                    std::cmp::Ordering::Equal => None,
                    inequality => Some(inequality),
                })
                .unwrap_or_else(|| probe.len().cmp(&tag.len()))
        })
        .is_ok()
}

/// Whether `<` + `data` starts an HTML block of type 6.
pub(super) fn starts_html_block_type_6(data: &[u8]) -> bool {
    let i = usize::from(data.first() == Some(&b'/'));
    let tail = &data[i..];
    let n = scan_while(tail, u8::is_ascii_alphanumeric);
    if !is_html_tag(&tail[..n]) {
        return false;
    }
    let tail = &tail[n..];
    tail.is_empty()
        || matches!(tail[0], b' ' | b'\t' | b'\r' | b'\n' | b'>')
        || tail.starts_with(b"/>")
}

/// Whether `data` (starting with `<`) is a whole open or closing tag followed by a blank rest of
/// the line: an HTML block of type 7.
pub(super) fn is_html_type_7(data: &[u8]) -> bool {
    scan_html_tag(data).is_some_and(|i| is_blank_line(&data[i..]).is_some())
}

/// One open or closing tag on one line: the index after it.
fn scan_html_tag(data: &[u8]) -> Option<usize> {
    let close = usize::from(data.get(1) == Some(&b'/'));
    let l = scan_while(&data[1 + close..], u8::is_ascii_alphabetic);
    if l == 0 {
        return None;
    }
    let mut i = 1 + close + l;
    i += scan_while(&data[i..], |&c| c == b'-' || c.is_ascii_alphanumeric());
    if close == 0 {
        loop {
            let old_i = i;
            i += scan_whitespace_no_nl(&data[i..]);
            // A line end inside the tag: no type 7 block (it cannot span lines).
            scan_eol(&data[i..]).map_or(Some(()), |_| None)?;
            if let Some(b'/') | Some(b'>') = data.get(i) {
                break;
            }
            if old_i == i {
                return None;
            }
            i = scan_attribute(data, i)?;
        }
    }
    i += scan_whitespace_no_nl(&data[i..]);
    if close == 0 && data.get(i) == Some(&b'/') {
        i += 1;
    }
    (data.get(i) == Some(&b'>')).then_some(i + 1)
}

fn scan_attribute_name(data: &[u8]) -> Option<usize> {
    let (&c, tail) = data.split_first()?;
    if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
        Some(
            1 + scan_while(tail, |&c| {
                c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'-')
            }),
        )
    } else {
        None
    }
}

/// An attribute, on one line: the index after it.
fn scan_attribute(data: &[u8], mut ix: usize) -> Option<usize> {
    ix += scan_attribute_name(&data[ix..])?;
    let after_name = ix;
    ix = scan_whitespace_one_line(data, ix)?;
    if data.get(ix) != Some(&b'=') {
        return Some(after_name);
    }
    ix = scan_whitespace_one_line(data, ix + 1)?;
    match *data.get(ix)? {
        quote @ (b'"' | b'\'') => {
            ix += 1;
            while ix < data.len() {
                if data[ix] == quote {
                    return Some(ix + 1);
                }
                scan_eol(&data[ix..]).map_or(Some(()), |_| None)?;
                ix += 1;
            }
            None
        }
        b' ' | b'=' | b'>' | b'<' | b'`' | b'\n' | b'\r' => None,
        _ => Some(
            ix + scan_while(&data[ix..], |&c| {
                !matches!(
                    c,
                    b'\'' | b'"' | b' ' | b'=' | b'>' | b'<' | b'`' | b'\n' | b'\r'
                )
            }),
        ),
    }
}

/// Whitespace up to a line end, which fails the scan (a type 7 tag is on one line).
fn scan_whitespace_one_line(data: &[u8], mut i: usize) -> Option<usize> {
    while i < data.len() {
        if !is_ascii_whitespace(data[i]) {
            return Some(i);
        }
        scan_eol(&data[i..]).map_or(Some(()), |_| None)?;
        i += 1;
    }
    Some(i)
}
