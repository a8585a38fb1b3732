//! A program started in the background (PROTOCOL.md §10 (Running calls: background jobs)):
//! spawned exactly as a foreground call's program is (its own process group, run tag, cgroup and
//! Landlock domain, `run.rs`'s spawn), but left running; its output goes line by line to a
//! [`JobOutputLog`] instead of a bounded capture, its stdin stays open for `job.input`, and it may run
//! under a pseudo-terminal. When its main program exits, whatever it left behind is killed, as
//! for a foreground call; dropping the [`BackgroundProcess`] (the session's end) kills the whole
//! tree.
//!
//! Under a pseudo-terminal the program's stdin, stdout and stderr are the terminal's user side,
//! 80 columns by 24 rows. The terminal is not its controlling terminal (that would take a
//! `setsid` in the child, which needs `unsafe`): `isatty` is true, but opening `/dev/tty` fails.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::super::contain::{self, PreparedContainment};
use super::cgroup::CallGroup;
use super::job_log::{JobEnd, JobOutputLog, Origin};
use super::run::{Stdios, child_pid, containment_error, spawn};
use super::tree::{self, RunId};
use super::{PIPE_GRACE, ProcessError, ProcessSpec};

/// How long [`BackgroundProcess::stop`] waits for a program to leave after `SIGINT` or
/// `SIGTERM` before it kills the tree.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// How long a kill waits for the job's clean-up to finish (its waiter thread).
const AFTER_KILL_WAIT: Duration = Duration::from_secs(5);

/// How long one wait for the job's stdin to take more lasts before the writer looks at its
/// deadline, the cancel flag and the session's end again.
const INPUT_SLICE: Duration = Duration::from_millis(50);

/// The signal `job.kill` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// `SIGINT`, as Ctrl-C would.
    Int,
    /// `SIGTERM`.
    Term,
    /// `SIGKILL` to the whole tree at once.
    Kill,
}

/// What the job's threads and its owner share.
struct JobShared {
    pid: i32,
    run: RunId,
    group: Mutex<Option<CallGroup>>,
    prepared: Mutex<Option<PreparedContainment>>,
    main_exited: AtomicBool,
    /// Set when the clean-up is done and the log has the end.
    done: Mutex<bool>,
    done_changed: Condvar,
}

impl JobShared {
    fn kill_tree(&self) {
        let group = lock(&self.group);
        let alive = !self.main_exited.load(Ordering::SeqCst);
        tree::kill_run(self.pid, alive, &self.run, group.as_ref());
    }

    fn wait_done(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut done = lock(&self.done);
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = self
                .done_changed
                .wait_timeout(done, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// Every background job of this process that has not ended, for [`kill_all`].
static JOBS: Mutex<Vec<std::sync::Weak<JobShared>>> = Mutex::new(Vec::new());

/// Kills every background job of this process with its whole tree (flycode stopping on a
/// signal, PROTOCOL.md §11 (Security), "No program outlives flycode").
pub fn kill_all() {
    let jobs: Vec<Arc<JobShared>> = lock(&JOBS)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    for job in jobs {
        if !*lock(&job.done) {
            job.kill_tree();
        }
    }
}

/// A running (or ended) background program. Dropping it kills everything it started.
pub struct BackgroundProcess {
    shared: Arc<JobShared>,
    /// The job's stdin, non-blocking: a write never waits on a job that does not read.
    stdin: Mutex<Option<File>>,
    /// Set when the session ends: a write under way stops at once.
    stopping: AtomicBool,
    log: Arc<JobOutputLog>,
}

impl std::fmt::Debug for BackgroundProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundProcess")
            .field("pid", &self.shared.pid)
            .finish_non_exhaustive()
    }
}

/// The job's ends of its standard streams.
struct Ends {
    stdin: Option<File>,
    readers: Vec<(Box<dyn Read + Send>, Origin)>,
}

impl BackgroundProcess {
    /// Starts `spec` (its timeout is ignored: a job runs until it ends or is killed), writing
    /// its output to `log`; under a pseudo-terminal when `pty`.
    pub fn start(
        spec: &ProcessSpec,
        pty: bool,
        log: Arc<JobOutputLog>,
    ) -> Result<BackgroundProcess, ProcessError> {
        if super::is_stopping() {
            return Err(ProcessError::Io {
                program: spec.program.clone(),
                source: io::Error::new(io::ErrorKind::Interrupted, "flycode is stopping"),
            });
        }
        tree::become_subreaper();
        let mut prepared = match &spec.containment {
            Some(containment) => {
                Some(contain::prepare(containment).map_err(|e| containment_error(spec, e))?)
            }
            None => None,
        };
        let io_error = |source| ProcessError::Io {
            program: spec.program.clone(),
            source,
        };
        let (stdios, terminal) = if pty {
            let (stdios, master) = terminal_stdios().map_err(io_error)?;
            (stdios, Some(master))
        } else {
            let stdios = Stdios {
                stdin: Stdio::piped(),
                ..Stdios::piped()
            };
            (stdios, None)
        };
        let run = RunId::next();
        let (mut child, group) = spawn(spec, &run, prepared.as_mut(), stdios)?;
        let pid = child_pid(&child);
        let ends = match terminal {
            Some(master) => terminal_ends(master),
            None => Ok(pipe_ends(&mut child)),
        };
        let shared = Arc::new(JobShared {
            pid,
            run,
            group: Mutex::new(group),
            prepared: Mutex::new(prepared.take()),
            main_exited: AtomicBool::new(false),
            done: Mutex::new(false),
            done_changed: Condvar::new(),
        });
        {
            let mut jobs = lock(&JOBS);
            jobs.retain(|job| job.strong_count() > 0);
            jobs.push(Arc::downgrade(&shared));
        }
        let process = BackgroundProcess {
            shared: shared.clone(),
            stdin: Mutex::new(None),
            stopping: AtomicBool::new(false),
            log: log.clone(),
        };
        // From here on, dropping `process` kills the tree: an error below leaves nothing.
        let ends = ends.map_err(io_error)?;
        if let Some(stdin) = &ends.stdin {
            let flags = rustix::fs::fcntl_getfl(stdin).map_err(|e| io_error(e.into()))?;
            rustix::fs::fcntl_setfl(stdin, flags | rustix::fs::OFlags::NONBLOCK)
                .map_err(|e| io_error(e.into()))?;
        }
        *lock(&process.stdin) = ends.stdin;
        watch(child, ends.readers, shared, log).map_err(io_error)?;
        Ok(process)
    }

