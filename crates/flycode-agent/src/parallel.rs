//! Parallel read-only calls (PROTOCOL.md §13 (The API loop: parallel calls), seed 001): the
//! threads a run of calls goes on, at most `limit` at once. Which calls may run together is the
//! call service's scheduler's to say ([`flycode_core::tools::executor::schedule`]); the loop hands each
//! run it plans here, and results are reported as they happen and kept in call order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// What happened to one item of a run.
pub enum Progress<R> {
    /// Item `index` started.
    Started(usize),
    /// Item `index` ended with this result.
    Finished(usize, R),
    /// Nothing ended, or something is about to be reported: a chance to pass on what the items
    /// report from inside (a sub-agent's calls) on the calling thread. Comes at least every
    /// [`TICK`] while items run, and before every other report.
    Tick,
}

/// How often [`Progress::Tick`] comes at least while items run.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs `work` on every item, at most `limit` at once, and reports each start and end to
/// `report` on the calling thread as they happen. Once `cancel` is set no further item starts;
/// the results of those that ran are returned in item order (`None` for one that never started).
pub fn run_bounded<T, R>(
    items: &[T],
    limit: usize,
    cancel: &AtomicBool,
    work: impl Fn(&T) -> R + Sync,
    mut report: impl FnMut(Progress<&R>),
) -> Vec<Option<R>>
where
    T: Sync,
    R: Send,
{
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    let next = AtomicUsize::new(0);
    let (sender, events) = mpsc::channel();
    let workers = items.len().min(limit.max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (sender, next, work) = (sender.clone(), &next, &work);
            scope.spawn(move || {
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= items.len() || cancel.load(Ordering::SeqCst) {
                        break;
                    }
                    let _ = sender.send(Progress::Started(index));
                    let result = work(&items[index]);
                    let _ = sender.send(Progress::Finished(index, result));
                }
            });
        }
        drop(sender);
        loop {
            let event = match events.recv_timeout(TICK) {
                Ok(event) => event,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    report(Progress::Tick);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            report(Progress::Tick);
            match event {
                Progress::Started(index) => report(Progress::Started(index)),
                Progress::Finished(index, result) => {
                    report(Progress::Finished(index, &result));
                    results[index] = Some(result);
                }
                Progress::Tick => {}
            }
        }
    });
    results
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier, Condvar, Mutex};
    use std::time::Duration;

    use super::*;

    /// Each item waits (at most 10 s) until every other item has started: only items that run
    /// at the same time can all get past the wait.
    #[test]
    fn the_items_of_a_run_overlap() {
        let started = Arc::new((Mutex::new(0usize), Condvar::new()));
        let items = [0, 1, 2, 3];
        let results = run_bounded(
            &items,
            4,
            &AtomicBool::new(false),
            |_| {
                let (count, wake) = &*started;
                let mut count = count.lock().unwrap();
                *count += 1;
                wake.notify_all();
                let (count, timeout) = wake
                    .wait_timeout_while(count, Duration::from_secs(10), |count| *count < 4)
                    .unwrap();
                !timeout.timed_out() && *count == 4
            },
            |_| {},
        );
        assert_eq!(results, vec![Some(true); 4], "an item waited alone");
    }

    #[test]
    fn no_more_than_the_limit_run_at_once_and_results_keep_item_order() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        // Two at a time: each pair meets at the barrier, so the limit is reached every time.
        let barrier = Barrier::new(2);
        let items: Vec<usize> = (0..8).collect();
        let mut order = Vec::new();
        let results = run_bounded(
            &items,
            2,
            &AtomicBool::new(false),
            |item| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                barrier.wait();
                running.fetch_sub(1, Ordering::SeqCst);
                item * 10
            },
            |progress| {
                if let Progress::Finished(index, _) = progress {
                    order.push(index);
                }
            },
        );
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(order.len(), 8);
        assert_eq!(results, (0..8).map(|i| Some(i * 10)).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_starts_once_cancelled() {
        let cancel = AtomicBool::new(false);
        let items = [0, 1, 2];
        let results = run_bounded(
            &items,
            1,
            &cancel,
            |item| {
                cancel.store(true, Ordering::SeqCst);
                *item
            },
            |_| {},
        );
        assert_eq!(results, vec![Some(0), None, None]);
    }
}
