//! What a write flushes to the disk before it answers (PROTOCOL.md §9 (fs.write), "What is
//! synced"), and the one place that flushes: every `fsync`/`fdatasync` of a write, an edit, a
//! batch and a batch's journal record goes through [`sync_data`] or [`sync_dir`], so the setting
//! `durability` is obeyed everywhere and tests can count the flushes.
//!
//! - `full` (the default): the new content's data (`fdatasync` of the temporary file) before the
//!   rename, and the folder (`fsync`) after it: once the call has answered, the new file survives
//!   a power loss. A batch flushes its journal record before its first rename and each distinct
//!   folder once after its last.
//! - `process`: no flushes. The replacement is still one rename, so a killed flycode leaves the
//!   whole old file or the whole new one; after a power loss or an operating-system crash the
//!   file may be the old content, the new, or (on file systems that do not order data before
//!   renames) empty.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// How much a write flushes before it answers (`durability` in flycode.toml).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// The file's data and its folder are flushed: the write survives a power loss.
    #[default]
    Full,
    /// Nothing is flushed: atomic against a killed flycode, not against a power loss.
    Process,
}

impl Durability {
    /// The setting's word in flycode.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Process => "process",
        }
    }
}

/// Flushes a file's data (`fdatasync`) under `full`; nothing under `process`.
pub fn sync_data(file: impl AsFd, durability: Durability) -> io::Result<()> {
    if durability == Durability::Process {
        return Ok(());
    }
    count::add();
    rustix::fs::fdatasync(file).map_err(io::Error::from)
}

/// Flushes an open directory (`fsync`), so a rename in it survives a crash, under `full`;
/// nothing under `process`.
pub fn sync_dir(dir: impl AsFd, durability: Durability) -> io::Result<()> {
    if durability == Durability::Process {
        return Ok(());
    }
    count::add();
    rustix::fs::fsync(dir).map_err(io::Error::from)
}

/// What [`sync_at_once`] flushes: a file's data, or a folder.
#[derive(Clone, Copy, Debug)]
pub enum Flush<'a> {
    /// A file's data ([`sync_data`]).
    Data(std::os::fd::BorrowedFd<'a>),
    /// A folder ([`sync_dir`]).
    Dir(std::os::fd::BorrowedFd<'a>),
}

impl Flush<'_> {
    /// A descriptor of its own for the same file, for a kept thread.
    fn owned(&self) -> io::Result<OwnedFd> {
        match self {
            Flush::Data(fd) | Flush::Dir(fd) => fd.try_clone_to_owned(),
        }
    }

    fn run(self, durability: Durability) -> io::Result<()> {
        match self {
            Flush::Data(file) => sync_data(file, durability),
            Flush::Dir(dir) => sync_dir(dir, durability),
        }
    }
}

/// The threads [`sync_at_once`] hands flushes to, besides the caller's own.
static FLUSHERS: crate::workers::Workers = crate::workers::Workers::new("flycode-flush", 7);

/// Flushes every one of `flushes` (under `full`), several at a time: a flush mostly waits for
/// the disk, and the disk takes flushes that arrive together as one (the block layer merges
/// the cache flushes queued while one is under way), so `n` independent flushes cost about what
/// one or two do rather than `n`. For flushes with no order between them; the first error, after
/// every flush has ended. The caller makes its share; the rest go to kept threads
/// ([`crate::workers`]), each on its own copy of the descriptor. Counted on the calling thread,
/// as if it made them all.
pub fn sync_at_once(flushes: &[Flush<'_>], durability: Durability) -> io::Result<()> {
    if durability == Durability::Process || flushes.is_empty() {
        return Ok(());
    }
    let groups = flushes.len().min(FLUSHERS_AND_CALLER);
    let share = flushes.len().div_ceil(groups);
    let mut chunks = flushes.chunks(share);
    let own = chunks.next().unwrap_or_default();
    let ended = Arc::new(HandedFlushes::default());
    let mut outcome = Ok(());
    for group in chunks {
        let owned: io::Result<Vec<(OwnedFd, bool)>> = group
            .iter()
            .map(|flush| flush.owned().map(|fd| (fd, matches!(flush, Flush::Dir(_)))))
            .collect();
        let handed = owned.ok().and_then(|owned| {
            ended.expect(1);
            let ended_here = Arc::clone(&ended);
            let job: crate::workers::KeptJob = Box::new(move || {
                // Ends the job however it stops, so that the caller never waits for it forever.
                let mut ending = Ending(ended_here, Ok(()));
                for (fd, dir) in &owned {
                    let flushed = if *dir {
                        sync_dir(fd, durability)
                    } else {
                        sync_data(fd, durability)
                    };
                    if ending.1.is_ok() {
                        ending.1 = flushed;
                    }
                }
            });
            match FLUSHERS.run(job) {
                Ok(()) => Some(()),
                Err(_) => {
                    ended.end(Ok(()));
                    None
                }
            }
        });
        if handed.is_some() {
            count::credit(group.len());
        } else {
            // No copy of a descriptor, or no thread: flushed here.
            for flush in group {
                outcome = outcome.and(flush.run(durability));
            }
        }
    }
    for flush in own {
        outcome = outcome.and(flush.run(durability));
    }
    outcome.and(ended.wait())
}

/// The most flushes [`sync_at_once`] has under way at once: its kept threads and its caller.
const FLUSHERS_AND_CALLER: usize = 8;

/// Ends a job handed to a kept thread, with its outcome, when dropped.
struct Ending(Arc<HandedFlushes>, io::Result<()>);

impl Drop for Ending {
    fn drop(&mut self) {
        let outcome = std::mem::replace(&mut self.1, Ok(()));
        self.0.end(outcome);
    }
}

/// The flushes handed to kept threads that have not ended yet, and the first error of those
/// that have.
#[derive(Default)]
struct HandedFlushes {
    state: Mutex<(usize, Option<io::Error>)>,
    all: Condvar,
}

impl HandedFlushes {
    fn expect(&self, jobs: usize) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0 += jobs;
    }

    fn end(&self, result: io::Result<()>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_sub(1);
        if let (Err(error), None) = (result, &state.1) {
            state.1 = Some(error);
        }
        self.all.notify_all();
    }

    fn wait(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.0 > 0 {
            state = self.all.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.1.take().map_or(Ok(()), Err)
    }
}

/// The flushes this thread made, for tests (a write runs on the caller's thread): this crate's
/// and, with the `test-support` feature, its dependents'.
#[cfg(any(test, feature = "test-support"))]
pub mod count {
    use std::cell::Cell;

    thread_local! {
        static SYNCS: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) fn add() {
        SYNCS.with(|syncs| syncs.set(syncs.get() + 1));
    }

    /// Counts on this thread `flushes` made on threads it waited for.
    pub(super) fn credit(flushes: usize) {
        SYNCS.with(|syncs| syncs.set(syncs.get() + flushes));
    }

    /// The flushes `run` made on this thread.
    pub fn during(run: impl FnOnce()) -> usize {
        let before = SYNCS.with(Cell::get);
        run();
        SYNCS.with(Cell::get) - before
    }
}

#[cfg(not(any(test, feature = "test-support")))]
mod count {
    pub(super) fn add() {}
    pub(super) fn credit(_flushes: usize) {}
}
