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
}
