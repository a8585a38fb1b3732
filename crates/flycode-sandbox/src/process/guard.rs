//! Programs never outlive flycode, whatever ends it (PROTOCOL.md §11 (Security), "No program
//! outlives flycode"): a signal flycode does not handle, a crash, `SIGKILL` to flycode or to its
//! whole process group, the MCP client going away. Linux only; knows nothing of doors or tools.
//!
//! A door that runs programs (`exec`, `watch`, `run`, `mcp`) starts as three processes:
//!
//! - the **front**: the process that was started (its pid is the one the shell, the MCP client
//!   or a script knows). It replaces its image with a fresh one without any environment (so no
//!   secret stays readable in its `/proc/<pid>/environ`), forwards the signals sent to it to the
//!   guardian, waits for the guardian and exits with its status;
//! - the **guardian**: a child of the front in a process group of its own (a signal to the front's
//!   group, `kill -9 -PGID` included, does not reach it), a child subreaper, with
//!   `PR_SET_PDEATHSIG` so the kernel tells it when the front is gone. It starts the worker, then
//!   replaces its image with one without environment too, forwards signals to the worker, and
//!   waits. When the worker ends (however) or the front is gone (however, `SIGKILL` included), it
//!   kills the worker and every process below itself with `SIGKILL`, re-reading `/proc` until two
//!   readings in a row find none alive, and exits with the worker's status;
//! - the **worker**: flycode itself, started with the original arguments and environment, in the
//!   front's process group (so it keeps the terminal: questions, Ctrl-C). Every program it runs
//!   is its descendant, so the guardian's descendant, and a program that calls `setsid` or
//!   double-forks is reparented to the worker (a subreaper itself) and, once the worker is gone,
//!   to the guardian: nothing started below can escape the walk.
//!
//! Nothing here depends on the worker running its own clean-up: the guardian does not take part
//! in the work and ignores the signals sent to it (it forwards them), so what ends flycode ends
//! the worker or the front, and the guardian then ends the rest. What still escapes: a `SIGKILL`
//! sent to the guardian itself and the front together (the guardian's pid is not the one anyone
//! was given); then the worker is told by its own `PR_SET_PDEATHSIG` (`SIGHUP`, handled as a
//! stop: its calls and jobs end). The one process flycode starts on purpose to outlive it, the
//! `flycode hold-clipboard` helper that keeps `watch`'s last result on the clipboard, is spared.
//!
//! A one-shot `exec` whose reply can start no program goes without all this, and declares so
//! ([`run_no_programs`]): the spawn of a program then fails rather than run unguarded.
//!
//! No file descriptor is passed: the guardian learns of the front's end through the kernel's
//! parent-death signal and of the worker's through `waitpid`; the worker knows it is guarded from
//! [`WORKER_VAR`], which it checks against its parent's pid.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus, kill_process, waitpid};

/// Set in the worker's environment to the guardian's pid; removed from every program's.
pub const WORKER_VAR: &str = "FLYCODE_GUARDIAN";

/// The first argument of the front's fresh image.
const FRONT_ARG: &str = "__flycode-front";
/// The first argument of the guardian, as the front starts it (original environment).
const GUARDIAN_ARG: &str = "__flycode-guardian";
/// The first argument of the guardian's fresh image, without environment.
const WATCH_ARG: &str = "__flycode-guardian-watch";

/// The parent-death signal of the guardian: ignored by default, so one that arrives while the
/// guardian replaces its image does nothing; the guardian reads its parent's pid after
/// installing its handler anyway.
const FRONT_GONE: Signal = Signal::URG;

/// The signals forwarded from the front to the guardian and from the guardian to the worker.
const FORWARDED: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// In the worker: the guardian's pid (0 when this process is not guarded).
static GUARDIAN: AtomicI32 = AtomicI32::new(0);

/// The guardian's pid when this process is a guarded worker: a signal it sends is a forward of
/// one the front received.
pub fn guardian_pid() -> Option<i32> {
    match GUARDIAN.load(Ordering::SeqCst) {
        0 => None,
        pid => Some(pid),
    }
}

/// Called first thing by a door that runs programs, before it reads anything or starts a thread:
/// in the process that was started, splits into front, guardian and worker (see the module) and
/// never returns; in the worker, notes the guardian and returns. Where the split cannot be made,
/// says so on standard error and returns: the door then runs unguarded (its own clean-up still
/// applies).
pub fn guard_this_process() {
    guard_this_process_feeding(None);
}

