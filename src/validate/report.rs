//! Checking many transcripts: files are read in parallel on all cores, and the report lists them
//! in input order whatever finished first.
//!
//! Sub-agents (PROTOCOL.md §13 (The API loop: sub-agents)): a `flycode run` record whose `agent.task` results name sub-agents
//! has their transcripts, `STEM.task-N.jsonl` beside it, checked too, each as its own file (its
//! findings under its own path) and listed right after its parent; a transcript also named on the
//! command line is checked once, where it was named. A sub-agent that sent requests but whose
//! transcript is missing is a `missing_subagent_transcript` warning on the parent.

use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use thiserror::Error;

use super::finding::{Finding, FindingCode, Severity};
use super::rules::{TaskReference, TranscriptChecker, ValidateOptions};
use super::transcript::MessageReader;
use crate::agent::task::child_transcript_path;
use crate::protocol::ToolSet;
use crate::protocol::display::escape_for_display;

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
    /// The file as named (a sub-agent's: its parent's name with `.task-N` before `.jsonl`).
    pub file: String,
    /// Messages read.
    pub messages: usize,
    /// Findings, in message order.
    pub findings: Vec<Finding>,
    /// The sub-agent tasks whose results the transcript holds.
    pub tasks: Vec<TaskReference>,
    /// The tool set its calls were judged against.
    pub tools: ToolSet,
    /// For the transcript of a sub-agent found through its parent's: which task of which parent.
    pub subagent_of: Option<SubagentOf>,
}

/// Where a sub-agent's transcript was referenced from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubagentOf {
    /// The parent's transcript, as named.
    pub parent: String,
    /// The task, e.g. `task-1`.
    pub task_id: String,
    /// Whether the transcript was also named on the command line (or found in a directory or
    /// glob given there); otherwise it was checked only because its parent references it.
    pub named: bool,
}

