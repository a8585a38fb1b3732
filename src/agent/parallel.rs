//! Parallel read-only calls (PROTOCOL.md §13 (The API loop: parallel calls), seed 001): in one assistant turn, every maximal run of
//! consecutive read-only calls runs at once, on at most `limit` threads; every other call runs
//! alone, in order. The loop (`turn`) decides which calls only read (it asks the tool)
//! and hands each run here; results are reported as they happen and kept in call order.

use std::ops::Range;
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

/// The order to run a turn's calls in: each maximal run of consecutive read-only calls
/// (`read_only[i]`) as one range, every other call as a range of its own.
pub fn runs(read_only: &[bool]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < read_only.len() {
        let mut end = start + 1;
        if read_only[start] {
            while end < read_only.len() && read_only[end] {
                end += 1;
            }
        }
        runs.push(start..end);
        start = end;
    }
    runs
}

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

    #[test]
    fn reads_run_together_and_every_other_call_alone() {
        let (r, w) = (true, false);
        assert_eq!(
            runs(&[r, r, w, r, w, w, r, r, r]),
            vec![0..2, 2..3, 3..4, 4..5, 5..6, 6..9]
        );
        assert_eq!(runs(&[]), Vec::<Range<usize>>::new());
        assert_eq!(runs(&[w]), vec![0..1]);
    }

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
