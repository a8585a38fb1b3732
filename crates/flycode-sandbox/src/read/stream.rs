//! Reading a part of a file of any size through its open handle, block by block: characters
//! forward from the start (`head`, `range`), backwards from the end (`tail`), lines forward, or a
//! byte span with one seek. Memory stays bounded by the part (and one block); what was not read is
//! not counted. A text read first checks the file's start ([`sniff`]).

use std::io::{Read, Seek, SeekFrom};

use super::count::{advance, after_newline, count_char_starts, count_newlines, from_index};
use super::part::{ReadError, ReadPart, ReadPlan, Selection, Shown, Span};
use super::select::{char_span, line_span};

/// Reads the selected part of a file too large to read whole, block by block.
pub fn read_part<R: Read + Seek>(
    file: &mut R,
    size: u64,
    selection: Selection,
    text: bool,
    plan: &ReadPlan,
) -> Result<ReadPart, ReadError> {
    if text {
        sniff(file, plan)?;
    }
    let mut part = match selection {
        Selection::Lines(first, last) => forward_lines(file, first, last, plan)?,
        Selection::Head(n) if text => forward_chars(file, 0, Some(n), plan)?,
        Selection::Range(start, end) if text => forward_chars(file, start, end, plan)?,
        // Not streamed by `run`, but a whole file is a range like any other.
        Selection::Whole if text => forward_chars(file, 0, None, plan)?,
        Selection::Tail(n) if text => backward_chars(file, size, n, plan)?,
        Selection::Whole | Selection::Head(_) | Selection::Tail(_) | Selection::Range(..) => {
            byte_span(file, size, selection, plan)?
        }
    };
    part.shown.bytes = part.shown.bytes.map(|(start, end, _)| (start, end, size));
    if text && let Err(e) = std::str::from_utf8(&part.bytes) {
        let start = part.shown.bytes.map_or(0, |(start, _, _)| start);
        return Err(ReadError::NotUtf8 {
            offset: start + e.valid_up_to() as u64,
        });
    }
    Ok(part)
}

/// The whole file, read into memory (the caller has checked its size).
pub fn read_whole<R: Read>(file: &mut R, size: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    super::aligned::read_to_end_aligned(file, &mut bytes).map_err(ReadError::Io)?;
    Ok(bytes)
}

/// Up to `margin` bytes on each side of bytes `start..end` of the file: the view around a
/// part in which a secret that the part's edge cuts is still recognised.
pub fn margins<R: Read + Seek>(
    file: &mut R,
    start: u64,
    end: u64,
    margin: u64,
) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
    let from = start.saturating_sub(margin);
    seek(file, from)?;
    let mut before = vec![0; from_index(start - from)];
    let got = read_full(file, &mut before)?;
    before.truncate(got);
    seek(file, end)?;
    let mut after = vec![0; from_index(margin)];
    let got = read_full(file, &mut after)?;
    after.truncate(got);
    Ok((before, after))
}

/// Reads into `buf` until it is full or the file ends; the count read.
pub fn read_full<R: Read>(file: &mut R, buf: &mut [u8]) -> Result<usize, ReadError> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(filled)
}

/// Moves to `offset` from the file's start.
pub fn seek<R: Seek>(file: &mut R, offset: u64) -> Result<(), ReadError> {
    file.seek(SeekFrom::Start(offset))
        .map(|_| ())
        .map_err(ReadError::Io)
}

