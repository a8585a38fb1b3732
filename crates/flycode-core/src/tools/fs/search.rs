//! The content-search engine behind `fs.search`, built on ripgrep's own crates (`ignore`,
//! `grep-searcher`, `grep-regex`). It owns walking, filtering, matching and the `path:line:text`
//! rendering; it must not resolve or check roots (the sandbox has resolved `path` and opened it
//! before, see [`Start`]) nor render result blocks.
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
//! The walk stays inside through directory handles, never through path strings (`walk.rs`, on
//! the shared [`crate::sandbox::walk`]): the search path is opened by the sandbox from its root's
//! handle, and from there every directory is opened relative to its parent's open handle, one
//! name at a time and never following a link
//! (`openat` with `O_NOFOLLOW | O_DIRECTORY`), and listed through its own handle; every file is
//! opened relative to its directory's handle (`O_NOFOLLOW | O_NONBLOCK`) and checked to be a
//! regular file once open. A directory swapped for a link to somewhere else while the search runs
//! therefore fails to open (and is skipped) instead of being followed: nothing outside is ever
//! listed or read. The ignore files are read through the same handles (`sandbox/walk/rules.rs`), and decided
//! per entry with the `ignore` crate's matchers and its walker's precedence; those of the
//! directories above the search path are opened the same way, from the root's handle inside the
//! root and from `/` above it. A link to an ignore file is followed only inside the root, and a
//! linked worktree's exclude file is read only when its repository lies inside the root; the
//! global excludes file is the one file read by its path, as the user's git configuration names it.
//!
//! Filters: `glob` with ripgrep's `-g` semantics (gitignore syntax, matched against the path
//! relative to the search path, `!` to exclude), `extensions` (case-sensitive, as `-g '*.ts'`),
//! size and modification-time bounds (inclusive).
//!
//! Files are searched in parallel, up to [`LOOKAHEAD`] files ahead of the first file not yet
//! reported, and reported strictly in path order (directory by directory, names sorted), so the
//! output is the same on every run. The search stops once `limit` matching lines are in hand and
//! one more matching line proves there is more: `truncated` is never set when nothing was left out.

pub mod bound;
pub mod list;
pub mod order;
#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests;
pub mod tool;
pub mod walk;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, SystemTime};

use cap_std::fs::Dir;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::{Override, OverrideBuilder};
use thiserror::Error;

use crate::protocol::ErrorCode;
use crate::sandbox::mask::{MaskingReader, Secrets};
use crate::sandbox::walk::{self as tree, WalkTarget};
use order::{Collector, LookaheadGate};
use walk::DirWalk;

pub use crate::sandbox::walk::Start;
pub use crate::sandbox::walk::open_dir_start;
pub use bound::parse_rfc3339_bound;
pub use list::{Listing, list_files};
pub use tool::{FsSearch, SearchArgs, run};

/// How often a running search looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// Lines longer than this many characters are cut, and the cut says how much was left out.
pub const MAX_LINE_CHARS: usize = 2000;

/// How many files may be searched ahead of the first one not yet reported (bounds memory).
pub const LOOKAHEAD: usize = 1024;

/// Files handed to a worker at once.
const BATCH: usize = 16;

/// At most this many searching threads, whatever the machine.
const MAX_THREADS: usize = 8;

/// What to search for, where, and which files to consider.
#[derive(Clone, Debug)]
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
    /// Set (by Ctrl-C) to stop the search at once: it ends with [`SearchError::Cancelled`].
    pub cancel: Option<Arc<AtomicBool>>,
    /// Masked in every file before it is searched (PROTOCOL.md §9 (Secrets and masking)): a line shows a
    /// secret's bytes as `*`, and a query cannot find (and so cannot confirm) any part of one.
    pub secrets: Secrets,
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
            cancel: None,
            secrets: Secrets::default(),
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
    /// The user stopped the search (Ctrl-C).
    #[error("the search was stopped by the user (Ctrl-C)")]
    Cancelled,
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
            SearchError::Cancelled => ErrorCode::Cancelled,
            SearchError::Io { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => ErrorCode::NotFound,
                io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
                _ => ErrorCode::IoError,
            },
        }
    }
}

