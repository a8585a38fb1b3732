//! A session's background jobs (PROTOCOL.md §9 (Tools: background jobs), §10 (Running calls:
//! background jobs)): the table `process.run`/`shell.exec` with `background: true` add to and
//! `job.log`, `job.list`, `job.input` and `job.kill` read and act on. One table belongs to one
//! session (a `watch` process, one `run`, one MCP connection) and is shared by all its calls;
//! dropping it (the session's end) kills every job's whole process tree and removes their logs.
//!
//! A job's end is told without being asked: the table keeps a notice for the model (taken by the
//! next result block, or by `run`'s next request) and calls the door's `announce` hook at once
//! (the terminal's line, the MCP client's logging notification).

pub mod tools;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::protocol::ErrorCode;
use crate::sandbox::ProcessSpec;
use crate::sandbox::process::job::{BackgroundProcess, StopSignal};
use crate::sandbox::process::job_log::{JobEnd, JobOutputLog, session_dir};
use crate::tools::ToolError;
use crate::tools::secrets::Secrets;

/// `[jobs] log_bytes` unless set: what one job's log files hold at most.
pub const DEFAULT_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// `[jobs] max_running` unless set: how many jobs may run at once in a session.
pub const DEFAULT_MAX_RUNNING: u32 = 8;

/// What the door does with a job's end as it happens (a terminal line, an MCP notification).
pub type Announce = Box<dyn Fn(&str) + Send + Sync>;

/// One job.
pub struct Job {
    /// `job-N`.
    pub id: String,
    /// The command as the model gave it (process.run: program and arguments).
    pub command: String,
    /// Whether it runs under a pseudo-terminal.
    pub pty: bool,
    /// When it started.
    pub started: Instant,
    /// `job.kill` ended it: the model knows, so no notice.
    killed_by_request: AtomicBool,
    /// Its end was told to the model (a result block's `[jobs]` header).
    told: AtomicBool,
    /// The program, as the sandbox started it.
    pub process: BackgroundProcess,
}

impl Job {
    /// The job's output.
    pub fn log(&self) -> &JobOutputLog {
        self.process.log()
    }

    /// `running`, `exited`, `killed` or `failed`.
    pub fn state(&self) -> &'static str {
        match self.log().end() {
            None => "running",
            Some(JobEnd::Exited(_)) => "exited",
            Some(JobEnd::Killed(_)) => "killed",
            Some(JobEnd::Failed) => "failed",
        }
    }

    /// How long it ran (or has been running).
    pub fn running_time(&self) -> Duration {
        match self.log().ended_at() {
            Some(ended) => ended.saturating_duration_since(self.started),
            None => self.started.elapsed(),
        }
    }

    /// `job-2 exited 0 after 12.3 s (240 lines)`, once it ended.
    pub fn notice(&self) -> Option<String> {
        let how = match self.log().end()? {
            JobEnd::Exited(code) => format!("exited {code}"),
            JobEnd::Killed(signal) => format!("was killed by signal {signal}"),
            JobEnd::Failed => "failed (its status could not be read)".to_owned(),
        };
        let lines = self.log().position().0;
        let noun = if lines == 1 { "line" } else { "lines" };
        Some(format!(
            "{} {how} after {:.1} s ({lines} {noun})",
            self.id,
            self.running_time().as_secs_f64()
        ))
    }

    /// Ends the job as `job.kill` asks.
    pub fn kill(&self, signal: StopSignal) {
        self.killed_by_request.store(true, Ordering::SeqCst);
        self.process.stop(signal);
    }
}

/// The shared part: the watcher threads hold it too.
struct Inner {
    jobs: Mutex<Vec<Arc<Job>>>,
    announce: Mutex<Option<Announce>>,
}

/// A session's jobs. Dropping it kills them all.
pub struct JobTable {
    inner: Arc<Inner>,
    next: AtomicU64,
    /// Where the logs go; removed when the table is dropped.
    dir: Mutex<Option<tempfile::TempDir>>,
    log_bytes: u64,
    max_running: u32,
}

impl std::fmt::Debug for JobTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTable")
            .field("jobs", &lock(&self.inner.jobs).len())
            .finish_non_exhaustive()
    }
}

/// What a new job is.
pub struct NewJob<'a> {
    /// The program, its arguments, folder and environment.
    pub spec: &'a ProcessSpec,
    /// The command as the model gave it.
    pub command: String,
    /// Whether it runs under a pseudo-terminal.
    pub pty: bool,
    /// flycode's secrets, masked in its log.
    pub secrets: Secrets,
    /// How a program that could not be started is told (the process tools' words).
    pub process_error: fn(crate::sandbox::ProcessError) -> ToolError,
}

impl JobTable {
    /// An empty table whose jobs keep at most `log_bytes` of output each and of which at most
    /// `max_running` run at once.
    pub fn new(log_bytes: u64, max_running: u32) -> JobTable {
        JobTable {
            inner: Arc::new(Inner {
                jobs: Mutex::new(Vec::new()),
                announce: Mutex::new(None),
            }),
            next: AtomicU64::new(1),
            dir: Mutex::new(None),
            log_bytes,
            max_running,
        }
    }

    /// Sets what the door does with a job's end as it happens.
    pub fn set_announce(&self, announce: Announce) {
        *lock(&self.inner.announce) = Some(announce);
    }