/// A streamed file must look like text from its start: UTF-8 (a character cut by the end of the
/// sniffed block is fine) without a NUL byte. Otherwise a `tail` of a binary file could pass for
/// text when its last bytes happen to be valid.
fn sniff<R: Read + Seek>(file: &mut R, plan: &ReadPlan) -> Result<(), ReadError> {
    seek(file, 0)?;
    let mut buf = vec![0; plan.sniff];
    let got = read_full(file, &mut buf)?;
    let start = &buf[..got];
    if let Some(at) = start.iter().position(|b| *b == 0) {
        return Err(ReadError::NotText { offset: at as u64 });
    }
    match std::str::from_utf8(start) {
        Ok(_) => Ok(()),
        // Cut mid-character by the block's end, and the file goes on: judged with the next block.
        Err(e) if e.error_len().is_none() && got == plan.sniff => Ok(()),
        Err(e) => Err(ReadError::NotUtf8 {
            offset: e.valid_up_to() as u64,
        }),
    }
}

/// Characters `from..to` (`to` `None`: to the end), streamed from the start of the file: the
/// characters before the part must be read to be counted, and must be UTF-8 to be characters.
fn forward_chars<R: Read + Seek>(
    file: &mut R,
    from: u64,
    to: Option<u64>,
    plan: &ReadPlan,
) -> Result<ReadPart, ReadError> {
    seek(file, 0)?;
    let mut buf = vec![0; plan.block];
    let mut read = ForwardChars {
        from,
        to,
        pending: Vec::new(),
        pos: 0,
        chars: 0,
        part: Vec::new(),
        part_start: None,
    };
    loop {
        if let Some(to) = to
            && read.chars >= to
        {
            return Ok(read.reached(to));
        }
        let want = read.next_read(plan.block);
        let got = read_full(file, &mut buf[..want])?;
        if got == 0 {
            return read.at_end();
        }
        read.take(&buf[..got], plan)?;
    }
}

/// A forward read of characters `from..to` under way.
struct ForwardChars {
    from: u64,
    to: Option<u64>,
    /// Starts at file offset `pos`, after `chars` characters: the bytes of a character cut by the
    /// end of the previous block, then the block just read.
    pending: Vec<u8>,
    pos: u64,
    chars: u64,
    part: Vec<u8>,
    part_start: Option<u64>,
}

impl ForwardChars {
    /// How many bytes to read next: no more than the characters still wanted can take (4 bytes
    /// each), up to a block.
    fn next_read(&self, block: usize) -> usize {
        let wanted = if self.chars < self.from {
            self.from - self.chars
        } else {
            self.to.map_or(u64::MAX, |to| to - self.chars)
        };
        usize::try_from(wanted.saturating_mul(4))
            .unwrap_or(usize::MAX)
            .max(4)
            .min(block.max(1))
    }

    /// Takes in the bytes just read: skips the characters before the part, keeps those in it.
    fn take(&mut self, block: &[u8], plan: &ReadPlan) -> Result<(), ReadError> {
        self.pending.extend_from_slice(block);
        let valid_len = match std::str::from_utf8(&self.pending) {
            Ok(text) => text.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => {
                return Err(ReadError::NotUtf8 {
                    offset: self.pos + e.valid_up_to() as u64,
                });
            }
        };
        let text = std::str::from_utf8(&self.pending[..valid_len]).unwrap_or_default();
        let mut offset = 0;
        if self.chars < self.from {
            let (skipped, count) = advance(text, self.from - self.chars);
            offset = skipped;
            self.chars += count;
        }
        if self.chars >= self.from {
            self.part_start.get_or_insert(self.pos + offset as u64);
            let rest = &text[offset..];
            let (taken, count) = advance(rest, self.to.map_or(u64::MAX, |to| to - self.chars));
            self.part.extend_from_slice(&rest.as_bytes()[..taken]);
            self.chars += count;
            if self.part.len() as u64 > plan.max_part {
                return Err(ReadError::PartTooLarge);
            }
        }
        self.pos += valid_len as u64;
        self.pending.drain(..valid_len);
        Ok(())
    }

    /// The part once character `end` is reached, before the end of the file: no total is known.
    fn reached(self, end: u64) -> ReadPart {
        let start = self.part_start.unwrap_or(self.pos);
        ReadPart {
            shown: Shown {
                start: Some(self.from),
                end: Some(end),
                total: None,
                count: end - self.from,
                bytes: Some((start, start + self.part.len() as u64, 0)),
            },
            bytes: self.part,
        }
    }

