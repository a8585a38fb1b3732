//! One run on Unix: spawn, watch the child and its two pipes against the deadline, clean up,
//! assemble the outcome. Killing lives in `tree`, pipe draining in `capture`.

use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use super::super::contain::{self, ContainError, PreparedContainment};
use super::capture::{self, SharedCapture, Stream};
use super::cgroup::CallGroup;
use super::tree::{self, RunId};
use super::{PIPE_GRACE, ProcessError, ProcessOutcome, ProcessSpec};

/// After a kill, how long to wait for the main child's status and the pipes' end of file.
/// Killed processes die at once; this bound only matters for one stuck in the kernel, or for a
/// pipe held open by a process that escaped the kill (then its reader thread is abandoned).
const AFTER_KILL_WAIT: Duration = Duration::from_secs(2);

/// What the watcher threads report.
enum Event {
    /// A pipe reached end of file (or failed).
    Closed(Stream),
    /// The main child was reaped.
    Exited(io::Result<ExitStatus>),
}

/// What has been reported so far.
#[derive(Default)]
struct ChildProgress {
    status: Option<io::Result<ExitStatus>>,
    stdout_closed: bool,
    stderr_closed: bool,
}

impl ChildProgress {
    fn record(&mut self, event: Event) {
        match event {
            Event::Closed(Stream::Stdout) => self.stdout_closed = true,
            Event::Closed(Stream::Stderr) => self.stderr_closed = true,
            Event::Exited(status) => self.status = Some(status),
        }
    }

    fn is_complete(&self) -> bool {
        self.status.is_some() && self.stdout_closed && self.stderr_closed
    }
}

/// How the watching ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitEnding {
    /// The main child exited and both pipes closed.
    Complete,
    /// The main child exited, but a pipe stayed open past [`PIPE_GRACE`].
    PipeHeldOpen,
    /// The deadline passed first.
    TimedOut,
    /// The cancel flag was set first.
    Cancelled,
}

/// How often a run with a cancel flag looks at it.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// See [`super::run_process`].
pub(super) fn run(spec: &ProcessSpec) -> Result<ProcessOutcome, ProcessError> {
    let started = Instant::now();
    let deadline = started.checked_add(spec.timeout);
    let _running = super::RunningCall::start();
    // flycode is stopping on a signal: nothing starts any more.
    if super::is_stopping() {
        return Ok(ProcessOutcome {
            exit_code: None,
            signal: None,
            stdout: super::StreamOutput::default(),
            stderr: super::StreamOutput::default(),
            timed_out: false,
            cancelled: true,
            duration: started.elapsed(),
        });
    }
    tree::become_subreaper();
    // Built before the spawn; a failure to build it is the call's, with nothing started.
    let mut prepared = match &spec.containment {
        Some(containment) => {
            Some(contain::prepare(containment).map_err(|error| containment_error(spec, error))?)
        }
        None => None,
    };
    let run = RunId::next();
    // Dropped at the end of the run (also an early one): kills what is left in it, removes it.
    let (child, group) = spawn(spec, &run, prepared.as_mut(), Stdios::piped())?;
    let pid = child_pid(&child);

    let (events, received) = mpsc::channel();
    let stdout = capture::shared(spec.output_cap);
    let stderr = capture::shared(spec.output_cap);
    let captures = [&stdout, &stderr];
    if let Err(error) = start_watchers(child, &run, captures, &events) {
        return Err(ProcessError::Io {
            program: spec.program.clone(),
            source: error,
        });
    }
    drop(events);

    let mut progress = ChildProgress::default();
    let ending = watch(&received, deadline, spec.cancel.as_deref(), &mut progress);
    if ending == WaitEnding::Complete {
        tree::sweep_after_exit(pid, &run, group.as_ref());
    } else {
        tree::kill_run(pid, progress.status.is_none(), &run, group.as_ref());
        let give_up = Instant::now() + AFTER_KILL_WAIT;
        while !progress.is_complete() {
            match received.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
                Ok(event) => progress.record(event),
                Err(_) => break,
            }
        }
    }

    let outcome = outcome(spec, progress.status, [&stdout, &stderr], ending, started);
    // Everything of the run is dead: its cgroup and private temporary directory go now.
    drop(group);
    drop(prepared);
    outcome
}

