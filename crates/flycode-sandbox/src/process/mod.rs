//! Running one program for a tool call (`process.run`, and `shell.exec` as `/bin/sh -c`): spawn,
//! capture, time out, and leave nothing behind. This module owns process-tree spawn and kill; it
//! knows nothing of tool names, approval or result blocks.
//!
//! What a run does, in order:
//!
//! - The program is started directly (no shell is involved unless the caller asks for one), in
//!   `cwd`, with stdin on `/dev/null`, in a process group of its own, with the parent's environment
//!   minus [`ProcessSpec::env_remove`] plus [`ProcessSpec::env_set`]. One extra variable,
//!   `FLYCODE_RUN`, tags every process of the run so that strays can be told apart (see below).
//! - stdout and stderr are drained by one thread each until end of file. Each keeps at most
//!   [`ProcessSpec::output_cap`] bytes: the first half of that (the head) and, in a ring, the
//!   most recent other half (the tail, where test runners and compilers report); every byte is
//!   counted, kept or not. A child that writes forever neither blocks nor fills memory. What to
//!   show of a stream within a budget is [`StreamOutput::excerpt`]: decoded lossily (invalid
//!   UTF-8 becomes U+FFFD; a character split by a cut is dropped instead).
//! - When the deadline passes, every process of the run is killed with `SIGKILL` (no polite
//!   `SIGTERM` first) and the result says `timed_out` and holds the output read so far.
//! - When the main child exits but something it started keeps stdout or stderr open
//!   (`sleep 30 & echo done`), the run waits [`PIPE_GRACE`] for end of file, then kills what is
//!   left and returns the output read so far.
//! - Whenever the main child has exited, whatever it left running is killed, even if it closed its
//!   output: flycode runs commands, not daemons. A model that wants a server must ask the person
//!   to start it.
//!
//! Platforms:
//!
//! - **Linux, cgroup**: where flycode can make a cgroup v2 (root, or a delegated sub-tree), each
//!   run gets one of its own beneath flycode's, the program is born in it (flycode stands in it
//!   for the instant of the spawn) and at the end one write to `cgroup.kill` kills everything in
//!   it at once, pid-hoppers and forks in flight included; then it is removed. See `cgroup.rs`.
//! - **Linux, sweeps** (after the cgroup, and alone where there is none): the calling process is
//!   a *child subreaper* ([`prepare_to_run_programs`], or the first run), so a descendant whose
//!   parent dies (including one that called `setsid` to leave the process group and session) is
//!   reparented to flycode rather than to init. Killing walks `/proc/<pid>/stat` parent links
//!   from the main child and from the orphans reparented to flycode, kills them all, repeats
//!   until two sweeps in a row find nothing alive, and reaps the orphans. An orphan belongs to
//!   this run unless its environment carries another live run's tag: one that cleared its
//!   environment (`env -i`) or cannot be read is killed by whichever run ends first, which is
//!   exact when one program runs at a time (as flycode runs them: PROTOCOL.md §10 (Running
//!   calls)) and early, never late, when several do. Making flycode a subreaper lasts for the
//!   life of the process, and every process flycode starts must go through this module or
//!   [`spawn_apart`] (every child of flycode that is not a live main child is taken for a run's
//!   orphan, and a spawn elsewhere could be born in a run's cgroup).
//! - **Containment** ([`ProcessSpec::containment`], Linux): the child is started by a thread
//!   that entered the run's Landlock domain, so it is contained from its first instruction; see
//!   [`crate::contain`].
//! - **Other Unix** (macOS, the BSDs): only the process group is killed. A descendant that left
//!   the group survives a timeout.
//! - **Windows**: not implemented yet (a job object is the planned mechanism); [`run_process`]
//!   returns [`ProcessError::Unsupported`].

pub mod capture;
#[cfg(unix)]
pub mod cgroup;
pub mod guard;
#[cfg(unix)]
pub mod job;
#[cfg(unix)]
pub mod job_log;
#[cfg(unix)]
pub mod run;
#[cfg(unix)]
pub mod tree;

#[cfg(test)]
mod survivor_tests;
#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use super::contain::{Containment, ProgramSandbox};
use flycode_protocol::ErrorCode;

/// What confines a program this module starts under these settings on this platform, in words
/// for the person asked to approve it (see [`crate::contain`]).
pub fn program_containment(sandbox: ProgramSandbox, network: bool) -> String {
    super::contain::describe(sandbox, network)
}

/// How long a run waits for end of file on stdout and stderr once the main child has exited.
pub const PIPE_GRACE: Duration = Duration::from_secs(1);