    /// The part at the end of the file: every character is counted.
    fn at_end(self) -> Result<ReadPart, ReadError> {
        if !self.pending.is_empty() {
            return Err(ReadError::NotUtf8 { offset: self.pos });
        }
        let total = self.chars;
        let start = self.from.min(total);
        let end = self.to.unwrap_or(total).clamp(start, total);
        let part_start = self.part_start.unwrap_or(self.pos);
        Ok(ReadPart {
            shown: Shown {
                start: Some(start),
                end: Some(end),
                total: Some(total),
                count: end - start,
                bytes: Some((part_start, part_start + self.part.len() as u64, 0)),
            },
            bytes: self.part,
        })
    }
}

/// The last `n` characters, read backwards from the end in blocks until `n` characters start in
/// what was read.
fn backward_chars<R: Read + Seek>(
    file: &mut R,
    size: u64,
    n: u64,
    plan: &ReadPlan,
) -> Result<ReadPart, ReadError> {
    // Blocks from the end backwards: the last one read is the earliest in the file.
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let (mut start, mut starts, mut collected) = (size, 0u64, 0u64);
    while start > 0 && starts < n {
        // No more than the characters still wanted can take (4 bytes each), up to a block.
        let wanted = from_index((n - starts).saturating_mul(4)).max(4);
        let len = plan.block.min(wanted).min(from_index(start));
        start -= len as u64;
        seek(file, start)?;
        let mut block = vec![0; len];
        if read_full(file, &mut block)? < len {
            return Err(ReadError::Shrank);
        }
        starts += count_char_starts(&block);
        collected += len as u64;
        if collected > plan.max_part.saturating_add(plan.block as u64) {
            return Err(ReadError::PartTooLarge);
        }
        blocks.push(block);
    }
    let earliest = blocks.pop().unwrap_or_default();
    // Skip the characters before the `n`th from the end, and the continuation bytes of one that
    // began before the earliest block. Short of `n` characters, the whole file is the part.
    let cut = if start == 0 && starts <= n {
        0
    } else {
        let skip = starts.saturating_sub(n);
        let mut seen = 0;
        earliest
            .iter()
            .position(|b| {
                let starts_char = (*b & 0xC0) != 0x80;
                seen += u64::from(starts_char);
                starts_char && seen > skip
            })
            .unwrap_or(earliest.len())
    };
    let mut part = earliest[cut..].to_vec();
    for block in blocks.iter().rev() {
        part.extend_from_slice(block);
    }
    if part.len() as u64 > plan.max_part {
        return Err(ReadError::PartTooLarge);
    }
    let byte_start = start + cut as u64;
    let count = starts.min(n);
    let (first, last, total) = if start == 0 {
        // Read to the start: everything is counted.
        (Some(starts - count), Some(starts), Some(starts))
    } else {
        (None, None, None)
    };
    Ok(ReadPart {
        shown: Shown {
            start: first,
            end: last,
            total,
            count,
            bytes: Some((byte_start, byte_start + part.len() as u64, size)),
        },
        bytes: part,
    })
}

/// Lines `first..=last` (`last` `None`: to the end), streamed forward; only the part is kept.
fn forward_lines<R: Read + Seek>(
    file: &mut R,
    first: u64,
    last: Option<u64>,
    plan: &ReadPlan,
) -> Result<ReadPart, ReadError> {
    seek(file, 0)?;
    let mut buf = vec![0; plan.block];
    let mut read = ForwardLines {
        first,
        // As for a file read whole, an end before the start shows the first line.
        last: last.map(|last| last.max(first)),
        pos: 0,
        newlines: 0,
        last_byte: None,
        part: Vec::new(),
        part_start: None,
    };
    loop {
        let got = read_full(file, &mut buf)?;
        if got == 0 {
            return read.at_end();
        }
        if let Some(part) = read.take(&buf[..got], plan)? {
            return Ok(part);
        }
    }
}