/// Maps a containment that could not be set up to what the model should hear.
pub(super) fn containment_error(spec: &ProcessSpec, error: ContainError) -> ProcessError {
    let program = spec.program.clone();
    match error {
        ContainError::Unsupported(why, advice) => ProcessError::Uncontainable {
            program,
            why,
            advice,
        },
        other => ProcessError::Containment {
            program,
            message: other.to_string(),
        },
    }
}

/// Assembles the outcome from the main child's status and what the pipes gave.
fn outcome(
    spec: &ProcessSpec,
    status: Option<io::Result<ExitStatus>>,
    [stdout, stderr]: [&SharedCapture; 2],
    ending: WaitEnding,
    started: Instant,
) -> Result<ProcessOutcome, ProcessError> {
    let status = status.transpose().map_err(|error| ProcessError::Io {
        program: spec.program.clone(),
        source: error,
    })?;
    Ok(ProcessOutcome {
        exit_code: status.and_then(|status| status.code()),
        signal: status.and_then(|status| status.signal()),
        stdout: capture::lock(stdout).output(),
        stderr: capture::lock(stderr).output(),
        timed_out: ending == WaitEnding::TimedOut,
        cancelled: ending == WaitEnding::Cancelled,
        duration: started.elapsed(),
    })
}

/// Records events until the run is complete, the deadline passes, or the main child has exited
/// and [`PIPE_GRACE`] has passed without both pipes closing. The deadline no longer applies once
/// the main child has exited: the command finished in time, only its leftovers did not.
fn watch(
    received: &Receiver<Event>,
    deadline: Option<Instant>,
    cancel: Option<&AtomicBool>,
    progress: &mut ChildProgress,
) -> WaitEnding {
    let mut grace_end = None;
    loop {
        if progress.is_complete() {
            return WaitEnding::Complete;
        }
        if cancel.is_some_and(|flag| flag.load(Ordering::SeqCst)) || super::is_stopping() {
            return WaitEnding::Cancelled;
        }
        if progress.status.is_some() && grace_end.is_none() {
            grace_end = Some(Instant::now() + PIPE_GRACE);
        }
        let until = grace_end.or(deadline);
        // Wake up often enough to see the cancel flag and flycode stopping on a signal.
        let wake = match until {
            Some(until) => until.min(Instant::now() + CANCEL_POLL),
            None => Instant::now() + CANCEL_POLL,
        };
        let event = received.recv_timeout(wake.saturating_duration_since(Instant::now()));
        match event {
            Ok(event) => progress.record(event),
            Err(RecvTimeoutError::Timeout) if until.is_some_and(|u| Instant::now() < u) => {}
            Err(RecvTimeoutError::Timeout) if until.is_none() => {}
            Err(RecvTimeoutError::Timeout) if grace_end.is_some() => {
                return WaitEnding::PipeHeldOpen;
            }
            Err(RecvTimeoutError::Timeout) => return WaitEnding::TimedOut,
            // Every watcher is gone without completing the picture (a watcher died): clean up.
            Err(RecvTimeoutError::Disconnected) => return WaitEnding::PipeHeldOpen,
        }
    }
}

/// Where a program's stdin, stdout and stderr go.
pub(super) struct Stdios {
    pub(super) stdin: Stdio,
    pub(super) stdout: Stdio,
    pub(super) stderr: Stdio,
}

impl Stdios {
    /// stdin on `/dev/null`, pipes for stdout and stderr: a foreground call's program.
    pub(super) fn piped() -> Stdios {
        Stdios {
            stdin: Stdio::null(),
            stdout: Stdio::piped(),
            stderr: Stdio::piped(),
        }
    }
}