/// What to run and under which limits. `cwd` must already have passed the sandbox.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// The program: a path, or a name looked up in `PATH`. For `shell.exec` the caller passes
    /// `/bin/sh` with the arguments `-c` and the command.
    pub program: String,
    /// The arguments, passed as they are (no shell splitting or expansion).
    pub args: Vec<String>,
    /// The working directory, already checked by the sandbox.
    pub cwd: PathBuf,
    /// Variables to set, after the removals (so a name in both lists is set).
    pub env_set: Vec<(String, String)>,
    /// Variables to strip from the inherited environment: flycode's own secrets (API keys).
    pub env_remove: Vec<String>,
    /// How long the whole run may take before everything it started is killed.
    pub timeout: Duration,
    /// How many bytes of stdout, and separately of stderr, to keep at most: the first half and
    /// the last half of each. Keeping a whole budget per stream lets a caller give one stream
    /// what the other did not use.
    pub output_cap: usize,
    /// When set (by Ctrl-C), the run is killed as on a timeout and reported as cancelled.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The Landlock domain the program runs in (Linux), with a private `TMPDIR`; `None` runs it
    /// uncontained (`process_sandbox = "off"`).
    pub containment: Option<Containment>,
}

impl ProcessSpec {
    /// `/bin/sh -c command`: what `shell.exec` runs.
    pub fn shell(command: &str, cwd: PathBuf, timeout: Duration, output_cap: usize) -> Self {
        ProcessSpec {
            program: "/bin/sh".to_owned(),
            args: vec!["-c".to_owned(), command.to_owned()],
            cwd,
            env_set: Vec::new(),
            env_remove: Vec::new(),
            timeout,
            output_cap,
            cancel: None,
            containment: None,
        }
    }
}

/// How a run ended and what it printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessOutcome {
    /// The main child's exit code, if it exited rather than being killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the main child, if any (9 after a timeout).
    pub signal: Option<i32>,
    /// What the program wrote to stdout.
    pub stdout: StreamOutput,
    /// What the program wrote to stderr.
    pub stderr: StreamOutput,
    /// Whether the deadline passed and the run was killed.
    pub timed_out: bool,
    /// Whether the cancel flag was set and the run was killed.
    pub cancelled: bool,
    /// From just before the spawn to the end of the clean-up.
    pub duration: Duration,
}

/// What one output stream gave: its first bytes, its last bytes, and how many it wrote in all.
/// When `total` is more than the two hold, the bytes between them were read and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamOutput {
    /// The first bytes, at most half of [`ProcessSpec::output_cap`].
    pub head: Vec<u8>,
    /// The last bytes after the head, at most the other half.
    pub tail: Vec<u8>,
    /// Every byte the program wrote to the stream (read from the pipe), kept or not.
    pub total: u64,
}

impl StreamOutput {
    /// Masks `secrets` in the kept bytes, byte for byte (PROTOCOL.md §9 (Secrets and masking)). Head and
    /// tail kept whole are one stream; with bytes dropped between them, what lies in the gap is
    /// unknown, so a part of a secret at either edge of the gap is masked as if the rest were
    /// there.
    pub fn mask(&mut self, secrets: &super::mask::Secrets) {
        use super::mask::Edge;
        if secrets.is_empty() {
            return;
        }
        if self.is_complete() {
            let (head, tail) = (self.head.clone(), self.tail.clone());
            secrets.mask_window(&mut self.head, Edge::none(), Edge::exact(&tail));
            secrets.mask_window(&mut self.tail, Edge::exact(&head), Edge::none());
        } else {
            secrets.mask_window(&mut self.head, Edge::none(), Edge::open(&[]));
            secrets.mask_window(&mut self.tail, Edge::open(&[]), Edge::none());
        }
    }
}

/// Why a program could not be run. A program that runs and fails is an [`ProcessOutcome`].
#[derive(Debug, Error)]
pub enum ProcessError {
    /// No such program (not in `PATH`, or no file at the path).
    #[error("{program}: command not found; check the name, or give its absolute path")]
    CommandNotFound {
        /// The program as given.
        program: String,
    },
    /// The program exists but may not be executed (no execute permission, or a directory).
    #[error("{program}: permission denied; the file is not executable")]
    PermissionDenied {
        /// The program as given.
        program: String,
    },
    /// The working directory vanished after the sandbox checked it.
    #[error("{}: the working directory does not exist", cwd.display())]
    CwdNotFound {
        /// The working directory.
        cwd: PathBuf,
    },
    /// This platform cannot run processes yet (Windows).
    #[error("{program}: running processes is not implemented on this platform yet")]
    Unsupported {
        /// The program as given.
        program: String,
    },
    /// The program's containment cannot be enforced here (a kernel without Landlock, or without
    /// its network rules when the network is denied): it was not run.
    #[error("{program} was not run: {why}")]
    Uncontainable {
        /// The program as given.
        program: String,
        /// What the kernel lacks.
        why: &'static str,
        /// What the person can do (flycode.toml).
        advice: &'static str,
    },
    /// The containment could not be set up (the temporary directory, the ruleset).
    #[error("{program} was not run: {message}")]
    Containment {
        /// The program as given.
        program: String,
        /// What failed.
        message: String,
    },
    /// Any other failure to start or watch the program.
    #[error("{program}: {source}")]
    Io {
        /// The program as given.
        program: String,
        /// The failure.
        source: io::Error,
    },
}

