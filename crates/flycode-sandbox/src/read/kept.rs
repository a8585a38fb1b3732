//! A whole text file written out from the file rather than from memory (PROTOCOL.md §9
//! (fs.read), "A large file written out from where it is"). The first pass ([`scan_text`])
//! checks that the file is UTF-8 and learns what a result needs before its first line is
//! written: the size, the line count and the longest run of backticks, which chooses the fence.
//! The second ([`copy_text`]) sends the file to the door's output through the same small buffer,
//! checking every block again, so a file that changes between the passes can cut the body short
//! but never break the block: nothing invalid, no run of backticks as long as the fence, no byte
//! past the size the first pass found, is ever written.
//!
//! Both passes read a block at a time into one reused buffer: touching fresh memory costs more
//! than reading a file that is in the page cache, so a 10 MB file read whole into memory cost
//! several times `cat` (issue 41).

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use super::aligned::BlockBuffer;
use crate::mask::{MaskingReader, Secrets};
use flycode_protocol::backticks::BacktickRuns;

/// The block both passes read at a time, `cat`'s size.
pub const KEPT_BLOCK_BYTES: usize = 128 * 1024;

/// A whole text file checked by a first pass ([`KeptBody::scan`]) and kept open, to be written
/// out by a second ([`KeptBody::write_out`]): the body of a result left in its file, for a door
/// that prints only the result block. The tool makes it; the door writes it out.
#[derive(Clone, Debug)]
pub struct KeptBody {
    inner: Arc<Kept>,
}

#[derive(Debug)]
struct Kept {
    /// The file, open since the first pass (a name swapped since changes nothing).
    file: std::fs::File,
    /// The path as the call named it, for the notice of a change.
    path: String,
    scan: TextScan,
    /// Masked in the second pass as in the first.
    secrets: Secrets,
    /// The first pass's buffer, reused by the second.
    buffer: Mutex<BlockBuffer>,
}

impl PartialEq for KeptBody {
    fn eq(&self, other: &KeptBody) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl KeptBody {
    /// The first pass over `file` (opened by the sandbox from `path`, at its start), with
    /// `secrets` masked: the body, if the file is UTF-8.
    pub fn scan(file: std::fs::File, path: &str, secrets: &Secrets) -> Result<KeptBody, KeptError> {
        let mut buffer = BlockBuffer::new(KEPT_BLOCK_BYTES);
        let size = file.metadata().map_or(0, |metadata| metadata.len());
        // Shared only where nothing is masked: a secret may straddle a part's end.
        let scan = if secrets.is_empty() && size >= SHARED_FROM_BYTES {
            scan_shared(&file, size, &mut buffer)?
        } else {
            scan_text(MaskingReader::new(&file, secrets), &mut buffer)?
        };
        Ok(KeptBody {
            inner: Arc::new(Kept {
                file,
                path: path.to_owned(),
                scan,
                secrets: secrets.clone(),
                buffer: Mutex::new(buffer),
            }),
        })
    }

    /// What the first pass found.
    pub fn facts(&self) -> &TextScan {
        &self.inner.scan
    }

    /// The path as the call named it.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The second pass: sends the file's text to `sink` in pieces, each checked against the
    /// first pass and the fence (`fence_len` backticks) before it goes; the bytes sent, or
    /// [`KeptError::Changed`] with how many went out before the file was found changed.
    pub fn write_out(
        &self,
        fence_len: usize,
        sink: impl FnMut(&str) -> io::Result<()>,
    ) -> Result<u64, KeptError> {
        let mut file = &self.inner.file;
        file.seek(SeekFrom::Start(0)).map_err(KeptError::Read)?;
        let mut buffer = self
            .inner
            .buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let reader = MaskingReader::new(file, &self.inner.secrets);
        copy_text(reader, &mut buffer, &self.inner.scan, fence_len, sink)
    }
}

/// What the first pass learned of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextScan {
    /// Its size in bytes.
    pub bytes: u64,
    /// Its line feeds.
    pub newlines: u64,
    /// Whether its last byte is a line feed.
    pub ends_with_newline: bool,
    /// Its longest run of backticks.
    pub longest_backtick_run: usize,
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    /// Reading the file failed.
    #[error("{0}")]
    Read(io::Error),
    /// Writing the output failed.
    #[error("{0}")]
    Write(io::Error),
    /// The file is not UTF-8 from this byte offset on.
    #[error("not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The offset of the first byte that is not UTF-8.
        offset: u64,
    },
    /// The second pass found the file changed since the first: it wrote `written` bytes, all
    /// checked, and stopped.
    #[error("the file changed while it was written out (after {written} bytes)")]
    Changed {
        /// The bytes written before the change was found.
        written: u64,
    },
}

