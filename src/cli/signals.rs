//! SIGINT, SIGTERM, SIGHUP and SIGQUIT in the doors that run programs (PROTOCOL.md §11
//! (Security), "No program outlives flycode"): the running call and the background jobs are ended
//! first, then flycode exits with the conventional status, 128 plus the signal (130 for Ctrl-C,
//! 143 for SIGTERM). What a door does in between:
//!
//! - `exec`: the call under way is cancelled (its program killed with its tree), its result is
//!   printed as usual; a door still busy 5 s later (reading its input, a question) exits then.
//! - `mcp`: every program and job is killed, and flycode exits as soon as no call is running
//!   (the client is gone or going; nothing is answered any more).
//! - `run`: the run's own stop (PROTOCOL.md §13, "Ctrl-C"), for each of the four signals.
//! - `watch`: the running call is ended (answered `cancelled`), the jobs too, the session saved;
//!   SIGINT and SIGTERM are the ordinary way to stop watching and exit 0 (PROTOCOL.md §12,
//!   "Stopping"), SIGHUP (the terminal went away) and SIGQUIT exit with 128 plus the signal.
//!
//! A second signal ends flycode at once; the first one's twin (the same signal, once straight from
//! its sender and once forwarded by flycode's guardian) is not a second signal.
//! Whatever is left then is killed by the guardian ([`crate::sandbox::process::guard`]).
//!
//! A one-shot `exec` that runs no program ([`install_for_calls_alone`]) has no program to kill,
//! no guardian and no twin: the handlers only set flags, which its call watches (a search ends
//! `cancelled`), and no thread waits for signals. A thread costs a start as short as a trivial
//! call's a measurable part of its time (issue 41). What it gives up is the 5-second limit: a
//! call that watches no flag finishes first (a second signal still exits at once).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;

use crate::sandbox::process;

/// Which door installs the handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopDoor {
    /// `flycode exec`, both dialects.
    Exec,
    /// `flycode watch`.
    Watch,
    /// `flycode run`.
    Run,
    /// `flycode mcp`.
    Mcp,
}

/// The first stop signal received (0: none).
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// Whether the exit status is 128 plus [`STOPPED_BY`].
static SIGNAL_STATUS: AtomicBool = AtomicBool::new(false);

/// The signals that stop flycode.
const STOP_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// Without the thread ([`install_for_calls_alone`]): which of [`STOP_SIGNALS`] arrived, each set
/// by its handler.
static FLAGGED: OnceLock<[Arc<AtomicBool>; 4]> = OnceLock::new();

/// The exit status flycode must end with because a signal stopped it, if one did: 128 plus the
/// signal.
pub fn exit_status() -> Option<u8> {
    let flagged = FLAGGED.get().and_then(|arrived| {
        STOP_SIGNALS
            .iter()
            .zip(arrived)
            .find(|(_, flag)| flag.load(Ordering::SeqCst))
            .map(|(signal, _)| *signal)
    });
    let signal = match flagged {
        Some(signal) => signal,
        None => STOPPED_BY.load(Ordering::SeqCst),
    };
    let status = flagged.is_some() || SIGNAL_STATUS.load(Ordering::SeqCst);
    (signal != 0 && status).then(|| u8::try_from(128 + signal).unwrap_or(u8::MAX))
}

/// Whether a stop signal has arrived (either handling).
pub(crate) fn stop_signal_arrived() -> bool {
    STOPPED_BY.load(Ordering::SeqCst) != 0
        || FLAGGED
            .get()
            .is_some_and(|arrived| arrived.iter().any(|flag| flag.load(Ordering::SeqCst)))
}

/// Installs the handling of the stop signals for a one-shot `exec` that runs no program
/// (PROTOCOL.md §11 (Security), "No program outlives flycode"), without a thread: the first
/// signal sets the returned flag (the call's cancel) and is remembered for the exit status; a
/// second one exits at once with 128 plus the first.
pub(crate) fn install_for_calls_alone() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::flag;
    let arrived = FLAGGED.get_or_init(|| std::array::from_fn(|_| Arc::new(AtomicBool::new(false))));
    let stopped = Arc::new(AtomicBool::new(false));
    // A handler's actions run in the order they were registered: the exit on a second signal
    // comes before the flags the first one set.
    for signal in STOP_SIGNALS {
        for (first, first_arrived) in STOP_SIGNALS.iter().zip(arrived) {
            flag::register_conditional_shutdown(signal, 128 + first, Arc::clone(first_arrived))
                .context("installing the signal handler")?;
        }
    }
    for (signal, signal_arrived) in STOP_SIGNALS.iter().zip(arrived) {
        flag::register(*signal, Arc::clone(signal_arrived))
            .context("installing the signal handler")?;
        flag::register(*signal, Arc::clone(&stopped)).context("installing the signal handler")?;
    }
    Ok(stopped)
}