impl ProcessError {
    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProcessError::CommandNotFound { .. } => ErrorCode::CommandNotFound,
            ProcessError::PermissionDenied { .. } => ErrorCode::PermissionDenied,
            ProcessError::CwdNotFound { .. } => ErrorCode::NotFound,
            ProcessError::Uncontainable { .. } => ErrorCode::DeniedByPolicy,
            ProcessError::Unsupported { .. }
            | ProcessError::Containment { .. }
            | ProcessError::Io { .. } => ErrorCode::IoError,
        }
    }
}

/// What a command that runs programs does first: flycode's environment is kept from them
/// ([`protect_own_environment`]) and flycode becomes a child subreaper (Linux), so nothing a
/// program starts can escape being killed at the end of its call.
pub fn prepare_to_run_programs() {
    protect_own_environment();
    #[cfg(unix)]
    tree::become_subreaper();
}

/// Grows this process's descriptor table to 1024 entries (or the limit on open files, if lower)
/// at once, while it has a single thread. The kernel grows the table when a descriptor past its
/// end is opened, and a process with several threads waits for an RCU grace period each time
/// (ten to twenty milliseconds on a small machine); building a program's containment opens a
/// few hundred paths at once, so a door that runs programs (with its signal thread running) paid
/// three such waits at its first call. Called first thing in `main`; a table never shrinks.
pub fn reserve_descriptor_table() {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(1024);
        let highest = limit.clamp(1, 1024) - 1;
        let Ok(highest) = i32::try_from(highest) else {
            return;
        };
        // Dropped at once: the table keeps its size.
        let _ = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), highest);
    }
}

/// Runs `spawn`, which starts a program that is not a tool call's (flycode's own helper), under
/// the lock every call's spawn holds: a call's program is started while flycode stands in the
/// call's cgroup for an instant, and nothing else may be born there (it would be killed with
/// the call).
pub fn spawn_apart<T>(spawn: impl FnOnce() -> T) -> T {
    #[cfg(unix)]
    let _spawns = tree::live_children();
    spawn()
}

/// Set once flycode is stopping on a signal: no program starts any more, a running one is killed
/// as on Ctrl-C (its result says `cancelled`).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How many foreground runs are under way (from before the spawn to the end of the clean-up).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Ends every program flycode runs, for a door stopping on a signal (PROTOCOL.md §11 (Security),
/// "No program outlives flycode"): the foreground run under way is killed with its tree (as on
/// Ctrl-C), every background job is killed with its tree, and no program starts from now on.
pub fn stop_all_programs() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    #[cfg(unix)]
    job::kill_all();
}

/// Whether [`stop_all_programs`] was called.
pub fn is_stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::SeqCst)
}

/// How many foreground runs are under way, clean-up included.
pub fn running_calls() -> usize {
    RUNNING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Counts one foreground run for [`running_calls`] while it lives.
pub struct RunningCall;

impl RunningCall {
    /// Counts a run starting; it ends when the value is dropped.
    pub fn start() -> RunningCall {
        RUNNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RunningCall
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Makes this process non-dumpable (Linux), so the programs it starts, which run as the same
/// user, cannot read its environment (API keys) through `/proc/<pid>/environ` or attach to it.
/// A user with CAP_SYS_PTRACE (root) still can; elsewhere this does nothing.
pub fn protect_own_environment() {
    #[cfg(target_os = "linux")]
    {
        let _ =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
}

/// Runs `spec` to completion, timeout or clean-up, and reports what happened.
///
/// Blocks the calling thread; runs on several threads may go on at once.
pub fn run_process(spec: &ProcessSpec) -> Result<ProcessOutcome, ProcessError> {
    #[cfg(unix)]
    {
        run::run(spec)
    }
    #[cfg(not(unix))]
    {
        Err(ProcessError::Unsupported {
            program: spec.program.clone(),
        })
    }
}