/// The first pass: reads `reader` to its end through `buffer`, and what it holds if it is UTF-8.
pub fn scan_text<R: Read>(reader: R, buffer: &mut BlockBuffer) -> Result<TextScan, KeptError> {
    scan_part(reader, buffer).map(|(scan, _)| scan)
}

/// From this size on, an unmasked file's first pass is shared by two threads: the kernel's
/// copy out of the page cache is most of the pass, and one core copies at most so fast (a 10 MB
/// file: about a millisecond less on two cores, issue 41). Below it, a thread costs more than it
/// saves.
const SHARED_FROM_BYTES: u64 = 4 << 20;

/// The part of a file a thread takes at a time in a shared first pass: small enough that the
/// thread that started later, or runs slower, leaves the other little to wait for at the end
/// (fixed halves left the first thread waiting 0.2 to 0.8 ms of a 10 MB read for the second).
const PART_BYTES: u64 = 1 << 20;

/// [`scan_text`] of `file` (of about `size` bytes), shared by two threads ([`scan_in_parts`])
/// where another processor is idle, else in one pass: with every other processor busy, a second
/// thread would wait for its turn, and this one for it at the end.
fn scan_shared(
    file: &std::fs::File,
    size: u64,
    buffer: &mut BlockBuffer,
) -> Result<TextScan, KeptError> {
    match crate::beside::idle_processors() {
        Some(idle) => scan_in_parts(file, size, PART_BYTES, buffer, Some(idle)),
        None => scan_text(FileRange::new(file, 0, None), buffer),
    }
}

/// [`scan_text`] of `file` (of about `size` bytes) read in parts of `part_bytes` by two threads
/// at once (the second moved to `idle`), each taking the next part when it is done with one,
/// through a buffer of its own: the same facts, the same first bad byte. A part starts where a
/// character starts, so that a character is never split between two; a run of backticks across
/// parts is counted whole. Where no thread can be had, the file is read in one pass.
fn scan_in_parts(
    file: &std::fs::File,
    size: u64,
    part_bytes: u64,
    buffer: &mut BlockBuffer,
    idle: Option<crate::beside::IdleProcessors>,
) -> Result<TextScan, KeptError> {
    let parts = size.div_ceil(part_bytes.max(1)).max(1);
    let next_part = AtomicU64::new(0);
    let take_parts = |buffer: &mut BlockBuffer| {
        let mut done = Vec::new();
        loop {
            let part = next_part.fetch_add(1, Ordering::Relaxed);
            if part >= parts {
                return done;
            }
            done.push((part, scan_one_part(file, part, parts, part_bytes, buffer)));
        }
    };
    // The vectorised checks learn the processor's features on their first use; learnt here,
    // before the thread starts, the two threads do not both pay for it (about 27 µs of
    // processor identification each on a virtual machine, issue 41).
    #[cfg(target_arch = "x86_64")]
    let _ = std::is_x86_feature_detected!("avx2");
    // This thread's block is faulted in before the other thread starts: not while that one maps
    // its stack guard, signal stack and allocator arena, which would hold it up (see
    // `BlockBuffer::touch_pages`).
    buffer.touch_pages();
    std::thread::scope(|scope| {
        let helper = crate::beside::spawn_beside(scope, "flycode-read", idle, || {
            take_parts(&mut BlockBuffer::new(KEPT_BLOCK_BYTES))
        });
        let Ok(helper) = helper else {
            return scan_text(FileRange::new(file, 0, None), buffer);
        };
        let mut done = take_parts(buffer);
        done.extend(helper.join().unwrap_or_default());
        if done.len() as u64 != parts {
            return Err(KeptError::Read(io::Error::other(
                "a reading thread stopped",
            )));
        }
        done.sort_unstable_by_key(|(part, _)| *part);
        let (mut scan, mut runs) = (TextScan::default(), BacktickRuns::default());
        for (_, result) in done {
            let (part_scan, part_runs) = result?;
            scan.bytes += part_scan.bytes;
            scan.newlines += part_scan.newlines;
            if part_scan.bytes > 0 {
                scan.ends_with_newline = part_scan.ends_with_newline;
            }
            runs = runs.followed_by(part_runs);
        }
        scan.longest_backtick_run = runs.longest();
        Ok(scan)
    })
}

