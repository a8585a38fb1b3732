//! Putting results back in path order and stopping at the limit: the walker may run only so far
//! ahead of the report ([`LookaheadGate`]), and the collector emits files in the order they were found,
//! counting matching lines until the limit ([`Collector`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, mpsc};

use super::*;

/// Lets the walker run at most [`LOOKAHEAD`] files ahead of the report, and stops everyone.
#[derive(Default)]
pub(super) struct LookaheadGate {
    stopped: AtomicBool,
    state: Mutex<LookaheadState>,
    changed: Condvar,
}

#[derive(Default)]
struct LookaheadState {
    /// Files reported so far.
    reported: usize,
    /// Whether the search is over.
    stopped: bool,
    /// Whether the walker is waiting for room.
    waiting: bool,
}

impl LookaheadGate {
    pub(super) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Waits until the files before `end` may be handed out; false once the search has stopped.
    pub(super) fn wait_for_room(&self, end: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !state.stopped && end > state.reported + LOOKAHEAD {
            state.waiting = true;
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.waiting = false;
        !state.stopped
    }

    /// Waits until the item at `index` has been reported; false once the search has stopped.
    pub(super) fn wait_for_reported(&self, index: usize) -> bool {
        self.wait_for_room(index + 1 + LOOKAHEAD)
    }

    pub(super) fn advance(&self, reported: usize) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.reported = reported;
        if state.waiting {
            self.changed.notify_all();
        }
    }

    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopped = true;
        self.changed.notify_all();
    }
}

/// Puts the workers' outcomes back in path order and applies the limit.
pub(super) struct Collector {
    pub(super) out: SearchOutput,
    limit: usize,
    matches: usize,
    done: bool,
}

impl Collector {
    pub(super) fn new(limit: usize, context_lines: usize) -> Collector {
        Collector {
            out: SearchOutput {
                context_lines,
                ..SearchOutput::default()
            },
            limit,
            matches: 0,
            done: false,
        }
    }

    /// Takes outcomes until every file is reported or the limit is passed, then stops the rest.
    pub(super) fn collect(
        &mut self,
        results: mpsc::Receiver<(usize, Vec<FileOutcome>)>,
        gate: &LookaheadGate,
    ) {
        let mut pending = BTreeMap::new();
        let mut next = 0;
        'receive: for (first, outcomes) in results {
            pending.insert(first, outcomes);
            while let Some(outcomes) = pending.remove(&next) {
                next += outcomes.len();
                for outcome in outcomes {
                    self.accept(outcome);
                    if self.done {
                        break 'receive;
                    }
                }
            }
            gate.advance(next);
        }
        gate.stop();
    }

    /// Adds the next file's outcome, in path order.
    pub(super) fn accept(&mut self, outcome: FileOutcome) {
        let (path, hits) = match outcome {
            FileOutcome::Hits { path, hits } => (path, hits),
            FileOutcome::Binary => {
                self.out.files_searched += 1;
                self.out.binary_files += 1;
                return;
            }
            FileOutcome::Skipped => return,
            FileOutcome::Unreadable => {
                self.out.unreadable += 1;
                return;
            }
        };
        self.out.files_searched += 1;
        if hits.matches == 0 {
            return;
        }
        let room = self.limit - self.matches;
        if room == 0 {
            self.out.truncated = true;
            self.done = true;
            return;
        }
        self.out.files_matched += 1;
        let mut taken = 0;
        let mut cut = false;
        for hit in hits.lines {
            let is_match = hit.kind == HitKind::Match;
            if taken == room && (is_match || hit.kind == HitKind::Before) {
                cut = true;
                break;
            }
            taken += usize::from(is_match);
            self.out.lines.push(SearchLine {
                path: path.clone(),
                line_number: hit.line_number,
                text: hit.text,
                is_context: !is_match,
            });
        }
        self.matches += taken;
        if cut || hits.more {
            self.out.truncated = true;
            self.done = true;
        }
    }
}