/// Starts the program in its own process group with `stdios` (a foreground call's: stdin
/// closed, pipes for stdout and stderr), the environment adjusted and tagged, inside its containment if it has one (with `TMPDIR`, `TMP`
/// and `TEMP` on the private temporary directory, over any the caller set), in a cgroup of its
/// own where one can be made (returned with it), and registers it as a live main child.
pub(super) fn spawn(
    spec: &ProcessSpec,
    run: &RunId,
    prepared: Option<&mut PreparedContainment>,
    stdios: Stdios,
) -> Result<(Child, Option<CallGroup>), ProcessError> {
    // A one-shot `exec` that judged its reply to start no program has no guardian: it starts
    // none, whatever the judgement missed (PROTOCOL.md §11 (Security), "No program outlives
    // flycode").
    if let Some(why) = super::guard::runs_no_programs() {
        return Err(ProcessError::Containment {
            program: spec.program.clone(),
            message: why.to_owned(),
        });
    }
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(stdios.stdin)
        .stdout(stdios.stdout)
        .stderr(stdios.stderr)
        .process_group(0);
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    command.envs(spec.env_set.iter().map(|(name, value)| (name, value)));
    command.env(tree::RUN_TAG_VAR, &run.tag);
    // A flycode the program starts is not this one's worker: it guards its own programs.
    command.env_remove(super::guard::WORKER_VAR);
    if let Some(prepared) = &prepared {
        for name in ["TMPDIR", "TMP", "TEMP"] {
            command.env(name, prepared.temp_dir());
        }
    }

    // Registered under the same lock as the spawn, so the orphan reaper never sees this child
    // unregistered. The lock also keeps any other spawn out of the call's cgroup while flycode
    // stands in it.
    let mut live = tree::live_children();
    let mut group = CallGroup::create(run.id);
    let start = || match prepared {
        Some(prepared) => prepared.spawn(&mut command),
        None => command.spawn(),
    };
    let child = match group.as_mut() {
        Some(group) => group.spawn_inside(start),
        None => start(),
    }
    .map_err(|error| spawn_error(spec, error))?;
    live.push((child_pid(&child), run.id));
    Ok((child, group))
}

/// Maps a failed spawn to what the model should hear.
fn spawn_error(spec: &ProcessSpec, error: io::Error) -> ProcessError {
    let program = spec.program.clone();
    if spec.containment.is_some() && error.raw_os_error() == Some(contain::CONTAIN_FAILED_ERRNO) {
        return ProcessError::Containment {
            program,
            message: "the program could not enter its Landlock domain".to_owned(),
        };
    }
    match error.kind() {
        // A missing cwd also fails the spawn with "not found": tell the two apart.
        io::ErrorKind::NotFound if !spec.cwd.is_dir() => ProcessError::CwdNotFound {
            cwd: spec.cwd.clone(),
        },
        io::ErrorKind::NotFound => ProcessError::CommandNotFound { program },
        io::ErrorKind::PermissionDenied => ProcessError::PermissionDenied { program },
        _ => ProcessError::Io {
            program,
            source: error,
        },
    }
}

/// Starts one thread that waits for the child (taking it over) and one per pipe. On failure
/// the run is killed before the error is returned.
fn start_watchers(
    mut child: Child,
    run: &RunId,
    [stdout, stderr]: [&SharedCapture; 2],
    events: &Sender<Event>,
) -> io::Result<()> {
    let pid = child_pid(&child);
    let pipes: [(Option<Box<dyn Read + Send>>, _, _); 2] = [
        (box_pipe(child.stdout.take()), Stream::Stdout, stdout),
        (box_pipe(child.stderr.take()), Stream::Stderr, stderr),
    ];
    let (run_id, waiter_events) = (run.id, events.clone());
    let waiter = thread::Builder::new()
        .name("flycode-wait".to_owned())
        .spawn(move || {
            let status = child.wait();
            tree::forget_child(pid, run_id);
            let _ = waiter_events.send(Event::Exited(status));
        });
    if let Err(error) = waiter {
        // The `Child` went down with the closure; the process is still ours to kill and reap.
        tree::kill_run(pid, true, run, None);
        tree::reap_main_child(pid, run);
        return Err(error);
    }
    for (pipe, stream, capture) in pipes {
        let Some(pipe) = pipe else { continue };
        let (capture, events) = (capture.clone(), events.clone());
        let name = match stream {
            Stream::Stdout => "flycode-stdout",
            Stream::Stderr => "flycode-stderr",
        };
        let drainer = thread::Builder::new().name(name.to_owned()).spawn(move || {
            capture::drain(pipe, stream, &capture, &events, Event::Closed);
        });
        if let Err(error) = drainer {
            tree::kill_run(pid, true, run, None);
            return Err(error);
        }
    }
    Ok(())
}

/// A pipe end as a plain reader.
fn box_pipe(pipe: Option<impl Read + Send + 'static>) -> Option<Box<dyn Read + Send>> {
    pipe.map(|pipe| Box::new(pipe) as Box<dyn Read + Send>)
}

/// The child's pid as the kernel's signed type.
pub(super) fn child_pid(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap_or(i32::MAX)
}
