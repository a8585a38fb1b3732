//! From the paths as given to the files to read, in order: literal paths resolved through the
//! sandbox, glob patterns expanded by fs.search's walk below their literal directory prefix
//! (ignore files followed, hidden names and links skipped), `exclude` applied to glob matches,
//! every file planned once. It opens directories to list them but reads no file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::protocol::ErrorCode;
use crate::sandbox::{LastComponent, RootedPath, Sandbox, SandboxError};
use crate::tools::ToolError;
use crate::tools::fs::search::{list_files, open_dir_start};

/// The most files one call plans (over all its globs); a glob with more matches says so.
pub(super) const MAX_FILES: usize = 1000;

/// One step of the plan, in the order the paths were given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PlannedRead {
    /// A file to read.
    File {
        /// Its resolved absolute path, as shown.
        path: String,
        /// The same, placed in its root: opened from there without resolving it again.
        rooted: RootedPath,
        /// Whether a glob found it (a binary file is then skipped rather than refused).
        from_glob: bool,
    },
    /// An entry (or a file a glob found) that cannot be read.
    Error(EntryError),
    /// A glob matched more files than the call plans: the rest are not listed.
    MoreMatches {
        /// The pattern as given.
        pattern: String,
    },
}

/// Why one path was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct EntryError {
    /// The path: resolved when it could be, else as given.
    pub path: String,
    /// The contract's code.
    pub code: ErrorCode,
    /// The reason, without the path in front.
    pub reason: String,
}

impl EntryError {
    /// An entry error from a tool error about `path` (the path as the message names it).
    pub(super) fn from_tool_error(path: &str, named: &str, error: &ToolError) -> EntryError {
        let reason = strip_subject(&error.message, named);
        EntryError {
            path: path.to_owned(),
            code: error.code,
            reason,
        }
    }
}

/// A message without the path it starts with (`/a is a directory` → `is a directory`).
fn strip_subject(message: &str, path: &str) -> String {
    message
        .strip_prefix(path)
        .map(|rest| rest.trim_start_matches(':').trim_start())
        .filter(|rest| !rest.is_empty())
        .unwrap_or(message)
        .to_owned()
}

/// Whether a path is a glob pattern: it holds `*`, `?`, `[` or `{`.
pub(super) fn is_glob(path: &str) -> bool {
    path.contains(['*', '?', '[', '{'])
}

/// The `exclude` patterns, matched against absolute paths; a pattern that does not start with
/// `/` or `**` matches at any depth (`*.min.js` is read as `**/*.min.js`).
pub(super) fn exclude_set(patterns: &[String]) -> Result<GlobSet, ToolError> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let anchored = if pattern.starts_with('/') || pattern.starts_with("**") {
            pattern.clone()
        } else {
            format!("**/{pattern}")
        };
        let glob = GlobBuilder::new(&anchored)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::InvalidArgs,
                    format!(
                        "fs.readMany: exclude {pattern:?} is not a valid glob: {}",
                        e.kind()
                    ),
                    Some("write globs such as \"**/tests/**\" or \"*.min.js\""),
                )
            })?;
        builder.add(glob);
    }
    builder.build().map_err(|e| {
        ToolError::new(
            ErrorCode::InvalidArgs,
            format!("fs.readMany: exclude: {e}"),
            None,
        )
    })
}

/// Plans the files of `paths`, in order, each file once.
pub(super) fn plan(
    sandbox: &Sandbox,
    paths: &[String],
    exclude: &GlobSet,
    cancel: Option<&AtomicBool>,
) -> Vec<PlannedRead> {
    let mut planner = Planner {
        sandbox,
        exclude,
        cancel,
        seen: HashSet::new(),
        seen_inputs: HashSet::new(),
        files: 0,
        steps: Vec::new(),
    };
    for given in paths {
        if !planner.seen_inputs.insert(given.as_str()) {
            continue;
        }
        // A file whose name holds glob characters (`pages/[id].tsx`) is read as named.
        let is_pattern = is_glob(given)
            && !sandbox
                .resolve(given, LastComponent::Follow)
                .is_ok_and(|p| p.exists);
        if is_pattern {
            planner.glob(given);
        } else {
            planner.literal(given);
        }
    }
    planner.steps
}

struct Planner<'a> {
    sandbox: &'a Sandbox,
    exclude: &'a GlobSet,
    cancel: Option<&'a AtomicBool>,
    /// Resolved paths already planned.
    seen: HashSet<PathBuf>,
    /// Paths as given already planned (a repeated missing path is one error).
    seen_inputs: HashSet<&'a str>,
    files: usize,
    steps: Vec<PlannedRead>,
}