/// Searches `request.path` for `request.query`, opening it with the process's own authority (see
/// [`walk::ambient_start`]); see the module documentation for the rules.
pub fn search(request: &SearchRequest) -> Result<SearchOutput, SearchError> {
    let query = Query::new(request)?;
    query.search(walk::ambient_start(&request.path)?)
}

/// A request whose query and glob are known to be valid, ready to search an opened [`Start`].
pub struct Query<'a> {
    request: &'a SearchRequest,
    matcher: RegexMatcher,
}

impl<'a> Query<'a> {
    /// Checks the query and the glob, before anything is opened.
    pub fn new(request: &'a SearchRequest) -> Result<Query<'a>, SearchError> {
        let matcher = build_matcher(&request.query, request.regex)?;
        build_glob(&request.path, request.glob.as_deref())?;
        Ok(Query { request, matcher })
    }

    /// Searches `start`, the request's path already opened, whose paths are shown below
    /// `request.path`.
    pub fn search(self, start: Start) -> Result<SearchOutput, SearchError> {
        let Query { request, matcher } = self;
        let root = request.path.as_path();
        let io_error = |source| SearchError::Io {
            path: root.to_path_buf(),
            source,
        };
        let (base, source) = source_of(start, root).map_err(io_error)?;
        let names = NameFilter {
            glob: build_glob(base, request.glob.as_deref())?,
            extensions: request
                .extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_owned())
                .collect(),
        };
        let limit = request.limit.max(1);
        let gate = LookaheadGate::default();
        let (job_tx, job_rx) = mpsc::channel::<SearchJob>();
        let (result_tx, result_rx) = mpsc::channel::<(usize, Vec<FileOutcome>)>();
        let job_rx = Mutex::new(job_rx);
        let mut collector = Collector::new(limit, request.context_lines);
        let threads = thread::available_parallelism()
            .map_or(1, NonZeroUsize::get)
            .min(MAX_THREADS);
        let matcher = &matcher;
        let finished = AtomicBool::new(false);
        thread::scope(|scope| {
            let (job_rx, gate, names) = (&job_rx, &gate, &names);
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
            thread::Builder::new()
                .name("fs.search walk".into())
                .spawn_scoped(scope, move || match source {
                    RootSource::File(file) => hand_out_file(file, root, names, &job_tx),
                    RootSource::Walk(walk) => walk.run(root, names, job_tx, gate),
                })
                .map_err(io_error)?;
            // Ctrl-C stops the workers and the walk as the limit does. The watcher is woken when
            // the search ends, so it never delays the answer.
            let watcher = request.cancel.as_deref().map(|cancel| {
                let finished = &finished;
                scope.spawn(move || {
                    while !finished.load(Ordering::SeqCst) {
                        if cancel.load(Ordering::SeqCst) {
                            gate.stop();
                            return;
                        }
                        thread::park_timeout(CANCEL_POLL);
                    }
                })
            });
            collector.collect(result_rx, gate);
            finished.store(true, Ordering::SeqCst);
            if let Some(watcher) = &watcher {
                watcher.thread().unpark();
            }
            Ok(())
        })?;
        if request
            .cancel
            .as_deref()
            .is_some_and(|cancel| cancel.load(Ordering::SeqCst))
        {
            return Err(SearchError::Cancelled);
        }
        Ok(collector.out)
    }
}

/// What the walk thread goes through for `start` (shown as `root`), and the directory the glob
/// is matched below: the searched directory, or a single file's directory.
fn source_of(start: Start, root: &Path) -> io::Result<(&Path, RootSource)> {
    let Start {
        target,
        ancestors,
        canonical,
        root: allowed_root,
        skip,
    } = start;
    Ok(match target {
        WalkTarget::Dir(dir) => {
            let entries = tree::list(&dir)?;
            let walk = DirWalk {
                dir,
                entries,
                ancestors,
                canonical,
                root: allowed_root,
                skip,
            };
            (root, RootSource::Walk(walk))
        }
        WalkTarget::File(file) => (root.parent().unwrap_or(root), RootSource::File(file)),
    })
}

