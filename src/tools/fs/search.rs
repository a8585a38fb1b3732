//! The content-search engine behind `fs.search`, built on ripgrep's own crates (`ignore`,
//! `grep-searcher`, `grep-regex`). It owns walking, filtering, matching and the `path:line:text`
//! rendering; it must not resolve or check roots (the sandbox has resolved `path` before) nor
//! render result blocks.
//!
//! Semantics are ripgrep's defaults, as `rg -n --sort path` gives them:
//!
//! - ignore rules: `.ignore` and `.rgignore` files everywhere, and `.gitignore`, `.git/info/exclude`
//!   and the global git excludes file **only inside a git repository** (a directory with `.git`
//!   at or above the search path), exactly as ripgrep does; ignore files in parent directories of
//!   the search path count too;
//! - hidden files and directories (a name starting with `.`) are skipped;
//! - binary files (a NUL byte, detected as ripgrep detects it) are skipped whole: unlike ripgrep,
//!   which prints what it matched before reaching a late NUL byte, nothing of such a file is shown,
//!   except when the limit is reached in that file before the NUL byte is read (the search stops
//!   there rather than read on to the end of a large file, as `rg -m` does);
//! - symbolic links are not followed, which also keeps the walk inside the roots;
//! - only regular files are opened, without following a last-component link and without blocking
//!   (`O_NOFOLLOW | O_NONBLOCK` on Unix), and checked again once open: a FIFO, socket or device
//!   swapped in after the walk is never read;
//! - the search path itself may be a single file: it is searched even if hidden or ignored (as
//!   ripgrep searches a file named on its command line), but the filters below still apply to it,
//!   the glob being matched against its file name.
//!
//! Filters: `glob` with ripgrep's `-g` semantics (gitignore syntax, matched against the path
//! relative to the search path, `!` to exclude), `extensions` (case-sensitive, as `-g '*.ts'`),
//! size and modification-time bounds (inclusive).
//!
//! Files are searched in parallel, up to [`LOOKAHEAD`] files ahead of the first file not yet
//! reported, and reported strictly in path order (directory by directory, names sorted), so the
//! output is the same on every run. The search stops once `limit` matching lines are in hand and
//! one more matching line proves there is more: `truncated` is never set when nothing was left out.

mod bound;
mod order;
#[cfg(test)]
mod tests;
mod tool;

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, mpsc};
use std::thread;
use std::time::SystemTime;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};
use thiserror::Error;

use crate::protocol::ErrorCode;
use order::{Collector, Gate};

pub use bound::parse_rfc3339_bound;
pub use tool::{FsSearch, SearchArgs, run};

/// Lines longer than this many characters are cut, and the cut says how much was left out.
pub const MAX_LINE_CHARS: usize = 2000;

/// How many files may be searched ahead of the first one not yet reported (bounds memory).
pub const LOOKAHEAD: usize = 1024;

/// Files handed to a worker at once.
const BATCH: usize = 16;

/// At most this many searching threads, whatever the machine.
const MAX_THREADS: usize = 8;

/// What to search for, where, and which files to consider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRequest {
    /// A directory or a single file, already resolved inside the allowed roots by the sandbox.
    pub path: PathBuf,
    /// The text to find, one line at most.
    pub query: String,
    /// Whether `query` is a regular expression (Rust regex syntax) rather than literal text.
    pub regex: bool,
    /// Only files whose path relative to `path` matches this glob (ripgrep's `-g`).
    pub glob: Option<String>,
    /// Only files with one of these extensions (`"ts"` or `".ts"`); empty for any.
    pub extensions: Vec<String>,
    /// Skip files smaller than this many bytes.
    pub min_bytes: Option<u64>,
    /// Skip files larger than this many bytes.
    pub max_bytes: Option<u64>,
    /// Skip files modified before this instant.
    pub mtime_from: Option<SystemTime>,
    /// Skip files modified after this instant.
    pub mtime_to: Option<SystemTime>,
    /// Lines of context before and after each matching line.
    pub context_lines: usize,
    /// Stop after this many matching lines (at least one is always allowed).
    pub limit: usize,
}

impl SearchRequest {
    /// A literal search for `query` below `path` with the contract's defaults (limit 100).
    pub fn new(path: impl Into<PathBuf>, query: impl Into<String>) -> SearchRequest {
        SearchRequest {
            path: path.into(),
            query: query.into(),
            regex: false,
            glob: None,
            extensions: Vec::new(),
            min_bytes: None,
            max_bytes: None,
            mtime_from: None,
            mtime_to: None,
            context_lines: 0,
            limit: 100,
        }
    }
}