/// What a door does with a stop signal.
struct StopPlan {
    /// End the running call and the jobs now.
    end_programs: bool,
    /// Exit with 128 plus the signal.
    signal_status: bool,
    /// Exit at once when no call is running any more.
    exit_when_idle: bool,
    /// Exit after this long if the door has not ended by itself.
    give_up: Option<Duration>,
}

fn plan(door: StopDoor, signal: i32) -> StopPlan {
    match door {
        StopDoor::Exec => StopPlan {
            end_programs: true,
            signal_status: true,
            exit_when_idle: false,
            give_up: Some(Duration::from_secs(5)),
        },
        StopDoor::Mcp => StopPlan {
            end_programs: true,
            signal_status: true,
            exit_when_idle: true,
            give_up: Some(Duration::from_secs(10)),
        },
        StopDoor::Run => StopPlan {
            end_programs: true,
            signal_status: true,
            exit_when_idle: false,
            give_up: None,
        },
        StopDoor::Watch => StopPlan {
            end_programs: true,
            // SIGINT and SIGTERM are the ordinary way to stop watching (PROTOCOL.md §12).
            signal_status: signal == SIGHUP || signal == SIGQUIT,
            exit_when_idle: false,
            give_up: Some(Duration::from_secs(10)),
        },
    }
}

/// Installs the handling of SIGINT, SIGTERM, SIGHUP and SIGQUIT for `door`; `flag` is the door's
/// own stop flag (`run`'s cancel, `watch`'s shutdown), set on the first of them.
pub(crate) fn install(door: StopDoor, flag: Option<Arc<AtomicBool>>) -> anyhow::Result<()> {
    let mut signals =
        SignalsInfo::<WithOrigin>::new(STOP_SIGNALS).context("installing the signal handler")?;
    let guardian = process::guard::guardian_pid();
    std::thread::Builder::new()
        .name("flycode-signals".to_owned())
        .spawn(move || {
            // Of the first signal, one copy straight from the sender and one forwarded by the
            // guardian are the same stop: a `kill` to the process group reaches the worker
            // directly and through the front and the guardian, in either order.
            let mut seen = (false, false);
            for origin in signals.forever() {
                let signal = origin.signal;
                let forwarded =
                    guardian.is_some() && origin.process.map(|sender| sender.pid) == guardian;
                let first = STOPPED_BY.load(Ordering::SeqCst);
                if first != 0 {
                    let twin = signal == first
                        && if forwarded {
                            !std::mem::replace(&mut seen.1, true)
                        } else {
                            !std::mem::replace(&mut seen.0, true)
                        };
                    if !twin {
                        std::process::exit(128 + first);
                    }
                    continue;
                }
                seen = if forwarded {
                    (false, true)
                } else {
                    (true, false)
                };
                STOPPED_BY.store(signal, Ordering::SeqCst);
                let plan = plan(door, signal);
                SIGNAL_STATUS.store(plan.signal_status, Ordering::SeqCst);
                if let Some(flag) = &flag {
                    flag.store(true, Ordering::SeqCst);
                }
                if plan.end_programs {
                    process::stop_all_programs();
                }
                if plan.exit_when_idle || plan.give_up.is_some() {
                    let _ = std::thread::Builder::new()
                        .name("flycode-stopping".to_owned())
                        .spawn(move || exit_later(signal, &plan));
                }
            }
        })
        .context("installing the signal handler")?;
    Ok(())
}

/// Exits (with 128 plus `signal` where the plan says so) once no call runs (`exit_when_idle`) or `give_up` has passed.
fn exit_later(signal: i32, plan: &StopPlan) {
    let started = Instant::now();
    loop {
        let idle = plan.exit_when_idle && process::running_calls() == 0;
        let late = plan.give_up.is_some_and(|limit| started.elapsed() >= limit);
        if idle || late {
            // The undo records of the calls that ran put on the disk first (PROTOCOL.md §16,
            // "Order, and a crash"): a flushed rename each, not a wait on a call.
            crate::sandbox::undo::wait_for_completions();
            crate::sandbox::spare_records::release();
            std::process::exit(if plan.signal_status { 128 + signal } else { 0 });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