/// [`guard_this_process`] for a door that has read (some of) its standard input already
/// (`exec`, to decide whether it needs a guardian at all): `fed` is what it read, and whether the
/// rest of standard input follows; the worker is given all of it again on its standard input.
pub fn guard_this_process_feeding(fed: Option<(&[u8], bool)>) {
    #[cfg(target_os = "linux")]
    {
        if let Some(guardian) = std::env::var(WORKER_VAR)
            .ok()
            .and_then(|pid| pid.parse::<i32>().ok())
            && parent_is(guardian)
        {
            // The guardian gone (killed along with the front) ends this worker's calls and jobs.
            let _ = rustix::process::set_parent_process_death_signal(Some(Signal::HUP));
            if !parent_is(guardian) {
                std::process::exit(128 + Signal::HUP.as_raw());
            }
            GUARDIAN.store(guardian, Ordering::SeqCst);
            return;
        }
        if let Err(error) = split(fed) {
            eprintln!(
                "flycode: warning: programs are not guarded against flycode's sudden end: {error}"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fed;
}

/// Set, with the reason, once a one-shot `exec` goes without a guardian on purpose: from then on
/// no program may start in this process.
static NO_PROGRAMS: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Declares that this process runs no program, for `why` (a one-shot `exec` whose reply names
/// none needs no guardian): the spawn of every program fails from now on with `why`, so a reply
/// misjudged fails its call instead of running a program unguarded.
pub fn run_no_programs(why: &'static str) {
    let _ = NO_PROGRAMS.set(why);
}

/// Why this process runs no program, where [`run_no_programs`] was declared.
pub fn runs_no_programs() -> Option<&'static str> {
    NO_PROGRAMS.get().copied()
}

/// Whether this process is a guarded worker (its parent is the guardian that started it).
pub fn is_guarded_worker() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::env::var(WORKER_VAR)
            .ok()
            .and_then(|pid| pid.parse::<i32>().ok())
            .is_some_and(parent_is)
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// The front's side of the split: starts the guardian (which starts the worker), then becomes
/// the front. Returns only when the guardian could not be started.
#[cfg(target_os = "linux")]
fn split(fed: Option<(&[u8], bool)>) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("flycode"));
    let me = rustix::process::getpid();
    let group = rustix::process::getpgrp();
    let mut guardian = Command::new(&exe);
    guardian
        .arg0(&argv0)
        .arg(GUARDIAN_ARG)
        .arg(me.as_raw_pid().to_string())
        .arg(group.as_raw_pid().to_string())
        .arg(&argv0)
        .arg("--")
        .args(args)
        .process_group(0);
    if fed.is_some() {
        guardian.stdin(std::process::Stdio::piped());
    }
    let mut guardian = guardian.spawn()?;
    if let (Some((bytes, rest_follows)), Some(mut input)) = (fed, guardian.stdin.take()) {
        // Given again on the worker's standard input (the guardian passes its own on), before
        // the front's fresh image, which could not hold it: the worker reads it first thing. A
        // worker that stops reading (a reply over the limit) ends, and the write with it.
        use std::io::Write;
        if input.write_all(bytes).is_ok() && rest_follows {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut input);
        }
    }
    let guardian = i32::try_from(guardian.id()).unwrap_or(0);
    // A fresh image without the environment (the keys in it); on failure, the same loop here.
    let error = Command::new(&exe)
        .arg0(&argv0)
        .arg(FRONT_ARG)
        .arg(guardian.to_string())
        .env_clear()
        .exec();
    eprintln!("flycode: warning: the front could not drop its environment: {error}");
    front(guardian)
}

