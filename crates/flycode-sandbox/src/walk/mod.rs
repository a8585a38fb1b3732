//! Walking directories through handles, for the tools that go through a tree (fs.search,
//! fs.readMany, fs.ls): every directory is opened relative to the already-open handle of its
//! parent, one name at a time, never following a link (`openat` with `O_NOFOLLOW | O_DIRECTORY`
//! on Unix), and listed through its own handle (`entry.rs`); where the walk starts, and the
//! directories above it (`start.rs`); and which entries ripgrep's ignore rules hide (`rules.rs`:
//! `.rgignore`, `.ignore`, `.gitignore` inside a git repository, `.git/info/exclude`, the global
//! excludes), read through the same handles. A directory swapped for a link after it was listed
//! therefore fails to open instead of leading elsewhere. What a tool does with the entries (search
//! them, plan them, show them) is the tool's.

pub mod entry;
pub mod rules;
pub mod start;

use std::path::Path;
use std::sync::Arc;

use cap_std::fs::Dir;

pub use super::handles::{open_file, open_subdir};
pub use entry::{EntryKind, WalkEntry, list};
pub use rules::{Level, Markers, Rules};
pub use start::WalkTarget;
pub use start::{Start, open_dir_start};

/// The rules of the walk's first directory `dir` (shown as `shown`, its listing `entries`), on
/// top of those of the directories above it: where every walk begins deciding what to hide.
pub fn first_level(
    rules: &Rules,
    ancestors: Vec<(std::path::PathBuf, Dir)>,
    dir: &Dir,
    shown: &Path,
    entries: &[WalkEntry],
) -> Option<Arc<Level>> {
    let mut level = None;
    for (path, ancestor) in ancestors {
        level = rules.level(&ancestor, &path, &Markers::probe(&ancestor), true, level);
    }
    rules.level(dir, shown, &Markers::from_entries(entries), false, level)
}
