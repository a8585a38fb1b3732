//! One directory's entries, listed through its open handle: each with its name and what the
//! listing says it is (a link is never looked through). The walks of fs.search, fs.readMany and
//! fs.ls all list directories this way.

use std::ffi::OsString;
use std::io;

use cap_std::fs::Dir;

/// What a directory entry is, as its directory listing says (a link is never looked through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Link,
    /// A FIFO, socket or device.
    Other,
}

impl EntryKind {
    /// The kind of an entry of `file_type`.
    pub fn of(file_type: &cap_std::fs::FileType) -> EntryKind {
        if file_type.is_symlink() {
            EntryKind::Link
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// One entry of a directory listing; `kind` is `None` when the entry could not be read.
pub struct WalkEntry {
    /// Its name in its directory.
    pub name: OsString,
    /// What it is.
    pub kind: Option<EntryKind>,
}

/// A directory's entries through its handle, sorted by name (entries that could not be read
/// first, as `walkdir` sorts them).
pub fn list(dir: &Dir) -> io::Result<Vec<WalkEntry>> {
    let mut entries = Vec::new();
    for entry in dir.entries()? {
        entries.push(match entry {
            Ok(entry) => {
                let name = entry.file_name();
                let kind = match entry.file_type() {
                    Ok(t) if t.is_file() || t.is_dir() || t.is_symlink() => Some(EntryKind::of(&t)),
                    // The listing did not say (or said something rare): ask without following.
                    _ => dir
                        .symlink_metadata(&name)
                        .ok()
                        .map(|m| EntryKind::of(&m.file_type())),
                };
                WalkEntry { name, kind }
            }
            Err(_) => WalkEntry {
                name: OsString::new(),
                kind: None,
            },
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
