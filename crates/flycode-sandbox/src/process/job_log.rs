//! A background job's output as numbered lines in a bounded file pair (PROTOCOL.md §10 (Running
//! calls: background jobs)): lines are masked as they arrive, written to the current of two
//! segment files, and when the current one is full the older one is dropped with all its lines,
//! so the job's files never hold more than the bound however much the job prints. Readers wait
//! on a condition variable that every new line and the job's end wake: no polling.
//!
//! Knows nothing of tools or result blocks; the job table (`tools::jobs`) renders what it reads.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::super::mask::{Edge, Secrets};

/// The longest line kept whole; a longer one is cut into pieces of this many bytes.
pub const LINE_MAX: usize = 16 * 1024;

/// Which stream a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// stdout, or the terminal of a job under a pseudo-terminal.
    Out,
    /// stderr.
    Err,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// Its main program exited with this status.
    Exited(i32),
    /// It was ended by this signal (by `job.kill`, the session's end, or anyone else).
    Killed(i32),
    /// flycode lost track of it (its status could not be read).
    Failed,
}

/// One line read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// 1-based, counted from the job's first line.
    pub number: u64,
    /// Where it came from.
    pub origin: Origin,
    /// The text, masked, decoded lossily, without its newline.
    pub text: String,
}

/// What a reader sees at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogView {
    /// The lines asked for that are still kept.
    pub lines: Vec<LogLine>,
    /// Every line so far (kept or dropped).
    pub total: u64,
    /// The first line still kept (`total + 1` when none is).
    pub first_kept: u64,
    /// The text of each stream's unfinished last line (no newline yet), masked.
    pub unfinished: Vec<(Origin, String)>,
    /// How the job ended, once it has.
    pub end: Option<JobEnd>,
}

/// One of the two files.
#[derive(Debug)]
struct LogSegment {
    file: File,
    /// Where each line starts.
    offsets: Vec<u64>,
    /// The number of its first line.
    first: u64,
    /// Its length in bytes.
    len: u64,
}

impl LogSegment {
    fn create(path: &Path, first: u64) -> io::Result<LogSegment> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)?;
        Ok(LogSegment {
            file,
            offsets: Vec::new(),
            first,
            len: 0,
        })
    }

    fn line(&self, number: u64) -> Option<LogLine> {
        let index = usize::try_from(number.checked_sub(self.first)?).ok()?;
        let start = *self.offsets.get(index)?;
        let end = self.offsets.get(index + 1).copied().unwrap_or(self.len);
        let mut bytes = vec![0; usize::try_from(end - start).ok()?];
        self.file.read_exact_at(&mut bytes, start).ok()?;
        let (&tag, rest) = bytes.split_first()?;
        let text = rest.strip_suffix(b"\n").unwrap_or(rest);
        Some(LogLine {
            number,
            origin: if tag == b'e' {
                Origin::Err
            } else {
                Origin::Out
            },
            text: String::from_utf8_lossy(text).into_owned(),
        })
    }
}

/// Everything behind the lock.
#[derive(Debug)]
struct LogState {
    paths: [PathBuf; 2],
    /// The older segment (dropped next), if any, and the current one.
    older: Option<LogSegment>,
    current: LogSegment,
    /// Which of `paths` the current segment is.
    current_path: usize,
    total: u64,
    /// Each stream's bytes after its last newline (or its last cut).
    pending: [Vec<u8>; 2],
    /// Each stream's last bytes before `pending`, as the job wrote them, where a long line was
    /// cut there: the next piece is masked with them in view, so a secret the cut splits is
    /// masked on both sides of it.
    carry: [Vec<u8>; 2],
    end: Option<JobEnd>,
    /// When the end was recorded.
    ended_at: Option<Instant>,
    /// Bumped by every change (a line, an unfinished line growing, the end).
    changes: u64,
    /// Why the file could not be written, once it could not (lines are then counted, not kept).
    failed: Option<String>,
}

/// A job's output: bounded, masked, numbered, waited on.
#[derive(Debug)]
pub struct JobOutputLog {
    state: Mutex<LogState>,
    changed: Condvar,
    secrets: Secrets,
    /// What each segment may hold: half the job's bound.
    segment_bytes: u64,
}

