//! Draining one output pipe: keep the first `cap` bytes, count everything, never stop reading
//! before end of file (a full pipe would block the child). Also the lossy decoding of what was kept.

use std::io::{self, Read};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes asked of the pipe per read.
const CHUNK: usize = 64 * 1024;

/// Which output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
}

/// What has been read from one stream so far; shared with the draining thread so that a run that
/// gives up on end of file can still take the output read so far.
#[derive(Debug, Default)]
pub(super) struct Capture {
    /// The first `cap` bytes.
    pub(super) kept: Vec<u8>,
    /// Every byte read, kept or not.
    pub(super) total: u64,
}

impl Capture {
    /// Whether bytes were dropped.
    pub(super) fn is_truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }

    /// The kept bytes as text: see [`decode_lossy`].
    pub(super) fn text(&self) -> String {
        decode_lossy(&self.kept, self.is_truncated())
    }
}

/// A shared capture, locked without caring whether a holder panicked (the data stays usable).
pub(super) type SharedCapture = Arc<Mutex<Capture>>;

/// Locks `capture`, ignoring poisoning.
pub(super) fn lock(capture: &SharedCapture) -> std::sync::MutexGuard<'_, Capture> {
    capture.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `pipe` to end of file (or to a read error) into `capture`, keeping at most `cap` bytes,
/// then calls `done` with the stream. Runs on its own thread.
pub(super) fn drain<T>(
    mut pipe: impl Read,
    stream: Stream,
    cap: usize,
    capture: &SharedCapture,
    done: &Sender<T>,
    event: impl FnOnce(Stream) -> T,
) {
    let mut buffer = vec![0_u8; CHUNK];
    loop {
        let read = match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut capture = lock(capture);
        let room = cap.saturating_sub(capture.kept.len());
        let chunk = buffer.get(..read.min(room)).unwrap_or_default();
        capture.kept.extend_from_slice(chunk);
        capture.total += read as u64;
    }
    // The receiver is gone only if the run already returned; nobody is left to tell.
    let _ = done.send(event(stream));
}

/// Decodes output for the model: invalid UTF-8 becomes U+FFFD. When the bytes were cut at the
/// cap, a character split by the cut is dropped rather than shown as U+FFFD.
pub(super) fn decode_lossy(bytes: &[u8], truncated: bool) -> String {
    let bytes = if truncated {
        without_partial_char(bytes)
    } else {
        bytes
    };
    String::from_utf8_lossy(bytes).into_owned()
}

/// `bytes` without a trailing incomplete UTF-8 sequence (at most 3 bytes).
fn without_partial_char(bytes: &[u8]) -> &[u8] {
    for back in 1..=bytes.len().min(3) {
        let at = bytes.len() - back;
        let byte = bytes[at];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { &bytes[..at] } else { bytes };
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        assert_eq!(decode_lossy(b"a\xffb", false), "a\u{FFFD}b");
    }

    #[test]
    fn character_cut_by_the_cap_is_dropped() {
        let text = "ab€".as_bytes(); // € is three bytes
        assert_eq!(decode_lossy(&text[..3], true), "ab");
        assert_eq!(decode_lossy(&text[..4], true), "ab");
        assert_eq!(decode_lossy(text, true), "ab€");
        assert_eq!(decode_lossy(&text[..4], false), "ab\u{FFFD}");
    }

    #[test]
    fn drain_keeps_cap_and_counts_everything() {
        let data = vec![b'x'; 3 * CHUNK + 5];
        let capture = SharedCapture::default();
        let (tx, rx) = mpsc::channel();
        drain(&data[..], Stream::Stderr, 10, &capture, &tx, |s| s);
        assert_eq!(rx.recv().unwrap(), Stream::Stderr);
        let capture = lock(&capture);
        assert_eq!(capture.kept, b"xxxxxxxxxx");
        assert_eq!(capture.total, data.len() as u64);
        assert!(capture.is_truncated());
    }
}