    /// The main program's pid (also its process group's).
    pub fn pid(&self) -> i32 {
        self.shared.pid
    }

    /// Writes `input` to the job's stdin as far as the job takes it before `deadline`, `cancel`
    /// is set or the session ends, never blocking on a job that does not read (the pipe is
    /// non-blocking; between tries the writer waits for room at most [`INPUT_SLICE`]); `close`
    /// then closes stdin (end of file). How many bytes were written (PROTOCOL.md §9 (Background
    /// jobs), `job.input`).
    pub fn write_input(
        &self,
        input: &[u8],
        close: bool,
        deadline: Instant,
        cancel: Option<&AtomicBool>,
    ) -> io::Result<usize> {
        let mut stdin = lock(&self.stdin);
        let mut written = 0;
        let result = match stdin.as_mut() {
            Some(file) => loop {
                if written == input.len()
                    || self.stopping.load(Ordering::SeqCst)
                    || cancel.is_some_and(|flag| flag.load(Ordering::SeqCst))
                {
                    break Ok(written);
                }
                match file.write(&input[written..]) {
                    Ok(count) => written += count,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break Ok(written);
                        }
                        wait_for_room(file, left.min(INPUT_SLICE));
                    }
                    Err(error) => break Err(error),
                }
            },
            None if input.is_empty() => Ok(0),
            None => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the job's stdin is closed",
            )),
        };
        if close {
            *stdin = None;
        }
        result
    }

    /// Ends the job: `Kill` kills the whole tree at once; `Int` and `Term` go to the program's
    /// process group first, and whatever has not ended after [`STOP_GRACE`] is killed. Returns
    /// once the job's end is recorded (or the wait gave up).
    pub fn stop(&self, signal: StopSignal) {
        let signal = match signal {
            StopSignal::Int => Some(Signal::INT),
            StopSignal::Term => Some(Signal::TERM),
            StopSignal::Kill => None,
        };
        if let Some(signal) = signal
            && !self.shared.main_exited.load(Ordering::SeqCst)
            && let Some(group) = Pid::from_raw(self.shared.pid)
        {
            let _ = kill_process_group(group, signal);
            if self.shared.wait_done(STOP_GRACE) {
                return;
            }
        }
        self.shared.kill_tree();
        self.shared.wait_done(AFTER_KILL_WAIT);
    }

    /// Whether the job's end is recorded.
    pub fn has_ended(&self) -> bool {
        *lock(&self.shared.done)
    }

    /// The job's output.
    pub fn log(&self) -> &Arc<JobOutputLog> {
        &self.log
    }
}

impl Drop for BackgroundProcess {
    fn drop(&mut self) {
        // A write under way gives up within a slice, so the lock is free at once.
        self.stopping.store(true, Ordering::SeqCst);
        *lock(&self.stdin) = None;
        if !self.has_ended() {
            self.shared.kill_tree();
            self.shared.wait_done(AFTER_KILL_WAIT);
        }
    }
}

