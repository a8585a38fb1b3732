//! A thread started to work beside the one that starts it, on another processor.
//!
//! Linux starts a thread on its creator's processor, and may leave it queued there, the other
//! processors idle, until the creator blocks: on the two-core virtual machines of issue 41, a
//! thread meant to work at the same time as its creator ran after it (a 10 MB read's two halves
//! one after the other, the undo recorder after the write's staging). A thread started here moves
//! itself to another processor first, its creator yielding the processor for that moment, and
//! may then run anywhere again: where the other processors are busy, it is no worse off than
//! one started the usual way.

use std::io;
use std::thread::{Scope, ScopedJoinHandle};

use rustix::thread::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};

/// Whether this thread may run on a processor other than the one it is on: whether a thread
/// started beside it can work at the same time.
pub fn other_processor_exists() -> bool {
    processors().is_some()
}

/// Starts `work` on a thread named `name` in `scope`, moved to a processor other than this
/// thread's where there is one.
pub fn spawn_beside<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    work: impl FnOnce() -> T + Send + 'scope,
) -> io::Result<ScopedJoinHandle<'scope, T>> {
    let processors = processors();
    let moving = processors.is_some();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, move || {
            if let Some((allowed, elsewhere)) = processors
                && sched_setaffinity(None, &elsewhere).is_ok()
            {
                // Moved; free again to go wherever the scheduler sends it.
                let _ = sched_setaffinity(None, &allowed);
            }
            work()
        })?;
    if moving {
        std::thread::yield_now();
    }
    Ok(thread)
}

/// The processors this thread may run on, and those of them other than the one it is on, if
/// there are such.
fn processors() -> Option<(CpuSet, CpuSet)> {
    let allowed = sched_getaffinity(None).ok()?;
    let mut elsewhere = allowed;
    elsewhere.unset(sched_getcpu());
    (elsewhere.count() > 0).then_some((allowed, elsewhere))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_started_beside_runs_and_answers() {
        let answer = std::thread::scope(|scope| {
            let thread = spawn_beside(scope, "flycode-test-beside", || {
                std::thread::current().name().map(str::to_owned)
            })
            .unwrap();
            thread.join().unwrap()
        });
        assert_eq!(answer.as_deref(), Some("flycode-test-beside"));
    }

    #[test]
    fn a_thread_started_beside_is_free_to_run_anywhere_afterwards() {
        let before = sched_getaffinity(None).unwrap();
        let after = std::thread::scope(|scope| {
            spawn_beside(scope, "flycode-test-beside", || {
                sched_getaffinity(None).unwrap()
            })
            .unwrap()
            .join()
            .unwrap()
        });
        assert_eq!(after, before);
    }
}