impl JobOutputLog {
    /// A log writing to `{base}.0` and `{base}.1`, holding at most `bound` bytes in both.
    pub fn create(base: &Path, bound: u64, secrets: Secrets) -> io::Result<JobOutputLog> {
        let name = base.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_else(|| "job".to_owned());
        let paths = [0, 1].map(|n| base.with_file_name(format!("{name}.{n}.log")));
        let current = LogSegment::create(&paths[0], 1)?;
        Ok(JobOutputLog {
            state: Mutex::new(LogState {
                paths,
                older: None,
                current,
                current_path: 0,
                total: 0,
                pending: [Vec::new(), Vec::new()],
                carry: [Vec::new(), Vec::new()],
                end: None,
                ended_at: None,
                changes: 0,
                failed: None,
            }),
            changed: Condvar::new(),
            secrets,
            segment_bytes: (bound / 2).max(LINE_MAX as u64 + 1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in bytes the job just wrote to `origin`: whole lines are numbered and stored, the
    /// rest waits for its newline. A line that grows past [`LINE_MAX`] is cut into pieces, each
    /// stored once the bytes after it that could hold the rest of a secret are in (see
    /// [`JobOutputLog::store_pieces`]).
    pub fn push(&self, origin: Origin, data: &[u8]) {
        let mut state = self.lock();
        let slot = origin as usize;
        let mut rest = data;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let mut line = std::mem::take(&mut state.pending[slot]);
            line.extend_from_slice(&rest[..at]);
            self.store_pieces(&mut state, origin, &line, true);
            rest = &rest[at + 1..];
        }
        state.pending[slot].extend_from_slice(rest);
        if state.pending[slot].len() >= LINE_MAX {
            let text = std::mem::take(&mut state.pending[slot]);
            let stored = self.store_pieces(&mut state, origin, &text, false);
            state.pending[slot] = text[stored..].to_vec();
        }
        state.changes += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// Records the job's end; unfinished lines become lines.
    pub fn finish(&self, end: JobEnd) {
        let mut state = self.lock();
        for origin in [Origin::Out, Origin::Err] {
            let line = std::mem::take(&mut state.pending[origin as usize]);
            if !line.is_empty() {
                self.store_pieces(&mut state, origin, &line, true);
            }
        }
        if state.end.is_none() {
            state.end = Some(end);
            state.ended_at = Some(Instant::now());
        }
        state.changes += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// Numbers, masks and writes the pieces of `text` (the stream's bytes since its last newline
    /// or cut) that are ready: every one when `ended` (a newline or the job's end closed the
    /// line; an empty line is one empty piece), else each piece of [`LINE_MAX`] bytes followed
    /// by at least [`Secrets::margin`] more. Each piece is masked with the bytes around it in
    /// view (the carry before it, the rest of the line after it), so a secret a cut splits is
    /// masked in both pieces (PROTOCOL.md §9 (Background jobs)). How many bytes of `text` were
    /// stored.
    fn store_pieces(
        &self,
        state: &mut LogState,
        origin: Origin,
        text: &[u8],
        ended: bool,
    ) -> usize {
        let slot = origin as usize;
        let margin = self.secrets.margin();
        let carry = std::mem::take(&mut state.carry[slot]);
        let mut view = carry;
        let offset = view.len();
        view.extend_from_slice(text);
        let mut start = 0;
        loop {
            let left = text.len() - start;
            let take = if ended {
                left.min(LINE_MAX)
            } else if left >= LINE_MAX + margin {
                LINE_MAX
            } else {
                break;
            };
            let end = start + take;
            let mut piece = text[start..end].to_vec();
            self.secrets.mask_window(
                &mut piece,
                Edge::exact(&view[..offset + start]),
                Edge::exact(&text[end..]),
            );
            self.store_piece(state, origin, piece);
            start = end;
            if ended && start == text.len() {
                break;
            }
        }
        if !ended && start > 0 {
            let kept = (offset + start).saturating_sub(margin);
            state.carry[slot] = view[kept..offset + start].to_vec();
        } else if !ended {
            state.carry[slot] = view[..offset].to_vec();
        }
        start
    }

    /// Numbers and writes one piece of at most [`LINE_MAX`] bytes, masked already.
    fn store_piece(&self, state: &mut LogState, origin: Origin, line: Vec<u8>) {
        state.total += 1;
        let mut record = Vec::with_capacity(line.len() + 2);
        record.push(if origin == Origin::Err { b'e' } else { b'o' });
        record.extend_from_slice(&line);
        record.push(b'\n');
        if state.failed.is_some() {
            return;
        }
        if let Err(error) = self.append(state, &record) {
            state.failed = Some(error.to_string());
        }
    }

    fn append(&self, state: &mut LogState, record: &[u8]) -> io::Result<()> {
        let size = record.len() as u64;
        if state.current.len + size > self.segment_bytes && !state.current.offsets.is_empty() {
            // The older segment's lines go; its file is reused for the new current one.
            let next = 1 - state.current_path;
            state.older = None;
            let fresh = LogSegment::create(&state.paths[next], state.total)?;
            state.older = Some(std::mem::replace(&mut state.current, fresh));
            state.current_path = next;
        }
        let segment = &mut state.current;
        if segment.offsets.is_empty() {
            segment.first = state.total;
        }
        segment.file.write_all_at(record, segment.len)?;
        segment.offsets.push(segment.len);
        segment.len += size;
        Ok(())
    }

    /// Lines `start..start + max` as far as they are kept, and the state around them.
    pub fn view(&self, start: u64, max: usize) -> LogView {
        let state = self.lock();
        let first_kept = match (&state.older, &state.current) {
            (Some(older), _) if !older.offsets.is_empty() => older.first,
            (_, current) if !current.offsets.is_empty() => current.first,
            _ => state.total + 1,
        };
        let from = start.max(first_kept);
        let lines = (from..=state.total)
            .take(max)
            .filter_map(|number| {
                let older = state.older.as_ref().and_then(|older| older.line(number));
                older.or_else(|| state.current.line(number))
            })
            .collect();
        let unfinished = [Origin::Out, Origin::Err]
            .into_iter()
            .filter(|origin| !state.pending[*origin as usize].is_empty())
            .map(|origin| {
                let mut bytes = state.pending[origin as usize].clone();
                self.secrets.mask_window(
                    &mut bytes,
                    Edge::exact(&state.carry[origin as usize]),
                    Edge::open(&[]),
                );
                (origin, String::from_utf8_lossy(&bytes).into_owned())
            })
            .collect();
        LogView {
            lines,
            total: state.total,
            first_kept,
            unfinished,
            end: state.end,
        }
    }

    /// How many lines so far, and the change counter.
    pub fn position(&self) -> (u64, u64) {
        let state = self.lock();
        (state.total, state.changes)
    }

    /// How the job ended, if it has.
    pub fn end(&self) -> Option<JobEnd> {
        self.lock().end
    }

    /// When the job's end was recorded, if it has ended.
    pub fn ended_at(&self) -> Option<Instant> {
        self.lock().ended_at
    }

    /// Why lines could not be kept, if they could not.
    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    /// Blocks until `ready` holds for (lines so far, changes so far, ended) or `deadline`
    /// (if any) passes; whether it holds. Woken by every change, never by a timer.
    pub fn wait_until(
        &self,
        deadline: Option<Instant>,
        ready: impl Fn(u64, u64, bool) -> bool,
    ) -> bool {
        let mut state = self.lock();
        loop {
            if ready(state.total, state.changes, state.end.is_some()) {
                return true;
            }
            state = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left == Duration::ZERO {
                        return false;
                    }
                    self.changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    /// The bytes the files hold now.
    #[cfg(test)]
    pub fn stored_bytes(&self) -> u64 {
        let state = self.lock();
        state.current.len + state.older.as_ref().map_or(0, |older| older.len)
    }
}

/// A fresh directory for one session's job logs: beneath `jobs/` of the state directory (the
/// system's temporary directory where there is none), removed with everything in it when
/// dropped (the session's end).
pub fn session_dir() -> io::Result<tempfile::TempDir> {
    let base = super::super::state::state_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("jobs");
    std::fs::create_dir_all(&base)?;
    tempfile::Builder::new()
        .prefix(&format!("session-{}-", std::process::id()))
        .tempdir_in(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(bound: u64) -> (tempfile::TempDir, JobOutputLog) {
        let dir = tempfile::tempdir().unwrap();
        let log =
            JobOutputLog::create(&dir.path().join("job-1"), bound, Secrets::default()).unwrap();
        (dir, log)
    }

    #[test]
    fn lines_are_numbered_across_writes_and_streams() {
        let (_dir, log) = log(1 << 20);
        log.push(Origin::Out, b"one\ntw");
        log.push(Origin::Err, b"oops\n");
        log.push(Origin::Out, b"o\nthree");
        let view = log.view(1, 10);
        let texts: Vec<_> = view.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["one", "oops", "two"]);
        assert_eq!(view.lines[1].origin, Origin::Err);
        assert_eq!(view.unfinished, [(Origin::Out, "three".to_owned())]);
        log.finish(JobEnd::Exited(0));
        let view = log.view(4, 10);
        assert_eq!(view.lines[0].text, "three");
        assert_eq!(view.end, Some(JobEnd::Exited(0)));
    }

    #[test]
    fn the_oldest_lines_go_and_the_files_stay_within_the_bound() {
        let bound = 64 * 1024;
        let (dir, log) = log(bound);
        for n in 0..100_000 {
            log.push(Origin::Out, format!("line {n:08}\n").as_bytes());
        }
        let view = log.view(1, 5);
        assert_eq!(view.total, 100_000);
        assert!(view.first_kept > 1);
        assert_eq!(view.lines[0].number, view.first_kept);
        assert_eq!(
            view.lines[0].text,
            format!("line {:08}", view.first_kept - 1)
        );
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= bound, "{on_disk}");
        assert_eq!(log.stored_bytes(), on_disk);
        let last = log.view(100_000, 5);
        assert_eq!(last.lines[0].text, "line 00099999");
    }

    #[test]
    fn a_long_line_becomes_several_and_loses_nothing() {
        let (_dir, log) = log(1 << 20);
        log.push(Origin::Out, &vec![b'a'; LINE_MAX - 10]);
        log.push(Origin::Out, &[vec![b'b'; 30], b"\n".to_vec()].concat());
        let view = log.view(1, 10);
        let lengths: Vec<usize> = view.lines.iter().map(|l| l.text.len()).collect();
        assert_eq!(lengths, [LINE_MAX, 20]);
    }

    #[test]
    fn secrets_are_masked_in_lines_and_unfinished_text() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = Secrets::from_values(["sk-live-0123456789abcdef".to_owned()]);
        let log = JobOutputLog::create(&dir.path().join("j"), 1 << 20, secrets).unwrap();
        log.push(
            Origin::Out,
            b"key sk-live-0123456789abcdef\nsk-live-0123456789abcdef",
        );
        let view = log.view(1, 10);
        assert!(!view.lines[0].text.contains("0123456789"));
        assert!(!view.unfinished[0].1.contains("0123456789"));
        let raw = std::fs::read(dir.path().join("j.0.log")).unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("0123456789"));
    }

    #[test]
    fn a_secret_cut_by_the_line_split_is_masked_in_both_pieces() {
        let key = "sk-live-0123456789abcdef";
        for cut in 1..key.len() {
            for chunked in [false, true] {
                let dir = tempfile::tempdir().unwrap();
                let secrets = Secrets::from_values([key.to_owned()]);
                let log = JobOutputLog::create(&dir.path().join("j"), 1 << 20, secrets).unwrap();
                let text = [
                    vec![b'x'; LINE_MAX - cut],
                    key.as_bytes().to_vec(),
                    b" tail\n".to_vec(),
                ]
                .concat();
                if chunked {
                    // As a pipe delivers it: in small reads.
                    text.chunks(7)
                        .for_each(|chunk| log.push(Origin::Out, chunk));
                } else {
                    log.push(Origin::Out, &text);
                }
                let view = log.view(1, 10);
                assert_eq!(view.lines.len(), 2, "cut {cut}");
                let joined: String = view.lines.iter().map(|l| l.text.as_str()).collect();
                assert_eq!(joined.len(), text.len() - 1);
                assert!(
                    joined.ends_with(&format!("{} tail", "*".repeat(key.len()))),
                    "cut {cut} chunked {chunked}: {}",
                    &joined[joined.len() - 40..]
                );
            }
        }
    }

    #[test]
    fn a_waiter_wakes_on_a_line_from_another_thread() {
        let (_dir, log) = log(1 << 20);
        std::thread::scope(|threads| {
            let waiter = threads.spawn(|| {
                log.wait_until(
                    Some(Instant::now() + Duration::from_secs(60)),
                    |total, _, _| total >= 1,
                )
            });
            log.push(Origin::Out, b"hello\n");
            assert!(waiter.join().unwrap());
        });
    }
}
