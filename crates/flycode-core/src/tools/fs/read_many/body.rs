//! PlanReading the planned files, in order, within the output cap, and writing seed 001's body: a
//! section per file, then Errors, what was not read, and the summary. A file is read through the
//! sandbox and only as far as it will be shown (never loaded whole when it is cut).

use std::fmt::Write as _;
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::protocol::ErrorCode;
use crate::sandbox::{RootedPath, Sandbox, sha256_hex};
use crate::tools::ToolError;
use crate::tools::secrets::{Edge, Secrets};

use super::plan::{EntryError, MAX_FILES, PlannedRead};

/// Room kept for the tail when nothing else is known: section titles, the summary, and one
/// "… and N more" line per list.
const FIXED_TAIL: usize = 200;

/// Room for a file's header beyond its path (sizes, line count).
const HEADER_ROOM: usize = 64;

/// Room for the note under a cut file.
const CUT_NOTE_ROOM: usize = 160;

/// A file is started only if at least this much of it (or all of it, when smaller) fits.
const MIN_SHOWN: u64 = 256;

/// Why a file is shown in part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// `maxBytesPerFile`.
    PerFile,
    /// The output cap: the files after it are not read.
    OutputCap,
}

/// A file shown, whole or in part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FileShown {
    /// Its resolved absolute path.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// The lines shown.
    pub lines: u64,
    /// The bytes shown.
    pub shown_bytes: u64,
    /// Why it is shown in part, if it is.
    pub cut: Option<Cut>,
    /// The sha256 of its bytes, when shown whole.
    pub sha256: Option<String>,
}

/// What a call read and the body that shows it.
#[derive(Debug, Default)]
pub(super) struct ReadManyReport {
    /// Seed 001's body.
    pub body: String,
    /// The files shown, in order.
    pub files: Vec<FileShown>,
    /// The entries and files that could not be read.
    pub errors: Vec<EntryError>,
    /// Files not read because the output cap was reached.
    pub not_read: Vec<String>,
    /// Patterns that matched more files than one call reads.
    pub more_matches: Vec<String>,
}

impl ReadManyReport {
    /// The bytes shown, over all files.
    pub(super) fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.shown_bytes).sum()
    }

    /// Whether anything was left out for the output cap or the file limit.
    pub(super) fn is_truncated(&self) -> bool {
        !self.not_read.is_empty()
            || !self.more_matches.is_empty()
            || self.files.iter().any(|f| f.cut == Some(Cut::OutputCap))
    }

    /// Whether nothing could be read and nothing was left for later: every entry failed.
    pub(super) fn all_failed(&self) -> bool {
        self.files.is_empty() && self.not_read.is_empty() && self.more_matches.is_empty()
    }
}

/// `512 B`, `2.1 KB`, `3.4 MB`: seed 001's sizes (1024 bytes to a KB, one decimal).
pub fn seed_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Reads the files of `plan` in order until `cap` bytes of body are used, and renders the body.
pub(super) fn read_planned(
    sandbox: &Sandbox,
    plan: &[PlannedRead],
    cap: usize,
    max_per_file: Option<u64>,
    cancel: Option<&AtomicBool>,
    secrets: &Secrets,
) -> Result<ReadManyReport, ToolError> {
    // What the tail would need for the steps from i on, were they all listed.
    let mut pending = vec![0_usize; plan.len() + 1];
    for (i, step) in plan.iter().enumerate().rev() {
        pending[i] = pending[i + 1] + listed_len(step);
    }
    let mut reading = PlanReading {
        sandbox,
        cap,
        per_file: max_per_file.unwrap_or(u64::MAX),
        secrets,
        report: ReadManyReport::default(),
        files_part: String::new(),
        errors_len: 0,
        stopped: false,
    };
    for (i, step) in plan.iter().enumerate() {
        let (path, rooted, from_glob) = match step {
            PlannedRead::Error(error) => {
                reading.errors_len += listed_len(step);
                reading.report.errors.push(error.clone());
                continue;
            }
            PlannedRead::MoreMatches { pattern } => {
                reading.report.more_matches.push(pattern.clone());
                continue;
            }
            PlannedRead::File {
                path,
                rooted,
                from_glob,
            } => (path, rooted, *from_glob),
        };
        if reading.stopped {
            reading.report.not_read.push(path.clone());
            continue;
        }
        if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                "fs.readMany was stopped by the user (Ctrl-C)",
                None,
            ));
        }
        reading.read_file(path, rooted, from_glob, pending[i + 1]);
    }
    let PlanReading {
        mut report,
        mut files_part,
        ..
    } = reading;
    let tail = render_tail(&report, cap.saturating_sub(files_part.len()));
    files_part.push_str(&tail);
    report.body = files_part;
    Ok(report)
}