impl Planner<'_> {
    fn error(&mut self, path: &str, code: ErrorCode, reason: impl Into<String>) {
        self.steps.push(PlannedRead::Error(EntryError {
            path: path.to_owned(),
            code,
            reason: reason.into(),
        }));
    }

    fn refusal(&mut self, given: &str, error: SandboxError) {
        let error = ToolError::from(error);
        self.steps
            .push(PlannedRead::Error(EntryError::from_tool_error(
                given, given, &error,
            )));
    }

    /// Plans a file unless it is planned already; false once the plan is full.
    fn file(&mut self, rooted: RootedPath, from_glob: bool) -> bool {
        if self.files == MAX_FILES {
            return false;
        }
        if self.seen.insert(rooted.absolute.clone()) {
            self.files += 1;
            self.steps.push(PlannedRead::File {
                path: rooted.absolute.display().to_string(),
                rooted,
                from_glob,
            });
        }
        true
    }

    fn literal(&mut self, given: &str) {
        match self.sandbox.resolve(given, LastComponent::Follow) {
            Err(error) => self.refusal(given, error),
            Ok(path) if !path.exists => self.refusal(
                given,
                SandboxError::NotFound {
                    path: given.to_owned(),
                },
            ),
            Ok(path) => {
                if !self.file(path, false) {
                    self.steps.push(PlannedRead::MoreMatches {
                        pattern: given.to_owned(),
                    });
                }
            }
        }
    }

    fn glob(&mut self, pattern: &str) {
        let (prefix, rest) = split_glob(pattern);
        let matcher = match glob_matcher(&rest) {
            Ok(matcher) => matcher,
            Err(error) => return self.error(pattern, error.code(), error.to_string()),
        };
        let (start, base) = match open_dir_start(self.sandbox, &prefix) {
            Ok(opened) => opened,
            Err(error) => {
                let error = ToolError::from(error);
                let reason = strip_subject(&error.message, &prefix);
                return self.error(
                    pattern,
                    error.code,
                    format!("its directory {prefix} {reason}"),
                );
            }
        };
        let (mut matched, mut excluded) = (0_usize, 0_usize);
        let exclude = self.exclude;
        let mut keep = |path: &Path| {
            let relative = path.strip_prefix(&base.absolute).unwrap_or(path);
            if !matcher.is_match(relative) {
                return false;
            }
            matched += 1;
            if exclude.is_match(path) {
                excluded += 1;
                return false;
            }
            true
        };
        let room = MAX_FILES - self.files;
        let listing = match list_files(start, &base.absolute, &mut keep, room, self.cancel) {
            Ok(listing) => listing,
            Err(error) => {
                return self.error(
                    pattern,
                    ErrorCode::IoError,
                    format!(
                        "its directory {} cannot be listed: {error}",
                        base.absolute.display()
                    ),
                );
            }
        };
        let mut files = listing.files;
        files.sort();
        // A match planned already (named before, or by an earlier glob) is read once.
        for file in files {
            self.file(below(&base, &file), true);
        }
        if listing.stopped {
            self.steps.push(PlannedRead::MoreMatches {
                pattern: pattern.to_owned(),
            });
        } else if matched == 0 {
            self.error(
                pattern,
                ErrorCode::NotFound,
                "no file matches (hidden files and files that .gitignore or .ignore exclude are skipped; name such a file to read it)",
            );
        } else if matched == excluded {
            self.error(
                pattern,
                ErrorCode::NotFound,
                format!("no file matches outside the exclude patterns ({matched} excluded)"),
            );
        }
    }
}

/// A file the walk found below `base`: the walk opens every directory without following a link,
/// so the path it gives is already link-free, in `base`'s root.
fn below(base: &RootedPath, file: &Path) -> RootedPath {
    let rest = file.strip_prefix(&base.absolute).unwrap_or(file);
    RootedPath {
        root: base.root,
        absolute: file.to_path_buf(),
        relative: base.relative.join(rest),
        exists: true,
    }
}

/// Splits a pattern into its longest literal directory prefix and the rest (`/a/src/**/*.rs` →
/// `/a/src`, `**/*.rs`).
pub(super) fn split_glob(pattern: &str) -> (String, String) {
    let parts: Vec<&str> = pattern.split('/').collect();
    let first_glob = parts
        .iter()
        .position(|part| is_glob(part))
        .unwrap_or(parts.len());
    let prefix = parts[..first_glob].join("/");
    let rest = parts[first_glob..].join("/");
    let prefix = if prefix.is_empty() {
        "/".to_owned()
    } else {
        prefix
    };
    (prefix, rest)
}

/// The rest of a pattern, matched against paths relative to its prefix: `*` stays within one
/// name, `**` crosses directories.
fn glob_matcher(rest: &str) -> Result<GlobMatcher, GlobError> {
    GlobBuilder::new(rest)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| GlobError(e.kind().clone()))
}

/// A pattern of `paths` that is not a glob (`invalid_args`; the message follows the pattern).
#[derive(Debug, thiserror::Error)]
#[error("is not a valid glob: {0}")]
struct GlobError(globset::ErrorKind);

impl GlobError {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgs
    }
}
