//! The part a [`Selection`] asks for, in a file held whole in memory: characters of text, bytes,
//! or lines, with the span shown and the total; and the clamping rules a streamed read shares.

use super::count::from_index;
use super::part::{ReadError, Selection, Span};

/// The selected part of `text`, the shown span (start, end) and the total, in characters (or
/// lines for line selections).
pub fn select_text(text: &str, selection: Selection) -> Result<(&str, Span), ReadError> {
    if let Selection::Lines(first, last) = selection {
        return select_lines(text, first, last);
    }
    let total = text.chars().count() as u64;
    let (start, end) = char_span(selection, total);
    let byte_at = |chars: u64| {
        text.char_indices()
            .nth(usize::try_from(chars).unwrap_or(usize::MAX))
            .map_or(text.len(), |(at, _)| at)
    };
    Ok((
        &text[byte_at(start)..byte_at(end)],
        Span { start, end, total },
    ))
}

/// The part of `bytes` that `selection` names, with its span.
pub fn select_bytes(bytes: &[u8], selection: Selection) -> Result<(&[u8], Span), ReadError> {
    if let Selection::Lines(first, last) = selection {
        let (span, shown) = line_bytes(bytes, first, last)?;
        return Ok((&bytes[span], shown));
    }
    let total = bytes.len() as u64;
    let (start, end) = char_span(selection, total);
    let (start_at, end_at) = (
        from_index(start).min(bytes.len()),
        from_index(end).min(bytes.len()),
    );
    Ok((&bytes[start_at..end_at], Span { start, end, total }))
}

/// The byte span of lines `first..=last` (1-based), the lines shown, and the line count.
pub fn line_bytes(
    bytes: &[u8],
    first: u64,
    last: Option<u64>,
) -> Result<(std::ops::Range<usize>, Span), ReadError> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .filter(|at| *at < bytes.len())
        .collect();
    let total = starts.len() as u64;
    let (from, to) = line_span(first, last, total)?;
    let begin = starts
        .get(from_index(from - 1))
        .copied()
        .unwrap_or(bytes.len());
    let finish = starts.get(from_index(to)).copied().unwrap_or(bytes.len());
    Ok((
        begin..finish,
        Span {
            start: from,
            end: to,
            total,
        },
    ))
}

/// The (start, end) of a head/tail/range/whole selection over `total` units, clamped.
pub fn char_span(selection: Selection, total: u64) -> (u64, u64) {
    match selection {
        Selection::Whole | Selection::Lines(..) => (0, total),
        Selection::Head(n) => (0, n.min(total)),
        Selection::Tail(n) => (total.saturating_sub(n), total),
        Selection::Range(start, end) => {
            let start = start.min(total);
            (start, end.unwrap_or(total).clamp(start, total))
        }
    }
}

/// Lines `first..=last` (1-based) of `total`: an error past the end, clamped otherwise.
pub fn line_span(first: u64, last: Option<u64>, total: u64) -> Result<(u64, u64), ReadError> {
    if first > total.max(1) || (total == 0 && first > 1) {
        return Err(ReadError::PastTheEnd { line: first, total });
    }
    let last = last.unwrap_or(total).min(total).max(first);
    Ok((first, last))
}

/// The lines `first..=last` of `text` (its last line when `last` is `None`), with their span.
pub fn select_lines(text: &str, first: u64, last: Option<u64>) -> Result<(&str, Span), ReadError> {
    // Line starts follow a '\n', so the byte span falls on character boundaries.
    let (span, shown) = line_bytes(text.as_bytes(), first, last)?;
    Ok((&text[span], shown))
}