/// What the walk thread goes through: one opened file, or a directory and its first listing.
enum RootSource {
    File(File),
    Walk(DirWalk),
}

/// The search path is a single file: it is searched if the glob (against its name) and the
/// extensions let it through.
fn hand_out_file(file: File, path: &Path, names: &NameFilter, jobs: &mpsc::Sender<SearchJob>) {
    let name = path.file_name().map_or(path, Path::new);
    let globbed = names
        .glob
        .as_ref()
        .is_none_or(|g| !g.matched(name, false).is_ignore());
    if globbed && names.has_extension(path) {
        let items = vec![Item::Open {
            file,
            path: path.to_path_buf(),
        }];
        let _ = jobs.send(SearchJob { first: 0, items });
    }
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
struct SearchJob {
    /// The index of the first item in path order.
    first: usize,
    items: Vec<Item>,
}

/// One item of the walk.
enum Item {
    /// A file to open through its directory's handle and search.
    File {
        dir: Arc<Dir>,
        name: OsString,
        path: PathBuf,
    },
    /// The search path itself, a file already open.
    Open { file: File, path: PathBuf },
    /// A directory entry the walk could not read.
    Unreadable,
}

/// What searching one file gave.
enum FileOutcome {
    Hits { path: PathBuf, hits: FileHits },
    Binary,
    Skipped,
    Unreadable,
}

/// A worker: takes batches from `jobs` and sends back what each file gave, until there are no
/// more or the search has stopped.
fn search_files(
    jobs: &Mutex<mpsc::Receiver<SearchJob>>,
    results: mpsc::Sender<(usize, Vec<FileOutcome>)>,
    matcher: &RegexMatcher,
    request: &SearchRequest,
    limit: usize,
    gate: &LookaheadGate,
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
                Item::Unreadable => FileOutcome::Unreadable,
                Item::File { dir, name, path } => {
                    let opened = tree::open_file(&dir, &name);
                    // This file no longer holds its directory open (the last one closes it).
                    drop(dir);
                    search_file(&mut searcher, matcher, opened, path, request, limit, gate)
                }
                Item::Open { file, path } => {
                    let opened = file.metadata().map(|meta| (file, meta));
                    search_file(&mut searcher, matcher, opened, path, request, limit, gate)
                }
            });
        }
        if results.send((job.first, outcomes)).is_err() {
            return;
        }
    }
}

/// Searches one opened file (a regular one only) for at most `cap` matches.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    opened: io::Result<(File, Metadata)>,
    path: PathBuf,
    request: &SearchRequest,
    cap: usize,
    gate: &LookaheadGate,
) -> FileOutcome {
    let Ok((file, meta)) = opened else {
        return FileOutcome::Unreadable;
    };
    if !meta.is_file() || !passes_metadata(&meta, request) {
        return FileOutcome::Skipped;
    }
    let mut sink = HitSink {
        hits: FileHits::default(),
        cap,
        binary: false,
    };
    let reader = MaskingReader::new(StoppableReader { file, gate }, &request.secrets);
    match searcher.search_reader(matcher, reader, &mut sink) {
        Ok(()) if sink.binary => FileOutcome::Binary,
        Ok(()) => FileOutcome::Hits {
            path,
            hits: sink.hits,
        },
        Err(_) => FileOutcome::Unreadable,
    }
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
    gate: &'a LookaheadGate,
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
enum HitKind {
    Match,
    Before,
    After,
}

/// One reported line of one file.
struct Hit {
    line_number: u64,
    text: String,
    kind: HitKind,
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
    fn push(&mut self, bytes: &[u8], line_number: Option<u64>, kind: HitKind) {
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
            self.push(line, number, HitKind::Match);
            number = number.map(|n| n + 1);
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        let kind = match context.kind() {
            SinkContextKind::Before => HitKind::Before,
            SinkContextKind::After | SinkContextKind::Other => HitKind::After,
        };
        if kind == HitKind::Before && self.hits.matches == self.cap {
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
