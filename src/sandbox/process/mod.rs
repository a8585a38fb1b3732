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
//! - stdout and stderr are drained by one thread each until end of file, keeping the first
//!   [`ProcessSpec::output_cap`] bytes of each and counting the rest, so a child that writes
//!   forever neither blocks nor fills memory. Output is decoded lossily: invalid UTF-8 becomes
//!   U+FFFD (a character cut in half by the cap is dropped instead).
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
//! - **Linux**: the first run makes the calling process a *child subreaper*, so a descendant
//!   whose parent dies (including one that called `setsid` to leave the process group) is
//!   reparented to flycode rather than to init. Killing walks `/proc/<pid>/stat` parent links from
//!   the main child and from the orphans reparented to flycode whose environment carries this
//!   run's tag, kills them all, repeats until no new process appears, and reaps the orphans.
//!   Limits: a descendant that both leaves the tree (`setsid`, double fork) and replaces its
//!   environment (`env -i`) or becomes unreadable (a setuid program) cannot be attributed and
//!   survives; a cgroup per run would close that gap. Making flycode a subreaper lasts for the
//!   life of the process, and every process flycode starts must go through this module (the
//!   orphan reaper relies on knowing which children are live runs).
//! - **Other Unix** (macOS, the BSDs): only the process group is killed. A descendant that left
//!   the group survives a timeout.
//! - **Windows**: not implemented yet (a job object is the planned mechanism); [`run_process`]
//!   returns [`ProcessError::Unsupported`].

mod capture;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod tree;

#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::protocol::ErrorCode;

/// What confines a program this module starts, in words for the person asked to approve it. The
/// truth today: nothing at the operating-system level. The roots bind flycode's file tools only;
/// the program's working directory is checked, but the program itself may go anywhere. When a
/// run is confined (Landlock, a cgroup, a container), this is the one place to say so.
pub const PROGRAM_CONTAINMENT: &str = "none: the program runs with your user's rights and can read and write anything you can (flycode's roots bind only its file tools)";

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
    /// How many bytes of stdout, and separately of stderr, to keep.
    pub output_cap: usize,
    /// When set (by Ctrl-C), the run is killed as on a timeout and reported as cancelled.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
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
    /// stdout, at most `output_cap` bytes, decoded lossily.
    pub stdout: String,
    /// stderr, at most `output_cap` bytes, decoded lossily.
    pub stderr: String,
    /// Whether stdout produced more than `output_cap` bytes.
    pub stdout_truncated: bool,
    /// Whether stderr produced more than `output_cap` bytes.
    pub stderr_truncated: bool,
    /// Bytes read from stdout in all, including those beyond the cap.
    pub stdout_bytes: u64,
    /// Bytes read from stderr in all, including those beyond the cap.
    pub stderr_bytes: u64,
    /// Whether the deadline passed and the run was killed.
    pub timed_out: bool,
    /// Whether the cancel flag was set and the run was killed.
    pub cancelled: bool,
    /// From just before the spawn to the end of the clean-up.
    pub duration: Duration,
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
            ProcessError::Unsupported { .. } | ProcessError::Io { .. } => ErrorCode::IoError,
        }
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