/// Runs the hidden mode named by the arguments, if any (the front's and the guardian's images):
/// the exit status. `None` for every ordinary command line.
pub fn hidden_mode() -> Option<u8> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let mode = args.get(1)?.to_str()?;
    if ![FRONT_ARG, GUARDIAN_ARG, WATCH_ARG].contains(&mode) {
        return None;
    }
    #[cfg(target_os = "linux")]
    {
        let number = |index: usize| -> i32 {
            args.get(index)
                .and_then(|arg| arg.to_str())
                .and_then(|arg| arg.parse().ok())
                .unwrap_or(0)
        };
        match mode {
            FRONT_ARG => front(number(2)),
            GUARDIAN_ARG => {
                let rest = args.get(6..).unwrap_or_default();
                let argv0 = args.get(4).cloned().unwrap_or_default();
                start_worker(number(2), number(3), &argv0, rest)
            }
            _ => guardian_watch(number(2), number(3)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        Some(2)
    }
}

/// The front: forwards the signals sent to it to the guardian, waits for the guardian, ends
/// whatever is left below it and exits with the guardian's status.
#[cfg(target_os = "linux")]
fn front(guardian: i32) -> ! {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    super::protect_own_environment();
    forward_signals(guardian, true);
    let status = wait_for(guardian);
    kill_descendants();
    std::process::exit(exit_code(status));
}

/// The guardian's first image (the original environment): starts the worker with the original
/// arguments and environment in the front's process group, then replaces itself with an image
/// without environment that watches.
#[cfg(target_os = "linux")]
fn start_worker(front: i32, group: i32, argv0: &OsString, args: &[OsString]) -> ! {
    let me = rustix::process::getpid();
    let _ = rustix::process::set_child_subreaper(Some(me));
    let _ = rustix::process::set_parent_process_death_signal(Some(FRONT_GONE));
    if !parent_is(front) {
        std::process::exit(1);
    }
    let spawned = std::env::current_exe().and_then(|exe| {
        Command::new(exe)
            .arg0(argv0)
            .args(args)
            .env(WORKER_VAR, me.as_raw_pid().to_string())
            .process_group(group)
            .spawn()
    });
    let worker = match spawned {
        Ok(child) => i32::try_from(child.id()).unwrap_or(0),
        Err(error) => {
            eprintln!("flycode: could not start: {error}");
            std::process::exit(2);
        }
    };
    if let Ok(exe) = std::env::current_exe() {
        let _ = Command::new(exe)
            .arg(WATCH_ARG)
            .arg(front.to_string())
            .arg(worker.to_string())
            .env_clear()
            .exec();
    }
    guardian_watch(front, worker)
}

/// The guardian proper: forwards signals to the worker; when the worker ends or the front is
/// gone, kills everything below and exits with the worker's status.
#[cfg(target_os = "linux")]
fn guardian_watch(front: i32, worker: i32) -> ! {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let _ = rustix::process::set_parent_process_death_signal(Some(FRONT_GONE));
    super::protect_own_environment();
    forward_signals(worker, false);
    // After the handler: a front gone before it is seen here.
    watch_front(front, worker);
    let status = wait_for(worker);
    finish(exit_code(status))
}

/// Ends the front's watch: kills everything below the guardian once, then exits with `code`.
/// Whichever of the two waits (the worker's end, the front's) comes first does it.
#[cfg(target_os = "linux")]
fn finish(code: i32) -> ! {
    static ONCE: Mutex<()> = Mutex::new(());
    let _once = ONCE.lock();
    kill_descendants();
    std::process::exit(code);
}

/// Watches for the front's end on a thread of its own: the kernel sends [`FRONT_GONE`] when it
/// ends; then the worker is killed at once and everything else with it.
#[cfg(target_os = "linux")]
fn watch_front(front: i32, worker: i32) {
    let gone = move || {
        if let Some(pid) = Pid::from_raw(worker) {
            let _ = kill_process(pid, Signal::KILL);
        }
        finish(128 + Signal::KILL.as_raw());
    };
    let signals = signal_hook::iterator::Signals::new([FRONT_GONE.as_raw()]);
    match signals {
        Ok(mut signals) => {
            let spawned = std::thread::Builder::new()
                .name("flycode-front-gone".to_owned())
                .spawn(move || {
                    for _ in signals.forever() {
                        if !parent_is(front) {
                            gone();
                        }
                    }
                });
            if spawned.is_err() {
                gone();
            }
        }
        Err(_) => gone(),
    }
    if !parent_is(front) {
        gone();
    }
}

/// Forwards [`FORWARDED`] signals to `to` from a thread. `only_sent`: only those another process
/// sent (`kill`); the ones the terminal sends (Ctrl-C, Ctrl-\, a hang-up) go to the whole
/// foreground process group, the worker included, and are not sent twice.
#[cfg(target_os = "linux")]
fn forward_signals(to: i32, only_sent: bool) {
    use signal_hook::iterator::SignalsInfo;
    use signal_hook::iterator::exfiltrator::WithOrigin;
    use signal_hook::low_level::siginfo::Cause;
    let Ok(mut signals) = SignalsInfo::<WithOrigin>::new(FORWARDED) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("flycode-forward".to_owned())
        .spawn(move || {
            for origin in signals.forever() {
                if only_sent && !matches!(origin.cause, Cause::Sent(_)) {
                    continue;
                }
                if let (Some(pid), Some(signal)) =
                    (Pid::from_raw(to), Signal::from_named_raw(origin.signal))
                {
                    let _ = kill_process(pid, signal);
                }
            }
        });
}

/// Whether this process's parent is still `pid`.
#[cfg(target_os = "linux")]
fn parent_is(pid: i32) -> bool {
    rustix::process::getppid().is_some_and(|parent| parent.as_raw_pid() == pid)
}

/// Waits for the child `pid` to end; `None` when it cannot be waited for.
#[cfg(target_os = "linux")]
fn wait_for(pid: i32) -> Option<WaitStatus> {
    let child = Pid::from_raw(pid)?;
    loop {
        match waitpid(Some(child), WaitOptions::empty()) {
            Ok(Some((_, status))) if status.exited() || status.signaled() => return Some(status),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
}

/// The status to exit with for a child's end: its code, or 128 plus the signal that ended it.
#[cfg(target_os = "linux")]
fn exit_code(status: Option<WaitStatus>) -> i32 {
    match status {
        Some(status) => match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 1,
        },
        None => 1,
    }
}

/// How long the walk may chase a tree that keeps changing (a process stuck in the kernel) before
/// the guardian gives up and exits.
#[cfg(target_os = "linux")]
const CHASE_LIMIT: Duration = Duration::from_secs(30);

/// Kills every descendant of this process with `SIGKILL` but the clipboard helper, reaping the
/// dead, until two readings of `/proc` in a row find none alive. A process with `SIGKILL`
/// pending cannot finish a fork, so whatever a killed process started is found below it (or,
/// reparented, below this subreaper) by a later reading.
#[cfg(target_os = "linux")]
fn kill_descendants() {
    // Every descendant has a living parent below us, so no child means none (the common end).
    if !has_children() {
        return;
    }
    let me = rustix::process::getpid().as_raw_pid();
    let exe = std::fs::read_link("/proc/self/exe").ok();
    let give_up = Instant::now() + CHASE_LIMIT;
    let mut quiet = 0;
    while quiet < 2 && Instant::now() < give_up {
        let mut children: HashMap<i32, Vec<(i32, bool)>> = HashMap::new();
        for (pid, parent, zombie) in process_table() {
            children.entry(parent).or_default().push((pid, zombie));
        }
        let mut pending = vec![me];
        let mut alive = 0;
        while let Some(parent) = pending.pop() {
            for &(pid, zombie) in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
                if is_clipboard_helper(pid, exe.as_deref()) {
                    continue;
                }
                pending.push(pid);
                if !zombie && let Some(target) = Pid::from_raw(pid) {
                    let _ = kill_process(target, Signal::KILL);
                    alive += 1;
                }
            }
        }
        // The dead reparented to us, and our children.
        while let Ok(Some(_)) = waitpid(None, WaitOptions::NOHANG) {}
        quiet = if alive == 0 { quiet + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(if alive == 0 { 2 } else { 1 }));
    }
}

/// Whether this process has a child, dead or alive (true when the lists cannot be read). Read
/// once the child just waited for is reaped: a process reparented to us is listed by then.
#[cfg(target_os = "linux")]
fn has_children() -> bool {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return true;
    };
    threads.flatten().any(|thread| {
        std::fs::read_to_string(thread.path().join("children"))
            .map_or(true, |children| !children.trim().is_empty())
    })
}

/// Whether `pid` is flycode's own `hold-clipboard` helper (this binary, that argument), the one
/// process meant to outlive the command that started it.
#[cfg(target_os = "linux")]
fn is_clipboard_helper(pid: i32, exe: Option<&std::path::Path>) -> bool {
    let Some(exe) = exe else { return false };
    if std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .as_deref()
        != Some(exe)
    {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .is_some_and(|cmdline| cmdline.split(|&byte| byte == 0).nth(1) == Some(b"hold-clipboard"))
}

/// Every process's pid, parent and whether it is a zombie; processes that vanish while being
/// read are skipped.
#[cfg(target_os = "linux")]
fn process_table() -> Vec<(i32, i32, bool)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) S ppid ...`: `comm` may hold spaces and parentheses.
            let (_, fields) = stat.rsplit_once(')')?;
            let mut fields = fields.split_whitespace();
            let state = fields.next()?;
            let parent = fields.next()?.parse().ok()?;
            Some((pid, parent, state == "Z"))
        })
        .collect()
}