/// The lines found, in path order, and what the search went through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchOutput {
    /// Matching lines and their context, in file order then line order.
    pub lines: Vec<SearchLine>,
    /// Whether more matching lines exist than `limit` let through.
    pub truncated: bool,
    /// Files opened and read (binary ones included), up to where the search stopped.
    pub files_searched: usize,
    /// Files with at least one matching line shown.
    pub files_matched: usize,
    /// Files skipped because they hold binary data.
    pub binary_files: usize,
    /// Files or directories that could not be read (skipped, as ripgrep skips them).
    pub unreadable: usize,
    /// The context requested; `--` separators appear in [`SearchOutput::render`] only when > 0.
    pub context_lines: usize,
}

/// One line of output: a matching line or a line of context around one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchLine {
    /// The file's absolute path.
    pub path: PathBuf,
    /// The 1-based line number.
    pub line_number: u64,
    /// The line without its terminator, decoded lossily, cut at [`MAX_LINE_CHARS`].
    pub text: String,
    /// Whether this is context rather than a match.
    pub is_context: bool,
}

impl SearchOutput {
    /// Renders the lines as ripgrep does: `path:line:text` for matches, `path-line-text` for
    /// context, and, when context was asked for, `--` between groups that are not adjacent.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut previous: Option<&SearchLine> = None;
        for line in &self.lines {
            if let Some(prev) = previous
                && self.context_lines > 0
                && (prev.path != line.path || prev.line_number + 1 != line.line_number)
            {
                out.push_str("--\n");
            }
            let sep = if line.is_context { '-' } else { ':' };
            let _ = writeln!(
                out,
                "{}{sep}{}{sep}{}",
                line.path.display(),
                line.line_number,
                line.text
            );
            previous = Some(line);
        }
        out
    }
}

/// Why a search could not run; per-file failures are counted in [`SearchOutput`] instead.
#[derive(Debug, Error)]
pub enum SearchError {
    /// The query is not a valid regular expression (or holds a line break).
    #[error(
        "invalid regex: {message}; fix the pattern, or set regex to false to search for the text literally"
    )]
    InvalidRegex {
        /// The regex crate's explanation.
        message: String,
    },
    /// The glob does not parse.
    #[error("invalid glob {glob:?}: {message}")]
    InvalidGlob {
        /// The glob as given.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
    /// The search path is a FIFO, socket or device, which fs.search never opens.
    #[error("{path} is a FIFO, socket or device; fs.search reads only files and directories")]
    SpecialFile {
        /// The search path.
        path: PathBuf,
    },
    /// The search path cannot be read, or a thread could not be started.
    #[error("{path}: {source}")]
    Io {
        /// The search path.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

impl SearchError {
    /// The contract's error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            SearchError::InvalidRegex { .. } | SearchError::InvalidGlob { .. } => {
                ErrorCode::InvalidArgs
            }
            SearchError::SpecialFile { .. } => ErrorCode::SpecialFile,
            SearchError::Io { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => ErrorCode::NotFound,
                io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
                _ => ErrorCode::IoError,
            },
        }
    }
}

/// Searches `request.path` for `request.query`; see the module documentation for the rules.
pub fn search(request: &SearchRequest) -> Result<SearchOutput, SearchError> {
    let matcher = build_matcher(&request.query, request.regex)?;
    let root = request.path.as_path();
    let io_error = |source| SearchError::Io {
        path: root.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(root).map_err(io_error)?;
    let base = if meta.is_dir() {
        std::fs::read_dir(root).map_err(io_error)?;
        root
    } else if meta.is_file() {
        root.parent().unwrap_or(root)
    } else {
        return Err(SearchError::SpecialFile {
            path: root.to_path_buf(),
        });
    };
    let names = NameFilter {
        glob: build_glob(base, request.glob.as_deref())?,
        extensions: request
            .extensions
            .iter()
            .map(|e| e.trim_start_matches('.').to_owned())
            .collect(),
    };
    let limit = request.limit.max(1);
    let gate = Gate::default();
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (result_tx, result_rx) = mpsc::channel::<(usize, Vec<Outcome>)>();
    let job_rx = Mutex::new(job_rx);
    let mut collector = Collector::new(limit, request.context_lines);
    let threads = thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_THREADS);
    thread::scope(|scope| {
        let (job_rx, matcher, gate, names) = (&job_rx, &matcher, &gate, &names);
        let mut workers = 0;
        for _ in 0..threads {
            let results = result_tx.clone();
            let spawned = thread::Builder::new()
                .name("fs.search".into())
                .spawn_scoped(scope, move || {
                    search_files(job_rx, results, matcher, request, limit, gate)
                });
            workers += usize::from(spawned.is_ok());
        }
        drop(result_tx);
        if workers == 0 {
            return Err(io_error(io::Error::other(
                "could not start a search thread",
            )));
        }
        let is_file = meta.is_file();
        thread::Builder::new()
            .name("fs.search walk".into())
            .spawn_scoped(scope, move || {
                walk(root, is_file, names, job_tx, gate);
            })
            .map_err(io_error)?;
        collector.collect(result_rx, gate);
        Ok(())
    })?;
    Ok(collector.out)
}

