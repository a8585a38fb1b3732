//! Journal record files kept for this process's next write (PROTOCOL.md §11 Security, "After a
//! crash"). A record lives in `STATE/journal/` only while its operation runs; between
//! operations its file waits, empty of meaning, in `STATE/journal-spare/`, open and locked, and
//! the next operation writes its record there and renames it into the journal. So a door that
//! writes all day makes a record file once (once per write running at the same moment), not
//! once per write: on a file system that does not reuse a freed inode for a while (ext4 without
//! a journal), every file made and removed makes the next minute's new files slower, for every
//! program on that disk.
//!
//! A spare file is named like a record (`PID-START-K.json`), so that the next start of flycode
//! removes the spares of a process that is gone ([`remove_dead_owners`]); a door removes its own
//! when it exits ([`release`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The folder of the spare record files, inside the state directory (beside the journal, not in
/// it: the journal holds records of operations under way and nothing else).
const SPARE_DIR: &str = "journal-spare";

/// A record file between two operations: its name in the spare folder, and the handle that
/// holds its lock for the process's life.
#[derive(Debug)]
pub(crate) struct Spare {
    /// Where it waits while no operation uses it.
    pub(crate) path: PathBuf,
    /// Open, and locked exclusively: a recovering flycode leaves a locked record alone.
    pub(crate) file: File,
}

/// This process's spare files.
static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// A spare file of `state`, made (empty and locked) where none waits.
pub(crate) fn take(state: &Path) -> std::io::Result<Spare> {
    let dir = state.join(SPARE_DIR);
    {
        let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = spares
            .iter()
            .position(|spare| spare.path.parent() == Some(&dir))
        {
            return Ok(spares.swap_remove(at));
        }
    }
    std::fs::create_dir_all(&dir)?;
    static MADE: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        "{}-{}-{}.json",
        std::process::id(),
        super::record_owner::own_start_time(),
        MADE.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(Spare { path, file })
}

/// Gives a spare file back for the next operation, once it is under its spare name again.
pub(crate) fn give_back(spare: Spare) {
    SPARES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(spare);
}

/// Removes this process's spare files: a door calls it as it exits.
pub fn release() {
    let spares = std::mem::take(&mut *SPARES.lock().unwrap_or_else(PoisonError::into_inner));
    for spare in spares {
        let _ = std::fs::remove_file(&spare.path);
    }
}

/// Removes the spare files of processes that are gone (killed, or ended without [`release`]).
pub(crate) fn remove_dead_owners(state: &Path) {
    let Ok(entries) = std::fs::read_dir(state.join(SPARE_DIR)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = super::record_owner::owner_of(&name.to_string_lossy()) else {
            continue;
        };
        if super::record_owner::owner_is_alive(pid, start) {
            continue;
        }
        // Locked, it is a live process's after all (one of another pid namespace sharing the
        // state directory): left to it.
        let unlocked = super::record_owner::open_record(&entry.path()).is_some();
        if unlocked {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