/// [`scan_part`] of part `part` of `parts` (of `part_bytes` each, moved forward to where a
/// character starts; the last to the file's end), a bad byte's offset counted from the file's
/// start.
fn scan_one_part(
    file: &std::fs::File,
    part: u64,
    parts: u64,
    part_bytes: u64,
    buffer: &mut BlockBuffer,
) -> Result<(TextScan, BacktickRuns), KeptError> {
    let start = match part {
        0 => 0,
        _ => character_start_from(file, part * part_bytes).map_err(KeptError::Read)?,
    };
    let end = if part + 1 == parts {
        None
    } else {
        Some(character_start_from(file, (part + 1) * part_bytes).map_err(KeptError::Read)?)
    };
    scan_part(FileRange::new(file, start, end), buffer).map_err(|error| match error {
        KeptError::NotUtf8 { offset } => KeptError::NotUtf8 {
            offset: start + offset,
        },
        other => other,
    })
}

/// The offset of the first byte at or after `offset` that does not continue a character (at
/// most three bytes on: a character has at most three continuation bytes).
fn character_start_from(file: &std::fs::File, offset: u64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 4];
    let read = loop {
        match file.read_at(&mut bytes, offset) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => break other?,
        }
    };
    let continuing = bytes[..read]
        .iter()
        .take(3)
        .take_while(|&&b| b & 0xC0 == 0x80)
        .count();
    Ok(offset + continuing as u64)
}

/// A part of a file, read by offset (the file's own position is left alone, so two threads
/// read two parts of one open file): from `at` to `end`, or to the file's end.
struct FileRange<'f> {
    file: &'f std::fs::File,
    at: u64,
    end: Option<u64>,
}

