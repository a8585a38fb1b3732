//! Threads kept for short jobs that mostly wait on the disk: the flushes a change makes together
//! ([`crate::durability::sync_at_once`]) and the undo records completed after their calls
//! answered ([`crate::undo::completion`]). Starting a thread costs about a tenth of a millisecond
//! on these machines, as much as a flush saves by running beside another, so a door that serves
//! many calls keeps the threads it started (issue 41). A thread is started when a job finds none
//! idle, up to the set's limit; past it, jobs wait their turn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A job for a kept thread.
pub(crate) type KeptJob = Box<dyn FnOnce() + Send + 'static>;

/// A set of kept threads taking jobs from one queue.
pub(crate) struct Workers {
    name: &'static str,
    /// The most threads it starts.
    limit: usize,
    queue: OnceLock<Queue>,
    started: AtomicUsize,
    idle: AtomicUsize,
}

struct Queue {
    jobs: Mutex<Sender<KeptJob>>,
    taken: Arc<Mutex<Receiver<KeptJob>>>,
}

impl Workers {
    /// A set of at most `limit` threads named `name`, none started yet.
    pub(crate) const fn new(name: &'static str, limit: usize) -> Workers {
        Workers {
            name,
            limit,
            queue: OnceLock::new(),
            started: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
        }
    }

    /// Hands `job` to a thread of the set, starting one where none is idle; the job back where
    /// the set has no thread and none can be started (the caller then runs it itself).
    pub(crate) fn run(&'static self, job: KeptJob) -> Result<(), KeptJob> {
        let queue = self.queue.get_or_init(|| {
            let (jobs, taken) = channel();
            Queue {
                jobs: Mutex::new(jobs),
                taken: Arc::new(Mutex::new(taken)),
            }
        });
        if self.idle.load(Ordering::SeqCst) == 0 {
            self.start(queue);
        }
        if self.started.load(Ordering::SeqCst) == 0 {
            return Err(job);
        }
        let jobs = queue.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.send(job).map_err(|refused| refused.0)
    }

    /// Starts one more thread, if the set is under its limit.
    fn start(&'static self, queue: &Queue) {
        let reserved = self
            .started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |started| {
                (started < self.limit).then_some(started + 1)
            });
        if reserved.is_err() {
            return;
        }
        let taken = Arc::clone(&queue.taken);
        let started = std::thread::Builder::new()
            .name(self.name.to_owned())
            .spawn(move || {
                loop {
                    self.idle.fetch_add(1, Ordering::SeqCst);
                    let job = taken.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    self.idle.fetch_sub(1, Ordering::SeqCst);
                    match job {
                        // A job that panics ends alone, not its thread: the jobs queued behind
                        // it still run.
                        Ok(job) => {
                            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                        }
                        Err(_) => return,
                    }
                }
            });
        if started.is_err() && self.started.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Another caller may have queued a job while this thread was reserved: with no
            // thread left to take it, it runs here rather than wait for a thread forever.
            let taken = queue.taken.lock().unwrap_or_else(PoisonError::into_inner);
            while let Ok(job) = taken.try_recv() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SET: Workers = Workers::new("flycode-test-worker", 2);

    #[test]
    fn jobs_run_on_kept_threads_however_many_are_queued() {
        let (done, finished) = channel();
        for n in 0..20 {
            let done = done.clone();
            let job: KeptJob = Box::new(move || {
                let name = std::thread::current().name().map(str::to_owned);
                done.send((n, name)).unwrap();
            });
            assert!(SET.run(job).is_ok());
        }
        let mut seen: Vec<(i32, Option<String>)> =
            (0..20).map(|_| finished.recv().unwrap()).collect();
        seen.sort();
        assert_eq!(
            seen.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            (0..20).collect::<Vec<_>>()
        );
        assert!(
            seen.iter()
                .all(|(_, name)| name.as_deref() == Some("flycode-test-worker"))
        );
        assert!(SET.started.load(Ordering::SeqCst) <= 2);
    }
}