/// The regex for a query: escaped when literal, one line only, ripgrep's defaults otherwise.
fn build_matcher(query: &str, regex: bool) -> Result<RegexMatcher, SearchError> {
    if query.contains('\n') {
        return Err(SearchError::InvalidRegex {
            message: "the query holds a line break, but fs.search matches one line at a time"
                .into(),
        });
    }
    RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .fixed_strings(!regex)
        .build(query)
        .map_err(|e| SearchError::InvalidRegex {
            message: e.to_string(),
        })
}

/// The glob as a ripgrep `-g` override rooted at `base`.
fn build_glob(base: &Path, glob: Option<&str>) -> Result<Option<Override>, SearchError> {
    let Some(glob) = glob else {
        return Ok(None);
    };
    let invalid = |e: ignore::Error| SearchError::InvalidGlob {
        glob: glob.to_owned(),
        message: e.to_string(),
    };
    let mut builder = OverrideBuilder::new(base);
    builder.add(glob).map_err(invalid)?;
    builder.build().map(Some).map_err(invalid)
}

/// The filters decided by name alone, applied while walking.
struct NameFilter {
    glob: Option<Override>,
    extensions: Vec<String>,
}

impl NameFilter {
    fn has_extension(&self, path: &Path) -> bool {
        self.extensions.is_empty()
            || path
                .extension()
                .and_then(OsStr::to_str)
                .is_some_and(|ext| self.extensions.iter().any(|e| e == ext))
    }
}

/// Consecutive items of the walk, handed to one worker at once (fewer wake-ups than one by one).
struct Job {
    /// The index of the first item in path order.
    first: usize,
    items: Vec<Item>,
}

/// One item of the walk.
enum Item {
    /// A file to open and search.
    File(PathBuf),
    /// A directory entry the walk could not read.
    Unreadable,
}

/// What searching one file gave.
enum Outcome {
    Hits { path: PathBuf, hits: FileHits },
    Binary,
    Skipped,
    Unreadable,
}

/// Walks `root` in path order and hands out files in batches of [`BATCH`] until the walk ends or
/// the search stops.
fn walk(root: &Path, is_file: bool, names: &NameFilter, jobs: mpsc::Sender<Job>, gate: &Gate) {
    if is_file {
        let name = root.file_name().map_or(root, Path::new);
        let globbed = names
            .glob
            .as_ref()
            .is_none_or(|g| !g.matched(name, false).is_ignore());
        if globbed && names.has_extension(root) {
            let items = vec![Item::File(root.to_path_buf())];
            let _ = jobs.send(Job { first: 0, items });
        }
        return;
    }
    let mut builder = WalkBuilder::new(root);
    builder
        .standard_filters(true)
        .require_git(true)
        .follow_links(false)
        .add_custom_ignore_filename(".rgignore")
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(glob) = &names.glob {
        builder.overrides(glob.clone());
    }
    let mut first = 0;
    let mut items = Vec::with_capacity(BATCH);
    for entry in builder.build() {
        if gate.is_stopped() {
            return;
        }
        items.push(match entry {
            Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => {
                if !names.has_extension(entry.path()) {
                    continue;
                }
                Item::File(entry.into_path())
            }
            Ok(_) => continue,
            Err(_) => Item::Unreadable,
        });
        if items.len() == BATCH {
            let job = Job {
                first,
                items: std::mem::replace(&mut items, Vec::with_capacity(BATCH)),
            };
            first += BATCH;
            if !gate.wait_for_room(first) || jobs.send(job).is_err() {
                return;
            }
        }
    }
    if !items.is_empty() {
        let _ = jobs.send(Job { first, items });
    }
}

