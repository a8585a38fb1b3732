//! A thread started to work beside the one that starts it, on another processor.
//!
//! Linux starts a thread on its creator's processor, and may leave it queued there, the other
//! processors idle, until the creator blocks: on the two-core virtual machines of issue 41, a
//! thread meant to work at the same time as its creator ran after it (a 10 MB read's two halves
//! one after the other, the undo recorder after the write's staging). Where a processor is idle,
//! a thread started here moves itself there first, its creator yielding the processor for that
//! moment, and may then run anywhere again. Where none is (every processor has a thread ready to
//! run), it starts the usual way: moved onto a busy processor it would wait for its turn there
//! (a small write took 2.2 ms instead of 1.3 with the other core busy).

use std::io;
use std::path::Path;
use std::thread::{Scope, ScopedJoinHandle};

use rustix::thread::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};

/// The processors a thread started now could work on beside this one: one of them is idle.
#[derive(Clone, Copy, Debug)]
pub struct IdleProcessors {
    /// Every processor this thread may run on.
    allowed: CpuSet,
    /// Those of them other than the one it is on.
    elsewhere: CpuSet,
}

/// The processors this thread may run on other than its own, if one of them is idle now (fewer
/// threads ready to run on the machine, this one counted, than those processors): whether a
/// thread started beside it would work at the same time. One look at `/proc/loadavg`.
pub fn idle_processors() -> Option<IdleProcessors> {
    let allowed = sched_getaffinity(None).ok()?;
    let mut elsewhere = allowed;
    elsewhere.unset(sched_getcpu());
    let others = usize::try_from(elsewhere.count()).ok()?;
    (others > 0 && threads_ready_to_run()? <= others)
        .then_some(IdleProcessors { allowed, elsewhere })
}

/// Starts `work` on a thread named `name` in `scope`, moved to `idle` (what
/// [`idle_processors`] found) first; without it, started the usual way.
pub fn spawn_beside<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    idle: Option<IdleProcessors>,
    work: impl FnOnce() -> T + Send + 'scope,
) -> io::Result<ScopedJoinHandle<'scope, T>> {
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, move || {
            if let Some(IdleProcessors { allowed, elsewhere }) = idle
                && sched_setaffinity(None, &elsewhere).is_ok()
            {
                // Moved; free again to go wherever the scheduler sends it.
                let _ = sched_setaffinity(None, &allowed);
            }
            work()
        })?;
    if idle.is_some() {
        std::thread::yield_now();
    }
    Ok(thread)
}

/// The threads ready to run on the machine now, this one counted (the fourth field of
/// `/proc/loadavg`, `running/total`): fewer than the processors means one is idle.
fn threads_ready_to_run() -> Option<usize> {
    let text = crate::host::read_to_string(Path::new("/proc/loadavg")).ok()?;
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_counts_at_least_this_thread_as_ready_to_run() {
        assert!(threads_ready_to_run().is_some_and(|ready| ready >= 1));
    }

    #[test]
    fn work_started_beside_runs_and_answers() {
        let answer = std::thread::scope(|scope| {
            let thread = spawn_beside(scope, "flycode-test-beside", idle_processors(), || {
                std::thread::current().name().map(str::to_owned)
            })
            .unwrap();
            thread.join().unwrap()
        });
        assert_eq!(answer.as_deref(), Some("flycode-test-beside"));
    }

    #[test]
    fn a_thread_moved_beside_is_free_to_run_anywhere_afterwards() {
        let allowed = sched_getaffinity(None).unwrap();
        let mut elsewhere = allowed;
        elsewhere.unset(sched_getcpu());
        if elsewhere.count() == 0 {
            return; // One processor: nowhere to move to.
        }
        // Moved as if another processor were idle, whether or not one is now.
        let idle = Some(IdleProcessors { allowed, elsewhere });
        let after = std::thread::scope(|scope| {
            spawn_beside(scope, "flycode-test-beside", idle, || {
                sched_getaffinity(None).unwrap()
            })
            .unwrap()
            .join()
            .unwrap()
        });
        // (Where it runs afterwards is the scheduler's: with other tests running, an idle
        // processor may pull it back at once.)
        assert_eq!(after, allowed);
    }
}