/// The reading of a plan under way: the files' sections so far, and what the tail will list.
struct PlanReading<'a> {
    sandbox: &'a Sandbox,
    cap: usize,
    per_file: u64,
    secrets: &'a Secrets,
    report: ReadManyReport,
    /// The sections of the files shown so far.
    files_part: String,
    /// The bytes the errors listed so far take in the tail.
    errors_len: usize,
    /// Whether the output cap was reached: the files after it are listed, not read.
    stopped: bool,
}

impl PlanReading<'_> {
    /// Reads one planned file, as far as the room left allows with `pending` bytes of tail still
    /// to come for the steps after it, and shows it or lists why not.
    fn read_file(&mut self, path: &str, rooted: &RootedPath, from_glob: bool, pending: usize) {
        let reserve = (FIXED_TAIL + self.errors_len + pending).min((self.cap / 4).max(FIXED_TAIL));
        // What this file may show: all of it if it fits, else what fits beside the cut's note.
        let room_whole = self
            .cap
            .saturating_sub(self.files_part.len() + reserve + path.len() + HEADER_ROOM)
            as u64;
        let (file, size) = match open(self.sandbox, path, rooted) {
            Ok(opened) => opened,
            Err(error) => return self.fail(EntryError::from_tool_error(path, path, &error)),
        };
        let room = if size <= room_whole && size <= self.per_file {
            room_whole
        } else {
            room_whole.saturating_sub(CUT_NOTE_ROOM as u64)
        };
        if room < size.min(MIN_SHOWN) {
            self.stopped = true;
            self.report.not_read.push(path.to_owned());
            return;
        }
        let limit = self.per_file.min(room);
        match read_text(file, size, limit, self.secrets) {
            Ok(text) => self.show(path, text, limit),
            Err(UnreadableFile::Binary { offset }) => {
                self.fail(binary_error(path, from_glob, offset))
            }
            Err(UnreadableFile::Io(error)) => self.fail(EntryError {
                path: path.to_owned(),
                code: ErrorCode::IoError,
                reason: error.to_string(),
            }),
        }
    }

    /// Adds the section of a file read up to `limit` bytes.
    fn show(&mut self, path: &str, text: Text, limit: u64) {
        let Text {
            text,
            size,
            whole,
            sha256,
        } = text;
        let cut = match (whole, limit == self.per_file) {
            (true, _) => None,
            (false, true) => Some(Cut::PerFile),
            (false, false) => Some(Cut::OutputCap),
        };
        self.stopped |= cut == Some(Cut::OutputCap);
        let shown = FileShown {
            path: path.to_owned(),
            size,
            lines: count_lines(&text),
            shown_bytes: text.len() as u64,
            cut,
            sha256,
        };
        write_section(&mut self.files_part, &shown, &text, self.per_file);
        self.report.files.push(shown);
    }

    /// Lists a file that could not be read under Errors.
    fn fail(&mut self, error: EntryError) {
        self.errors_len += error_line(&error).len();
        self.report.errors.push(error);
    }
}

/// The error of a file that is not text: a glob's find is skipped quietly, a file named
/// literally says how to read it.
fn binary_error(path: &str, from_glob: bool, offset: usize) -> EntryError {
    let reason = if from_glob {
        "binary file, skipped".to_owned()
    } else {
        format!(
            "is not UTF-8 text (a NUL or invalid byte at offset {offset}); read it with fs.read \"encoding\": \"base64\""
        )
    };
    EntryError {
        path: path.to_owned(),
        code: ErrorCode::BinaryContent,
        reason,
    }
}

/// Opens a planned file through the sandbox, from its root's handle (never outside it; regular
/// files only), with its size.
fn open(sandbox: &Sandbox, path: &str, rooted: &RootedPath) -> Result<(File, u64), ToolError> {
    let file = sandbox.open_resolved_for_reading(path, rooted)?;
    let size = file
        .metadata()
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{path}: {e}"), None))?
        .len();
    Ok((file, size))
}

