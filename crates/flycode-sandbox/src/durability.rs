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
use std::os::fd::AsFd;

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
    fn run(self, durability: Durability) -> io::Result<()> {
        match self {
            Flush::Data(file) => sync_data(file, durability),
            Flush::Dir(dir) => sync_dir(dir, durability),
        }
    }
}

/// The most threads [`sync_at_once`] flushes on.
const FLUSH_THREADS: usize = 8;

/// Flushes every one of `flushes` (under `full`), several at a time: a flush mostly waits for
/// the disk, and the disk takes flushes that arrive together as one (the block layer merges
/// the cache flushes queued while one is under way), so `n` independent flushes cost about what
/// one or two do rather than `n`. For flushes with no order between them; the first error, after
/// every flush has ended. Counted on the calling thread, as if it made them all.
pub fn sync_at_once(flushes: &[Flush<'_>], durability: Durability) -> io::Result<()> {
    if durability == Durability::Process || flushes.is_empty() {
        return Ok(());
    }
    if flushes.len() == 1 {
        return flushes[0].run(durability);
    }
    let threads = flushes.len().min(FLUSH_THREADS);
    let share = flushes.len().div_ceil(threads);
    let mut groups = flushes.chunks(share);
    let own = groups.next().unwrap_or_default();
    let run_group = move |group: &[Flush<'_>]| -> (usize, io::Result<()>) {
        let mut first_error = Ok(());
        for flush in group {
            if let Err(error) = flush.run(durability)
                && first_error.is_ok()
            {
                first_error = Err(error);
            }
        }
        (group.len(), first_error)
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = groups
            .map(|group| {
                std::thread::Builder::new()
                    .name("flycode-flush".to_owned())
                    .spawn_scoped(scope, move || run_group(group))
                    .map_err(|_| group)
            })
            .collect();
        let mut outcome = run_group(own).1;
        for other in others {
            let (count, result) = match other {
                Ok(thread) => thread.join().unwrap_or_else(|_| {
                    (
                        0,
                        Err(io::Error::other("a flushing thread stopped unexpectedly")),
                    )
                }),
                // No thread to be had: flushed here instead (counted here already).
                Err(group) => (0, run_group(group).1),
            };
            count::credit(count);
            if outcome.is_ok() {
                outcome = result;
            }
        }
        outcome
    })
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
