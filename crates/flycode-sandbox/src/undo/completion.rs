//! Completed records put on the disk off the call's path (PROTOCOL.md §16 (Undo and history),
//! "Order, and a crash"). A change's completed record is readable before its call answers
//! (appended to its record under way, `c-N.open`, [`super::UndoStore::save_completed`]);
//! flushing it and renaming the record to `c-N.json` happen here, on a thread of their own,
//! started as the call finishes and running while it answers. Until then the record under way,
//! its incomplete first line on the disk since before the change landed, is what a crash leaves:
//! the next start takes the completed record if it reached the disk whole (its seal verifies),
//! and otherwise settles the change from what the files hold, as for a flycode killed during the
//! call.
//!
//! Every door waits for these threads before it exits ([`wait_for_completions`]), so a flycode
//! that ends normally leaves every record on the disk.

use std::sync::{Condvar, Mutex, PoisonError};

/// Held by the completion that runs: one at a time, so that two of them never prune the store
/// at once (the completions of a door's calls in quick succession).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How many completions are under way in this process.
static UNDER_WAY: Mutex<usize> = Mutex::new(0);
static ENDED: Condvar = Condvar::new();

thread_local! {
    /// Set on a completion's own thread (it never waits for itself).
    static COMPLETING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts one completion down when dropped, however it ends, and gives its thread back the
/// [`COMPLETING`] it had (a completion run inline on a call's thread that panics must not leave
/// that thread's later waits returning at once).
struct CompletionEnds {
    was_completing: bool,
}

impl Drop for CompletionEnds {
    fn drop(&mut self) {
        COMPLETING.with(|flag| flag.set(self.was_completing));
        let mut under_way = UNDER_WAY.lock().unwrap_or_else(PoisonError::into_inner);
        *under_way = under_way.saturating_sub(1);
        ENDED.notify_all();
    }
}

/// The thread completions run on: one, kept, so that a door serving many calls starts no thread
/// per call ([`crate::workers`]).
static COMPLETER: crate::workers::Workers = crate::workers::Workers::new("undo-complete", 1);

/// Runs `complete` on the completion thread (on this one where no thread can be had), counted
/// until it ends.
pub(crate) fn spawn(complete: impl FnOnce() + Send + 'static) {
    *UNDER_WAY.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    let job: crate::workers::KeptJob = Box::new(move || {
        let _ended = CompletionEnds {
            was_completing: COMPLETING.with(|flag| flag.replace(true)),
        };
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        complete();
    });
    if let Err(job) = COMPLETER.run(job) {
        // No thread to be had: complete it here, on the call's path.
        job();
    }
}

/// Waits until every completion this process started has ended: its records on the disk and
/// their markers gone. A door calls it before it exits; on a completion's own thread it returns
/// at once.
pub fn wait_for_completions() {
    if COMPLETING.with(std::cell::Cell::get) {
        return;
    }
    let mut under_way = UNDER_WAY.lock().unwrap_or_else(PoisonError::into_inner);
    while *under_way > 0 {
        under_way = ENDED
            .wait(under_way)
            .unwrap_or_else(PoisonError::into_inner);
    }
}
