//! Command-line inputs → transcript files: a file is taken as it is, a directory yields the
//! `.json`, `.jsonl` and `.ndjson` files below it, and a glob (`transcripts/**/*.jsonl`, quoted so
//! the shell leaves it alone) the files it matches. Results are sorted within each input and
//! de-duplicated, so the order is the same on every run.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use ignore::WalkBuilder;
use thiserror::Error;

/// Why the inputs cannot be checked: a usage error (exit 2).
#[derive(Debug, Error)]
pub(crate) enum InputError {
    /// A named file or directory does not exist.
    #[error("{0}: no such file or directory")]
    Missing(String),
    /// A glob that is not valid.
    #[error("{pattern}: not a valid glob: {reason}")]
    BadGlob {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// A directory or glob with no transcript in it.
    #[error("{0}: no transcripts found (looked for .json, .jsonl and .ndjson files)")]
    NothingFound(String),
    /// No inputs at all.
    #[error("no transcripts given: name files, directories or globs")]
    NoInputs,
}

const TRANSCRIPT_EXTENSIONS: [&str; 3] = ["json", "jsonl", "ndjson"];

/// Expands `inputs` into the transcript files to check, in order, without duplicates.
pub(crate) fn expand_inputs(inputs: &[String]) -> Result<Vec<PathBuf>, InputError> {
    if inputs.is_empty() {
        return Err(InputError::NoInputs);
    }
    let mut files = Vec::new();
    for input in inputs {
        let path = Path::new(input);
        let found = if path.is_file() || input == "-" {
            vec![path.to_owned()]
        } else if path.is_dir() {
            let found = walk(path, has_transcript_extension);
            if found.is_empty() {
                return Err(InputError::NothingFound(input.clone()));
            }
            found
        } else if is_glob(input) {
            let found = expand_glob(input)?;
            if found.is_empty() {
                return Err(InputError::NothingFound(input.clone()));
            }
            found
        } else {
            return Err(InputError::Missing(input.clone()));
        };
        for file in found {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

fn has_transcript_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| TRANSCRIPT_EXTENSIONS.contains(&e))
}

fn is_glob(input: &str) -> bool {
    input.contains(['*', '?', '[', '{'])
}

/// Every file below `root` accepted by `keep`, sorted; hidden and ignored files included, since a
/// transcript directory is named on purpose.
fn walk(root: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(true)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .filter(|p| keep(p))
        .collect();
    found.sort();
    found
}

fn expand_glob(pattern: &str) -> Result<Vec<PathBuf>, InputError> {
    let matcher: GlobMatcher = Glob::new(pattern)
        .map_err(|e| InputError::BadGlob {
            pattern: pattern.to_owned(),
            reason: e.kind().to_string(),
        })?
        .compile_matcher();
    // Walk from the longest leading part of the pattern without glob characters.
    let mut base = PathBuf::new();
    for component in Path::new(pattern).components() {
        if is_glob(&component.as_os_str().to_string_lossy()) {
            break;
        }
        base.push(component);
    }
    let (root, strip_dot) = if base.as_os_str().is_empty() {
        (PathBuf::from("."), true)
    } else {
        (base, false)
    };
    Ok(walk(&root, |path| {
        let candidate = if strip_dot {
            path.strip_prefix(".").unwrap_or(path)
        } else {
            path
        };
        matcher.is_match(candidate)
    }))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn directories_and_globs_expand_in_a_stable_order() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        std::fs::create_dir_all(dir.join("b/deep")).unwrap();
        for name in ["a.jsonl", "b/deep/c.json", "b/x.ndjson", "notes.txt"] {
            std::fs::write(dir.join(name), "[]").unwrap();
        }
        let root = dir.display().to_string();
        let files = expand_inputs(std::slice::from_ref(&root)).unwrap();
        assert_eq!(
            files,
            vec![
                dir.join("a.jsonl"),
                dir.join("b/deep/c.json"),
                dir.join("b/x.ndjson")
            ]
        );
        let globbed =
            expand_inputs(&[format!("{root}/**/*.json*"), format!("{root}/a.jsonl")]).unwrap();
        assert_eq!(
            globbed,
            vec![dir.join("a.jsonl"), dir.join("b/deep/c.json")]
        );
    }

    #[test]
    fn missing_and_empty_inputs_are_usage_errors() {
        assert!(matches!(
            expand_inputs(&["/no/such.jsonl".into()]),
            Err(InputError::Missing(_))
        ));
        assert!(matches!(expand_inputs(&[]), Err(InputError::NoInputs)));
        let temp = tempfile::tempdir().unwrap();
        let empty = temp.path().display().to_string();
        assert!(matches!(
            expand_inputs(std::slice::from_ref(&empty)),
            Err(InputError::NothingFound(_))
        ));
        assert!(matches!(
            expand_inputs(&[format!("{empty}/*.jsonl")]),
            Err(InputError::NothingFound(_))
        ));
        assert!(matches!(
            expand_inputs(&[format!("{empty}/[.jsonl")]),
            Err(InputError::BadGlob { .. })
        ));
    }
}