/// A forward read of lines `first..=last` under way.
struct ForwardLines {
    first: u64,
    last: Option<u64>,
    /// `newlines` before `pos`; the line at `pos` is number `newlines + 1`.
    pos: u64,
    newlines: u64,
    last_byte: Option<u8>,
    part: Vec<u8>,
    part_start: Option<u64>,
}

impl ForwardLines {
    /// Takes in the block just read: skips the lines before the part, keeps those in it; the part
    /// once its last line has ended.
    fn take(&mut self, chunk: &[u8], plan: &ReadPlan) -> Result<Option<ReadPart>, ReadError> {
        self.last_byte = chunk.last().copied();
        let mut at = 0;
        if self.newlines + 1 < self.first {
            let needed = self.first - 1 - self.newlines;
            let count = count_newlines(chunk);
            if count < needed {
                self.newlines += count;
                self.pos += chunk.len() as u64;
                return Ok(None);
            }
            at = after_newline(chunk, needed).unwrap_or(chunk.len());
            self.newlines += needed;
        }
        self.part_start.get_or_insert(self.pos + at as u64);
        let rest = &chunk[at..];
        let end_of_last = self
            .last
            .and_then(|last| after_newline(rest, last - self.newlines));
        let kept = end_of_last.unwrap_or(rest.len());
        self.part.extend_from_slice(&rest[..kept]);
        if self.part.len() as u64 > plan.max_part {
            return Err(ReadError::PartTooLarge);
        }
        if end_of_last.is_some() {
            return Ok(Some(self.reached()));
        }
        self.newlines += count_newlines(rest);
        self.pos += chunk.len() as u64;
        Ok(None)
    }

    /// The part once its last line has ended, before the end of the file: no total is known.
    fn reached(&mut self) -> ReadPart {
        let start = self.part_start.unwrap_or(self.pos);
        let last = self.last.unwrap_or(self.first);
        let part = std::mem::take(&mut self.part);
        ReadPart {
            shown: Shown {
                start: Some(self.first),
                end: Some(last),
                total: None,
                count: last + 1 - self.first,
                bytes: Some((start, start + part.len() as u64, 0)),
            },
            bytes: part,
        }
    }

    /// The part at the end of the file: every line is counted, as for a file read whole.
    fn at_end(self) -> Result<ReadPart, ReadError> {
        let total = self.newlines + u64::from(self.last_byte.is_some_and(|b| b != b'\n'));
        let span = line_span(self.first, self.last, total)?;
        let start = self.part_start.unwrap_or(self.pos);
        Ok(ReadPart {
            shown: Shown {
                start: Some(span.0),
                end: Some(span.1),
                total: Some(total),
                count: if total == 0 { 0 } else { span.1 + 1 - span.0 },
                bytes: Some((start, start + self.part.len() as u64, 0)),
            },
            bytes: self.part,
        })
    }
}

/// Bytes `start..end` of a head, tail or range in bytes: a seek and one read.
fn byte_span<R: Read + Seek>(
    file: &mut R,
    size: u64,
    selection: Selection,
    plan: &ReadPlan,
) -> Result<ReadPart, ReadError> {
    let (start, end) = char_span(selection, size);
    if end - start > plan.max_part {
        return Err(ReadError::PartTooLarge);
    }
    seek(file, start)?;
    let mut bytes = vec![0; from_index(end - start)];
    let got = read_full(file, &mut bytes)?;
    bytes.truncate(got);
    let end = start + got as u64;
    Ok(ReadPart {
        shown: Shown {
            bytes: Some((start, end, size)),
            ..Shown::exact(Span {
                start,
                end,
                total: size,
            })
        },
        bytes,
    })
}