/// Totals over all transcripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportSummary {
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
    pub fn summary(&self) -> ReportSummary {
        let mut summary = ReportSummary {
            transcripts: self.files.len(),
            ..ReportSummary::default()
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

/// Checks `files` (`-` is standard input) on up to `threads` threads, and the transcripts of the
/// sub-agents they reference.
pub fn validate_files(
    files: &[PathBuf],
    options: ValidateOptions,
    threads: usize,
) -> Result<Report, OpenError> {
    let jobs: Vec<TranscriptJob> = files
        .iter()
        .map(|path| TranscriptJob {
            path: path.clone(),
            subagent: false,
        })
        .collect();
    let outcomes = check_jobs(&jobs, options, threads);
    let mut checked: Vec<CheckedTranscript> = Vec::with_capacity(files.len());
    for (job, outcome) in jobs.into_iter().zip(outcomes) {
        let Some(outcome) = outcome else { continue };
        checked.push(CheckedTranscript {
            report: outcome?,
            path: job.path,
            children: Vec::new(),
            is_named: true,
        });
    }
    follow_subagents(&mut checked, options, threads)?;
    // Each named file in order, each followed by the sub-agents found through it.
    let mut report = Report::default();
    let named: Vec<usize> = (0..checked.len())
        .filter(|at| checked[*at].is_named)
        .collect();
    let mut slots: Vec<Option<FileReport>> = checked.iter().map(|_| None).collect();
    let mut children: Vec<Vec<usize>> = Vec::with_capacity(checked.len());
    for (at, entry) in checked.into_iter().enumerate() {
        children.push(entry.children);
        slots[at] = Some(entry.report);
    }
    for at in named {
        place(at, &mut slots, &children, &mut report);
    }
    Ok(report)
}

/// Moves the report at `at` into `report`, then those of the sub-agents found through it.
fn place(
    at: usize,
    slots: &mut [Option<FileReport>],
    children: &[Vec<usize>],
    report: &mut Report,
) {
    let Some(file) = slots.get_mut(at).and_then(Option::take) else {
        return;
    };
    report.files.push(file);
    for child in children.get(at).into_iter().flatten() {
        place(*child, slots, children, report);
    }
}

/// A transcript to check.
struct TranscriptJob {
    path: PathBuf,
    /// Checked as a sub-agent's transcript (every tool parses).
    subagent: bool,
}

/// A transcript checked, with what is needed to follow its sub-agents.
struct CheckedTranscript {
    report: FileReport,
    /// The file as opened (`-` is standard input).
    path: PathBuf,
    /// The sub-agents' transcripts checked because this one references them, by position.
    children: Vec<usize>,
    /// Named on the command line (or found in a directory or glob given there).
    is_named: bool,
}

/// Checks the transcripts of the sub-agents the transcripts of `checked` reference, and theirs,
/// adding them to `checked`; a named transcript found to be a sub-agent's is checked again as one
/// if its own system prompt did not show it.
fn follow_subagents(
    checked: &mut Vec<CheckedTranscript>,
    options: ValidateOptions,
    threads: usize,
) -> Result<(), OpenError> {
    // Every transcript seen, by file: its position once checked, `None` while it is being
    // checked or when it is missing.
    let mut known: Known = HashMap::new();
    for (at, entry) in checked.iter().enumerate() {
        if entry.path.as_os_str() != "-" {
            known.entry(identity(&entry.path)).or_insert(Some(at));
        }
    }
    let mut frontier: Vec<usize> = (0..checked.len()).collect();
    while !frontier.is_empty() {
        let wanted = wanted_children(checked, &frontier, &mut known);
        let jobs: Vec<TranscriptJob> = wanted
            .iter()
            .map(|child| TranscriptJob {
                path: child.path.clone(),
                subagent: true,
            })
            .collect();
        let outcomes = check_jobs(&jobs, options, threads);
        frontier = record_children(checked, &mut known, wanted, outcomes, options)?;
    }
    Ok(())
}

/// Transcripts by file: their position in `checked`, `None` while being checked or missing.
type Known = HashMap<PathBuf, Option<usize>>;

/// A sub-agent's transcript to check, found through its parent's task.
struct Wanted {
    /// The parent's position in `checked`.
    parent: usize,
    /// The task that references it.
    task: TaskReference,
    /// Its file.
    path: PathBuf,
    /// The position of a named transcript checked again as the sub-agent's.
    again: Option<usize>,
}

/// The sub-agents' transcripts that the transcripts at `frontier` reference and that are not
/// checked yet (marked in `known`), and named ones to check again now that they are known to be
/// a sub-agent's (linked to their parent here).
fn wanted_children(
    checked: &mut [CheckedTranscript],
    frontier: &[usize],
    known: &mut Known,
) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for &at in frontier {
        // Standard input has no folder to find sub-agents' transcripts in.
        if checked[at].path.as_os_str() == "-" {
            continue;
        }
        let tasks = checked[at].report.tasks.clone();
        for task in tasks {
            let path = child_transcript_path(&checked[at].path, &task.task_id);
            let file = identity(&path);
            match known.get(&file).copied() {
                None => {
                    known.insert(file, None);
                    wanted.push(Wanted {
                        parent: at,
                        task,
                        path,
                        again: None,
                    });
                }
                Some(None) => {}
                Some(Some(seen)) => {
                    if seen == at || checked[seen].report.subagent_of.is_some() {
                        continue;
                    }
                    let link = SubagentOf {
                        parent: checked[at].report.file.clone(),
                        task_id: task.task_id.clone(),
                        named: true,
                    };
                    checked[seen].report.subagent_of = Some(link);
                    if checked[seen].report.tools != ToolSet::All {
                        let path = checked[seen].path.clone();
                        wanted.push(Wanted {
                            parent: at,
                            task,
                            path,
                            again: Some(seen),
                        });
                    }
                }
            }
        }
    }
    wanted
}

/// Puts the checked sub-agents' reports in `checked` (a missing transcript becomes a finding
/// of its parent) and returns their positions, whose own sub-agents are followed next.
fn record_children(
    checked: &mut Vec<CheckedTranscript>,
    known: &mut Known,
    wanted: Vec<Wanted>,
    outcomes: Vec<Option<Result<FileReport, OpenError>>>,
    options: ValidateOptions,
) -> Result<Vec<usize>, OpenError> {
    let mut next = Vec::new();
    for (child, outcome) in wanted.into_iter().zip(outcomes) {
        let Wanted {
            parent,
            task,
            path,
            again,
        } = child;
        let mut report = match outcome {
            None => continue,
            Some(Ok(report)) => report,
            Some(Err(error)) if error.source.kind() == std::io::ErrorKind::NotFound => {
                // A task that failed or was cancelled before its first request recorded
                // nothing: no transcript is expected.
                if task.turns != Some(0) {
                    let finding = missing_transcript(&checked[parent].report, &task, &path);
                    checked[parent]
                        .report
                        .findings
                        .push(with_strict(finding, options));
                }
                continue;
            }
            Some(Err(error)) => return Err(error),
        };
        report.subagent_of = Some(SubagentOf {
            parent: checked[parent].report.file.clone(),
            task_id: task.task_id.clone(),
            named: again.is_some(),
        });
        match again {
            Some(seen) => {
                checked[seen].report = report;
                next.push(seen);
            }
            None => {
                let at = checked.len();
                known.insert(identity(&path), Some(at));
                checked.push(CheckedTranscript {
                    report,
                    path,
                    children: Vec::new(),
                    is_named: false,
                });
                checked[parent].children.push(at);
                next.push(at);
            }
        }
    }
    Ok(next)
}

/// The file `path` names, for telling whether two names are one file.
fn identity(path: &Path) -> PathBuf {
    crate::sandbox::host::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// The warning for `task`, referenced from `parent`, whose transcript `path` does not exist.
fn missing_transcript(parent: &FileReport, task: &TaskReference, path: &Path) -> Finding {
    Finding {
        code: FindingCode::MissingSubagentTranscript,
        severity: FindingCode::MissingSubagentTranscript.default_severity(),
        file: parent.file.clone(),
        index: Some(task.index),
        line: task.line,
        column: None,
        message: format!(
            "the result of agent.task call {:?} names sub-agent {}, whose transcript {} is missing, so its conversation was not checked; keep each sub-agent's transcript next to its parent's",
            escape_for_display(&task.call_id),
            task.task_id,
            path.display()
        ),
        excerpt: None,
    }
}

/// `finding` with `--strict` applied.
fn with_strict(mut finding: Finding, options: ValidateOptions) -> Finding {
    if options.strict {
        finding.severity = Severity::Error;
    }
    finding
}

/// Checks `jobs` on up to `threads` threads; the outcomes come back in the order of `jobs`
/// (`None` only for a job whose thread died).
fn check_jobs(
    jobs: &[TranscriptJob],
    options: ValidateOptions,
    threads: usize,
) -> Vec<Option<Result<FileReport, OpenError>>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<FileReport, OpenError>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(at) else { break };
                    let outcome = check_path(job, options);
                    if let Ok(mut slot) = slots[at].lock() {
                        *slot = Some(outcome);
                    }
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

fn check_path(job: &TranscriptJob, options: ValidateOptions) -> Result<FileReport, OpenError> {
    let path = &job.path;
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
    let reader = BufReader::with_capacity(256 * 1024, file);
    let checker = if job.subagent {
        TranscriptChecker::new_subagent(name, options)
    } else {
        TranscriptChecker::new(name, options)
    };
    Ok(check_with(reader, checker))
}

/// Checks one transcript read from `reader`, named `file` in the findings.
pub fn check_reader<R: Read>(
    reader: BufReader<R>,
    file: String,
    options: ValidateOptions,
) -> FileReport {
    check_with(reader, TranscriptChecker::new(file, options))
}

fn check_with<R: Read>(reader: BufReader<R>, mut checker: TranscriptChecker) -> FileReport {
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
    let file = checker.file().to_owned();
    let checked = checker.finish();
    FileReport {
        file,
        messages: checked.messages,
        findings: checked.findings,
        tasks: checked.tasks,
        tools: checked.tools,
        subagent_of: None,
    }
}