/// Text read from a file: at most `limit` bytes of it.
struct Text {
    /// What is shown, its secrets masked.
    text: String,
    /// The file's size (what was read, when it was read whole).
    size: u64,
    whole: bool,
    /// The hash of the file as it is (not as masked), when it was read whole: the stale-read
    /// guard compares it with the file's.
    sha256: Option<String>,
}

enum UnreadableFile {
    /// A NUL byte, or bytes that are not UTF-8, at this offset.
    Binary {
        offset: usize,
    },
    Io(std::io::Error),
}

/// Reads at most `limit` bytes (and a margin more, to learn whether there is more and to mask a
/// secret the limit cuts), as UTF-8; a character cut at the limit is left out. Secrets are
/// masked in what is shown, with the bytes after it in view (PROTOCOL.md §9 (Secrets and masking)).
fn read_text(file: File, size: u64, limit: u64, secrets: &Secrets) -> Result<Text, UnreadableFile> {
    let beyond = (secrets.margin() as u64).max(1);
    let capacity = usize::try_from(size.min(limit.saturating_add(beyond))).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    file.take(limit.saturating_add(beyond))
        .read_to_end(&mut bytes)
        .map_err(UnreadableFile::Io)?;
    let whole = bytes.len() as u64 <= limit;
    let mut shown_len = bytes
        .len()
        .min(usize::try_from(limit).unwrap_or(usize::MAX));
    // `contains` on bytes is a memchr; the position is looked for only when there is one.
    if bytes[..shown_len].contains(&0) {
        let offset = bytes.iter().position(|b| *b == 0).unwrap_or(0);
        return Err(UnreadableFile::Binary { offset });
    }
    let size = if whole {
        bytes.len() as u64
    } else {
        size.max(limit + 1)
    };
    if let Err(utf8) = std::str::from_utf8(&bytes[..shown_len]) {
        // Only a character cut in two at the limit may be left out; anything else is binary.
        if whole || utf8.error_len().is_some() {
            return Err(UnreadableFile::Binary {
                offset: utf8.valid_up_to(),
            });
        }
        shown_len = utf8.valid_up_to();
    }
    let sha256 = whole.then(|| sha256_hex(&bytes));
    let mut shown = bytes[..shown_len].to_vec();
    secrets.mask_window(&mut shown, Edge::none(), Edge::exact(&bytes[shown_len..]));
    // Masking replaces whole characters: still UTF-8.
    let text = String::from_utf8(shown)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(Text {
        text,
        size,
        whole,
        sha256,
    })
}