/// A pseudo-terminal: the user side as the child's three streams, the controlling side kept.
fn terminal_stdios() -> io::Result<(Stdios, OwnedFd)> {
    use rustix::pty::{OpenptFlags, grantpt, openpt, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let user = user_side(&master)?;
    let size = rustix::termios::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let _ = rustix::termios::tcsetwinsize(&user, size);
    let stdios = Stdios {
        stdin: Stdio::from(user.try_clone()?),
        stdout: Stdio::from(user.try_clone()?),
        stderr: Stdio::from(user),
    };
    Ok((stdios, master))
}

/// Opens the terminal's user side.
fn user_side(master: &OwnedFd) -> io::Result<OwnedFd> {
    use rustix::pty::OpenptFlags;
    #[cfg(target_os = "linux")]
    {
        Ok(rustix::pty::ioctl_tiocgptpeer(
            master,
            OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
        )?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use rustix::fs::{Mode, OFlags};
        let name = rustix::pty::ptsname(master, Vec::new())?;
        let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC;
        let _ = OpenptFlags::RDWR;
        Ok(rustix::fs::open(name.as_c_str(), flags, Mode::empty())?)
    }
}

/// Waits up to `most` for room in the pipe or terminal behind `file`.
fn wait_for_room(file: &File, most: Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: i64::try_from(most.as_nanos()).unwrap_or(50_000_000),
    };
    let mut fds = [PollFd::new(file, PollFlags::OUT)];
    let _ = poll(&mut fds, Some(&timeout));
}

/// A reader of a descriptor that may be non-blocking (a terminal's controlling side shares its
/// file description with the job's stdin, which is): a read that would block waits for input
/// instead, as a blocking read would.
struct WaitingReader(File);

impl Read for WaitingReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        use rustix::event::{PollFd, PollFlags, poll};
        loop {
            match self.0.read(buffer) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
                    match poll(&mut fds, None) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
                other => return other,
            }
        }
    }
}

/// The controlling side as the job's stdin and its one output stream.
fn terminal_ends(master: OwnedFd) -> io::Result<Ends> {
    let reader = WaitingReader(File::from(master.try_clone()?));
    Ok(Ends {
        stdin: Some(File::from(master)),
        readers: vec![(Box::new(reader), Origin::Out)],
    })
}

/// The pipes of a job started without a terminal.
fn pipe_ends(child: &mut Child) -> Ends {
    let stdin = child
        .stdin
        .take()
        .map(|pipe| File::from(OwnedFd::from(pipe)));
    let mut readers: Vec<(Box<dyn Read + Send>, Origin)> = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push((Box::new(out), Origin::Out));
    }
    if let Some(err) = child.stderr.take() {
        readers.push((Box::new(err), Origin::Err));
    }
    Ends { stdin, readers }
}

/// Starts a thread per output stream and the waiter, which reaps the main program, gives the
/// streams [`PIPE_GRACE`] to end, kills what is left, and records the end.
fn watch(
    mut child: Child,
    readers: Vec<(Box<dyn Read + Send>, Origin)>,
    shared: Arc<JobShared>,
    log: Arc<JobOutputLog>,
) -> io::Result<()> {
    let (closed, all_closed) = mpsc::channel();
    let count = readers.len();
    for (reader, origin) in readers {
        let (log, closed) = (log.clone(), closed.clone());
        thread::Builder::new()
            .name("flycode-job-out".to_owned())
            .spawn(move || {
                drain(reader, origin, &log);
                let _ = closed.send(());
            })?;
    }
    drop(closed);
    thread::Builder::new()
        .name("flycode-job-wait".to_owned())
        .spawn(move || {
            let status = child.wait();
            shared.main_exited.store(true, Ordering::SeqCst);
            tree::forget_child(shared.pid, shared.run.id);
            let grace = Instant::now() + PIPE_GRACE;
            for _ in 0..count {
                let left = grace.saturating_duration_since(Instant::now());
                if all_closed.recv_timeout(left).is_err() {
                    break;
                }
            }
            // Whatever the program left running goes, as after a foreground call.
            shared.kill_tree();
            drop(lock(&shared.group).take());
            drop(lock(&shared.prepared).take());
            log.finish(job_end(status.as_ref().ok()));
            *lock(&shared.done) = true;
            shared.done_changed.notify_all();
        })?;
    Ok(())
}

/// How a reaped main program ended.
fn job_end(status: Option<&ExitStatus>) -> JobEnd {
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => JobEnd::Exited(code),
            (None, Some(signal)) => JobEnd::Killed(signal),
            (None, None) => JobEnd::Failed,
        },
        None => JobEnd::Failed,
    }
}

/// Reads `reader` to its end (a terminal's controlling side reports `EIO` once no program holds
/// the user side: the same end) into the log.
fn drain(mut reader: Box<dyn Read + Send>, origin: Origin, log: &JobOutputLog) {
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => log.push(origin, buffer.get(..read).unwrap_or_default()),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
