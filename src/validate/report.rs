//! Checking many transcripts: files are read in parallel on all cores, and the report lists them
//! in input order whatever finished first.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use thiserror::Error;

use super::finding::{Finding, Severity};
use super::rules::{TranscriptChecker, ValidateOptions};
use super::transcript::MessageReader;

/// A file that could not be opened: a usage error (exit 2), not a finding.
#[derive(Debug, Error)]
#[error("cannot read {path}: {source}")]
pub struct OpenError {
    /// The file.
    pub path: String,
    /// Why.
    pub source: std::io::Error,
}

/// The outcome for one transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    /// The file as named.
    pub file: String,
    /// Messages read.
    pub messages: usize,
    /// Findings, in message order.
    pub findings: Vec<Finding>,
}

/// Totals over all transcripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Transcripts checked.
    pub transcripts: usize,
    /// Messages read.
    pub messages: usize,
    /// Findings of severity error.
    pub errors: usize,
    /// Findings of severity warning.
    pub warnings: usize,
}

/// The outcome for all transcripts, in input order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One entry per transcript.
    pub files: Vec<FileReport>,
}

impl Report {
    /// Every finding, file by file.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.files.iter().flat_map(|f| f.findings.iter())
    }

    /// The totals.
    pub fn summary(&self) -> Summary {
        let mut summary = Summary {
            transcripts: self.files.len(),
            ..Summary::default()
        };
        for file in &self.files {
            summary.messages += file.messages;
        }
        for finding in self.findings() {
            match finding.severity {
                Severity::Error => summary.errors += 1,
                Severity::Warning => summary.warnings += 1,
            }
        }
        summary
    }
}

/// Checks `files` (`-` is standard input) on up to `threads` threads.
pub fn validate_files(
    files: &[PathBuf],
    options: ValidateOptions,
    threads: usize,
) -> Result<Report, OpenError> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<FileReport, OpenError>>>> =
        files.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, files.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = files.get(at) else { break };
                    let outcome = check_path(path, options);
                    if let Ok(mut slot) = slots[at].lock() {
                        *slot = Some(outcome);
                    }
                }
            });
        }
    });
    let mut report = Report::default();
    for slot in slots {
        let outcome = slot.into_inner().ok().flatten();
        if let Some(outcome) = outcome {
            report.files.push(outcome?);
        }
    }
    Ok(report)
}

fn check_path(path: &Path, options: ValidateOptions) -> Result<FileReport, OpenError> {
    let name = path.display().to_string();
    if path.as_os_str() == "-" {
        return Ok(check_reader(
            BufReader::new(std::io::stdin().lock()),
            "-".into(),
            options,
        ));
    }
    let file = crate::sandbox::host::open(path).map_err(|source| OpenError {
        path: name.clone(),
        source,
    })?;
    Ok(check_reader(
        BufReader::with_capacity(256 * 1024, file),
        name,
        options,
    ))
}

/// Checks one transcript read from `reader`, named `file` in the findings.
pub fn check_reader<R: Read>(
    reader: BufReader<R>,
    file: String,
    options: ValidateOptions,
) -> FileReport {
    let mut checker = TranscriptChecker::new(file.clone(), options);
    match MessageReader::open(reader) {
        Err(unreadable) => checker.push_unreadable(
            unreadable.line,
            unreadable.column,
            unreadable.index,
            unreadable.message,
        ),
        Ok(messages) => {
            for message in messages {
                match message {
                    Ok(message) => checker.push(&message),
                    Err(unreadable) => {
                        checker.push_unreadable(
                            unreadable.line,
                            unreadable.column,
                            unreadable.index,
                            unreadable.message,
                        );
                    }
                }
            }
        }
    }
    let (findings, messages) = checker.finish();
    FileReport {
        file,
        messages,
        findings,
    }
}
