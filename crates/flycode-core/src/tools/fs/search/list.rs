//! The files below a directory as fs.search walks them, without searching them: ignore files,
//! hidden names, links never followed, every directory opened through its parent's handle (the
//! same [`DirWalk`], `walk.rs`). For tools that select files by a pattern (fs.readMany's globs); it
//! must not read the files it lists.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use super::order::LookaheadGate;
use super::walk::DirWalk;
use super::{Item, NameFilter, SearchJob};
use crate::sandbox::walk::{Start, WalkTarget, list};

/// What a listing found.
#[derive(Debug, Default)]
pub struct Listing {
    /// The files kept, in path order (names sorted, a directory's contents right after it).
    pub files: Vec<PathBuf>,
    /// Entries the walk could not read (skipped).
    pub unreadable: usize,
    /// Whether the listing stopped at its limit with more files left to keep.
    pub stopped: bool,
}

/// Lists the files below `start` (shown below `shown`) that `keep` accepts, in path order, up to
/// `limit` of them; stops early (with what it has) once `cancel` is set.
pub fn list_files(
    start: Start,
    shown: &Path,
    keep: &mut dyn FnMut(&Path) -> bool,
    limit: usize,
    cancel: Option<&AtomicBool>,
) -> io::Result<Listing> {
    let mut listing = Listing::default();
    let Start {
        target,
        ancestors,
        canonical,
        root,
        skip,
    } = start;
    let dir = match target {
        WalkTarget::Dir(dir) => dir,
        WalkTarget::File(_) => {
            if keep(shown) {
                listing.files.push(shown.to_path_buf());
            }
            return Ok(listing);
        }
    };
    let entries = list(&dir)?;
    let walk = DirWalk {
        dir,
        entries,
        ancestors,
        canonical,
        root,
        skip,
    };
    let names = NameFilter {
        glob: None,
        extensions: Vec::new(),
    };
    let gate = LookaheadGate::default();
    let (jobs, received) = mpsc::channel::<SearchJob>();
    thread::scope(|scope| -> io::Result<()> {
        let (names, gate) = (&names, &gate);
        thread::Builder::new()
            .name("fs.list".into())
            .spawn_scoped(scope, move || walk.run(shown, names, jobs, gate))?;
        for job in received.iter() {
            let end = job.first + job.items.len();
            for item in job.items {
                match item {
                    Item::File { path, .. } => {
                        if !keep(&path) {
                            continue;
                        }
                        if listing.files.len() == limit {
                            listing.stopped = true;
                            break;
                        }
                        listing.files.push(path);
                    }
                    Item::Unreadable => listing.unreadable += 1,
                    Item::Open { .. } => {}
                }
            }
            // The walk may run on: these files are dealt with (their directories closed).
            gate.advance(end);
            if listing.stopped || cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                break;
            }
        }
        // Wakes the walk if it waits for room, and ends it: nobody reads its items any more.
        gate.stop();
        Ok(())
    })?;
    Ok(listing)
}