/// Lines as a reader counts them: a final line without a newline counts too.
fn count_lines(text: &str) -> u64 {
    let newlines = text.as_bytes().iter().filter(|b| **b == b'\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with('\n'))
}

/// `=== File: /a/b.rs (2.1 KB, 45 lines) ===`, the text as it is (CR, BOM and all), a line end if
/// it has none, the note of a cut, and a blank line.
fn write_section(out: &mut String, file: &FileShown, text: &str, per_file: u64) {
    let size = seed_size(file.size);
    let _ = match file.cut {
        None => writeln!(
            out,
            "=== File: {} ({size}, {}) ===",
            file.path,
            crate::tools::tool::plural(usize::try_from(file.lines).unwrap_or(usize::MAX), "line")
        ),
        Some(_) => writeln!(
            out,
            "=== File: {} ({size}, first {} shown) ===",
            file.path,
            seed_size(file.shown_bytes)
        ),
    };
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    if let Some(cut) = file.cut {
        let why = match cut {
            Cut::PerFile => format!("maxBytesPerFile {per_file}"),
            Cut::OutputCap => "the output cap".to_owned(),
        };
        let _ = writeln!(
            out,
            "[cut by {why}: {} of {} bytes shown; read on with fs.read \"range\": \"{}-\" (characters)]",
            file.shown_bytes,
            file.size,
            text.chars().count()
        );
    }
    out.push('\n');
}

/// `- /a/b.rs: does not exist (not_found)`.
fn error_line(error: &EntryError) -> String {
    format!("- {}: {} ({})\n", error.path, error.reason, error.code)
}

/// How long a step's line would be in the tail, were it listed there.
fn listed_len(step: &PlannedRead) -> usize {
    match step {
        PlannedRead::File { path, .. } => path.len() + 4,
        PlannedRead::Error(error) => error_line(error).len(),
        PlannedRead::MoreMatches { pattern } => pattern.len() + 4,
    }
}

/// Errors, what was not read and the summary, within `budget` bytes when it can: lists stop
/// with `- … and N more` where they would not fit; the summary is always whole.
fn render_tail(report: &ReadManyReport, budget: usize) -> String {
    let mut summary = format!(
        "--- Summary ---\nTotal: {}, {}\nErrors: {}\n",
        crate::tools::tool::plural(report.files.len(), "file"),
        seed_size(report.total_bytes()),
        report.errors.len()
    );
    if !report.not_read.is_empty() {
        let _ = writeln!(
            summary,
            "Not read: {} (output cap); read them in another call",
            crate::tools::tool::plural(report.not_read.len(), "file")
        );
    }
    let mut room = budget.saturating_sub(summary.len());
    let errors: Vec<String> = report.errors.iter().map(error_line).collect();
    let not_read: Vec<String> = report
        .not_read
        .iter()
        .map(|path| format!("- {path}\n"))
        .collect();
    let more: Vec<String> = report
        .more_matches
        .iter()
        .map(|pattern| format!("- {pattern}: more files than one call reads; narrow the pattern\n"))
        .collect();
    let mut out = String::new();
    for (title, lines) in [
        ("=== Errors ===".to_owned(), errors),
        ("=== Not read (output cap) ===".to_owned(), not_read),
        (format!("=== Not listed (over {MAX_FILES} files) ==="), more),
    ] {
        if lines.is_empty() {
            continue;
        }
        let section = list_within(&title, &lines, room);
        room = room.saturating_sub(section.len());
        out.push_str(&section);
    }
    out.push_str(&summary);
    out
}

/// A titled list followed by a blank line, as many of its lines as fit in `room` (the title and
/// a `- … and N more` line always).
fn list_within(title: &str, lines: &[String], room: usize) -> String {
    const MORE_ROOM: usize = 32;
    let mut out = format!("{title}\n");
    let mut used = out.len() + 1;
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let needed = line.len() + if last { 0 } else { MORE_ROOM };
        if used + needed > room {
            let _ = writeln!(out, "- … and {} more", lines.len() - i);
            break;
        }
        used += line.len();
        out.push_str(line);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the limit cuts, the part of a key before the cut is masked, and the hash is the
    /// file's own.
    #[test]
    #[allow(clippy::disallowed_methods)] // the fixture is made directly, outside the sandbox
    fn a_cut_anywhere_masks_the_part_of_a_secret_it_shows() {
        let key = "sk-live-0123456789abcdef";
        let secrets = Secrets::from_values([key.to_owned()]);
        let content = format!("key={key}\n");
        let masked = content.replace(key, &"*".repeat(key.len()));
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("k.txt");
        std::fs::write(&path, &content).unwrap();
        for limit in 0..=content.len() as u64 + 1 {
            let file = File::open(&path).unwrap();
            let Ok(text) = read_text(file, content.len() as u64, limit, &secrets) else {
                panic!("limit {limit}");
            };
            let shown = usize::try_from(limit).unwrap().min(content.len());
            assert_eq!(text.text, masked[..shown], "limit {limit}");
            assert_eq!(
                text.sha256,
                text.whole.then(|| sha256_hex(content.as_bytes())),
                "limit {limit}"
            );
        }
    }

    #[test]
    fn sizes_read_as_seed_001_writes_them() {
        assert_eq!(seed_size(0), "0 B");
        assert_eq!(seed_size(1023), "1023 B");
        assert_eq!(seed_size(1024), "1.0 KB");
        assert_eq!(seed_size(12_800), "12.5 KB");
        assert_eq!(seed_size(3 * 1024 * 1024 + 400 * 1024), "3.4 MB");
    }

    #[test]
    fn lines_count_a_last_line_without_newline() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\r\nb"), 2);
    }

    #[test]
    fn a_list_that_does_not_fit_says_how_many_more() {
        let lines: Vec<String> = (0..10).map(|i| format!("- /r/file{i}.rs\n")).collect();
        let listed = list_within("=== Not read (output cap) ===", &lines, 100);
        assert!(listed.len() <= 100, "{listed}");
        assert!(listed.contains("- /r/file0.rs\n"), "{listed}");
        assert!(listed.contains("more\n"), "{listed}");
        let all = list_within("=== T ===", &lines, 10_000);
        assert_eq!(all.matches("- /r/").count(), 10);
        assert!(!all.contains("more"));
    }
}