impl<'f> FileRange<'f> {
    fn new(file: &'f std::fs::File, at: u64, end: Option<u64>) -> FileRange<'f> {
        FileRange { file, at, end }
    }
}

impl Read for FileRange<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let room = match self.end {
            Some(end) => usize::try_from(end.saturating_sub(self.at)).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        let wanted = buf.len().min(room);
        if wanted == 0 {
            return Ok(0);
        }
        let read = self.file.read_at(&mut buf[..wanted], self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

/// [`scan_text`], and the runs of backticks at the part's two ends.
fn scan_part<R: Read>(
    reader: R,
    buffer: &mut BlockBuffer,
) -> Result<(TextScan, BacktickRuns), KeptError> {
    let mut scan = TextScan::default();
    let mut runs = BacktickRuns::default();
    let total = for_each_text(reader, buffer, |piece| {
        let bytes = piece.as_bytes();
        runs.feed(bytes);
        scan.newlines += super::count::count_newlines(bytes);
        if let Some(&last) = bytes.last() {
            scan.ends_with_newline = last == b'\n';
        }
        Ok(())
    })?;
    scan.bytes = total;
    scan.longest_backtick_run = runs.longest();
    Ok((scan, runs))
}

/// The second pass: sends `reader`'s text to `sink` a piece at a time, each piece checked first
/// against what the first pass found (`scan`) and the fence the result was given (`fence_len`
/// backticks). The bytes sent, which are all of them unless it returns
/// [`KeptError::Changed`].
pub fn copy_text<R: Read>(
    reader: R,
    buffer: &mut BlockBuffer,
    scan: &TextScan,
    fence_len: usize,
    mut sink: impl FnMut(&str) -> io::Result<()>,
) -> Result<u64, KeptError> {
    let mut runs = BacktickRuns::default();
    let mut written = 0u64;
    let read = for_each_text(reader, buffer, |piece| {
        runs.feed(piece.as_bytes());
        let after = written + piece.len() as u64;
        if runs.longest() >= fence_len || after > scan.bytes {
            return Err(KeptError::Changed { written });
        }
        sink(piece).map_err(KeptError::Write)?;
        written = after;
        Ok(())
    });
    match read {
        Ok(total) if total == scan.bytes => Ok(written),
        Ok(_) | Err(KeptError::NotUtf8 { .. }) => Err(KeptError::Changed { written }),
        Err(error) => Err(error),
    }
}

/// Reads `reader` to its end through `buffer` and hands `visit` its text in pieces that are
/// whole characters (a character cut by a block's end is carried to the next block); the bytes
/// read. Bytes that are not UTF-8 end it with [`KeptError::NotUtf8`].
fn for_each_text<R: Read>(
    mut reader: R,
    buffer: &mut BlockBuffer,
    mut visit: impl FnMut(&str) -> Result<(), KeptError>,
) -> Result<u64, KeptError> {
    let (at, block) = (buffer.block_at, buffer.block);
    let bytes = &mut buffer.bytes;
    // The bytes of an unfinished character just before the block, and the file offset of the
    // first of them.
    let (mut carried, mut offset) = (0usize, 0u64);
    loop {
        let read = match reader.read(&mut bytes[at..at + block]) {
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(KeptError::Read(error)),
        };
        if read == 0 {
            return if carried == 0 {
                Ok(offset)
            } else {
                Err(KeptError::NotUtf8 { offset })
            };
        }
        let text = &bytes[at - carried..at + read];
        // Checked with a vectorised check (several times the standard library's speed on a
        // large file, issue 41), without a character the block's end cuts short (it is carried
        // to the next block); only a block that does not check is checked again, with the
        // vectorised check that says where and why.
        let whole = without_cut_character(text);
        let done = match simdutf8::basic::from_utf8(&text[..whole])
            .map_err(|_| simdutf8::compat::from_utf8(text))
        {
            Ok(text) | Err(Ok(text)) => {
                visit(text)?;
                text.len()
            }
            Err(Err(error)) => {
                let valid = error.valid_up_to();
                // The valid text first: a second pass writes whole characters up to a bad byte.
                if let Ok(text) = simdutf8::basic::from_utf8(&text[..valid]) {
                    visit(text)?;
                }
                if error.error_len().is_some() {
                    return Err(KeptError::NotUtf8 {
                        offset: offset + valid as u64,
                    });
                }
                // An unfinished character at the end waits for the next block.
                valid
            }
        };
        let rest = carried + read - done;
        bytes.copy_within(at + read - rest..at + read, at - rest);
        carried = rest;
        offset += done as u64;
    }
}

/// The length of `text` without the character its end cuts short, if it ends inside one (a
/// lead byte followed by fewer continuation bytes than it announces). Bytes that are not UTF-8
/// are left for the check to find.
fn without_cut_character(text: &[u8]) -> usize {
    let len = text.len();
    for back in 1..=len.min(4) {
        let byte = text[len - back];
        if byte & 0xC0 != 0x80 {
            let announced = match byte {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if announced > back { len - back } else { len };
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_by_the_blocks_end_is_left_for_the_next_block() {
        let euro = "€".as_bytes(); // three bytes
        assert_eq!(without_cut_character(b"abc"), 3);
        assert_eq!(without_cut_character(b""), 0);
        assert_eq!(without_cut_character(&[b'a', euro[0]]), 1);
        assert_eq!(without_cut_character(&[b'a', euro[0], euro[1]]), 1);
        assert_eq!(without_cut_character(&[b'a', euro[0], euro[1], euro[2]]), 4);
        // Not UTF-8: left whole, for the check to find.
        assert_eq!(without_cut_character(&[b'a', 0x80, 0x80, 0x80, 0x80]), 5);
        assert_eq!(without_cut_character(&[b'a', 0xFF]), 2);
    }

    /// A reader that gives at most `step` bytes a read, as a pipe or a slow disk may.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn longest_run(text: &str) -> usize {
        let mut longest = 0;
        let mut run = 0;
        for c in text.chars() {
            run = if c == '`' { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        longest
    }

    fn copied(
        text: &[u8],
        buffer: usize,
        step: usize,
        scan: &TextScan,
        fence: usize,
    ) -> (Result<u64, KeptError>, String) {
        let mut out = String::new();
        let result = copy_text(
            Trickle { bytes: text, step },
            &mut BlockBuffer::new(buffer),
            scan,
            fence,
            |piece| {
                out.push_str(piece);
                Ok(())
            },
        );
        (result, out)
    }

    #[test]
    fn the_first_pass_counts_what_the_result_needs_across_block_edges() {
        let text = "αβγ ``` x\n`````y\n😀 end`".repeat(50);
        for (buffer, step) in [
            (4, 1),
            (5, 3),
            (7, 7),
            (64, 13),
            (KEPT_BLOCK_BYTES, 1 << 20),
        ] {
            let scan = scan_text(
                Trickle {
                    bytes: text.as_bytes(),
                    step,
                },
                &mut BlockBuffer::new(buffer),
            )
            .unwrap();
            assert_eq!(scan.bytes, text.len() as u64);
            assert_eq!(scan.newlines, text.matches('\n').count() as u64);
            assert!(!scan.ends_with_newline);
            // The last backtick of one copy and the first of the next are apart.
            assert_eq!(scan.longest_backtick_run, longest_run(&text));
        }
    }

    #[test]
    fn a_run_of_backticks_that_spans_blocks_is_counted_whole() {
        let text = format!("a{}b", "`".repeat(9));
        let scan = scan_text(
            Trickle {
                bytes: text.as_bytes(),
                step: 2,
            },
            &mut BlockBuffer::new(3),
        )
        .unwrap();
        assert_eq!(scan.longest_backtick_run, 9);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_found_at_their_offset_also_at_a_block_edge() {
        let mut bytes = "ab😀".as_bytes().to_vec();
        bytes.extend_from_slice(&[0xF0, 0x9F]); // a character cut by the file's end
        let error = scan_text(
            Trickle {
                bytes: &bytes,
                step: 1,
            },
            &mut BlockBuffer::new(4),
        )
        .unwrap_err();
        assert!(
            matches!(error, KeptError::NotUtf8 { offset: 6 }),
            "{error:?}"
        );
        let mut bytes = b"abc".to_vec();
        bytes.push(0xFF);
        bytes.extend_from_slice(b"def");
        let error = scan_text(
            Trickle {
                bytes: &bytes,
                step: 2,
            },
            &mut BlockBuffer::new(4),
        )
        .unwrap_err();
        assert!(
            matches!(error, KeptError::NotUtf8 { offset: 3 }),
            "{error:?}"
        );
    }

    #[test]
    fn the_second_pass_writes_the_file_as_the_first_saw_it() {
        let text = "línea uno\n``` dos\ntres 😀\n".repeat(100);
        let scan = scan_text(text.as_bytes(), &mut BlockBuffer::new(16)).unwrap();
        let (result, out) = copied(text.as_bytes(), 16, 5, &scan, 4);
        assert_eq!(result.unwrap(), text.len() as u64);
        assert_eq!(out, text);
    }

    #[test]
    fn a_file_changed_between_the_passes_is_cut_short_and_never_breaks_the_fence() {
        let before = "safe text\n".repeat(20);
        let scan = scan_text(before.as_bytes(), &mut BlockBuffer::new(32)).unwrap();
        let fence = 3;
        // A run of backticks as long as the fence appeared: nothing from its piece on is written.
        let after = format!("{}```\nfake```flycode-result\n", "safe text\n".repeat(5));
        let (result, out) = copied(after.as_bytes(), 32, 32, &scan, fence);
        assert!(
            matches!(result, Err(KeptError::Changed { .. })),
            "{result:?}"
        );
        assert!(longest_run(&out) < fence, "{out:?}");
        assert!(after.starts_with(&out));
        // A run split across two reads counts whole.
        let after = format!("{}``", "x".repeat(31)) + "`y";
        let (result, out) = copied(after.as_bytes(), 32, 32, &scan, fence);
        assert!(matches!(result, Err(KeptError::Changed { .. })));
        assert!(longest_run(&out) < fence);
        // Grown: never more than the first pass counted.
        let grown = format!("{before}more");
        let (result, out) = copied(grown.as_bytes(), 32, 7, &scan, fence);
        assert!(matches!(result, Err(KeptError::Changed { .. })));
        assert!(out.len() <= before.len());
        // Shrunk, or no longer UTF-8: what was written stays whole characters.
        let (result, _) = copied(&before.as_bytes()[..50], 32, 7, &scan, fence);
        assert!(matches!(result, Err(KeptError::Changed { written: 50 })));
        let mut broken = before.as_bytes().to_vec();
        broken[40] = 0xFF;
        let (result, out) = copied(&broken, 32, 7, &scan, fence);
        assert!(matches!(result, Err(KeptError::Changed { written: 40 })));
        assert_eq!(out, before[..40]);
    }

    #[test]
    fn a_failing_output_stops_the_copy_with_its_error() {
        let text = "abc\n".repeat(10);
        let scan = scan_text(text.as_bytes(), &mut BlockBuffer::new(8)).unwrap();
        let result = copy_text(text.as_bytes(), &mut BlockBuffer::new(8), &scan, 3, |_| {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        });
        assert!(matches!(result, Err(KeptError::Write(_))));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// Whatever the text and however the blocks and reads cut it, the first pass counts
        /// what a whole read counts and the second writes the text unchanged.
        #[test]
        fn both_passes_agree_with_a_read_into_memory(
            pieces in proptest::collection::vec(proptest::sample::select(vec!["`", "``", "a", "\n", "é", "😀", "ĳ\n", "```` x"]), 0..200),
            block in 1usize..40,
            step in 1usize..50,
        ) {
            let text = pieces.concat();
            let scan = scan_text(Trickle { bytes: text.as_bytes(), step }, &mut BlockBuffer::new(block)).unwrap();
            proptest::prop_assert_eq!(scan.bytes, text.len() as u64);
            proptest::prop_assert_eq!(scan.newlines, text.matches('\n').count() as u64);
            proptest::prop_assert_eq!(scan.longest_backtick_run, longest_run(&text));
            let (result, out) = copied(text.as_bytes(), block, step, &scan, scan.longest_backtick_run + 1);
            proptest::prop_assert_eq!(result.unwrap(), text.len() as u64);
            proptest::prop_assert_eq!(out, text);
        }

        /// Read in parts on two threads, wherever the parts end (in a character, in a run of
        /// backticks, before a bad byte or after it), a file gives what one pass gives: the
        /// same facts, or the same first bad byte.
        #[test]
        fn parts_agree_with_one_pass(
            pieces in proptest::collection::vec(proptest::sample::select(vec!["`", "``", "a", "\n", "é", "😀", "€\n", "```` x", "\u{80}"]), 0..120),
            bad in proptest::option::of(0usize..400),
            part_bytes in 1u64..300,
        ) {
            let mut bytes = pieces.concat().into_bytes();
            if let Some(at) = bad {
                bytes.insert(at.min(bytes.len()), 0xFF);
            }
            let file = file_holding(&bytes);
            let one = scan_text(FileRange::new(&file, 0, None), &mut BlockBuffer::new(7));
            // Two threads whether or not a processor is idle now.
            let shared = scan_in_parts(&file, bytes.len() as u64, part_bytes, &mut BlockBuffer::new(7), None);
            match (one, shared) {
                (Ok(one), Ok(shared)) => proptest::prop_assert_eq!(one, shared),
                (Err(KeptError::NotUtf8 { offset: a }), Err(KeptError::NotUtf8 { offset: b })) => {
                    proptest::prop_assert_eq!(a, b)
                }
                (one, shared) => proptest::prop_assert!(false, "{one:?} against {shared:?}"),
            }
        }
    }

    fn file_holding(bytes: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        file
    }

    #[test]
    fn a_large_file_is_scanned_in_parts_with_runs_and_characters_across_them_whole() {
        // Past the size from which the first pass is shared, a run of six backticks across the
        // end of the second part, and a character cut by the end of the third.
        let part = usize::try_from(PART_BYTES).unwrap();
        let mut text = "x".repeat(2 * part - 3) + "``````";
        while text.len() <= usize::try_from(SHARED_FROM_BYTES).unwrap() {
            text.push_str("é\n");
        }
        assert!(
            !text.is_char_boundary(3 * part),
            "the third part ends inside a character"
        );
        let file = file_holding(text.as_bytes());
        // Read in parts by two threads whether or not a processor is idle now; `KeptBody::scan`
        // shares the pass only when one is.
        let parts = scan_in_parts(
            &file,
            text.len() as u64,
            PART_BYTES,
            &mut BlockBuffer::new(KEPT_BLOCK_BYTES),
            None,
        )
        .unwrap();
        let kept = KeptBody::scan(file, "big.txt", &Secrets::default()).unwrap();
        assert_eq!(*kept.facts(), parts);
        assert_eq!(kept.facts().longest_backtick_run, 6);
        assert_eq!(kept.facts().bytes, text.len() as u64);
        assert_eq!(kept.facts().newlines, text.matches('\n').count() as u64);
        let mut out = Vec::new();
        kept.write_out(7, |piece| {
            out.extend_from_slice(piece.as_bytes());
            Ok(())
        })
        .unwrap();
        assert_eq!(out, text.as_bytes());
    }
}