    /// Starts a job; its id and pid.
    pub fn start(&self, new: NewJob<'_>) -> Result<Arc<Job>, ToolError> {
        let running = lock(&self.inner.jobs)
            .iter()
            .filter(|job| job.log().end().is_none())
            .count();
        if running >= self.max_running as usize {
            return Err(ToolError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "{running} background jobs are running, the most this session allows ([jobs] max_running = {})",
                    self.max_running
                ),
                Some("end one with job.kill (see job.list), or wait for one to end"),
            ));
        }
        let id = format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let base = self.log_base(&id)?;
        let log = JobOutputLog::create(&base, self.log_bytes, new.secrets)
            .map_err(|error| io_error(&format!("cannot create the job's log file: {error}")))?;
        let process = BackgroundProcess::start(new.spec, new.pty, Arc::new(log))
            .map_err(|error| (new.process_error)(error))?;
        let job = Arc::new(Job {
            id,
            command: new.command,
            pty: new.pty,
            started: Instant::now(),
            killed_by_request: AtomicBool::new(false),
            told: AtomicBool::new(false),
            process,
        });
        lock(&self.inner.jobs).push(job.clone());
        self.watch_end(&job);
        Ok(job)
    }

    /// Where a job's log goes: `{session dir}/{id}`.
    fn log_base(&self, id: &str) -> Result<PathBuf, ToolError> {
        let mut dir = lock(&self.dir);
        if dir.is_none() {
            *dir = Some(session_dir().map_err(|error| {
                io_error(&format!(
                    "cannot create the session's job directory: {error}"
                ))
            })?);
        }
        let path = dir.as_ref().map(|dir| dir.path().join(id));
        path.ok_or_else(|| io_error("no job directory"))
    }

    /// A thread that waits for the job's end, then announces it (the terminal, MCP).
    fn watch_end(&self, job: &Arc<Job>) {
        let (inner, job) = (Arc::downgrade(&self.inner), Arc::downgrade(job));
        let _ = std::thread::Builder::new()
            .name("flycode-job-end".to_owned())
            .spawn(move || {
                let Some(log) = job.upgrade().map(|job| job.process.log().clone()) else {
                    return;
                };
                log.wait_until(None, |_, _, ended| ended);
                let (Some(job), Some(inner)) = (job.upgrade(), inner.upgrade()) else {
                    return;
                };
                let Some(notice) = job.notice() else { return };
                if let Some(announce) = lock(&inner.announce).as_ref() {
                    announce(&notice);
                }
            });
    }

    /// The job called `id`.
    pub fn get(&self, id: &str) -> Result<Arc<Job>, ToolError> {
        let jobs = lock(&self.inner.jobs);
        if let Some(job) = jobs.iter().find(|job| job.id == id) {
            return Ok(job.clone());
        }
        let known: Vec<&str> = jobs.iter().map(|job| job.id.as_str()).collect();
        let message = if known.is_empty() {
            format!("there is no job {id}: this session has started none")
        } else {
            format!(
                "there is no job {id} in this session (its jobs: {})",
                known.join(", ")
            )
        };
        Err(ToolError::new(
            ErrorCode::NotFound,
            message,
            Some("job.list lists this session's jobs"),
        ))
    }

    /// Every job, oldest first.
    pub fn jobs(&self) -> Vec<Arc<Job>> {
        lock(&self.inner.jobs).clone()
    }

    /// The ends not yet told to the model, as one header value (`job-2 exited 0 after 12.3 s
    /// (240 lines); job-3 ...`); each is told once. A job `job.kill` ended is not told (its
    /// answer said so). Read from the jobs' logs, so a call that saw a job end carries it.
    pub fn take_notices(&self) -> Option<String> {
        let notices: Vec<String> = self
            .jobs()
            .iter()
            .filter(|job| job.log().end().is_some())
            .filter(|job| !job.killed_by_request.load(Ordering::SeqCst))
            .filter(|job| !job.told.swap(true, Ordering::SeqCst))
            .filter_map(|job| job.notice())
            .collect();
        (!notices.is_empty()).then(|| notices.join("; "))
    }

    /// One line per job, as `run`'s special message shows them: an ended job's notice, or
    /// `job-1 running for 12.3 s (40 lines, pid 4242): npm run dev`.
    pub fn state_lines(&self) -> Vec<String> {
        self.jobs()
            .iter()
            .map(|job| match job.notice() {
                Some(notice) => notice,
                None => format!(
                    "{} running for {:.1} s ({} lines, pid {}): {}",
                    job.id,
                    job.running_time().as_secs_f64(),
                    job.log().position().0,
                    job.process.pid(),
                    job.command
                ),
            })
            .collect()
    }

    /// The directory of the session's job logs, once a job was started.
    #[cfg(test)]
    pub fn log_dir(&self) -> Option<PathBuf> {
        lock(&self.dir).as_ref().map(|dir| dir.path().to_owned())
    }

    /// How many jobs are running.
    pub fn running(&self) -> usize {
        lock(&self.inner.jobs)
            .iter()
            .filter(|job| job.log().end().is_none())
            .count()
    }

    /// Kills every job's tree and removes the logs: the session's end. Also what dropping the
    /// table does.
    pub fn end_session(&self) {
        let jobs = std::mem::take(&mut *lock(&self.inner.jobs));
        for job in &jobs {
            job.killed_by_request.store(true, Ordering::SeqCst);
            if job.log().end().is_none() {
                job.process.stop(StopSignal::Kill);
            }
        }
        drop(jobs);
        drop(lock(&self.dir).take());
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        self.end_session();
    }
}

fn io_error(message: &str) -> ToolError {
    ToolError::new(ErrorCode::IoError, message.to_owned(), None)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
