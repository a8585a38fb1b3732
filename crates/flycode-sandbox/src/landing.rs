//! The moment a staged change lands in the roots (PROTOCOL.md §16 (Undo and history), "Order,
//! and a crash"). A tool that stages its new contents before it changes anything (fs.write,
//! fs.edit, fs.writeBatch) runs while the undo recorder stores the pre-images on a second
//! thread, and the first change it makes to a path the call names (a rename into place, a
//! folder created) waits here until that record is on the disk: the recording costs the time by which it
//! outlasts the staging, not the sum of both. Everything else the sandbox changes is never
//! behind a gate: the call service records those calls before it runs them.
//!
//! The gate belongs to the thread that runs the tool (a tool runs on its caller's thread), so
//! a call on another thread never waits for this one's record.

use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Closed until the change's record is on the disk (or recording has given up).
#[derive(Debug, Default)]
pub struct LandingGate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl LandingGate {
    /// A guard that opens the gate when dropped, however the recording ends (a panic too).
    pub fn opener(&self) -> GateOpener<'_> {
        GateOpener(self)
    }

    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Opens its [`LandingGate`] when dropped.
#[derive(Debug)]
pub struct GateOpener<'g>(&'g LandingGate);

impl Drop for GateOpener<'_> {
    fn drop(&mut self) {
        *self.0.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.opened.notify_all();
    }
}

thread_local! {
    static GATE: RefCell<Option<Arc<LandingGate>>> = const { RefCell::new(None) };
}

/// Runs `run` (the tool) on this thread with `gate` in front of every change it lands.
pub fn behind<R>(gate: Arc<LandingGate>, run: impl FnOnce() -> R) -> R {
    /// Puts back the gate there was before, also when `run` panics.
    struct Leave(Option<Arc<LandingGate>>);
    impl Drop for Leave {
        fn drop(&mut self) {
            let outer = self.0.take();
            GATE.with(|slot| *slot.borrow_mut() = outer);
        }
    }
    let outer = GATE.with(|slot| slot.borrow_mut().replace(gate));
    let _leave = Leave(outer);
    run()
}

/// Waits, if this thread's tool runs behind a gate, until it opens: called right before a
/// staged change first touches the roots.
pub fn wait() {
    let gate = GATE.with(|slot| slot.borrow().clone());
    if let Some(gate) = gate {
        gate.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_landing_waits_for_the_gate_and_only_on_its_own_thread() {
        let gate = Arc::new(LandingGate::default());
        let recorded = &AtomicBool::new(false);
        let other_thread_went_on = &AtomicBool::new(false);
        let opened = &gate;
        let (went_on, heard) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let recorder = scope.spawn(move || {
                let _open = opened.opener();
                // The gate stays closed until a thread without it has gone past `wait`.
                let heard = heard.recv_timeout(std::time::Duration::from_secs(10));
                other_thread_went_on.store(heard.is_ok(), Ordering::SeqCst);
                recorded.store(true, Ordering::SeqCst);
            });
            behind(gate.clone(), || {
                scope.spawn(move || {
                    wait();
                    let _ = went_on.send(());
                });
                wait();
                assert!(recorded.load(Ordering::SeqCst));
            });
            recorder.join().unwrap();
        });
        assert!(other_thread_went_on.load(Ordering::SeqCst));
        // Outside `behind`, nothing waits.
        wait();
    }
}