/// A worker: takes batches from `jobs` and sends back what each file gave, until there are no
/// more or the search has stopped.
fn search_files(
    jobs: &Mutex<mpsc::Receiver<Job>>,
    results: mpsc::Sender<(usize, Vec<Outcome>)>,
    matcher: &RegexMatcher,
    request: &SearchRequest,
    limit: usize,
    gate: &Gate,
) {
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(request.context_lines)
        .after_context(request.context_lines)
        .build();
    loop {
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else { return };
        let mut outcomes = Vec::with_capacity(job.items.len());
        for item in job.items {
            if gate.is_stopped() {
                return;
            }
            outcomes.push(match item {
                Item::Unreadable => Outcome::Unreadable,
                Item::File(path) => search_file(&mut searcher, matcher, path, request, limit, gate),
            });
        }
        if results.send((job.first, outcomes)).is_err() {
            return;
        }
    }
}

/// Opens one file (a regular one only, never blocking) and searches it for at most `cap` matches.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: PathBuf,
    request: &SearchRequest,
    cap: usize,
    gate: &Gate,
) -> Outcome {
    let Ok((file, meta)) = open_regular(&path) else {
        return Outcome::Unreadable;
    };
    if !meta.is_file() || !passes_metadata(&meta, request) {
        return Outcome::Skipped;
    }
    let mut sink = HitSink {
        hits: FileHits::default(),
        cap,
        binary: false,
    };
    let reader = StoppableReader { file, gate };
    match searcher.search_reader(matcher, reader, &mut sink) {
        Ok(()) if sink.binary => Outcome::Binary,
        Ok(()) => Outcome::Hits {
            path,
            hits: sink.hits,
        },
        Err(_) => Outcome::Unreadable,
    }
}

/// Opens `path` for reading without following a final link and without blocking on a FIFO.
fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
        // The flag bits are small positive constants: the conversion cannot fail.
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// The size and modification-time filters, all bounds inclusive.
fn passes_metadata(meta: &Metadata, request: &SearchRequest) -> bool {
    let size = meta.len();
    if request.min_bytes.is_some_and(|min| size < min)
        || request.max_bytes.is_some_and(|max| size > max)
    {
        return false;
    }
    if request.mtime_from.is_none() && request.mtime_to.is_none() {
        return true;
    }
    let Ok(modified) = meta.modified() else {
        return false;
    };
    request.mtime_from.is_none_or(|from| modified >= from)
        && request.mtime_to.is_none_or(|to| modified <= to)
}

/// A file that reads as ended once the search has stopped, so no worker lingers on a big file.
struct StoppableReader<'a> {
    file: File,
    gate: &'a Gate,
}

impl Read for StoppableReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.gate.is_stopped() {
            return Ok(0);
        }
        self.file.read(buf)
    }
}

/// How a line of one file's hits came to be reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Match,
    Before,
    After,
}

/// One reported line of one file.
struct Hit {
    line_number: u64,
    text: String,
    kind: Kind,
}

/// The lines one file gave, with at most `cap` matches.
#[derive(Default)]
struct FileHits {
    lines: Vec<Hit>,
    matches: usize,
    /// A match beyond `cap` exists.
    more: bool,
}

/// Collects one file's matches and context, stopping at the first match beyond `cap`.
struct HitSink {
    hits: FileHits,
    cap: usize,
    binary: bool,
}

impl HitSink {
    fn push(&mut self, bytes: &[u8], line_number: Option<u64>, kind: Kind) {
        self.hits.lines.push(Hit {
            line_number: line_number.unwrap_or(0),
            text: line_text(bytes),
            kind,
        });
    }
}

impl Sink for HitSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let mut number = mat.line_number();
        for line in mat.lines() {
            if self.hits.matches == self.cap {
                self.hits.more = true;
                return Ok(false);
            }
            self.hits.matches += 1;
            self.push(line, number, Kind::Match);
            number = number.map(|n| n + 1);
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        let kind = match context.kind() {
            SinkContextKind::Before => Kind::Before,
            SinkContextKind::After | SinkContextKind::Other => Kind::After,
        };
        if kind == Kind::Before && self.hits.matches == self.cap {
            // Context before a match is only reported when that match follows.
            self.hits.more = true;
            return Ok(false);
        }
        self.push(context.bytes(), context.line_number(), kind);
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line's bytes as text: terminator dropped, invalid UTF-8 replaced, cut when too long.
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => text.into_owned(),
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!("{} [... {rest} more characters cut]", &text[..cut])
        }
    }
}
